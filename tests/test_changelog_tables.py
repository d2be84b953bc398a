"""Changelog tables (``--changelog-tables``): beside each live table ``T`` an append-only
``T__changes`` of every change applied, with its op and commit ts, exactly once (its own step
version) whatever the replays and kills, following its table's DDLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changelog_script import Script
from restart_helpers import (
    assert_same_tables,
    run_harness,
    stream,
    target,
    write_batches,
)
from ticdc_spark.model import DDLType
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.failpoints import CRASH_EXIT_CODE
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import CHANGELOG_COMMENT

KINDS = ["delta", "iceberg"]


ENGINES = ["embedded", pytest.param("spark", marks=pytest.mark.spark)]


def _applier(kind: str, root: Path, engine: str = "embedded", spark: Any = None) -> Applier:
    store = StateStore(root / "checkpoint")
    sink = make_sink(target(kind, root), store.pipeline_id(), engine, spark)
    applier = Applier(sink, store, mode="eventual")
    applier.sink.changelog_tables = True
    return applier


def _engine_applier(kind: str, root: Path, engine: str, request: pytest.FixtureRequest) -> Applier:
    spark = request.getfixturevalue("spark") if engine == "spark" else None
    return _applier(kind, root, engine, spark)


def _changes(applier: Applier, table: str = "t") -> list[tuple[Any, ...]]:
    rows = applier.sink.read(("db", f"{table}__changes")).to_pylist()
    return sorted(
        (r["_commit_ts"], r["_op"], *(v for k, v in r.items() if k[0] != "_")) for r in rows
    )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_applied_change_lands_once_with_its_op(
    kind: str, engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    applier = _engine_applier(kind, tmp_path, engine, request)
    batches = [
        Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"}),
        Script().update(200, {"id": "1", "v": "a"}, {"id": "1", "v": "c"}),
        Script().delete(300, {"id": "2", "v": "b"}),
    ]
    for number, script in enumerate(batches):
        applier.apply(script.table(), number)
    expected = [
        (100, "insert", 1, "a"),
        (100, "insert", 2, "b"),
        (200, "update", 1, "c"),
        (300, "delete", 2, "b"),
    ]
    assert _changes(applier) == expected
    assert "_op" not in applier.sink.read(("db", "t")).column_names
    # the last batch again, its state lost (a replay): nothing appended twice
    (tmp_path / "checkpoint" / "ticdc" / "state-000000000002.json").unlink()
    report = applier.apply(batches[2].table(), 2)
    assert report.skipped_steps == 1 and _changes(applier) == expected


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_changelog_table_follows_its_tables_ddl(
    kind: str, engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """ADD COLUMN adds it, TRUNCATE deletes nothing of the history, RENAME TABLE moves it,
    DROP TABLE drops it; it is marked as a changelog table."""
    applier = _engine_applier(kind, tmp_path, engine, request)
    create = "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `v` varchar(10))"
    script = Script().ddl(50, create, DDLType.CREATE_TABLE).insert(100, {"id": "1", "v": "a"})
    script.ddl(150, "ALTER TABLE `db`.`t` ADD COLUMN `w` int", DDLType.ADD_COLUMN)
    wide = '{"columns": [["id", "int"], ["v", "varchar(10)"], ["w", "int"]], "pk": ["id"]}'
    script.insert(200, {"id": "2", "v": "b", "w": "7"}, schema=wide)
    script.ddl(250, "TRUNCATE TABLE `db`.`t`", DDLType.TRUNCATE_TABLE)
    applier.apply(script.table(), 0)
    assert _changes(applier) == [(100, "insert", 1, "a", None), (200, "insert", 2, "b", 7)]
    assert applier.sink.read(("db", "t")).num_rows == 0
    rename = Script().ddl(300, "RENAME TABLE `db`.`t` TO `db`.`u`", DDLType.RENAME_TABLE, "u")
    applier.apply(rename.table(), 1)
    assert applier.sink.tables() == [("db", "u"), ("db", "u__changes")]
    assert len(_changes(applier, "u")) == 2
    drop = Script().ddl(400, "DROP TABLE `db`.`u`", DDLType.DROP_TABLE, "u")
    applier.apply(drop.table(), 2)
    assert applier.sink.tables() == []


def test_changelog_tables_are_marked_as_such(tmp_path: Path) -> None:
    for kind in KINDS:
        applier = _applier(kind, tmp_path / kind)
        applier.apply(Script().insert(100, {"id": "1", "v": "a"}).table(), 0)
        sink: Any = applier.sink
        key = ("db", "t__changes")
        comment = (
            sink._table(key).metadata().description
            if kind == "delta"
            else sink._table(key).properties["comment"]
        )
        assert comment == f"{CHANGELOG_COMMENT}db.t"


def test_an_upstream_table_named_like_a_changelog_table_is_refused(tmp_path: Path) -> None:
    applier = _applier("delta", tmp_path)
    with pytest.raises(Exception, match="name of a changelog table"):
        applier.apply(Script().insert(100, {"id": "1", "v": "a"}, table="x__changes").table(), 0)


# In stream order (batch 0 creates both tables, 4 rewrites a, 6 renames b, 7 drops a)
KILLS = [
    "changes:0:1",
    "changes:1:2",
    "step:2:2",
    "rewrite",
    "changes:5:2",
    "rename",
    "drop",
    "changes:8:1",
    "state-saved:9",
]


@pytest.mark.parametrize("kind", KINDS)
def test_changelog_tables_are_exact_after_kills(kind: str, tmp_path: Path) -> None:
    """The kill-anywhere stream (rows held, a rewrite, a rename, a drop, a table created
    again) with changelog tables, killed between a merge and its changelog append and at the
    sinks' other points: every table, changelog tables included, equals an uninterrupted
    run's."""
    batches = tmp_path / "batches"
    write_batches(stream(), batches, 12)
    calm, killed = tmp_path / "calm", tmp_path / "killed"
    spec = target(kind, killed)
    assert run_harness(calm / "ck", target(kind, calm), batches, None, changelog_tables=True) == 0
    for point in KILLS:
        code = run_harness(killed / "ck", spec, batches, point, changelog_tables=True)
        assert code == CRASH_EXIT_CODE, f"{point} was never reached"
    assert run_harness(killed / "ck", spec, batches, None, changelog_tables=True) == 0
    calm_sink = make_sink(target(kind, calm))
    assert ("kill", "c__changes") in calm_sink.tables()
    assert_same_tables(make_sink(spec), calm_sink)
