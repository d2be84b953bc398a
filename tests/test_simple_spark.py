"""Simple through the Spark pipeline (``replicate``'s ``run``): a capture directory met
mid-stream in JSON (into Delta and into Iceberg), rows waiting across micro-batches for a
BOOTSTRAP on another partition; and a workload in Avro through the real Kafka broker,
verified against its generated state."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import simple_stream
from restart_helpers import target, write_capture_dir
from ticdc_spark.dispatch import TopicRouter
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import live
from ticdc_spark.spark.pipeline import PipelineConfig, run
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.verify import verify_sink
from ticdc_spark.testing.workload import Workload

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_capture_met_mid_stream(spark, tmp_path: Path, fmt: str) -> None:
    batches = simple_stream.batches("json")
    write_capture_dir([m for batch in batches for m in batch], tmp_path / "capture")
    config = PipelineConfig(
        engine="embedded",
        source=str(tmp_path / "capture"),
        protocol="simple",
        target=target(fmt, tmp_path),
        checkpoint=str(tmp_path / "checkpoint"),
        # micro-batches as in simple_stream: orders' rows wait a batch for their bootstrap
        source_options={"maxOffsetsPerTrigger": str(len(batches[0]))},
    )
    reports = []
    run(spark, config, on_batch=reports.append)
    assert reports[0].rows_applied == 0 and reports[0].held == 5
    sink = make_sink(config.target)
    orders = live(sink.read(("shop", "orders")))
    assert sorted(orders.to_pylist(), key=lambda r: r["id"]) == simple_stream.ORDERS
    assert orders.schema.field("amount").type == pa.decimal128(10, 2)
    users = live(sink.read(("shop", "users"))).to_pylist()
    assert sorted(users, key=lambda r: r["id"]) == simple_stream.USERS_ROWS


@pytest.mark.kafka
def test_avro_workload_through_kafka(spark, kafka_broker: str, tmp_path: Path) -> None:
    options = {"encoding-format": "avro", "send-bootstrap-in-msg-count": "50"}
    workload = Workload(seed=31, rows=400, tables=2, ddl_every=10, start_ms=int(time.time() * 1000))
    expression = f"s{uuid.uuid4().hex[:6]}_{{schema}}"
    router = TopicRouter(expression)
    topics = sorted({router.topic(s.database, s.table) for s in workload.table_schemas()})
    produce_workload(
        workload,
        "simple",
        options,
        f"kafka://{kafka_broker}",
        expected=tmp_path / "expected",
        topic=expression,
        partitions=3,
    )
    config = PipelineConfig(
        engine="embedded",
        source=f"kafka://{kafka_broker}/{','.join(topics)}",
        protocol="simple",
        target=f"delta:{tmp_path / 'lake'}",
        checkpoint=str(tmp_path / "checkpoint"),
        options=options,
        source_options={"maxOffsetsPerTrigger": "150"},
    )
    reports = []
    run(spark, config, on_batch=reports.append)
    assert len(reports) >= 2 and sum(r.ddl for r in reports) > 0
    verified = verify_sink(make_sink(config.target), tmp_path / "expected")
    assert verified and all(r.ok for r in verified), [r.summary() for r in verified]
