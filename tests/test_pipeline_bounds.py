"""``replicate`` bounds each micro-batch by default (the driver collects each one to apply
it), with Spark's option names to override; ``--trigger once`` still applies everything,
across bounded micro-batches, and consistent mode still ends at the generated state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ticdc_spark.errors import ConfigError
from ticdc_spark.spark import sources
from ticdc_spark.spark.sources import (
    DEFAULT_CHANGES_PER_BATCH,
    DEFAULT_MAX_BYTES_PER_TRIGGER,
    bounded_source_options,
)

KAFKA = "kafka://127.0.0.1:9092/cdc_test"


def test_replicate_bounds_a_micro_batch_by_default() -> None:
    assert bounded_source_options(KAFKA, "canal-json", {}) == {
        "maxOffsetsPerTrigger": str(DEFAULT_CHANGES_PER_BATCH)
    }
    # an Open Protocol record carries up to 16 changes (TiCDC's default max-batch-size)
    assert bounded_source_options(KAFKA, "open-protocol", {}) == {
        "maxOffsetsPerTrigger": str(DEFAULT_CHANGES_PER_BATCH // 16)
    }
    assert bounded_source_options("/tmp/capture", "canal-json", {"onBadRecord": "skip"}) == {
        "onBadRecord": "skip",
        "maxOffsetsPerTrigger": str(DEFAULT_CHANGES_PER_BATCH),
        "maxBytesPerTrigger": str(DEFAULT_MAX_BYTES_PER_TRIGGER),
    }


def test_the_source_options_override_the_default_bounds() -> None:
    assert bounded_source_options(KAFKA, "canal-json", {"maxoffsetspertrigger": "7"}) == {
        "maxoffsetspertrigger": "7"
    }
    assert bounded_source_options(
        "/tmp/capture", "canal-json", {"MaxBytesPerTrigger": "9", "maxOffsetsPerTrigger": "8"}
    ) == {"MaxBytesPerTrigger": "9", "maxOffsetsPerTrigger": "8"}
    # a minimum above the default maximum raises the maximum (Spark refuses min > max)
    options = bounded_source_options(KAFKA, "canal-json", {"minOffsetsPerTrigger": "500000"})
    assert options["maxOffsetsPerTrigger"] == "500000"


def test_the_kafka_source_refuses_a_byte_bound_it_cannot_keep() -> None:
    pytest.importorskip("pyspark")
    from ticdc_spark.spark.kafka.options import SourceConfig

    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        SourceConfig.parse(
            {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "maxBytesPerTrigger": "1m"}
        )


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_trigger_once_applies_a_backlog_in_bounded_micro_batches(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Before: a capture backlog became one micro-batch whatever its size."""
    from ticdc_spark.sinks import make_sink
    from ticdc_spark.spark.pipeline import PipelineConfig, run
    from ticdc_spark.testing.produce import produce_workload
    from ticdc_spark.testing.verify import verify_sink
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    workload = Workload(seed=5, rows=600, tables=2, ddl_every=12, watermark_every=6)
    result = produce_workload(
        workload, "canal-json", options, str(tmp_path / "capture"), expected=tmp_path / "exp"
    )
    monkeypatch.setattr(sources, "DEFAULT_CHANGES_PER_BATCH", 150)
    target = f"delta:{tmp_path / 'lake'}"
    config = PipelineConfig(
        engine="embedded",
        source=str(tmp_path / "capture"),
        protocol="canal-json",
        target=target,
        checkpoint=str(tmp_path / "checkpoint"),
        mode=mode,
        options=options,
    )
    reports: list[Any] = []
    run(spark, config, on_batch=reports.append)
    assert len(reports) >= result.messages // 150
    assert max(r.rows_in for r in reports) <= 150
    assert sum(r.rows_in for r in reports) == result.rows
    verified = verify_sink(make_sink(target), tmp_path / "exp")
    assert verified and all(r.ok for r in verified), [r.summary() for r in verified]


def test_consistent_mode_knows_every_partition_of_a_capture_directory(tmp_path: Path) -> None:
    from ticdc_spark.spark.sources import source_partitions

    (tmp_path / "a.jsonl").write_bytes(
        b'{"topic":"cdc","partition":1,"offset":0,"timestamp":null,"key":null,"value":null}\n'
        b"\n"
        b'{"partition":0,"topic":"cdc","offset":1,"key":null,"value":null}\n'
        b"not json\n"
    )
    (tmp_path / "b.jsonl").write_bytes(b'{"topic":"other","partition":null,"value":null}\n')
    assert source_partitions(str(tmp_path), {}) == ("cdc/0", "cdc/1", "other/None")


@pytest.mark.spark
def test_bounded_micro_batches_of_one_partition_wait_for_the_others(
    spark: Any, tmp_path: Path
) -> None:
    """Capture files holding one partition each: micro-batches that have read only the
    first file must not release its rows (the other partition's come later, older ones
    among them); before, they did, and intermediate states were not snapshots of upstream."""
    from pipeline_helpers import assert_matches, produce
    from ticdc_spark.io.capture import write_capture
    from ticdc_spark.sinks import make_sink
    from ticdc_spark.spark.pipeline import PipelineConfig, run
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    workload = Workload(seed=8, rows=300, tables=1, ddl_every=0, watermark_every=5)
    messages = produce(workload, "canal-json", options, partitions=2, topic="cdc")
    source = tmp_path / "capture"
    source.mkdir()
    first = 0
    for partition in (0, 1):
        mine = [m for m in messages if m.partition == partition]
        for offset, message in enumerate(mine):
            message.topic, message.offset = "cdc", offset
        with open(source / f"p{partition}.jsonl", "wb") as out:
            write_capture(mine, out)
        first = first or len(mine)
    target = f"delta:{tmp_path / 'lake'}"
    config = PipelineConfig(
        engine="embedded",
        source=str(source),
        protocol="canal-json",
        target=target,
        checkpoint=str(tmp_path / "checkpoint"),
        options=options,
        source_options={"maxOffsetsPerTrigger": "60"},
    )
    reports: list[Any] = []
    run(spark, config, on_batch=reports.append)
    only_first = first // 60  # micro-batches inside the first file
    assert only_first >= 2
    assert [r.rows_applied for r in reports[:only_first]] == [0] * only_first
    assert sum(r.rows_applied for r in reports) > 0
    assert_matches(workload, make_sink(target))
