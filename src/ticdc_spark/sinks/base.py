"""What every table sink does, whatever the table format.

A sink applies the steps a :class:`~ticdc_spark.pipeline.steps.Plan` lists: merges of one table's
final changes and DDLs.  Each step carries a *version* (batch id and step number) that the
sink records atomically with the change, so a step replayed after a crash is recognised and
skipped.  Tables are *live*: they hold upstream's live rows, each with the ``_commit_ts`` of
the change that wrote it, and nothing else.  A merge applies a change only over an older row
(``_commit_ts`` strictly lower): a delete deletes the row, an insert or update writes it.
What keeps a late change older than a delete from bringing the deleted row back lives apart
from the tables, in the consumer state (:mod:`ticdc_spark.pipeline.guards`).

**Changelog tables** (``changelog_tables``, ``replicate --changelog-tables``): beside each
table ``T`` an append-only table ``T__changes`` (:data:`CHANGES_SUFFIX`) gets every change of
each row step: the table's columns (a delete's before image), ``_commit_ts`` and ``_op``
(``insert``/``update``/``delete``), appended with the step's version as the table's own
commits are (a replayed step appends nothing twice).  It follows its table's DDLs (columns,
renames, drops; a TRUNCATE deletes nothing from it) and is marked as a changelog by its
comment (:data:`CHANGELOG_COMMENT`: Delta's table description, Iceberg's ``comment``
property).  docs/pipeline.md "Changelog tables" describes the layout for every engine.

**Tables with tombstones**, written by versions before live tables (a delete left its row
with ``_op = 'delete'``), are migrated once at the pipeline's start
(:mod:`ticdc_spark.pipeline.tombstones`) through :meth:`TableSink.tombstones` and
:meth:`TableSink.drop_tombstones`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import ConfigError
from ticdc_spark.model import Column, DDLType, DefaultExpression, TableSchema
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.steps import OP_DELETE, DDLStep, PlannedChanges, TableChanges, TableKey
from ticdc_spark.sinks.convert import (
    COMMIT_TS,
    OP,
    convert_column,
    table_arrow_schema,
    typed_rows,
)
from ticdc_spark.storage import StorageOptions
from ticdc_spark.types import Family

__all__ = [
    "CHANGELOG_COMMENT",
    "CHANGES_SUFFIX",
    "StepResult",
    "TableKey",
    "TableSink",
    "carried_columns",
    "changes_key",
    "live",
]

log = logging.getLogger(__name__)

# A changelog table is its table's name plus this, and its comment starts with the other
# (what tells it from a table of an earlier version, which has ``_op`` too).
CHANGES_SUFFIX: Final = "__changes"
CHANGELOG_COMMENT: Final = "ticdc-spark changelog of TiDB table "


def changes_key(key: TableKey) -> TableKey:
    """The changelog table of a table."""
    return key[0], key[1] + CHANGES_SUFFIX


def _changes_schema(schema: TableSchema) -> TableSchema:
    return replace(schema, table=schema.table + CHANGES_SUFFIX)


def _changes_step(step: DDLStep) -> DDLStep:
    """A DDL as it applies to the changelog tables of the tables it concerns."""
    return replace(
        step,
        table=step.table + CHANGES_SUFFIX,
        before=None if step.before is None else _changes_schema(step.before),
        after=None if step.after is None else _changes_schema(step.after),
        renamed_to=None if step.renamed_to is None else changes_key(step.renamed_to),
        dropped=tuple(changes_key(k) for k in step.dropped),
    )


@dataclass
class StepResult:
    """What applying one step did."""

    rows: int = 0
    skipped: bool = False  # the step was already applied (a replay)
    dead_letters: pa.Table | None = None
    details: dict[str, Any] = field(default_factory=dict)


def live(rows: pa.Table) -> pa.Table:
    """The table as upstream has it: the bookkeeping columns dropped (and the tombstones of
    a table an earlier version wrote, with ``_op``, until it is migrated)."""
    if rows is None:
        return rows
    if OP not in rows.column_names:  # a live table
        return rows.drop_columns([COMMIT_TS])
    kept = rows.filter(pc.not_equal(rows[OP], OP_DELETE))
    return kept.drop_columns([COMMIT_TS, OP])


def carried_columns(
    current: pa.Table, target: pa.Schema, schema: TableSchema, renamed: Mapping[str, str]
) -> list[pa.Array | pa.ChunkedArray]:
    """The columns of a table rewritten to ``schema`` (Arrow schema ``target``): each column
    from the current table (under its old name if ``renamed``), cast to its new type; a new
    column holds its constant DEFAULT, as upstream's existing rows do (TiCDC sends no change
    for them), else nulls."""
    out = []
    for f in target:
        source = renamed.get(f.name, f.name)
        if source in current.column_names:
            out.append(current[source].cast(f.type, safe=False))
        else:
            out.append(_default_column(schema, f, current.num_rows))
    return out


def _constant_default(column: Column | None) -> str | None:
    """A column's DEFAULT when it is a constant (what upstream's existing rows then hold)."""
    default = None if column is None else column.default
    return None if isinstance(default, DefaultExpression) else default


def _default_column(schema: TableSchema, field: pa.Field, rows: int) -> pa.Array:
    column = schema.get(field.name)
    default = _constant_default(column)
    if column is None or default is None:
        return pa.nulls(rows, field.type)
    ctype = column.type
    if ctype.family is Family.BYTES:  # the literal's bytes (changelog text would be base64)
        raw = default.encode("utf-8")
        if ctype.name == "binary" and ctype.length:  # BINARY(n) pads with zero bytes
            raw = raw.ljust(ctype.length, b"\0")
        return pa.array([raw] * rows, pa.binary()).cast(field.type)
    value, failed = convert_column(ctype, pa.array([default], pa.string()))
    if failed:
        log.warning("cannot read the default %r of column %s: %s", default, field.name, failed[0])
        return pa.nulls(rows, field.type)
    return value.cast(field.type).take(pa.array([0] * rows, pa.int32()))


_BOOKKEEPING = (COMMIT_TS, OP)


def _same_stored_type(stored: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a column stored as ``stored`` already holds ``wanted`` (a large string or
    binary stores its plain variant)."""
    if stored == wanted:
        return True
    large = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
    return bool(large.get(wanted) == stored)


def _fills_defaults(schema: TableSchema, current: pa.Schema) -> bool:
    """Whether a column ``schema`` adds has a constant default to fill the rows with."""
    return any(
        _constant_default(c) is not None and current.get_field_index(c.name) < 0
        for c in schema.columns
    )


class TableSink(abc.ABC):
    """The format-independent part of applying plans to lakehouse tables."""

    name = "sink"

    def __init__(self) -> None:
        # Open tables, kept between steps: opening one replays its log or metadata, and both
        # delta-rs and pyiceberg bring an open table up to date themselves after each commit
        # made through it.  Changes made around the open table (writes by path, catalog
        # renames, drops) must forget the entries they touch.
        self._open: dict[TableKey, Any] = {}
        self.changelog_tables = False  # write T__changes beside each table T (module doc)

    def _table(self, key: TableKey) -> Any:
        """The open table of ``key``, opened on first use."""
        table = self._open.get(key)
        if table is None:
            table = self._open[key] = self.open_table(key)
        return table

    def _forget(self, *keys: TableKey) -> None:
        for key in keys:
            self._open.pop(key, None)

    # -- format hooks ---------------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def from_target(
        cls, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> TableSink:
        """The sink of a target (``location``: the part after ``SCHEME:``, see
        :func:`ticdc_spark.sinks.make_sink`); ``app_id`` is the pipeline's id, under which a
        format that can records the step versions it commits; ``storage`` configures an
        object store (default: the environment's)."""

    @abc.abstractmethod
    def open_table(self, key: TableKey) -> Any:
        """Open an existing table (the format library's table object)."""

    @abc.abstractmethod
    def exists(self, key: TableKey) -> bool: ...

    @abc.abstractmethod
    def create(self, schema: TableSchema) -> None: ...

    @abc.abstractmethod
    def arrow_schema(self, key: TableKey) -> pa.Schema: ...

    @abc.abstractmethod
    def applied_version(self, key: TableKey) -> int: ...

    @abc.abstractmethod
    def merge(self, schema: TableSchema, rows: pa.Table, version: int) -> dict[str, Any]: ...

    @abc.abstractmethod
    def add_columns(self, key: TableKey, fields: list[pa.Field]) -> None: ...

    @abc.abstractmethod
    def rewrite(self, schema: TableSchema, version: int, renamed: Mapping[str, str]) -> None:
        """Rewrite the table to ``schema``'s columns and types (drops, type changes,
        renames: new name -> old name), with :func:`carried_columns`."""

    @abc.abstractmethod
    def delete_older(self, key: TableKey, commit_ts: int, version: int) -> None:
        """Delete every row committed before ``commit_ts`` (TRUNCATE)."""

    @abc.abstractmethod
    def drop(self, key: TableKey) -> None: ...

    @abc.abstractmethod
    def rename(self, old: TableKey, new: TableKey) -> None: ...

    @abc.abstractmethod
    def read(self, key: TableKey) -> pa.Table: ...

    @abc.abstractmethod
    def append(self, key: TableKey, rows: pa.Table, version: int) -> None:
        """Append ``rows`` (in the table's stored schema) and record ``version``, in one
        commit: a changelog table's changes of one step."""

    @abc.abstractmethod
    def tombstones(self, key: TableKey) -> pa.Table | None:
        """The tombstones of a table an earlier version wrote (its rows with ``_op =
        'delete'``): every column of the table as the changelog's text
        (:func:`~ticdc_spark.sinks.convert.changelog_texts` of the stored values), the
        table's handle key among them, and ``_commit_ts``; a table of zero rows when it has
        ``_op`` but no tombstone.  None for a table without ``_op`` (a live table) and for a
        changelog table (marked by its comment, :data:`CHANGELOG_COMMENT`)."""

    @abc.abstractmethod
    def drop_tombstones(self, key: TableKey) -> None:
        """Delete a table's tombstones and drop its ``_op`` column, keeping its step
        version; atomic, or each part idempotent (a start killed midway runs it again on
        the same table, whose :meth:`tombstones` is then empty or None)."""

    @abc.abstractmethod
    def tables(self) -> list[TableKey]: ...

    # -- steps ----------------------------------------------------------------------------

    def apply_rows(self, step: TableChanges, version: int) -> StepResult:
        """Merge one table's final changes (skipped if this version was applied), and
        append them to its changelog table when there is one."""
        key = (step.database, step.table)
        self._refuse_changelog_name(key)
        if self.exists(key) and self.applied_version(key) >= version:
            # A replay (the batch's apply was cut short): nothing to merge, and the table is
            # left as later steps made it; but the step's dead letters are found again, since
            # the cut may have come before they were written (and --on-error stop must stop).
            result = self.replayed(step)
        else:
            self.ensure_table(step.schema)
            rows, dead = typed_rows(step.schema, step.rows)
            details = self.merge(step.schema, rows, version) if rows.num_rows else {}
            result = StepResult(rows=rows.num_rows, dead_letters=dead, details=details)
        if self.changelog_tables:
            self._append_changes(step, version)
        return result

    def _append_changes(self, step: TableChanges, version: int) -> None:
        """Append a step's changes to its table's changelog table, unless it has them (a
        replay: the changelog table holds the step's version)."""
        if not self._wants_changes(step.schema, version):
            return
        rows = typed_rows(step.schema, step.rows)[0]
        if rows.num_rows:
            stored = self.stored_schema(_changes_schema(step.schema))
            self.append(changes_key((step.database, step.table)), rows.cast(stored), version)

    def _wants_changes(self, schema: TableSchema, version: int) -> bool:
        """Whether a step's changes go to its table's changelog table (which is made
        ready): not when it has them (a replay: it holds the step's version)."""
        key = changes_key((schema.database, schema.table))
        if self.exists(key) and self.applied_version(key) >= version:
            return False
        crash_point("changes")
        self.ensure_table(_changes_schema(schema))
        return True

    def _refuse_changelog_name(self, *keys: TableKey) -> None:
        """Stop on an upstream table named as a changelog table would be."""
        for key in keys:
            if self.is_changelog(key):
                raise ConfigError(
                    f"the upstream table {key[0]}.{key[1]} has the name of a changelog table "
                    f"(--changelog-tables writes T{CHANGES_SUFFIX} beside each table T): "
                    "replicate without --changelog-tables, or filter that table out"
                )

    def is_changelog(self, key: TableKey) -> bool:
        """Whether ``key`` names a changelog table this sink writes."""
        return self.changelog_tables and key[1].endswith(CHANGES_SUFFIX)

    def table_comment(self, schema: TableSchema) -> str:
        """The comment a new table gets: a changelog table's marks it as one."""
        if self.is_changelog((schema.database, schema.table)):
            return f"{CHANGELOG_COMMENT}{schema.database}.{schema.table[: -len(CHANGES_SUFFIX)]}"
        return f"TiDB {schema.qualified_name}"

    def apply_planned(self, step: PlannedChanges, version: int, replayed: bool) -> StepResult:
        """Merge one table's final changes planned on Spark's executors (see
        :meth:`apply_rows`; ``replayed``: see :meth:`replayed`): the spark engine's."""
        raise ConfigError(
            f"{step.database}.{step.table}: changes planned on Spark's executors (--planner "
            "executors) are applied by the spark engine only (--engine spark)"
        )

    def planned_commits(self, step: PlannedChanges) -> pa.ChunkedArray:
        """The commit ts of a planned step's changes (latency measurements only: they
        come to the driver): the spark engine's."""
        raise ConfigError("changes planned on Spark's executors are read by the spark engine")

    def replayed(self, step: TableChanges) -> StepResult:
        """The result of a row step an earlier attempt of its batch applied."""
        return StepResult(skipped=True, dead_letters=typed_rows(step.schema, step.rows)[1])

    def ensure_table(self, schema: TableSchema) -> None:
        """Create the table, or add the columns it lacks (no rewrite)."""
        key = (schema.database, schema.table)
        if not self.exists(key):
            self.create(schema)
            return
        self._add_missing(key, self.arrow_schema(key), self.stored_schema(schema))

    def stored_schema(self, schema: TableSchema) -> pa.Schema:
        """The Arrow schema this format stores a table of ``schema`` as (a changelog
        table's with ``_op``)."""
        return table_arrow_schema(schema, op=self.is_changelog((schema.database, schema.table)))

    def _add_missing(self, key: TableKey, current: pa.Schema, target: pa.Schema) -> None:
        missing = [f for f in target if current.get_field_index(f.name) < 0]
        if missing:
            self.add_columns(key, missing)

    def apply_ddl(self, step: DDLStep, version: int) -> StepResult:
        """Apply a DDL to its table, and to their changelog tables; every branch is a no-op
        when it finds the change already made."""
        self._refuse_changelog_name((step.database, step.table), *step.dropped)
        if step.renamed_to is not None:
            self._refuse_changelog_name(step.renamed_to)
        result = self._apply_ddl(step, version)
        if self.changelog_tables and step.ddl_type is not DDLType.TRUNCATE_TABLE:
            self._apply_ddl(_changes_step(step), version)  # (a changelog keeps its rows)
        return result

    def _apply_ddl(self, step: DDLStep, version: int) -> StepResult:
        key = (step.database, step.table)
        action = step.ddl_type
        if step.dropped:
            for dropped in step.dropped:
                if self.exists(dropped):
                    self.drop(dropped)
            return StepResult()
        if step.renamed_to is not None:
            if self.exists(key) and not self.exists(step.renamed_to):
                self.rename(key, step.renamed_to)
            return StepResult()
        if action is DDLType.TRUNCATE_TABLE:
            if self.exists(key) and self.applied_version(key) < version:
                self.delete_older(key, step.commit_ts, version)
            return StepResult()
        if step.after is not None:
            self._follow_schema(step.after, version, step.renamed_columns)
        return StepResult()

    def _follow_schema(
        self, schema: TableSchema, version: int, renamed: Mapping[str, str] | None = None
    ) -> None:
        """Make the table match a schema: add columns cheaply, rewrite for anything else
        (type changes, drops, renames, new columns with a default to fill in)."""
        key = (schema.database, schema.table)
        if not self.exists(key):
            self.create(schema)
            return
        current = self.arrow_schema(key)
        target = self.stored_schema(schema)
        if current.equals(target):
            return
        # Columns added in place sit after the bookkeeping ones, and a format may store a
        # type wider or as a large variant: neither is a reason to rewrite the table.
        had = [f for f in current if f.name not in _BOOKKEEPING]
        wanted = [f for f in target if f.name not in _BOOKKEEPING][: len(had)]
        same = len(wanted) == len(had) and all(
            f.name == g.name and _same_stored_type(f.type, g.type)
            for f, g in zip(had, wanted, strict=True)
        )
        if same and not renamed and not _fills_defaults(schema, current):
            self._add_missing(key, current, target)
        elif self.applied_version(key) < version:
            log.info("rewriting %s.%s to its new schema", *key)
            self.rewrite(schema, version, renamed or {})
