"""Text form <-> canonical value: one small function per family in dispatch tables
(:func:`text_parser`, :func:`text_formatter`)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ticdc_spark.types.column import ColumnType, Family
from ticdc_spark.types.numbers import (
    format_decimal,
    format_float32,
    format_float64,
    parse_decimal,
    parse_float,
)
from ticdc_spark.types.temporal import (
    format_date,
    format_datetime,
    format_time,
    parse_date,
    parse_datetime,
    parse_time,
)

__all__ = ["text_formatter", "text_parser"]


def _format_datetime_col(ctype: ColumnType) -> Callable[[Any], str]:
    fsp = ctype.decimal
    if fsp is None:
        return lambda v: _trim_fraction(format_datetime(v, 6))
    cut = 20 + fsp if fsp > 0 else 19
    datetime_type = _dt.datetime

    def format_column(value: Any) -> str:
        if type(value) is datetime_type:  # inline fast path of format_datetime
            return value.isoformat(" ", "microseconds")[:cut]
        return format_datetime(value, fsp)

    return format_column


def _format_time_col(ctype: ColumnType) -> Callable[[Any], str]:
    fsp = ctype.decimal
    if fsp is None:
        return lambda v: _trim_fraction(format_time(v, 6))
    return lambda v: format_time(v, fsp)


def _trim_fraction(text: str) -> str:
    """With the fsp unknown, print only the fractional digits the value needs."""
    if "." not in text:
        return text
    return text.rstrip("0").rstrip(".")


_TextParser = Callable[[str], Any]
_TextFormatter = Callable[[Any], str]

_PARSERS: dict[Family, _TextParser] = {
    Family.INTEGER: int,
    Family.YEAR: int,
    Family.ENUM: int,
    Family.SET: int,
    Family.BIT: int,
    Family.FLOAT: parse_float,
    Family.DOUBLE: float,
    Family.DECIMAL: parse_decimal,
    Family.STRING: str,
    Family.JSON: str,
    Family.UNKNOWN: str,
    Family.DATE: parse_date,
    Family.DATETIME: parse_datetime,
    Family.TIME: parse_time,
}

_FORMATTERS: dict[Family, Callable[[ColumnType], _TextFormatter]] = {
    Family.INTEGER: lambda t: str,
    Family.YEAR: lambda t: str,
    Family.ENUM: lambda t: str,
    Family.SET: lambda t: str,
    Family.BIT: lambda t: str,
    Family.FLOAT: lambda t: format_float32,
    Family.DOUBLE: lambda t: format_float64,
    Family.DECIMAL: lambda t: format_decimal,
    Family.STRING: lambda t: str,
    Family.JSON: lambda t: str,
    Family.UNKNOWN: lambda t: str,
    Family.DATE: lambda t: format_date,
    Family.DATETIME: _format_datetime_col,
    Family.TIME: _format_time_col,
}


def text_parser(ctype: ColumnType) -> _TextParser:
    """The function turning MySQL text into this type's canonical value (not for BYTES)."""
    try:
        return _PARSERS[ctype.family]
    except KeyError:
        raise TypeError(f"{ctype.name} values have no text form; decode the bytes") from None


@lru_cache(maxsize=4096)
def text_formatter(ctype: ColumnType) -> _TextFormatter:
    """The function printing a canonical value as MySQL text (not for BYTES)."""
    try:
        return _FORMATTERS[ctype.family](ctype)
    except KeyError:
        raise TypeError(f"{ctype.name} values have no text form; encode the bytes") from None
