"""Open Protocol's values: the JSON value in a column's "v", as conversion tables.

Two dialects (:class:`~ticdc_spark.codec.convert.Dialect`): :data:`CURRENT`, what TiCDC
v5.x-v8.x writes, and :data:`LEGACY`, the layout of TiCDC v4.0.0-v4.0.4 (columns without
"f", CHAR/VARCHAR as base64 of the raw bytes).  Numbers are JSON numbers, the TEXT and BLOB
type codes (``types.BLOB_CODES``, shared by both families) carry base64, BINARY/VARBINARY a
Go-quoted string, and the rest MySQL's text form.  Where the family alone does not decide (a
STRING or BYTES column), the factory looks the column's type code up (``types.TYPE_CODE``).

The compiled loops (``codec.compiled``) take each column as a kind plus the Python converter:
:data:`DECODE_KINDS` names the kinds of this module's own decoders and texts,
:func:`encode_kind` the kind of an encoder.
"""

from __future__ import annotations

import binascii
import math
from decimal import Decimal
from typing import Any

import orjson

from ticdc_spark.codec.compiled import (
    BASE64,
    BASE64_TEXT,
    CALL,
    DECIMAL,
    DOUBLE,
    FLOAT32,
    GO_QUOTED,
    INT,
    INT_TEXT,
    STR,
    text_kind,
)
from ticdc_spark.codec.convert import (
    MYSQL_TEXT_DECODERS,
    MYSQL_TEXT_ENCODERS,
    Converter,
    Dialect,
    Factory,
    constant,
)
from ticdc_spark.codec.gotext import go_json_float, go_quote, go_unquote
from ticdc_spark.codec.open_protocol.wire import expect_str, type_code
from ticdc_spark.errors import DecodeError
from ticdc_spark.types import BLOB_CODES, ColumnType, Family, parse_decimal, to_float32

__all__ = ["CURRENT", "DECODE_KINDS", "LEGACY", "WRITTEN_AS_IS", "encode_kind"]

_WHOLE_NUMBERS = (Family.INTEGER, Family.YEAR, Family.ENUM, Family.SET, Family.BIT)


def _by_code(blob: Factory, other: Factory) -> Factory:
    """A factory for the STRING and BYTES families: TEXT and BLOB type codes go one way,
    CHAR/VARCHAR/BINARY/VARBINARY the other."""

    def factory(ctype: ColumnType) -> Converter:
        return (blob if type_code(ctype) in BLOB_CODES else other)(ctype)

    return factory


# --------------------------------------------------------------------------------------------
# Canonical -> wire


def _identity(value: Any) -> Any:
    return value


def _json_float(value: float, bits: int) -> orjson.Fragment:
    if not math.isfinite(value):  # (Go's encoding/json refuses them too; TiDB stores none)
        raise ValueError(f"{value!r} cannot be written as a JSON number")  # named by encode()
    return orjson.Fragment(go_json_float(value, bits))


def _json_float32(value: float) -> orjson.Fragment:
    return _json_float(value, 32)


def _json_float64(value: float) -> orjson.Fragment:
    return _json_float(value, 64)


def _to_base64(value: bytes) -> str:
    return binascii.b2a_base64(value, newline=False).decode("ascii")


def _text_to_base64(value: str) -> str:
    return _to_base64(value.encode("utf-8"))


def _unknown_to_wire(value: Any) -> Any:
    """A type TiDB added later: its bytes as Latin-1 text, anything else as is."""
    return value.decode("latin-1") if isinstance(value, bytes) else value


_ENCODERS: dict[Family, Factory] = {
    **MYSQL_TEXT_ENCODERS,  # DECIMAL, DATE, DATETIME, TIME, JSON: MySQL text
    **dict.fromkeys(_WHOLE_NUMBERS, constant(_identity)),
    Family.FLOAT: constant(_json_float32),
    Family.DOUBLE: constant(_json_float64),
    Family.STRING: _by_code(constant(_text_to_base64), MYSQL_TEXT_ENCODERS[Family.STRING]),
    Family.BYTES: _by_code(constant(_to_base64), constant(go_quote)),
    Family.UNKNOWN: constant(_unknown_to_wire),
}

# The encoder the encoder's Python loop skips (the value is written as is).
WRITTEN_AS_IS = _identity

# The compiled kinds of the encoders above that are not MySQL's text formatters.
_ENCODE_KINDS: dict[Any, int] = {
    _identity: INT,
    _json_float32: FLOAT32,
    _json_float64: DOUBLE,
    _to_base64: BASE64,
    _text_to_base64: BASE64_TEXT,
    go_quote: GO_QUOTED,
    _unknown_to_wire: CALL,
}


def encode_kind(ctype: ColumnType, encode: Converter) -> tuple[int, int]:
    """(kind, fsp) telling compiled_values.column_object what ``encode`` does."""
    kind = _ENCODE_KINDS.get(encode)
    return text_kind(ctype) if kind is None else (kind, 0)


# --------------------------------------------------------------------------------------------
# Wire -> canonical


def _lenient_int(value: Any) -> Any:
    """An integer; a string that is not one is kept as written (hand-made producers such as
    TiCDC's own Java example data put strings in integer columns)."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DecodeError(f"expected an integer, got {value!r}")


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return float(value)
    raise DecodeError(f"expected a number, got {value!r}")


def _float32_number(value: Any) -> float:
    return to_float32(_number(value))


def _decimal_value(value: Any) -> Decimal:
    return parse_decimal(value) if isinstance(value, str) else Decimal(str(value))


def _from_base64(value: Any) -> bytes:
    return binascii.a2b_base64(value, strict_mode=True)  # TypeError unless str (JSON: no bytes)


def _text_from_base64(value: Any) -> str:
    return _from_base64(value).decode("utf-8")


def _from_go_quoted(value: Any) -> bytes:
    return go_unquote(expect_str(value))


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


_DECODERS: dict[Family, Factory] = {
    **MYSQL_TEXT_DECODERS,  # DATE, DATETIME, TIME: a value that is not a string fails (TypeError)
    **dict.fromkeys(_WHOLE_NUMBERS, constant(_lenient_int)),
    Family.FLOAT: constant(_float32_number),
    Family.DOUBLE: constant(_number),
    Family.DECIMAL: constant(_decimal_value),
    Family.STRING: _by_code(constant(_text_from_base64), constant(expect_str)),
    Family.BYTES: _by_code(constant(_from_base64), constant(_from_go_quoted)),
    Family.JSON: constant(_json_text),
    Family.UNKNOWN: constant(_identity),
}


# --------------------------------------------------------------------------------------------
# Wire -> changelog text: the wire's own text where it has it (the Spark decode stage's fast
# path; the changelog sink checks the values)


def _int_text(value: Any) -> str:
    return str(value) if type(value) is int else str(_lenient_int(value))


def _number_text(value: Any) -> str:
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value)
    return repr(_number(value))


def _quoted_to_base64(value: Any) -> str:
    return _to_base64(go_unquote(expect_str(value)))


def _printed(value: Any) -> str:
    """The text of a type TiDB added later: as the wire has it."""
    return str(value)


_TEXTS: dict[Family, Factory] = {
    **dict.fromkeys(_WHOLE_NUMBERS, constant(_int_text)),
    **dict.fromkeys((Family.FLOAT, Family.DOUBLE), constant(_number_text)),
    **dict.fromkeys(
        (Family.DECIMAL, Family.DATE, Family.DATETIME, Family.TIME), constant(expect_str)
    ),
    Family.STRING: _by_code(constant(_text_from_base64), constant(expect_str)),
    Family.BYTES: _by_code(constant(expect_str), constant(_quoted_to_base64)),
    Family.JSON: constant(_json_text),
    Family.UNKNOWN: constant(_printed),
}

CURRENT = Dialect("open-protocol", _DECODERS, _ENCODERS, _TEXTS)


# --------------------------------------------------------------------------------------------
# TiCDC v4.0.0-v4.0.4: CHAR/VARCHAR/BINARY/VARBINARY as base64 of the raw bytes (Go []byte)


def _legacy_string(value: Any) -> str | bytes:
    """A CHAR/VARCHAR value of the legacy layout.

    Values filled from a column default were plain strings then, so text that is not base64
    is kept as written; decoded bytes that are not UTF-8 stay bytes.
    """
    text = expect_str(value)
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return text
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _legacy_string_text(value: Any) -> str:
    return str(_legacy_string(value))


def _legacy_bytes_text(value: Any) -> str:
    decoded = _legacy_string(value)
    return _to_base64(decoded) if isinstance(decoded, bytes) else decoded


LEGACY = CURRENT.derive(
    "open-protocol v4.0.0-v4.0.4",
    decoders={
        Family.STRING: _by_code(constant(_text_from_base64), constant(_legacy_string)),
        Family.BYTES: _by_code(constant(_from_base64), constant(_legacy_string)),
    },
    texts={
        Family.STRING: _by_code(constant(_text_from_base64), constant(_legacy_string_text)),
        Family.BYTES: _by_code(constant(expect_str), constant(_legacy_bytes_text)),
    },
)

# The compiled kinds of this module's own decoders and texts (each agrees with its kind's
# strict syntax on every value it accepts).
DECODE_KINDS = {
    expect_str: STR,
    _lenient_int: INT,
    _int_text: INT_TEXT,
    _float32_number: FLOAT32,
    _number: DOUBLE,
    _decimal_value: DECIMAL,
    _from_base64: BASE64,
    _text_from_base64: BASE64_TEXT,
    _from_go_quoted: GO_QUOTED,
}
# The decoders the decoder's Python loop reads inline (see decoder._python_image).
STRING_DECODER, INTEGER_DECODER = expect_str, _lenient_int
