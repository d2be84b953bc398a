"""How the Avro protocol writes MySQL values: the Avro datum of each family, as TiCDC's
``columnToAvroData`` writes it, and back.

Integers, YEAR, FLOAT and DOUBLE are Avro numbers; strings, JSON and the temporal types are
Avro strings (MySQL text); binary values are Avro bytes; ENUM is its member's name and SET
its members joined by commas; BIT is its value's big-endian bytes without leading zero
bytes (one byte for 0).  DECIMAL is ``bytes`` with the decimal logical type (``precise``,
fastavro converts :class:`~decimal.Decimal`) or its text (``string``).  BIGINT UNSIGNED is a
``long`` holding the value's 64 bits as a signed number (``long``, as TiCDC's Go cast
writes it: values above 2**63-1 read back negative and are corrected here from the column's
``tidb_type``), or its decimal text (``string``).
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, Context, Decimal
from typing import Any

from ticdc_spark.codec.convert import MYSQL_TEXT_DECODERS, MYSQL_TEXT_ENCODERS, Converter, Dialect
from ticdc_spark.codec.convert import constant as _constant
from ticdc_spark.types import ColumnType, Family, int64_cast, to_float32

__all__ = ["dialect_for"]

_U64 = 1 << 64
_WIDE = Context(prec=200)  # DECIMAL has up to 65 digits: more than the default context's 28


def _same(value: Any) -> Any:
    return value


def _is_bigint_unsigned(ctype: ColumnType) -> bool:
    return ctype.name == "bigint" and ctype.unsigned


# -- canonical value -> Avro datum --------------------------------------------------------------


def _integer_long(ctype: ColumnType) -> Converter:
    return int64_cast if _is_bigint_unsigned(ctype) else _same


def _integer_string(ctype: ColumnType) -> Converter:
    return str if _is_bigint_unsigned(ctype) else _same


def _decimal_precise(ctype: ColumnType) -> Converter:
    # goavro scales a big.Rat to the schema's scale by integer division (a floor)
    scale = ctype.decimal or 0
    exponent = Decimal(1).scaleb(-scale)

    def encode(value: Decimal) -> Decimal:
        if value.as_tuple().exponent >= -scale:  # type: ignore[operator]  # (finite)
            return value  # fastavro scales it up exactly
        return value.quantize(exponent, rounding=ROUND_FLOOR, context=_WIDE)

    return encode


def _enum_name(ctype: ColumnType) -> Converter:
    def encode(index: int) -> str:
        name = ctype.enum_name(index)
        if name is None:
            raise ValueError(f"ENUM index {index} is not a member of {ctype.sql()}")
        return name

    return encode


def _set_names(ctype: ColumnType) -> Converter:
    def encode(bits: int) -> str:
        names = ctype.set_names(bits)
        if names is None:
            raise ValueError(f"SET bits {bits:#x} are not members of {ctype.sql()}")
        return ",".join(names)

    return encode


def _bit_bytes(value: int) -> bytes:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


# -- Avro datum -> canonical value --------------------------------------------------------------


def _unwrap_u64(value: int) -> int:
    return value + _U64 if value < 0 else value


def _integer_from_long(ctype: ColumnType) -> Converter:
    return _unwrap_u64 if _is_bigint_unsigned(ctype) else _same


def _integer_from_string(ctype: ColumnType) -> Converter:
    return int if _is_bigint_unsigned(ctype) else _same


def _decimal_from_bytes(value: Decimal) -> Decimal:
    if not isinstance(value, Decimal):
        raise TypeError(f"a precise DECIMAL is Avro bytes.decimal, got {type(value).__name__}")
    return value


def _enum_index(ctype: ColumnType) -> Converter:
    def decode(name: str) -> int:
        index = 0 if name == "" else ctype.enum_index(name)
        if index is None:
            raise ValueError(f"{name!r} is not a member of {ctype.sql()}")
        return index

    return decode


def _set_bits(ctype: ColumnType) -> Converter:
    def decode(names: str) -> int:
        bits = ctype.set_bits(names)
        if bits is None:
            raise ValueError(f"{names!r} are not members of {ctype.sql()}")
        return bits

    return decode


def _bit_value(value: bytes) -> int:
    if len(value) > 8:
        raise ValueError(f"a BIT value has at most 8 bytes, got {len(value)}")
    return int.from_bytes(value, "big")


def _checked(kind: type, wire: str) -> Converter:
    def decode(value: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(f"expected Avro {wire}, got {type(value).__name__}")
        return value

    return decode


_AS_IS = {
    Family.STRING: _constant(_checked(str, "string")),
    Family.BYTES: _constant(_checked(bytes, "bytes")),
    Family.JSON: _constant(_checked(str, "string")),
    Family.YEAR: _constant(_checked(int, "int")),
    Family.DOUBLE: _constant(_checked(float, "double")),
}

_ENCODERS = {
    **MYSQL_TEXT_ENCODERS,  # DATE, DATETIME, TIME (and UNKNOWN) as MySQL text
    Family.INTEGER: _integer_long,
    Family.FLOAT: _constant(_same),
    Family.DOUBLE: _constant(_same),
    Family.DECIMAL: _decimal_precise,
    Family.STRING: _constant(_same),
    Family.BYTES: _constant(_same),
    Family.YEAR: _constant(_same),
    Family.ENUM: _enum_name,
    Family.SET: _set_names,
    Family.BIT: _constant(_bit_bytes),
    Family.JSON: _constant(_same),
}

_DECODERS = {
    **MYSQL_TEXT_DECODERS,
    **_AS_IS,
    Family.INTEGER: _integer_from_long,
    Family.FLOAT: _constant(to_float32),
    Family.DECIMAL: _constant(_decimal_from_bytes),
    Family.ENUM: _enum_index,
    Family.SET: _set_bits,
    Family.BIT: _constant(_bit_value),
}


def _wire_text(ctype: ColumnType) -> Converter:
    """The changelog text of a temporal value: the MySQL text TiCDC wrote, as written (its
    fsp digits kept, which the writer schema does not say), once it parses."""
    parse = MYSQL_TEXT_DECODERS[ctype.family](ctype)

    def text(value: str) -> str:
        parse(value)
        return value

    return text


_TEMPORAL = (Family.DATE, Family.DATETIME, Family.TIME)
_PRECISE_LONG = Dialect("avro", _DECODERS, _ENCODERS).derive(
    "avro", texts=dict.fromkeys(_TEMPORAL, _wire_text)
)
_DIALECTS = {
    ("precise", "long"): _PRECISE_LONG,
    ("string", "long"): _PRECISE_LONG.derive(
        "avro-decimal-string",
        decoders={Family.DECIMAL: MYSQL_TEXT_DECODERS[Family.DECIMAL]},
        encoders={Family.DECIMAL: MYSQL_TEXT_ENCODERS[Family.DECIMAL]},
    ),
}
for _decimal, _base in list(_DIALECTS.items()):
    _DIALECTS[(_decimal[0], "string")] = _base.derive(
        f"{_base.name}-bigint-string",
        decoders={Family.INTEGER: _integer_from_string},
        encoders={Family.INTEGER: _integer_string},
    )


def _text_as_is(value: str) -> str:
    return value


def _text_of_int(value: int) -> str:
    return str(value)


# The changelog text straight from the Avro datum where that is a plain step (the text of
# the canonical value, without building it); fastavro has checked the datum's type against
# the writer schema, and the writer schema's types against its tidb_type (schema.read_field).
_DIRECT_TEXTS = {
    Family.STRING: _constant(_text_as_is),
    Family.JSON: _constant(_text_as_is),
    Family.YEAR: _constant(_text_of_int),
}
for _name, _dialect in list(_DIALECTS.items()):
    _direct = dict(_DIRECT_TEXTS)
    if _name[1] == "string":
        _direct[Family.INTEGER] = lambda ctype: _text_as_is if _is_bigint_unsigned(ctype) else str
    else:
        _direct[Family.INTEGER] = lambda ctype: (
            (lambda v: str(_unwrap_u64(v))) if _is_bigint_unsigned(ctype) else str
        )
    if _name[0] == "string":
        _direct[Family.DECIMAL] = _wire_text
    _DIALECTS[_name] = _dialect.derive(_dialect.name, texts=_direct)


def dialect_for(decimal_mode: str, bigint_unsigned_mode: str) -> Dialect:
    """The dialect of ``avro-decimal-handling-mode`` and ``avro-bigint-unsigned-handling-mode``."""
    return _DIALECTS[(decimal_mode, bigint_unsigned_mode)]
