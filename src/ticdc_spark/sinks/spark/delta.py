"""Delta tables applied by Spark (``delta-spark``): MERGE with deletion vectors.

Tables live where the embedded sink puts them (``ROOT/<database>/<table>``, path tables) and
are created with deletion vectors (a merge marks replaced rows instead of rewriting their
files), column mapping by name (RENAME and DROP COLUMN are metadata) and type widening (INT
-> BIGINT and the like are metadata).  A table the embedded engine made is upgraded to these
features on first use; the upgrade is one way: delta-rs (the embedded engine, and tools built
on it) reads neither deletion vectors nor column mapping (checked with deltalake 1.6).

Versions are Delta app transactions (``spark.databricks.delta.write.txnAppId`` /
``txnVersion``): Delta records them in the commit of every write, MERGE, UPDATE and DELETE
and skips a write whose version the table already holds; schema changes carry none, so their
version is an empty append of its own.

``ROOT`` may be on ``s3://`` (or ``s3a://``): Spark reads and writes the tables through
Hadoop's S3A (each session of the sink gets the S3A settings of its ``StorageOptions``), and
what happens outside Spark (listing the tables, whether one exists, drops and renames) is the
embedded sink's object-store code, through the same settings.  Delta on Spark commits to S3
with its ``S3SingleDriverLogStore``: a commit file is created only if absent, but that is
checked within the JVM (a lock per path, an existence check, then the PUT), not by S3, so it
holds only while one driver writes a table.  The job's lease keeps one job per checkpoint,
and one pipeline writes a target (two sharing a target would break exactly-once on any
store); the embedded engine's delta-rs commits with a conditional PUT instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ticdc_spark.sinks.base import TableKey
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.sinks.spark.base import SparkTableSink
from ticdc_spark.sinks.spark.sql import quote, sql_literal
from ticdc_spark.storage import StorageOptions

__all__ = ["SparkDeltaSink"]

_APP_ID = "spark.databricks.delta.write.txnAppId"
_VERSION = "spark.databricks.delta.write.txnVersion"
# Features a table needs for merges and schema changes in place (reader v3, writer v7).
PROPERTIES = {
    "delta.enableDeletionVectors": "true",
    "delta.columnMapping.mode": "name",
    "delta.enableTypeWidening": "true",
    "delta.minReaderVersion": "3",
    "delta.minWriterVersion": "7",
}


class SparkDeltaSink(SparkTableSink):
    """Delta path tables under a root directory, written by Spark."""

    name = "delta"
    # Delta's type widening beyond the common ladder (Delta 4: integers to decimals, to
    # double; date to timestamp_ntz): BIGINT -> BIGINT UNSIGNED is bigint -> decimal(20,0).
    widens = frozenset(
        {
            ("bigint", "decimal(20,0)"),
            ("int", "decimal(20,0)"),
            ("int", "bigint"),
            ("date", "timestamp_ntz"),
            ("int", "double"),
        }
    )

    def __init__(
        self,
        spark: Any,
        root: str | Path,
        app_id: str = "ticdc-spark",
        storage: StorageOptions | None = None,
    ) -> None:
        super().__init__(spark, app_id, str(root), storage)
        # The embedded sink's layout, drops and renames (a directory rename on a disk; on an
        # object store an intent, then copies and deletes), table listing and existence,
        # shared: a table is in the same place either way.
        self.files = DeltaSink(root, app_id=app_id, storage=self.storage)
        self.root = self.files.root

    @classmethod
    def from_target(
        cls, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> SparkDeltaSink:
        raise NotImplementedError("the Spark engine's sinks are made by from_spark")

    @classmethod
    def from_spark(
        cls, spark: Any, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> SparkDeltaSink:
        """``delta:PATH`` applied through ``spark`` (PATH on ``s3://`` through S3A)."""
        return cls(spark, location, app_id=app_id, storage=storage)

    def configure(self, session: Any) -> None:
        """Settings of the sessions that merge (not the caller's own session).

        * The merge source is the step's rows, made once (a local relation, or later a
          changelog Spark has already computed): materializing it again, which Delta does by
          default to protect a MERGE from a source that changes between its two passes,
          costs a job per merge and protects nothing here.
        * Delta rebuilds a table's state after each commit with ``snapshotPartitions`` tasks
          (50 by default, sized for large clusters): the cluster's parallelism instead, up
          to 50.  On local[2] the two settings took a small merge from 30-40 s to 12-17 s
          under heavy load (benchmarks/apply_scale.py)."""
        parallelism = self.spark.sparkContext.defaultParallelism
        session.conf.set("spark.databricks.delta.merge.materializeSource", "none")
        session.conf.set(
            "spark.databricks.delta.snapshotPartitions", str(min(50, max(2, parallelism)))
        )

    def target(self, key: TableKey) -> str:
        return f"delta.{quote(str(self.files.path(key)))}"

    def table_properties(self) -> dict[str, str]:
        return dict(PROPERTIES)

    def exists(self, key: TableKey) -> bool:
        if key in self._open:
            return True
        if not self.files.exists(key):
            return False
        # (lists the invariants feature, else Delta on Spark refuses what delta-rs made; a
        # log that does not read is one line naming the table)
        self.files.open_table(key)
        return True

    @contextlib.contextmanager
    def versioned(self, key: TableKey, version: int) -> Iterator[None]:
        conf = self.session().conf
        conf.set(_APP_ID, self.app_id)
        conf.set(_VERSION, str(version))
        try:
            yield
        finally:
            conf.unset(_APP_ID)
            conf.unset(_VERSION)

    def read_version(self, key: TableKey) -> int:
        jvm = self.spark._jvm
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
            self.session()._jsparkSession, str(self.files.path(key))
        )
        snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
        found = snapshot.transactions().get(self.app_id)
        return int(found.get()) if found.isDefined() else -1

    def record_version(self, key: TableKey, version: int) -> None:
        session = self.session()
        empty = session.table(self._table(key)).limit(0)
        with self.versioned(key, version):
            empty.write.format("delta").mode("append").save(str(self.files.path(key)))
        self._committed(key, version)

    def add_column(self, key: TableKey, name: str, sql_type: str, default: Any) -> None:
        """Delta has no default for the rows a column finds (its column defaults apply to
        later writes only): the rows are given it by an UPDATE of the whole table, the one
        schema change here whose cost grows with the table."""
        table = self._table(key)
        if name not in self._current_types(key):
            self.sql(f"ALTER TABLE {table} ADD COLUMNS ({quote(name)} {sql_type})")
        if default is not None:
            value = sql_literal(default)
            self.sql(f"UPDATE {table} SET {quote(name)} = CAST({value} AS {sql_type})")

    def overwrite(self, key: TableKey, frame: Any) -> None:
        (
            frame.write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(str(self.files.path(key)))
        )

    def prepare(self, key: TableKey) -> None:
        """A table the embedded engine made: upgraded to this engine's features."""
        if not self.exists(key):
            return
        table = self.target(key)
        properties = {
            row["key"]: row["value"] for row in self.sql(f"SHOW TBLPROPERTIES {table}").collect()
        }
        missing = {k: v for k, v in PROPERTIES.items() if properties.get(k) != v}
        if missing and not _newer_protocol(properties, missing):
            pairs = ", ".join(f"'{k}' = '{v}'" for k, v in missing.items())
            self.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ({pairs})")

    def drop(self, key: TableKey) -> None:
        self._forget(key)
        self.files.drop(key)

    def rename(self, old: TableKey, new: TableKey) -> None:
        self._forget(old, new)
        self.files.rename(old, new)

    def tables(self) -> list[TableKey]:
        return self.files.tables()


def _newer_protocol(properties: dict[str, str], missing: dict[str, str]) -> bool:
    """Whether only the protocol versions differ, and the table's are already newer."""
    versions = ("delta.minReaderVersion", "delta.minWriterVersion")
    return set(missing) <= set(versions) and all(
        int(properties.get(k, "0")) >= int(PROPERTIES[k]) for k in missing
    )
