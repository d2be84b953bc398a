"""The changelog log: each micro-batch's changelog on disk before it is applied."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ticdc_spark.pipeline.checkpoint.files import read_arrow, sync_directory, write_arrow

__all__ = ["ChangelogLog"]


class ChangelogLog:
    """Micro-batches written ahead of being applied, under ``CHECKPOINT/ticdc/wal``.

    When the pipeline applies a micro-batch while Spark already reads the next one, Spark
    records the first batch's offsets as done before it is applied.  Logging the batch's
    changelog first (Arrow IPC, synced to disk) keeps that safe: after a crash,
    :meth:`Applier.recover <ticdc_spark.pipeline.apply.Applier.recover>` applies every logged
    batch that has no saved state yet.  Logged batches are kept as long as the states before
    them (:meth:`prune`), so that a newer state found missing or damaged is rebuilt by
    applying them again.
    """

    def __init__(self, state_root: Path) -> None:
        self.root = state_root / "wal"
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, batch: int, changelog: pa.Table) -> None:
        write_arrow(self._path(batch), changelog)
        sync_directory(self.root)

    def read(self, batch: int) -> pa.Table:
        return read_arrow(self._path(batch))

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
