"""Changes planned on the executors, typed there: no row of them goes through the driver.

A :class:`~ticdc_spark.pipeline.steps.PlannedChanges` names the Parquet rows its planning
wrote (``TableChanges``' columns, see :func:`~ticdc_spark.pipeline.last_change.final_changes`).
They are read by the sink thread's own session and converted to the table's types by the
same conversion the driver's steps go through (:func:`~ticdc_spark.sinks.convert.typed_rows`),
in ``mapInArrow`` on the executors: a change with a value its column cannot hold comes out
with its reason in ``_error`` and its position, and becomes a dead letter (the only rows
collected to the driver).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.dead_letters import DEAD_LETTER_FIELDS, dead_letters
from ticdc_spark.pipeline.steps import PlannedChanges
from ticdc_spark.sinks.convert import table_arrow_schema, typed_rows

__all__ = ["CHANGE_COLUMNS", "ERROR", "failed", "typed", "typed_frame"]

ERROR = "_error"  # why a change does not convert (null: it does)
CHANGE_COLUMNS = ("op", "commit_ts", "image", "key_only", "topic", "partition", "offset", "seq")
_POSITION = (("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()))


def _typed_schema(schema: TableSchema) -> pa.Schema:
    """The typed rows' Arrow schema: the table's with ``_op``, the reason, the position."""
    target = table_arrow_schema(schema, op=True)
    fields = [f.with_nullable(True) for f in target]
    return pa.schema([*fields, (ERROR, pa.string()), *_POSITION])


def typed(schema: TableSchema, changes: pa.Table) -> pa.Table:
    """Planned changes as typed rows (:func:`_typed_schema`): those that convert, then
    those that do not (nulls but their reason and position)."""
    out = _typed_schema(schema)
    rows, dead = typed_rows(schema, changes)
    good = [
        rows[f.name] if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
        for f in out
    ]
    parts = [pa.Table.from_arrays(good, schema=out)]
    if dead is not None:
        given = {name: dead[name] for name, _ in _POSITION} | {ERROR: dead["error"]}
        bad = [given.get(f.name, pa.nulls(dead.num_rows, f.type)) for f in out]
        parts.append(pa.Table.from_arrays(bad, schema=out))
    return pa.concat_tables(parts)


def typed_frame(session: Any, step: PlannedChanges) -> Any:
    """The step's changes read by ``session``, typed on the executors."""
    from pyspark.sql.functions import col
    from pyspark.sql.pandas.types import from_arrow_schema

    frame = (
        session.read.parquet(step.location)
        .filter((col("_group") == step.group) & (col("_step") == step.step))
        .select(*CHANGE_COLUMNS)
    )
    schema = step.schema

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from typed(schema, pa.Table.from_batches([batch])).to_batches()

    return frame.mapInArrow(convert, from_arrow_schema(_typed_schema(schema)))


def failed(frame: Any) -> pa.Table | None:
    """The dead letters of a typed frame (collected: the changes that failed only)."""
    from pyspark.sql.functions import col

    bad = frame.filter(col(ERROR).isNotNull()).select(*dict(_POSITION), ERROR).toArrow()
    if not bad.num_rows:
        return None
    rows = bad.rename_columns([*dict(_POSITION), "error"])
    found = dead_letters(rows)
    assert found is None or tuple(found.column_names) == DEAD_LETTER_FIELDS
    return found
