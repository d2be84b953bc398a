"""Named points where a test may kill the pipeline: inert unless ``TICDC_SPARK_CRASH_AT`` is set.

The kill-anywhere tests run ``replicate`` in a subprocess with, for example,
``TICDC_SPARK_CRASH_AT=drop`` or ``TICDC_SPARK_CRASH_AT=logged:3``: the process dies on the
spot (``os._exit``, no cleanup, no flushing: as under ``kill -9``) the first time it reaches
that point (of that micro-batch), and the test starts it again.  The spec is
``POINT[:BATCH[:NTH]]`` (comma-separated for several): ``BATCH`` ``*`` or empty matches any
batch, ``NTH`` the n-th time the point is reached in that batch (default the first).

Points, in the order a micro-batch reaches them:

===================  ===========================================================================
``tombstones``       at start, a table with tombstones (pipeline.tombstones): its guards saved,
                     the tombstones not yet deleted; ``NTH`` counts the tables
``offsets-written``  ``foreachBatch`` entered: Spark has written the batch's offsets file
``decoded``          the micro-batch read and decoded (collected to the driver)
``logged``           its changelog written to ``CHECKPOINT/ticdc/wal`` (planning on the
                     executors: ``CHECKPOINT/ticdc/log``, by them; ``decoded`` comes after)
``planned``          planning on the executors: every part planned and its output written
                     (``CHECKPOINT/ticdc/parts``), nothing of the batch applied
``changes``          a row step merged, its changelog table (``--changelog-tables``) not appended
``step``             a plan step (merge or DDL) applied; ``NTH`` counts the steps of the batch
``rewrite``          a table rewrite: the new data written, the old table still in place
``rewrite-swap``     Iceberg rewrite: the old table purged, the new one not yet renamed in
``schema-changed``   spark engine: a schema changed in place, its version not yet recorded
``half-merged``      spark engine, an Iceberg table of a million rows or more: a step's changes
                     to the keys it holds merged, its new keys not yet inserted
``rename``           a table rename, before the move
``drop``             a DROP TABLE: Delta's table moved to the trash, Iceberg's before the purge
``drop-deleting``    Delta's dropped table half deleted (its first files removed)
``state-saved``      the consumer state of the batch saved
``committed``        Spark has written the batch's commit file (watched by a thread)
===================  ===========================================================================

With the variable unset, :func:`crash_point` is one dictionary lookup.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ticdc_spark.storage import StorageOptions

__all__ = ["CRASH_EXIT_CODE", "ENV", "crash_point", "set_batch", "watch_commits"]

ENV = "TICDC_SPARK_CRASH_AT"
CRASH_EXIT_CODE = 86

_state = threading.local()
_reached: dict[tuple[str, int | None], int] = {}
_lock = threading.Lock()


def set_batch(batch: int) -> None:
    """The micro-batch the calling thread applies (for points reached inside the sinks)."""
    _state.batch = batch


def crash_point(name: str, batch: int | None = None) -> None:
    """Die here if ``TICDC_SPARK_CRASH_AT`` names this point (see the module's doc)."""
    spec = os.environ.get(ENV)
    if spec:
        _maybe_crash(spec, name, getattr(_state, "batch", None) if batch is None else batch)


def _wanted(spec: str, name: str) -> list[tuple[int | None, int]]:
    """(batch or None for any, n-th) of each entry of ``spec`` naming ``name``."""
    out = []
    for entry in spec.split(","):
        point, _, rest = entry.strip().partition(":")
        if point != name:
            continue
        batch, _, nth = rest.partition(":")
        out.append((None if batch in ("", "*") else int(batch), int(nth or 1)))
    return out


def _maybe_crash(spec: str, name: str, batch: int | None) -> None:
    wanted = _wanted(spec, name)
    if not wanted:
        return
    with _lock:
        count = _reached[(name, batch)] = _reached.get((name, batch), 0) + 1
    for want_batch, nth in wanted:
        if (want_batch is None or want_batch == batch) and nth == count:
            _die(f"{name}:{batch}:{count}")


def _die(where: str) -> None:
    sys.stderr.write(f"ticdc-spark: {ENV} killed the process at {where}\n")
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


def watch_commits(spark_checkpoint: str | Path, storage: StorageOptions | None = None) -> None:
    """For ``committed:BATCH`` points: a daemon thread that kills the process as soon as
    Spark's commit file of that batch appears (Spark writes it after ``foreachBatch``
    returns, where no code of ours runs), on a local disk or an object store."""
    spec = os.environ.get(ENV)
    batches = [b for b, _ in _wanted(spec, "committed")] if spec else []
    if not batches:
        return
    from ticdc_spark.storage import is_local, open_store

    commits = open_store(str(spark_checkpoint), storage)
    pause = 0.005 if is_local(str(spark_checkpoint)) else 0.05  # (a LIST request each)

    def newest() -> int:
        found = [int(k[8:]) for k in commits.list_keys("commits/") if k[8:].isdigit()]
        return max(found, default=-1)

    before = newest()  # "committed" or "committed:*": the first commit of this process

    def watch() -> None:
        while True:
            latest = newest()
            for batch in batches:
                if (batch is None and latest > before) or (batch is not None and latest >= batch):
                    _die(f"committed:{latest}")
            time.sleep(pause)

    threading.Thread(target=watch, name="ticdc-crash-watch", daemon=True).start()
