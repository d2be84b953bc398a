"""Canal-JSON batches straight into changelog Arrow batches, with the compiled scanner.

The Spark decode stage's fast path.  ``_canal_scan`` (C, see its header for why) reads a whole
Arrow column of messages and writes the changelog's buffers directly: database, table, op,
commit ts, the before and after images as map entries, and each message's *shape* number
(the shapes' texts, one JSON array each of database, table, ``mysqlType``, ``pkNames`` and
column names, written once per run of messages that share one).  Python then works per shape,
not per message: a shape the decoder's ``shape_of`` accepts is fast; every message of another
shape, and every message the scanner marked slow, is decoded by the careful path (the
``careful(i)`` callback, which adds message ``i``'s rows to the sink or turns it into a dead
letter).  The two are merged back into message order (:mod:`ticdc_spark.codec.arrowrows`).

This module knows the changelog only through the sink (``sink.arrow_schema()``,
``sink.row_kind``) and the decoder only through ``shape_of``.  Without the compiled module
(no C compiler at install time: :mod:`.native`) :func:`decode_batch` returns None and the
caller takes the pure Python path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.codec.arrowrows import CarefulRows, Tables, merged
from ticdc_spark.codec.base import ChangelogSink
from ticdc_spark.codec.canal_json import native

__all__ = ["decode_batch"]

_OPS = ("", "INSERT", "UPDATE", "DELETE")  # the scanner's op codes

# A shape text -> (the changelog schema JSON, (database, table)), or None: the careful path.
ShapeOf = Callable[[str], "tuple[str, tuple[str, str]] | None"]


def decode_batch(
    batch: pa.RecordBatch, careful: Callable[[int], None], sink: ChangelogSink, shape_of: ShapeOf
) -> pa.RecordBatch | None:
    """The changelog batch of an Arrow batch of Kafka records, or None without the scanner."""
    if native.scanner is None:
        return None
    values = _binary(batch.column("value"))
    scan = _scan(values)
    if scan is None:
        return None
    n = len(values)
    shapes = [shape_of(text) for text in _strings(scan.shape_offsets, scan.shape_bytes).to_pylist()]
    shape_ids = np.frombuffer(scan.shape_ids, np.int32)
    fast = np.frombuffer(scan.slow, np.uint8) == 0
    if values.null_count:  # (a null's offsets may point anywhere)
        fast &= values.is_valid().to_numpy(zero_copy_only=False)
    fast &= np.array([s is not None for s in shapes] + [False])[shape_ids]  # ([-1]: False)
    rows = _scanned_rows(batch, scan, n, sink)
    tables = Tables(sink.row_kind)
    shape_slot = np.array([tables.slot(s[1]) if s else -1 for s in shapes] + [-1], np.int64)
    shape_text = np.array([tables.text(s[0]) if s else -1 for s in shapes] + [-1], np.int64)
    slots, texts = shape_slot[shape_ids], shape_text[shape_ids]
    kept = np.flatnonzero(fast)
    careful_rows = CarefulRows(careful, sink)
    for i in np.flatnonzero(~fast).tolist():
        careful_rows(i)
    own = rows if len(kept) == n else rows.filter(pa.array(fast))
    return merged((own, kept, slots[kept], texts[kept]), careful_rows.rows(), tables, sink.row_kind)


def _binary(values: pa.Array) -> pa.BinaryArray:
    return values if pa.types.is_binary(values.type) else values.cast(pa.binary())


def _scan(values: pa.BinaryArray) -> Any:
    """Run the scanner over a binary Arrow array: a ``_canal_scan.ScanResult``, the scanner's
    buffers by name (see ``_canal_scan.c``); None for an array it cannot read."""
    n = len(values)
    _, offsets, data = values.buffers()
    if offsets is None:
        return None
    offsets = np.frombuffer(offsets, np.int32, n + 1, values.offset * 4)
    return native.scanner.scan(data if data is not None else b"", offsets)


def _strings(offsets: bytes, data: bytes, valid: bytes | None = None) -> pa.StringArray:
    count = len(offsets) // 4 - 1
    bitmap = None if valid is None else pa.py_buffer(valid)
    return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data), bitmap)


def _image(image: Any, n: int) -> pa.MapArray:
    """A before/after column from the scanner's map buffers (a ``ScanImage``)."""

    return pa.MapArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(image.map_offsets)]),
        _strings(image.key_offsets, image.keys),
        _strings(image.value_offsets, image.values, image.value_validity),
        type=pa.map_(pa.string(), pa.string()),
        mask=pa.array(np.frombuffer(image.nulls, np.bool_)),
    )


def _scanned_rows(batch: pa.RecordBatch, scan: Any, n: int, sink: ChangelogSink) -> pa.RecordBatch:
    """Every message as a changelog row, from the scanner's buffers (slow ones hold blanks)."""

    schema = sink.arrow_schema()
    text, binary = pa.string(), pa.binary()
    columns = {
        "kind": pa.repeat(pa.scalar(sink.row_kind), n),
        "op": pa.array(_OPS).take(pa.array(np.frombuffer(scan.ops, np.uint8))),
        "database": _strings(scan.database_offsets, scan.database_bytes),
        "table": _strings(scan.table_offsets, scan.table_bytes),
        "commit_ts": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(scan.commit_ts)]),
        "schema": pa.nulls(n, text),
        "key_only": pa.array(np.frombuffer(scan.key_only, np.bool_)),
        "sql": pa.nulls(n, text),
        "ddl_type": pa.nulls(n, text),
        "topic": pc.fill_null(batch.column("topic"), ""),
        "partition": pc.fill_null(batch.column("partition"), 0).cast(pa.int32()),
        "offset": pc.fill_null(batch.column("offset"), 0).cast(pa.int64()),
        "seq": pa.array(np.zeros(n, np.int32)),
        "error": pa.nulls(n, text),
        "key": pa.nulls(n, binary),
        "value": pa.nulls(n, binary),
        "before": _image(scan.before, n),
        "after": _image(scan.after, n),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
