"""TiCDC's Debezium through the planner and the Delta sink, without Spark: UPDATEs sent
without their old value (``debezium-output-old-value=false``) are UPDATEs without a before
image, applied as upserts keyed by the after image's handle key; ``produce``'s default
Debezium workload verifies, and a BIGINT UNSIGNED the schema cannot tell apart is warned of."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.helpers import kafka_batch, placed
from pipeline_helpers import assert_matches, changelog, interleave, produce, run_batches
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.debezium import DebeziumDecoder
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.pipeline.last_change import final_changes
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.spark.decode import _Records
from ticdc_spark.testing.workload import Workload, sbtest_schema
from ticdc_spark.types import parse_column_type

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


def test_produce_s_default_debezium_workload_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``produce -p debezium`` with no options carries each column's type (tidb_type), so
    the all-types table's BIGINT UNSIGNED values past 2^63-1 read back as sent, and says so;
    replicated (here by the planner and the Delta sink) it verifies."""
    from ticdc_spark.cli import main
    from ticdc_spark.io.capture import read_capture
    from ticdc_spark.testing.verify import verify_sink

    capture, expected = tmp_path / "capture", tmp_path / "expected"
    argv = ["produce", "-p", "debezium", "--to", str(capture), "--expected", str(expected)]
    assert main([*argv, "--rows", "600", "--seed", "1"]) == 0
    assert "debezium with enable-tidb-extension=true" in capsys.readouterr().err
    messages = [m for f in sorted(capture.glob("*.jsonl")) for m in read_capture(f.open("rb"))]
    sink = DeltaSink(tmp_path / "lake")
    batches = list(interleave(messages, seed=1, chunk=200))
    run_batches(batches, "debezium", {}, sink, tmp_path / "ckpt", mode="eventual")
    reports = verify_sink(sink, expected)
    assert reports and all(r.ok for r in reports), [r.summary() for r in reports]


def _unsigned_rows() -> list[Message]:
    """TiCDC's Debezium INSERTs, without the TiDB extension, into a table with a BIGINT
    UNSIGNED ``u``: 5, then 2^64-1 .. 2^64-5, which TiCDC writes as int64 -1 .. -5."""
    columns = tuple(
        Column(name, parse_column_type(sql), nullable=name != "id")
        for name, sql in (("id", "bigint"), ("u", "bigint unsigned"), ("s", "bigint"))
    )
    key = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    schema = TableSchema("d", "t", columns, key).with_derived_flags()
    images = [{"id": i, "u": 2**64 - i if i else 5, "s": i} for i in range(6)]
    rows = [
        RowChange(RowKind.INSERT, schema, compose_ts(1_700_000_000_000, i), None, image)
        for i, image in enumerate(images)
    ]
    return placed(make_encoder("debezium", {}).encode(rows))


def _sign_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "BIGINT UNSIGNED" in r.getMessage()]


def test_a_negative_int64_where_the_schema_cannot_tell_unsigned_warns_once_per_column(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TiCDC without the TiDB extension writes BIGINT and BIGINT UNSIGNED alike (Connect
    int64): 2^64-1 arrives as -1.  The decoder reads BIGINT and warns, once per column."""
    decoder = make_decoder("debezium", {})
    got = [e.after["u"] for m in _unsigned_rows() for e in decoder.decode(m)]  # type: ignore[union-attr]
    assert got == [5, -1, -2, -3, -4, -5]
    (warning,) = _sign_warnings(caplog)
    assert "d.t column u holds a negative int64" in warning


def test_the_batch_path_warns_of_a_negative_int64_too(caplog: pytest.LogCaptureFixture) -> None:
    """(The first record plans the shape on the careful path; the others take the batch
    path, which meets the negative values.)"""
    decoder = make_decoder("debezium", {})
    assert isinstance(decoder, DebeziumDecoder)
    batch = kafka_batch(_unsigned_rows())
    records = _Records(batch, decoder, fail=False)
    careful: list[int] = []

    def one(i: int) -> None:
        careful.append(i)
        records.decode_one(i)

    out = decoder.decode_arrow_batch(batch, one, records.builder).to_pylist()
    assert careful == [0]
    assert [dict(r["after"])["u"] for r in out] == ["5", "-1", "-2", "-3", "-4", "-5"]
    (warning,) = _sign_warnings(caplog)
    assert "d.t column u holds a negative int64" in warning
