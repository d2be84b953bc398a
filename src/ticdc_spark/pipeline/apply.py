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
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.model import physical_ms
from ticdc_spark.pipeline.checkpoint.repair import WAY_OUT, CheckpointError, DamagedState
from ticdc_spark.pipeline.failpoints import crash_point, set_batch
from ticdc_spark.pipeline.planner import (
    MAX_HELD_ROWS,
    ConsumerState,
    DDLStep,
    Planner,
    TableChanges,
)
from ticdc_spark.sinks.base import TableSink

__all__ = [
    "Applier",
    "BatchReport",
    "ChangelogLog",
    "DeadLetterWriter",
    "StateStore",
    "protocol_planning",
]

logger = logging.getLogger(__name__)

STEPS_PER_BATCH = 1_000_000  # a step's version is batch_id * STEPS_PER_BATCH + step number


class StateStore:
    """Consumer state per batch id under ``CHECKPOINT/ticdc`` (JSON plus held rows as Arrow).

    ``state-N.json`` is the state after micro-batch N; it records how many rows it holds back
    (``held_rows``), which are in ``held-N.arrow``.  Reading checks both: a missing or damaged
    file is a :class:`~ticdc_spark.pipeline.checkpoint.repair.DamagedState` naming it, never an
    older state taken in its place (rows held back would be lost).
    """

    def __init__(self, checkpoint: str | Path, keep: int = 3) -> None:
        self.root = Path(checkpoint) / "ticdc"
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep

    def pipeline_id(self) -> str:
        """A stable id for this checkpoint: the sinks' app id for idempotent commits."""
        path = self.root / "pipeline.json"
        if path.exists():
            try:
                return str(orjson.loads(path.read_bytes())["id"])
            except (ValueError, KeyError, TypeError) as exc:
                raise CheckpointError(
                    f"{path} is damaged ({_reason(exc)}): it holds the id under which the "
                    f"tables record the steps applied. {WAY_OUT}"
                ) from None
        if self._batches():
            raise CheckpointError(
                f"{path} is missing while the consumer state has micro-batches: it holds the id "
                f"under which the tables record the steps applied. {WAY_OUT}"
            )
        ident = f"ticdc-spark-{uuid.uuid4()}"
        _atomic_write(path, orjson.dumps({"id": ident}))
        return ident

    def load(self, before_batch: int) -> ConsumerState:
        """The state saved by batch ``before_batch - 1`` (fresh for batch 0)."""
        saved = [b for b in self._batches() if b < before_batch]
        if before_batch > 0 and (before_batch - 1) not in saved:
            newest = f"the newest is batch {max(saved)}'s" if saved else "there is none"
            raise DamagedState(
                self.state_path(before_batch - 1),
                f"is missing ({newest}), and micro-batch {before_batch} starts from it",
            )
        return self.read(before_batch - 1) if before_batch > 0 else ConsumerState()

    def read(self, batch: int) -> ConsumerState:
        """The state saved by ``batch``, checked whole (:class:`DamagedState` if not)."""
        path = self.state_path(batch)
        try:
            data = path.read_bytes()
            obj = orjson.loads(data)
            held = self._read_held(batch, obj.get("held_rows", -1))
            return ConsumerState.from_json(data, held)
        except FileNotFoundError:
            raise DamagedState(path, "is missing") from None
        except DamagedState:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None
        except TiCDCSparkError as exc:  # e.g. a column type of the catalog that does not parse
            raise DamagedState(path, f"is damaged ({exc})") from None

    def _read_held(self, batch: int, rows: int) -> Any:
        """The rows ``state-N.json`` says it holds back (``rows``; -1: a state saved before
        the count was, which held rows if the file exists)."""
        import pyarrow as pa

        path = self.held_path(batch)
        if rows == 0 or (rows < 0 and not path.exists()):
            return None
        if not path.exists():
            raise DamagedState(path, f"is missing (its state holds {rows} rows back in it)")
        try:
            with pa.memory_map(str(path)) as source:
                held = pa.ipc.open_file(source).read_all()
        except pa.ArrowInvalid as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None
        if rows >= 0 and held.num_rows != rows:
            raise DamagedState(path, f"holds {held.num_rows} rows, not the {rows} of its state")
        return held

    def save(self, batch: int, state: ConsumerState) -> None:
        held_path = self.held_path(batch)
        if state.held is not None and state.held.num_rows:
            import pyarrow as pa

            tmp = held_path.with_suffix(".tmp")
            with open(tmp, "wb") as raw:
                with pa.ipc.new_file(raw, state.held.schema) as out:
                    out.write_table(state.held)
                raw.flush()
                os.fsync(raw.fileno())
            os.replace(tmp, held_path)
        else:  # (a file an earlier attempt of this batch left is not this state's)
            held_path.unlink(missing_ok=True)
        _atomic_write(self.state_path(batch), state.to_json())
        for old in sorted(self._batches())[: -self.keep]:
            self.state_path(old).unlink(missing_ok=True)
            self.held_path(old).unlink(missing_ok=True)

    def latest(self) -> int:
        """The id of the latest batch whose state is saved (-1 if none)."""
        return max(self._batches(), default=-1)

    def oldest(self) -> int:
        """The oldest state a lost or damaged newer one can be rebuilt from: the oldest
        batch's kept, or -1 (the empty state before batch 0) while fewer than ``keep`` are
        saved."""
        saved = self._batches()
        return min(saved) if len(saved) >= self.keep else -1

    def newest_good(self, limit: int) -> tuple[int, list[DamagedState]]:
        """The newest batch up to ``limit`` whose state reads whole (-1: none), and the
        damaged states newer than it."""
        damaged = []
        for batch in sorted((b for b in self._batches() if b <= limit), reverse=True):
            try:
                self.read(batch)
            except DamagedState as exc:
                damaged.append(exc)
                continue
            return batch, damaged
        return -1, damaged

    def state_path(self, batch: int) -> Path:
        return self.root / f"state-{batch:012d}.json"

    def held_path(self, batch: int) -> Path:
        return self.root / f"held-{batch:012d}.arrow"

    def _batches(self) -> list[int]:
        return [int(p.stem.split("-")[1]) for p in self.root.glob("state-*.json")]


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class ChangelogLog:
    """Micro-batches written ahead of being applied, under ``CHECKPOINT/ticdc/wal``.

    When the pipeline applies a micro-batch while Spark already reads the next one, Spark
    records the first batch's offsets as done before it is applied.  Logging the batch's
    changelog first (Arrow IPC, synced to disk) keeps that safe: after a crash,
    :meth:`Applier.recover` applies every logged batch that has no saved state yet.  Logged
    batches are kept as long as the states before them (:meth:`prune`), so that a newer
    state found missing or damaged is rebuilt by applying them again.
    """

    def __init__(self, state_root: Path) -> None:
        self.root = state_root / "wal"
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, batch: int, changelog: Any) -> None:
        import pyarrow as pa

        path = self._path(batch)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as raw:
            with pa.ipc.new_file(raw, changelog.schema) as out:
                out.write_table(changelog)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
        _sync_directory(self.root)

    def read(self, batch: int) -> Any:
        import pyarrow as pa

        with pa.memory_map(str(self._path(batch))) as source:
            return pa.ipc.open_file(source).read_all()

    def batches(self) -> list[int]:
        return sorted(int(p.stem.split("-")[1]) for p in self.root.glob("changelog-*.arrow"))

    def drop(self, batch: int) -> None:
        self._path(batch).unlink(missing_ok=True)

    def prune(self, through: int) -> None:
        """Drop the logged batches up to ``through`` (those the oldest kept state covers:
        the rest can rebuild a newer state that is lost or damaged)."""
        for batch in self.batches():
            if batch <= through:
                self.drop(batch)

    def _path(self, batch: int) -> Path:
        return self.root / f"changelog-{batch:012d}.arrow"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make a rename into ``directory`` durable (a power cut could otherwise undo it)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DeadLetterWriter:
    """Dead letters as JSON Lines (the capture format plus ``error``), one file per batch."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def write(self, batch: int, rows: Any) -> int:
        if rows is None or not rows.num_rows:
            return 0
        import base64

        self.directory.mkdir(parents=True, exist_ok=True)
        lines = []
        for row in rows.to_pylist():
            for name in ("key", "value"):
                if row.get(name) is not None:
                    row[name] = base64.b64encode(row[name]).decode("ascii")
            lines.append(orjson.dumps(row) + b"\n")
        _atomic_write(self.directory / f"dead-letters-{batch:012d}.jsonl", b"".join(lines))
        return len(lines)


@dataclass
class BatchReport:
    """What one micro-batch did (printed as progress)."""

    batch: int
    rows_in: int = 0
    rows_applied: int = 0
    held: int = 0
    awaiting_schema: int = 0  # of the held rows, those waiting for their schema (Simple)
    replays: int = 0
    ddl: int = 0
    dead_letters: int = 0
    watermark: int = 0
    seconds: float = 0.0
    skipped_steps: int = 0
    read_seconds: float = 0.0  # reading and decoding the micro-batch (Spark)
    tables: dict[str, int] = field(default_factory=dict)
    commit_ts: list[Any] = field(default_factory=list)  # per applied step (with track_commits)

    def line(self) -> str:
        lag = ""
        if self.watermark:
            behind = max(0.0, time.time() - physical_ms(self.watermark) / 1000)
            lag = f", watermark lag {behind:.1f}s"
        rate = self.rows_applied / self.seconds if self.seconds else 0.0
        waiting = f" ({self.awaiting_schema} for their schema)" if self.awaiting_schema else ""
        return (
            f"batch {self.batch}: {self.rows_in} rows in, {self.rows_applied} applied "
            f"({rate:,.0f} rows/s), {self.held} held{waiting}, {self.ddl} DDL, "
            f"{self.replays} replays dropped, {self.dead_letters} dead letters{lag}"
        )


def protocol_planning(protocol: str, options: dict[str, str] | None = None) -> dict[str, Any]:
    """The :class:`Applier` arguments a protocol needs, from its codec's catalog entry:
    ``rows_define_schema`` (no DDL, as Avro; or table schemas by version, as Simple: a table
    follows the schemas its rows carry), ``place_by_position`` (rows without a commit ts)
    and ``finisher`` (rows that wait for their schema, Simple)."""
    from ticdc_spark.codec.catalog import get_codec, make_finisher

    spec = get_codec(protocol)
    finisher = make_finisher(protocol, options)
    return {
        "rows_define_schema": not spec.ddl or finisher is not None,
        "place_by_position": not spec.commit_ts,
        "finisher": finisher,
    }


class Applier:
    """Plans and applies micro-batches (the body of ``foreachBatch``)."""

    def __init__(
        self,
        sink: TableSink,
        store: StateStore,
        *,
        mode: str = "consistent",
        dead_letters: DeadLetterWriter | None = None,
        on_error: str = "dead-letter",
        partitions: tuple[str, ...] = (),
        track_commits: bool = False,
        rows_define_schema: bool = False,
        place_by_position: bool = False,
        finisher: Any = None,
        max_held_rows: int = MAX_HELD_ROWS,
    ) -> None:
        self.sink = sink
        self.max_held_rows = max_held_rows  # (see consume.Planner._check_held)
        # (protocols without DDL, and without watermarks: Avro; see consume.Planner)
        self.rows_define_schema = rows_define_schema
        self.place_by_position = place_by_position
        self.finisher = finisher  # (Simple: rows finished once their schema is known)
        self.store = store
        self.mode = mode
        self.dead = dead_letters or DeadLetterWriter(store.root / "dead-letters")
        self.on_error = on_error
        self.partitions = partitions
        self.track_commits = track_commits  # keep applied commit ts (latency measurements)
        self.reports: list[BatchReport] = []

    def apply(self, changelog: Any, batch: int) -> BatchReport:
        """Apply one micro-batch of changelog rows (a pyarrow Table)."""
        started = time.perf_counter()
        set_batch(batch)
        state = self.store.load(batch)
        planner = Planner(
            self.mode,
            state,
            self.partitions,
            rows_define_schema=self.rows_define_schema,
            place_by_position=self.place_by_position,
            finisher=self.finisher,
            max_held_rows=self.max_held_rows,
        )
        plan = planner.plan(changelog)
        report = BatchReport(
            batch,
            rows_in=plan.rows_in,
            held=plan.held,
            awaiting_schema=plan.awaiting_schema,
            replays=plan.replays,
            watermark=plan.watermark,
        )
        dead = [plan.dead_letters]
        for number, step in enumerate(plan.steps):
            version = batch * STEPS_PER_BATCH + number
            replayed = self._renamed_since(plan.steps, number, version)
            dead.append(self._apply_step(step, version, report, replayed))
            crash_point("step")
        report.dead_letters = self._dead_letters(batch, dead)
        self.store.save(batch, planner.state)
        crash_point("state-saved")
        report.seconds = time.perf_counter() - started
        self.reports.append(report)
        return report

    def recover(self, log: ChangelogLog, committed: int = -1) -> list[BatchReport]:
        """Bring the consumer state up to ``committed`` (the last batch Spark committed) and
        the logged batches, oldest first: the batches a crash left logged but not applied
        (Spark records a batch as done before its overlapped apply ends), and those whose
        saved state is missing or damaged, replayed from the newest good state (their
        steps already in the tables are skipped by version).  Raises
        :class:`~ticdc_spark.pipeline.checkpoint.repair.CheckpointError` naming what is missing
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
        reports = [self.apply(log.read(batch), batch) for batch in needed]
        log.prune(self.store.oldest())
        return reports

    def _unrecoverable(
        self,
        log: ChangelogLog,
        good: int,
        wanted: int,
        gone: list[int],
        damaged: list[DamagedState],
    ) -> str:
        problems = [d.short for d in damaged]
        damaged_batches = {d.path for d in damaged}
        missing = [
            str(self.store.state_path(b))
            for b in range(good + 1, wanted + 1)
            if self.store.state_path(b) not in damaged_batches
        ]
        if missing:
            problems.append(f"missing: {', '.join(missing[-3:])}")
        start = f"the newest good state, batch {good}'s," if good >= 0 else "an empty state"
        return (
            f"the consumer state does not reach micro-batch {wanted}, the last Spark committed "
            f"or the pipeline logged ({'; '.join(problems)}). Rebuilding it from {start} needs "
            f"the changelogs of micro-batches {gone[0]}-{gone[-1]} under {log.root}, which are "
            f"gone. {WAY_OUT}"
        )

    def _renamed_since(self, steps: list[Any], number: int, version: int) -> bool:
        """Whether a replay finds this row step's table already renamed by a later step of
        the batch: the table is gone, and under its new name it has this step's version.
        (Applying the rows again would recreate the old table beside the renamed one.)"""
        step = steps[number]
        if not isinstance(step, TableChanges):
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

    def _apply_step(
        self,
        step: TableChanges | DDLStep,
        version: int,
        report: BatchReport,
        replayed: bool = False,
    ) -> Any:
        if isinstance(step, DDLStep):
            self.sink.apply_ddl(step, version)
            report.ddl += 1
            return None
        result = self.sink.replayed(step) if replayed else self.sink.apply_rows(step, version)
        if self.track_commits:
            report.commit_ts.append(step.rows["commit_ts"])
        report.skipped_steps += int(result.skipped)
        report.rows_applied += result.rows
        name = f"{step.database}.{step.table}"
        report.tables[name] = report.tables.get(name, 0) + result.rows
        return result.dead_letters

    def _dead_letters(self, batch: int, parts: list[Any]) -> int:
        from ticdc_spark.pipeline.planner import _concat

        rows = _concat([p for p in parts if p is not None])
        if rows is None or not rows.num_rows:
            return 0
        if self.on_error == "stop":
            first = rows.slice(0, 1).to_pylist()[0]
            raise TiCDCSparkError(
                f"{rows.num_rows} record(s) cannot be applied; first at "
                f"{first['topic']}/{first['partition']}@{first['offset']}: {first['error']}"
            )
        return self.dead.write(batch, rows)
