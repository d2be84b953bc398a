"""Capture lines that are not Kafka records, on their way through the pipeline.

The capture source passes such a line on as a record of partition
:data:`~ticdc_spark.io.capture.BAD_LINE_PARTITION` (``onBadRecord`` dead-letter or skip; see
:func:`~ticdc_spark.io.capture.bad_line_message`).  The decode stage makes each one an ERROR
row, a dead letter like a message that does not decode (:func:`split_bad_lines`); with
``skip`` the pipeline takes those rows out before applying and counts them
(:func:`skip_bad_lines`), so that nothing is dropped without a word.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.io.capture import BAD_LINE_PARTITION
from ticdc_spark.pipeline.changelog import ERROR, ChangelogBuilder

__all__ = ["skip_bad_lines", "split_bad_lines"]

log = logging.getLogger(__name__)


def split_bad_lines(batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch | None]:
    """A batch of Kafka records without its bad capture lines, and those lines as changelog
    ERROR rows (None: there were none, the usual case, found with one vector comparison)."""
    is_bad = pc.equal(batch.column("partition"), BAD_LINE_PARTITION)
    if not pc.any(is_bad).as_py():
        return batch, None
    bad = batch.filter(is_bad)
    builder = ChangelogBuilder()
    for topic, offset, key, value in zip(
        bad.column("topic").to_pylist(),
        bad.column("offset").to_pylist(),
        bad.column("key").to_pylist(),
        bad.column("value").to_pylist(),
        strict=True,
    ):
        reason = (key or b"").decode("utf-8", "replace")
        builder.add_error(reason, topic or "", BAD_LINE_PARTITION, offset or 0, None, value)
    return batch.filter(pc.invert(is_bad)), builder.to_batch()


def skip_bad_lines(changes: pa.Table, batch_id: int) -> tuple[pa.Table, int]:
    """The changelog without the ERROR rows of bad capture lines, and how many there were;
    each micro-batch that had some says so (how many, the first) as a warning."""
    bad = pc.and_(
        pc.equal(changes["kind"], ERROR), pc.equal(changes["partition"], BAD_LINE_PARTITION)
    )
    skipped = int(pc.sum(bad).as_py() or 0)
    if not skipped:
        return changes, 0
    _warn(batch_id, skipped, changes.filter(bad).slice(0, 1).column("error")[0].as_py())
    return changes.filter(pc.invert(bad)), skipped


def without_bad_lines(changes: Any) -> Any:
    """A micro-batch left on the executors (a DataFrame) without its bad capture lines."""
    return changes.filter(~_is_bad_line())


def skip_bad_frame_lines(changes: Any, batch_id: int) -> int:
    """As :func:`skip_bad_lines` says, for a micro-batch left on the executors (a DataFrame,
    whose reader drops them: :func:`without_bad_lines`): how many bad lines it has (and the
    first named in a warning), by one small job."""
    from pyspark.sql import functions as f

    found = changes.filter(_is_bad_line())
    count, first = found.agg(f.count("*"), f.first("error")).collect()[0]
    if count:
        _warn(batch_id, count, first)
    return int(count)


def _is_bad_line() -> Any:
    from pyspark.sql.functions import col

    return (col("kind") == ERROR) & (col("partition") == BAD_LINE_PARTITION)


def _warn(batch_id: int, skipped: int, first: str) -> None:
    log.warning(
        "micro-batch %d: skipped %d capture line(s) that are not Kafka records "
        "(onBadRecord=skip); the first: %s",
        batch_id,
        skipped,
        first,
    )
