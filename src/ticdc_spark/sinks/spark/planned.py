"""Changes planned on the executors, typed there: no row of them goes through the driver.

A :class:`~ticdc_spark.pipeline.steps.PlannedChanges` names the Parquet rows its planning
wrote (``TableChanges``' columns, see :func:`~ticdc_spark.pipeline.last_change.final_changes`),
which the planning screened already: a change with a value its column cannot hold became a
dead letter there (``spark.planning``).  They are read by the sink thread's own session and
converted to the table's types by the conversion the driver's steps go through
(:func:`~ticdc_spark.sinks.convert.typed_rows`), in ``mapInArrow`` on the executors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.pipeline.steps import PlannedChanges
from ticdc_spark.sinks.convert import table_arrow_schema, typed_rows

__all__ = ["CHANGE_COLUMNS", "typed_frame"]

CHANGE_COLUMNS = ("op", "commit_ts", "image", "key_only", "topic", "partition", "offset", "seq")


def typed_frame(session: Any, step: PlannedChanges) -> Any:
    """The step's changes read by ``session``, typed on the executors (the table's columns,
    ``_commit_ts`` and ``_op``)."""
    from pyspark.sql.functions import col
    from pyspark.sql.pandas.types import from_arrow_schema

    frame = (
        session.read.parquet(step.location)
        .filter((col("_group") == step.group) & (col("_step") == step.step))
        .select(*CHANGE_COLUMNS)
    )
    schema, name = step.schema, f"{step.database}.{step.table}"

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows, failed = typed_rows(schema, pa.Table.from_batches([batch]))
            if failed is not None:  # (screened when planned: the same conversion)
                raise TiCDCSparkError(
                    f"{name}: a change planned as convertible does not convert now: "
                    f"{failed['error'][0]}"
                )
            yield from rows.to_batches()

    target = table_arrow_schema(schema, op=True)
    return frame.mapInArrow(convert, from_arrow_schema(target))
