"""What every table sink does, whatever the table format.

A sink applies the steps a :class:`~ticdc_spark.pipeline.steps.Plan` lists: merges of one table's
final changes and DDLs.  Each step carries a *version* (batch id and step number) that the
sink records atomically with the change, so a step replayed after a crash is recognised and
skipped; merges are also guarded by commit ts (a change applies only if it is newer than
the row, and deletes leave tombstone rows, ``_op = 'delete'``, so older changes cannot bring
a row back).  Readers see live rows with ``_op <> 'delete'``.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.model import Column, DDLType, DefaultExpression, TableSchema
from ticdc_spark.pipeline.steps import OP_DELETE, DDLStep, TableChanges, TableKey
from ticdc_spark.sinks.convert import (
    COMMIT_TS,
    OP,
    convert_column,
    table_arrow_schema,
    typed_rows,
)
from ticdc_spark.storage import StorageOptions
from ticdc_spark.types import Family

__all__ = ["StepResult", "TableKey", "TableSink", "carried_columns", "live"]

log = logging.getLogger(__name__)


@dataclass
class StepResult:
    """What applying one step did."""

    rows: int = 0
    skipped: bool = False  # the step was already applied (a replay)
    dead_letters: pa.Table | None = None
    details: dict[str, Any] = field(default_factory=dict)


def live(rows: pa.Table) -> pa.Table:
    """Drop tombstones and the bookkeeping columns: the table as upstream has it."""
    if rows is None:
        return rows
    if OP not in rows.column_names:  # a live table (no tombstones)
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
    def tables(self) -> list[TableKey]: ...

    # -- steps ----------------------------------------------------------------------------

    def apply_rows(self, step: TableChanges, version: int) -> StepResult:
        """Merge one table's final changes (skipped if this version was applied)."""
        key = (step.database, step.table)
        if self.exists(key) and self.applied_version(key) >= version:
            # A replay (the batch's apply was cut short): nothing to merge, and the table is
            # left as later steps made it; but the step's dead letters are found again, since
            # the cut may have come before they were written (and --on-error stop must stop).
            return self.replayed(step)
        self.ensure_table(step.schema)
        rows, dead = typed_rows(step.schema, step.rows)
        details = self.merge(step.schema, rows, version) if rows.num_rows else {}
        return StepResult(rows=rows.num_rows, dead_letters=dead, details=details)

    def replayed(self, step: TableChanges) -> StepResult:
        """The result of a row step an earlier attempt of its batch applied."""
        return StepResult(skipped=True, dead_letters=typed_rows(step.schema, step.rows)[1])

    def ensure_table(self, schema: TableSchema) -> None:
        """Create the table, or add the columns it lacks (no rewrite)."""
        key = (schema.database, schema.table)
        if not self.exists(key):
            self.create(schema)
            return
        self._add_missing(key, self.arrow_schema(key), table_arrow_schema(schema))

    def stored_schema(self, schema: TableSchema) -> pa.Schema:
        """The Arrow schema this format stores a table of ``schema`` as."""
        return table_arrow_schema(schema)

    def _add_missing(self, key: TableKey, current: pa.Schema, target: pa.Schema) -> None:
        missing = [f for f in target if current.get_field_index(f.name) < 0]
        if missing:
            self.add_columns(key, missing)

    def apply_ddl(self, step: DDLStep, version: int) -> StepResult:
        """Apply a DDL; every branch is a no-op when it finds the change already made."""
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
