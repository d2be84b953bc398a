"""Apache Iceberg tables through pyiceberg, with a SQL catalog.

``iceberg:CATALOG_URI#WAREHOUSE`` (e.g. ``iceberg:sqlite:////tmp/cat.db#file:///tmp/wh``):
one namespace per upstream database, one table per upstream table.  Every change commits in
one Iceberg transaction together with the table property ``ticdc.version`` (the step's
version), so a replayed step is recognised and skipped.  Iceberg has no 8- or 16-bit
integers: those columns are stored as ``int``.

The warehouse may be an object store's URI (``s3://bucket/warehouse``, ``gs://``,
``abfss://``): pyiceberg's FileIO gets its endpoint and credentials from
:meth:`~ticdc_spark.storage.StorageOptions.iceberg` (pyiceberg itself reads no
``AWS_ENDPOINT_URL``).  Every commit, rename and drop is one catalog transaction, whatever
the store: Iceberg never renames files.  The catalog is a SQL database (SQLAlchemy URI): a
SQLite file suits one machine; a job whose machines come and go needs a catalog that outlives
them (``postgresql+psycopg2://...``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ticdc_spark.errors import ConfigError
from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.steps import OP_DELETE, TableKey
from ticdc_spark.sinks.base import CHANGELOG_COMMENT, carried_columns
from ticdc_spark.sinks.convert import COMMIT_TS, OP, changelog_texts, table_arrow_schema
from ticdc_spark.sinks.stored import StoredSink
from ticdc_spark.storage import StorageOptions, is_local
from ticdc_spark.storage.store import local_path

__all__ = ["IcebergSink", "parse_iceberg_target"]

log = logging.getLogger(__name__)
VERSION_PROPERTY = "ticdc.version"
_REWRITE_SUFFIX = "__ticdc_rewrite"


def _has_nulls(rows: Any, keys: list[str]) -> bool:
    return any(rows[k].null_count for k in keys)


def _match(rows: Any, keys: list[str]) -> Any:
    """An Iceberg filter matching the rows' keys, a null matching a null."""
    from pyiceberg.expressions import AlwaysFalse, And, EqualTo, In, IsNull, Or

    if len(keys) == 1 and not rows[keys[0]].null_count:
        values = rows[keys[0]].unique().to_pylist()
        return In(keys[0], values) if values else AlwaysFalse()  # type: ignore[call-arg,arg-type]

    def term(column: str, value: Any) -> Any:
        return IsNull(column) if value is None else EqualTo(column, value)  # type: ignore[call-arg,arg-type]

    matches = [
        And(*(term(k, v) for k, v in row.items())) if len(keys) > 1 else term(*row.popitem())
        for row in rows.select(keys).group_by(keys).aggregate([]).to_pylist()
    ]
    if not matches:
        return AlwaysFalse()
    return matches[0] if len(matches) == 1 else Or(*matches)


def parse_iceberg_target(spec: str) -> tuple[str, str]:
    """``CATALOG_URI#WAREHOUSE`` -> (catalog uri, warehouse)."""
    uri, sep, warehouse = spec.partition("#")
    if not sep or not uri or not warehouse:
        raise ConfigError(
            "an Iceberg target is iceberg:CATALOG_URI#WAREHOUSE, e.g. "
            "iceberg:sqlite:////tmp/catalog.db#file:///tmp/warehouse"
        )
    return uri, _absolute_if_local(warehouse)


def _absolute_if_local(location: str) -> str:
    """A warehouse given as a relative local path, made absolute: the catalog stores each
    table's location, and a relative one would be read against whatever directory a later
    reader (or the Spark engine's JVM) runs in."""
    path = Path(local_path(location)) if is_local(location) else None
    return location if path is None or path.is_absolute() else str(path.absolute())


def iceberg_arrow_schema(schema: TableSchema, *, op: bool = False) -> Any:
    """The table's Arrow schema with the integer types Iceberg has (with ``op``, a changelog
    table's: see :func:`~ticdc_spark.sinks.convert.table_arrow_schema`)."""
    import pyarrow as pa

    def widen(arrow_type: Any) -> Any:
        if pa.types.is_int8(arrow_type) or pa.types.is_int16(arrow_type):
            return pa.int32()
        return arrow_type

    return pa.schema(
        [pa.field(f.name, widen(f.type), nullable=True) for f in table_arrow_schema(schema, op=op)]
    )


class IcebergSink(StoredSink):
    """Iceberg tables in a pyiceberg SQL catalog."""

    name = "iceberg"

    def __init__(
        self,
        catalog_uri: str,
        warehouse: str,
        name: str = "ticdc",
        storage: StorageOptions | None = None,
    ) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        super().__init__()
        options = storage or StorageOptions.from_environment()
        files = options.iceberg()
        self.location, self.secrets = warehouse, options.secrets()
        self.catalog = SqlCatalog(name, uri=catalog_uri, warehouse=warehouse, **files)

    @classmethod
    def from_target(
        cls, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> IcebergSink:
        """``iceberg:CATALOG_URI#WAREHOUSE``.  (The step version is a table property, which
        needs no app id: a checkpoint's versions are its own, see the module's doc.)"""
        return cls(*parse_iceberg_target(location), storage=storage)

    def _cast(self, schema: TableSchema, rows: Any) -> Any:
        """Rows in the stored types, their columns in the table's order (pyiceberg matches
        by position; columns added in place come after the bookkeeping ones)."""
        rows = rows.cast(iceberg_arrow_schema(schema))
        stored = self.arrow_schema((schema.database, schema.table)).names
        order = [n for n in stored if n in rows.column_names]
        order += [n for n in rows.column_names if n not in order]
        return rows.select(order) if order != rows.column_names else rows

    def stored_schema(self, schema: TableSchema) -> Any:
        return iceberg_arrow_schema(schema, op=self.is_changelog((schema.database, schema.table)))

    # -- hooks ----------------------------------------------------------------------------

    def open_table(self, key: TableKey) -> Any:
        return self.catalog.load_table(key)

    def exists(self, key: TableKey) -> bool:
        if key in self._open:  # loaded after recovery, and forgotten when dropped
            return True
        self._recover(key)
        return bool(self.catalog.table_exists(key))

    def create(self, schema: TableSchema) -> None:
        key = (schema.database, schema.table)
        self._forget(key)
        self.catalog.create_namespace_if_not_exists(schema.database)
        self.catalog.create_table_if_not_exists(
            key, self.stored_schema(schema), properties={"comment": self.table_comment(schema)}
        )

    def arrow_schema(self, key: TableKey) -> Any:
        return self._table(key).schema().as_arrow()

    def applied_version(self, key: TableKey) -> int:
        if not self.exists(key):
            return -1
        return int(self._table(key).properties.get(VERSION_PROPERTY, -1))

    def merge(self, schema: TableSchema, rows: Any, version: int) -> dict[str, Any]:
        """A live merge, as :meth:`DeltaSink.merge <ticdc_spark.sinks.delta.DeltaSink.merge>`:
        each change applies only over an older row (``_commit_ts`` strictly lower); a
        delete deletes it, an insert or update replaces it (or writes a row the table
        lacks)."""
        import pyarrow.compute as pc

        key = (schema.database, schema.table)
        table = self._table(key)
        keys = list(schema.handle_key) or list(schema.column_names)
        is_delete = pc.equal(rows[OP], OP_DELETE)
        data = self._cast(schema, rows.drop_columns([OP]))
        stored = self._stored_ts(table, keys, data)
        newer = pc.fill_null(pc.greater(data[COMMIT_TS], stored), True)
        touched = data.filter(pc.and_(newer, pc.invert(pc.and_(is_delete, pc.is_null(stored)))))
        written = data.filter(pc.and_(newer, pc.invert(is_delete)))
        # The stored rows of the changed keys are deleted and the new ones appended, in one
        # transaction.  (Not pyiceberg's upsert: it matches keys with EqualTo, which refuses
        # the nulls a table without a key may hold, and it reads data files written before a
        # column was added without that column, then fails to line them up with the new rows.)
        with table.transaction() as tx:
            if touched.num_rows:
                with warnings.catch_warnings():  # (new rows match nothing: no news)
                    warnings.filterwarnings("ignore", "Delete operation did not match")
                    tx.delete(_match(touched, keys))
            if written.num_rows:
                tx.append(written)
            tx.set_properties({VERSION_PROPERTY: str(version)})
        return {"num_source_rows": rows.num_rows, "written": written.num_rows}

    def _stored_ts(self, table: Any, keys: list[str], rows: Any) -> Any:
        """The ``_commit_ts`` the table holds for each row's key (null: no such row)."""
        import pyarrow as pa
        from pyiceberg.expressions import In

        if _has_nulls(rows, keys):
            return self._stored_ts_null_safe(table, keys, rows)
        first = keys[0]
        wanted = [v for v in rows[first].unique().to_pylist() if v is not None]
        row_filter = In(first, wanted) if wanted else f"{first} IS NULL"  # type: ignore[call-arg,arg-type]
        scan = table.scan(row_filter=row_filter, selected_fields=(*keys, COMMIT_TS))
        existing = scan.to_arrow().rename_columns([*keys, "_stored_ts"])
        if not existing.num_rows:
            return pa.nulls(rows.num_rows, pa.int64())
        numbered = rows.select(keys).append_column(
            "_row", pa.array(range(rows.num_rows), pa.int64())
        )
        joined = numbered.join(existing, keys=keys, join_type="left outer", use_threads=False)
        return joined.sort_by("_row")["_stored_ts"].combine_chunks()

    def _stored_ts_null_safe(self, table: Any, keys: list[str], rows: Any) -> Any:
        """:meth:`_stored_ts` with null-safe key matching, in Python (Arrow joins never match
        nulls): for tables without a key, whose rows may hold nulls."""
        import pyarrow as pa

        scan = table.scan(row_filter=_match(rows, keys), selected_fields=(*keys, COMMIT_TS))
        stored = {tuple(r[k] for k in keys): r[COMMIT_TS] for r in scan.to_arrow().to_pylist()}
        found = [stored.get(tuple(row[k] for k in keys)) for row in rows.select(keys).to_pylist()]
        return pa.array(found, pa.int64())

    def add_columns(self, key: TableKey, fields: list[Any]) -> None:
        import pyarrow as pa

        if not fields:
            return
        table = self._table(key)
        widened = [
            pa.field(
                f.name,
                pa.int32() if pa.types.is_int8(f.type) or pa.types.is_int16(f.type) else f.type,
            )
            for f in fields
        ]
        with table.update_schema() as update:
            update.union_by_name(pa.schema(widened))

    def rewrite(self, schema: TableSchema, version: int, renamed: Mapping[str, str]) -> None:
        """Copy into a new table of the new schema, then swap it in by catalog rename."""
        import pyarrow as pa

        key = (schema.database, schema.table)
        current = self._table(key).scan().to_arrow()
        target = self.stored_schema(schema)
        columns = carried_columns(current, target, schema, renamed)
        temp = (key[0], key[1] + _REWRITE_SUFFIX)
        if self.catalog.table_exists(temp):
            self.catalog.purge_table(temp)
        table = self.catalog.create_table(
            temp, target, properties={"comment": self.table_comment(schema)}
        )
        with table.transaction() as tx:
            tx.append(pa.Table.from_arrays(columns, schema=target))
            tx.set_properties({VERSION_PROPERTY: str(version)})
        crash_point("rewrite")
        self._forget(key)
        self.catalog.purge_table(key)
        crash_point("rewrite-swap")  # (exists() finishes the swap: _recover)
        self.catalog.rename_table(temp, key)

    def _recover(self, key: TableKey) -> None:
        """Finish a rewrite that a crash interrupted between drop and rename."""
        temp = (key[0], key[1] + _REWRITE_SUFFIX)
        if (
            not key[1].endswith(_REWRITE_SUFFIX)
            and self.catalog.table_exists(temp)
            and not self.catalog.table_exists(key)
        ):
            self._forget(key)
            self.catalog.rename_table(temp, key)

    def delete_older(self, key: TableKey, commit_ts: int, version: int) -> None:
        from pyiceberg.expressions import LessThan

        table = self._table(key)
        with table.transaction() as tx:
            tx.delete(LessThan(COMMIT_TS, int(commit_ts)))  # type: ignore[call-arg,arg-type]
            tx.set_properties({VERSION_PROPERTY: str(version)})

    def drop(self, key: TableKey) -> None:
        # (pyiceberg removes the table from the catalog, one SQL transaction, before deleting
        # its files: a kill while it deletes them leaves unreferenced files, no table)
        self._forget(key)
        crash_point("drop")
        self.catalog.purge_table(key)

    def rename(self, old: TableKey, new: TableKey) -> None:
        self._forget(old, new)
        self.catalog.create_namespace_if_not_exists(new[0])
        crash_point("rename")
        self.catalog.rename_table(old, new)

    def read(self, key: TableKey) -> Any:
        return self._table(key).scan().to_arrow()

    def append(self, key: TableKey, rows: Any, version: int) -> None:
        stored = self.arrow_schema(key)
        with self._table(key).transaction() as tx:
            tx.append(rows.select(stored.names).cast(stored))
            tx.set_properties({VERSION_PROPERTY: str(version)})

    def tombstones(self, key: TableKey) -> Any:
        from pyiceberg.expressions import EqualTo

        table = self._table(key)
        if OP not in self.arrow_schema(key).names:
            return None
        if table.properties.get("comment", "").startswith(CHANGELOG_COMMENT):
            return None
        dead = table.scan(row_filter=EqualTo(OP, OP_DELETE)).to_arrow()  # type: ignore[call-arg,arg-type]
        return changelog_texts(dead.drop_columns([OP]))

    def drop_tombstones(self, key: TableKey) -> None:
        """One transaction: the tombstones deleted (pyiceberg rewrites the data files that
        hold them: copy-on-write), ``_op`` dropped from the schema (metadata only: older
        data files keep it, unread)."""
        from pyiceberg.expressions import EqualTo

        table = self._table(key)
        with table.transaction() as tx:
            with warnings.catch_warnings():  # (a table with no tombstone left)
                warnings.filterwarnings("ignore", "Delete operation did not match")
                tx.delete(EqualTo(OP, OP_DELETE))  # type: ignore[call-arg,arg-type]
            with tx.update_schema() as update:
                update.delete_column(OP)

    def tables(self) -> list[TableKey]:
        found: list[TableKey] = []
        for namespace in self.catalog.list_namespaces():
            for identifier in self.catalog.list_tables(namespace):
                name = identifier[-1]
                if not name.endswith(_REWRITE_SUFFIX):
                    found.append((identifier[0], name))
        return sorted(found)
