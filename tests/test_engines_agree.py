"""Both apply engines give identical live tables (issue 26): the embedded engine (delta-rs,
pyiceberg) and the spark engine (Spark SQL MERGE), over captures of all five protocols with
DDL, key changes, deletes, replayed micro-batches and (Simple) rows waiting for their schema,
on Delta and on Iceberg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline_helpers import interleave, produce, run_batches
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import TableSink, live
from ticdc_spark.testing.workload import Workload

pytestmark = pytest.mark.spark

PROTOCOLS = {
    "canal-json": {"enable-tidb-extension": "true"},
    "open-protocol": {},
    "debezium": {"enable-tidb-extension": "true"},
    "simple": {"send-bootstrap-in-msg-count": "40"},
    "avro": {"schema-registry": "mock://engines-agree", "enable-tidb-extension": "true"},
}
MODES = {"avro": "eventual"}  # (no watermarks: see docs/pipeline.md)
TOPICS = {"avro": "cdc_{schema}_{table}"}  # (Avro's subjects: one topic per table)


def _target(kind: str, root: Path) -> str:
    if kind == "delta":
        return f"delta:{root / 'lake'}"
    root.mkdir(parents=True, exist_ok=True)
    return f"iceberg:sqlite:///{root / 'catalog.db'}#file://{root / 'warehouse'}"


def _tables(sink: TableSink) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each table's live rows, sorted (the engines may store them in any order)."""
    return {
        key: sorted(live(sink.read(key)).to_pylist(), key=repr) for key in sorted(sink.tables())
    }


# Every protocol, each format several times (each case costs both engines' runs: CI time).
CASES = [
    ("avro", "delta"),
    ("canal-json", "delta"),
    ("canal-json", "iceberg"),
    ("debezium", "iceberg"),
    ("open-protocol", "delta"),
    ("simple", "iceberg"),
]


@pytest.mark.parametrize(("protocol", "kind"), CASES)
def test_both_engines_give_the_same_live_tables(
    spark: Any, tmp_path: Path, protocol: str, kind: str
) -> None:
    options = PROTOCOLS[protocol]
    workload = Workload(seed=31, rows=160, tables=2, watermark_every=6, ddl_every=50)
    messages = produce(workload, protocol, options, topic=TOPICS.get(protocol, "cdc_{schema}"))
    batches = list(interleave(messages, seed=5, chunk=max(20, len(messages) // 4)))
    batches = [*batches[:2], batches[0], *batches[2:]]  # (a micro-batch delivered again)
    mode = MODES.get(protocol, "consistent")
    tables = {}
    for engine in ("embedded", "spark"):
        root = tmp_path / engine
        sink = make_sink(_target(kind, root), "agree", engine, spark)
        run_batches(batches, protocol, options, sink, root / "ckpt", mode=mode)
        tables[engine] = _tables(make_sink(_target(kind, root), "agree", engine, spark))
    assert tables["spark"] == tables["embedded"]
    assert tables["spark"] and all(tables["spark"].values())  # (something to compare)
