"""``ticdc-capture``: a directory of capture files as a Spark source (batch and streaming).

    spark.readStream.format("ticdc-capture").option("path", DIR).load()

The columns are those of Spark's Kafka source, so the same pipeline reads a capture directory
or a broker.  Files (``*.jsonl``, sorted by name) are taken as immutable once visible: write
them elsewhere and rename them in, as :class:`~ticdc_spark.produce.CaptureDirOutput` does.
The streaming offset is the number of files consumed; ``maxFilesPerTrigger`` bounds a
micro-batch.  A malformed line fails the batch naming the file and line, unless
``onBadRecord=skip``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from ticdc_spark.errors import CaptureError, ConfigError
from ticdc_spark.io.capture import read_capture
from ticdc_spark.spark.kafka_schema import KafkaColumnsSource, empty_columns, record_batch

__all__ = ["CaptureDataSource", "register"]

BATCH_ROWS = 10_000


def register(spark: Any) -> None:
    spark.dataSource.register(CaptureDataSource)


def _files(path: str) -> list[str]:
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(f"capture directory {path!r} does not exist")
    return sorted(str(p) for p in root.glob("*.jsonl") if not p.name.startswith("."))


class _Options:
    def __init__(self, options: dict[str, str]) -> None:
        options = {k.lower(): v for k, v in options.items()}  # Spark's options ignore case
        path = options.get("path")
        if not path:
            raise ConfigError("the ticdc-capture source needs option path=DIR")
        self.path = path
        self.max_files = int(options.get("maxfilespertrigger", "0") or 0)
        self.skip_bad = options.get("onbadrecord", "fail").lower() == "skip"
        if options.get("onbadrecord", "fail").lower() not in ("fail", "skip"):
            raise ConfigError("onBadRecord is fail or skip")


def _read_file(path: str, skip_bad: bool) -> Iterator[Any]:
    columns = empty_columns()
    with open(path, "rb") as handle:
        records = read_capture(handle, source=Path(path).name)
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
        return [InputPartition(f) for f in _files(self.options.path)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_file(partition.value, self.options.skip_bad)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: _Options) -> None:
        self.options = options
        self.target: int | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"files": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_files > 0:
            return ReadMaxFiles(self.options.max_files)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        available = len(_files(self.options.path))
        if self.target is not None:
            available = min(available, self.target)
        end = available
        if isinstance(limit, ReadMaxFiles):
            end = min(available, start["files"] + limit.max_files)
        return {"files": max(end, start["files"])}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = len(_files(self.options.path))

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        files = _files(self.options.path)
        return [InputPartition(f) for f in files[start["files"] : end["files"]]]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_file(partition.value, self.options.skip_bad)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: files stay where they are."""


class CaptureDataSource(KafkaColumnsSource):
    """A directory of capture files, with Spark's Kafka-source columns."""

    source_name = "ticdc-capture"
    readers = (_BatchReader, _StreamReader)

    def config(self) -> _Options:
        return _Options(dict(self.options))
