"""The Spark-native apply engine: each step merged by Spark itself, in the executors.

A step's final changes become a DataFrame and one ``MERGE INTO`` (Delta with deletion
vectors, Iceberg in merge-on-read mode): the cost of a merge follows the micro-batch (the
rows it changes are written anew, the rows they replace are only marked deleted), not the
table, where the embedded sinks rewrite every file holding a matched key.  DDL changes the
table's metadata where the format can (column mapping and type widening in Delta, field ids
and ``initial-default`` in Iceberg) instead of rewriting it.

Tables are *live*: a delete deletes its row.  What guards against a late or replayed change
older than a delete is the planner's (its guards, in the consumer state), not a tombstone row.

Exactly once: every commit a step makes records the step's version with it, atomically (a
Delta app transaction, an Iceberg snapshot property), and a step whose version the table
already holds is skipped.  A schema change made in place commits no data, so its version is
recorded right after it (an empty Delta commit carrying the app transaction, an Iceberg table
property); a kill in between replays the DDL, and every part of it is computed from the
table as it is then (:func:`~.sql.schema_change`), so the replay finds it done.

Sessions: the version is passed to Delta and Iceberg through session settings, so each
thread that applies steps uses its own ``SparkSession.newSession()`` (tables of one
micro-batch are applied concurrently).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

import pyarrow as pa

from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.steps import OP_DELETE, PlannedChanges
from ticdc_spark.sinks.base import (
    CHANGELOG_COMMENT,
    StepResult,
    TableKey,
    TableSink,
    _default_column,
    changes_key,
)
from ticdc_spark.sinks.convert import COMMIT_TS, OP, changelog_texts, table_arrow_schema
from ticdc_spark.sinks.spark.planned import typed_frame
from ticdc_spark.sinks.spark.sql import (
    SchemaChange,
    insert_sql,
    key_match,
    merge_sql,
    quote,
    schema_change,
    spark_type,
    sql_literal,
)
from ticdc_spark.storage import StorageOptions
from ticdc_spark.storage.hadoop import session_s3a_settings

__all__ = ["SparkTableSink"]


class SparkTableSink(TableSink):
    """Format-independent part of applying steps through Spark SQL."""

    narrow_integers = True  # the format stores tinyint/smallint (Iceberg does not)
    # type changes made in place beyond the common ones
    widens: ClassVar[frozenset[tuple[str, str]]] = frozenset()

    def __init__(
        self, spark: Any, app_id: str, location: str, storage: StorageOptions | None = None
    ) -> None:
        super().__init__()
        self.spark = spark
        self.app_id = app_id
        # (the object store's settings: delta-rs's and obstore's here, S3A's in the sessions)
        self.storage = storage or StorageOptions.from_environment()
        self._hadoop = session_s3a_settings(spark, location, self.storage)
        self._local = threading.local()
        self._versions: dict[TableKey, int] = {}  # applied versions seen or committed
        self._lock = threading.Lock()

    # -- sessions ------------------------------------------------------------------------

    def session(self) -> Any:
        """This thread's session (session settings carry the version of each commit)."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = self.spark.newSession()
            session.conf.set("spark.sql.session.timeZone", "UTC")
            for key, value in self._hadoop.items():  # (tables on s3://: S3A)
                session.conf.set(key, value)
            self.configure(session)
            # The JVM calls made beside SQL (Delta's log, Iceberg's catalog) read the
            # thread's active session's settings; PySpark pins each Python thread to a JVM
            # thread, so this holds for the thread's later calls.
            self.spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(
                session._jsparkSession
            )
            self._local.session = session
        return session

    def configure(self, session: Any) -> None:
        """Format settings a new session needs (an Iceberg catalog, say)."""

    def sql(self, text: str) -> Any:
        return self.session().sql(text)

    # -- format hooks --------------------------------------------------------------------

    @abc.abstractmethod
    def target(self, key: TableKey) -> str:
        """The table's identifier in Spark SQL."""

    @abc.abstractmethod
    def table_properties(self) -> dict[str, str]:
        """Properties of a table this engine creates."""

    @abc.abstractmethod
    @contextlib.contextmanager
    def versioned(self, key: TableKey, version: int) -> Iterator[None]:
        """Within the block, this thread's commits to ``key`` record ``version``."""

    @abc.abstractmethod
    def read_version(self, key: TableKey) -> int:
        """The newest version the table records for this pipeline (-1: none)."""

    @abc.abstractmethod
    def record_version(self, key: TableKey, version: int) -> None:
        """Record ``version`` in a commit of its own (after a change that carried none)."""

    @abc.abstractmethod
    def add_column(self, key: TableKey, name: str, sql_type: str, default: Any) -> None:
        """Add a column; existing rows hold ``default`` (a typed value) when not None."""

    def prepare(self, key: TableKey) -> None:
        """Bring a table made by an older version of the job (or the embedded engine) to
        what this engine needs (called once per table before its first change)."""

    # -- hooks of TableSink ----------------------------------------------------------------

    def open_table(self, key: TableKey) -> Any:
        self.prepare(key)
        return self.target(key)

    def create(self, schema: TableSchema) -> None:
        key = (schema.database, schema.table)
        columns = ", ".join(
            f"{quote(name)} {sql_type}" for name, sql_type in self._target_types(schema).items()
        )
        columns += f", {quote(COMMIT_TS)} bigint NOT NULL"
        properties = ", ".join(f"'{k}' = '{v}'" for k, v in self.table_properties().items())
        self.sql(
            f"CREATE TABLE IF NOT EXISTS {self.target(key)} ({columns}) USING {self.name} "
            f"COMMENT {sql_literal(self.table_comment(schema))} TBLPROPERTIES ({properties})"
        )
        self._forget(key)

    def arrow_schema(self, key: TableKey) -> pa.Schema:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(self.session().table(self._table(key)).schema)

    def applied_version(self, key: TableKey) -> int:
        with self._lock:
            known = self._versions.get(key)
        if known is None:
            known = self.read_version(key) if self.exists(key) else -1
            with self._lock:
                self._versions[key] = max(known, self._versions.get(key, -1))
        return known

    def _committed(self, key: TableKey, version: int) -> None:
        with self._lock:
            self._versions[key] = max(version, self._versions.get(key, -1))

    def _forget(self, *keys: TableKey) -> None:
        super()._forget(*keys)
        with self._lock:
            for key in keys:
                self._versions.pop(key, None)

    def merge(self, schema: TableSchema, rows: Any, version: int) -> dict[str, Any]:
        key = (schema.database, schema.table)
        session = self.session()
        view = f"ticdc_changes_{uuid.uuid4().hex}"
        self._source(session, schema, rows).createOrReplaceTempView(view)
        keys = list(schema.handle_key) or list(schema.column_names)
        nullable = {c.name for c in schema.columns if c.nullable}
        try:
            if self.merges_in_two(key):
                self._merge_in_two(session, key, view, schema.column_names, keys, nullable, version)
            else:
                statement = merge_sql(self._table(key), view, schema.column_names, keys, nullable)
                with self.versioned(key, version):
                    session.sql(statement)
        finally:
            session.catalog.dropTempView(view)
        self._committed(key, version)
        return {}

    def apply_planned(self, step: PlannedChanges, version: int, replayed: bool) -> StepResult:
        """As :meth:`apply_rows`, with changes planned on the executors: read, typed and
        merged there (see :mod:`.planned`: their dead letters were found when planned)."""
        key = (step.database, step.table)
        self._refuse_changelog_name(key)
        if replayed or (self.exists(key) and self.applied_version(key) >= version):
            result = StepResult(skipped=True)  # (see apply_rows)
        else:
            self.ensure_table(step.schema)
            rows = typed_frame(self.session(), step)
            details = self.merge(step.schema, rows, version) if step.count else {}
            result = StepResult(rows=step.count, details=details)
        if self.changelog_tables and self._wants_changes(step.schema, version) and step.count:
            self.append(changes_key(key), typed_frame(self.session(), step), version)
        return result

    def planned_commits(self, step: PlannedChanges) -> pa.ChunkedArray:
        commits: pa.ChunkedArray = (
            typed_frame(self.session(), step).select(COMMIT_TS).toArrow()[COMMIT_TS]
        )
        return commits

    def merges_in_two(self, key: TableKey) -> bool:
        """Whether a step's changes to this table are merged in two commits (see
        :meth:`_merge_in_two`), not one MERGE."""
        return False

    def _merge_in_two(
        self,
        session: Any,
        key: TableKey,
        view: str,
        columns: Sequence[str],
        keys: Sequence[str],
        nullable: set[str],
        version: int,
    ) -> None:
        """The changes to keys the table holds merged (an inner join: Spark broadcasts the
        changes and streams the table), then the rest inserted.  One MERGE with a NOT
        MATCHED clause is an outer join that keeps every change, which Spark cannot run by
        broadcasting the changes: it shuffles the whole table instead, at every merge.

        Only the second commit records the step's version; a kill between the two replays
        the step, whose first commit then changes nothing (no change is newer than the row
        it made, and the rows it deleted are gone)."""
        table, parts = self._table(key), [f"{view}_{part}" for part in ("present", "old", "new")]
        present = session.sql(
            f"SELECT /*+ BROADCAST(s) */ {', '.join(f't.{quote(k)}' for k in keys)} FROM {table} t "
            f"LEFT SEMI JOIN {view} s ON {key_match('t', 's', keys, nullable)}"
        ).localCheckpoint()  # (the keys as they were: not read again after the first commit)
        present.createOrReplaceTempView(parts[0])
        on = key_match("s", "p", keys, nullable)
        for part, join in zip(parts[1:], ("SEMI", "ANTI"), strict=True):
            # (hinted: broadcast whatever their size, never the table, which a limit raised
            # for them would let Spark broadcast too)
            session.sql(f"SELECT s.* FROM {view} s LEFT {join} JOIN {parts[0]} p ON {on}").hint(
                "broadcast"
            ).createOrReplaceTempView(part)
        try:
            if not present.isEmpty():
                session.sql(merge_sql(table, parts[1], columns, keys, nullable, inserts=False))
                crash_point("half-merged")
            with self.versioned(key, version):
                session.sql(insert_sql(table, parts[2], columns))
        finally:
            for part in parts:
                session.catalog.dropTempView(part)

    def _source(self, session: Any, schema: TableSchema, rows: Any) -> Any:
        """The step's typed rows as a DataFrame of the table's Spark types (Arrow's naive
        timestamps read back as zoned ones unless told)."""
        types = {**self._target_types(schema), COMMIT_TS: "bigint", OP: "string"}
        frame = _frame(session, rows)
        return frame.selectExpr(
            *(f"CAST({quote(name)} AS {types[name]}) AS {quote(name)}" for name in frame.columns)
        )

    def _target_types(self, schema: TableSchema) -> dict[str, str]:
        """The Spark types of a table's columns (a changelog table's ``_op`` with them)."""
        arrow = table_arrow_schema(schema)
        types = {
            column.name: spark_type(arrow.field(column.name).type, self.narrow_integers)
            for column in schema.columns
        }
        if self.is_changelog((schema.database, schema.table)):
            types[OP] = "string"
        return types

    def add_columns(self, key: TableKey, fields: list[Any]) -> None:
        for f in fields:
            if f.name not in (COMMIT_TS, OP):
                self.add_column(key, f.name, spark_type(f.type, self.narrow_integers), None)

    def ensure_table(self, schema: TableSchema) -> None:
        """Create the table, or add the columns it lacks (never a rewrite: the rows of a
        step only add what their schema carries)."""
        key = (schema.database, schema.table)
        if not self.exists(key):
            self.create(schema)
            return
        current = self._current_types(key)
        for name, sql_type in self._target_types(schema).items():
            if name not in current:
                self.add_column(key, name, sql_type, None)

    def _current_types(self, key: TableKey) -> dict[str, str]:
        fields = self.session().table(self._table(key)).schema.fields
        return {f.name: f.dataType.simpleString() for f in fields}

    def delete_older(self, key: TableKey, commit_ts: int, version: int) -> None:
        with self.versioned(key, version):
            self.sql(f"DELETE FROM {self._table(key)} WHERE {quote(COMMIT_TS)} < {int(commit_ts)}")
        self._committed(key, version)

    def read(self, key: TableKey) -> pa.Table:
        return self.session().table(self._table(key)).toArrow()

    def append(self, key: TableKey, rows: Any, version: int) -> None:
        """One INSERT of a changelog table's rows, recording ``version``."""
        session = self.session()
        view = f"ticdc_rows_{uuid.uuid4().hex}"
        current = self._current_types(key)
        frame = _frame(session, rows)
        columns = frame.columns
        frame = frame.selectExpr(
            *(f"CAST({quote(n)} AS {current[n]}) AS {quote(n)}" for n in columns)
        )
        frame.createOrReplaceTempView(view)
        names = ", ".join(quote(n) for n in columns)
        try:
            with self.versioned(key, version):
                session.sql(f"INSERT INTO {self._table(key)} ({names}) SELECT {names} FROM {view}")
        finally:
            session.catalog.dropTempView(view)
        self._committed(key, version)

    def tombstones(self, key: TableKey) -> pa.Table | None:
        """A table the embedded engine of an earlier version wrote with tombstones (a Spark
        engine table never has them); read once, at the pipeline's first start."""
        if OP not in self._current_types(key) or self._comment(key).startswith(CHANGELOG_COMMENT):
            return None
        table = self._table(key)
        dead = self.sql(f"SELECT * FROM {table} WHERE {quote(OP)} = '{OP_DELETE}'").toArrow()
        return changelog_texts(dead.drop_columns([OP]))

    def drop_tombstones(self, key: TableKey) -> None:
        """Two commits, each a no-op when run again: the tombstones deleted, then ``_op``
        dropped (metadata only); neither records a version, so the table keeps its own."""
        if OP in self._current_types(key):
            table = self._table(key)
            self.sql(f"DELETE FROM {table} WHERE {quote(OP)} = '{OP_DELETE}'")
            self.sql(f"ALTER TABLE {table} DROP COLUMN {quote(OP)}")
        self._forget(key)

    def _comment(self, key: TableKey) -> str:
        """The table's comment (Delta's description, Iceberg's ``comment`` property)."""
        rows = self.sql(f"DESCRIBE TABLE EXTENDED {self._table(key)}").collect()
        found = [r.data_type for r in rows if (r.col_name or "").strip() == "Comment"]
        return found[0] if found and found[0] else ""

    # -- steps -----------------------------------------------------------------------------

    def apply_ddl(self, step: Any, version: int) -> StepResult:
        key = (step.database, step.table)
        if self.exists(key) and self.applied_version(key) >= version:
            return StepResult(skipped=True)
        return super().apply_ddl(step, version)

    def _follow_schema(
        self, schema: TableSchema, version: int, renamed: Mapping[str, str] | None = None
    ) -> None:
        """Make the table match ``schema`` in place: renames, drops, added columns (with
        their constant defaults) and widened types are metadata; any other type change
        rewrites the table."""
        key = (schema.database, schema.table)
        if not self.exists(key):
            self.create(schema)
            self.record_version(key, version)
            return
        defaults = {c.name: typed_default(schema, c.name) for c in schema.columns}
        change = schema_change(
            self._current_types(key),
            self._target_types(schema),
            renamed or {},
            defaults,
            self.widens,
        )
        if change.rewrite:
            self.rewrite(schema, version, renamed or {})
            return
        self._change_in_place(key, change)
        crash_point("schema-changed")
        self.record_version(key, version)

    def _change_in_place(self, key: TableKey, change: SchemaChange) -> None:
        table = self._table(key)
        for old, new in change.renames:
            self.sql(f"ALTER TABLE {table} RENAME COLUMN {quote(old)} TO {quote(new)}")
        for name in change.drops:
            self.sql(f"ALTER TABLE {table} DROP COLUMN {quote(name)}")
        for name, sql_type, default in change.adds:
            self.add_column(key, name, sql_type, default)
        for name, sql_type in change.retypes:
            self.sql(f"ALTER TABLE {table} ALTER COLUMN {quote(name)} TYPE {sql_type}")
        self._forget(key)

    def rewrite(self, schema: TableSchema, version: int, renamed: Mapping[str, str]) -> None:
        """Rewrite the table to ``schema`` (a type change the format cannot make in place):
        each column read under its old name and cast, new columns hold their default."""
        from pyspark.sql.functions import col, lit

        key = (schema.database, schema.table)
        current = self._current_types(key)
        selected = []
        frame = self.session().table(self._table(key))
        for name, sql_type in {**self._target_types(schema), COMMIT_TS: "bigint"}.items():
            source = renamed.get(name, name)
            if source in current:
                value = col(source)
            else:  # (a new column: its constant default, or null)
                value = lit(typed_default(schema, name) if name != COMMIT_TS else None)
            selected.append(value.cast(sql_type).alias(name))
        frame = frame.select(*selected)
        with self.versioned(key, version):
            self.overwrite(key, frame)
        self._forget(key)
        self._committed(key, version)

    @abc.abstractmethod
    def overwrite(self, key: TableKey, frame: Any) -> None:
        """Replace the table's rows and schema by ``frame``'s, in one commit."""


def _frame(session: Any, rows: Any) -> Any:
    """Typed rows as a DataFrame of ``session``: an Arrow table's, or the frame itself
    (rows typed on the executors: :mod:`.planned`)."""
    return session.createDataFrame(rows) if isinstance(rows, pa.Table) else rows


def typed_default(schema: TableSchema, name: str) -> Any:
    """A column's constant DEFAULT as the value its rows store (None when it has none), by
    the conversion the changes' own values go through."""
    column = schema.get(name)
    if column is None:
        return None
    field = table_arrow_schema(schema).field(name)
    return _default_column(schema, field, 1).to_pylist()[0]
