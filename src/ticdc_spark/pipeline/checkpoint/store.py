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
    ObjectNotFound,
    StorageError,
    TiCDCSparkError,
)
from ticdc_spark.pipeline.checkpoint.files import arrow_bytes, arrow_table
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.storage import Lease, StorageOptions, Store, is_local, join, open_store
from ticdc_spark.storage.store import local_path

__all__ = ["StateStore", "state_root"]

_PIPELINE = "pipeline.json"


def state_root(checkpoint: str | Path) -> str | Path:
    """``CHECKPOINT/ticdc``: a Path for a local checkpoint, a URI for an object store's."""
    location = str(checkpoint)
    return Path(local_path(location)) / "ticdc" if is_local(location) else join(location, "ticdc")


class StateStore:
    """Consumer state per batch id under ``CHECKPOINT/ticdc`` (JSON plus held rows and
    guards as Arrow), on a local disk or an object store (:mod:`ticdc_spark.storage`).

    ``state-N.json`` is the state after micro-batch N; it records how many rows it holds back
    (``held_rows``), which are in ``held-N.arrow``, and how many guards it keeps (``guards``),
    which are in ``guards-N.arrow``.  Reading checks all three: a missing or damaged file is
    a :class:`~ticdc_spark.errors.DamagedState` naming it, never an older state taken in its
    place (rows held back would be lost, and guards lost could let a late change bring a
    deleted row back).  Each file is written whole (see :mod:`.files`), the held rows and
    guards before the state that counts them.  With a ``lease``, a state is saved only while
    the lease is this job's.
    """

    def __init__(
        self,
        checkpoint: str | Path,
        keep: int = 3,
        storage: StorageOptions | None = None,
        lease: Lease | None = None,
    ) -> None:
        self.root = state_root(checkpoint)  # (messages name files under it)
        self.storage = storage
        self.files: Store = open_store(str(self.root), storage)
        self.keep = keep
        self.lease = lease

    def pipeline_id(self) -> str:
        """A stable id for this checkpoint: the sinks' app id for idempotent commits."""
        try:
            return self._read_pipeline_id()
        except ObjectNotFound:
            pass
        if self._batches():
            raise CheckpointError(
                f"{self.location(_PIPELINE)} is missing while the consumer state has "
                "micro-batches: it holds the id under which the tables record the steps "
                f"applied. {CHECKPOINT_WAY_OUT}"
            )
        # (put-if-absent: of two first starts racing, both go on with the winner's id)
        self.files.create(_PIPELINE, orjson.dumps({"id": f"ticdc-spark-{uuid.uuid4()}"}))
        return self._read_pipeline_id()

    def _read_pipeline_id(self) -> str:
        data = self.files.read(_PIPELINE)
        try:
            return str(orjson.loads(data)["id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"{self.location(_PIPELINE)} is damaged ({_reason(exc)}): it holds the id "
                f"under which the tables record the steps applied. {CHECKPOINT_WAY_OUT}"
            ) from None

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
        where = self.state_path(batch)
        try:
            data = self.files.read(_state_key(batch))
            obj = orjson.loads(data)
            held = self._read_counted(_held_key(batch), obj.get("held_rows", -1), "rows")
            return ConsumerState.from_json(data, held, self._read_guards(batch, obj))
        except ObjectNotFound:
            raise DamagedState(where, "is missing") from None
        except (DamagedState, StorageError):  # (a store that cannot be read: not damage)
            raise
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
            raise DamagedState(where, f"is damaged ({_reason(exc)})") from None
        except TiCDCSparkError as exc:  # e.g. a column type of the catalog that does not parse
            raise DamagedState(where, f"is damaged ({exc})") from None

    def _read_counted(self, key: str, rows: int, what: str) -> pa.Table | None:
        """The ``rows`` rows (of ``what``) ``state-N.json`` says are in ``key`` (-1: a state
        saved before the count was, which has them if the file exists)."""
        if rows == 0:
            return None
        try:
            data = self.files.read(key)
        except ObjectNotFound:
            if rows < 0:
                return None
            raise DamagedState(
                self.location(key), f"is missing (its state keeps {rows} {what} in it)"
            ) from None
        try:
            table = arrow_table(data)
        except pa.ArrowInvalid as exc:
            raise DamagedState(self.location(key), f"is damaged ({_reason(exc)})") from None
        if rows >= 0 and table.num_rows != rows:
            problem = f"holds {table.num_rows} {what}, not the {rows} of its state"
            raise DamagedState(self.location(key), problem)
        return table

    def _read_guards(self, batch: int, obj: dict[str, Any]) -> Guards:
        """The guards ``state-N.json`` (``obj``) says are in ``guards-N.arrow``."""
        key = _guards_key(batch)
        saved = self._read_counted(key, obj.get("guards", -1), "guards")
        try:
            return Guards.from_arrow(saved)
        except (ValueError, KeyError, TypeError) as exc:
            raise DamagedState(self.location(key), f"is damaged ({_reason(exc)})") from None

    def save(self, batch: int, state: ConsumerState) -> None:
        """Save the state after ``batch`` (its held rows and guards first: the state names
        their counts), and forget all but the newest ``keep`` states."""
        if self.lease is not None:
            self.lease.check()  # (another job may have the checkpoint now)
        self._write_or_remove(_held_key(batch), state.held)
        self._write_or_remove(_guards_key(batch), state.guards.to_arrow())
        self.files.write(_state_key(batch), state.to_json())
        doomed = sorted(self._batches())[: -self.keep]
        self.files.delete(
            [k for old in doomed for k in (_state_key(old), _held_key(old), _guards_key(old))]
        )

    def saved(self) -> list[int]:
        """The batches whose state is saved, oldest first."""
        return sorted(self._batches())

    def _write_or_remove(self, key: str, table: pa.Table | None) -> None:
        """Write ``table`` under ``key``; remove a file an earlier attempt of this batch
        left when there is nothing to write (it is not this state's)."""
        if table is not None and table.num_rows:
            self.files.write(key, arrow_bytes(table))
        else:
            self.files.delete(key)

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

    def location(self, key: str) -> str:
        """Where the file ``key`` is (for messages)."""
        return self.files.describe(key)

    def state_path(self, batch: int) -> str:
        return self.location(_state_key(batch))

    def held_path(self, batch: int) -> str:
        return self.location(_held_key(batch))

    def guards_path(self, batch: int) -> str:
        return self.location(_guards_key(batch))

    def _batches(self) -> list[int]:
        keys = self.files.list_keys("state-")
        return [int(k[6:-5]) for k in keys if k.endswith(".json") and k[6:-5].isdigit()]


def _state_key(batch: int) -> str:
    return f"state-{batch:012d}.json"


def _held_key(batch: int) -> str:
    return f"held-{batch:012d}.arrow"


def _guards_key(batch: int) -> str:
    return f"guards-{batch:012d}.arrow"


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
