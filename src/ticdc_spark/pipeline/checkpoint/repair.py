"""Checking the checkpoint before a start, and repairing what a kill can leave of Spark's part
(see :mod:`ticdc_spark.pipeline.checkpoint` for its layout and what a start does)."""

from __future__ import annotations

import logging
from pathlib import Path

from ticdc_spark.errors import CHECKPOINT_WAY_OUT, CheckpointError

__all__ = ["check_checkpoint", "repair_spark_checkpoint", "spark_batches"]

log = logging.getLogger(__name__)


def spark_batches(spark_dir: Path, kind: str) -> list[int]:
    """The batch ids of Spark's ``offsets`` or ``commits`` files (temporary files aside)."""
    directory = spark_dir / kind
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _is_temporary(path: Path) -> bool:
    """A file Spark's checkpoint manager writes before renaming it into place (and its
    checksum file): never committed progress."""
    return path.name.startswith(".") and path.name.endswith((".tmp", ".tmp.crc"))


def repair_spark_checkpoint(spark_dir: Path) -> list[Path]:
    """Remove what a kill during the first offsets write of a new checkpoint leaves, so that
    Spark can start batch 0: only when no batch was committed and no offsets file holds
    anything, and then only temporary files and empty offsets files.  Returns the removed."""
    offsets = spark_dir / "offsets"
    if spark_batches(spark_dir, "commits") or not offsets.is_dir():
        return []
    entries = list(offsets.iterdir())
    numbered = [p for p in entries if p.name.isdigit()]
    if any(p.stat().st_size for p in numbered):
        return []  # an offsets file with content: Spark re-runs that batch itself
    doomed = [p for p in entries if _is_temporary(p)] + numbered
    doomed += [p for p in entries if p.name.endswith(".crc") and p.name[1:-4].isdigit()]
    for path in doomed:
        log.warning("removing %s: left by a kill before the first micro-batch started", path)
        path.unlink(missing_ok=True)
    return doomed


def check_checkpoint(checkpoint: str | Path) -> None:
    """Refuse a checkpoint whose Spark part is gone while the consumer state has batches:
    Spark would start again at batch 0 and the sinks would skip the new batches' steps as
    applied."""
    root = Path(checkpoint)
    states = sorted((root / "ticdc").glob("state-*.json"))
    if states and not spark_batches(root / "spark", "offsets"):
        raise CheckpointError(
            f"the consumer state has micro-batches up to {states[-1]} but Spark's offsets "
            f"({root / 'spark' / 'offsets'}) are missing: Spark's part of the checkpoint was "
            f"lost, and resuming would skip changes. {CHECKPOINT_WAY_OUT}"
        )
