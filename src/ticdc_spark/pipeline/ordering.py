"""Watermarks and positions: which rows are replays, and up to where changes are released.

* **Replays.** Each topic-partition's resolved ts only moves forward; a row (or DDL) whose
  commit ts is below the watermark its partition had already reached when the row arrived
  is a replay and is dropped (TiCDC delivers at least once).
* **Release bound.** In consistent mode only changes at or below the *global* watermark
  (the minimum over all partitions) are released, so every applied state is a transaction-
  consistent snapshot of upstream; the rest are held for a later batch, at most
  ``max_held_rows`` of them.  In eventual mode everything is released at once.
* **Rows without a commit ts** (commit ts 0: an Avro tombstone, any Avro row without the
  TiDB extension, a genuine Debezium stream): on partitions without watermarks rows are
  placed by their partition position (:func:`place_by_position`, docs/pipeline.md "Rows
  without a commit ts").  Their rows carry no commit ts, or one that cannot order them
  against those.  Every row there gets a *place*, which the planner orders by (it replaces
  the row's commit ts), per (partition, table): its commit ts when that is above the
  previous place, or equal to it when that is the previous row's own commit ts (a
  transaction's rows share their place); else (no commit ts, a re-sent older change) the
  previous place + 1.  So places follow the partition order, and equal the commit ts where
  those already do; two changes share a place only within a transaction (a sink keeps a
  key's change only over an older place: a re-sent older change placed at the place of a
  newer one already applied would leave the re-sent changes after it out).  The rows of
  one key all go to one partition (TiCDC dispatches by key), so each key's changes apply in
  the order they were written; a record at or below the last offset consumed of its
  partition is a replay of the source and is dropped.
* **Guards** (:mod:`~ticdc_spark.pipeline.guards`) are needed only while a change older than
  them can still be released: :func:`guard_floor` says up to where they are not, and
  :func:`check_guards` bounds how many are kept.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import ConfigError, GuardsExceeded, HeldRowsExceeded
from ticdc_spark.pipeline.changelog import DDL, ROW, WATERMARK
from ticdc_spark.pipeline.policy import Mode
from ticdc_spark.pipeline.state import ConsumerState, PartitionTable

__all__ = [
    "GUARD_RETENTION_SECONDS",
    "MAX_GUARDS",
    "MAX_HELD_ROWS",
    "check_guards",
    "check_held",
    "drop_replays",
    "guard_floor",
    "learn_watermarks",
    "place_by_position",
    "release_bound",
]

# Rows kept for a later micro-batch (waiting for the watermark, or Simple's for their schema)
# live in the driver's memory and in the checkpoint: past this many, the batch stops (see
# check_held) instead of letting memory grow with a stalled partition.
MAX_HELD_ROWS = 1_000_000

# Guards live in the driver's memory and in the checkpoint, rewritten with each micro-batch
# that changes them: about 53 bytes each with an integer key, so 2,000,000 make a file of
# about 100 MiB, saved in about 0.2 s (benchmarks/guards_bench.py: 1,000,000 in 0.09 s).
# Past this many the batch stops (see check_guards).  Only a stream without watermarks
# keeps them for long.
MAX_GUARDS = 2_000_000

# Without watermarks, how long (in commit-ts time) a guard is kept: a late change older than
# a delete comes from TiCDC re-sending after a restart, from its checkpoint, and a changefeed
# stopped for longer than its gc-ttl (TiCDC's default: 24 h) cannot resume (TiDB may have
# garbage-collected the versions it would read), so its re-sends start at most about that
# far behind the newest change it sent.
GUARD_RETENTION_SECONDS = 24 * 3600

_EVERYTHING = 2**63 - 1
_LOGICAL_BITS = 18  # (a TSO's physical part, in ms, is shifted by these)


def drop_replays(state: ConsumerState, batch: pa.Table) -> tuple[pa.Table, int]:
    """Drop rows and DDLs committed below their partition's watermark at arrival.  (No
    sort: a changelog keeps every partition's records in offset order, all this needs.)"""
    if not batch.num_rows:
        return batch, 0
    kinds = batch["kind"].to_pylist()
    parts = [
        f"{t}/{p}"
        for t, p in zip(batch["topic"].to_pylist(), batch["partition"].to_pylist(), strict=True)
    ]
    ts = batch["commit_ts"].to_numpy(zero_copy_only=False)
    keep = np.ones(len(kinds), dtype=bool)
    current = dict(state.watermarks)
    for i, (kind, part) in enumerate(zip(kinds, parts, strict=True)):
        mark = current.get(part, 0)
        if kind == WATERMARK:
            current[part] = max(mark, int(ts[i]))
        elif kind in (ROW, DDL) and ts[i] < mark:
            keep[i] = False
    dropped = int((~keep).sum())
    return (batch.filter(pa.array(keep)) if dropped else batch), dropped


def place_by_position(state: ConsumerState, mode: Mode, batch: pa.Table) -> tuple[pa.Table, int]:
    """The batch with the rows of partitions without watermarks placed by their partition
    position (the place replaces their commit ts: see the module's doc), and how many rows
    were replays of the source (dropped)."""
    if not batch.num_rows:
        return batch, 0
    ts = batch["commit_ts"].to_numpy(zero_copy_only=False).copy()
    keep = _placed(state, mode, batch, ts)
    placed = batch.set_column(
        batch.schema.get_field_index("commit_ts"),
        "commit_ts",
        pa.array(ts, batch.schema.field("commit_ts").type),
    )
    dropped = int((~keep).sum())
    return (placed.filter(pa.array(keep)) if dropped else placed), dropped


def _placed(state: ConsumerState, mode: Mode, batch: pa.Table, ts: np.ndarray) -> np.ndarray:
    """Put each row's place in ``ts``; which rows to keep (not a replay of the source)."""
    keep = np.ones(batch.num_rows, dtype=bool)
    floor = dict(state.position_offsets)  # (the rows of one record share its offset)
    names = ("kind", "topic", "partition", "database", "table", "offset")
    rows = zip(*(batch[name].to_pylist() for name in names), strict=True)
    for i, (kind, topic, partition, database, table, offset) in enumerate(rows):
        part = f"{topic}/{partition}"
        if kind != ROW or part in state.watermarks:
            continue
        if offset <= floor.get(part, -1):
            keep[i] = False
            continue
        state.position_offsets[part] = offset
        if ts[i] == 0 and mode == Mode.CONSISTENT:
            raise ConfigError(
                f"the row at {part}@{offset} ({database}.{table}) carries no commit ts and its "
                "partition no watermarks (genuine Debezium?): no applied state could be a "
                "consistent snapshot; replicate it with --mode eventual"
            )
        ts[i] = _place(state, (part, database, table), int(ts[i]))
    return keep


def _place(state: ConsumerState, slot: PartitionTable, ts: int) -> int:
    """The place of a row of ``slot`` committed at ``ts`` (0: unknown), remembered."""
    previous = state.positions.get(slot, 0)
    by_order = state.placed_by_order  # (slots whose last place is not a row's own commit ts)
    if ts == 0 or ts < previous or (ts == previous and slot in by_order):
        ts = previous + 1  # (no commit ts, or a re-sent older change)
        by_order.add(slot)
    elif ts > previous:
        by_order.discard(slot)
    state.positions[slot] = ts
    return ts


def learn_watermarks(state: ConsumerState, batch: pa.Table) -> None:
    """Move each partition's watermark up to the batch's WATERMARK rows, and remember every
    partition the batch has rows of (consistent mode waits for each one's watermark)."""
    marks = batch.filter(pc.equal(batch["kind"], WATERMARK))
    for topic, partition, ts in zip(
        marks["topic"].to_pylist(),
        marks["partition"].to_pylist(),
        marks["commit_ts"].to_pylist(),
        strict=True,
    ):
        key = f"{topic}/{partition}"
        if ts >= state.watermarks.get(key, 0):
            state.watermarks[key] = ts
    for topic, partition in zip(
        batch["topic"].to_pylist(), batch["partition"].to_pylist(), strict=True
    ):
        state.partitions.add(f"{topic}/{partition}")


def release_bound(state: ConsumerState, mode: Mode) -> int:
    """The highest commit ts a change may have to be released now."""
    if mode == Mode.EVENTUAL:
        return _EVERYTHING
    return state.global_watermark(state.partitions)


def check_held(
    state: ConsumerState, held_rows: int, bound: int, awaiting_schema: int, most: int
) -> None:
    """Stop, naming why, when more rows are held back than ``most`` (``max_held_rows``):
    rows wait for the partition furthest behind (consistent mode) or for their schema
    (Simple), and neither must grow the driver's memory without limit.  Raised before
    anything of the batch is applied or saved, so a restart with a higher bound resumes
    exactly."""
    if held_rows <= most:
        return
    marks = state.watermarks
    behind = sorted(state.partitions, key=lambda p: marks.get(p, 0))[:3]
    lagging = ", ".join(f"{p} (watermark {marks.get(p, 0)})" for p in behind) or "none"
    schema = f"; {awaiting_schema} of them wait for their schema" if awaiting_schema else ""
    raise HeldRowsExceeded(
        f"{held_rows} rows are held back, more than the bound of {most} "
        f"(--max-held-rows){schema}. Rows are released up to commit ts {bound}, the "
        f"lowest watermark of the partitions; furthest behind: {lagging}. A partition "
        "that sends no watermarks (a stalled changefeed, or a partition TiCDC does not "
        "write to) holds every other row back in consistent mode: check the changefeed, "
        "replicate with --mode eventual, or raise --max-held-rows (the held rows live in "
        "the driver's memory)"
    )


def guard_floor(
    state: ConsumerState, mode: Mode, retention_seconds: float, held_since: int | None = None
) -> int:
    """The commit ts at or below which a guard is no longer needed (docs/pipeline.md,
    "Consistency"): no change older than it can be released any more.

    A change arriving later whose commit ts is below its partition's watermark is a replay
    and dropped (:func:`drop_replays`), so once every partition's watermark is at or past a
    guard, every change the guard would stop is dropped anyway (a guard stops only changes
    strictly older than it).  Rows held in the state were admitted already, so the guards
    above the oldest of them stay.  In eventual mode on a stream where a partition carries
    no watermarks, the guards are kept ``retention_seconds`` of commit time behind the
    newest change released.  ``held_since``: the oldest commit ts of rows held elsewhere
    than ``state.held`` (planning by parts, :mod:`ticdc_spark.spark.planning`)."""
    watermark = state.global_watermark(state.partitions)
    floor = watermark
    if watermark == 0 and mode == Mode.EVENTUAL:
        floor = state.applied_ts - (int(retention_seconds * 1000) << _LOGICAL_BITS)
    if state.held is not None and state.held.num_rows:
        floor = min(floor, int(pc.min(state.held["commit_ts"]).as_py()))
    if held_since is not None:
        floor = min(floor, held_since)
    return floor


def check_guards(
    state: ConsumerState,
    mode: Mode,
    floor: int,
    retention_seconds: float,
    most: int,
    count: int | None = None,
) -> None:
    """Stop, naming why, when more guards are kept than ``most`` (``max_guards``): the
    state's, or ``count`` kept elsewhere.  Raised before anything of the batch is applied or
    saved, as :func:`check_held` is."""
    count = state.guards.count() if count is None else count
    if count <= most:
        return
    marks = state.watermarks
    silent = sorted(p for p in state.partitions if not marks.get(p))[:3]
    why = f"they are newer than commit ts {floor}, below which no older change can come"
    if silent and mode == Mode.EVENTUAL:
        why = (
            f"partitions without watermarks ({', '.join(silent)}) keep them for "
            f"--guard-retention ({retention_seconds:g} s of commit time)"
        )
    raise GuardsExceeded(
        f"{count} guards (deletes remembered so that older changes arriving late cannot "
        f"bring their rows back) are kept, more than the bound of {most} (--max-guards): "
        f"{why}. Replicate a stream that carries watermarks, lower --guard-retention, or "
        "raise --max-guards (guards live in the driver's memory and the checkpoint)"
    )
