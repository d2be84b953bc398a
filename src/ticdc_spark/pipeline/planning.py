"""How a micro-batch gets planned: by one planner on the driver, or by parts.

:class:`DriverPlanning` runs one :class:`~ticdc_spark.pipeline.planner.Planner` over the
whole changelog (an Arrow table collected to the driver).  :class:`PartsPlanning` plans it
by parts (:mod:`~ticdc_spark.pipeline.parts`): the control rows on the driver, each table
group's rows wherever its :class:`PartsRunner` runs them (Spark's executors:
:mod:`ticdc_spark.spark.planning`; here, one after another: :class:`LocalRunner`, which
the tests compare with one planner).  Either way the result is a
:class:`~ticdc_spark.pipeline.steps.Plan` and the consumer state after the batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import ConfigError
from ticdc_spark.pipeline import ordering
from ticdc_spark.pipeline.arrow import concat
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import ERROR, ROW
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.parts import (
    ORDER,
    PartInput,
    PartResult,
    assemble,
    batch_counts,
    merge_states,
    needs_waiting,
    plan_control,
    plan_part,
    renames,
    table_groups,
)
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.policy import Mode
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import Plan, Step, TableChanges, TableKey

__all__ = [
    "DriverPlanning",
    "LocalRunner",
    "PartsOutcome",
    "PartsPlanning",
    "PartsRunner",
    "PlanSettings",
    "Planning",
]


@dataclass(frozen=True)
class PlanSettings:
    """What planning follows (the applier's settings)."""

    mode: Mode
    partitions: tuple[str, ...]
    capabilities: Capabilities
    max_held_rows: int
    guard_retention: float
    max_guards: int


class Planning(Protocol):
    """Plans one micro-batch from the consumer state before it; returns the plan and the
    state after it (saved by the applier once every step is applied)."""

    def plan(
        self, settings: PlanSettings, changelog: Any, state: ConsumerState, batch: int
    ) -> tuple[Plan, ConsumerState]: ...


class DriverPlanning:
    """One planner over the whole changelog (an Arrow table)."""

    def plan(
        self, settings: PlanSettings, changelog: Any, state: ConsumerState, batch: int
    ) -> tuple[Plan, ConsumerState]:
        _refuse_parts(state)
        planner = Planner(
            settings.mode,
            state,
            settings.partitions,
            capabilities=settings.capabilities,
            max_held_rows=settings.max_held_rows,
            guard_retention=settings.guard_retention,
            max_guards=settings.max_guards,
        )
        return planner.plan(changelog), planner.state


def _refuse_parts(state: ConsumerState) -> None:
    """Stop a driver's planning of a checkpoint whose rows held back or guards the
    executors keep (they would be lost); forget where the executors kept nothing."""
    held, guards = int(state.parts.get("held", 0)), int(state.parts.get("guards", 0))
    if held or guards:
        raise ConfigError(
            f"this checkpoint was planned on the executors, which keep {held} rows held "
            f"back and {guards} guards of it in {state.parts.get('location')}: run it with "
            "--planner executors (a checkpoint planned on the driver can move to the "
            "executors, not back while they keep rows or guards)"
        )
    state.parts = {}


@dataclass(frozen=True)
class Carried:
    """Rows held back and guards a checkpoint planned on the driver kept in its state,
    handed to the parts at the first batch planned by parts."""

    held: pa.Table | None  # ROW rows, with ORDER
    guards: pa.Table | None  # (Guards.to_arrow's columns)


def _carried(state: ConsumerState) -> Carried | None:
    """Take what planning on the driver left in ``state`` for the parts (None: nothing):
    its held rows (the control part keeps its held control rows) and its guards."""
    held = state.held
    rows = None if held is None else held.filter(pc.equal(held["kind"], ROW))
    guards = state.guards.to_arrow()
    if (rows is None or not rows.num_rows) and guards is None:
        return None
    state.held = None if held is None else held.filter(pc.not_equal(held["kind"], ROW))
    if state.held is not None and not state.held.num_rows:
        state.held = None
    state.guards = Guards()
    if rows is not None and rows.num_rows:
        rows = rows.append_column(ORDER, pa.array(range(rows.num_rows), pa.int64()))
    else:
        rows = None
    return Carried(rows, guards)


@dataclass
class PartsOutcome:
    """What a runner's parts gave: their results, their dead letters, each row step's
    changes by ``(group, step number)`` (whatever the runner's steps carry: an Arrow
    table, a Spark DataFrame), and where it keeps the held rows and guards (``kept``:
    into the state's ``parts``)."""

    results: list[PartResult]
    dead_letters: pa.Table | None
    changes: Callable[[int, int], Any]
    kept: dict[str, Any] = field(default_factory=dict)
    untouched_guards: int = 0  # guards of tables without rows in the batch, kept as they were


class PartsRunner(Protocol):
    """Runs the parts of a batch where its rows are."""

    def control(self, changelog: Any) -> tuple[pa.Table, list[tuple[TableKey, str]]]:
        """The batch's control rows (every kind but ROW, ERROR included), with ORDER, and
        each (table, "topic/partition") its rows come from."""

    def run(
        self,
        changelog: Any,
        batch: int,
        part: PartInput,
        groups: dict[TableKey, int],
        state: ConsumerState,
        carried: Carried | None,
    ) -> PartsOutcome:
        """Plan the part of each group (``groups``: table -> group), from the rows of the
        batch and the held rows and guards ``state.parts`` names (guards read as collected
        by ``state.parts["guard_floor"]`` and the state's floors: see
        :func:`guards_kept`), and those ``carried`` from planning on the driver."""

    def steps_of(self, step: TableChanges, changes: Any, rows: int) -> Step:
        """The step that applies ``changes`` (``rows`` of them) of the table of ``step``."""


class PartsPlanning:
    """Plans by parts (see :mod:`~ticdc_spark.pipeline.parts`) with a :class:`PartsRunner`."""

    def __init__(self, runner: PartsRunner) -> None:
        self.runner = runner

    def plan(
        self, settings: PlanSettings, changelog: Any, state: ConsumerState, batch: int
    ) -> tuple[Plan, ConsumerState]:
        carried = _carried(state)  # (a checkpoint planned on the driver until now)
        control, pairs = self.runner.control(changelog)
        is_error = pc.equal(control["kind"], ERROR)
        part = PartInput(
            state.to_json(),
            control.filter(pc.invert(is_error)),
            state.held,
            frozenset(settings.partitions) | {p for _, p in pairs},
            settings.mode,
            settings.capabilities,
            settings.guard_retention,
        )
        errors = control.filter(is_error)
        control_plan, planner = plan_control(part, errors)
        tables = {k for k, _ in pairs} | _held_tables(state, carried)
        groups = table_groups(tables, renames(part.control, control_plan.steps))
        outcome = self.runner.run(changelog, batch, part, groups, state, carried)
        waiting = needs_waiting(part, outcome.results)
        if waiting is not None:  # (rows waiting for their schema in one part hold others')
            part = replace(part, waiting=waiting)
            control_plan, planner = plan_control(part, errors)
            outcome = self.runner.run(changelog, batch, part, groups, state, carried)
        after = merge_states(planner.state, outcome.results, part)
        plan = self._plan(control_plan, planner.segments, outcome)
        self._check_bounds(settings, after, plan, outcome)
        return plan, after

    def _plan(self, control: Plan, segments: list[int], outcome: PartsOutcome) -> Plan:
        parts = {p.group: p for p in outcome.results}
        steps: list[Step] = []
        for item in assemble(control, segments, outcome.results):
            if not isinstance(item, tuple):
                steps.append(item)
                continue
            group, number = item
            step = parts[group].steps[number]
            if isinstance(step, TableChanges):  # (else a schema step of rows that carry one)
                rows = parts[group].sizes[number]
                step = self.runner.steps_of(step, outcome.changes(group, number), rows)
            steps.append(step)
        plan = Plan(steps, concat([control.dead_letters, outcome.dead_letters]))
        for name, value in batch_counts(control, outcome.results).items():
            setattr(plan, name, value)
        plan.watermark = control.watermark
        return plan

    def _check_bounds(
        self, settings: PlanSettings, state: ConsumerState, plan: Plan, outcome: PartsOutcome
    ) -> None:
        """The bounds on held rows and guards over every part; the floor the guards are
        collected by when next read."""
        parts = outcome.results
        held = (state.held.num_rows if state.held is not None else 0) + sum(
            p.counts["held"] for p in parts
        )
        bound = ordering.release_bound(state, settings.mode)
        ordering.check_held(state, held, bound, plan.awaiting_schema, settings.max_held_rows)
        since = [p.held_since for p in parts if p.held_since is not None]
        floor = ordering.guard_floor(
            state, settings.mode, settings.guard_retention, min(since, default=None)
        )
        guards = outcome.untouched_guards + sum(p.guards for p in parts)
        ordering.check_guards(
            state, settings.mode, floor, settings.guard_retention, settings.max_guards, guards
        )
        tables = sorted({k for p in parts if p.counts["held"] for k in p.tables})
        state.parts = {
            **outcome.kept,  # (where the runner keeps them)
            "held": held - (state.held.num_rows if state.held is not None else 0),
            "guards": guards,
            "guard_floor": floor,
            "held_tables": [list(k) for k in tables],
        }


def _held_tables(state: ConsumerState, carried: Carried | None) -> set[TableKey]:
    """The tables of the rows held back before this batch."""
    tables = {(db, t) for db, t in state.parts.get("held_tables", [])}
    if carried is not None and carried.held is not None:
        names = (carried.held[c].to_pylist() for c in ("database", "table"))
        tables |= set(zip(*names, strict=True))
    return tables


def guards_kept(guards: pa.Table | None, state: ConsumerState) -> pa.Table | None:
    """Saved guards (Guards.to_arrow's columns) as collected after the batch that saved
    them: above its guard floor and their table's floor (what one planner does at the end
    of a batch, :meth:`Guards.collect`, done here when the guards are next read)."""
    if guards is None or not guards.num_rows:
        return None
    floor = int(state.parts.get("guard_floor", -1))
    keep = pc.greater(guards["commit_ts"], floor)
    for (database, table), table_floor in state.floors.items():
        mine = pc.and_(pc.equal(guards["database"], database), pc.equal(guards["table"], table))
        keep = pc.and_(
            keep, pc.invert(pc.and_(mine, pc.less_equal(guards["commit_ts"], table_floor)))
        )
    return guards.filter(keep)


class LocalRunner:
    """The parts planned one after another in this process, their held rows and guards
    kept in memory by batch (tests compare it with one planner)."""

    def __init__(self) -> None:
        self.kept: dict[int, tuple[pa.Table | None, pa.Table | None]] = {}

    def control(self, changelog: pa.Table) -> tuple[pa.Table, list[tuple[TableKey, str]]]:
        ordered = changelog.append_column(ORDER, pa.array(range(changelog.num_rows), pa.int64()))
        is_row = pc.equal(ordered["kind"], ROW)
        rows = ordered.filter(is_row).select(["database", "table", "topic", "partition"])
        pairs = {
            ((r["database"], r["table"]), f"{r['topic']}/{r['partition']}")
            for r in rows.to_pylist()
        }
        return ordered.filter(pc.invert(is_row)), sorted(pairs)

    def run(
        self,
        changelog: pa.Table,
        batch: int,
        part: PartInput,
        groups: dict[TableKey, int],
        state: ConsumerState,
        carried: Carried | None = None,
    ) -> PartsOutcome:
        ordered = changelog.append_column(ORDER, pa.array(range(changelog.num_rows), pa.int64()))
        rows = ordered.filter(pc.equal(ordered["kind"], ROW))
        held, saved = self.kept.get(int(state.parts.get("batch", -1)), (None, None))
        guards = guards_kept(saved, state)
        if carried is not None:
            held, guards = concat([carried.held, held]), concat([carried.guards, guards])
        planned = [
            self._part(part, group, groups, rows, held, guards)
            for group in sorted(set(groups.values()))
        ]
        untouched = _of_tables(guards, set(groups), keep=False)
        new_guards = concat([*(p.guards.to_arrow() for p in planned), untouched])
        self.kept[batch] = (concat([p.held for p in planned]), new_guards)
        changes = {(p.result.group, n): c for p in planned for n, c in p.changes.items()}
        return PartsOutcome(
            [p.result for p in planned],
            concat([p.dead_letters for p in planned]),
            lambda group, number: changes[(group, number)],
            {"batch": batch},
            untouched.num_rows if untouched is not None else 0,
        )

    def _part(
        self,
        part: PartInput,
        group: int,
        groups: dict[TableKey, int],
        rows: pa.Table,
        held: pa.Table | None,
        guards: pa.Table | None,
    ) -> Any:
        tables = frozenset(k for k, g in groups.items() if g == group)
        mine = _of_tables(guards, tables)
        return plan_part(
            part,
            group,
            tables,
            _of_tables(rows, tables) or rows.slice(0, 0),
            _of_tables(held, tables),
            Guards.from_arrow(mine),
        )

    def steps_of(self, step: TableChanges, changes: pa.Table, rows: int) -> Step:
        return TableChanges(step.database, step.table, step.schema, changes)


def _of_tables(
    rows: pa.Table | None, tables: set[TableKey] | frozenset[TableKey], keep: bool = True
) -> pa.Table | None:
    """The rows of ``tables`` (or, not ``keep``, of the others); None for none."""
    if rows is None or not rows.num_rows:
        return None
    keys = pa.array([f"{db}\x00{t}" for db, t in sorted(tables)], pa.string())
    names = pc.binary_join_element_wise(rows["database"], rows["table"], "\x00")
    mask = pc.is_in(names, value_set=keys)
    found = rows.filter(mask if keep else pc.invert(mask))
    return found if found.num_rows else None
