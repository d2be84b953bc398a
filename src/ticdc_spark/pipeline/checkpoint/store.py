"""The consumer state of each micro-batch, saved beside Spark's checkpoint."""

from __future__ import annotations

import uuid
from pathlib import Path

import orjson
import pyarrow as pa

from ticdc_spark.errors import (
    CHECKPOINT_WAY_OUT,
    CheckpointError,
    DamagedState,
    TiCDCSparkError,
)
from ticdc_spark.pipeline.checkpoint.files import atomic_write, read_arrow, write_arrow
from ticdc_spark.pipeline.state import ConsumerState

__all__ = ["StateStore"]


class StateStore:
    """Consumer state per batch id under ``CHECKPOINT/ticdc`` (JSON plus held rows as Arrow).

    ``state-N.json`` is the state after micro-batch N; it records how many rows it holds back
    (``held_rows``), which are in ``held-N.arrow``.  Reading checks both: a missing or damaged
    file is a :class:`~ticdc_spark.errors.DamagedState` naming it, never an older state taken
    in its place (rows held back would be lost).
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

    def _read_held(self, batch: int, rows: int) -> pa.Table | None:
        """The rows ``state-N.json`` says it holds back (``rows``; -1: a state saved before
        the count was, which held rows if the file exists)."""
        path = self.held_path(batch)
        if rows == 0 or (rows < 0 and not path.exists()):
            return None
        if not path.exists():
            raise DamagedState(path, f"is missing (its state holds {rows} rows back in it)")
        try:
            held = read_arrow(path)
        except pa.ArrowInvalid as exc:
            raise DamagedState(path, f"is damaged ({_reason(exc)})") from None
        if rows >= 0 and held.num_rows != rows:
            raise DamagedState(path, f"holds {held.num_rows} rows, not the {rows} of its state")
        return held

    def save(self, batch: int, state: ConsumerState) -> None:
        """Save the state after ``batch`` (its held rows first: the state names their count),
        and forget all but the newest ``keep`` states."""
        held_path = self.held_path(batch)
        if state.held is not None and state.held.num_rows:
            write_arrow(held_path, state.held)  # (synced with the state's directory below)
        else:  # (a file an earlier attempt of this batch left is not this state's)
            held_path.unlink(missing_ok=True)
        atomic_write(self.state_path(batch), state.to_json())
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
