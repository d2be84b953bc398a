"""The consumer state of each micro-batch, saved beside Spark's checkpoint."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from ticdc_spark.errors import (
    CHECKPOINT_WAY_OUT,
    CheckpointError,
    DamagedState,
    TiCDCSparkError,
)
from ticdc_spark.pipeline.checkpoint.files import atomic_write, read_arrow, write_arrow
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.state import ConsumerState

__all__ = ["StateStore"]


class StateStore:
    """Consumer state per batch id under ``CHECKPOINT/ticdc`` (JSON plus held rows and
    guards as Arrow).

    ``state-N.json`` is the state after micro-batch N; it records how many rows it holds back
    (``held_rows``), which are in ``held-N.arrow``, and how many guards it keeps (``guards``),
    which are in ``guards-N.arrow``.  Reading checks all three: a missing or damaged file is
    a :class:`~ticdc_spark.errors.DamagedState` naming it, never an older state taken in its
    place (rows held back would be lost, and guards lost could let a late change bring a
    deleted row back).
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
                    f"tables record the steps applied. {CHECKPOINT_WAY_OUT}"
                ) from None
        if self._batches():
            raise CheckpointError(
                f"{path} is missing while the consumer state has micro-batches: it holds the id "
                f"under which the tables record the steps applied. {CHECKPOINT_WAY_OUT}"
            )
        ident = f"ticdc-spark-{uuid.uuid4()}"
        atomic_write(path, orjson.dumps({"id": ident}))
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
            held = self._read_counted(self.held_path(batch), obj.get("held_rows", -1), "rows")
            return ConsumerState.from_json(data, held, self._read_guards(batch, obj))
        except FileNotFoundError:
            raise DamagedState(path, "is missing") from None
        except DamagedState:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None
        except TiCDCSparkError as exc:  # e.g. a column type of the catalog that does not parse
            raise DamagedState(path, f"is damaged ({exc})") from None

    def _read_counted(self, path: Path, rows: int, what: str) -> pa.Table | None:
        """The ``rows`` rows (held rows, or guards) ``state-N.json`` says are in ``path``
        (-1: a state saved before the count was, which has them if the file exists)."""
        if rows == 0 or (rows < 0 and not path.exists()):
            return None
        if not path.exists():
            raise DamagedState(path, f"is missing (its state keeps {rows} {what} in it)")
        try:
            table = read_arrow(path)
        except pa.ArrowInvalid as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None
        if rows >= 0 and table.num_rows != rows:
            raise DamagedState(path, f"holds {table.num_rows} {what}, not the {rows} of its state")
        return table

    def _read_guards(self, batch: int, obj: dict[str, Any]) -> Guards:
        """The guards ``state-N.json`` (``obj``) says are in ``guards-N.arrow``."""
        path = self.guards_path(batch)
        saved = self._read_counted(path, obj.get("guards", -1), "guards")
        try:
            return Guards.from_arrow(saved)
        except (ValueError, KeyError, TypeError) as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None

    def save(self, batch: int, state: ConsumerState) -> None:
        """Save the state after ``batch`` (its held rows and guards first: the state names
        their counts), and forget all but the newest ``keep`` states."""
        _write_or_remove(self.held_path(batch), state.held)
        _write_or_remove(self.guards_path(batch), state.guards.to_arrow())
        atomic_write(self.state_path(batch), state.to_json())
        for old in sorted(self._batches())[: -self.keep]:
            self.state_path(old).unlink(missing_ok=True)
            self.held_path(old).unlink(missing_ok=True)
            self.guards_path(old).unlink(missing_ok=True)

    def saved(self) -> list[int]:
        """The batches whose state is saved, oldest first."""
        return sorted(self._batches())

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

    def guards_path(self, batch: int) -> Path:
        return self.root / f"guards-{batch:012d}.arrow"

    def _batches(self) -> list[int]:
        return [int(p.stem.split("-")[1]) for p in self.root.glob("state-*.json")]


def _write_or_remove(path: Path, table: pa.Table | None) -> None:
    """Write ``table`` to ``path`` (synced with the state's directory, which names its row
    count, after it); remove a file an earlier attempt of this batch left when there is
    nothing to write (it is not this state's)."""
    if table is not None and table.num_rows:
        write_arrow(path, table)
    else:
        path.unlink(missing_ok=True)


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
