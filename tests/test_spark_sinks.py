"""The Spark-native sinks (Delta MERGE with deletion vectors, Iceberg merge-on-read): the
workloads land exactly as with the embedded sinks, tables are live (no tombstones), steps are
applied once, and schema changes are made in place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline_helpers import assert_matches, interleave, produce, run_batches
from ticdc_spark.model import Column, DDLType, Index, TableSchema
from ticdc_spark.pipeline.steps import DDLStep, TableChanges
from ticdc_spark.sinks.spark import SparkDeltaSink, SparkIcebergSink, SparkTableSink
from ticdc_spark.sinks.spark.sql import merge_sql, schema_change
from ticdc_spark.testing.workload import Workload
from ticdc_spark.types import ColumnType as T

pytestmark = pytest.mark.spark

Factory = Callable[[Path], SparkTableSink]


def _delta(spark: Any) -> Factory:
    return lambda root: SparkDeltaSink(spark, root / "lake", app_id="test-app")


def _iceberg(spark: Any) -> Factory:
    def make(root: Path) -> SparkTableSink:
        root.mkdir(parents=True, exist_ok=True)
        return SparkIcebergSink(
            spark, f"sqlite:///{root}/catalog.db", f"file://{root}/warehouse", app_id="test-app"
        )

    return make


def _iceberg_in_two(spark: Any) -> Factory:
    """Iceberg with every step merged in two commits (the path of tables of a million rows
    and more: SparkTableSink._merge_in_two)."""

    def make(root: Path) -> SparkTableSink:
        sink = _iceberg(spark)(root)
        sink.split_merge_rows = 1  # type: ignore[attr-defined]
        return sink

    return make


@pytest.fixture(params=["delta", "iceberg", "iceberg-in-two"])
def make_sink(request: pytest.FixtureRequest, spark: Any) -> Factory:
    return {"delta": _delta, "iceberg": _iceberg, "iceberg-in-two": _iceberg_in_two}[request.param](
        spark
    )


KEY = (Index("PRIMARY", ("id",), primary=True, unique=True),)
TABLE = TableSchema(
    "db", "t", (Column("id", T("int"), nullable=False), Column("v", T("varchar", length=20))), KEY
).with_derived_flags()


def _step(schema: TableSchema, *changes: tuple[str, int, dict[str, str]]) -> TableChanges:
    """Final changes (op, commit ts, image as text) of one table."""
    n = len(changes)
    rows = pa.table(
        {
            "op": pa.array([c[0] for c in changes], pa.string()),
            "commit_ts": pa.array([c[1] for c in changes], pa.int64()),
            "image": pa.array(
                [list(c[2].items()) for c in changes], pa.map_(pa.string(), pa.string())
            ),
            "key_only": pa.array([False] * n),
            "topic": pa.array(["t"] * n),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(list(range(n)), pa.int64()),
            "seq": pa.array([0] * n, pa.int32()),
        }
    )
    return TableChanges(schema.database, schema.table, schema, rows)


def _rows(sink: SparkTableSink, key: tuple[str, str] = ("db", "t")) -> list[dict[str, Any]]:
    return sorted(sink.read(key).to_pylist(), key=lambda r: str(r.get("id")))


def test_a_live_table_deletes_and_only_newer_changes_apply(
    make_sink: Factory, tmp_path: Path
) -> None:
    sink = make_sink(tmp_path)
    sink.apply_rows(
        _step(TABLE, ("insert", 10, {"id": "1", "v": "a"}), ("insert", 10, {"id": "2", "v": "b"})),
        1,
    )
    older = ("update", 5, {"id": "2", "v": "older"})  # older than the row: ignored
    sink.apply_rows(_step(TABLE, ("update", 20, {"id": "1", "v": "a2"}), older), 2)
    # not newer: the DELETE half of an update TiCDC split in two, whose INSERT applied
    sink.apply_rows(_step(TABLE, ("delete", 10, {"id": "2", "v": "b"})), 3)
    assert _rows(sink) == [
        {"id": 1, "v": "a2", "_commit_ts": 20},
        {"id": 2, "v": "b", "_commit_ts": 10},
    ]
    sink.apply_rows(_step(TABLE, ("delete", 30, {"id": "1", "v": "a2"})), 4)
    assert [r["id"] for r in _rows(sink)] == [2]  # deleted: gone, no tombstone row
    assert "_op" not in sink.read(("db", "t")).column_names
    sink.apply_rows(_step(TABLE, ("insert", 40, {"id": "1", "v": "back"})), 5)
    assert [(r["id"], r["v"]) for r in _rows(sink)] == [(1, "back"), (2, "b")]


def test_a_step_whose_version_the_table_holds_is_skipped(
    make_sink: Factory, tmp_path: Path
) -> None:
    sink = make_sink(tmp_path)
    sink.apply_rows(_step(TABLE, ("insert", 10, {"id": "1", "v": "a"})), 7)
    again = sink.apply_rows(_step(TABLE, ("insert", 99, {"id": "1", "v": "replayed"})), 7)
    assert again.skipped
    fresh = make_sink(tmp_path)  # (a restart: the version is read from the table)
    assert fresh.applied_version(("db", "t")) == 7
    assert fresh.apply_rows(_step(TABLE, ("update", 99, {"id": "1", "v": "x"})), 6).skipped
    assert [r["v"] for r in _rows(fresh)] == ["a"]


def _alter(
    schema: TableSchema, after: TableSchema, renamed: dict[str, str] | None = None
) -> DDLStep:
    return DDLStep(
        schema.database,
        schema.table,
        50,
        "ALTER TABLE ...",
        DDLType.MODIFY_COLUMN,
        schema,
        after,
        renamed_columns=renamed or {},
    )


def test_schema_changes_are_made_in_place_and_replay_finds_them_done(
    make_sink: Factory, tmp_path: Path
) -> None:
    wide = TableSchema(
        "db",
        "t",
        (
            Column("id", T("int"), nullable=False),
            Column("v", T("varchar", length=20)),
            Column("n", T("int")),
        ),
        KEY,
    ).with_derived_flags()
    sink = make_sink(tmp_path)
    sink.apply_rows(_step(wide, ("insert", 10, {"id": "1", "v": "a", "n": "7"})), 1)
    after = TableSchema(
        "db",
        "t",
        (
            Column("id", T("int"), nullable=False),
            Column("w", T("varchar", length=20)),  # v renamed
            Column("n", T("bigint")),  # widened
            Column("d", T("int"), default="5"),  # added, existing rows hold 5
        ),
        KEY,
    ).with_derived_flags()
    step = _alter(wide, after, {"w": "v"})
    sink.apply_ddl(step, 2)
    assert _rows(sink) == [{"id": 1, "w": "a", "n": 7, "d": 5, "_commit_ts": 10}]
    assert sink.applied_version(("db", "t")) == 2
    # a kill after the change but before its version: the replay finds nothing left to do
    restarted = make_sink(tmp_path)
    restarted._versions[("db", "t")] = 1
    restarted._follow_schema(after, 2, {"w": "v"})
    assert _rows(restarted) == [{"id": 1, "w": "a", "n": 7, "d": 5, "_commit_ts": 10}]
    dropped = TableSchema("db", "t", (after.columns[0], after.columns[2]), KEY).with_derived_flags()
    sink.apply_ddl(_alter(after, dropped), 3)
    assert _rows(sink) == [{"id": 1, "n": 7, "_commit_ts": 10}]


def test_truncate_rename_and_drop(make_sink: Factory, tmp_path: Path) -> None:
    sink = make_sink(tmp_path)
    sink.apply_rows(
        _step(TABLE, ("insert", 10, {"id": "1", "v": "a"}), ("insert", 30, {"id": "2", "v": "b"})),
        1,
    )
    truncate = DDLStep("db", "t", 20, "TRUNCATE TABLE t", DDLType.TRUNCATE_TABLE, TABLE, TABLE)
    sink.apply_ddl(truncate, 2)
    assert [r["id"] for r in _rows(sink)] == [2]
    rename = DDLStep(
        "db",
        "t",
        40,
        "RENAME TABLE t TO u",
        DDLType.RENAME_TABLE,
        TABLE,
        None,
        renamed_to=("db2", "u"),
    )
    sink.apply_ddl(rename, 3)
    assert not sink.exists(("db", "t")) and [r["id"] for r in _rows(sink, ("db2", "u"))] == [2]
    drop = DDLStep(
        "db2", "u", 50, "DROP TABLE u", DDLType.DROP_TABLE, None, None, dropped=(("db2", "u"),)
    )
    sink.apply_ddl(drop, 4)
    assert not sink.exists(("db2", "u")) and sink.tables() == []


@pytest.mark.parametrize(
    ("protocol", "options"),
    [("canal-json", {"enable-tidb-extension": "true"}), ("open-protocol", {})],
)
def test_workloads_land_exactly(
    make_sink: Factory, tmp_path: Path, protocol: str, options: dict[str, str]
) -> None:
    workload = Workload(seed=21, rows=300, tables=2, watermark_every=5, ddl_every=40)
    messages = produce(workload, protocol, options)
    sink = make_sink(tmp_path)
    run_batches(
        list(interleave(messages, seed=4, chunk=60)), protocol, options, sink, tmp_path / "ckpt"
    )
    assert_matches(workload, sink)


def test_a_replay_after_the_first_of_two_commits_gives_the_step_s_table(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large Iceberg table's step is merged, then its new keys inserted: cut between the
    two commits, the replay changes nothing twice and records the step's version."""
    import ticdc_spark.sinks.spark.base as spark_base

    make = _iceberg_in_two(spark)
    sink = make(tmp_path)
    rows = [("insert", 10, {"id": str(i), "v": f"v{i}"}) for i in (1, 2, 3)]
    sink.apply_rows(_step(TABLE, *rows), 1)
    step = _step(
        TABLE,
        ("update", 20, {"id": "1", "v": "new"}),
        ("delete", 20, {"id": "2", "v": "v2"}),
        ("update", 5, {"id": "3", "v": "older"}),  # older than the row: ignored
        ("insert", 20, {"id": "4", "v": "v4"}),
        ("delete", 20, {"id": "5", "v": "never there"}),
    )

    def cut(*args: Any) -> str:
        raise RuntimeError("killed between the two commits")

    monkeypatch.setattr(spark_base, "insert_sql", cut)
    with pytest.raises(RuntimeError):
        sink.apply_rows(step, 2)
    assert [(r["id"], r["v"]) for r in _rows(sink)] == [(1, "new"), (3, "v3")]
    monkeypatch.undo()
    restarted = make(tmp_path)
    assert restarted.applied_version(("db", "t")) == 1
    assert not restarted.apply_rows(step, 2).skipped
    expected = [(1, "new", 20), (3, "v3", 10), (4, "v4", 20)]
    assert [(r["id"], r["v"], r["_commit_ts"]) for r in _rows(restarted)] == expected
    # only updates: two commits still (the second inserts nothing), the second records it
    snapshots = f"SELECT count(*) FROM {restarted.target(('db', 't'))}.snapshots"
    before = restarted.sql(snapshots).collect()[0][0]
    restarted.apply_rows(_step(TABLE, ("update", 30, {"id": "4", "v": "v4b"})), 3)
    assert restarted.sql(snapshots).collect()[0][0] == before + 2
    assert make(tmp_path).applied_version(("db", "t")) == 3


@pytest.mark.parametrize(
    "target", ["delta:lake", "iceberg:sqlite:///catalog.db#warehouse"], ids=["delta", "iceberg"]
)
def test_relative_locations_are_the_working_directory_s(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    """``--target delta:lake`` (Delta on Spark reads a relative delta.`PATH` as a table of a
    schema ``delta``) and a relative SQLite catalog and warehouse (the JDBC catalog took
    ``sqlite:///catalog.db`` for ``/catalog.db``) are under the working directory."""
    from ticdc_spark.sinks import make_sink

    monkeypatch.chdir(tmp_path)
    sink = make_sink(target, "test-app", "spark", spark)
    assert isinstance(sink, SparkTableSink)
    sink.apply_rows(_step(TABLE, ("insert", 10, {"id": "1", "v": "a"})), 1)
    assert [(r["id"], r["v"]) for r in _rows(sink)] == [(1, "a")]
    made = {p.relative_to(tmp_path).parts[0] for p in tmp_path.rglob("*.parquet")}
    assert made == {"lake" if target.startswith("delta") else "warehouse"}


# -- the SQL, without Spark -----------------------------------------------------------------


def test_the_merge_deletes_and_applies_only_newer_changes() -> None:
    sql = merge_sql("delta.`/t`", "s", ["id", "v"], ["id"], set())
    assert (
        "WHEN MATCHED AND s.`_op` = 'delete' AND s.`_commit_ts` > t.`_commit_ts` THEN DELETE" in sql
    )
    assert "ON t.`id` = s.`id`" in merge_sql("x", "s", ["id"], ["id"], set())
    assert "ON t.`id` <=> s.`id`" in merge_sql("x", "s", ["id"], ["id"], {"id"})


def test_schema_change_is_metadata_unless_a_type_does_not_widen() -> None:
    current = {"id": "int", "v": "string", "n": "int", "_commit_ts": "bigint"}
    target = {"id": "int", "w": "string", "n": "bigint", "d": "int"}
    change = schema_change(current, target, {"w": "v"}, {"d": 5})
    assert (change.renames, change.drops, change.adds, change.retypes, change.rewrite) == (
        [("v", "w")],
        [],
        [("d", "int", 5)],
        [("n", "bigint")],
        False,
    )
    assert schema_change(current, {**target, "v": "string"}, {}, {}).rewrite is False
    assert schema_change(current, {**target, "v": "int"}, {}, {}).rewrite  # string -> int
    assert schema_change({"id": "string"}, {"id": "int"}, {}, {}).rewrite
    done = {"id": "int", "w": "string", "n": "bigint", "d": "int", "_commit_ts": "bigint"}
    assert schema_change(done, target, {"w": "v"}, {"d": 5}).empty


def test_relative_sqlite_catalogs_and_warehouses_are_made_absolute() -> None:
    from ticdc_spark.sinks.iceberg import parse_iceberg_target
    from ticdc_spark.sinks.spark.iceberg import catalog_settings

    here = Path.cwd()
    uri = "spark.sql.catalog.ticdc.uri"
    assert catalog_settings("sqlite:///c.db", "/w")[uri] == f"jdbc:sqlite:{here / 'c.db'}"
    assert catalog_settings("sqlite:////tmp/c.db", "/w")[uri] == "jdbc:sqlite:/tmp/c.db"
    assert parse_iceberg_target("sqlite:///c.db#wh") == ("sqlite:///c.db", str(here / "wh"))
    for warehouse in ("/tmp/wh", "file:///tmp/wh", "s3://bucket/wh"):
        assert parse_iceberg_target(f"sqlite:///c.db#{warehouse}")[1] == warehouse


def test_defaults_are_written_as_typed_literals() -> None:
    import datetime as dt
    from decimal import Decimal

    from ticdc_spark.sinks.spark.sql import sql_literal

    assert sql_literal(5) == "5" and sql_literal(None) == "NULL"
    assert sql_literal(Decimal("1.50")) == "'1.50'"
    assert sql_literal("it's \\ x") == "'it\\'s \\\\ x'"
    assert sql_literal(b"\x00\xff") == "X'00ff'"
    assert sql_literal(dt.date(2020, 1, 2)) == "DATE '2020-01-02'"
    assert sql_literal(dt.datetime(2020, 1, 2, 3, 4, 5, 6)) == (
        "TIMESTAMP_NTZ '2020-01-02 03:04:05.000006'"
    )


def test_a_delta_table_the_embedded_engine_made_with_a_datetime_column_reads_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    """delta-rs leaves ``invariants`` out of the protocol a TIMESTAMP_NTZ column brings,
    which Delta on Spark refuses; the embedded sink lists it (and on an older table, the
    Spark sink does before opening it)."""
    from deltalake import DeltaTable

    from ticdc_spark.sinks.delta import DeltaSink

    schema = TableSchema(
        "db",
        "t",
        (Column("id", T("int"), nullable=False), Column("at", T("datetime", decimal=3))),
        KEY,
    ).with_derived_flags()
    sink = DeltaSink(tmp_path / "lake")
    sink.create(schema)
    path = str(sink.path(("db", "t")))
    assert "invariants" in (DeltaTable(path).protocol().writer_features or [])
    assert spark.read.format("delta").load(path).columns == ["id", "at", "_commit_ts"]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_tables_on_s3_taken_over_from_the_embedded_engine_then_truncated_renamed_and_dropped(
    kind: str, spark: Any, s3_root: str, s3_options: Any, tmp_path: Path
) -> None:
    """On S3 (SeaweedFS), configured only by the storage options ``make_sink`` is given
    (the shared session was started without S3A settings: the sink's sessions get them): a
    table the embedded engine made is found, its version read and its rows merged by Spark
    (the table's files, which pyiceberg placed, read through S3A), then truncated, renamed
    and dropped."""
    from ticdc_spark.sinks import make_sink
    from ticdc_spark.storage import open_store

    if kind == "delta":
        target = f"delta:{s3_root}/lake"
    else:
        target = f"iceberg:sqlite:///{tmp_path / 'catalog.db'}#{s3_root}/warehouse"
    embedded = make_sink(target, "test-app", "embedded", storage=s3_options)
    first = (("insert", 10, {"id": "1", "v": "a"}), ("insert", 10, {"id": "2", "v": "b"}))
    embedded.apply_rows(_step(TABLE, *first), 1)
    sink: Any = make_sink(target, "test-app", "spark", spark, s3_options)
    assert sink.tables() == [("db", "t")] and sink.applied_version(("db", "t")) == 1
    update, delete = ("update", 20, {"id": "1", "v": "a2"}), ("delete", 20, {"id": "2"})
    sink.apply_rows(_step(TABLE, update, delete, ("insert", 30, {"id": "3", "v": "c"})), 2)
    assert [(r["id"], r["v"]) for r in _rows(sink)] == [(1, "a2"), (3, "c")]
    truncate = DDLStep("db", "t", 25, "TRUNCATE TABLE t", DDLType.TRUNCATE_TABLE, TABLE, TABLE)
    sink.apply_ddl(truncate, 3)
    assert [r["id"] for r in _rows(sink)] == [3]
    rename = DDLStep(
        "db", "t", 40, "RENAME TABLE t TO u", DDLType.RENAME_TABLE, TABLE, None,
        renamed_to=("db2", "u"),
    )  # fmt: skip
    sink.apply_ddl(rename, 4)
    assert sink.tables() == [("db2", "u")] and [r["id"] for r in _rows(sink, ("db2", "u"))] == [3]
    restarted: Any = make_sink(target, "test-app", "spark", spark, s3_options)
    assert [r["id"] for r in _rows(restarted, ("db2", "u"))] == [3]
    drop = DDLStep("db2", "u", 50, "DROP TABLE u", DDLType.DROP_TABLE, None, None,
                   dropped=(("db2", "u"),))  # fmt: skip
    restarted.apply_ddl(drop, 5)
    assert restarted.tables() == []
    root = target.rpartition("#")[2].removeprefix("delta:")
    left = open_store(root, s3_options).list_keys()
    assert not [k for k in left if k.endswith(".parquet")], left  # (Spark deleted them too)
