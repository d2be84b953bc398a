"""Delta Lake tables through delta-rs (the ``deltalake`` package).

One table per upstream table at ``ROOT/<database>/<table>``.  Each change is committed with
a Delta *app transaction* (``txn`` action: the pipeline's id and the step's version), which
is how Delta writers make retried writes idempotent: a replayed step sees its version
already recorded and is skipped.

``ROOT`` is a local directory or an object store's URI (``s3://bucket/lake``, ``gs://``,
``abfss://``), configured by the standard environment and ``--storage-option``
(:class:`~ticdc_spark.storage.StorageOptions`).  delta-rs commits on object stores with a
conditional PUT (``If-None-Match: *``), so no locking provider is needed.

On a local disk every change is one Delta commit or one directory rename, so a kill at any
moment leaves each table whole: a rename moves the directory, and a drop first moves the
table into ``ROOT/_ticdc%trash`` (a name no table's directory has: ``%`` is quoted in those)
and then deletes it there; a sink opened later finishes deleting what the trash holds.

Object stores have no rename: there (:mod:`ticdc_spark.sinks.delta_objects`) a rename copies
the table's objects and a drop deletes them, each announced first by an *intent* object that
a sink opened after a crash carries out to the end before anything else.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from ticdc_spark.errors import SinkError
from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.steps import OP_DELETE, TableKey
from ticdc_spark.sinks.base import CHANGELOG_COMMENT, carried_columns
from ticdc_spark.sinks.convert import COMMIT_TS, OP, changelog_texts
from ticdc_spark.sinks.delta_objects import ObjectTables, table_prefix
from ticdc_spark.sinks.stored import StoredSink
from ticdc_spark.storage import StorageOptions, is_local, join, open_store
from ticdc_spark.storage.store import local_path

__all__ = ["DeltaSink", "list_invariants", "unreadable"]

# delta-rs allocates with its own jemalloc, which keeps freed pages for 10 s (dirty_decay_ms)
# before handing them back: across micro-batches the driver's resident memory then climbs with
# each merge's working set (benchmarks/memory_bench.py, docs/pipeline.md).  Decaying in 1 s
# (its background thread purges) returns them between batches.  Read once, when deltalake
# loads, so set before the first ``from deltalake``; a setting of the user's wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:1000,muzzy_decay_ms:0")

log = logging.getLogger(__name__)
TRASH = "_ticdc%trash"  # dropped tables being deleted (never a quoted database name)


class DeltaSink(StoredSink):
    """Delta tables under a local directory or an object store's prefix."""

    name = "delta"

    def __init__(
        self, root: str | Path, app_id: str = "ticdc-spark", storage: StorageOptions | None = None
    ) -> None:
        super().__init__()
        self.uri = str(root).rstrip("/") or "/"
        self.app_id = app_id
        self.local = is_local(self.uri)
        # (absolute: Delta on Spark takes delta.`PATH` for a path only when PATH is absolute,
        # and reads a relative one as a table `PATH` of a schema `delta`)
        self.root = Path(local_path(self.uri)).absolute() if self.local else None
        options = storage or StorageOptions.from_environment()
        self.location, self.secrets = self.uri, options.secrets()
        scheme = self.uri.partition(":")[0]
        self.storage_options = None if self.local else options.delta(scheme)
        self.objects = None if self.local else ObjectTables(open_store(self.uri, options))
        if self.objects is not None:
            self.objects.finish_pending()
        else:
            self._empty_trash()

    @classmethod
    def from_target(
        cls, location: str, app_id: str, storage: StorageOptions | None = None
    ) -> DeltaSink:
        """``delta:PATH``: the tables under ``PATH`` (a directory or an object store's URI)."""
        return cls(location, app_id=app_id, storage=storage)

    def path(self, key: TableKey) -> str:
        """Where the table of ``key`` is: a local path or a URI."""
        if self.root is not None:
            return str(self.root / _safe(key[0]) / _safe(key[1]))
        return join(self.uri, table_prefix(key))

    def _commit(self, version: int) -> Any:
        from deltalake import CommitProperties, Transaction

        return CommitProperties(app_transactions=[Transaction(self.app_id, version)])

    # -- hooks ----------------------------------------------------------------------------

    def open_table(self, key: TableKey) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        path = self.path(key)
        try:
            table = DeltaTable(path, storage_options=self.storage_options)
        except DeltaError as exc:
            raise SinkError(unreadable(path, exc)) from exc
        if list_invariants(table):  # (a table an earlier version made)
            table.update_incremental()
        return table

    def exists(self, key: TableKey) -> bool:
        from deltalake import DeltaTable

        return key in self._open or DeltaTable.is_deltatable(
            self.path(key), storage_options=self.storage_options
        )

    def create(self, schema: TableSchema) -> None:
        from deltalake import DeltaTable

        key = (schema.database, schema.table)
        self._forget(key)
        if self.root is not None:
            Path(self.path(key)).mkdir(parents=True, exist_ok=True)
        DeltaTable.create(
            self.path(key),
            self.stored_schema(schema),
            mode="ignore",
            name=schema.table,
            description=self.table_comment(schema),
            storage_options=self.storage_options,
        )
        self._table(key)  # (opened: its protocol completed, see list_invariants)

    def arrow_schema(self, key: TableKey) -> Any:
        import pyarrow as pa

        return pa.schema(self._table(key).schema())

    def applied_version(self, key: TableKey) -> int:
        if not self.exists(key):
            return -1
        found = self._table(key).transaction_version(self.app_id)
        return -1 if found is None else int(found)

    def merge(self, schema: TableSchema, rows: Any, version: int) -> dict[str, Any]:
        """A live merge: a delete deletes the row, an insert or update writes it, each only
        over an older row (``_commit_ts`` strictly lower; a row the table lacks is an older
        one for a change, nothing to do for a delete).  ``rows`` carry ``_op``, which the
        table does not keep."""
        keys = list(schema.handle_key) or list(schema.column_names)
        # (each term bracketed: delta-rs reads `a IS NOT DISTINCT FROM b AND c ...` wrongly)
        predicate = " AND ".join(f"(t.{_q(k)} IS NOT DISTINCT FROM s.{_q(k)})" for k in keys)
        merger = self._table((schema.database, schema.table)).merge(
            rows,
            predicate=predicate,
            source_alias="s",
            target_alias="t",
            commit_properties=self._commit(version),
        )
        ts, op = _q(COMMIT_TS), _q(OP)
        newer, deletes = f"(s.{ts} > t.{ts})", f"(s.{op} = '{OP_DELETE}')"
        result: dict[str, Any] = (
            merger.when_matched_delete(predicate=f"{newer} AND {deletes}")
            .when_matched_update_all(predicate=f"{newer} AND NOT {deletes}", except_cols=[OP])
            .when_not_matched_insert_all(predicate=f"NOT {deletes}", except_cols=[OP])
            .execute()
        )
        return result

    def add_columns(self, key: TableKey, fields: list[Any]) -> None:
        from deltalake import Field

        if fields:
            self._table(key).alter.add_columns([Field.from_arrow(f) for f in fields])

    def rewrite(self, schema: TableSchema, version: int, renamed: Mapping[str, str]) -> None:
        import pyarrow as pa
        from deltalake import write_deltalake

        key = (schema.database, schema.table)
        current = self._table(key).to_pyarrow_table()
        target = self.stored_schema(schema)
        columns = carried_columns(current, target, schema, renamed)
        self._forget(key)
        crash_point("rewrite")
        write_deltalake(
            self.path(key),
            pa.Table.from_arrays(columns, schema=target),
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=self._commit(version),
            storage_options=self.storage_options,
        )

    def delete_older(self, key: TableKey, commit_ts: int, version: int) -> None:
        self._table(key).delete(
            f"{_q(COMMIT_TS)} < {int(commit_ts)}", commit_properties=self._commit(version)
        )

    def drop(self, key: TableKey) -> None:
        """Move the table into the trash (one rename: it is whole or gone), then delete it
        (on an object store: announce the drop, then delete the table's objects)."""
        self._forget(key)
        if self.objects is not None:
            self.objects.drop(key)
            return
        assert self.root is not None
        trash = self.root / TRASH / uuid.uuid4().hex
        trash.parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.path(key), trash)
        crash_point("drop")
        _delete_table_files(trash)

    def _empty_trash(self) -> None:
        """Finish deleting the tables a killed run had dropped."""
        assert self.root is not None
        trash = self.root / TRASH
        for entry in sorted(trash.iterdir()) if trash.is_dir() else []:
            log.warning("finishing the drop of a table a stopped run began: deleting %s", entry)
            _delete_table_files(entry)

    def rename(self, old: TableKey, new: TableKey) -> None:
        self._forget(old, new)
        if self.objects is not None:
            self.objects.rename(old, new)
            return
        target = Path(self.path(new))
        target.parent.mkdir(parents=True, exist_ok=True)
        crash_point("rename")
        Path(self.path(old)).rename(target)

    def read(self, key: TableKey) -> Any:
        return self._table(key).to_pyarrow_table()

    def append(self, key: TableKey, rows: Any, version: int) -> None:
        from deltalake import write_deltalake

        stored = self.arrow_schema(key)
        write_deltalake(
            self._table(key),
            rows.select(stored.names).cast(stored),
            mode="append",
            commit_properties=self._commit(version),
        )

    def tombstones(self, key: TableKey) -> Any:
        import pyarrow.dataset as pds

        table = self._table(key)
        if OP not in self.arrow_schema(key).names:
            return None
        if (table.metadata().description or "").startswith(CHANGELOG_COMMENT):
            return None
        dead = table.to_pyarrow_dataset().to_table(filter=pds.field(OP) == OP_DELETE)
        return changelog_texts(dead.drop_columns([OP]))

    def drop_tombstones(self, key: TableKey) -> None:
        """One overwrite commit of the rows that are not tombstones, without ``_op`` (delta-rs
        cannot drop a column in place), streamed from the table's own files (which the
        commit removes, keeping them stored until a VACUUM); the app transaction, whose
        version it keeps, is the log's and is not part of the rewrite."""
        import pyarrow.dataset as pds
        from deltalake import write_deltalake

        table = self._table(key)
        stored = self.arrow_schema(key)
        kept = table.to_pyarrow_dataset().scanner(
            filter=pds.field(OP) != OP_DELETE,
            columns=[n for n in stored.names if n != OP],
        )
        self._forget(key)
        write_deltalake(table, kept.to_reader(), mode="overwrite", schema_mode="overwrite")

    def tables(self) -> list[TableKey]:
        from deltalake import DeltaTable

        if self.objects is not None:
            candidates = self.objects.candidates()
        else:
            assert self.root is not None
            candidates = [
                (_unsafe(database.name), _unsafe(table.name))
                for database in sorted(p for p in self.root.glob("*") if p.is_dir())
                if database.name != TRASH
                for table in sorted(p for p in database.glob("*") if p.is_dir())
            ]
        return [
            key
            for key in candidates
            if DeltaTable.is_deltatable(self.path(key), storage_options=self.storage_options)
        ]


def unreadable(path: str, exc: Exception) -> str:
    """One line: the table, the log file that does not parse (delta-rs names none: "Json
    error: Encountered unexpected '#'"), and delta-rs's own first line."""
    said = str(exc).strip().splitlines()
    reason = said[0] if said else type(exc).__name__
    bad = _unparsable_log_file(Path(path)) if is_local(path) else None
    where = f": its log file {bad.relative_to(path)} is not JSON" if bad else ""
    return f"the Delta table {path} cannot be read{where} (delta-rs: {reason})"


def _unparsable_log_file(path: Path) -> Path | None:
    """The newest commit file of a table's log with a line that is not JSON, if any (looked
    for only once the table failed to open)."""
    for log_file in sorted((path / "_delta_log").glob("*.json"), reverse=True):
        try:
            for line in log_file.read_bytes().splitlines():
                if line.strip():
                    orjson.loads(line)
        except (OSError, orjson.JSONDecodeError):
            return log_file
    return None


def _delete_table_files(path: Path) -> None:
    """Delete a table's directory, its log first (what is left is no table)."""
    shutil.rmtree(path / "_delta_log", ignore_errors=True)
    crash_point("drop-deleting")
    shutil.rmtree(path, ignore_errors=True)


def _q(name: str) -> str:
    """A quoted identifier for delta-rs predicates."""
    return '"' + name.replace('"', '""') + '"'


def _safe(name: str) -> str:
    return quote(name, safe="") or "_"


def _unsafe(name: str) -> str:
    from urllib.parse import unquote

    return unquote(name)


def list_invariants(table: Any) -> bool:
    """List the ``invariants`` writer feature in a table's protocol where its schema needs it
    (a NOT NULL column, ``_commit_ts``) and the protocol lists features: delta-rs 1.x leaves
    it out of the writer-7 protocol a TIMESTAMP_NTZ column brings (DATETIME upstream), and
    Delta on Spark then refuses the table (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).  One
    commit, once; whether one was made."""
    from deltalake import TableFeatures

    protocol = table.protocol()
    features = protocol.writer_features
    if protocol.min_writer_version < 7 or features is None or "invariants" in features:
        return False
    if all(field.nullable for field in table.schema().fields):
        return False
    table.alter.add_feature(TableFeatures.Invariants, allow_protocol_versions_increase=True)
    return True
