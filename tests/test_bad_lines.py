"""Capture lines that are not Kafka records (issue 24 item 2): the capture source passes each
on as a record that says so (onBadRecord dead-letter or skip, OnError's spellings), the
decode stage makes it a dead letter, and skipping counts it; no record can pass for one."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from ticdc_spark.codec import Message
from ticdc_spark.errors import CaptureError, ConfigError
from ticdc_spark.io.capture import BAD_LINE_PARTITION, read_capture, write_capture
from ticdc_spark.pipeline.changelog import ERROR
from ticdc_spark.pipeline.policy import OnError

pytest.importorskip("pyspark")

from ticdc_spark.spark.bad_lines import skip_bad_lines
from ticdc_spark.spark.capture_source import _Options, _read_file
from ticdc_spark.spark.decode import decode_batches


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "part-0000.jsonl"
    with open(path, "wb") as out:
        write_capture([Message(None, b"x", topic="t", partition=0, offset=7)], out)
    path.write_bytes(path.read_bytes() + b"{not json\n")
    return path


def _records(path: Path, policy: OnError) -> pa.Table:
    return pa.Table.from_batches(list(_read_file(str(path), policy)))


@pytest.mark.parametrize("policy", [OnError.DEAD_LETTER, OnError.SKIP])
def test_a_bad_line_is_passed_on_as_a_record_that_says_so(tmp_path: Path, policy) -> None:
    rows = _records(_file(tmp_path), policy).to_pylist()
    assert [r["partition"] for r in rows] == [0, BAD_LINE_PARTITION]
    bad = rows[1]
    assert (bad["topic"], bad["offset"], bad["value"]) == ("part-0000.jsonl", 2, b"{not json")
    assert bad["key"].decode().startswith("part-0000.jsonl line 2: not JSON (")


def test_stop_fails_naming_the_line(tmp_path: Path) -> None:
    with pytest.raises(CaptureError, match=r"part-0000\.jsonl line 2: not JSON"):
        _records(_file(tmp_path), OnError.STOP)


def test_on_bad_record_takes_the_pipelines_spellings(tmp_path: Path) -> None:
    for given, policy in [
        ("fail", OnError.STOP),  # (its spelling before OnError)
        ("Stop", OnError.STOP),
        ("dead-letter", OnError.DEAD_LETTER),
        ("skip", OnError.SKIP),
    ]:
        assert _Options({"path": str(tmp_path), "onBadRecord": given}).bad_records is policy
    assert _Options({"path": str(tmp_path)}).bad_records is OnError.STOP
    with pytest.raises(ConfigError, match="onBadRecord must be stop or dead-letter or skip"):
        _Options({"path": str(tmp_path), "onBadRecord": "ignore"})


def test_the_decode_stage_makes_it_a_dead_letter_and_skipping_counts_it(tmp_path: Path) -> None:
    records = _records(_file(tmp_path), OnError.DEAD_LETTER)
    options = {"enable-tidb-extension": "true"}
    changes = pa.Table.from_batches(
        list(decode_batches(iter(records.to_batches()), "canal-json", options))
    )
    errors = changes.filter(pa.compute.equal(changes["kind"], ERROR)).to_pylist()
    errors.sort(key=lambda e: e["partition"])
    assert [(e["partition"], e["offset"], e["value"]) for e in errors] == [
        (BAD_LINE_PARTITION, 2, b"{not json"),
        (0, 7, b"x"),  # (the record's value is no Canal-JSON message)
    ]
    assert errors[0]["error"].startswith("part-0000.jsonl line 2: not JSON")
    kept, skipped = skip_bad_lines(changes, 0)
    assert skipped == 1 and kept.num_rows == changes.num_rows - 1


@pytest.mark.parametrize("field", ["partition", "offset"])
def test_no_capture_record_passes_for_a_bad_line(field: str) -> None:
    record = {"topic": "t", "partition": 0, "offset": 1, "key": None, "value": None, field: -1}
    with pytest.raises(CaptureError, match=f"line 1: {field} must not be negative, got -1"):
        list(read_capture([orjson.dumps(record)]))
