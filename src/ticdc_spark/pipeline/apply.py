"""Applying changelog micro-batches to a sink exactly once, with state that survives restarts.

:class:`Applier` is what the streaming query's ``foreachBatch`` runs (and what tests run
without Spark): load the consumer state as it was before this batch, plan, apply every step
with a version made of the batch id and the step number, write dead letters, save the state
under this batch id.  A batch replayed after a crash starts again from the state before it,
and the sink skips the steps it had already committed, so the final tables are those of a
run that never stopped.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from ticdc_spark.errors import CHECKPOINT_WAY_OUT, CheckpointError, DamagedState, TiCDCSparkError
from ticdc_spark.model import physical_ms
from ticdc_spark.pipeline.arrow import concat
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.dead_letters import DeadLetterWriter
from ticdc_spark.pipeline.failpoints import crash_point, set_batch
from ticdc_spark.pipeline.ordering import GUARD_RETENTION_SECONDS, MAX_GUARDS, MAX_HELD_ROWS
from ticdc_spark.pipeline.planning import DriverPlanning, Planning, PlanSettings
from ticdc_spark.pipeline.policy import Mode, OnError
from ticdc_spark.pipeline.runner import run_steps
from ticdc_spark.pipeline.steps import DDLStep, Plan, PlannedChanges, Step
from ticdc_spark.sinks.base import StepResult, TableSink
from ticdc_spark.storage import join

__all__ = ["STEPS_PER_BATCH", "Applier", "BatchLog", "BatchReport"]

logger = logging.getLogger(__name__)

STEPS_PER_BATCH = 1_000_000  # a step's version is batch_id * STEPS_PER_BATCH + step number


class BatchLog(Protocol):
    """Where micro-batches are logged before they are applied (a
    :class:`~ticdc_spark.pipeline.checkpoint.ChangelogLog`, or Parquet the executors wrote:
    :class:`ticdc_spark.spark.planning.PlannedLog`)."""

    root: Any

    def read(self, batch: int) -> Any: ...

    def batches(self) -> list[int]: ...

    def prune(self, through: int) -> None: ...


@dataclass
class BatchReport:
    """What one micro-batch did (printed as progress)."""

    batch: int
    rows_in: int = 0
    rows_applied: int = 0
    held: int = 0
    awaiting_schema: int = 0  # of the held rows, those waiting for their schema (Simple)
    replays: int = 0
    guarded: int = 0  # changes dropped as older than a delete already applied (guards)
    ddl: int = 0
    dead_letters: int = 0
    watermark: int = 0
    seconds: float = 0.0
    skipped_steps: int = 0
    read_seconds: float = 0.0  # reading and decoding the micro-batch (Spark)
    skipped: int = 0  # capture lines that are not records, skipped (onBadRecord=skip)
    tables: dict[str, int] = field(default_factory=dict)
    # the commit ts of each step applied (with track_commits: latency measurements)
    commit_ts: list[pa.ChunkedArray] = field(default_factory=list)

    def line(self) -> str:
        lag = ""
        if self.watermark:
            behind = max(0.0, time.time() - physical_ms(self.watermark) / 1000)
            lag = f", watermark lag {behind:.1f}s"
        rate = self.rows_applied / self.seconds if self.seconds else 0.0
        waiting = f" ({self.awaiting_schema} for their schema)" if self.awaiting_schema else ""
        skipped = f", {self.skipped} bad capture lines skipped" if self.skipped else ""
        return (
            f"batch {self.batch}: {self.rows_in} rows in, {self.rows_applied} applied "
            f"({rate:,.0f} rows/s), {self.held} held{waiting}, {self.ddl} DDL, "
            f"{self.replays} replays dropped, {self.guarded} older than a delete dropped, "
            f"{self.dead_letters} dead letters{skipped}{lag}"
        )


class Applier:
    """Plans and applies micro-batches (the body of ``foreachBatch``)."""

    def __init__(
        self,
        sink: TableSink,
        store: StateStore,
        *,
        mode: str = Mode.CONSISTENT,
        dead_letters: DeadLetterWriter | None = None,
        on_error: str = OnError.DEAD_LETTER,
        partitions: tuple[str, ...] = (),
        track_commits: bool = False,
        capabilities: Capabilities | None = None,
        max_held_rows: int = MAX_HELD_ROWS,
        guard_retention: float = GUARD_RETENTION_SECONDS,
        max_guards: int = MAX_GUARDS,
        threads: int = 1,
        planning: Planning | None = None,
    ) -> None:
        self.sink = sink
        self.threads = threads  # steps of different tables applied at once (pipeline.runner)
        self.store = store
        self.mode = Mode.parse(mode)
        self.dead = dead_letters or DeadLetterWriter(
            join(str(store.root), "dead-letters"), store.storage
        )
        self.on_error = OnError.parse(on_error, (OnError.DEAD_LETTER, OnError.STOP))
        self.partitions = partitions
        self.track_commits = track_commits  # keep applied commit ts (latency measurements)
        self.capabilities = capabilities or Capabilities()
        self.max_held_rows = max_held_rows  # (see pipeline.ordering.check_held)
        self.guard_retention, self.max_guards = guard_retention, max_guards  # (check_guards)
        self.reports: list[BatchReport] = []
        self.planning = planning or DriverPlanning()  # (or by parts: pipeline.planning)
        self.settings = PlanSettings(
            self.mode,
            self.partitions,
            self.capabilities,
            self.max_held_rows,
            self.guard_retention,
            self.max_guards,
        )

    def apply(self, changelog: Any, batch: int) -> BatchReport:
        """Apply one micro-batch of changelog rows (an Arrow table; by parts, whatever the
        planning's runner reads: a Spark DataFrame)."""
        started = time.perf_counter()
        set_batch(batch)
        plan, state = self.planning.plan(self.settings, changelog, self.store.load(batch), batch)
        report = BatchReport(
            batch,
            rows_in=plan.rows_in,
            held=plan.held,
            awaiting_schema=plan.awaiting_schema,
            replays=plan.replays,
            guarded=plan.guarded,
            watermark=plan.watermark,
        )

        report.dead_letters = self._dead_letters(batch, self._run(plan, batch, report))
        self.store.save(batch, state)
        crash_point("state-saved")
        report.seconds = time.perf_counter() - started
        self.reports.append(report)
        return report

    def _run(self, plan: Plan, batch: int, report: BatchReport) -> list[pa.Table | None]:
        """Apply the plan's steps, each with its version (tables at once: :mod:`.runner`);
        the report counts them.  The batch's dead letters."""

        def apply_step(number: int, step: Step) -> StepResult | None:
            set_batch(batch)  # (the worker thread's: points inside the sinks name the batch)
            version = batch * STEPS_PER_BATCH + number
            replayed = self._renamed_since(plan.steps, number, version)
            result = self._apply_step(step, version, replayed)
            crash_point("step")
            return result

        results = run_steps(plan.steps, apply_step, self.threads)
        counted = [self._count(s, r, report) for s, r in zip(plan.steps, results, strict=True)]
        return [plan.dead_letters, *counted]

    def recover(self, log: BatchLog, committed: int = -1) -> list[BatchReport]:
        """Bring the consumer state up to ``committed`` (the last batch Spark committed) and
        the logged batches, oldest first: the batches a crash left logged but not applied
        (Spark records a batch as done before its overlapped apply ends), and those whose
        saved state is missing or damaged, replayed from the newest good state (their
        steps already in the tables are skipped by version).  Raises
        :class:`~ticdc_spark.errors.CheckpointError` naming what is missing
        when the log does not reach back far enough."""
        logged = log.batches()
        wanted = max([committed, *logged])
        good, damaged = self.store.newest_good(wanted)
        needed = range(good + 1, wanted + 1)
        gone = [b for b in needed if b not in logged]
        if gone:
            raise CheckpointError(self._unrecoverable(log, good, wanted, gone, damaged))
        for problem in damaged:
            logger.warning("%s: rebuilding it from the logged micro-batches", problem.short)
        saved = set(self.store.saved())
        for batch in needed:
            if batch not in saved:  # (docs/pipeline.md promises a warning naming the file)
                logger.warning(
                    "%s is missing: rebuilding it from the logged micro-batches (a run stopped "
                    "before saving it, or the file was lost)",
                    self.store.state_path(batch),
                )
        reports = [self.apply(log.read(batch), batch) for batch in needed]
        log.prune(self.store.oldest())
        return reports

    def _unrecoverable(
        self,
        log: BatchLog,
        good: int,
        wanted: int,
        gone: list[int],
        damaged: list[DamagedState],
    ) -> str:
        problems = [d.short for d in damaged]
        damaged_files = {d.location for d in damaged}
        missing = [  # (by name: the directory is said once, so the message fits a terminal)
            self.store.state_path(b).rsplit("/", 1)[-1]
            for b in range(good + 1, wanted + 1)
            if self.store.state_path(b) not in damaged_files
        ]
        if missing:
            problems.append(f"missing: {', '.join(missing[-3:])}")
        start = f"the newest good state, batch {good}'s," if good >= 0 else "an empty state"
        return (
            f"the consumer state in {self.store.root} does not reach micro-batch {wanted}, the "
            f"last Spark committed or the pipeline logged ({'; '.join(problems)}). Rebuilding it "
            f"from {start} needs the changelogs of micro-batches {gone[0]}-{gone[-1]} (in "
            f"{log.root}), which are gone. {CHECKPOINT_WAY_OUT}"
        )

    def _renamed_since(self, steps: list[Step], number: int, version: int) -> bool:
        """Whether a replay finds this row step's table already renamed by a later step of
        the batch: the table is gone, and under its new name it has this step's version.
        (Applying the rows again would recreate the old table beside the renamed one.)"""
        step = steps[number]
        if isinstance(step, DDLStep):
            return False
        key = original = (step.database, step.table)
        for later in steps[number + 1 :]:
            if (
                isinstance(later, DDLStep)
                and later.renamed_to
                and (later.database, later.table) == key
            ):
                key = later.renamed_to
        return (  # the sink is asked only when the batch renames the table later on
            key != original
            and not self.sink.exists(original)
            and self.sink.exists(key)
            and self.sink.applied_version(key) >= version
        )

    def _apply_step(self, step: Step, version: int, replayed: bool) -> StepResult | None:
        """Apply one step (a worker of :func:`~ticdc_spark.pipeline.runner.run_steps`: it
        touches nothing shared); None for a DDL."""
        if isinstance(step, DDLStep):
            self.sink.apply_ddl(step, version)
            return None
        if isinstance(step, PlannedChanges):
            return self.sink.apply_planned(step, version, replayed)
        return self.sink.replayed(step) if replayed else self.sink.apply_rows(step, version)

    def _count(self, step: Step, result: StepResult | None, report: BatchReport) -> pa.Table | None:
        """Add a step's result to the batch's report; its dead letters."""
        if result is None:
            report.ddl += 1
            return None
        assert not isinstance(step, DDLStep)
        if self.track_commits:  # (measurements: where planned, the column is read back)
            if isinstance(step, PlannedChanges):
                report.commit_ts.append(self.sink.planned_commits(step))
            else:
                report.commit_ts.append(step.rows["commit_ts"])
        report.skipped_steps += int(result.skipped)
        report.rows_applied += result.rows
        name = f"{step.database}.{step.table}"
        report.tables[name] = report.tables.get(name, 0) + result.rows
        dead: pa.Table | None = result.dead_letters
        return dead

    def _dead_letters(self, batch: int, parts: list[pa.Table | None]) -> int:
        """Write the batch's dead letters (how many), or stop at the first under
        ``--on-error stop``."""
        rows = concat(parts)
        if rows is None or not rows.num_rows:
            return 0
        if self.on_error == OnError.STOP:
            first = rows.slice(0, 1).to_pylist()[0]
            raise TiCDCSparkError(
                f"{rows.num_rows} record(s) cannot be applied; first at "
                f"{first['topic']}/{first['partition']}@{first['offset']}: {first['error']}"
            )
        return self.dead.write(batch, rows)
