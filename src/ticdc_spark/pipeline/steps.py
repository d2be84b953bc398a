"""What a micro-batch applies: the plan's steps, the seam between planning and the sinks.

The planner (:mod:`ticdc_spark.pipeline.planner`) makes a :class:`Plan`; a sink
(:class:`~ticdc_spark.sinks.base.TableSink`) applies its steps in order, each under a version.
Sinks import this module and nothing else of the pipeline's planning, so that how a plan is
made (on the driver today) can change without touching how it is applied, and the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ticdc_spark.model import DDLType, TableSchema

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "OP_DELETE",
    "OP_INSERT",
    "OP_UPDATE",
    "DDLStep",
    "Plan",
    "PlannedChanges",
    "RowStep",
    "Step",
    "TableChanges",
    "TableKey",
]

TableKey = tuple[str, str]  # (database, table)

# The ``op`` of a planned change: a merge's ``_op`` column, and a changelog table's.  (Lower
# case: the changelog's own ops, pipeline.changelog.INSERT ..., are upper case.)
OP_INSERT: Final = "insert"
OP_UPDATE: Final = "update"
OP_DELETE: Final = "delete"


@dataclass
class TableChanges:
    """The final change per key of one table in one segment.

    ``rows`` columns: ``op`` (:data:`OP_INSERT`, :data:`OP_UPDATE` or :data:`OP_DELETE`),
    ``commit_ts``, ``image`` (after image, or the before image for deletes), ``key_only``, and
    the source position columns (``topic``, ``partition``, ``offset``, ``seq``).
    """

    database: str
    table: str
    schema: TableSchema
    rows: pa.Table


@dataclass
class PlannedChanges:
    """The final change per key of one table in one segment, planned where the rows are
    (planning by parts on Spark's executors: :mod:`ticdc_spark.spark.planning`): the rows
    of :class:`TableChanges` in the Parquet files under ``location`` whose ``_group`` and
    ``_step`` are these, ``count`` of them.  Each sink thread reads them with its own Spark
    session."""

    database: str
    table: str
    schema: TableSchema
    location: str
    group: int
    step: int
    count: int


@dataclass
class DDLStep:
    """A DDL to apply, with the table's schema before and after it (None when unknown)."""

    database: str
    table: str
    commit_ts: int
    sql: str
    ddl_type: DDLType
    before: TableSchema | None
    after: TableSchema | None
    renamed_to: TableKey | None = None
    dropped: tuple[TableKey, ...] = ()
    renamed_columns: dict[str, str] = field(default_factory=dict)  # new name -> old name


RowStep = TableChanges | PlannedChanges
Step = TableChanges | PlannedChanges | DDLStep


@dataclass
class Plan:
    """What one micro-batch applies, in order, and what it learned."""

    steps: list[Step] = field(default_factory=list)
    # changelog ERROR rows plus rows that cannot be applied (pipeline.dead_letters' shape)
    dead_letters: pa.Table | None = None
    rows_in: int = 0
    rows_released: int = 0
    replays: int = 0
    guarded: int = 0  # changes dropped as older than a delete already applied (guards)
    held: int = 0
    awaiting_schema: int = 0  # of the held rows, those still waiting for their schema
    watermark: int = 0
