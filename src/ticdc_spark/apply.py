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

from ticdc_spark.consume import ConsumerState, DDLStep, Planner, TableChanges
from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.model import physical_ms
from ticdc_spark.sinks.base import TableSink

__all__ = ["Applier", "BatchReport", "ChangelogLog", "DeadLetterWriter", "StateStore"]

log = logging.getLogger(__name__)

STEPS_PER_BATCH = 1_000_000  # a step's version is batch_id * STEPS_PER_BATCH + step number


class StateStore:
    """Consumer state per batch id under ``CHECKPOINT/ticdc`` (JSON plus held rows as Arrow)."""

    def __init__(self, checkpoint: str | Path, keep: int = 3) -> None:
        self.root = Path(checkpoint) / "ticdc"
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep

    def pipeline_id(self) -> str:
        """A stable id for this checkpoint: the sinks' app id for idempotent commits."""
        path = self.root / "pipeline.json"
        if path.exists():
            return str(orjson.loads(path.read_bytes())["id"])
        ident = f"ticdc-spark-{uuid.uuid4()}"
        _atomic_write(path, orjson.dumps({"id": ident}))
        return ident

    def load(self, before_batch: int) -> ConsumerState:
        """The state saved by the latest batch before ``before_batch`` (fresh if none)."""
        saved = sorted(b for b in self._batches() if b < before_batch)
        if not saved:
            return ConsumerState()
        batch = saved[-1]
        held = None
        held_path = self.root / f"held-{batch:012d}.arrow"
        if held_path.exists():
            import pyarrow as pa

            with pa.memory_map(str(held_path)) as source:
                held = pa.ipc.open_file(source).read_all()
        return ConsumerState.from_json((self.root / f"state-{batch:012d}.json").read_bytes(), held)

    def save(self, batch: int, state: ConsumerState) -> None:
        if state.held is not None and state.held.num_rows:
            import pyarrow as pa

            path = self.root / f"held-{batch:012d}.arrow"
            tmp = path.with_suffix(".tmp")
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, state.held.schema) as out:
                out.write_table(state.held)
            os.replace(tmp, path)
        _atomic_write(self.root / f"state-{batch:012d}.json", state.to_json())
        for old in sorted(self._batches())[: -self.keep]:
            for name in (f"state-{old:012d}.json", f"held-{old:012d}.arrow"):
                (self.root / name).unlink(missing_ok=True)

    def latest(self) -> int:
        """The id of the latest batch whose state is saved (-1 if none)."""
        return max(self._batches(), default=-1)

    def _batches(self) -> list[int]:
        return [int(p.stem.split("-")[1]) for p in self.root.glob("state-*.json")]


class ChangelogLog:
    """Micro-batches written ahead of being applied, under ``CHECKPOINT/ticdc/wal``.

    When the pipeline applies a micro-batch while Spark already reads the next one, Spark
    records the first batch's offsets as done before it is applied.  Logging the batch's
    changelog first (Arrow IPC, synced to disk) keeps that safe: after a crash,
    :meth:`Applier.recover` applies every logged batch that has no saved state yet.
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
        return (
            f"batch {self.batch}: {self.rows_in} rows in, {self.rows_applied} applied "
            f"({rate:,.0f} rows/s), {self.held} held, {self.ddl} DDL, {self.replays} replays "
            f"dropped, {self.dead_letters} dead letters{lag}"
        )


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
    ) -> None:
        self.sink = sink
        # (protocols without DDL, and without watermarks: Avro; see consume.Planner)
        self.rows_define_schema = rows_define_schema
        self.place_by_position = place_by_position
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
        state = self.store.load(batch)
        planner = Planner(
            self.mode,
            state,
            self.partitions,
            rows_define_schema=self.rows_define_schema,
            place_by_position=self.place_by_position,
        )
        plan = planner.plan(changelog)
        report = BatchReport(
            batch,
            rows_in=plan.rows_in,
            held=plan.held,
            replays=plan.replays,
            watermark=plan.watermark,
        )
        dead = [plan.dead_letters]
        for number, step in enumerate(plan.steps):
            version = batch * STEPS_PER_BATCH + number
            replayed = self._renamed_since(plan.steps, number, version)
            dead.append(self._apply_step(step, version, report, replayed))
        report.dead_letters = self._dead_letters(batch, dead)
        self.store.save(batch, planner.state)
        report.seconds = time.perf_counter() - started
        self.reports.append(report)
        return report

    def recover(self, log: ChangelogLog) -> list[BatchReport]:
        """Apply the logged micro-batches that have no saved state (a crash came after Spark
        had recorded them as done and before their apply finished), oldest first."""
        reports = []
        for batch in log.batches():
            if batch > self.store.latest():
                reports.append(self.apply(log.read(batch), batch))
            log.drop(batch)
        return reports

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
        from ticdc_spark.consume import _concat

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
