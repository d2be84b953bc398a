"""Checking the pipeline's checkpoint before a start, and repairing what a kill can leave.

The checkpoint directory holds two parts that must agree (see docs/pipeline.md):

* ``spark/``: Spark's own. ``offsets/N`` is written before micro-batch N runs, ``commits/N``
  after ``foreachBatch`` returned; both through a hidden temporary file (``.N.<uuid>.tmp``)
  renamed into place.
* ``ticdc/``: the consumer's. ``state-N.json`` (+ ``held-N.arrow``) is the consumer state
  after batch N, ``wal/changelog-N.arrow`` batch N's changelog, ``pipeline.json`` the id
  the sinks record step versions under.

What a kill can leave, and what a start does about it:

* A kill while Spark writes the first offsets file of a new checkpoint leaves
  ``offsets/.0.<uuid>.tmp`` and nothing else; Spark then refuses every start
  (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). :func:`repair_spark_checkpoint` removes
  exactly such leftovers when nothing was committed, and logs each file it removes.
* Consumer state behind Spark's commits, missing or damaged: :meth:`Applier.recover
  <ticdc_spark.pipeline.apply.Applier.recover>` replays the logged micro-batches from the newest
  good state, or raises :class:`CheckpointError` naming what is missing and what to do.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ticdc_spark.errors import TiCDCSparkError

__all__ = [
    "WAY_OUT",
    "CheckpointError",
    "DamagedState",
    "check_checkpoint",
    "repair_spark_checkpoint",
    "spark_batches",
]

log = logging.getLogger(__name__)

WAY_OUT = (
    "Restore the file(s) from a backup of the checkpoint directory, or replicate again from "
    "the start: a new checkpoint directory and an empty target (the tables hold step versions "
    "of this checkpoint). See 'The checkpoint' in docs/pipeline.md."
)


class CheckpointError(TiCDCSparkError):
    """The checkpoint cannot be resumed exactly: names the file(s) and the way out."""


class DamagedState(CheckpointError):
    """A consumer-state file that is missing or does not read whole."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(
            f"consumer state {path} {problem}. A restart rebuilds it from the logged "
            f"micro-batches when they reach back far enough; otherwise: {WAY_OUT}"
        )

    @property
    def short(self) -> str:
        return f"{self.path} {self.problem}"


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
            f"lost, and resuming would skip changes. {WAY_OUT}"
        )
