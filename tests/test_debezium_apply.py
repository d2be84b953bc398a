"""TiCDC's Debezium through the planner and the Delta sink, without Spark: UPDATEs sent
without their old value (``debezium-output-old-value=false``) are UPDATEs without a before
image, applied as upserts keyed by the after image's handle key."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.helpers import placed
from pipeline_helpers import assert_matches, changelog, interleave, produce, run_batches
from ticdc_spark.codec import make_encoder
from ticdc_spark.consume import final_changes
from ticdc_spark.model import RowChange, RowKind, compose_ts
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.workload import Workload, sbtest_schema

OLD_VALUE_OFF = {"debezium-output-old-value": "false"}


@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_a_workload_without_old_values_lands_exactly(mode: str, tmp_path: Path) -> None:
    """(The sysbench-like table: its values all travel exactly through Debezium.)"""
    workload = Workload(seed=11, rows=400, tables=1, watermark_every=5)
    messages = produce(workload, "debezium", OLD_VALUE_OFF)
    assert sum(b'"op":"u"' in (m.value or b"") for m in messages) > 50
    sink = DeltaSink(tmp_path / "lake")
    batches = list(interleave(messages, seed=1, chunk=40))
    run_batches(batches, "debezium", OLD_VALUE_OFF, sink, tmp_path / "ckpt", mode=mode)
    assert_matches(workload, sink)


def test_an_update_without_a_before_image_is_one_upsert() -> None:
    """No delete of a null key beside the upsert: a missing before image is not a key
    the update moved away from."""
    schema = sbtest_schema()
    row = {"id": 1, "k": 1, "c": "a", "pad": "p"}
    rows = [
        RowChange(RowKind.INSERT, schema, compose_ts(1_700_000_000_000), None, row),
        RowChange(RowKind.UPDATE, schema, compose_ts(1_700_000_000_001), row, {**row, "k": 2}),
    ]
    messages = placed(make_encoder("debezium", OLD_VALUE_OFF).encode(rows))
    final, bad = final_changes(changelog(messages, "debezium", OLD_VALUE_OFF), schema)
    assert bad is None
    assert [(r["op"], dict(r["image"])["k"]) for r in final.to_pylist()] == [("update", "2")]
