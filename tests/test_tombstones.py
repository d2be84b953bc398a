"""Tables an earlier version wrote with tombstones (``_op = 'delete'`` rows) are migrated once
at the start: their tombstones become guards, saved before anything is deleted, then the
tombstones are deleted and ``_op`` dropped; killed midway, the next start finishes it.

The old tables are built here the old way (the format libraries directly): two tables, rows
and tombstones, a step version recorded, the consumer state of the run that wrote them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from changelog_script import Script
from restart_helpers import run_harness, target
from ticdc_spark.model import Column, Index, TableSchema
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.tombstones import migrate_tombstones
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import TableSink, live
from ticdc_spark.types import ColumnType, parse_column_type

OLD_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32()),
        pa.field("at", pa.timestamp("us")),
        pa.field("v", pa.string()),
        pa.field("_commit_ts", pa.int64(), nullable=False),
        pa.field("_op", pa.string(), nullable=False),
    ]
)
# id 3 deleted at 200, id 4 deleted at 120; ids 1 and 2 live.  The key is (id, at): a
# DATETIME(3) key column, whose stored text must become the changelog's to match.
OLD_ROWS = [
    (1, "a", 100, "insert"),
    (2, "b", 150, "update"),
    (3, "c", 200, "delete"),
    (4, "d", 120, "delete"),
]
AT = "2024-05-06 07:08:09.120"
VERSION = 7_000_003  # the step version the old run recorded


def _schema(table: str) -> TableSchema:
    columns = (
        Column("id", ColumnType("int"), nullable=False),
        Column("at", parse_column_type("datetime(3)"), nullable=False),
        Column("v", ColumnType("varchar", length=10)),
    )
    key = (Index("PRIMARY", ("id", "at"), primary=True, unique=True),)
    return TableSchema("db", table, columns, key).with_derived_flags()


def _old_rows() -> pa.Table:
    import datetime as dt

    at = dt.datetime(2024, 5, 6, 7, 8, 9, 120_000)
    return pa.table(
        {
            "id": pa.array([r[0] for r in OLD_ROWS], pa.int32()),
            "at": pa.array([at] * len(OLD_ROWS), pa.timestamp("us")),
            "v": [r[1] for r in OLD_ROWS],
            "_commit_ts": [r[2] for r in OLD_ROWS],
            "_op": [r[3] for r in OLD_ROWS],
        },
        schema=OLD_SCHEMA,
    )


def _old_delta_table(sink: Any, table: str) -> None:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    path, options = sink.path(("db", table)), sink.storage_options
    if sink.root is not None:
        Path(path).mkdir(parents=True)
    DeltaTable.create(path, OLD_SCHEMA, description=f"TiDB db.{table}", storage_options=options)
    commit = CommitProperties(app_transactions=[Transaction(sink.app_id, VERSION)])
    write_deltalake(
        path, _old_rows(), mode="append", commit_properties=commit, storage_options=options
    )


def _old_iceberg_table(sink: Any, table: str) -> None:
    sink.catalog.create_namespace_if_not_exists("db")
    nullable = pa.schema([f.with_nullable(True) for f in OLD_SCHEMA])  # (as the sink made them)
    created = sink.catalog.create_table(("db", table), nullable)
    with created.transaction() as tx:
        tx.append(_old_rows().cast(created.schema().as_arrow()))
        tx.set_properties({"ticdc.version": str(VERSION)})


def _old_run(kind: str, root: Path, **state: Any) -> str:
    """Two tables written the old way, and the checkpoint of the run that wrote them: its
    consumer state after batch 7 and 6 (which a re-run of batch 7 would start from), batches
    0-7 committed (the harness's commit files, its prepared batches)."""
    spec = target(kind, root)
    store = StateStore(root / "checkpoint")
    commits = root / "checkpoint" / "spark" / "commits"
    commits.mkdir(parents=True)
    (root / "batches").mkdir()
    for batch in range(8):
        (commits / str(batch)).write_text("v1\n")
        _write_batch(root / "batches", batch, Script().table())
    sink = make_sink(spec, store.pipeline_id())
    for table in ("t", "u"):
        (_old_delta_table if kind == "delta" else _old_iceberg_table)(sink, table)
    tables = {("db", t): _schema(t) for t in ("t", "u")}
    for batch in (6, 7):
        store.save(batch, ConsumerState(tables=tables, applied_ts=200, **state))
    return spec


def _live_rows(sink: TableSink, table: str) -> dict[int, str]:
    stored = sink.read(("db", table))
    assert "_op" not in stored.column_names
    return {r["id"]: r["v"] for r in live(stored).to_pylist()}


def _late(ts: int, key: int, v: str) -> dict[str, Any]:
    return {"ts": ts, "image": {"id": str(key), "at": AT, "v": v}}


def _late_batch() -> pa.Table:
    """Late changes: older than id 3's tombstone (dropped), newer than id 4's (applied)."""
    script = Script()
    schema = '{"columns": [["id", "int"], ["at", "datetime(3)"], ["v", "varchar(10)"]], '
    schema += '"pk": ["id", "at"]}'
    for table in ("t", "u"):
        for change in (_late(150, 3, "late"), _late(130, 4, "new")):
            script.insert(change["ts"], change["image"], table=table, schema=schema)
    return script.table()


def _write_batch(directory: Path, number: int, table: pa.Table) -> None:
    path = directory / f"{number:06d}.arrow"
    with pa.OSFile(str(path), "wb") as raw, pa.ipc.new_file(raw, table.schema) as out:
        out.write_table(table)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
@pytest.mark.parametrize("kill", ["tombstones:*:1", "tombstones:*:2"])
def test_a_table_with_tombstones_is_migrated_once_even_killed_midway(
    kind: str, kill: str, tmp_path: Path
) -> None:
    spec = _old_run(kind, tmp_path)
    checkpoint, batches = tmp_path / "checkpoint", tmp_path / "batches"
    assert run_harness(checkpoint, spec, batches, kill, mode="eventual") == 86
    store = StateStore(checkpoint)
    assert store.read(7).guards.count() == (2 if kill.endswith(":1") else 4)
    sink = make_sink(spec, store.pipeline_id())
    assert ("_op" in sink.arrow_schema(("db", "t")).names) == kill.endswith(":1")
    assert run_harness(checkpoint, spec, batches, None, mode="eventual") == 0
    sink = make_sink(spec, store.pipeline_id())
    for table in ("t", "u"):
        assert _live_rows(sink, table) == {1: "a", 2: "b"}
        assert sink.applied_version(("db", table)) == VERSION
    for batch in (6, 7):  # (both: a re-run of batch 7 starts from batch 6's)
        assert store.read(batch).guards.count() == 4
    assert run_harness(checkpoint, spec, batches, None, mode="eventual") == 0  # (again: no-op)
    _write_batch(batches, 8, _late_batch())
    assert run_harness(checkpoint, spec, batches, None, mode="eventual") == 0
    sink = make_sink(spec, store.pipeline_id())
    for table in ("t", "u"):
        assert _live_rows(sink, table) == {1: "a", 2: "b", 4: "new"}


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_the_spark_engine_migrates_tables_the_embedded_engine_wrote_with_tombstones(
    kind: str, tmp_path: Path, spark: Any
) -> None:
    """A switch of engines on tables an earlier version wrote: the same migration, through
    Spark SQL (a DELETE, then DROP COLUMN _op), once; the step versions kept."""
    spec = _old_run(kind, tmp_path)
    store = StateStore(tmp_path / "checkpoint")
    sink = make_sink(spec, store.pipeline_id(), "spark", spark)
    applier = Applier(sink, store, mode="eventual", capabilities=Capabilities.of("canal-json"))
    assert sorted(migrate_tombstones(applier)) == [("db", "t"), ("db", "u")]
    assert migrate_tombstones(applier) == []  # (again: nothing left to migrate)
    for table in ("t", "u"):
        assert _live_rows(sink, table) == {1: "a", 2: "b"}
        assert sink.applied_version(("db", table)) == VERSION
    assert store.read(7).guards.count() == 4


def _applier(spec: str, root: Path, mode: str, **kw: Any) -> Applier:
    store = StateStore(root / "checkpoint")
    return Applier(make_sink(spec, store.pipeline_id()), store, mode=mode, **kw)


def test_tombstones_below_the_watermark_become_no_guards(tmp_path: Path) -> None:
    """Consistent mode: a tombstone at or below the global watermark needs no guard (an
    older change arriving later is a replay)."""
    spec = _old_run("delta", tmp_path, watermarks={"cdc/0": 150}, partitions={"cdc/0"})
    applier = _applier(spec, tmp_path, "consistent")
    assert migrate_tombstones(applier) == [("db", "t"), ("db", "u")]
    guards = applier.store.read(7).guards
    assert guards.count() == 2  # id 3's (200) of each table; id 4's (120) collected
    assert migrate_tombstones(applier) == []


def test_protocols_placed_by_position_drop_tombstones_without_guards(tmp_path: Path) -> None:
    spec = _old_run("iceberg", tmp_path)
    applier = _applier(spec, tmp_path, "eventual", capabilities=Capabilities(commit_ts=False))
    migrate_tombstones(applier)
    assert applier.store.read(7).guards.count() == 0
    assert _live_rows(applier.sink, "t") == {1: "a", 2: "b"}


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_changelog_tables_are_not_taken_for_tables_with_tombstones(
    kind: str, tmp_path: Path
) -> None:
    spec = target(kind, tmp_path)
    applier = _applier(spec, tmp_path, "eventual")
    applier.sink.changelog_tables = True
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).table(), 0)
    applier.apply(Script().delete(200, {"id": "1", "v": "a"}).table(), 1)
    assert migrate_tombstones(applier) == []
    changes = applier.sink.read(("db", "t__changes")).sort_by("_commit_ts")
    assert changes["_op"].to_pylist() == ["insert", "delete"]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_tables_on_s3_are_migrated_and_get_changelog_tables(
    kind: str, s3_root: str, s3_options: Any, tmp_path: Path
) -> None:
    """The same on an object store (SeaweedFS): the migration's rewrite, the changelog
    table's appends."""
    from ticdc_spark.sinks.delta import DeltaSink
    from ticdc_spark.sinks.iceberg import IcebergSink

    store = StateStore(tmp_path / "checkpoint")
    if kind == "delta":
        sink: Any = DeltaSink(f"{s3_root}/lake", store.pipeline_id(), storage=s3_options)
        _old_delta_table(sink, "t")
    else:
        sink = IcebergSink(f"sqlite:///{tmp_path / 'c.db'}", f"{s3_root}/wh", storage=s3_options)
        _old_iceberg_table(sink, "t")
    store.save(7, ConsumerState(tables={("db", "t"): _schema("t")}, applied_ts=200))
    applier = Applier(sink, store, mode="eventual")
    applier.sink.changelog_tables = True
    assert migrate_tombstones(applier) == [("db", "t")]
    assert applier.store.read(7).guards.count() == 2
    applier.apply(_late_batch(), 8)
    assert _live_rows(sink, "t") == {1: "a", 2: "b", 4: "new"}
    assert applier.sink.read(("db", "t__changes"))["id"].to_pylist() == [4]
    assert sink.applied_version(("db", "t")) == 8_000_000
