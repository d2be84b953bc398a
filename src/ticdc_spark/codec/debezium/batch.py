"""Debezium's Arrow batch path: TiCDC's records of known table shapes, column by column.

TiCDC writes a row's value as ``{"payload":{..},"schema":{..}}`` and its key the same way.
The records of one batch whose schema texts (the value's and the key's tails) are those of a
table shape the careful path has planned are found with Arrow's ``ends_with`` over the whole
batch, shape by shape.  Their keys must name the shape's key columns (one RE2 expression over
the plain keys, msgspec for the others); only their payloads are parsed (msgspec, straight
from the Arrow buffer, into strict typed structs that skip the ``source`` members the
changelog does not need); their images become changelog text column by column (Arrow for
string and integer columns, the shape's converter for the others).  Every other record, and
any record whose key or payload is not what this path expects (bytes that are not UTF-8, a
value of another JSON type, a nested value, an integer past int64, a missing image, another
table), goes through ``careful(i)``, the one decode path with every check, which also learns
the shapes.  ``careful`` sees its records in record order (the guesses of tables without a
schema depend on it).  The two are merged back into record order
(:mod:`ticdc_spark.codec.arrowrows`).
"""

from __future__ import annotations

import contextlib
import functools
import heapq
from collections.abc import Callable, Iterable
from decimal import Decimal
from itertools import chain
from typing import Any, Literal

import msgspec
import orjson

from ticdc_spark.codec.arrowrows import (
    CarefulRows,
    Tables,
    image_column,
    merged,
    own_rows,
    row_batch,
)
from ticdc_spark.codec.base import ChangelogSink
from ticdc_spark.codec.common import LRUCache
from ticdc_spark.codec.debezium.plan import Image, Plan
from ticdc_spark.codec.debezium.typed import (
    KEY_PAYLOAD,
    NOT_TYPED,
    TICDC_HEAD,
    CommitTs,
    Value,
    schema_text,
    utf8,
)

__all__ = ["decode_batch"]

_MAX_SHAPES = 32  # (per batch: the records of further shapes take the careful path)

_CONVERSION = (LookupError, TypeError, AttributeError, ValueError, ArithmeticError)
Shapes = LRUCache[tuple[bytes, bytes], tuple[Plan, tuple[str, ...]]]


def decode_batch(
    shapes: Shapes, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
) -> Any:
    """The changelog batch of an Arrow batch of Kafka records (see the module)."""
    import numpy as np
    import pyarrow.compute as pc

    values, keys = _binary(batch.column("value")), _binary(batch.column("key"))
    n = len(values)
    candidate = pc.and_(pc.starts_with(values, TICDC_HEAD), pc.starts_with(keys, TICDC_HEAD))
    undecided = candidate.fill_null(False).to_numpy(zero_copy_only=False) & _utf8(values, keys)
    carefully = _InOrder(CarefulRows(careful, sink), np.flatnonzero(~undecided))
    reader = _Reader((values, keys), batch, sink, Tables(sink.row_kind))
    for first in np.flatnonzero(undecided).tolist():
        if not undecided[first]:
            continue  # (taken with an earlier record's shape)
        tails = _tails(values[first].as_py(), keys[first].as_py())
        shape = None if tails is None or len(reader.parts) >= _MAX_SHAPES else shapes.get(tails)
        if tails is None or shape is None:
            undecided[first] = False
            carefully.run(first)  # (learns the shape, if it is TiCDC's)
            continue
        match = pc.and_(pc.ends_with(values, tails[0]), pc.ends_with(keys, tails[1]))
        taken = np.flatnonzero(match.fill_null(False).to_numpy(zero_copy_only=False) & undecided)
        undecided[taken] = False
        carefully.defer(reader.read(shape, taken, (len(tails[0]), tails[1])))
    carefully.flush(n)
    own = own_rows(reader.parts, sink)
    return merged(own, carefully.rows.rows(), reader.tables, sink.row_kind)


class _InOrder:
    """The careful path's records, decoded in record order: a record is decoded once every
    deferred record before it has been."""

    def __init__(self, rows: CarefulRows, deferred: Any) -> None:
        self.rows = rows
        self.deferred: list[int] = deferred.tolist()  # (a heap: ascending already is one)

    def defer(self, records: Any) -> None:
        for i in records.tolist():
            heapq.heappush(self.deferred, i)

    def run(self, i: int) -> None:
        """Decodes the deferred records before ``i``, then ``i``."""
        self.flush(i)
        self.rows(i)

    def flush(self, end: int) -> None:
        """Decodes the deferred records before ``end``."""
        deferred = self.deferred
        while deferred and deferred[0] < end:
            self.rows(heapq.heappop(deferred))


def _utf8(*columns: Any) -> Any:
    """Whether each record's columns are UTF-8 (the full path's orjson requires it; msgspec
    does not check the members it skips): by one Arrow cast when all are."""
    import numpy as np
    import pyarrow as pa

    valid = np.ones(len(columns[0]), np.bool_)
    for column in columns:
        try:
            column.cast(pa.string())
        except pa.ArrowInvalid:
            valid &= np.array([v is None or utf8(v) for v in column.to_pylist()], np.bool_)
    return valid


def _binary(column: Any) -> Any:
    import pyarrow as pa

    return column if pa.types.is_binary(column.type) else column.cast(pa.binary())


def _tails(value: bytes, key: bytes) -> tuple[bytes, bytes] | None:
    """The schema texts ending a record TiCDC wrote: the value's and the key's."""
    value_tail, key_tail = schema_text(value), schema_text(key)
    if value_tail is None or key_tail is None:
        return None
    return value_tail, key_tail


class _Reader:
    """Reads the records of one shape at a time into changelog rows (``parts``)."""

    def __init__(
        self, columns: tuple[Any, Any], batch: Any, sink: ChangelogSink, tables: Tables
    ) -> None:
        self.values, self.keys = (_Buffers(column) for column in columns)
        self.batch = batch
        self.sink = sink
        self.tables = tables
        self.parts: list[tuple[Any, Any, Any, Any]] = []

    def read(
        self, shape: tuple[Plan, tuple[str, ...]], records: Any, tails: tuple[int, bytes]
    ) -> Any:
        """Adds the rows of ``records`` (of the shape's plan and key names; ``tails``: the
        length of the value's schema text, the key's schema text) to ``parts``; returns the
        records the careful path must decode."""
        import numpy as np

        plan, key_names = shape
        schema = plan.schema
        table = (schema.database, schema.table)
        keyed = _key_names_are(self.keys, records, tails[1], key_names)
        slow = records[~keyed].tolist()
        records = records[keyed]
        starts = self.values.offsets[records] + len(TICDC_HEAD)
        ends = self.values.offsets[records + 1] - tails[0]
        kept, rows, slow_payloads = _payload_rows(
            self.values.data, records, (starts, ends), table, plan.exact
        )
        slow.extend(slow_payloads)
        images, bad = _images(plan, rows)
        if plan.sign_unknown:
            for row in rows:
                plan.note_signs(row[2:])
        if bad:
            slow.extend(kept[i] for i in bad)
            good = [i for i in range(len(kept)) if i not in bad]
            kept, rows = [kept[i] for i in good], [rows[i] for i in good]
            images, _ = _images(plan, rows)
        if kept:
            text = plan.changelog_schema
            if text is None:
                text = plan.changelog_schema = self.sink.schema_text(schema) or ""
            rows_from = np.array(kept, np.int64)
            batch = self._batch(table, rows, images, rows_from)
            count = len(kept)
            slots = np.full(count, self.tables.slot(table), np.int64)
            self.parts.append((batch, rows_from, slots, np.full(count, self.tables.text(text))))
        return np.array(slow, np.int64)

    def _batch(self, table: tuple[str, str], rows: list[Any], images: Any, kept: Any) -> Any:
        import pyarrow as pa

        count = len(rows)
        columns = {
            "op": pa.array([row[0] for row in rows], pa.string()),
            "database": pa.repeat(pa.scalar(table[0]), count),
            "table": pa.repeat(pa.scalar(table[1]), count),
            "commit_ts": pa.array([row[1] for row in rows], pa.int64()),
            "before": images[0],
            "after": images[1],
        }
        return row_batch(self.sink, self.batch, kept, columns)


class _Buffers:
    """A binary Arrow column's offsets and bytes, to slice records' parts from."""

    def __init__(self, column: Any) -> None:
        import numpy as np

        _, offsets, data = column.buffers()
        self.column = column
        self.offsets = np.frombuffer(offsets, np.int32, len(column) + 1, column.offset * 4)
        self.data = memoryview(data if data is not None else b"")


def _key_names_are(keys: _Buffers, records: Any, tail: bytes, names: tuple[str, ...]) -> Any:
    """Whether each record's key (ending with the key schema text ``tail``) has a payload of
    the columns ``names``, the key columns of the shape's plan (the careful path plans by
    them): by one regular expression over the keys for plain keys (scalars without escapes),
    by msgspec for the others."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    plain = pc.match_substring_regex(keys.column.take(pa.array(records)), _key_pattern(names, tail))
    same = plain.fill_null(False).to_numpy(zero_copy_only=False).copy()
    other = np.flatnonzero(~same)
    if len(other):
        data, at = keys.data, records[other]
        starts, ends = keys.offsets[at] + len(TICDC_HEAD), keys.offsets[at + 1] - len(tail)
        same[other] = [
            _names(data[start:end]) == names
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
        ]
    return same


# A JSON scalar orjson reads as it is: an integer of at most 18 digits, a string without
# escapes or control characters, true, false, null.
_PLAIN_SCALAR = r'(?:-?(?:0|[1-9][0-9]{0,17})|"[^"\\\x00-\x1f]*"|true|false|null)'


def _key_pattern(names: tuple[str, ...], tail: bytes) -> str:
    """The whole of a key TiCDC writes with these columns and this schema text."""
    members = ",".join(
        _literal(orjson.dumps(name).decode()) + ":" + _PLAIN_SCALAR for name in names
    )
    return f"^{_literal(TICDC_HEAD.decode())}\\{{{members}\\}}{_literal(tail.decode())}$"


def _literal(text: str) -> str:
    """``text`` as a regular expression (RE2) matching itself: ASCII other than letters and
    digits as hex escapes."""
    return "".join(c if not c.isascii() or c.isalnum() else f"\\x{ord(c):02x}" for c in text)


def _names(key_payload: memoryview) -> tuple[str, ...] | None:
    try:
        return tuple(KEY_PAYLOAD.decode(key_payload))
    except NOT_TYPED:
        return None


Row = tuple[str, int, Image, Image]  # op, commit ts, before, after (wire values)


def _payload_rows(
    data: memoryview, records: Any, spans: tuple[Any, Any], table: tuple[str, str], exact: bool
) -> tuple[list[int], list[Row], list[int]]:
    """The records whose payload (from ``spans``: starts, ends) the fast path takes, their
    rows, and the others; ``exact``: the table has DECIMAL columns, whose numbers are read
    from their text (:mod:`.typed`)."""
    decode, op_of = _payload_reader(table, exact)
    starts, ends = spans
    payloads = [data[start:end] for start, end in zip(starts.tolist(), ends.tolist(), strict=True)]
    kept: list[int] = records.tolist()
    slow: list[int] = []
    try:
        read = list(map(decode, payloads))
    except NOT_TYPED:  # (some record is not of this shape: find which, one by one)
        read, taken = [], []
        for i, payload in zip(kept, payloads, strict=True):
            try:
                read.append(decode(payload))
                taken.append(i)
            except NOT_TYPED:
                slow.append(i)
        kept = taken
    rows = [(op_of[type(p)], p.source.commit_ts, p.before, p.after) for p in read]
    return kept, rows, slow


@functools.lru_cache(maxsize=256)
def _payload_reader(table: tuple[str, str], exact: bool = False) -> tuple[Any, dict[type, str]]:
    """msgspec's reader of the payloads TiCDC writes for rows of ``table``, one struct per op
    (``op`` the tag): the table, a commit ts and the images each op has, all checked while
    parsing (an UPDATE's before may be null: old value off); and each struct's changelog op.
    ``exact``: images of any JSON, numbers exact (the converters check the values)."""
    name: Any = Literal  # (Literal of a runtime value)
    source = msgspec.defstruct(
        "Source",
        [("db", name[table[0]]), ("table", name[table[1]]), ("commit_ts", CommitTs)],
        gc=False,
    )
    image: Any = dict[str, Any] if exact else dict[str, Value]
    structs: dict[str, list[tuple[str, Any] | tuple[str, Any, Any]]] = {
        "INSERT": [("source", source), ("after", image), ("before", None, None)],
        "UPDATE": [("source", source), ("after", image), ("before", image | None, None)],
        "DELETE": [("source", source), ("before", image), ("after", None, None)],
    }
    tags = {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}
    types = {
        op: msgspec.defstruct(op.title(), fields, tag_field="op", tag=tags[op], gc=False)
        for op, fields in structs.items()
    }
    union = types["INSERT"] | types["UPDATE"] | types["DELETE"]
    reader = msgspec.json.Decoder(union, float_hook=Decimal if exact else None)
    return reader.decode, {struct: op for op, struct in types.items()}


def _images(plan: Plan, rows: list[Row]) -> tuple[tuple[Any, Any], set[int]]:
    """The before and after columns of the rows, and the rows (by position) a value of which
    the shape's converters refuse (then no columns)."""
    try:
        return (
            _image_column(plan, [row[2] for row in rows]),
            _image_column(plan, [row[3] for row in rows]),
        ), set()
    except _CONVERSION:
        pass
    bad = set()
    for i, row in enumerate(rows):
        try:
            _values(plan, row[2:])
        except _CONVERSION:
            bad.add(i)
    if not bad:
        raise ValueError(f"the images of {plan.schema.qualified_name} did not convert as a batch")
    return (None, None), bad


def _values(plan: Plan, images: Iterable[Image]) -> list[Any]:
    texts = plan.texts
    return [
        None if v is None else texts[name](v)
        for image in images
        if image is not None
        for name, v in image.items()
    ]


def _image_column(plan: Plan, images: list[Image]) -> Any:
    """A before/after column: each image's column names with its values' changelog texts,
    converted column by column when every image has the shape's columns in order (TiCDC
    writes them so), else value by value."""
    import numpy as np
    import pyarrow as pa

    present = [image for image in images if image is not None]
    names, count = plan.order, len(present)
    width = len(names)
    if not (names and set(map(len, present)) <= {width} and set(map(tuple, present)) <= {names}):
        return image_column(images, _values(plan, present))
    flat = list(chain.from_iterable(map(dict.values, present)))
    columns = [
        _column_texts(plan.columnar[j], plan.converters[j], flat[j::width]) for j in range(width)
    ]
    by_row = (np.arange(width) * count + np.arange(count)[:, None]).ravel()
    absent = [image is None for image in images]
    offsets = np.zeros(len(images) + 1, np.int32)
    np.cumsum(np.where(absent, 0, width).astype(np.int32), out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets),
        pa.array(names, pa.string()).take(pa.array(np.tile(np.arange(width), count))),
        pa.concat_arrays(columns).take(pa.array(by_row)),
        type=pa.map_(pa.string(), pa.string()),
        mask=pa.array(absent, pa.bool_()),
    )


_NULL = type(None)


def _column_texts(kind: type | None, convert: Any, values: list[Any]) -> Any:
    """The changelog texts of one column's values: by Arrow when the column's text is the
    value itself (a string) or its decimal digits (an integer) and every value is of that
    JSON type or null, else by the column's converter."""
    import pyarrow as pa

    if kind is not None and set(map(type, values)) <= {kind, _NULL}:
        if kind is str:
            return pa.array(values, pa.string())
        with contextlib.suppress(OverflowError):  # (past int64: read exactly, see .typed)
            return pa.array(values, pa.int64()).cast(pa.string())
    return pa.array([None if v is None else convert(v) for v in values], pa.string())
