"""Avro records of an Arrow batch into a changelog batch, a column at a time.

The Spark decode stage's path (:class:`~ticdc_spark.codec.base.ArrowBatchDecoder`).  One pass
over the records, in order: a row record whose (value, key) schema pair the decoder has a
plan for is read with fastavro (every check of the one decode path: framing, the body read
to its last byte, ``_tidb_op``, the commit ts) and kept in its plan's group; every other
record (a tombstone, a schema pair met for the first time, a record that does not read) goes
to ``careful(i)``, the one decode path, which also makes the plans and keeps the decoder's
state as decoding one record at a time does.  Then each group's values become changelog text
a column at a time (:mod:`.columns`), the images are assembled as Arrow maps, and a record
with a value the columns could not convert goes to ``careful(i)`` too.  The rows of both
are merged back into record order (:mod:`ticdc_spark.codec.arrowrows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ticdc_spark.codec.arrowrows import CarefulRows, Tables, merged
from ticdc_spark.codec.avro.decoder import read_record, row_kind_and_ts
from ticdc_spark.codec.avro.wire import HEADER_SIZE
from ticdc_spark.codec.base import ChangelogSink
from ticdc_spark.model import RowKind, TableSchema

if TYPE_CHECKING:
    from ticdc_spark.codec.avro.decoder import AvroDecoder

__all__ = ["decode_batch"]


class _Group:
    """The records of one plan: (record index, its datum, UPDATE?, commit ts) each."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.records: list[tuple[int, dict[str, Any], bool, int]] = []


_SKIPPED = _Group(None)  # the records of a table the filter leaves out


def decode_batch(
    decoder: AvroDecoder, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
) -> Any:
    """The changelog batch of an Arrow batch of Kafka records."""
    import numpy as np
    import pyarrow as pa

    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    careful_rows = CarefulRows(careful, sink)
    groups: dict[int, _Group] = {}
    by_header: dict[bytes, _Group] = {}  # (value and key headers: one plan each)
    update = RowKind.UPDATE
    for i, value in enumerate(values):
        if not value:
            careful_rows(i)
            continue
        key = keys[i] or b""
        header = value[:HEADER_SIZE] + key[:HEADER_SIZE]
        group = by_header.get(header)
        if group is None:
            plan = decoder.known_plan(value, key)
            if plan is None:  # (the one decode path makes the plan)
                careful_rows(i)
                continue
            if decoder.skips(plan.table):
                group = _SKIPPED
            elif (group := groups.get(id(plan))) is None:
                group = groups[id(plan)] = _Group(plan)
            by_header[header] = group
        if group is _SKIPPED:
            continue
        try:
            datum = read_record(group.plan.record, value, "value")
            kind, commit_ts = row_kind_and_ts(datum)
        except Exception:  # (the one decode path says what is wrong with it)
            careful_rows(i)
            continue
        group.records.append((i, datum, kind is update, commit_ts))
    tables = Tables(sink.row_kind)
    parts, unconverted = [], []
    for group in groups.values():
        part, bad = _group_rows(group, batch, tables, sink)
        if part is not None:
            parts.append(part)
        unconverted.extend(bad)
    for i in sorted(unconverted):
        careful_rows(i)
    if parts:
        rows = pa.concat_batches([p[0] for p in parts])
        sources, slots, texts = (np.concatenate([p[j] for p in parts]) for j in (1, 2, 3))
    else:
        rows = pa.RecordBatch.from_pylist([], schema=sink.arrow_schema())
        sources = slots = texts = np.zeros(0, np.int64)
    own = (rows, sources, slots, texts)
    return merged(own, careful_rows.rows(), tables, sink.row_kind)


def _group_rows(
    group: _Group, batch: Any, tables: Tables, sink: ChangelogSink
) -> tuple[Any, list[int]]:
    """((rows, their records, table numbers, schema numbers) or None, the records left to
    the one decode path)."""
    import numpy as np
    import pyarrow as pa

    plan, n = group.plan, len(group.records)
    where, datums, updated, commit_ts = zip(*group.records, strict=True)
    record = plan.record
    names = [field[0] for field in record.fields]
    positions = {name: j for j, name in enumerate(names)}
    if any(name not in positions for name in plan.key):
        return None, list(where)  # (a key column the value lacks: the one path says so)
    columns = _columns(datums, names)
    texts, bad_rows = [], set()
    for convert, column in zip(record.columns, columns, strict=True):
        text, bad = convert(column)
        texts.append(text)
        bad_rows.update(bad)
    k = len(names)
    flat = pa.concat_arrays(texts) if texts else pa.array([], pa.string())
    map_type = sink.arrow_schema().field("after").type
    rows_of = np.arange(n, dtype=np.int64)
    after = pa.MapArray.from_arrays(
        pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)),
        pa.array(names, pa.string()).take(pa.array(np.tile(np.arange(k), n))),
        flat.take(pa.array((np.arange(k) * n + rows_of[:, None]).ravel())),
        type=map_type,
    )
    updates = np.array(updated, np.bool_)
    before = _before(flat, plan.key, [positions[name] for name in plan.key], updates, map_type)
    indices = np.array(where, np.int64)
    rows = _rows(plan.table, commit_ts, batch, indices, (before, after), updates, sink)
    slots = np.full(n, tables.slot((plan.table.database, plan.table.table)), np.int64)
    schema_texts = np.full(n, tables.text(plan.table_json), np.int64)
    if bad_rows:
        keep = np.ones(n, np.bool_)
        keep[list(bad_rows)] = False
        rows = rows.filter(pa.array(keep))
        indices, slots, schema_texts = indices[keep], slots[keep], schema_texts[keep]
    return (rows, indices, slots, schema_texts), [where[r] for r in bad_rows]


def _columns(datums: Sequence[dict[str, Any]], names: list[str]) -> list[Any]:
    if not names:
        return []
    if len(names) == 1:
        return [[datum[names[0]] for datum in datums]]
    return list(zip(*map(itemgetter(*names), datums), strict=True))


def _before(flat: Any, names: tuple[str, ...], key: list[int], updates: Any, map_type: Any) -> Any:
    """An UPDATE's before image: its handle-key columns (Avro carries no old image)."""
    import numpy as np
    import pyarrow as pa

    n = len(updates)
    if not key or not updates.any():
        return pa.nulls(n, map_type)
    rows = np.flatnonzero(updates)
    offsets = np.zeros(n + 1, np.int32)
    offsets[1:] = np.cumsum(np.where(updates, len(key), 0))
    return pa.MapArray.from_arrays(
        pa.array(offsets),
        pa.array(list(names) * len(rows), pa.string()),
        flat.take(pa.array((np.array(key) * n + rows[:, None]).ravel())),
        type=map_type,
        mask=pa.array(~updates),
    )


def _rows(
    table: TableSchema,
    commit_ts: Sequence[int],
    batch: Any,
    indices: Any,
    images: tuple[Any, Any],
    updates: Any,
    sink: ChangelogSink,
) -> Any:
    """The group's changelog rows, as :class:`~ticdc_spark.changelog.ChangelogBuilder` writes
    them (the ``schema`` column is filled in when merging)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n, (before, after) = len(indices), images
    at = pa.array(indices)
    schema = sink.arrow_schema()
    text, binary = pa.string(), pa.binary()
    columns = {
        "kind": pa.repeat(pa.scalar(sink.row_kind), n),
        "op": pa.array([RowKind.INSERT.value, RowKind.UPDATE.value]).take(
            pa.array(updates.astype(np.int8))
        ),
        "database": pa.repeat(pa.scalar(table.database), n),
        "table": pa.repeat(pa.scalar(table.table), n),
        "commit_ts": pa.array(commit_ts, pa.int64()),
        "schema": pa.nulls(n, text),
        "key_only": pa.repeat(pa.scalar(False), n),
        "sql": pa.nulls(n, text),
        "ddl_type": pa.nulls(n, text),
        "topic": pc.fill_null(batch.column("topic").take(at), ""),
        "partition": pc.fill_null(batch.column("partition").take(at), 0).cast(pa.int32()),
        "offset": pc.fill_null(batch.column("offset").take(at), 0).cast(pa.int64()),
        "seq": pa.array(np.zeros(n, np.int32)),
        "error": pa.nulls(n, text),
        "key": pa.nulls(n, binary),
        "value": pa.nulls(n, binary),
        "before": before,
        "after": after,
    }
    return pa.RecordBatch.from_arrays([columns[f.name] for f in schema], schema=schema)
