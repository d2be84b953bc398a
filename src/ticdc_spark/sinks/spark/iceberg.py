"""Iceberg tables applied by Spark (``iceberg-spark-runtime``), in merge-on-read mode.

The catalog is the embedded sink's (``iceberg:CATALOG_URI#WAREHOUSE``): a SQLite catalog is
read through Iceberg's JDBC catalog, which keeps pyiceberg's ``SqlCatalog`` tables, so both
engines see the same tables.  Tables are format version 3 with merge, update and delete in
merge-on-read mode (a merge writes the changed rows and deletion vectors for the rows they
replace, never the untouched rows of a file); schema changes use Iceberg's field ids (rename,
drop, int -> long and the like are metadata) and a new column's constant DEFAULT is its
``initial-default`` (v3): existing rows read it without being rewritten.

Versions: every commit carries ``ticdc.app-id`` and ``ticdc.version`` in its snapshot summary
(``spark.sql.iceberg.snapshot-property.*``, read by Iceberg's Spark writes, MERGE, UPDATE and
DELETE included); a schema change's version is the table property ``ticdc.version`` (what
the embedded engine records too), set right after it.

The warehouse may be on ``s3://`` (or ``s3a://``): the catalog's files go through Hadoop's
S3A (:data:`HADOOP_FILE_IO`; each session of the sink gets the S3A settings of its
``StorageOptions``).  Both engines create a table at ``WAREHOUSE/<db>/<table>`` (pyiceberg
0.12's ``SqlCatalog`` and Iceberg's JDBC catalog agree) and find it where its metadata says
(a renamed table stays where it was made); the locations are ``s3://`` URIs, which S3A
reads too (``fs.s3.impl``), so each engine reads the other's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ticdc_spark.errors import ConfigError
from ticdc_spark.sinks.base import TableKey
from ticdc_spark.sinks.iceberg import VERSION_PROPERTY, parse_iceberg_target
from ticdc_spark.sinks.spark.base import SparkTableSink
from ticdc_spark.sinks.spark.sql import quote
from ticdc_spark.storage import StorageOptions

__all__ = ["SparkIcebergSink", "catalog_settings"]

CATALOG = "ticdc"  # the embedded sink's catalog name (rows of the SQL catalog carry it)
_SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
_APP_ID, _VERSION = "ticdc.app-id", "ticdc.version"
PROPERTIES = {
    "format-version": "3",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}
# Iceberg's primitive type names, by Spark's
_ICEBERG_TYPES = {
    "int": "int",
    "bigint": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp_ntz": "timestamp",
    "boolean": "boolean",
}
# Files through Hadoop's file systems: a local warehouse, or one on s3:// through S3A (the
# session's S3A settings; Iceberg's own S3FileIO would need the AWS SDK's 641.5 MB bundle,
# see jars.py).  The JDBC catalog's default, named so that a change of Iceberg's does not
# move the tables to a FileIO the session cannot configure.
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
_SNAPSHOTS_WALKED = 1000  # how far back a version is looked for (other writers' commits)


def catalog_settings(catalog_uri: str, warehouse: str) -> dict[str, str]:
    """Spark settings of the Iceberg catalog a target names (``CATALOG_URI#WAREHOUSE``):
    ``sqlite:///PATH`` (pyiceberg's form) through Iceberg's JDBC catalog, ``jdbc:...`` as
    is, ``http(s)://`` a REST catalog."""
    prefix = f"spark.sql.catalog.{CATALOG}"
    settings = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.warehouse": warehouse,
        # (our own commits are the only ones between reads; a cached table would be stale
        # after another session's commit)
        f"{prefix}.cache-enabled": "false",
    }
    if catalog_uri.startswith(("sqlite:///", "jdbc:")):
        settings[f"{prefix}.type"] = "jdbc"
        settings[f"{prefix}.uri"] = catalog_uri
        settings[f"{prefix}.io-impl"] = HADOOP_FILE_IO
    if catalog_uri.startswith("sqlite:///"):
        # (SQLAlchemy's form, pyiceberg's: the path after the third slash, relative to the
        # working directory unless it starts with a fourth)
        database = Path(catalog_uri[len("sqlite:///") :]).absolute()
        settings[f"{prefix}.uri"] = f"jdbc:sqlite:{database}"
        # tables committed from several threads at once wait for SQLite's lock
        settings[f"{prefix}.jdbc.busy_timeout"] = "60000"
    elif catalog_uri.startswith(("http://", "https://")):
        settings.update({f"{prefix}.type": "rest", f"{prefix}.uri": catalog_uri})
    elif not catalog_uri.startswith("jdbc:"):
        raise ConfigError(
            "the Spark engine reads an Iceberg catalog at sqlite:///PATH, jdbc:... or "
            "http(s)://... (a REST catalog)"
        )
    return settings


class SparkIcebergSink(SparkTableSink):
    """Iceberg tables in one catalog, written by Spark."""

    name = "iceberg"
    narrow_integers = False
    # Rows from which a step is merged in two commits (SparkTableSink._merge_in_two): below,
    # the one MERGE's shuffle of the table costs less than the second commit and the extra
    # read (20,000 updates, benchmarks/apply_scale.py: one MERGE 1.7 s against 2.3 s at
    # 250k rows, 4.8 s against 2.9 s at 4M).
    split_merge_rows = 1_000_000

    def __init__(
        self,
        spark: Any,
        catalog_uri: str,
        warehouse: str,
        app_id: str,
        storage: StorageOptions | None = None,
    ) -> None:
        super().__init__(spark, app_id, warehouse, storage)
        self.settings = catalog_settings(catalog_uri, warehouse)

    @classmethod
    def from_target(
        cls, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> SparkIcebergSink:
        raise NotImplementedError("the Spark engine's sinks are made by from_spark")

    @classmethod
    def from_spark(
        cls, spark: Any, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> SparkIcebergSink:
        """``iceberg:CATALOG_URI#WAREHOUSE`` applied through ``spark`` (WAREHOUSE on
        ``s3://`` through S3A)."""
        return cls(spark, *parse_iceberg_target(location), app_id=app_id, storage=storage)

    def configure(self, session: Any) -> None:
        for key, value in self.settings.items():
            session.conf.set(key, value)

    def target(self, key: TableKey) -> str:
        return f"{CATALOG}.{quote(key[0])}.{quote(key[1])}"

    def table_properties(self) -> dict[str, str]:
        return dict(PROPERTIES)

    def exists(self, key: TableKey) -> bool:
        if key in self._open:
            return True
        # (Iceberg's own catalog API: Spark's tableExists asks for views too, which a JDBC
        # catalog in pyiceberg's layout refuses)
        jvm = self.spark._jvm
        catalog = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(
            self.session()._jsparkSession, CATALOG
        )
        names = self.spark.sparkContext._gateway.new_array(jvm.java.lang.String, 1)
        names[0] = key[0]
        namespace = jvm.org.apache.iceberg.catalog.Namespace.of(names)
        identifier = jvm.org.apache.iceberg.catalog.TableIdentifier.of(namespace, key[1])
        return bool(catalog.tableExists(identifier))

    def create(self, schema: Any) -> None:
        self.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{quote(schema.database)}")
        super().create(schema)

    @contextlib.contextmanager
    def versioned(self, key: TableKey, version: int) -> Iterator[None]:
        conf = self.session().conf
        conf.set(_SNAPSHOT_PROPERTY + _APP_ID, self.app_id)
        conf.set(_SNAPSHOT_PROPERTY + _VERSION, str(version))
        try:
            yield
        finally:
            conf.unset(_SNAPSHOT_PROPERTY + _APP_ID)
            conf.unset(_SNAPSHOT_PROPERTY + _VERSION)

    def _iceberg_table(self, key: TableKey) -> Any:
        jvm = self.spark._jvm
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            self.session()._jsparkSession, self.target(key)
        )

    def merges_in_two(self, key: TableKey) -> bool:
        """A table of ``split_merge_rows`` rows or more (its current snapshot's count:
        Iceberg's metadata, no job)."""
        snapshot = self._iceberg_table(key).currentSnapshot()
        if snapshot is None:
            return False
        return int(snapshot.summary().getOrDefault("total-records", "0")) >= self.split_merge_rows

    def read_version(self, key: TableKey) -> int:
        """The newest of the table property (schema changes, and the embedded engine) and
        the summary of this pipeline's newest snapshot in the current snapshot's history."""
        table = self._iceberg_table(key)
        found = int(table.properties().getOrDefault(VERSION_PROPERTY, "-1"))
        snapshot = table.currentSnapshot()
        for _ in range(_SNAPSHOTS_WALKED):
            if snapshot is None:
                break
            summary = snapshot.summary()
            if summary.get(_APP_ID) == self.app_id:
                return max(found, int(summary.get(_VERSION)))
            parent = snapshot.parentId()
            snapshot = None if parent is None else table.snapshot(parent)
        return found

    def record_version(self, key: TableKey, version: int) -> None:
        self.sql(
            f"ALTER TABLE {self._table(key)} SET TBLPROPERTIES "
            f"('{VERSION_PROPERTY}' = '{int(version)}')"
        )
        self._committed(key, version)

    def add_column(self, key: TableKey, name: str, sql_type: str, default: Any) -> None:
        """A constant DEFAULT becomes the column's ``initial-default`` (Iceberg's Java API:
        Spark's ``ADD COLUMN ... DEFAULT`` is refused by Iceberg 1.12)."""
        if name in self._current_types(key):
            return
        if default is None:
            self.sql(f"ALTER TABLE {self._table(key)} ADD COLUMN {quote(name)} {sql_type}")
            return
        jvm = self.spark._jvm
        iceberg_type = jvm.org.apache.iceberg.types.Types.fromPrimitiveString(
            _iceberg_type(sql_type)
        )
        literal = _literal(jvm, default).to(iceberg_type)
        table = self._iceberg_table(key)
        table.updateSchema().addColumn(name, iceberg_type, None, literal).commit()

    def overwrite(self, key: TableKey, frame: Any) -> None:
        writer = frame.writeTo(self._table(key)).using("iceberg")
        for k, v in PROPERTIES.items():
            writer = writer.tableProperty(k, v)
        writer.replace()

    def prepare(self, key: TableKey) -> None:
        """A table the embedded engine made (format version 2, copy-on-write): switched to
        merge-on-read and format version 3."""
        if not self.exists(key):
            return
        table = self._iceberg_table(key)
        properties = table.properties()
        missing = {k: v for k, v in PROPERTIES.items() if properties.get(k) != v}
        if missing:
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
            self.sql(f"ALTER TABLE {self.target(key)} SET TBLPROPERTIES ({pairs})")

    def drop(self, key: TableKey) -> None:
        self._forget(key)
        self.sql(f"DROP TABLE IF EXISTS {self.target(key)} PURGE")

    def rename(self, old: TableKey, new: TableKey) -> None:
        self._forget(old, new)
        self.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{quote(new[0])}")
        self.sql(f"ALTER TABLE {self.target(old)} RENAME TO {quote(new[0])}.{quote(new[1])}")

    def tables(self) -> list[TableKey]:
        namespaces = [r[0] for r in self.sql(f"SHOW NAMESPACES IN {CATALOG}").collect()]
        return sorted(
            (namespace, row["tableName"])
            for namespace in namespaces
            for row in self.sql(f"SHOW TABLES IN {CATALOG}.{quote(namespace)}").collect()
        )


def _iceberg_type(sql_type: str) -> str:
    if sql_type.startswith("decimal("):
        precision, scale = sql_type[len("decimal(") : -1].split(",")
        return f"decimal({precision}, {scale})"
    return _ICEBERG_TYPES[sql_type]


def _literal(jvm: Any, value: Any) -> Any:
    """An Iceberg literal of a typed default (converted to the column's type by ``to``)."""
    expressions = jvm.org.apache.iceberg.expressions.Literal
    if isinstance(value, decimal.Decimal):
        return expressions.of(jvm.java.math.BigDecimal(str(value)))
    if isinstance(value, dt.datetime):
        return expressions.of(value.isoformat())
    if isinstance(value, dt.date):
        return expressions.of(value.isoformat())
    if isinstance(value, bool | int):
        return expressions.of(jvm.java.lang.Long(int(value)))
    if isinstance(value, float):
        return expressions.of(jvm.java.lang.Double(value))
    if isinstance(value, bytes):
        return expressions.of(jvm.java.nio.ByteBuffer.wrap(bytearray(value)))
    return expressions.of(str(value))
