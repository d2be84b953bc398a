"""The changelog log: each micro-batch's changelog in the checkpoint before it is applied."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ticdc_spark.pipeline.checkpoint.files import arrow_bytes, arrow_table
from ticdc_spark.storage import StorageOptions, join, open_store

__all__ = ["ChangelogLog"]


class ChangelogLog:
    """Micro-batches written ahead of being applied, under ``CHECKPOINT/ticdc/wal``
    (``state_root`` is ``CHECKPOINT/ticdc``: :attr:`StateStore.root
    <ticdc_spark.pipeline.checkpoint.StateStore.root>`).

    When the pipeline applies a micro-batch while Spark already reads the next one, Spark
    records the first batch's offsets as done before it is applied.  Logging the batch's
    changelog first (an Arrow IPC file written whole: synced on a local disk, one PUT on an
    object store) keeps that safe: after a crash, :meth:`Applier.recover
    <ticdc_spark.pipeline.apply.Applier.recover>` applies every logged batch that has no
    saved state yet.  Logged batches are kept as long as the states before them
    (:meth:`prune`), so that a newer state found missing or damaged is rebuilt by applying
    them again.
    """

    def __init__(self, state_root: str | Path, storage: StorageOptions | None = None) -> None:
        self.root = join(str(state_root), "wal")
        self.files = open_store(self.root, storage)

    def write(self, batch: int, changelog: pa.Table) -> None:
        self.files.write(_key(batch), arrow_bytes(changelog))

    def read(self, batch: int) -> pa.Table:
        return arrow_table(self.files.read(_key(batch)))

    def batches(self) -> list[int]:
        keys = self.files.list_keys("changelog-")
        return sorted(int(k[10:-6]) for k in keys if k.endswith(".arrow") and k[10:-6].isdigit())

    def drop(self, batch: int) -> None:
        self.files.delete(_key(batch))

    def prune(self, through: int) -> None:
        """Drop the logged batches up to ``through`` (those the oldest kept state covers:
        the rest can rebuild a newer state that is lost or damaged)."""
        self.files.delete([_key(b) for b in self.batches() if b <= through])


def _key(batch: int) -> str:
    return f"changelog-{batch:012d}.arrow"
