"""The Debezium dialect: how TiCDC's Debezium protocol writes each MySQL type as a JSON value.

TiCDC follows Debezium's MySQL type mapping (shared/spec/debezium-protocol.ja.md,
REFERENCE.md "Debezium"; TiCDC's ``pkg/sink/codec/debezium/codec.go``):

=================  ===========================================================================
family             JSON value
=================  ===========================================================================
integers, YEAR     a number; BIGINT UNSIGNED over 2^63-1 as its two's complement int64
                   (18446744073709551615 is -1)
FLOAT              the float32's shortest text; DOUBLE a number; DECIMAL a double (lossy)
CHAR/TEXT, JSON    the string; binary strings and BLOBs as base64
DATE               int32 days since 1970-01-01 (io.debezium.time.Date)
DATETIME           int64 ms since the epoch (fsp <= 3 or unknown, io.debezium.time.Timestamp) or µs
                   (io.debezium.time.MicroTimestamp), the wall clock read as UTC
TIMESTAMP          ISO text in UTC with ``Z`` and exactly fsp digits (ZonedTimestamp)
TIME               int64 µs (io.debezium.time.MicroTime)
ENUM, SET          member names (``a``, ``a,b``); an invalid value (ENUM 0) is ``""``
BIT(1)             a boolean; BIT(n) base64 of the value's little-endian bytes, (n+7)/8 of
                   them (io.debezium.data.Bits)
=================  ===========================================================================

Like Debezium's MySQL connector, TiCDC adjusts two-digit years (``0018`` is 2018, ``0099``
1999) and writes NULL for a date its calendar refuses (month or day 0), 0 when the column is
NOT NULL; a TIMESTAMP before 1970-01-01 00:00:01 is written ``1970-01-01T00:00:00Z``.
:func:`carried` says what of a canonical value survives all that.

The ``decoders`` table reads what TiCDC writes for a column type; genuine Debezium's other
representations (Connect Decimal bytes, connect time precision, nanoseconds, ...) are chosen
by the field's Connect schema name in :mod:`.connect`, which falls back to this table.
"""

from __future__ import annotations

import binascii
import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ticdc_spark.codec.convert import FAMILIES, Converter, Dialect, constant
from ticdc_spark.types import ColumnType, Family, ZeroDate, format_float32, int64_cast, to_float32

__all__ = [
    "DEBEZIUM",
    "EPOCH",
    "EPOCH_DATE",
    "base64_bytes",
    "bits_from_bytes",
    "carried",
    "days_to_date",
    "exact_decimal",
    "micros_to_datetime",
    "micros_to_time",
]

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)
_MIN_TIMESTAMP = dt.datetime(1970, 1, 1, 0, 0, 1)
_ZERO_TIMESTAMP_TEXT = "1970-01-01T00:00:00Z"
_INT64 = 1 << 64
_MICROS = dt.timedelta(microseconds=1)


def base64_text(value: bytes) -> str:
    return binascii.b2a_base64(value, newline=False).decode("ascii")


def base64_bytes(text: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"expected base64 text, got {type(text).__name__}")
    return binascii.a2b_base64(text, strict_mode=True)


# -- calendar rules ------------------------------------------------------------------------------


def _adjusted(value: dt.date | dt.datetime | ZeroDate) -> dt.datetime | None:
    """The calendar time TiCDC writes for a DATE/DATETIME value: two-digit years moved to
    1970-2069, None for what Go's calendar refuses (month or day 0)."""
    if isinstance(value, ZeroDate):
        if value.year != 0:  # (a zero month or day)
            return None
        try:  # year 0 is a leap year, like 2000, which it becomes
            value = dt.datetime(2000, *value[1:])
        except ValueError:
            return None
    if type(value) is dt.date:
        value = dt.datetime(value.year, value.month, value.day)
    assert isinstance(value, dt.datetime)
    year = value.year
    if year < 100:
        return value.replace(year=year + (2000 if year < 70 else 1900))
    return value


def _micros(value: dt.datetime) -> int:
    return (value - EPOCH) // _MICROS


def days_to_date(days: int) -> dt.date:
    return EPOCH_DATE + dt.timedelta(days=_integer(days))


def micros_to_datetime(micros: int) -> dt.datetime:
    return EPOCH + dt.timedelta(microseconds=_integer(micros))


def micros_to_time(micros: int) -> dt.timedelta:
    return dt.timedelta(microseconds=_integer(micros))


def _integer(value: Any) -> int:
    """A JSON integer (not a bool, not a float)."""
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def bits_from_bytes(raw: bytes) -> int:
    return int.from_bytes(raw, "little")


# -- encoders: canonical value -> JSON value ---------------------------------------------------


def _date_writer(ctype: ColumnType) -> Converter:
    def write(value: Any) -> int | None:
        when = _adjusted(value)
        return None if when is None else (when.date() - EPOCH_DATE).days

    return write


def _datetime_writer(ctype: ColumnType) -> Converter:
    if ctype.name == "timestamp":
        return _timestamp_writer(ctype)
    fsp = ctype.decimal
    if fsp is not None and fsp > 3:
        return lambda v: None if (when := _adjusted(v)) is None else _micros(when)

    def write(value: Any) -> int | None:
        when = _adjusted(value)
        if when is None:
            return None
        micros = _micros(when)
        if fsp is None and micros % 1000:  # (an unknown fsp is MySQL's default, 0)
            raise ValueError(f"DATETIME value {value} has microseconds but no fsp > 3")
        return micros // 1000

    return write


def _timestamp_writer(ctype: ColumnType) -> Converter:
    fsp = ctype.decimal

    def write(value: Any) -> str:
        if isinstance(value, ZeroDate) or value < _MIN_TIMESTAMP:
            return _ZERO_TIMESTAMP_TEXT
        if type(value) is dt.date:
            value = dt.datetime(value.year, value.month, value.day)
        text: str = value.isoformat("T", "microseconds")
        if fsp is None:  # (unknown: the digits the value needs)
            text = text.rstrip("0").rstrip(".")
        else:
            text = text[: 20 + fsp] if fsp > 0 else text[:19]
        return text + "Z"

    return write


def _time_writer(value: dt.timedelta) -> int:
    return value // _MICROS


def _integer_writer(ctype: ColumnType) -> Converter:
    if ctype.name == "bigint" and ctype.unsigned:
        return int64_cast
    return _identity


def _float_writer(value: float) -> float:
    """The float64 whose shortest text is the float32's (Go writes float32 shortest)."""
    return float(format_float32(value))


def _enum_writer(ctype: ColumnType) -> Converter:
    def write(value: int) -> str:
        name = ctype.enum_name(value)
        return name or ""

    return write


def _set_writer(ctype: ColumnType) -> Converter:
    def write(value: int) -> str:
        names = ctype.set_names(value)
        return "" if names is None else ",".join(names)

    return write


def _bit_writer(ctype: ColumnType) -> Converter:
    length = ctype.length or 1
    if length == 1:
        return lambda v: v != 0
    size = (length + 7) // 8

    def write(value: int) -> str:
        return base64_text(value.to_bytes(8, "little")[:size])

    return write


def _identity(value: Any) -> Any:
    return value


ENCODERS = {
    Family.INTEGER: _integer_writer,
    Family.YEAR: constant(_identity),
    Family.FLOAT: constant(_float_writer),
    Family.DOUBLE: constant(float),
    Family.DECIMAL: constant(float),
    Family.STRING: constant(_identity),
    Family.JSON: constant(_identity),
    Family.UNKNOWN: constant(_identity),
    Family.BYTES: constant(base64_text),
    Family.DATE: _date_writer,
    Family.DATETIME: _datetime_writer,
    Family.TIME: constant(_time_writer),
    Family.ENUM: _enum_writer,
    Family.SET: _set_writer,
    Family.BIT: _bit_writer,
}


# -- decoders: what TiCDC writes -> canonical value ------------------------------------------


def _integer_reader(ctype: ColumnType) -> Converter:
    if ctype.name == "bigint" and ctype.unsigned:
        return lambda v: _integer(v) + _INT64 if v < 0 else _integer(v)
    return _integer


def _number(value: Any) -> float:
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    if kind is Decimal:  # (a table with DECIMAL columns has its numbers read exactly)
        number = float(value)
        if not math.isfinite(number):  # (as orjson refuses 1e999)
            raise ValueError(f"{value} is past a double's range")
        return number
    raise ValueError(f"expected a number, got {value!r}")


def _float_reader(value: Any) -> float:
    return to_float32(_number(value))


def _decimal_reader(value: Any) -> Decimal:
    """TiCDC writes a double; decimal.handling.mode=string a string; any other producer's
    number more digits than a double holds (read exactly: :mod:`.typed`)."""
    if isinstance(value, str):
        return exact_decimal(Decimal(value))
    if type(value) is Decimal or type(value) is int:
        return exact_decimal(Decimal(value))
    return Decimal(repr(_number(value)))


def exact_decimal(value: Decimal) -> Decimal:
    """A DECIMAL read exactly from its JSON text, checked to be one (finite, at most 65
    integer digits: MySQL's widest DECIMAL)."""
    if not value.is_finite() or value.adjusted() >= _DECIMAL_DIGITS:
        raise ValueError(f"{value} is not a DECIMAL (at most {_DECIMAL_DIGITS} digits)")
    return value


_DECIMAL_DIGITS = 65


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _datetime_reader(ctype: ColumnType) -> Converter:
    if ctype.name == "timestamp":
        return zoned_timestamp
    if ctype.decimal is None or ctype.decimal <= 3:
        return lambda v: micros_to_datetime(_integer(v) * 1000)
    return micros_to_datetime


def zoned_timestamp(text: Any) -> dt.datetime:
    """An ISO-8601 time with a zone (``...Z``, ``+08:00``) as the UTC wall clock."""
    when = dt.datetime.fromisoformat(_text(text))
    if when.tzinfo is None:
        raise ValueError(f"ZonedTimestamp without a zone: {text!r}")
    return when.astimezone(dt.UTC).replace(tzinfo=None)


def _enum_reader(ctype: ColumnType) -> Converter:
    def read(value: Any) -> int:
        if _text(value) == "":
            return 0
        index = ctype.enum_index(value)
        if index is None:
            raise ValueError(f"ENUM value {value!r} is not one of {ctype.elements}")
        return index

    return read


def _set_reader(ctype: ColumnType) -> Converter:
    def read(value: Any) -> int:
        bits = ctype.set_bits(_text(value))
        if bits is None:
            raise ValueError(f"SET value {value!r} is not made of {ctype.elements}")
        return bits

    return read


def _bit_reader(value: Any) -> int:
    if type(value) is bool:
        return int(value)
    return bits_from_bytes(base64_bytes(value))


DECODERS = {
    Family.INTEGER: _integer_reader,
    Family.YEAR: constant(_integer),
    Family.FLOAT: constant(_float_reader),
    Family.DOUBLE: constant(_number),
    Family.DECIMAL: constant(_decimal_reader),
    Family.STRING: constant(_text),
    Family.JSON: constant(_text),
    Family.UNKNOWN: constant(_identity),
    Family.BYTES: constant(base64_bytes),
    Family.DATE: constant(days_to_date),
    Family.DATETIME: _datetime_reader,
    Family.TIME: constant(micros_to_time),
    Family.ENUM: _enum_reader,
    Family.SET: _set_reader,
    Family.BIT: constant(_bit_reader),
}

assert ENCODERS.keys() == DECODERS.keys() == FAMILIES

DEBEZIUM = Dialect("debezium", DECODERS, ENCODERS)


def carried(ctype: ColumnType) -> Callable[[Any], Any]:
    """Canonical value -> the canonical value a decoder gets back from TiCDC's Debezium wire
    (DECIMAL through a double, dates through the calendar rules above, ENUM 0 as "")."""
    write, read = DEBEZIUM.encoder(ctype), DEBEZIUM.decoder(ctype)

    def view(value: Any) -> Any:
        if value is None:
            return None
        wire = write(value)
        return None if wire is None else read(wire)

    return view
