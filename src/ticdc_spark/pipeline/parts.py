"""Planning a micro-batch by parts: the planner's own rules, run on parts of the batch.

The rows of a micro-batch need each other only within a table (the last change per key,
the schemas rows carry, the guards, the rows held back), and a table's rows need the
batch's *control rows* (watermarks, DDLs, bootstraps: few) for everything else (replays,
the release bound, DDL barriers, the catalog).  So a batch is planned in parts, each by
the same :class:`~ticdc_spark.pipeline.planner.Planner`:

* the control part (:func:`plan_control`): the control rows alone, on the driver: the
  DDL steps, the watermarks, the catalog of the tables without rows in the batch;
* one part per *table group* (:func:`plan_part`): the control rows plus the group's rows,
  the rows it held back and its guards, anywhere (Spark's executors: spark.planning).  A
  group is a table, or the tables a RENAME in the batch connects (a renamed table's
  catalog entry moves with its rows: :func:`table_groups`);

then put together (:func:`assemble`, :func:`merge_states`) in the order one planner over
the whole batch would have made: per segment between two DDL barriers every group's steps,
then the barrier.  Three things need more than one part, and are settled from every part's
figures: the bounds on held rows and guards (counted over all parts; guards are counted
before this batch's floor collects them, so the guard bound stops a little early), the
collection of guards by the batch's floor (done when they are next read: a part cannot know
the rows the others hold back), and Simple's rows waiting for their schema, which hold back
other tables' rows and DDLs too (:func:`needs_waiting`: the parts are planned again knowing
every part's waiting tables).  tests/test_planning_parts.py checks against one planner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.pipeline import wire_rows
from ticdc_spark.pipeline.arrow import concat
from ticdc_spark.pipeline.barriers import one_table
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import DDL, ROW
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import DDLStep, Plan, Step, TableChanges, TableKey
from ticdc_spark.sql.targets import parse_rename_tables

__all__ = [
    "ORDER",
    "PartInput",
    "PartResult",
    "PlannedPart",
    "assemble",
    "batch_counts",
    "merge_states",
    "needs_waiting",
    "plan_control",
    "plan_part",
    "renames",
    "table_groups",
]

ORDER = "_order"  # the column of a row's place in its micro-batch (the planner's row order)
_NO_LIMIT = 2**62  # (a part's bounds: the driver checks every part's rows together)


class _PartPlanner(Planner):
    """A part's planner: its guards not collected by the batch's floor, which needs every
    part's held rows (the driver works it out; the next read collects them)."""

    def _floor_of_guards(self) -> int:
        return -1


@dataclass(frozen=True)
class PartInput:
    """What every part of one micro-batch starts from (the same for all: shipped once)."""

    state: bytes  # the consumer state before the batch (ConsumerState.to_json)
    control: pa.Table  # the batch's control rows, with ORDER
    held_control: pa.Table | None  # control rows held back by earlier batches
    partitions: frozenset[str]  # every topic/partition the batch has rows of
    mode: str
    capabilities: Capabilities
    guard_retention: float
    # per table, the earliest commit ts of rows waiting for their schema (Simple) in any
    # part: every part holds back what one planner would (see needs_waiting)
    waiting: dict[TableKey, int] = field(default_factory=dict)


@dataclass
class PartResult:
    """A part's plan, without its rows: the driver's share (small)."""

    group: int
    tables: frozenset[TableKey]
    state: ConsumerState  # (its own tables' entries only: see _own)
    steps: list[Step]  # (TableChanges' rows emptied: see PlannedPart.changes)
    segments: list[int]  # (Planner.segments)
    counts: dict[str, int] = field(default_factory=dict)
    held_since: int | None = None  # the oldest commit ts of the rows it holds back
    guards: int = 0  # how many guards it keeps
    pending: int = 0  # rows it planned, held ones included (Planner.pending)
    waiting: dict[TableKey, int] = field(default_factory=dict)  # (Planner.waiting)
    sizes: dict[int, int] = field(default_factory=dict)  # rows of each row step


@dataclass
class PlannedPart:
    """A part's plan with its rows: the result, the changes of each row step (by step
    number), the rows held back, the dead letters and the guards."""

    result: PartResult
    changes: dict[int, pa.Table]
    held: pa.Table | None
    dead_letters: pa.Table | None
    guards: Guards


def table_groups(
    tables: Iterable[TableKey], renames: Iterable[tuple[TableKey, TableKey]]
) -> dict[TableKey, int]:
    """Number the table groups: tables connected by a RENAME share one."""
    parent: dict[TableKey, TableKey] = {}

    def root(key: TableKey) -> TableKey:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for key in tables:
        root(key)
    for old, new in renames:
        parent[root(old)] = root(new)
    roots = sorted({root(k) for k in parent})
    number = {r: i for i, r in enumerate(roots)}
    return {key: number[root(key)] for key in sorted(parent)}


def renames(control: pa.Table, steps: Iterable[Step]) -> list[tuple[TableKey, TableKey]]:
    """The tables the batch's DDLs rename, old and new: from the statements (every pair of
    a RENAME TABLE, whether the catalog knows the old table or not: a table first seen in
    this batch's rows is known to its part only) and from the control part's steps (ALTER
    TABLE ... RENAME TO, resolved against the catalog)."""
    pairs = [
        ((s.database, s.table), s.renamed_to)
        for s in steps
        if isinstance(s, DDLStep) and s.renamed_to
    ]
    ddls = control.filter(pc.equal(control["kind"], DDL)).select(["database", "sql"])
    for row in ddls.to_pylist():
        sql = row["sql"] or ""
        if not sql.lstrip().upper().startswith("RENAME"):
            continue
        try:
            found = parse_rename_tables(sql)
        except TiCDCSparkError:  # (the catalog says why, when it plans the DDL)
            continue
        database = row["database"] or ""
        pairs += [((od or database, ot), (nd or database, nt)) for (od, ot), (nd, nt) in found]
    return pairs


def _planner(part: PartInput, state: ConsumerState) -> _PartPlanner:
    state.partitions |= part.partitions
    planner = _PartPlanner(
        part.mode,
        state,
        capabilities=part.capabilities,
        max_held_rows=_NO_LIMIT,
        guard_retention=part.guard_retention,
        max_guards=_NO_LIMIT,
    )
    planner.waiting_elsewhere = part.waiting
    return planner


def _in_order(*tables: pa.Table | None) -> pa.Table:
    """Rows of the batch in their order (ORDER dropped)."""
    rows = concat(tables)
    assert rows is not None
    return rows.sort_by(ORDER).drop_columns([ORDER])


def plan_control(part: PartInput, errors: pa.Table | None) -> tuple[Plan, _PartPlanner]:
    """The control part: the batch's control rows and its ERROR rows (dead letters)."""
    state = ConsumerState.from_json(part.state, held=_drop_order(part.held_control))
    planner = _planner(part, state)
    return planner.plan(_in_order(part.control, errors)), planner


def plan_part(
    part: PartInput,
    group: int,
    tables: frozenset[TableKey],
    rows: pa.Table,
    held: pa.Table | None,
    guards: Guards,
) -> PlannedPart:
    """One group's part: the control rows and the group's ``rows`` (both with ORDER), the
    rows it ``held`` back (likewise), and its ``guards``."""
    held_rows = concat([_drop_order(part.held_control), _in_order(held) if held else None])
    state = ConsumerState.from_json(part.state, held=held_rows, guards=guards)
    planner = _planner(part, state)
    plan = planner.plan(_in_order(part.control, rows))
    changes = {
        number: step.rows
        for number, step in enumerate(plan.steps)
        if isinstance(step, TableChanges)
    }
    held_rows, guards = _held_rows(planner.state.held), planner.state.guards
    result = _result(group, tables, planner, plan)
    return PlannedPart(result, changes, held_rows, plan.dead_letters, guards)


def _result(group: int, tables: frozenset[TableKey], planner: Planner, plan: Plan) -> PartResult:
    state = planner.state
    held = _held_rows(state.held)
    steps: list[Step] = [
        # (an empty table of its own: a slice pickles the buffers it slices, every row)
        TableChanges(s.database, s.table, s.schema, s.rows.schema.empty_table())
        if isinstance(s, TableChanges)
        else s
        for s in plan.steps
    ]
    counts = {
        "rows_in": plan.rows_in,
        "rows_released": plan.rows_released,
        "replays": plan.replays,
        "guarded": plan.guarded,
        "held": plan.held,
        "awaiting_schema": plan.awaiting_schema,
    }
    since = None if held is None else int(pc.min(held["commit_ts"]).as_py())
    guards = state.guards.count()
    sizes = {n: s.rows.num_rows for n, s in enumerate(plan.steps) if isinstance(s, TableChanges)}
    segments = list(planner.segments)
    return PartResult(
        group,
        tables,
        _own(state, tables),
        steps,
        segments,
        counts,
        held_since=since,
        guards=guards,
        pending=planner.pending,
        waiting=planner.waiting,
        sizes=sizes,
    )


def _held_rows(held: pa.Table | None) -> pa.Table | None:
    """The rows (not control rows: the control part holds those) a part holds back, with
    their order among them."""
    if held is None:
        return None
    rows = held.filter(pc.equal(held["kind"], ROW))
    if not rows.num_rows:
        return None
    return rows.append_column(ORDER, pa.array(range(rows.num_rows), pa.int64()))


def _drop_order(rows: pa.Table | None) -> pa.Table | None:
    if rows is None or ORDER not in rows.column_names:
        return rows
    return rows.sort_by(ORDER).drop_columns([ORDER])


# -- the driver: the parts put together ------------------------------------------------------


def assemble(
    control: Plan, segments: list[int], parts: list[PartResult]
) -> list[Step | tuple[int, int]]:
    """The batch's steps in one planner's order: per segment every part's steps (as
    ``(group, step number)``: their rows are the part's), then the barrier, the step of
    the part that owns its table (it saw that table's rows) or else the control part's."""
    barriers = [s for s, seg in zip(control.steps, segments, strict=True) if seg < 0]
    owners = {key: p for p in parts for key in p.tables}
    out: list[Step | tuple[int, int]] = []
    for index in range(len(barriers) + 1):
        for p in parts:
            out += [(p.group, n) for n, seg in enumerate(p.segments) if seg == index]
        if index < len(barriers):
            barrier = barriers[index]
            assert isinstance(barrier, DDLStep)
            owner = owners.get((barrier.database, barrier.table))
            out.append(barrier if owner is None else _barrier(owner, index, barrier))
    return out


def _barrier(part: PartResult, index: int, barrier: DDLStep) -> Step:
    """The part's own step of barrier ``index`` (it saw the rows of its table)."""
    if -1 - index not in part.segments:  # (the parts would not agree with one planner)
        raise TiCDCSparkError(
            f"planning by parts: the part of {sorted(part.tables)} did not release the DDL "
            f"at commit ts {barrier.commit_ts} ({barrier.sql[:80]!r}) that the control "
            "part did; plan on the driver (--planner driver) and report this"
        )
    return part.steps[part.segments.index(-1 - index)]


_PER_TABLE = ("tables", "floors", "schema_ts", "carried")
_PER_SLOT = ("positions", "partition_schemas")  # keys (topic/partition, database, table)
_PER_VERSION = ("versions", "versions_since")  # keys (database, table, version)
# (each with what of its key names the table)
_KEYED = ((_PER_TABLE, slice(None)), (_PER_SLOT, slice(1, None)), (_PER_VERSION, slice(0, 2)))


def merge_states(
    control: ConsumerState, parts: list[PartResult], part_input: PartInput
) -> ConsumerState:
    """The consumer state after the batch: the control part's, with each group's entries
    of its own tables and the highest of every part's positions."""
    state = control
    for part in parts:
        _take_tables(state, part)
        state.applied_ts = max(state.applied_ts, part.state.applied_ts)
        for key, offset in part.state.position_offsets.items():
            state.position_offsets[key] = max(offset, state.position_offsets.get(key, -1))
    if any(p.pending for p in parts) and part_input.capabilities.finisher is not None:
        wire_rows.forget_versions(state)  # (as one planner would have: it had pending rows)
    return state


def _take_tables(state: ConsumerState, part: PartResult) -> None:
    """Replace ``state``'s entries of the part's tables by the part's."""
    owned = part.tables
    for names, table_of in _KEYED:
        for name in names:
            mine: dict[Any, Any] = getattr(state, name)
            for key in [k for k in mine if k[table_of] in owned]:
                del mine[key]
            mine.update(getattr(part.state, name))
    state.placed_by_order = {s for s in state.placed_by_order if s[1:] not in owned}
    state.placed_by_order |= part.state.placed_by_order


def _own(state: ConsumerState, tables: frozenset[TableKey]) -> ConsumerState:
    """What a part's state says of its own tables (and its positions and the highest commit
    ts it released): all :func:`merge_states` takes of it, so that a part's result does not
    grow with the number of tables."""
    own = ConsumerState(applied_ts=state.applied_ts, position_offsets=state.position_offsets)
    for names, table_of in _KEYED:
        for name in names:
            entries: dict[Any, Any] = getattr(state, name)
            setattr(own, name, {k: v for k, v in entries.items() if k[table_of] in tables})
    own.placed_by_order = {s for s in state.placed_by_order if s[1:] in tables}
    return own


def needs_waiting(part: PartInput, parts: list[PartResult]) -> dict[TableKey, int] | None:
    """The tables whose rows wait for their schema, when a part planned without knowing
    another's and one planner would then have held back more: a DDL of such a table at or
    after its first waiting row, or a DDL that concerns every table after any (see
    wire_rows.awaiting_schema); None when the parts' plans stand."""
    first: dict[TableKey, int] = {}
    for result in parts:
        for key, ts in result.waiting.items():
            first[key] = min(ts, first.get(key, ts))
    if not first or first == part.waiting:
        return None
    rows = concat([part.control, part.held_control])
    assert rows is not None
    ddls = rows.filter(pc.equal(rows["kind"], DDL))
    earliest = min(first.values())
    for ddl in ddls.select(["database", "table", "commit_ts", "sql", "ddl_type"]).to_pylist():
        key = (ddl["database"] or "", ddl["table"] or "")
        if ddl["commit_ts"] >= first.get(key, 2**63) or (
            ddl["commit_ts"] >= earliest and not one_table(ddl)
        ):
            return first
    return None


def batch_counts(control: Plan, parts: list[PartResult]) -> dict[str, int]:
    """The batch's figures (a Plan's) from its parts': each part saw the control rows too,
    so their replays counted the control part's."""
    total = {
        name: getattr(control, name)
        for name in ("rows_in", "rows_released", "replays", "guarded", "held", "awaiting_schema")
    }
    for part in parts:
        for name, value in part.counts.items():
            if name in total:
                total[name] += value - (control.replays if name == "replays" else 0)
    return total
