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
* binary values are base64, the whole column in one call (:func:`base64_texts`);
* ENUM, SET and BIT run the one-message converter once per distinct value, the rest
  (FLOAT, DOUBLE, DECIMAL) on each value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ticdc_spark.codec.convert import Converter
from ticdc_spark.types import ColumnType, Family

__all__ = ["ColumnText", "base64_texts", "column_text"]

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
    if family is Family.BYTES:
        return _base64_column(to_text)
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


def _base64_column(to_text: Converter) -> ColumnText:
    each = _each(to_text)

    def convert(values: Sequence[Any]) -> tuple[Any, list[int]]:
        import pyarrow as pa

        if any(type(value) is not bytes for value in values if value is not None):
            return each(values)  # (Arrow would take a str: the one-message converter refuses)
        return base64_texts(pa.array(values, pa.binary())), []

    return convert


def base64_texts(values: Any) -> Any:
    """Standard base64 (padded, no newline) of each value of a binary Arrow array.

    Each value is laid out zero-padded to a multiple of 3 bytes, the whole is encoded at
    once, so each value's text is its own run of 4-character groups; the characters the
    padding gave become ``=``.
    """
    import binascii

    import numpy as np
    import pyarrow as pa

    n = len(values)
    validity, offsets_buffer, data_buffer = values.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32, n + 1, values.offset * 4).astype(np.int64)
    lengths = np.diff(offsets)
    padded = (lengths + 2) // 3 * 3
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(padded, out=starts[1:])
    text_offsets = starts // 3 * 4
    if text_offsets[-1] >= 1 << 31:  # (over a string array's offsets: one value at a time)
        return pa.array(
            [
                None if v is None else binascii.b2a_base64(v, newline=False).decode()
                for v in values.to_pylist()
            ],
            pa.string(),
        )
    laid_out = np.zeros(starts[-1], np.uint8)
    if data_buffer is not None and lengths.sum():
        data = np.frombuffer(data_buffer, np.uint8)[offsets[0] : offsets[-1]]
        shift = np.repeat(starts[:-1] - (offsets[:-1] - offsets[0]), lengths)
        laid_out[np.arange(len(data)) + shift] = data
    text = np.frombuffer(binascii.b2a_base64(laid_out, newline=False), np.uint8).copy()
    ends, short = text_offsets[1:], padded - lengths
    text[ends[short >= 1] - 1] = ord("=")
    text[ends[short == 2] - 2] = ord("=")
    if validity is not None and values.offset:
        validity = pa.array(values.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]
    return pa.StringArray.from_buffers(
        n,
        pa.py_buffer(text_offsets.astype(np.int32)),
        pa.py_buffer(text),
        validity,
        values.null_count,
    )
