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

import io
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastavro import schemaless_reader

from ticdc_spark.codec.arrowrows import (
    CarefulRows,
    OwnPart,
    Tables,
    merged,
    own_rows,
    row_batch,
)
from ticdc_spark.codec.avro.columns import as_arrow, column_text
from ticdc_spark.codec.avro.plan import ColumnText, Plan, Plans, Record
from ticdc_spark.codec.avro.vectorized import read_columns
from ticdc_spark.codec.avro.wire import HEADER_SIZE
from ticdc_spark.codec.base import ChangelogSink
from ticdc_spark.model import RowKind, TableSchema

__all__ = ["decode_batch"]


class _Group:
    """The records of one (value, key) header whose plan is known, and what they read as."""

    def __init__(self, plan: Plan, indices: list[int]) -> None:
        self.plan = plan
        self.indices = indices  # the records, ascending
        self.datums: list[dict[str, Any]] = []
        self.read: list[int] = []  # the records whose body read, ascending
        self.columns: dict[str, pa.Array] | None = None  # (read by numpy: Arrow arrays instead)


def decode_batch(
    plans: Plans, batch: pa.RecordBatch, careful: Callable[[int], None], sink: ChangelogSink
) -> pa.RecordBatch:
    """The changelog batch of an Arrow batch of Kafka records."""
    careful_rows = CarefulRows(careful, sink)
    values = batch.column("value").to_pylist()
    tables = Tables(sink.row_kind)
    parts, images, unread = [], [], []
    for whole in _groups(plans, batch, values, careful_rows):
        for group in _vectorized(whole, batch.column("value")):
            unread.extend(_read(group, values))
            if not group.read:
                continue
            part, image, bad = _group_rows(group, batch, tables, sink)
            if part is not None and image is not None:
                parts.append(part)
                images.append(image)
            unread.extend(bad)
    for i in sorted(unread):
        careful_rows(i)
    map_type = sink.arrow_schema().field("after").type
    if careful_rows.sources:  # (the careful rows have their images: each part gets its own)
        parts = [
            _with_after(part, image, map_type) for part, image in zip(parts, images, strict=True)
        ]
        return merged(own_rows(parts, sink), careful_rows.rows(), tables, sink.row_kind)
    # Only rows of the groups: their after images made at once in record order (one take of
    # the values), rather than each group's made and all of them taken into order again.
    own = own_rows(parts, sink)
    rows = merged(own, careful_rows.rows(), tables, sink.row_kind)
    if not images:
        return rows
    after = _after_images(images, np.argsort(own[1], kind="stable"), map_type)
    return rows.set_column(rows.schema.get_field_index("after"), "after", after)


class _Image:
    """A group's after images, still as its column texts: ``texts`` holds the ``names``
    columns one after the other (``n`` values each); the group's changelog rows are its
    records ``rows`` (those converted)."""

    def __init__(self, texts: pa.StringArray, names: list[str], n: int, rows: np.ndarray) -> None:
        self.texts, self.names, self.n, self.rows = texts, names, n, rows


def _after_images(images: list[_Image], order: np.ndarray, map_type: pa.DataType) -> pa.MapArray:
    """The after images of the groups' rows (taken one group after the other) in ``order``,
    as one Arrow map column: one take of the keys and one of the values (their positions:
    :func:`_entry_positions`)."""
    offsets, key_at, value_at = _entry_positions(images, order)
    values = (
        pa.concat_arrays([image.texts for image in images]) if images else pa.array([], pa.string())
    )
    names = pa.array([name for image in images for name in image.names], pa.string())
    return pa.MapArray.from_arrays(
        pa.array(offsets.astype(np.int32)),
        names.take(pa.array(key_at)),
        values.take(pa.array(value_at)),
        type=map_type,
    )


def _entry_positions(
    images: list[_Image], order: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(map offsets, each entry's key position, each entry's value position) of the groups'
    rows in ``order``, computed by numpy: row ``r`` of a group has its values at ``r``,
    ``n + r``, ``2n + r``, ... of the group's texts."""
    starts, strides, counts, key_starts = [], [], [], []
    values_at = keys_at = 0
    for image in images:
        rows, k = len(image.rows), len(image.names)
        starts.append(values_at + image.rows)
        strides.append(np.full(rows, image.n, np.int64))
        counts.append(np.full(rows, k, np.int64))
        key_starts.append(np.full(rows, keys_at, np.int64))
        values_at += len(image.texts)
        keys_at += k
    start, stride, count, key_start = (
        np.concatenate(a)[order] for a in (starts, strides, counts, key_starts)
    )
    offsets = np.zeros(len(count) + 1, np.int64)
    np.cumsum(count, out=offsets[1:])
    # (entry e of row r, its j = e - offsets[r]-th: key key_start + j, value start + stride*j;
    # each row's constant part repeated, the entry numbers added once)
    entry = np.arange(offsets[-1], dtype=np.int64)
    firsts = offsets[:-1]
    key_at = np.repeat(key_start - firsts, count) + entry
    if len({image.n for image in images}) == 1:  # (one stride: no repeat of it)
        value_at = np.repeat(start - stride * firsts, count) + images[0].n * entry
    else:
        value_at = np.repeat(start - stride * firsts, count) + np.repeat(stride, count) * entry
    return offsets, key_at, value_at


def _with_after(part: OwnPart, image: _Image, map_type: pa.DataType) -> OwnPart:
    """The part with its rows' after images."""
    rows = part[0]
    after = _after_images([image], np.arange(rows.num_rows), map_type)
    return (rows.set_column(rows.schema.get_field_index("after"), "after", after), *part[1:])


def _groups(
    plans: Plans, batch: pa.RecordBatch, values: list[bytes | None], careful: CarefulRows
) -> list[_Group]:
    """The records grouped by their headers (found by Arrow, not a loop over the records),
    each group with the plan its header has; every other record through ``careful``, in
    record order (the one decode path makes the plans, and a tombstone names its table's
    columns by the newest value schema of its table planned before it, as one record at a
    time does)."""
    codes = _header_codes(batch)
    keys = batch.column("key")
    groups: dict[int, _Group] = {}
    waiting = False  # (a header without a plan yet: the one path plans it on its first record)
    pending: list[int] = []  # records for the one decode path, before the plans are known
    for code, indices in _by_code(codes):
        if code < 0:  # (no value: a tombstone or an empty record)
            pending.extend(indices)
            continue
        first = indices[0]
        plan = plans.known_plan(values[first], keys[first].as_py() or b"")  # type: ignore[arg-type]
        if plan is None:
            waiting = True
            pending.extend(indices)
        elif not plans.skips(plan.table):
            groups[code] = _Group(plan, indices)
    if waiting:
        _plan_pending(plans, sorted(pending), (codes, values, keys), careful, groups)
    else:
        for i in sorted(pending):
            careful(i)
    return list(groups.values())


def _by_code(codes: np.ndarray) -> list[tuple[int, list[int]]]:
    """(header code, its records in ascending order) for each code."""
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    return [(int(codes[m[0]]), m.tolist()) for m in np.split(order, bounds) if len(m)]


def _plan_pending(
    plans: Plans,
    pending: list[int],
    records: tuple[np.ndarray, list[bytes | None], pa.Array],
    careful: CarefulRows,
    groups: dict[int, _Group],
) -> None:
    """The pending records in record order: each through ``careful`` until its header has a
    plan (the one decode path made it), the rest of that header's records into its group."""
    codes, values, keys = records
    known: dict[int, list[int]] = {}
    for i in pending:
        code = int(codes[i])
        if code in known:
            known[code].append(i)
            continue
        careful(i)
        if code >= 0 and (plan := plans.known_plan(values[i], keys[i].as_py() or b"")):  # type: ignore[arg-type]
            known[code] = []
            if not plans.skips(plan.table):
                groups[code] = _Group(plan, known[code])
            # (a filtered table: its records give nothing)


def _header_codes(batch: pa.RecordBatch) -> np.ndarray:
    """A number for each record's (value header, key header) pair; -1 without a value (or
    with an empty key)."""
    values, keys = batch.column("value"), batch.column("key")
    if pa.types.is_null(keys.type):
        keys = pa.nulls(len(keys), pa.binary())
    headers = pc.binary_join_element_wise(
        pc.binary_slice(values, 0, HEADER_SIZE),
        pc.binary_slice(pc.fill_null(keys, b""), 0, HEADER_SIZE),
        b"",
    )
    codes = headers.dictionary_encode().indices
    present = pc.fill_null(pc.greater_equal(pc.binary_length(values), HEADER_SIZE), False)
    # (a key that is empty but not null goes to the one decode path, which refuses it: the
    # header of a null key is empty too)
    keyed = pc.fill_null(pc.not_equal(pc.binary_length(keys), 0), True)
    codes = pc.if_else(pc.and_(present, keyed), pc.fill_null(codes, -1), -1)
    numbers: np.ndarray = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    return numbers


def _vectorized(group: _Group, values: pa.BinaryArray) -> list[_Group]:
    """The group's records read by numpy (:mod:`.vectorized`) when its writer schema allows,
    as a group of Arrow columns, and a group of those left to fastavro."""
    kinds = group.plan.record.kinds
    if kinds is None:
        return [group]
    columns, ok = read_columns(kinds, values.take(pa.array(group.indices, pa.int64())))
    at = np.array(group.indices, np.int64)
    read = _Group(group.plan, at[ok].tolist())
    read.read = read.indices
    if ok.all():  # (the usual case: no filtering)
        read.columns = columns
    else:
        keep = pa.array(ok)
        read.columns = {name: column.filter(keep) for name, column in columns.items()}
    return [read, _Group(group.plan, at[~ok].tolist())]


def _read(group: _Group, values: list[bytes | None]) -> list[int]:
    """Read the group's bodies with fastavro, each to its last byte (as the one decode path
    does); returns the records that did not read."""
    if group.columns is not None or not group.indices:
        return []
    record = group.plan.record
    if record.record.get("type") != "record":
        return group.indices  # (the one decode path says what is wrong with it)
    parsed, start = record.parsed, HEADER_SIZE
    datums, read, unread = group.datums, group.read, []
    stream_of, reader = io.BytesIO, schemaless_reader
    for i in group.indices:
        value: bytes = values[i]  # type: ignore[assignment]
        stream = stream_of(value)
        stream.seek(start)
        try:
            datum: Any = reader(stream, parsed, None)
        except Exception:  # (the one decode path says what is wrong with it)
            unread.append(i)
            continue
        if stream.tell() != len(value):
            unread.append(i)
            continue
        datums.append(datum)
        read.append(i)
    return unread


def _group_rows(
    group: _Group, batch: pa.RecordBatch, tables: Tables, sink: ChangelogSink
) -> tuple[OwnPart | None, _Image | None, list[int]]:
    """((rows, their records, table numbers, schema numbers) or None, their after images
    (the rows' own are null), the records left to the one decode path)."""
    plan, record = group.plan, group.plan.record
    names = [field[0] for field in record.fields]
    positions = {name: j for j, name in enumerate(names)}
    if any(name not in positions for name in plan.key):
        return None, None, group.read  # (a key column the value lacks: the one path says so)
    if group.columns is not None:
        columns = [group.columns[name] for name in (*names, *record.extension)]
    else:
        columns = _columns(group.datums, [*names, *record.extension])
    n, k = len(group.read), len(names)
    kinds = _kinds(columns[k:], record.extension, n)
    if kinds is None:
        return None, None, group.read
    updates, commit_ts, bad_rows = kinds
    flat = _texts(group, columns, bad_rows)
    map_type = sink.arrow_schema().field("after").type
    before = _before(flat, plan.key, [positions[name] for name in plan.key], updates, map_type)
    indices = np.array(group.read, np.int64)
    after = pa.nulls(n, map_type)  # (made with the other groups': _after_images)
    rows = _rows(plan.table, commit_ts, batch, indices, (before, after), updates, sink)
    slots = np.full(n, tables.slot((plan.table.database, plan.table.table)), np.int64)
    schema_texts = np.full(n, tables.text(plan.table_json), np.int64)
    part: OwnPart = (rows, indices, slots, schema_texts)
    part, kept = _without_rows(part, bad_rows)
    return part, _Image(flat, names, n, kept), [group.read[r] for r in bad_rows]


def _texts(group: _Group, columns: list[Any], bad_rows: set[int]) -> pa.StringArray:
    """The group's column fields as changelog text, one column after the other (the rows a
    column could not convert added to ``bad_rows``)."""
    texts = []
    ready = _ready(group)
    for j, (convert, column) in enumerate(
        zip(_column_texts(group.plan.record), columns, strict=False)
    ):
        if j in ready:  # (a decimal numpy read as its text)
            texts.append(column)
            continue
        if group.columns is not None and not getattr(convert, "takes_arrow", False):
            column = column.to_pylist()  # (the Python values fastavro would have read)
        text, bad = convert(column)
        texts.append(text)
        bad_rows.update(bad)
    return pa.concat_arrays(texts) if texts else pa.array([], pa.string())


def _column_texts(record: Record) -> tuple[ColumnText, ...]:
    """The record's column converters, made when the batch path first reads it."""
    if record.columns is None:
        record.columns = tuple(
            column_text(ctype, primitive, field[2])
            for (ctype, primitive), field in zip(record.column_types, record.fields, strict=True)
        )
    return record.columns


def _without_rows(part: OwnPart, bad_rows: set[int]) -> tuple[OwnPart, np.ndarray]:
    """The part without the rows that did not convert, and the rows kept (numbers in the
    group)."""
    n = part[0].num_rows
    if not bad_rows:
        return part, np.arange(n, dtype=np.int64)
    keep = np.ones(n, np.bool_)
    keep[list(bad_rows)] = False
    rows, indices, slots, schema_texts = part
    kept = (rows.filter(pa.array(keep)), indices[keep], slots[keep], schema_texts[keep])
    return kept, np.arange(n, dtype=np.int64)[keep]


def _ready(group: _Group) -> set[int]:
    """The column fields numpy read as their changelog text already (precise decimals)."""
    if group.columns is None:
        return set()
    kinds = group.plan.record.kinds or []
    decimals = {kind[0] for kind in kinds if kind[3] is not None}
    return {j for j, field in enumerate(group.plan.record.fields) if field[0] in decimals}


def _kinds(columns: list[Any], extension: tuple[str, ...], n: int) -> Any:
    """(UPDATE? per row, commit ts, the rows whose ``_tidb_op`` or commit ts the one decode
    path refuses) from the TiDB extension fields, as :func:`row_kind_and_ts` reads them one
    record at a time; None when their types are not the extension's (the one path says)."""
    fields = dict(zip(extension, columns, strict=True))
    bad = np.zeros(n, np.bool_)
    updates = np.zeros(n, np.bool_)
    commit_ts: Any = np.zeros(n, np.int64)
    try:
        if "_tidb_op" in fields:
            ops = as_arrow(fields["_tidb_op"], pa.string())
            known = pc.is_in(ops, pa.array(["c", "u", ""]))  # (row_kind_and_ts's _KINDS)
            bad |= ~pc.fill_null(known, False).to_numpy(zero_copy_only=False)
            updates = pc.fill_null(pc.equal(ops, "u"), False).to_numpy(zero_copy_only=False)
        if "_tidb_commit_ts" in fields:
            ts = as_arrow(fields["_tidb_commit_ts"], pa.int64())
            bad |= ~pc.fill_null(pc.greater_equal(ts, 0), False).to_numpy(zero_copy_only=False)
            commit_ts = pc.fill_null(ts, 0)
    except (TypeError, ValueError, OverflowError):  # (pyarrow's ArrowInvalid among them)
        return None
    return updates, commit_ts, set(np.flatnonzero(bad).tolist())


def _columns(datums: Sequence[dict[str, Any]], names: list[str]) -> list[Any]:
    if not names:
        return []
    if len(names) == 1:
        return [[datum[names[0]] for datum in datums]]
    return list(zip(*map(itemgetter(*names), datums), strict=True))


def _before(flat: Any, names: tuple[str, ...], key: list[int], updates: Any, map_type: Any) -> Any:
    """An UPDATE's before image: its handle-key columns (Avro carries no old image)."""
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
    """The group's changelog rows, as
    :class:`~ticdc_spark.pipeline.changelog.ChangelogBuilder` writes them (the ``schema``
    column is filled in when merging)."""
    n, (before, after) = len(indices), images
    op = pa.array([RowKind.INSERT.value, RowKind.UPDATE.value]).take(
        pa.array(updates.astype(np.int8))
    )
    columns = {
        "op": op,
        "database": pa.repeat(pa.scalar(table.database), n),
        "table": pa.repeat(pa.scalar(table.table), n),
        "commit_ts": pa.array(commit_ts, pa.int64()),
        "before": before,
        "after": after,
    }
    return row_batch(sink, batch, indices, columns)
