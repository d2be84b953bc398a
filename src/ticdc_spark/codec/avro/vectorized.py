"""Avro bodies of one writer schema read a field at a time across all the records, with numpy:
no Python per record, no Python objects per value.

Every record's cursor advances through its body in lockstep, field by field: zigzag varints,
little-endian floats and doubles, length-prefixed strings and bytes (gathered into Arrow
arrays), a ``["null", T]`` union's index.  A precise DECIMAL (``bytes`` with the decimal
logical type) becomes its text, as ``format(decimal, "f")`` writes the
:class:`~decimal.Decimal` fastavro makes (numpy and Arrow for values of up to 8 bytes).

Only writer schemas made of those kinds are read here (:func:`.plan.field_kinds`).  A record is
*not read* (it goes to fastavro, and from there to the one decode path, which say what is
wrong with it) when anything about it is unusual: a varint of 10 bytes or more, a length
that is negative or runs past its body, a union index other than 0 or 1, a body its last
field does not end exactly, text that is not UTF-8.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Context, Decimal
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.codec.avro.plan import FieldKind
from ticdc_spark.codec.avro.wire import HEADER_SIZE

__all__ = ["padded_bytes", "read_columns", "replaced"]

_MAX_VARINT = 10  # bytes: 64 bits (the tenth byte's lowest), a zigzag int64 whatever its sign
_PAD = 16  # zero bytes after the data, so that gathers past a short body stay in bounds


def read_columns(
    kinds: list[FieldKind], values: pa.BinaryArray
) -> tuple[dict[str, pa.Array], np.ndarray]:
    """({field name: its values as an Arrow array}, which records read) for an Arrow binary
    array of framed values (headers already matched).  Decimals come as their text; the
    arrays hold every record, those that did not read as nulls."""

    offsets, data = padded_bytes(values, _PAD)
    cursor = _Cursor(data, offsets[:-1] + HEADER_SIZE, offsets[1:])
    columns = {}
    for name, primitive, nullable, decimal in kinds:
        present = cursor.branch() if nullable else cursor.ok.copy()
        columns[name] = cursor.column(primitive, present, decimal)
    cursor.ok &= cursor.pos == cursor.end
    return columns, cursor.ok


def padded_bytes(array: pa.Array, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, the data bytes followed by ``pad`` zero bytes) of an Arrow binary
    or string array: numpy gathers a fixed number of bytes past a position stay in bounds."""
    n = len(array)
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, array.offset * 4)
    offsets = offsets.astype(np.int64)
    raw = array.buffers()[2]
    data = np.zeros(int(offsets[-1]) + pad, np.uint8)
    if raw is not None and offsets[-1]:
        data[: offsets[-1]] = np.frombuffer(raw, np.uint8, int(offsets[-1]))
    return offsets, data


class _Cursor:
    """Each record's position in ``data``, its body's end, and whether it still reads."""

    def __init__(self, data: np.ndarray, pos: np.ndarray, end: np.ndarray) -> None:
        self.data, self.pos, self.end = data, pos.copy(), end
        self.ok = np.ones(len(pos), np.bool_)
        # (each position's next _PAD bytes as one item: ``windows[pos]`` gathers a record's
        # next bytes an item at a time, not a byte at a time; the data is padded past its end)
        self.windows = np.ndarray((len(data) - _PAD + 1,), f"V{_PAD}", data, strides=(1,))

    def ahead(self, pos: np.ndarray) -> np.ndarray:
        """The next ``_PAD`` bytes at each position, a row of bytes each."""
        rows: np.ndarray = self.windows[pos].view(np.uint8)
        return rows.reshape(len(pos), _PAD)

    def branch(self) -> np.ndarray:
        """Whether each record's ``["null", T]`` union is a T (its index advanced past).

        The index is one byte, 0 (null) or 2 (zigzag 1); any other (a longer varint of the
        same number included) and the record no longer reads here: fastavro's then."""
        going, pos = self.ok.copy(), self.pos
        index: np.ndarray = self.data[pos]
        self.ok &= (pos < self.end) & ((index == 0) | (index == 2))
        going &= self.ok
        self.pos = pos + going
        taken: np.ndarray = going & (index == 2)
        return taken

    def varint(self, active: np.ndarray) -> np.ndarray:
        """The zigzag varint at each active record (advanced past it); 0 elsewhere.

        A varint of one byte everywhere (union indices, short lengths, small numbers) takes
        a few numpy calls; otherwise each record's next 16 bytes are gathered at once (the
        data is padded) and read as two 64-bit words (:func:`_varints`)."""
        data, pos, end = self.data, self.pos, self.end
        going = active & self.ok
        first = data[pos]
        if not (first[going] & 0x80).any():
            self.ok &= ~going | (pos < end)
            going &= self.ok
            self.pos = pos + going
            small = first.astype(np.int64)
            return np.where(going, (small >> 1) ^ -(small & 1), 0)
        length, value, tenth = _varints(self.ahead(pos).view("<u8"))
        # (no last byte within reach, past the body, or a tenth byte with bits an int64
        # has no room for: fastavro's to read, or to refuse)
        self.ok &= ~going | ((length > 0) & (pos + length <= end) & (tenth <= 1))
        going &= self.ok
        self.pos = pos + np.where(going, length, 0)
        signed = (value >> np.uint64(1)).astype(np.int64) ^ -(value & np.uint64(1)).astype(np.int64)
        return np.where(going, signed, 0)

    def column(
        self, primitive: str, present: np.ndarray, decimal: tuple[int, int] | None
    ) -> pa.Array:
        if primitive in ("int", "long"):
            numbers = self.varint(present)
            return pa.array(numbers, pa.int64(), mask=~(present & self.ok))
        if primitive in ("float", "double"):
            width = 4 if primitive == "float" else 8
            active = present & self.ok
            self.ok &= ~active | (self.pos + width <= self.end)
            active &= self.ok
            at = np.where(active, self.pos, 0)[:, None] + np.arange(width)
            numbers = self.data[at].copy().view("<f4" if width == 4 else "<f8")[:, 0]
            self.pos = self.pos + np.where(active, width, 0)
            kind = pa.float32() if width == 4 else pa.float64()
            return pa.array(numbers, kind, mask=~active)
        return self._lengthy(primitive, present, decimal)

    def _lengthy(
        self, primitive: str, present: np.ndarray, decimal: tuple[int, int] | None
    ) -> pa.Array:
        """A string or bytes field (a decimal's bytes: its text)."""
        sizes = self.varint(present)
        active = present & self.ok
        self.ok &= ~active | ((sizes >= 0) & (self.pos + sizes <= self.end))
        active &= self.ok
        sizes = np.where(active, sizes, 0)
        starts = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=starts[1:])
        if starts[-1] >= 1 << 31:  # (past a string array's offsets: not here)
            self.ok &= ~active
            return pa.nulls(len(sizes), pa.string() if primitive == "string" else pa.binary())
        validity = pa.array(active).buffers()[1] if not active.all() else None
        nulls = int(len(active) - active.sum())
        if decimal is None:  # (Arrow copies the values out of the bodies: _views)
            views = self._views(sizes)
            self.pos = self.pos + sizes
            buffers = [validity, pa.py_buffer(views), pa.py_buffer(self.data)]
            column = pa.Array.from_buffers(pa.binary_view(), len(sizes), buffers, nulls)
            column = column.cast(pa.binary())  # (text checked as UTF-8 by _utf8)
            return self._utf8(column.view(pa.string()), active) if primitive == "string" else column
        gather = np.repeat(self.pos - starts[:-1], sizes) + np.arange(starts[-1])
        payload = self.data[gather]
        self.pos = self.pos + sizes
        buffers = [validity, pa.py_buffer(starts.astype(np.int32)), pa.py_buffer(payload)]
        return _decimal_texts(buffers, active, decimal)

    def _views(self, sizes: np.ndarray) -> np.ndarray:
        """Arrow's binary views (16 bytes each) of each record's next ``sizes`` bytes: the
        size, then up to 12 bytes inline, or the first 4 bytes and the place in ``data``
        (buffer 0); numpy gathers a fixed 16 bytes a record whatever the values' length, and
        fills the views a 4-byte word at a time."""
        words = np.empty((len(sizes), 4), "<u4")  # (size, then 12 bytes: 3 words)
        head = self.ahead(self.pos).view("<u4")
        inline, long = np.minimum(sizes, 12), sizes > 12
        masks = _inline_masks()
        words[:, 0] = sizes
        words[:, 1] = head[:, 0] & masks[0].take(inline)
        words[:, 2] = np.where(long, 0, head[:, 1] & masks[1].take(inline))
        words[:, 3] = np.where(long, self.pos, head[:, 2] & masks[2].take(inline))
        return words

    def _utf8(self, column: pa.StringArray, active: np.ndarray) -> pa.StringArray:
        """The string column, its records with text that is not UTF-8 marked as not read."""
        try:
            column.validate(full=True)
            return column
        except pa.ArrowInvalid:
            pass
        raw = column.view(pa.binary()).to_pylist()
        for row in np.flatnonzero(active).tolist():
            try:
                raw[row].decode("utf-8")
            except UnicodeDecodeError:
                self.ok[row] = False
                raw[row] = None
        return pa.array(raw, pa.binary()).cast(pa.string())


def _decimal_texts(
    buffers: list[Any], active: np.ndarray, decimal: tuple[int, int]
) -> pa.StringArray:
    """The text of each decimal, as ``format(d, "f")`` prints the Decimal fastavro makes of
    its big-endian two's complement unscaled value: numpy and Arrow (:class:`_Unscaled`)
    for a value of 1 to 31 bytes of at most ``precision`` digits (a scale up to 76),
    Python for the others."""
    precision, scale = decimal
    offsets = np.frombuffer(buffers[1], np.int32).astype(np.int64)
    lengths = np.diff(offsets)
    payload = np.frombuffer(buffers[2], np.uint8)
    simple = active & (lengths >= 1) & (lengths <= 31) & (scale <= 76)
    unscaled = _Unscaled(payload, offsets, np.where(simple, lengths, 0), scale)
    simple &= unscaled.written_by_arrow(simple, precision, scale)
    texts = unscaled.decimals(simple, scale).cast(pa.string())
    others = np.flatnonzero(active & ~simple)
    if not len(others):
        return texts
    return replaced(texts, others, _python_texts(payload, offsets, others, decimal))


class _Unscaled:
    """Unscaled decimal values as Arrow holds them: little-endian words of a ``decimal128``,
    or of a ``decimal256`` when a value has over 15 bytes (16 bytes hold 38 digits, 32 bytes
    76: every value of 15 or 31 bytes fits) or the scale is over 38."""

    def __init__(self, payload: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, scale: int):
        wide = bool(sizes.max(initial=0) > 15) or scale > 38
        self.kind = pa.decimal256 if wide else pa.decimal128
        self.digits = 76 if wide else 38
        self.n = len(sizes)
        self.words = pa.py_buffer(_little_endian(payload, offsets, sizes, 32 if wide else 16))

    def decimals(self, valid: np.ndarray, scale: int) -> pa.Array:
        """The values at ``scale`` (null where not ``valid``)."""
        validity = pa.array(valid).buffers()[1]
        count = int(self.n - valid.sum())
        kind = self.kind(self.digits, scale)
        return pa.Array.from_buffers(kind, self.n, [validity, self.words], count)

    def written_by_arrow(self, valid: np.ndarray, precision: int, scale: int) -> np.ndarray:
        """Which valid values Arrow's text of writes as Python's Decimal does: those within
        ``precision`` digits (more: fastavro's context rounds) and, past 6 decimals, not under
        10**-6 (Arrow writes those as Java does, ``1E-7``)."""
        magnitude = pc.abs(self.decimals(valid, 0))
        written = valid.copy()
        if precision < self.digits:
            limit = pa.scalar(Decimal(10**precision), self.kind(self.digits, 0))
            written &= pc.less(magnitude, limit).fill_null(False).to_numpy(zero_copy_only=False)
        if scale > 6:
            least = pa.scalar(Decimal(10 ** (scale - 6)), self.kind(self.digits, 0))
            small = pc.less(magnitude, least).fill_null(False)
            written &= ~small.to_numpy(zero_copy_only=False)
        return written


def _python_texts(
    payload: np.ndarray, offsets: np.ndarray, rows: np.ndarray, decimal: tuple[int, int]
) -> list[str]:
    """The text of the decimals at ``rows``, made as fastavro makes its Decimal (a context of
    the column's precision) and printed by Python."""
    precision, scale = decimal
    context, texts = Context(prec=precision), []
    for row in rows.tolist():
        raw = payload[offsets[row] : offsets[row + 1]].tobytes()
        value = context.create_decimal(int.from_bytes(raw, "big", signed=True))
        texts.append(format(value.scaleb(-scale, context), "f"))
    return texts


def _varints(words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(length, unsigned value, the tenth byte when the length is 10, else 0) of the varint
    at the start of each row of two little-endian 64-bit ``words`` (its next 16 bytes);
    length 0 when none of the first ``_MAX_VARINT`` bytes ends it.  Bit arithmetic on whole
    columns: the length from the lowest byte without the continuation bit, the 7-bit groups
    of the first 8 bytes packed by halving steps, bytes 9 and 10 added on top."""
    u64 = np.uint64
    low, high = words[:, 0], words[:, 1]
    ends = ~low & u64(0x8080808080808080)  # (the bytes that could end it, among the first 8)
    lowest = ends & (~ends + u64(1))  # (2 ** (8k + 7) for byte k, 0 for none)
    length = np.frexp(lowest.astype(np.float64))[1].astype(np.int64) >> 3  # (exact: k + 1)
    ninth, tenth = high & u64(0xFF), (high >> u64(8)) & u64(0xFF)
    length = np.where(length > 0, length, np.where(ninth < 0x80, 9, np.where(tenth < 0x80, 10, 0)))
    shift = np.minimum(length, 7).astype(u64) * u64(8)  # (the bytes of the first 8 it has)
    kept = np.where(length >= 8, u64(0xFFFFFFFFFFFFFFFF), (u64(1) << shift) - u64(1))
    x = low & kept & u64(0x7F7F7F7F7F7F7F7F)
    x = (x & u64(0x007F007F007F007F)) | ((x & u64(0x7F007F007F007F00)) >> u64(1))
    x = (x & u64(0x00003FFF00003FFF)) | ((x & u64(0x3FFF00003FFF0000)) >> u64(2))
    x = (x & u64(0x000000000FFFFFFF)) | ((x & u64(0x0FFFFFFF00000000)) >> u64(4))
    x |= np.where(length >= 9, (ninth & u64(0x7F)) << u64(56), u64(0))
    x |= np.where(length == 10, tenth << u64(63), u64(0))
    return length, x, np.where(length == 10, tenth, 0)


@cache
def _inline_masks() -> np.ndarray:
    """The bits a binary view keeps of its 3 inline words (row) for a value of 0 to 12 bytes
    (column; 12: all)."""
    kept = np.where(np.arange(12) < np.arange(13)[:, None], 0xFF, 0).astype(np.uint8)
    return kept.view("<u4").T.copy()


def _little_endian(
    payload: np.ndarray, offsets: np.ndarray, sizes: np.ndarray, width: int
) -> np.ndarray:
    """Each value's first ``sizes`` bytes (big-endian two's complement) as a little-endian
    integer of ``width`` bytes, sign-extended; a row of zeros for size 0."""
    starts = offsets[:-1]
    places = np.arange(width)
    if not len(payload):  # (no bytes at all: every size is 0, nothing is taken from it)
        payload = np.zeros(1, np.uint8)
    # (byte j of the little-endian number is the value's byte size - 1 - j)
    gathered = payload.take(starts[:, None] + (sizes - 1)[:, None] - places, mode="clip")
    negative = (sizes > 0) & (payload.take(starts, mode="clip") >= 0x80)
    extension = np.where(negative, 0xFF, 0).astype(np.uint8)
    return np.where(places < sizes[:, None], gathered, extension[:, None])


def replaced(
    texts: pa.StringArray, rows: np.ndarray, patched: Sequence[str | None] | pa.Array
) -> pa.StringArray:
    """The string array ``texts`` with the values at ``rows`` (ascending) set to ``patched``,
    without taking the whole column through Python."""
    mask = np.zeros(len(texts), np.bool_)
    mask[rows] = True
    return pc.replace_with_mask(texts, pa.array(mask), pa.array(patched, pa.string()))
