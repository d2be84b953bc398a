"""The capture-directory source's bounds per micro-batch: maxOffsetsPerTrigger counts
records (lines), maxBytesPerTrigger their bytes, and Trigger.AvailableNow drains the
directory in bounded micro-batches, in order, each record once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ticdc_spark.codec import Message
from ticdc_spark.errors import CaptureError
from ticdc_spark.io.capture import write_capture
from ticdc_spark.pipeline.policy import OnError

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxFiles,
    ReadMaxRows,
)

from ticdc_spark.spark.capture_source import (
    _Options,
    _read_file,
    _StreamReader,
    line_ends,
)


def _capture(root: Path, sizes: list[int]) -> list[int]:
    """Files of ``sizes`` records (offsets numbered across them); returns the offsets."""
    root.mkdir(parents=True, exist_ok=True)
    offset = 0
    for number, size in enumerate(sizes):
        messages = []
        for _ in range(size):
            messages.append(
                Message(
                    key=None, value=b"v" * (1 + offset % 7), topic="t", partition=0, offset=offset
                )
            )
            offset += 1
        with open(root / f"part-{number:04d}.jsonl", "wb") as out:
            write_capture(messages, out)
    return list(range(offset))


def _reader(root: Path, **options: str) -> _StreamReader:
    return _StreamReader(_Options({"path": str(root), **options}))


def _offsets(reader: _StreamReader, start: dict[str, int], end: dict[str, int]) -> list[int]:
    out: list[int] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            out += batch.column("offset").to_pylist()
    return out


def _drain(reader: _StreamReader, limit: Any) -> list[list[int]]:
    """Micro-batches as Spark plans them under Trigger.AvailableNow."""
    reader.prepareForTriggerAvailableNow()
    start, batches = reader.initialOffset(), []
    while True:
        end = reader.latestOffset(start, limit)
        if end == start:
            return batches
        batches.append(_offsets(reader, start, end))
        start = end


def test_max_offsets_per_trigger_counts_records_across_and_inside_files(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [250, 0, 400, 5])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="100")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxRows(100)
    batches = _drain(reader, limit)
    assert [len(b) for b in batches] == [100] * 6 + [55]
    assert [o for b in batches for o in b] == expected


def test_max_bytes_per_trigger_bounds_the_lines_read(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [300, 300])
    sizes = [
        len(line)
        for f in sorted(tmp_path.glob("*.jsonl"))
        for line in f.read_bytes().splitlines(keepends=True)
    ]
    reader = _reader(tmp_path, maxBytesPerTrigger="5000")
    limit = reader.getDefaultReadLimit()
    assert limit == ReadMaxBytes(5000)
    batches = _drain(reader, limit)
    assert [o for b in batches for o in b] == expected
    for batch in batches:  # each as many lines as fit, the last maybe fewer
        assert sum(sizes[o] for o in batch) <= 5000
        if batch is not batches[-1]:
            assert sum(sizes[o] for o in batch) + sizes[batch[-1] + 1] > 5000


def test_a_record_larger_than_the_byte_bound_is_still_read(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [3])
    reader = _reader(tmp_path, maxBytesPerTrigger="1")
    batches = _drain(reader, reader.getDefaultReadLimit())
    assert batches == [[o] for o in expected]


def test_all_bounds_apply_together(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [40, 40, 40])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="100", maxFilesPerTrigger="2")
    batches = _drain(reader, reader.getDefaultReadLimit())
    assert [len(b) for b in batches] == [80, 40]
    assert [o for b in batches for o in b] == expected
    reader = _reader(tmp_path, maxFilesPerTrigger="1")
    assert reader.getDefaultReadLimit() == ReadMaxFiles(1)
    assert [len(b) for b in _drain(reader, ReadMaxFiles(1))] == [40, 40, 40]


def test_read_all_available_and_no_bound_read_everything(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [10, 20])
    reader = _reader(tmp_path)
    assert reader.getDefaultReadLimit() == ReadAllAvailable()
    assert _drain(reader, ReadAllAvailable()) == [expected]
    bounded = _reader(tmp_path, maxOffsetsPerTrigger="5")
    assert _drain(bounded, ReadAllAvailable()) == [expected]


def test_a_checkpoint_of_the_file_count_form_resumes(tmp_path: Path) -> None:
    """Offsets written before positions counted records: {"files": N}."""
    expected = _capture(tmp_path, [10, 10, 10])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="15")
    end = reader.latestOffset({"files": 1}, reader.getDefaultReadLimit())
    assert end == {"files": 2, "records": 5}
    assert _offsets(reader, {"files": 1}, end) == expected[10:25]


def test_the_stream_sees_files_that_arrive(tmp_path: Path) -> None:
    _capture(tmp_path, [10])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="4")
    start = reader.initialOffset()
    for _ in range(3):
        start = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert start == {"files": 1, "records": 0}
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start
    with open(tmp_path / "part-0001.jsonl", "wb") as out:
        write_capture([Message(None, b"x", topic="t", partition=0, offset=10)], out)
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"files": 2, "records": 0}
    assert _offsets(reader, start, end) == [10]


def test_a_bad_line_read_from_inside_a_file_is_named_by_its_line(tmp_path: Path) -> None:
    _capture(tmp_path, [200])
    path = tmp_path / "part-0000.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[149] = b"not json\n"
    path.write_bytes(b"".join(lines))
    at = line_ends(str(path))[99]
    with pytest.raises(CaptureError, match="150"):
        list(_read_file(str(path), OnError.STOP, 100, 200, at))


def test_bad_bounds_are_refused(tmp_path: Path) -> None:
    from ticdc_spark.errors import ConfigError

    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        _Options({"path": str(tmp_path), "maxoffsetspertrigger": "many"})
    with pytest.raises(ConfigError, match="maxBytesPerTrigger"):
        _Options({"path": str(tmp_path), "maxBytesPerTrigger": "-1"})


@pytest.mark.spark
def test_trigger_available_now_drains_a_capture_in_bounded_micro_batches(
    spark: Any, tmp_path: Path
) -> None:
    """What the issue measured: maxOffsetsPerTrigger was ignored (one micro-batch)."""
    from ticdc_spark.spark.capture_source import register

    expected = _capture(tmp_path / "capture", [700, 600])
    register(spark)
    df = (
        spark.readStream.format("ticdc-capture")
        .option("path", str(tmp_path / "capture"))
        .option("maxOffsetsPerTrigger", "300")
        .load()
    )
    batches: list[list[int]] = []

    def collect(batch: Any, _batch_id: int) -> None:
        batches.append(sorted(r.offset for r in batch.select("offset").collect()))

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert [len(b) for b in batches] == [300] * 4 + [100]
    assert [o for b in batches for o in b] == expected
