"""Dates and times: :class:`ZeroDate` (what Python's calendar refuses), and the MySQL text
of DATE, DATETIME/TIMESTAMP and TIME values read and written."""

from __future__ import annotations

import datetime as _dt
import re
from typing import NamedTuple

__all__ = [
    "ZeroDate",
    "format_date",
    "format_datetime",
    "format_time",
    "infer_fsp",
    "is_calendar",
    "parse_date",
    "parse_datetime",
    "parse_time",
]


class ZeroDate(NamedTuple):
    """A DATE/DATETIME/TIMESTAMP value Python's calendar rejects.

    MySQL stores the zero date ``0000-00-00``, dates with a zero month or day
    (``2020-00-00``), and year 0; ``datetime`` cannot.  Such values decode to a ``ZeroDate``
    holding the fields as written, and print back unchanged.
    """

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def date_text(self) -> str:
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    def datetime_text(self, fsp: int) -> str:
        text = f"{self.date_text()} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        return text + _fraction(self.microsecond, fsp)


def _fraction(microsecond: int, fsp: int) -> str:
    if fsp <= 0:
        return ""
    return "." + f"{microsecond:06d}"[:fsp]


def infer_fsp(text: str) -> int:
    """The number of fractional-second digits a temporal text carries (TiCDC prints all)."""
    dot = text.rfind(".")
    return len(text) - dot - 1 if dot >= 0 else 0


_DATE_RE = re.compile(
    r"^(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})\d*)?)?\Z"
)
_TIME_RE = re.compile(r"^(-)?(?:(\d+) )?(\d{1,4}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})\d*)?\Z")
# (\Z, not $: $ also matches before a final newline)


# fromisoformat is the fast path for the common texts, but it also reads ISO 8601 forms MySQL
# never writes (week dates, a comma before the fraction, time zones): it only sees texts laid
# out as MySQL's, the rest go through the regex.


def _zero_field(text: str) -> bool:
    """Whether a date laid out as MySQL's has a zero year, month or day (no calendar date)."""
    return text[5:7] == "00" or text[8:10] == "00" or text[:4] == "0000"


def parse_date(text: str) -> _dt.date | ZeroDate:
    if len(text) == 10 and text[4] == "-" == text[7] and not _zero_field(text):
        try:
            return _dt.date.fromisoformat(text)
        except ValueError:
            pass
    zero = _parse_irregular(text)
    return _dt.date(zero.year, zero.month, zero.day) if is_calendar(zero) else zero


def parse_datetime(text: str) -> _dt.datetime | ZeroDate:
    if (
        len(text) >= 19
        and text[4] == "-" == text[7]
        and text[10] == " "
        and text[13] == ":" == text[16]
        and (len(text) == 19 or (text[19] == "." and text[20:].isdigit() and text.isascii()))
        and not _zero_field(text)
    ):
        try:
            return _dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    zero = _parse_irregular(text)
    if is_calendar(zero):
        return _dt.datetime(*zero)
    return zero


def _parse_irregular(text: str) -> ZeroDate:
    match = _DATE_RE.match(text)
    if match is None:
        raise ValueError(f"not a MySQL date/time: {text!r}")
    year, month, day, hour, minute, second = (int(g) if g else 0 for g in match.groups()[:6])
    fraction = match[7] or ""
    microsecond = int(fraction.ljust(6, "0")) if fraction else 0
    return ZeroDate(year, month, day, hour, minute, second, microsecond)


def is_calendar(value: ZeroDate) -> bool:
    """Whether ``datetime`` takes the value (without raising: zero dates are common enough in
    real tables for an exception per value to show in decoding time)."""
    year, month, day, hour, minute, second, _ = value
    if not (1 <= year <= 9999 and 1 <= month <= 12 and day >= 1):
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = 29 if month == 2 and leap else _DAYS_IN_MONTH[month]
    return day <= days and hour < 24 and minute < 60 and second < 60


_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def parse_time(text: str) -> _dt.timedelta:
    match = _TIME_RE.match(text)
    if match is None:
        raise ValueError(f"not a MySQL TIME: {text!r}")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    microseconds = int(fraction.ljust(6, "0")) if fraction else 0
    delta = _dt.timedelta(
        days=int(days or 0),
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=microseconds,
    )
    return -delta if sign else delta


def format_date(value: _dt.date | ZeroDate) -> str:
    try:
        return value.isoformat()  # type: ignore[union-attr]
    except AttributeError:  # a ZeroDate
        return value.date_text()  # type: ignore[union-attr]


def format_datetime(value: _dt.datetime | _dt.date | ZeroDate, fsp: int) -> str:
    if type(value) is _dt.datetime:  # the fast path: C isoformat, cut to the fsp
        if fsp <= 0:
            return value.isoformat(" ", "seconds")
        return value.isoformat(" ", "microseconds")[: 20 + fsp]
    if isinstance(value, ZeroDate):
        return value.datetime_text(fsp)
    if not isinstance(value, _dt.datetime):  # a DATE value in a DATETIME column
        value = _dt.datetime(value.year, value.month, value.day)
    return format_datetime(_dt.datetime(*value.timetuple()[:6], value.microsecond), fsp)


def format_time(value: _dt.timedelta, fsp: int) -> str:
    """MySQL's TIME text: ``-838:59:59.000000``, hours not wrapped at 24."""
    seconds = value.days * 86400 + value.seconds
    microsecond = value.microseconds
    sign = ""
    if seconds < 0:
        sign = "-"
        if microsecond:
            seconds, microsecond = -seconds - 1, 1_000_000 - microsecond
        else:
            seconds = -seconds
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    return text + "." + f"{microsecond:06d}"[:fsp] if fsp > 0 else text
