"""The pipeline's checkpoint: the consumer state, the changelog log, and their repair.

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
  <ticdc_spark.pipeline.apply.Applier.recover>` replays the logged micro-batches from the
  newest good state, or raises :class:`~ticdc_spark.errors.CheckpointError` naming what is
  missing and what to do.

Modules: :mod:`.store` (the consumer state per micro-batch), :mod:`.wal` (the changelog
log), :mod:`.files` (writes that survive a kill: synced, renamed, directory synced),
:mod:`.repair` (the checks and the repair at a start).
"""

from ticdc_spark.errors import CheckpointError, DamagedState
from ticdc_spark.pipeline.checkpoint.repair import (
    check_checkpoint,
    repair_spark_checkpoint,
    spark_batches,
)
from ticdc_spark.pipeline.checkpoint.store import StateStore
from ticdc_spark.pipeline.checkpoint.wal import ChangelogLog

__all__ = [
    "ChangelogLog",
    "CheckpointError",
    "DamagedState",
    "StateStore",
    "check_checkpoint",
    "repair_spark_checkpoint",
    "spark_batches",
]
