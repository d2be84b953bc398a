"""How the Simple protocol writes each MySQL type, in its two encodings.

JSON (TiCDC's ``encodeValue``): every value is a string in MySQL's text form (integers,
ENUM indexes, SET bitmasks and BIT as decimal numbers; FLOAT/DOUBLE positional shortest
digits), binary values base64, and a TIMESTAMP the object ``{"location": tz, "value":
text}``, ``tz`` being the changefeed's time zone.  That is :data:`~convert.NORMALIZED`'s text
but for the TIMESTAMP object, so the changelog text of a JSON value is the value itself.

Avro (TiCDC's ``encodeValue4Avro``): each value is a branch of the union ``null, long,
float, double, string, bytes, Timestamp, UnsignedBigint``: integers, YEAR, ENUM, SET and
BIT as ``long`` (BIT(64) and BIGINT UNSIGNED past 2**63 wrap to negative: TiCDC casts
uint64 to int64), except BIGINT UNSIGNED as the ``UnsignedBigint`` record; FLOAT
``float``; DOUBLE ``double``; binary ``bytes``; TIMESTAMP the ``Timestamp`` record; the rest
(DECIMAL, temporal, text, JSON) their text as ``string``.  The Avro encoder's values are
``(branch, value)`` pairs, fastavro's union notation.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ticdc_spark.codec.convert import FAMILIES, NORMALIZED, Converter, Dialect, constant
from ticdc_spark.types import ColumnType, Family, int64_cast, to_float32

__all__ = [
    "LONG",
    "STRING",
    "TIMESTAMP_RECORD",
    "UNSIGNED_RECORD",
    "avro_dialect",
    "is_timestamp",
    "json_dialect",
    "timestamp_text",
]

TIMESTAMP_RECORD = "com.pingcap.simple.avro.Timestamp"
UNSIGNED_RECORD = "com.pingcap.simple.avro.UnsignedBigint"
LONG, STRING = "long", "string"
_U64 = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def is_timestamp(ctype: ColumnType) -> bool:
    return ctype.name == "timestamp"


def timestamp_text(value: Any) -> str:
    """The text of a TIMESTAMP value: ``{"location", "value"}`` (or plain text, leniently)."""
    if type(value) is dict:
        value = value["value"]
    if type(value) is not str:
        raise ValueError(f"a TIMESTAMP must be {{'location', 'value'}}, got {value!r}")
    return value


def _same(value: Any) -> Any:
    return value


# -- JSON -------------------------------------------------------------------------------------


def _json_datetime_decoder(ctype: ColumnType) -> Converter:
    parse = NORMALIZED.decoder(ctype)
    if not is_timestamp(ctype):
        return parse
    return lambda value: parse(timestamp_text(value))


def _json_datetime_text(ctype: ColumnType) -> Converter:
    return timestamp_text if is_timestamp(ctype) else _same


@lru_cache(maxsize=64)
def json_dialect(location: str) -> Dialect:
    """The JSON encoding's values, TIMESTAMPs located in time zone ``location``."""

    def datetime_encoder(ctype: ColumnType) -> Converter:
        text = NORMALIZED.encoder(ctype)
        if not is_timestamp(ctype):
            return text
        return lambda value: {"location": location, "value": text(value)}

    return Dialect(
        "simple-json",
        {**NORMALIZED.decoders, Family.DATETIME: _json_datetime_decoder},
        {**NORMALIZED.encoders, Family.DATETIME: datetime_encoder},
        {**dict.fromkeys(FAMILIES, constant(_same)), Family.DATETIME: _json_datetime_text},
    )


# -- Avro -------------------------------------------------------------------------------------


def _checked_long(value: Any) -> int:
    if type(value) is not int or not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"expected a 64-bit integer, got {value!r}")
    return value


def _unsigned_long(value: Any) -> int:
    """An unsigned value sent as a long or the UnsignedBigint record, back to its uint64."""
    if type(value) is dict:
        value = value["value"]
    return _checked_long(value) & _U64


def _avro_integer_encoder(ctype: ColumnType) -> Converter:
    if ctype.name == "bigint" and ctype.unsigned:
        return lambda value: (UNSIGNED_RECORD, {"value": int64_cast(value)})
    return lambda value: (LONG, value)


def _avro_integer_decoder(ctype: ColumnType) -> Converter:
    return _unsigned_long if ctype.unsigned else _checked_long


def _long_encoder(ctype: ColumnType) -> Converter:
    return lambda value: (LONG, int64_cast(value))


def _text_encoder(ctype: ColumnType) -> Converter:
    text = NORMALIZED.encoder(ctype)
    return lambda value: (STRING, text(value))


def _text_decoder(ctype: ColumnType) -> Converter:
    parse = NORMALIZED.decoder(ctype)

    def decode(value: Any) -> Any:
        if type(value) is not str:
            raise ValueError(f"expected a string, got {value!r}")
        return parse(value)

    return decode


def _avro_datetime_encoder(location: str) -> Any:
    def factory(ctype: ColumnType) -> Converter:
        text = NORMALIZED.encoder(ctype)
        if not is_timestamp(ctype):
            return lambda value: (STRING, text(value))
        return lambda value: (TIMESTAMP_RECORD, {"location": location, "value": text(value)})

    return factory


def _avro_datetime_decoder(ctype: ColumnType) -> Converter:
    parse = NORMALIZED.decoder(ctype)
    if not is_timestamp(ctype):
        return _text_decoder(ctype)
    return lambda value: parse(timestamp_text(value))


def _float_value(value: Any) -> float:
    if type(value) is not float:
        raise ValueError(f"expected a float, got {value!r}")
    return value


def _float32_value(value: Any) -> float:
    return to_float32(_float_value(value))


def _bytes_value(value: Any) -> bytes:
    if type(value) is not bytes:
        raise ValueError(f"expected bytes, got {value!r}")
    return value


def _string_value(value: Any) -> str:
    if type(value) is not str:
        raise ValueError(f"expected a string, got {value!r}")
    return value


@lru_cache(maxsize=64)
def avro_dialect(location: str) -> Dialect:
    """The Avro encoding's values (encoders give fastavro's ``(branch, value)``)."""
    whole_numbers = (Family.YEAR, Family.ENUM, Family.SET, Family.BIT)
    texts = (Family.DECIMAL, Family.DATE, Family.TIME, Family.UNKNOWN)
    decoders = {
        **dict.fromkeys(texts, _text_decoder),
        **dict.fromkeys(whole_numbers, constant(_unsigned_long)),
        Family.INTEGER: _avro_integer_decoder,
        Family.FLOAT: constant(_float32_value),
        Family.DOUBLE: constant(_float_value),
        Family.STRING: constant(_string_value),
        Family.JSON: constant(_string_value),
        Family.BYTES: constant(_bytes_value),
        Family.DATETIME: _avro_datetime_decoder,
    }
    encoders = {
        **dict.fromkeys(texts, _text_encoder),
        **dict.fromkeys(whole_numbers, _long_encoder),
        Family.INTEGER: _avro_integer_encoder,
        Family.FLOAT: constant(lambda value: ("float", value)),
        Family.DOUBLE: constant(lambda value: ("double", value)),
        Family.STRING: constant(lambda value: (STRING, value)),
        Family.JSON: constant(lambda value: (STRING, value)),
        Family.BYTES: constant(lambda value: ("bytes", value)),
        Family.DATETIME: _avro_datetime_encoder(location),
    }
    return Dialect("simple-avro", decoders, encoders)
