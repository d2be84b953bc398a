"""``ticdc-capture``: a directory of capture files as a Spark source (batch and streaming).

    spark.readStream.format("ticdc-capture").option("path", DIR).load()

The columns are those of Spark's Kafka source, so the same pipeline reads a capture directory
or a broker.  Files (``*.jsonl``, sorted by name) are taken as immutable once visible: write
them elsewhere and rename them in, as :class:`~ticdc_spark.produce.CaptureDirOutput` does.

The streaming offset is a position in the directory: ``{"files": F, "records": R}``, the
first F files read whole and the first R lines of file F (a checkpoint of the older form
``{"files": F}`` resumes as ``records: 0``).  A micro-batch is bounded, as Spark bounds its
sources, by ``maxOffsetsPerTrigger`` (lines of capture files: one Kafka record each; a blank
line counts as an offset, as a Kafka offset without a record does), ``maxBytesPerTrigger``
(bytes of those lines, the name of Spark's file-source option; at least one line is read)
and ``maxFilesPerTrigger`` (files touched); all that are given apply.  With
``availableNow=true`` the query reads the files there were when it started, in such bounded
batches (``replicate --trigger once``: :mod:`ticdc_spark.spark.trigger`).
A malformed line fails the batch naming the file and line, unless ``onBadRecord=skip``.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from ticdc_spark.errors import CaptureError, ConfigError
from ticdc_spark.io.capture import read_capture
from ticdc_spark.spark.kafka.schema import KafkaColumnsSource, empty_columns, record_batch
from ticdc_spark.spark.stream_start import StreamStart

__all__ = ["CaptureDataSource", "capture_partitions", "register"]

BATCH_ROWS = 10_000
Position = dict[str, int]  # {"files": F, "records": R}


def register(spark: Any) -> None:
    spark.dataSource.register(CaptureDataSource)


def _files(path: str) -> list[str]:
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"capture directory {path!r} does not exist")
    return sorted(str(p) for p in root.glob("*.jsonl") if not p.name.startswith("."))


def _bound(options: dict[str, str], name: str) -> int:
    """A non-negative integer option (0: no bound)."""
    text = options.get(name.lower(), "0") or "0"
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(f"{name} must be a positive integer, not {text!r}")
    return value


# The head of a capture line as write_capture writes it; other lines are parsed whole.
_HEAD = re.compile(rb'\{"topic":"([^"\\]*)","partition":(-?\d+|null)[,}]')


def capture_partitions(path: str) -> list[tuple[str, int | None]]:
    """The (topic, partition) pairs of the records in a capture directory now, as the
    records name them (``read_capture``'s rules).  Consistent mode waits for a watermark
    from each, as it waits for every partition a broker lists: a micro-batch bounded inside
    the directory must not release rows past a partition whose records come later (files
    holding one partition each)."""
    found: set[tuple[str, int | None]] = set()
    for name in _files(path):
        with open(name, "rb") as handle:
            for line in handle:
                head = _HEAD.match(line)
                if head is not None:
                    number = head.group(2)
                    found.add((head.group(1).decode(), None if number == b"null" else int(number)))
                    continue
                try:
                    record = orjson.loads(line) if line.strip() else None
                except orjson.JSONDecodeError:
                    continue  # reading the batch reports it
                if isinstance(record, dict):
                    partition = record.get("partition")
                    found.add(
                        (
                            str(record.get("topic") or ""),
                            partition if type(partition) is int else None,
                        )
                    )
    return sorted(found, key=lambda tp: (tp[0], -1 if tp[1] is None else tp[1]))


class _Options:
    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark's options ignore case
        path = options.get("path")
        if not path:
            raise ConfigError("the ticdc-capture source needs option path=DIR")
        self.path = path
        self.max_files = _bound(options, "maxFilesPerTrigger")
        self.max_records = _bound(options, "maxOffsetsPerTrigger")
        self.max_bytes = _bound(options, "maxBytesPerTrigger")
        self.available_now = options.get("availablenow", "false").strip().lower() == "true"
        self.skip_bad = options.get("onbadrecord", "fail").lower() == "skip"
        if options.get("onbadrecord", "fail").lower() not in ("fail", "skip"):
            raise ConfigError("onBadRecord is fail or skip")


def line_ends(path: str) -> array[int]:
    """The byte offset after each line of a file (a last line without a newline counts)."""
    ends: array[int] = array("q")
    position = 0
    with open(path, "rb") as handle:
        for line in handle:
            position += len(line)
            ends.append(position)
    return ends


def _read_file(
    path: str, skip_bad: bool, first: int = 0, last: int | None = None, at: int = 0
) -> Iterator[Any]:
    """Records of lines [first, last) of a file (``last`` None: to its end), the first of
    them at byte ``at``."""
    columns = empty_columns()
    with open(path, "rb") as handle:
        handle.seek(at)
        lines: Any = handle if last is None else itertools.islice(handle, last - first)
        records = read_capture(lines, source=Path(path).name, first_line=first + 1)
        while True:
            try:
                message = next(records)
            except StopIteration:
                break
            except CaptureError:
                if skip_bad:
                    continue
                raise
            _append(columns, message)
            if len(columns["value"]) >= BATCH_ROWS:
                yield record_batch(columns)
                columns = empty_columns()
    if columns["value"]:
        yield record_batch(columns)


def _append(columns: dict[str, list[Any]], message: Any) -> None:
    columns["key"].append(message.key)
    columns["value"].append(message.value)
    columns["topic"].append(message.topic)
    columns["partition"].append(message.partition)
    columns["offset"].append(message.offset)
    columns["timestamp"].append(message.timestamp)
    columns["timestampType"].append(0)
    columns["headers"].append(None)


class _BatchReader(DataSourceReader):
    def __init__(self, options: _Options) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition((f, 0, None, 0)) for f in _files(self.options.path)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_file(partition.value[0], self.options.skip_bad, *partition.value[1:])


def _position(offset: dict[str, int]) -> tuple[int, int]:
    return int(offset.get("files", 0)), int(offset.get("records", 0))


class _StreamReader(DataSourceStreamReader):
    """The streaming reader on Spark 4.1's Python source protocol: ``latestOffset()`` is
    asked with no start and no read limit, so the reader bounds each micro-batch itself
    from where the next one starts (:class:`~ticdc_spark.spark.stream_start.StreamStart`).
    With ``availableNow`` the files are those there were at the query's first call."""

    def __init__(self, options: _Options) -> None:
        self.options = options
        bounded = bool(options.max_records or options.max_bytes or options.max_files)
        self.start = StreamStart("ticdc-capture", bounded)
        self.files_at_start: int | None = None  # (availableNow)
        self._ends: dict[str, tuple[int, array[int]]] = {}  # path -> (size, line ends)

    def initialOffset(self) -> Position:
        return {"files": 0, "records": 0}

    def _line_ends(self, path: str) -> array[int]:
        """Cached per file (files are immutable once visible); the size checks that."""
        size = os.path.getsize(path)
        cached = self._ends.get(path)
        if cached is None or cached[0] != size:
            cached = self._ends[path] = (size, line_ends(path))
        return cached[1]

    def _visible(self) -> list[str]:
        files = _files(self.options.path)
        if self.options.available_now:
            if self.files_at_start is None:
                self.files_at_start = len(files)
            files = files[: self.files_at_start]
        return files

    def latestOffset(self) -> Position:
        """The end of the next micro-batch: the end of the last file, or as far as the
        bounds let it go (all the bounds given apply; at least one line is read)."""
        begin_file, begin_record = _position(self.start.get(self.initialOffset))
        files = self._visible()
        opts = self.options
        if not (opts.max_records or opts.max_bytes or opts.max_files):
            if len(files) <= begin_file:
                return {"files": begin_file, "records": begin_record}
            return {"files": len(files), "records": 0}
        for name in [f for f in self._ends if f not in files[begin_file:]]:
            del self._ends[name]  # read already (or gone): no longer needed
        return self._bounded_end(files, begin_file, begin_record)

    def _bounded_end(self, files: list[str], file: int, record: int) -> Position:
        """How far from line ``record`` of file ``file`` the bounds let a micro-batch go."""
        opts = self.options
        taken = taken_bytes = touched = 0
        while file < len(files):
            ends = self._line_ends(files[file])
            if record >= len(ends):
                file, record = file + 1, 0
                continue
            if opts.max_files and touched >= opts.max_files:
                break
            touched += 1
            take = len(ends) - record
            if opts.max_records:
                take = min(take, opts.max_records - taken)
            base = ends[record - 1] if record else 0
            if opts.max_bytes:
                fits = bisect.bisect_right(ends, base + opts.max_bytes - taken_bytes, lo=record)
                take = min(take, max(fits - record, 0 if taken else 1))
            if take <= 0:
                break
            taken += take
            taken_bytes += ends[record + take - 1] - base
            record += take
            if record < len(ends):
                break  # the bound ends inside this file
            file, record = file + 1, 0
        return {"files": file, "records": record}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """One partition per file or part of a file between the two positions; the next
        micro-batch starts at ``end`` (Spark 4.1 plans ``(latest, latest)`` first on a
        restart: where its log says the query is)."""
        self.start.planned(start, end)
        files = _files(self.options.path)
        (begin_file, begin_record), (end_file, end_record) = _position(start), _position(end)
        out = []
        for file in range(begin_file, min(end_file + (1 if end_record else 0), len(files))):
            first = begin_record if file == begin_file else 0
            last = end_record if file == end_file else None
            at = self._line_ends(files[file])[first - 1] if first else 0
            if last is None or last > first:
                out.append(InputPartition((files[file], first, last, at)))
        self.start.moved(end)
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_file(partition.value[0], self.options.skip_bad, *partition.value[1:])

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: files stay where they are."""


class CaptureDataSource(KafkaColumnsSource):
    """A directory of capture files, with Spark's Kafka-source columns."""

    source_name = "ticdc-capture"
    readers = (_BatchReader, _StreamReader)

    def config(self) -> _Options:
        return _Options(dict(self.options))
