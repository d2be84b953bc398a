"""Consuming a changelog the way TiCDC's reference consumer does, planned without Spark.

Per micro-batch the :class:`Planner` takes changelog rows (see
:mod:`ticdc_spark.pipeline.changelog`) and works out what to apply, in order
(:class:`~ticdc_spark.pipeline.steps.Plan`).  Each concern is a module of its own:

* :mod:`~ticdc_spark.pipeline.ordering`: watermarks, replays, the release bound of
  ``consistent`` and ``eventual`` mode, rows placed by their partition position, the bound
  on rows held for a later batch;
* :mod:`~ticdc_spark.pipeline.wire_rows`: rows waiting for their schema (Simple);
* :mod:`~ticdc_spark.pipeline.barriers`: release order and DDL barriers;
* :mod:`~ticdc_spark.pipeline.catalog` and :mod:`~ticdc_spark.pipeline.schemas`: the table
  catalog, from DDL statements and from the schemas rows carry;
* :mod:`~ticdc_spark.pipeline.last_change`: the last change per key of each segment;
* :mod:`~ticdc_spark.pipeline.guards`: changes older than a delete already applied dropped;
* :mod:`~ticdc_spark.pipeline.dead_letters`: rows that cannot be applied.

All it remembers (watermarks, held rows, catalog, floors, guards) is the
:class:`~ticdc_spark.pipeline.state.ConsumerState`, saved with each batch so a restart
resumes exactly.  Planning works on the narrow columns; the row images (the wide, costly
part) are gathered once, for the rows each step applies and the rows held back.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.pipeline import ordering, wire_rows
from ticdc_spark.pipeline.arrow import concat, concat_tables
from ticdc_spark.pipeline.barriers import flush_points, in_release_order, unique_ddls
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.catalog import ddl_step
from ticdc_spark.pipeline.changelog import BOOTSTRAP, DDL, ERROR, ROW
from ticdc_spark.pipeline.dead_letters import dead_letters
from ticdc_spark.pipeline.last_change import final_changes, key_names
from ticdc_spark.pipeline.ordering import GUARD_RETENTION_SECONDS, MAX_GUARDS, MAX_HELD_ROWS
from ticdc_spark.pipeline.policy import Mode
from ticdc_spark.pipeline.schemas import SCHEMA_ID, RowSchemas, SchemaNumbers
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import DDLStep, Plan, TableChanges, TableKey

if TYPE_CHECKING:
    from ticdc_spark.model import TableSchema

__all__ = ["Planner"]

_ROW_INDEX = "_row"  # the planning column of each row's place in the batch's images
_PENDING_KINDS = pa.array([ROW, DDL, BOOTSTRAP])  # (the kinds planned: not watermarks, errors)


class Planner:
    """Plans micro-batches over a :class:`ConsumerState` (which it updates in place)."""

    def __init__(
        self,
        mode: str = Mode.CONSISTENT,
        state: ConsumerState | None = None,
        partitions: Iterable[str] = (),
        *,
        capabilities: Capabilities | None = None,
        max_held_rows: int = MAX_HELD_ROWS,
        guard_retention: float = GUARD_RETENTION_SECONDS,
        max_guards: int = MAX_GUARDS,
    ) -> None:
        self.mode = Mode.parse(mode)
        self.capabilities = capabilities or Capabilities()
        self.max_held_rows = max_held_rows
        self.guard_retention, self.max_guards = guard_retention, max_guards
        self._guard_floor = 0  # (this batch's: see _collect_guards)
        self.state = state or ConsumerState()
        self.state.partitions |= set(partitions)
        self._numbers = SchemaNumbers()
        self._schemas = RowSchemas(self.state, self._numbers, self.capabilities)
        self._images = pa.table({"before": [], "after": []})
        # per step of the last plan: the segment (between two DDL barriers) it belongs to,
        # or for barrier ``i``'s own DDL step -1 - i (planning by parts: spark.planning)
        self.segments: list[int] = []
        self.pending = 0  # rows planned in the last plan, held ones included
        # per table, the earliest commit ts of its rows waiting for their schema (Simple):
        # the last plan's, and those of rows planned elsewhere (planning by parts)
        self.waiting: dict[TableKey, int] = {}
        self.waiting_elsewhere: dict[TableKey, int] = {}

    def plan(self, changelog: pa.Table) -> Plan:
        """Plan one micro-batch of changelog rows."""
        plan, self.segments = Plan(), []
        held, batch = self._take(changelog)
        is_error = pc.equal(batch["kind"], ERROR)
        errors = batch.filter(is_error) if pc.any(is_error).as_py() else None
        if errors is not None:
            batch = batch.filter(pc.invert(is_error))
        news = self._learn_versions(batch)
        plan.rows_in = _count(batch, ROW)
        batch = self._admit(batch, plan)
        pending = concat_tables(held, batch.filter(pc.is_in(batch["kind"], _PENDING_KINDS)))
        self.pending = pending.num_rows  # (planning by parts: see parts.merge_states)
        pending, awaiting, unfit = self._finish_wire_rows(pending, news)
        ready = self._release(pending, awaiting, plan)
        if ready.num_rows:
            self.state.applied_ts = max(
                self.state.applied_ts, int(pc.max(ready["commit_ts"]).as_py() or 0)
            )
        self._guard_floor = self._floor_of_guards()
        unusable = self._segments(ready, plan)
        plan.dead_letters = concat([dead_letters(concat([errors, unfit])), unusable])
        self._collect_guards()
        return plan

    def _floor_of_guards(self) -> int:
        """The commit ts up to which this batch's guards are not needed (see
        :func:`~ticdc_spark.pipeline.ordering.guard_floor`)."""
        return ordering.guard_floor(self.state, self.mode, self.guard_retention)

    def _take(self, changelog: pa.Table) -> tuple[pa.Table, pa.Table]:
        """The rows held from earlier batches and this batch's, narrow: the images kept
        aside (``_images``, by ``_row``), each row's schema numbered before anything
        reorders rows (schema JSON is written in decode order)."""
        held = self.state.held
        full = changelog if held is None else concat_tables(held, changelog)
        self._images = full.select(["before", "after"])
        narrow = full.drop_columns(["before", "after"]).append_column(
            _ROW_INDEX, pa.array(range(full.num_rows), pa.int64())
        )
        narrow = self._numbers.number(narrow, self.state)
        held_rows = held.num_rows if held is not None else 0
        return narrow.slice(0, held_rows), narrow.slice(held_rows)

    def _admit(self, batch: pa.Table, plan: Plan) -> pa.Table:
        """The batch without replays, placed by position where the protocol needs it; the
        watermarks learned."""
        batch, plan.replays = ordering.drop_replays(self.state, batch)
        if self.capabilities.place_by_position:
            batch, replays = ordering.place_by_position(self.state, self.mode, batch)
            plan.replays += replays
        ordering.learn_watermarks(self.state, batch)
        return batch

    def _release(self, pending: pa.Table, awaiting: pa.Array | None, plan: Plan) -> pa.Table:
        """The pending rows released now; the others held in the state (within bounds)."""
        bound = ordering.release_bound(self.state, self.mode)
        plan.watermark = self.state.global_watermark(self.state.partitions)
        ready_mask = pc.less_equal(pending["commit_ts"], bound)
        if awaiting is not None:
            ready_mask = pc.and_(ready_mask, pc.invert(awaiting))
        held = self._hold(pending.filter(pc.invert(ready_mask)))
        self.state.held = held if held.num_rows else None
        plan.held = _count(held, ROW)
        if awaiting is not None and held.num_rows:
            plan.awaiting_schema = int(pc.sum(wire_rows.wire(held)).as_py() or 0)
        ordering.check_held(
            self.state, held.num_rows, bound, plan.awaiting_schema, self.max_held_rows
        )
        return pending.filter(ready_mask)

    def _with_images(self, rows: pa.Table) -> pa.Table:
        """Narrow rows with their before/after images attached again."""
        images = self._images.take(rows[_ROW_INDEX])
        return rows.append_column("before", images["before"]).append_column(
            "after", images["after"]
        )

    def _hold(self, rows: pa.Table) -> pa.Table:
        """Rows kept for a later batch, whole: they keep their schema text (numbers are per
        batch); DDL and bootstrap rows keep the schema they carried themselves."""
        texts = [
            self._numbers.text(number) if kind == ROW else own
            for kind, number, own in zip(
                rows["kind"].to_pylist(),
                rows[SCHEMA_ID].to_pylist(),
                rows["schema"].to_pylist(),
                strict=True,
            )
        ]
        rows = rows.set_column(
            rows.schema.get_field_index("schema"), "schema", pa.array(texts, pa.string())
        )
        return self._with_images(rows).drop_columns([SCHEMA_ID, _ROW_INDEX])

    # -- rows waiting for their schema (Simple) ----------------------------------------------

    def _learn_versions(self, batch: pa.Table) -> bool:
        """Simple: learn the schemas the batch brings; whether there is news (new versions,
        or new rows waiting for theirs)."""
        finisher = self.capabilities.finisher
        if finisher is None:
            return False
        news = wire_rows.learn_versions(self.state, finisher, batch)
        return news or pc.any(wire_rows.wire(batch)).as_py() is True

    def _finish_wire_rows(
        self, pending: pa.Table, news: bool
    ) -> tuple[pa.Table, pa.Array | None, pa.Table | None]:
        """The pending rows with the wire rows whose schema is known finished, which rows
        still wait for their schema (None: none), and the finished rows that do not fit."""
        finisher = self.capabilities.finisher
        if finisher is None or not pending.num_rows:
            return pending, None, None
        unfit = None
        if news:  # (else the rows held wait for versions still unknown, within bounds)
            finished = wire_rows.finish(self.state, finisher, pending)
            if finished is not None:
                rows = self._numbered(finished.rows)
                pending = concat_tables(finished.kept, rows.select(finished.kept.column_names))
                unfit = finished.unfit
        self.waiting = wire_rows.waiting_since(pending)
        first = dict(self.waiting)
        for key, ts in self.waiting_elsewhere.items():  # (planning by parts: see parts.py)
            first[key] = min(ts, first.get(key, ts))
        awaiting = wire_rows.awaiting_schema(pending, first)
        wire_rows.forget_versions(self.state)  # (after this batch's rows had every version)
        return pending, awaiting, unfit

    def _numbered(self, rows: pa.Table) -> pa.Table:
        """Finished rows (whole changelog rows, in order) as planning rows: images added to
        the batch's, schema texts numbered."""
        first = self._images.num_rows
        self._images = concat_tables(self._images, rows.select(["before", "after"]))
        narrow = rows.drop_columns(["before", "after"]).append_column(
            _ROW_INDEX, pa.array(range(first, first + rows.num_rows), pa.int64())
        )
        return self._numbers.number_more(narrow)

    # -- segments -------------------------------------------------------------------------

    def _segments(self, ready: pa.Table, plan: Plan) -> pa.Table | None:
        """Cut released rows at DDL barriers and plan each piece; returns unusable rows."""
        ready = in_release_order(ready)
        kinds = ready["kind"]
        rows = ready.filter(pc.equal(kinds, ROW))
        self._schemas.learn_bootstraps(ready.filter(pc.equal(kinds, BOOTSTRAP)))
        plan.rows_released = rows.num_rows
        barriers = unique_ddls(self.state, ready.filter(pc.equal(kinds, DDL)))
        flush = np.array(flush_points(barriers, rows), dtype=np.int64)
        unusable = []
        for index in range(len(barriers) + 1):
            mask = flush == index
            if mask.any():
                first = len(plan.steps)
                unusable.append(self._plan_rows(rows.filter(pa.array(mask)), plan))
                self.segments += [index] * (len(plan.steps) - first)
            if index < len(barriers):
                row = barriers[index]
                key = (row["database"] or "", row["table"] or "")
                text = row.get("schema")
                carried = self._schemas.schema_of(text, key) if text else None
                plan.steps.append(ddl_step(self.state, row, carried))
                self.segments.append(-1 - index)  # (a barrier: see ``segments``)
        return concat(unusable)

    def _plan_rows(self, rows: pa.Table, plan: Plan) -> pa.Table | None:
        """Add one TableChanges per table of a segment; returns rows that cannot apply."""
        unusable = []
        tables = rows.select(["database", "table"]).group_by(["database", "table"]).aggregate([])
        for database, table in zip(
            tables["database"].to_pylist(), tables["table"].to_pylist(), strict=True
        ):
            mask = pc.and_(pc.equal(rows["database"], database), pc.equal(rows["table"], table))
            key = (database, table)
            part = self._above_floor(key, rows.filter(mask))
            if not part.num_rows:
                continue
            runs = self._schemas.runs(key, part) if self.capabilities.rows_define_schema else [part]
            for run in runs:
                if isinstance(run, DDLStep):
                    plan.steps.append(run)
                    continue
                schema = self._schemas.table_schema(key, run)
                changes, bad = final_changes(self._with_images(run), schema)
                changes = self._guarded(key, schema, changes, plan)
                unusable.append(bad)
                if changes.num_rows:
                    plan.steps.append(TableChanges(database, table, schema, changes))
        return concat(unusable)

    # -- guards ---------------------------------------------------------------------------

    def _guarded(
        self, key: TableKey, schema: TableSchema, changes: pa.Table, plan: Plan
    ) -> pa.Table:
        """A table step's changes without those older than a delete already applied."""
        if not self.capabilities.keeps_guards:
            return changes
        guards = self.state.guards
        changes, dropped = guards.screen(key, key_names(schema), changes, self._guard_floor)
        plan.guarded += dropped
        return changes

    def _collect_guards(self) -> None:
        """Forget the guards no older change can need any more; stop past the bound."""
        if not self.capabilities.keeps_guards:
            return
        self.state.guards.collect(self._guard_floor, self.state.floors)
        ordering.check_guards(
            self.state, self.mode, self._guard_floor, self.guard_retention, self.max_guards
        )

    def _above_floor(self, key: TableKey, rows: pa.Table) -> pa.Table:
        """A table's rows newer than its floor (its last TRUNCATE or DROP)."""
        floor = self.state.floors.get(key)
        if floor is None:
            return rows
        return rows.filter(pc.greater(rows["commit_ts"], floor))


def _count(rows: pa.Table, kind: str) -> int:
    """How many rows are of ``kind``."""
    if not rows.num_rows:
        return 0
    return int(pc.sum(pc.equal(rows["kind"], kind)).as_py() or 0)
