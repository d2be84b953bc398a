"""``replicate`` bounds each micro-batch by default (the driver collects each one to apply
it), with Spark's option names to override; ``--trigger once`` still applies everything,
across bounded micro-batches, and consistent mode still ends at the generated state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ticdc_spark.errors import ConfigError
from ticdc_spark.spark import pipeline
from ticdc_spark.spark.pipeline import (
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
    from ticdc_spark.spark.kafka_source import _Config

    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        _Config.parse(
            {"kafka.bootstrap.servers": "b:9092", "subscribe": "t", "maxBytesPerTrigger": "1m"}
        )


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_trigger_once_applies_a_backlog_in_bounded_micro_batches(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Before: a capture backlog became one micro-batch whatever its size."""
    from ticdc_spark.produce import produce_workload
    from ticdc_spark.spark.pipeline import PipelineConfig, make_sink, run
    from ticdc_spark.verify import verify_sink
    from ticdc_spark.workload import Workload

    options = {"enable-tidb-extension": "true"}
    workload = Workload(seed=5, rows=600, tables=2, ddl_every=12, watermark_every=6)
    result = produce_workload(
        workload, "canal-json", options, str(tmp_path / "capture"), expected=tmp_path / "exp"
    )
    monkeypatch.setattr(pipeline, "DEFAULT_CHANGES_PER_BATCH", 150)
    target = f"delta:{tmp_path / 'lake'}"
    config = PipelineConfig(
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
