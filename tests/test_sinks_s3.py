"""Delta tables and an Iceberg warehouse on a real S3 server (SeaweedFS), through the embedded
sinks: create, merge, DDL, rename and drop, names that need escaping, and Delta's renames and
drops (no rename on S3) finished after a kill at any of their steps."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from test_apply_edge_cases import Script
from ticdc_spark.model import DDLType
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.failpoints import CRASH_EXIT_CODE
from ticdc_spark.sinks.base import live
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.sinks.delta_objects import PENDING
from ticdc_spark.sinks.iceberg import IcebergSink
from ticdc_spark.storage import StorageOptions, open_store

RENAME = "RENAME TABLE `db`.`t` TO `db2`.`t2`"
CREATE = "CREATE TABLE `db`.`t` (`id` int PRIMARY KEY, `v` varchar(10))"


def _sink(kind: str, s3_root: str, options: StorageOptions, tmp_path: Path) -> Any:
    if kind == "delta":
        return DeltaSink(f"{s3_root}/lake", storage=options)
    return IcebergSink(f"sqlite:///{tmp_path / 'catalog.db'}", f"{s3_root}/wh", storage=options)


def _rows(sink: Any, key: tuple[str, str]) -> list[dict[str, Any]]:
    return sorted(live(sink.read(key)).to_pylist(), key=str)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_tables_on_s3_merge_follow_ddl_rename_and_drop(
    kind: str, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    sink = _sink(kind, s3_root, s3_options, tmp_path)
    applier = Applier(sink, StateStore(tmp_path / "checkpoint"), mode="eventual")
    script = Script().ddl(50, CREATE, DDLType.CREATE_TABLE)
    script.insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"})
    script.insert(100, {"id": "9", "v": "z"}, table="gone")
    applier.apply(script.table(), 0)
    later = Script().update(200, {"id": "1", "v": "a"}, {"id": "1", "v": "c"})
    later.delete(200, {"id": "2", "v": "b"})
    later.ddl(300, "ALTER TABLE `db`.`t` RENAME COLUMN `v` TO `w`", DDLType.MODIFY_COLUMN)
    later.ddl(400, RENAME, DDLType.RENAME_TABLE, table="t2")
    later.ddl(500, "DROP TABLE `db`.`gone`", DDLType.DROP_TABLE, table="gone")
    applier.apply(later.table(), 1)

    fresh = _sink(kind, s3_root, s3_options, tmp_path)  # what a restarted job finds
    assert fresh.tables() == [("db2", "t2")]
    assert _rows(fresh, ("db2", "t2")) == [{"id": 1, "w": "c"}]
    objects = open_store(s3_root, s3_options).list_keys()
    assert any(k.endswith(".parquet") for k in objects)  # the data is in the bucket
    if kind == "delta":
        assert all(k.startswith("lake/db2/t2/") for k in objects), objects  # nothing left behind


def test_delta_table_names_that_need_escaping_round_trip_on_s3(
    s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    """delta-rs decodes %XX in a table's URL (twice): names are escaped with ~XX there."""
    sink = DeltaSink(f"{s3_root}/lake", storage=s3_options)
    applier = Applier(sink, StateStore(tmp_path / "checkpoint"), mode="eventual")
    names = ["a b", "50%", "x~7E", "表", "_ticdc~pending"]
    script = Script()
    for name in names:
        script.insert(100, {"id": "1", "v": name}, table=name)
    applier.apply(script.table(), 0)
    fresh = DeltaSink(f"{s3_root}/lake", storage=s3_options)
    assert fresh.tables() == sorted(("db", n) for n in names)
    assert [_rows(fresh, ("db", n))[0]["v"] for n in names] == names


_APPLY = textwrap.dedent(
    """
    import sys, orjson, pyarrow as pa
    from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import StateStore
    from ticdc_spark.sinks.delta import DeltaSink
    from ticdc_spark.storage import StorageOptions
    root, values, checkpoint, batch = sys.argv[1:5]
    changelog = pa.ipc.open_file(sys.stdin.buffer.read()).read_all()
    sink = DeltaSink(root, storage=StorageOptions(orjson.loads(values)))
    Applier(sink, StateStore(checkpoint), mode="eventual").apply(changelog, int(batch))
    """
)


def _apply_in_a_process(
    changelog: Any, root: str, options: StorageOptions, checkpoint: Path, crash_at: str = ""
) -> int:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, changelog.schema) as out:
        out.write_table(changelog)
    values = orjson.dumps(dict(options.values)).decode()
    env = {**os.environ, "TICDC_SPARK_CRASH_AT": crash_at} if crash_at else None
    done = subprocess.run(
        [sys.executable, "-c", _APPLY, root, values, str(checkpoint), "0"],
        input=sink.getvalue().to_pybytes(),
        env=env,
        check=False,
    )
    return done.returncode


@pytest.mark.parametrize("point", ["rename", "drop", "drop-deleting", "drop-deleting:0:2"])
def test_a_delta_rename_or_drop_on_s3_killed_midway_is_finished_by_the_next_sink(
    point: str, s3_root: str, s3_options: StorageOptions, tmp_path: Path
) -> None:
    """``drop-deleting`` is reached by the drop and, second, by the rename deleting its
    source after the copy."""
    script = Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"})
    script.insert(100, {"id": "9", "v": "z"}, table="gone")
    script.ddl(200, "DROP TABLE `db`.`gone`", DDLType.DROP_TABLE, table="gone")
    script.ddl(300, RENAME, DDLType.RENAME_TABLE, table="t2")
    root, changelog = f"{s3_root}/lake", script.table()  # (table() takes the rows out)
    crashed = _apply_in_a_process(changelog, root, s3_options, tmp_path / "ck", point)
    assert crashed == CRASH_EXIT_CODE
    assert open_store(root, s3_options).list_keys(PENDING + "/")  # an intent was left
    assert _apply_in_a_process(changelog, root, s3_options, tmp_path / "ck") == 0
    sink = DeltaSink(root, storage=s3_options)
    assert sink.tables() == [("db2", "t2")]
    assert _rows(sink, ("db2", "t2")) == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert all(k.startswith("db2/t2/") for k in open_store(root, s3_options).list_keys())
