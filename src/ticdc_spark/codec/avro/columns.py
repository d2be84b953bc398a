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
* FLOAT and DOUBLE are cast to text by Arrow (the shortest digits that read back, at the
  column's precision, as Go's ``strconv.FormatFloat(v, 'f', -1, bits)``); a text Arrow
  writes with an exponent has its digits laid out positionally by Arrow too, and inf or nan
  is the one-message converter's to write;
* a precise DECIMAL (``bytes.decimal``, a :class:`~decimal.Decimal` from fastavro) is its
  ``format(value, "f")``, a non-finite one the one-message converter's to refuse;
* BIT's big-endian bytes are read as unsigned 64-bit numbers by numpy, cast to text by Arrow;
* ENUM and SET run the one-message converter once per distinct value, the rest on each value.

A column whose values are not all of the type fastavro reads its Avro type as (a writer
schema of another shape) takes the one-message converter on each value.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.codec.avro.plan import ColumnText
from ticdc_spark.codec.avro.vectorized import padded_bytes, replaced
from ticdc_spark.codec.convert import Converter
from ticdc_spark.types import ColumnType, Family

__all__ = ["as_arrow", "base64_texts", "column_text", "takes_arrow"]


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
    if family in (Family.FLOAT, Family.DOUBLE) and primitive in ("float", "double"):
        return _floats(32 if family is Family.FLOAT else 64, to_text)
    if family is Family.DECIMAL and primitive == "bytes":
        return _decimals(to_text)
    if family is Family.BIT and primitive == "bytes":
        return _bits(to_text)
    if family in (Family.ENUM, Family.SET, Family.BIT):
        return _each_distinct(to_text)  # (str or bytes: equal values have one text)
    return _each(to_text)  # (not memoized: 0.0 == -0.0, Decimal("1.0") == Decimal("1"))


_NONE = type(None)
_FLOAT_TYPES: set[type] = {float, _NONE}
_DECIMAL_TYPES: set[type] = {Decimal, _NONE}
_BYTES_TYPES: set[type] = {bytes, _NONE}
_PLAIN_NUMBER = r"[^-.0-9]"  # (a text with anything else is the one-message converter's)


def _only(values: Sequence[Any], types: set[type]) -> bool:
    return set(map(type, values)) <= types


def _is_arrow(values: Any) -> bool:
    return isinstance(values, pa.Array)


def as_arrow(values: Sequence[Any] | pa.Array, kind: pa.DataType) -> pa.Array:
    """The values as an Arrow array of ``kind``: an Arrow array of that type as it is, of
    another type (an odd writer schema) through its Python values, as a list would be."""
    if isinstance(values, pa.Array):
        if values.type == kind:
            return values
        values = values.to_pylist()
    return pa.array(values, kind)


def _value(values: Sequence[Any] | pa.Array, row: int) -> Any:
    """One value as fastavro reads it (an Arrow array's: its Python value)."""
    return values[row].as_py() if _is_arrow(values) else values[row]


def _listed(values: Sequence[Any] | pa.Array) -> Sequence[Any]:
    if isinstance(values, pa.Array):
        listed: list[Any] = values.to_pylist()
        return listed
    return values


def takes_arrow(convert: ColumnText) -> ColumnText:
    """Mark a converter that also takes an Arrow array of the column's values (the others
    take their Python values)."""
    convert.takes_arrow = True  # type: ignore[attr-defined]
    return convert


def _floats(bits: int, to_text: Converter) -> ColumnText:
    each = _each(to_text)

    @takes_arrow
    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        if _is_arrow(values) and pa.types.is_floating(values.type):  # type: ignore[attr-defined]
            numbers = values.cast(pa.float64())  # type: ignore[attr-defined]
        elif _is_arrow(values) or not _only(values, _FLOAT_TYPES):
            return each(_listed(values))
        else:
            numbers = pa.array(values, pa.float64())
        if bits == 32:  # (round to nearest, as to_float32: a float column's value is exact)
            numbers = numbers.cast(pa.float32(), safe=False)
        return _patched(numbers.cast(pa.string()), values, to_text, memo=True)

    return convert


def _decimals(to_text: Converter) -> ColumnText:
    each = _each(to_text)

    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        if not _only(values, _DECIMAL_TYPES):
            return each(values)
        texts = [None if value is None else format(value, "f") for value in values]
        return _patched(pa.array(texts, pa.string()), values, to_text)

    return convert


def _patched(
    texts: pa.StringArray, values: Sequence[Any], to_text: Converter, memo: bool = False
) -> tuple[pa.StringArray, list[int]]:
    """``texts`` with each text that is not a plain number written otherwise: Arrow's
    exponent form of a float (``1e-7``, ``1.5e+20``) laid out as its positional digits by
    Arrow (:func:`_positional`), any other (inf, nan) by ``to_text`` (the rows it refuses are
    the bad rows); ``memo``: once per distinct value (floats: the only equal floats of
    different texts, 0.0 and -0.0, are plain numbers to Arrow)."""
    odd = pc.match_substring_regex(texts, _PLAIN_NUMBER).fill_null(False)
    rows = np.flatnonzero(odd.to_numpy(zero_copy_only=False))
    if not len(rows):
        return texts, []
    laid_out = _positional(texts.take(pa.array(rows)))
    others = np.flatnonzero(laid_out.is_null().to_numpy(zero_copy_only=False))
    bad: list[int] = []
    if len(others):  # (inf, nan, a decimal's odd text: the one-message converter's)
        done: dict[Any, str | None] = {}
        patched: list[str | None] = []
        for row in rows[others].tolist():
            value = _value(values, row)
            if memo and value in done:
                patched.append(done[value])
                continue
            try:
                text: str | None = to_text(value)
            except Exception:  # (the one decode path says what is wrong with it)
                bad.append(row)
                text = None
            patched.append(text)
            if memo:
                done[value] = text
        laid_out = replaced(laid_out, others, patched)
    return replaced(texts, rows, laid_out), bad


# Arrow's exponent form of a float: sign, first digit, the other digits, the exponent.
_EXPONENT_FORM = (
    r"^(?P<sign>-?)(?P<lead>[0-9])(?:\.(?P<rest>[0-9]+))?e(?P<down>-?)\+?(?P<exp>[0-9]+)$"
)


class _ExponentForm(NamedTuple):
    """Texts in Arrow's exponent form, read by numpy (one value per text)."""

    valid: np.ndarray  # in the form, with an exponent of 1 to 3 digits
    negative: np.ndarray  # 1 for a negative number, else 0
    lead: np.ndarray  # where its first digit is (the others after a point, up to the e)
    digits: np.ndarray  # how many significant digits it has
    point: np.ndarray  # the digits before the decimal point (0 or less: a small number)


def _positional(texts: pa.StringArray) -> pa.StringArray:
    """Each text in Arrow's exponent form as Go's ``FormatFloat(v, 'f', -1, bits)`` lays
    its digits out (:func:`ticdc_spark.types.positional`): ``1e-7`` -> ``0.0000001``,
    ``1.5e+20`` -> ``150000000000000000000``, ``4.0930732562616e+11`` -> ``409307325626.16``;
    null for any other text.  The form is checked by Arrow; the digits are laid out by numpy
    a byte at a time over all the texts at once (:func:`_positional_bytes`)."""
    n = len(texts)
    offsets, data = padded_bytes(texts, 4)  # (reads past a row's end stay in)
    form = _exponent_form(texts, offsets, data)
    small, large = form.point <= 0, form.point >= form.digits
    length = np.where(
        small, 2 - form.point + form.digits, np.where(large, form.point, form.digits + 1)
    )
    length = np.where(form.valid, form.negative + length, 0)
    out = np.zeros(n + 1, np.int64)
    np.cumsum(length, out=out[1:])
    text = _positional_bytes(form, data, out, length, (small, large))
    validity = pa.array(form.valid).buffers()[1]
    return pa.StringArray.from_buffers(
        n,
        pa.py_buffer(out.astype(np.int32)),
        pa.py_buffer(text),
        validity,
        int(n - form.valid.sum()),
    )


def _exponent_form(texts: pa.StringArray, offsets: np.ndarray, data: np.ndarray) -> _ExponentForm:
    """The texts' sign, digits and exponent, where they are in Arrow's exponent form."""
    valid = pc.match_substring_regex(texts, _EXPONENT_FORM).fill_null(False)
    valid = valid.to_numpy(zero_copy_only=False)
    starts, ends = offsets[:-1], offsets[1:]
    e = starts + pc.find_substring(texts, "e").fill_null(0).to_numpy(zero_copy_only=False)
    negative = (data[starts] == ord("-")).astype(np.int64)
    lead = starts + negative
    count = np.where(valid, np.maximum(e - lead - 1, 1), 1)
    signed = data[e + 1] == ord("-")
    first = e + 1 + (signed | (data[e + 1] == ord("+")))
    width = ends - first  # (the exponent's digits: at most 3 for a double)
    valid &= (width >= 1) & (width <= 3)
    exponent = np.zeros(len(texts), np.int64)
    for j in range(3):
        digit = data[first + j].astype(np.int64) - ord("0")
        exponent = np.where(j < width, exponent * 10 + digit, exponent)
    point = np.where(signed, -exponent, exponent) + 1
    return _ExponentForm(valid, negative, lead, count, point)


def _positional_bytes(
    form: _ExponentForm,
    data: np.ndarray,
    out: np.ndarray,
    length: np.ndarray,
    sizes: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """The positional texts' bytes, each at its offset in ``out``: the sign, ``0.`` and zeros
    before a small number (``sizes``: small, large), zeros after a large one, the point among
    the digits of the others."""
    n = len(length)
    row = np.repeat(np.arange(n), length)
    at = np.arange(out[-1]) - out[:-1][row] - form.negative[row]  # (place after the sign)
    p, c, sm, lg = form.point[row], form.digits[row], sizes[0][row], sizes[1][row]
    digit = np.where(sm, at - 2 + p, np.where(lg | (at < p), at, at - 1))  # (which digit)
    source = form.lead[row] + np.where(digit > 0, digit + 1, 0)  # (digits after lead skip ".")
    text = data[np.clip(source, 0, len(data) - 1)]
    zero = (sm & ((at == 0) | ((at >= 2) & (at < 2 - p)))) | (lg & (at >= c))
    point_here = (sm & (at == 1)) | (~sm & ~lg & (at == p))
    text = np.where(zero, ord("0"), np.where(point_here, ord("."), text))
    laid_out: np.ndarray = np.where(at < 0, ord("-"), text).astype(np.uint8)
    return laid_out


def _bits(to_text: Converter) -> ColumnText:
    each = _each_distinct(to_text)

    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        if not _only(values, _BYTES_TYPES):
            return each(values)
        numbers = _big_endian_u64(pa.array(values, pa.binary()))
        return each(values) if numbers is None else (numbers.cast(pa.string()), [])

    return convert


def _big_endian_u64(values: pa.BinaryArray) -> pa.UInt64Array | None:
    """Each value of a binary Arrow array (at most 8 bytes) as an unsigned big-endian
    number (no bytes: 0); None when a value is longer."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4)
    lengths = np.diff(offsets).astype(np.int64)
    if n and lengths.max() > 8:
        return None
    starts = np.arange(n, dtype=np.int64) * 8 + 8 - lengths  # (right-aligned)
    laid_out = _spread(values, offsets, starts, n * 8)
    numbers = laid_out.view(">u8").astype(np.uint64)
    return pa.array(numbers, pa.uint64(), mask=values.is_null().to_numpy(zero_copy_only=False))


@takes_arrow
def _strings(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
    return as_arrow(values, pa.string()), []


@takes_arrow
def _integers(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
    return as_arrow(values, pa.int64()).cast(pa.string()), []


@takes_arrow
def _unsigned_integers(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
    wrapped = as_arrow(values, pa.int64()).cast(pa.uint64(), safe=False)  # two's complement
    return wrapped.cast(pa.string()), []


def _laid_out(layout: str, to_text: Converter) -> ColumnText:
    @takes_arrow
    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        texts = as_arrow(values, pa.string())
        other = pc.invert(pc.match_substring_regex(texts, layout)).fill_null(False)
        bad = []
        for row in np.flatnonzero(other.to_numpy(zero_copy_only=False)).tolist():
            try:
                to_text(_value(values, row))
            except Exception:  # (the one decode path says what is wrong with it)
                bad.append(row)
        return texts, bad

    return convert


def _each_distinct(to_text: Converter) -> ColumnText:
    @takes_arrow
    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        if _is_arrow(values):
            return _each_of_dictionary(values, to_text)
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


def _each_of_dictionary(values: pa.Array, to_text: Converter) -> tuple[pa.StringArray, list[int]]:
    """An Arrow column's texts, ``to_text`` run once per distinct value (Arrow's equality of
    strings and bytes is Python's); the rows of a value it refuses are the bad rows."""
    encoded = values.dictionary_encode()
    texts: list[str | None] = []
    refused = []
    for j, value in enumerate(encoded.dictionary.to_pylist()):
        try:
            texts.append(to_text(value))
        except Exception:  # (the one decode path says what is wrong with it)
            texts.append(None)
            refused.append(j)
    column = pa.array(texts, pa.string()).take(encoded.indices)
    if not refused:
        return column, []
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    return column, np.flatnonzero(np.isin(codes, refused)).tolist()


def _each(to_text: Converter) -> ColumnText:
    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
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

    @takes_arrow
    def convert(values: Sequence[Any]) -> tuple[pa.StringArray, list[int]]:
        if _is_arrow(values) and values.type == pa.binary():  # type: ignore[attr-defined]
            return base64_texts(values), []
        values = _listed(values)
        if not _only(values, _BYTES_TYPES):
            return each(values)  # (Arrow would take a str: the one-message converter refuses)
        return base64_texts(pa.array(values, pa.binary())), []

    return convert


def base64_texts(values: pa.BinaryArray) -> pa.StringArray:
    """Standard base64 (padded, no newline) of each value of a binary Arrow array.

    Each value is laid out zero-padded to a multiple of 3 bytes, the whole is encoded at
    once, so each value's text is its own run of 4-character groups; the characters the
    padding gave become ``=``.
    """
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4)
    offsets = offsets.astype(np.int64)
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
    laid_out = _spread(values, offsets, starts[:-1], int(starts[-1]))
    text = np.frombuffer(binascii.b2a_base64(laid_out.data, newline=False), np.uint8).copy()
    ends, short = text_offsets[1:], padded - lengths
    text[ends[short >= 1] - 1] = ord("=")
    text[ends[short == 2] - 2] = ord("=")
    buffers = pa.py_buffer(text_offsets.astype(np.int32)), pa.py_buffer(text)
    return pa.StringArray.from_buffers(n, *buffers, _validity(values), values.null_count)


def _spread(values: pa.Array, offsets: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """``size`` zero bytes with each value's bytes of a binary Arrow array (``offsets``: its
    own) copied in from its place in ``starts``, in one numpy assignment."""
    laid_out = np.zeros(size, np.uint8)
    lengths = np.diff(offsets)
    data_buffer = values.buffers()[2]
    if data_buffer is not None and lengths.sum():
        data = np.frombuffer(data_buffer, np.uint8)[offsets[0] : offsets[-1]]
        shift = np.repeat(starts - (offsets[:-1] - offsets[0]), lengths)
        laid_out[np.arange(len(data)) + shift] = data
    return laid_out


def _validity(values: pa.Array) -> pa.Buffer | None:
    """The array's validity bitmap, starting at its first value (a slice's starts where its
    parent's does)."""
    validity = values.buffers()[0]
    if validity is not None and values.offset:
        validity = pa.array(values.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]
    return validity
