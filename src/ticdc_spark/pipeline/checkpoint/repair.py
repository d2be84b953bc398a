"""Checking the checkpoint before a start, and repairing what a kill can leave of Spark's part
(see :mod:`ticdc_spark.pipeline.checkpoint` for its layout and what a start does), on a
local disk or an object store."""

from __future__ import annotations

import logging
from pathlib import Path

from ticdc_spark.errors import CHECKPOINT_WAY_OUT, CheckpointError
from ticdc_spark.storage import StorageOptions, Store, join, open_store

__all__ = ["check_checkpoint", "repair_spark_checkpoint", "spark_batches"]

log = logging.getLogger(__name__)

SparkDir = str | Path | Store  # Spark's checkpoint (CHECKPOINT/spark), or a store rooted there


def _store(spark_dir: SparkDir, storage: StorageOptions | None) -> Store:
    return spark_dir if isinstance(spark_dir, Store) else open_store(str(spark_dir), storage)


def _names(store: Store, kind: str) -> list[str]:
    """The names of the files directly in Spark's ``offsets`` or ``commits``."""
    return [k[len(kind) + 1 :] for k in store.list_keys(f"{kind}/") if k.count("/") == 1]


def spark_batches(
    spark_dir: SparkDir, kind: str, storage: StorageOptions | None = None
) -> list[int]:
    """The batch ids of Spark's ``offsets`` or ``commits`` files (temporary files aside)."""
    return sorted(int(n) for n in _names(_store(spark_dir, storage), kind) if n.isdigit())


def _is_temporary(name: str) -> bool:
    """A file Spark's checkpoint manager writes before renaming it into place (and its
    checksum file): never committed progress."""
    return name.startswith(".") and name.endswith((".tmp", ".tmp.crc"))


def repair_spark_checkpoint(
    spark_dir: str | Path, storage: StorageOptions | None = None
) -> list[str | Path]:
    """Remove what a kill during the first offsets write of a new checkpoint leaves, so that
    Spark can start batch 0: only when no batch was committed and no offsets file holds
    anything, and then only temporary files and empty offsets files.  Returns the removed
    (Paths for a local ``spark_dir`` given as a Path, else locations)."""
    store = _store(spark_dir, storage)
    if spark_batches(store, "commits"):
        return []
    names = _names(store, "offsets")
    numbered = [n for n in names if n.isdigit()]
    if any(store.size(f"offsets/{n}") for n in numbered):
        return []  # an offsets file with content: Spark re-runs that batch itself
    doomed = [n for n in names if _is_temporary(n)] + numbered
    doomed += [n for n in names if n.endswith(".crc") and n[1:-4].isdigit()]
    keys = [f"offsets/{n}" for n in doomed]
    for key in keys:
        log.warning(
            "removing %s: left by a kill before the first micro-batch started", store.describe(key)
        )
    store.delete(keys)
    if isinstance(spark_dir, Path):
        return [spark_dir / key for key in keys]
    return [store.describe(key) for key in keys]


def check_checkpoint(checkpoint: str | Path, storage: StorageOptions | None = None) -> None:
    """Refuse a checkpoint whose Spark part is gone while the consumer state has batches:
    Spark would start again at batch 0 and the sinks would skip the new batches' steps as
    applied."""
    root = open_store(str(checkpoint), storage)
    states = [k for k in root.list_keys("ticdc/state-") if k.endswith(".json")]
    if states and not spark_batches(open_store(join(str(checkpoint), "spark"), storage), "offsets"):
        raise CheckpointError(
            f"the consumer state has micro-batches up to {root.describe(states[-1])} but "
            f"Spark's offsets ({join(str(checkpoint), 'spark/offsets')}) are missing: Spark's "
            f"part of the checkpoint was lost, and resuming would skip changes. "
            f"{CHECKPOINT_WAY_OUT}"
        )
