"""The capture-directory source's bounds per micro-batch: maxOffsetsPerTrigger counts
records (lines), maxBytesPerTrigger their bytes, and ``--trigger once`` (availableNow) drains
the directory there was at the start in bounded micro-batches, in order, each record once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ticdc_spark.codec import Message
from ticdc_spark.errors import CaptureError
from ticdc_spark.io.capture import write_capture

pytest.importorskip("pyspark")

from stream_calls import micro_batches, resumed_at
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


def _drain(reader: _StreamReader) -> list[list[int]]:
    """The records of each micro-batch Spark plans until one finds nothing new."""
    out: list[list[int]] = []
    for start, end in micro_batches(reader):
        out.append(_offsets(reader, start, end))
    return out


def test_max_offsets_per_trigger_counts_records_across_and_inside_files(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [250, 0, 400, 5])
    batches = _drain(_reader(tmp_path, maxOffsetsPerTrigger="100"))
    assert [len(b) for b in batches] == [100] * 6 + [55]
    assert [o for b in batches for o in b] == expected


def test_max_bytes_per_trigger_bounds_the_lines_read(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [300, 300])
    sizes = [
        len(line)
        for f in sorted(tmp_path.glob("*.jsonl"))
        for line in f.read_bytes().splitlines(keepends=True)
    ]
    batches = _drain(_reader(tmp_path, maxBytesPerTrigger="5000"))
    assert [o for b in batches for o in b] == expected
    for batch in batches:  # each as many lines as fit, the last maybe fewer
        assert sum(sizes[o] for o in batch) <= 5000
        if batch is not batches[-1]:
            assert sum(sizes[o] for o in batch) + sizes[batch[-1] + 1] > 5000


def test_a_record_larger_than_the_byte_bound_is_still_read(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [3])
    batches = _drain(_reader(tmp_path, maxBytesPerTrigger="1"))
    assert batches == [[o] for o in expected]


def test_all_bounds_apply_together(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [40, 40, 40])
    batches = _drain(_reader(tmp_path, maxOffsetsPerTrigger="100", maxFilesPerTrigger="2"))
    assert [len(b) for b in batches] == [80, 40]
    assert [o for b in batches for o in b] == expected
    assert [len(b) for b in _drain(_reader(tmp_path, maxFilesPerTrigger="1"))] == [40, 40, 40]


def test_no_bound_reads_everything_in_one_micro_batch(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [10, 20])
    assert _drain(_reader(tmp_path)) == [expected]


def test_a_checkpoint_of_the_file_count_form_resumes(tmp_path: Path) -> None:
    """Offsets written before positions counted records: {"files": N}."""
    expected = _capture(tmp_path, [10, 10, 10])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="15")
    end = resumed_at(reader, {"files": 1})
    assert end == {"files": 2, "records": 5}
    assert _offsets(reader, {"files": 1}, end) == expected[10:25]


def test_a_restart_bounds_from_where_sparks_log_says_the_query_is(tmp_path: Path) -> None:
    """Spark 4.1 gives a Python reader no start: a restarted one is told by a plan of the
    latest logged offsets, and bounds its next micro-batch from there, not from the start."""
    _capture(tmp_path, [30])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="7")
    assert resumed_at(reader, {"files": 0, "records": 20}) == {"files": 0, "records": 27}
    assert reader.partitions({"files": 0, "records": 20}, {"files": 0, "records": 27})
    assert reader.latestOffset() == {"files": 1, "records": 0}


def test_the_stream_sees_files_that_arrive(tmp_path: Path) -> None:
    _capture(tmp_path, [10])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="4")
    assert [end for _, end in micro_batches(reader)][-1] == {"files": 1, "records": 0}
    with open(tmp_path / "part-0001.jsonl", "wb") as out:
        write_capture([Message(None, b"x", topic="t", partition=0, offset=10)], out)
    assert reader.latestOffset() == {"files": 2, "records": 0}
    assert _offsets(reader, {"files": 1, "records": 0}, {"files": 2, "records": 0}) == [10]


def test_available_now_reads_the_files_there_were_at_the_start(tmp_path: Path) -> None:
    expected = _capture(tmp_path, [10])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="4", availableNow="true")
    assert reader.latestOffset() == {"files": 0, "records": 4}  # the end fixed here
    with open(tmp_path / "part-0001.jsonl", "wb") as out:
        write_capture([Message(None, b"x", topic="t", partition=0, offset=10)], out)
    assert [o for b in _drain(reader) for o in b] == expected


def test_a_bounded_end_taken_from_an_assumed_start_is_refused(tmp_path: Path) -> None:
    """Under Trigger.AvailableNow Spark 4.1 asks latestOffset() before it tells a restarted
    reader where the query is: the end was bounded from the initial offset, so its plan
    is refused (it would read records again) rather than run."""
    from ticdc_spark.errors import ConfigError

    _capture(tmp_path, [30])
    reader = _reader(tmp_path, maxOffsetsPerTrigger="7")
    reader.latestOffset()
    with pytest.raises(ConfigError, match=r"Trigger.AvailableNow.*availableNow=true"):
        reader.partitions({"files": 0, "records": 20}, {"files": 0, "records": 20})
    unbounded = _reader(tmp_path)  # its end does not depend on the start: nothing to refuse
    unbounded.latestOffset()
    assert unbounded.partitions({"files": 0, "records": 20}, {"files": 1, "records": 0})


def test_a_bad_line_read_from_inside_a_file_is_named_by_its_line(tmp_path: Path) -> None:
    _capture(tmp_path, [200])
    path = tmp_path / "part-0000.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[149] = b"not json\n"
    path.write_bytes(b"".join(lines))
    at = line_ends(str(path))[99]
    with pytest.raises(CaptureError, match="150"):
        list(_read_file(str(path), False, 100, 200, at))


def test_bad_bounds_are_refused(tmp_path: Path) -> None:
    from ticdc_spark.errors import ConfigError

    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger"):
        _Options({"path": str(tmp_path), "maxoffsetspertrigger": "many"})
    with pytest.raises(ConfigError, match="maxBytesPerTrigger"):
        _Options({"path": str(tmp_path), "maxBytesPerTrigger": "-1"})


@pytest.mark.spark
def test_trigger_once_drains_a_capture_in_bounded_micro_batches(spark: Any, tmp_path: Path) -> None:
    """What the issue measured: maxOffsetsPerTrigger was ignored (one micro-batch).  On
    Spark 4.1 "once" is a processing-time trigger stopped when the source has read up to
    the end it fixed at the start (ticdc_spark.spark.trigger)."""
    from ticdc_spark.spark.capture_source import register
    from ticdc_spark.spark.trigger import once_options, start_query

    expected = _capture(tmp_path / "capture", [700, 600])
    register(spark)
    options = once_options(
        {"path": str(tmp_path / "capture"), "maxOffsetsPerTrigger": "300"}, "once"
    )
    df = spark.readStream.format("ticdc-capture").options(**options).load()
    batches: list[list[int]] = []

    def collect(batch: Any, _batch_id: int) -> None:
        batches.append(sorted(r.offset for r in batch.select("offset").collect()))

    writer = df.writeStream.foreachBatch(collect).option(
        "checkpointLocation", str(tmp_path / "checkpoint")
    )
    assert start_query(writer, "once").awaitTermination(300)
    assert [len(b) for b in batches] == [300] * 4 + [100]
    assert [o for b in batches for o in b] == expected
