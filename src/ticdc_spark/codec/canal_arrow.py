"""Canal-JSON batches straight into changelog Arrow batches, with the compiled scanner.

The Spark decode stage's fast path.  ``_canal_scan`` (C, see its header for why) reads a whole
Arrow column of messages and writes the changelog's buffers directly: database, table, op,
commit ts, the before and after images as map entries, and each message's *shape* number
(the shapes' texts, one JSON array each of database, table, ``mysqlType``, ``pkNames`` and
column names, written once per run of messages that share one).  Python then
works per shape, not per message: a shape the decoder can plan, with no binary column (whose
Latin-1 text becomes base64), is fast; every message of another shape, and every message the
scanner marked slow, is decoded by the careful path (the ``careful(i)`` callback, which adds
message ``i``'s rows to the builder or turns it into a dead letter).  The two are merged back
into message order, and the ``schema`` column is recomputed over the merged rows so that a
null still means "as the previous row of this table".

Without the compiled module (no C compiler at install time) :func:`decode_batch` returns
None and the caller takes the pure Python path; :func:`native_scanner` says which is in use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ticdc_spark.changelog import ROW, ChangelogBuilder, arrow_schema

if TYPE_CHECKING:
    from ticdc_spark.codec.canal_json import CanalJSONDecoder

try:
    from ticdc_spark import _canal_scan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the pure Python path is used
    _canal_scan = None

__all__ = ["decode_batch", "native_scanner"]

_OPS = ("", "INSERT", "UPDATE", "DELETE")  # the scanner's op codes


def native_scanner() -> bool:
    """Whether the compiled scanner is installed."""
    return _canal_scan is not None


def decode_batch(
    decoder: CanalJSONDecoder,
    batch: Any,
    careful: Callable[[int], None],
    builder: ChangelogBuilder,
) -> Any:
    """The changelog batch of an Arrow batch of Kafka records, or None without the scanner."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if _canal_scan is None:
        return None
    values = batch.column("value")
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    n = len(values)
    _, offsets, data = values.buffers()
    if offsets is None:
        return None
    offsets = np.frombuffer(offsets, np.int32, n + 1, values.offset * 4)
    out = _canal_scan.scan(data if data is not None else b"", offsets)
    fast = np.frombuffer(out.slow, np.uint8) == 0
    if values.null_count:  # (a null's offsets may point anywhere)
        fast &= values.is_valid().to_numpy(zero_copy_only=False)
    shape_ids = np.frombuffer(out.shape_ids, np.int32)  # -1: a slow message
    count = len(out.shape_offsets) // 4 - 1
    shapes = pa.StringArray.from_buffers(
        count, pa.py_buffer(out.shape_offsets), pa.py_buffer(out.shape_bytes)
    )
    plans = [decoder.arrow_shape(text) for text in shapes.to_pylist()]
    fast &= np.array([p is not None for p in plans] + [False])[shape_ids]  # ([-1]: False)

    rows = _scanned_rows(batch, out, n)
    tables = _Tables()
    shape_slot = np.array([tables.slot(p[1]) if p else -1 for p in plans] + [-1], np.int64)
    shape_text = np.array([tables.text(p[0]) if p else -1 for p in plans] + [-1], np.int64)
    if fast.all():
        merged = rows
        slots, texts = shape_slot[shape_ids], shape_text[shape_ids]
        own = np.full(n, -1, np.int64)
    else:
        kept = np.flatnonzero(fast)
        slow_rows, slow_from = _careful_rows(np.flatnonzero(~fast), careful, builder)
        order = np.argsort(np.concatenate([kept, slow_from]), kind="stable")
        merged = pa.concat_batches([rows.filter(pa.array(fast)), slow_rows]).take(order)
        slow_slots, slow_texts, slow_own = tables.of_rows(slow_rows)
        slots = np.concatenate([shape_slot[shape_ids[kept]], slow_slots])[order]
        texts = np.concatenate([shape_text[shape_ids[kept]], slow_texts])[order]
        own = np.concatenate([np.full(len(kept), -1, np.int64), slow_own])[order]
    is_row = pc.equal(merged.column("kind"), ROW).to_numpy(zero_copy_only=False)
    schema = tables.schema_column(slots, texts, own, is_row)
    return merged.set_column(merged.schema.get_field_index("schema"), "schema", schema)


def _scanned_rows(batch: Any, out: Any, n: int) -> Any:
    """Every message as a changelog row, from the scanner's buffers (slow ones hold blanks)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def strings(offsets: bytes, data: bytes, valid: bytes | None = None) -> Any:
        count = len(offsets) // 4 - 1
        bitmap = None if valid is None else pa.py_buffer(valid)
        return pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data), bitmap)

    def image(im: Any) -> Any:  # a ScanImage
        return pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, pa.py_buffer(im.map_offsets)]),
            strings(im.key_offsets, im.keys),
            strings(im.value_offsets, im.values, im.value_validity),
            type=pa.map_(pa.string(), pa.string()),
            mask=pa.array(np.frombuffer(im.nulls, np.bool_)),
        )

    schema = arrow_schema()
    text, binary = pa.string(), pa.binary()
    columns = {
        "kind": pa.repeat(pa.scalar(ROW), n),
        "op": pa.array(_OPS).take(pa.array(np.frombuffer(out.ops, np.uint8))),
        "database": strings(out.database_offsets, out.database_bytes),
        "table": strings(out.table_offsets, out.table_bytes),
        "commit_ts": pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(out.commit_ts)]),
        "schema": pa.nulls(n, text),
        "key_only": pa.array(np.frombuffer(out.key_only, np.bool_)),
        "sql": pa.nulls(n, text),
        "ddl_type": pa.nulls(n, text),
        "topic": pc.fill_null(batch.column("topic"), ""),
        "partition": pc.fill_null(batch.column("partition"), 0).cast(pa.int32()),
        "offset": pc.fill_null(batch.column("offset"), 0).cast(pa.int64()),
        "seq": pa.array(np.zeros(n, np.int32)),
        "error": pa.nulls(n, text),
        "key": pa.nulls(n, binary),
        "value": pa.nulls(n, binary),
        "before": image(out.before),
        "after": image(out.after),
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)


def _careful_rows(
    indices: Any, careful: Callable[[int], None], builder: ChangelogBuilder
) -> tuple[Any, Any]:
    """The careful path's rows for messages ``indices``, and the message each row came from."""
    import numpy as np

    sources: list[int] = []
    for i in indices.tolist():
        before = len(builder)
        careful(i)
        sources.extend([i] * (len(builder) - before))
    return builder.to_batch(), np.array(sources, np.int64)


class _Tables:
    """Numbers for tables and schema texts, and the ``schema`` column computed from them."""

    def __init__(self) -> None:
        self.slots: dict[tuple[str, str], int] = {}
        self.texts: dict[str, int] = {}

    def slot(self, table: tuple[str, str]) -> int:
        return self.slots.setdefault(table, len(self.slots))

    def text(self, schema_text: str) -> int:
        return self.texts.setdefault(schema_text, len(self.texts))

    def of_rows(self, rows: Any) -> tuple[Any, Any, Any]:
        """For the careful path's rows: table numbers, the schema in effect for each ROW row
        (its own, or its table's previous one in the builder's order), and the schema each
        non-ROW row carries itself (-1: none)."""
        import numpy as np

        slots, texts, own = [], [], []
        last: dict[int, int] = {}
        for kind, database, table, text in zip(
            rows.column("kind").to_pylist(),
            rows.column("database").to_pylist(),
            rows.column("table").to_pylist(),
            rows.column("schema").to_pylist(),
            strict=True,
        ):
            slot = self.slot((database or "", table or ""))
            number = -1 if text is None else self.text(text)
            if number >= 0:
                last[slot] = number
            slots.append(slot)
            texts.append(last.get(slot, -1) if kind == ROW else number)
            own.append(-1 if kind == ROW else number)
        return (
            np.array(slots, np.int64),
            np.array(texts, np.int64),
            np.array(own, np.int64),
        )

    def schema_column(self, slots: Any, texts: Any, own: Any, is_row: Any) -> Any:
        """Each row's schema JSON where its table's schema first appears or changes.

        ``texts`` is the schema in effect for each row (-1: none known); non-ROW rows keep the
        schema they carry (``own``).  A ROW row writes its schema when the previous row of its
        table that has one (in this batch) had another.
        """
        import numpy as np
        import pyarrow as pa

        if not self.texts:
            return pa.nulls(len(slots), pa.string())
        known = np.flatnonzero(texts >= 0)
        by_table = np.argsort(slots[known], kind="stable")
        ordered_slots, ordered_texts = slots[known][by_table], texts[known][by_table]
        changed = np.ones(len(known), np.bool_)
        changed[1:] = (ordered_slots[1:] != ordered_slots[:-1]) | (
            ordered_texts[1:] != ordered_texts[:-1]
        )
        write = np.zeros(len(slots), np.bool_)
        write[known[by_table]] = changed
        ids = np.where(is_row, texts, own)
        write = np.where(is_row, write, own >= 0)
        names = pa.array(list(self.texts), pa.string())
        return names.take(pa.array(np.where(write, ids, 0), mask=~write))
