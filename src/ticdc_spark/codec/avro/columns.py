"""Avro values to changelog text a column at a time (the Arrow batch path's conversions).

Each converter takes one column's values as fastavro read them (None for null) and returns
the column's changelog text as an Arrow string array, and the rows whose value it could not
convert (those records go to the one decode path).  Every text equals what the one-message
converter (:meth:`Dialect.text <ticdc_spark.codec.convert.Dialect.text>`) writes:

* strings and JSON are their text (Arrow checks they are text);
* integers and YEAR are cast to text by Arrow (BIGINT UNSIGNED written as ``long`` first
  reinterpreted as unsigned 64 bits, as the one-message path adds 2**64 to a negative);
* DATE, DATETIME and TIME keep the text TiCDC wrote once it parses as MySQL's: a text of
  MySQL's own layout (an RE2 pattern, ASCII digits only, no wider than the parser's) is
  taken as is, any other text is given to the one-message converter;
* ENUM, SET and BIT run the one-message converter once per distinct value, the rest
  (FLOAT, DOUBLE, DECIMAL, BYTES) on each value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ticdc_spark.codec.convert import Converter
from ticdc_spark.types import ColumnType, Family

__all__ = ["ColumnText", "column_text"]

# (values) -> (texts, rows whose value did not convert)
ColumnText = Callable[[Sequence[Any]], "tuple[Any, list[int]]"]

# The layouts MySQL writes, no wider than what ticdc_spark.types' parse_date, parse_datetime
# and parse_time accept ([0-9] is ASCII where Python's \d is not; RE2's $ is the end of the
# text; at most 6 digits of TIME days, which Python's timedelta holds).
_DATE_LAYOUT = (
    r"^[0-9]{1,4}-[0-9]{1,2}-[0-9]{1,2}([ T][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?)?$"
)
_TIME_LAYOUT = r"^-?([0-9]{1,6} )?[0-9]{1,4}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?$"
_LAYOUTS = {Family.DATE: _DATE_LAYOUT, Family.DATETIME: _DATE_LAYOUT, Family.TIME: _TIME_LAYOUT}


def column_text(ctype: ColumnType, primitive: str, to_text: Converter) -> ColumnText:
    """The column converter of a field (``to_text``: its one-message converter)."""
    family = ctype.family
    if family in (Family.STRING, Family.JSON) or (
        family is Family.INTEGER and primitive == "string"
    ):
        return _strings
    if family in (Family.INTEGER, Family.YEAR):
        unsigned = family is Family.INTEGER and ctype.name == "bigint" and ctype.unsigned
        return _unsigned_integers if unsigned else _integers
    layout = _LAYOUTS.get(family)
    if layout is not None:
        return _laid_out(layout, to_text)
    if family in (Family.ENUM, Family.SET, Family.BIT):
        return _each_distinct(to_text)  # (str or bytes: equal values have one text)
    return _each(to_text)  # (not memoized: 0.0 == -0.0, Decimal("1.0") == Decimal("1"))


def _strings(values: Sequence[Any]) -> tuple[Any, list[int]]:
    import pyarrow as pa

    return pa.array(values, pa.string()), []


def _integers(values: Sequence[Any]) -> tuple[Any, list[int]]:
    import pyarrow as pa

    return pa.array(values, pa.int64()).cast(pa.string()), []


def _unsigned_integers(values: Sequence[Any]) -> tuple[Any, list[int]]:
    import pyarrow as pa

    wrapped = pa.array(values, pa.int64()).cast(pa.uint64(), safe=False)  # two's complement
    return wrapped.cast(pa.string()), []


def _laid_out(layout: str, to_text: Converter) -> ColumnText:
    def convert(values: Sequence[Any]) -> tuple[Any, list[int]]:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = pa.array(values, pa.string())
        other = pc.invert(pc.match_substring_regex(texts, layout)).fill_null(False)
        bad = []
        for row in np.flatnonzero(other.to_numpy(zero_copy_only=False)).tolist():
            try:
                to_text(values[row])
            except Exception:  # (the one decode path says what is wrong with it)
                bad.append(row)
        return texts, bad

    return convert


def _each_distinct(to_text: Converter) -> ColumnText:
    def convert(values: Sequence[Any]) -> tuple[Any, list[int]]:
        import pyarrow as pa

        done: dict[Any, str | None] = {None: None}
        texts: list[str | None] = []
        bad = []
        for row, value in enumerate(values):
            try:
                text = done[value]
            except KeyError:
                try:
                    text = done[value] = to_text(value)
                except Exception:  # (the one decode path says what is wrong with it)
                    text = None
                    bad.append(row)
            except TypeError:  # (an unhashable value: the one decode path refuses it)
                text = None
                bad.append(row)
            texts.append(text)
        return pa.array(texts, pa.string()), bad

    return convert


def _each(to_text: Converter) -> ColumnText:
    def convert(values: Sequence[Any]) -> tuple[Any, list[int]]:
        import pyarrow as pa

        texts: list[str | None] = []
        bad = []
        for row, value in enumerate(values):
            if value is None:
                texts.append(None)
                continue
            try:
                texts.append(to_text(value))
            except Exception:  # (the one decode path says what is wrong with it)
                texts.append(None)
                bad.append(row)
        return pa.array(texts, pa.string()), bad

    return convert
