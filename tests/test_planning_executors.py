"""Planning on Spark's executors (issue 27: spark.planning) gives the tables planning on the
driver gives, over captures with DDL, key changes, deletes, replayed micro-batches,
micro-batches without rows, rows held for the watermark, guards and rows waiting for their
schema (Simple); no row of a micro-batch goes through the driver (its changes reach the sink
as PlannedChanges); a value its column cannot hold is a dead letter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from changelog_script import Script
from pipeline_helpers import changelog, interleave, produce
from test_engines_agree import PROTOCOLS, TOPICS, _tables, _target
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import WATERMARK
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.planning import PartsPlanning
from ticdc_spark.pipeline.steps import PlannedChanges, TableChanges
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.planning import PlannedLog, SparkRunner
from ticdc_spark.testing.workload import Workload

pytestmark = pytest.mark.spark

MODES = {"debezium": "eventual"}  # (eventual: guards kept across micro-batches)

# Each case costs Spark merges (CI time): rows held for the watermark (consistent mode),
# guards (eventual mode), rows waiting for their schema; tests/test_planning_parts.py plans
# all five protocols in both modes against one planner without Spark.
CASES = [("canal-json", "iceberg"), ("debezium", "delta"), ("simple", "iceberg")]


def _run(
    spark: Any, batches: list[Any], protocol: str, kind: str, root: Path, executors: bool
) -> Applier:
    options = PROTOCOLS[protocol]
    # (the driver's plan applied by the embedded engine: the engines agree,
    # test_engines_agree, and it costs a fraction of Spark's merges)
    engine = "spark" if executors else "embedded"
    sink = make_sink(_target(kind, root), "plan", engine, spark)
    store = StateStore(root / "ckpt")
    planning = (
        PartsPlanning(SparkRunner(spark, str(store.root), store.storage)) if executors else None
    )
    applier = Applier(
        sink,
        store,
        mode=MODES.get(protocol, "consistent"),
        capabilities=Capabilities.of(protocol, options),
        planning=planning,
    )
    log = PlannedLog(spark, store)
    for number, batch in enumerate(batches):
        table = changelog(batch, protocol, options)
        if executors:
            log.write(number, spark.createDataFrame(table))
            applier.apply(log.read(number), number)
            log.prune(store.oldest())  # (as replicate does: the parts' outputs still named kept)
        else:
            applier.apply(table, number)
    return applier


def _watermarks(messages: list[Any], protocol: str) -> list[Any]:
    """The watermark messages of a stream (a micro-batch of them has no rows)."""
    options = PROTOCOLS[protocol]
    return [
        m for m in messages if changelog([m], protocol, options)["kind"].to_pylist() == [WATERMARK]
    ]


@pytest.mark.parametrize(("protocol", "kind"), CASES)
def test_executors_plan_the_tables_the_driver_plans(
    spark: Any, tmp_path: Path, protocol: str, kind: str
) -> None:
    options = PROTOCOLS[protocol]
    workload = Workload(seed=37, rows=150, tables=3, watermark_every=6, ddl_every=45)
    messages = produce(workload, protocol, options, topic=TOPICS.get(protocol, "cdc_{schema}"))
    batches = list(interleave(messages, seed=3, chunk=max(20, len(messages) // 3)))
    idle = _watermarks(messages, protocol)[:4]  # (no rows: Avro has no watermarks)
    # a micro-batch delivered again; micro-batches without rows in between
    batches = [*batches[:2], batches[0], idle, idle, *batches[2:], idle]
    tables = {}
    for where in ("driver", "executors"):
        root = tmp_path / where
        _run(spark, batches, protocol, kind, root, where == "executors")
        engine = "spark" if where == "executors" else "embedded"
        tables[where] = _tables(make_sink(_target(kind, root), "plan", engine, spark))
    assert tables["executors"] == tables["driver"]
    assert tables["driver"] and all(tables["driver"].values())  # (something to compare)


def test_no_row_of_the_batch_reaches_the_driver(spark: Any, tmp_path: Path) -> None:
    """The plan's row steps name rows left on the executors; the driver's plan holds none."""
    options = PROTOCOLS["canal-json"]
    messages = produce(Workload(seed=5, rows=60, tables=2), "canal-json", options)
    seen: list[Any] = []
    store = StateStore(tmp_path / "ckpt")
    runner = SparkRunner(spark, str(store.root), store.storage)
    planning = PartsPlanning(runner)
    original = planning.plan

    def plan(*args: Any) -> Any:
        found = original(*args)
        seen.extend(found[0].steps)
        return found

    planning.plan = plan  # type: ignore[method-assign]
    sink = make_sink(_target("delta", tmp_path), "plan", "spark", spark)
    applier = Applier(
        sink,
        store,
        mode="eventual",
        capabilities=Capabilities.of("canal-json", options),
        planning=planning,
        track_commits=True,  # (latency measurements read the commit ts back)
    )
    log = PlannedLog(spark, store)
    log.write(0, spark.createDataFrame(changelog(messages, "canal-json", options)))
    report = applier.apply(log.read(0), 0)
    rows = [s for s in seen if isinstance(s, (PlannedChanges, TableChanges))]
    assert rows and all(isinstance(s, PlannedChanges) for s in rows)
    assert report.rows_applied == sum(s.count for s in rows if isinstance(s, PlannedChanges))
    assert sum(len(c) for c in report.commit_ts) == report.rows_applied


def test_a_value_that_does_not_convert_is_a_dead_letter(spark: Any, tmp_path: Path) -> None:
    """Screened where it is planned: the change with a value its column cannot hold is a dead
    letter naming it, the others are applied."""
    script = Script().insert(100, {"id": "1", "v": "fits"}).insert(101, {"id": "2", "v": "x" * 11})
    script.insert(102, {"id": "x3", "v": "bad key"}).watermark(200, 0)
    store = StateStore(tmp_path / "ckpt")
    sink = make_sink(_target("delta", tmp_path), "plan", "spark", spark)
    applier = Applier(
        sink,
        store,
        capabilities=Capabilities.of("canal-json", {}),
        planning=PartsPlanning(SparkRunner(spark, str(store.root), store.storage)),
    )
    log = PlannedLog(spark, store)
    log.write(0, spark.createDataFrame(script.table()))
    report = applier.apply(log.read(0), 0)
    assert (report.rows_applied, report.dead_letters) == (2, 1)
    letters = (tmp_path / "ckpt").rglob("dead-letters-*.jsonl")
    assert "column 'id'" in "".join(f.read_text() for f in letters)
    assert sorted(r["id"] for r in _tables(sink)[("db", "t")]) == [1, 2]


def test_a_checkpoint_path_spark_would_read_as_a_pattern_is_refused(tmp_path: Path) -> None:
    from ticdc_spark.errors import ConfigError
    from ticdc_spark.spark.pipeline import PipelineConfig, _planning

    checkpoint = tmp_path / "run[1]"
    config = PipelineConfig(
        "capture", "canal-json", "delta:lake", str(checkpoint), planner="executors"
    )
    with pytest.raises(ConfigError, match=r"without them"):
        _planning(None, config, StateStore(checkpoint))
    config.planner = "driver"
    assert _planning(None, config, StateStore(checkpoint)) is None
