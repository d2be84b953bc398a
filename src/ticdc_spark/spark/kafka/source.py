"""``ticdc-kafka``: Kafka as a Spark source (batch and streaming) on confluent-kafka.

    spark.readStream.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", "host:9092").option("subscribe", "cdc_test")
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 100000)
        .load()

Columns and options are those of Spark's built-in Kafka source, so on a cluster that has the
built-in source, ``format("kafka")`` can take its place: what Spark refuses is refused with
its reason, what is not implemented here is refused too, never ignored (docs/kafka-source.md
has the table of every option).  Built here because Spark's own connector jar is not always
available (Python-only environments); offsets are plain dicts ``{topic: {partition:
offset}}`` that Spark keeps in the query's checkpoint.  One Spark partition reads one Kafka
partition's offset range, yielding Arrow batches.  Data loss (partitions gone, offsets gone
backwards, deleted records) is reported as Spark reports it: ``failOnDataLoss``.

This module holds the readers; ``kafka_options`` checks the options, ``kafka_offsets`` plans
(partitions, offsets, ranges, data loss between plans), ``kafka_reader`` reads a range.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.spark.kafka.offsets import (
    OffsetReader,
    limit_offsets,
    load_offsets,
    plan_ranges,
    store_offsets,
    topic_partitions,
    with_new_partitions,
)
from ticdc_spark.spark.kafka.options import (
    EARLIEST,
    LATEST,
    Offsets,
    SourceConfig,
    canonical,
    headers_included,
    report_data_loss,
)
from ticdc_spark.spark.kafka.reader import read_partition
from ticdc_spark.spark.kafka.schema import KafkaColumnsSource, spark_kafka_schema
from ticdc_spark.spark.stream_start import StreamStart

__all__ = ["KafkaDataSource", "register", "topic_partitions"]


def register(spark: Any) -> None:
    spark.dataSource.register(KafkaDataSource)


# --------------------------------------------------------------------------------------------
# Readers.


class _BatchReader(DataSourceReader):
    def __init__(self, config: SourceConfig) -> None:
        self.config = config

    def partitions(self) -> list[InputPartition]:
        metadata = OffsetReader(self.config)
        try:
            parts = metadata.partitions()
            if self.config.assign is not None:
                missing = sorted(
                    f"{t}-{p}"
                    for t, ps in self.config.assign.items()
                    for p in ps
                    if (t, p) not in parts
                )
                if missing:
                    raise TiCDCSparkError(f"assigned partitions do not exist: {missing}")
            bounds = metadata.bounds(parts)
            start = metadata.starting(EARLIEST, bounds)
            end = metadata.ending(bounds)
        finally:
            metadata.close()
        for topic, partitions in sorted(end.items()):
            for partition, until in sorted(partitions.items()):
                if start[topic][partition] > until:  # (Spark's KafkaBatchPartitionReader)
                    raise TiCDCSparkError(
                        f"Beginning offset {start[topic][partition]} is after the ending offset "
                        f"{until} for topic {topic} partition {partition}. You either provided "
                        "an invalid fromOffset, or the Kafka topic has been damaged"
                    )
        return plan_ranges(start, end, self.config)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition)


class _StreamReader(DataSourceStreamReader):
    """The streaming reader on Spark 4.1's Python source protocol.

    Spark 4.1 asks a Python source for ``latestOffset()`` with neither the start of the next
    micro-batch nor a read limit (admission control for Python sources comes in Spark 4.2),
    so the reader bounds each micro-batch itself (maxOffsetsPerTrigger,
    minOffsetsPerTrigger) from where the next one starts (:class:`~ticdc_spark.spark.
    stream_start.StreamStart`: the initial offsets, the end of each micro-batch planned,
    the offsets of Spark's log on a restart).  With ``availableNow`` (what ``replicate
    --trigger once`` runs) its end is fixed when the query starts; see
    :mod:`ticdc_spark.spark.trigger`."""

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        bounded = config.max_offsets > 0 or bool(config.min_offsets)
        self.start = StreamStart("ticdc-kafka", bounded)
        self.end_at_start: Offsets | None = None  # (availableNow)
        self.initial: Offsets | None = None
        self.last_trigger = 0.0  # when the last batch was let through (minOffsetsPerTrigger)

    def initialOffset(self) -> Offsets:
        """The offsets of ``startingOffsets`` resolved once, as Spark's Kafka source fixes
        them: Spark asks again when it re-runs batch 0 (a restart after a failed first
        batch), and "latest" asked again would skip what arrived in between.  Kept for the
        reader's life, and in ``initialOffsetsPath`` across restarts when that is set (Spark
        keeps them in the query's checkpoint, which a Python source is not told)."""
        if self.initial is None:
            self.initial = load_offsets(self.config.initial_offsets_path)
        if self.initial is None:
            metadata = OffsetReader(self.config)
            try:
                self.initial = metadata.starting(LATEST)
            finally:
                metadata.close()
            store_offsets(self.config.initial_offsets_path, self.initial)
        return canonical(self.initial)

    def latestOffset(self) -> Offsets:
        """The end of the next micro-batch: the broker's end offsets as they are (lower than
        the start if a topic was re-created, without the partitions that are gone:
        :meth:`partitions` reports both, as Spark does), or with ``availableNow`` as they
        were at the query's first call.  From the start of the next micro-batch: the start
        again (no batch) while fewer than minOffsetsPerTrigger records wait and
        maxTriggerDelay has not passed since the last batch (not with ``availableNow``,
        which must finish), and at most maxOffsetsPerTrigger records, as Spark's
        KafkaMicroBatchStream."""
        start = self.start.get(self.initialOffset)
        if self.config.available_now:
            if self.end_at_start is None:
                self.end_at_start = self._latest()
            end = canonical(self.end_at_start)
        else:
            end = canonical(self._latest())
        waits = self.config.min_offsets and not self.config.available_now
        if waits and self._delay(start, end):
            return canonical(start)
        if self.config.max_offsets > 0:
            since = with_new_partitions(start, end, self.config)
            end = canonical(limit_offsets(since, end, self.config.max_offsets))
        return end

    def _delay(self, start: Offsets, end: Offsets) -> bool:
        """Whether to wait for more records (Spark's delayBatch)."""
        now = time.time()
        if now - self.last_trigger >= self.config.max_trigger_delay_s:
            self.last_trigger = now
            return False
        waiting = sum(
            o - start.get(t, {}).get(p, 0) for t, ps in end.items() for p, o in ps.items()
        )
        if waiting < (self.config.min_offsets or 0):
            return True
        self.last_trigger = now
        return False

    def _latest(self) -> Offsets:
        metadata = OffsetReader(self.config)
        try:
            parts = metadata.partitions()
            bounds = metadata.bounds(parts)
        finally:
            metadata.close()
        latest: Offsets = {}
        for (topic, partition), (_low, high) in bounds.items():
            latest.setdefault(topic, {})[str(partition)] = high
        return latest

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        """The ranges from ``start`` to ``end``, reporting what Spark's Kafka source reports
        as data loss: partitions gone, partitions added with records already deleted,
        offsets gone backwards (a re-created topic).  With ``failOnDataLoss`` (the default)
        each fails the query; otherwise it is logged and the query goes on from ``end``.
        The next micro-batch starts at ``end`` (Spark 4.1 plans ``(latest, latest)`` first on
        a restart: where its log says the query is)."""
        self.start.planned(start, end)
        for topic, partitions in sorted(start.items()):
            gone = sorted(p for p in partitions if p not in end.get(topic, {}))
            if gone:
                report_data_loss(
                    self.config,
                    f"partitions {', '.join(f'{topic}-{p}' for p in gone)} are gone "
                    "(deleted topic or partitions): some data may have been missed",
                )
        since = with_new_partitions(start, end, self.config, report=True)
        for topic, partitions in sorted(end.items()):
            for partition, until in sorted(partitions.items(), key=lambda p: int(p[0])):
                begin = since[topic][partition]
                if until < begin:
                    report_data_loss(
                        self.config,
                        f"partition {topic}-{partition}'s offset went back from {begin} to "
                        f"{until} (topic re-created?): some data may have been missed",
                    )
        ranges = plan_ranges(since, end, self.config)
        self.start.moved(end)
        return ranges

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition)

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to Kafka."""


class KafkaDataSource(KafkaColumnsSource):
    """Kafka topics with Spark's Kafka-source columns (``headers`` only with
    includeHeaders=true); options checked for a batch or a streaming query."""

    source_name = "ticdc-kafka"
    readers = (_BatchReader, _StreamReader)

    def config(self) -> SourceConfig:
        return SourceConfig.parse(self.options)

    def schema(self) -> str:
        return spark_kafka_schema(headers_included(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(SourceConfig.parse(self.options, "batch"))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(SourceConfig.parse(self.options, "stream"))
