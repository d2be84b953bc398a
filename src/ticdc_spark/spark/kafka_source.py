"""``ticdc-kafka``: Kafka as a Spark source (batch and streaming) on confluent-kafka.

    spark.readStream.format("ticdc-kafka")
        .option("kafka.bootstrap.servers", "host:9092").option("subscribe", "cdc_test")
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 100000)
        .load()

Columns and options are those of Spark's built-in Kafka source (``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``,
``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``kafka.*``), so on a cluster that has the
built-in source, ``format("kafka")`` can take its place.  Built here because Spark's own
connector jar is not always available (Python-only environments); offsets are plain dicts
``{topic: {partition: offset}}`` that Spark keeps in the query's checkpoint.  One Spark
partition reads one Kafka partition's offset range, yielding Arrow batches.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.io.kafka import client_config, redact
from ticdc_spark.spark.kafka_schema import KafkaColumnsSource, empty_columns, record_batch

__all__ = ["KafkaDataSource", "register"]

Offsets = dict[str, dict[str, int]]  # topic -> partition (as text, JSON keys) -> offset
EARLIEST, LATEST = -2, -1
BATCH_ROWS = 10_000


def register(spark: Any) -> None:
    spark.dataSource.register(KafkaDataSource)


@dataclass(frozen=True)
class _Config:
    """The source's options, checked once on the driver."""

    client: dict[str, Any] = field(repr=False)  # credentials: never printed
    subscribe: tuple[str, ...]
    pattern: str | None
    assign: dict[str, list[int]] | None
    starting: str
    ending: str
    max_offsets: int
    fail_on_data_loss: bool
    poll_timeout_s: float

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> _Config:
        lowered = {k.lower(): v for k, v in options.items()}
        client = client_config({k: v for k, v in options.items() if k.startswith("kafka.")})
        if "bootstrap.servers" not in client:
            raise ConfigError("the ticdc-kafka source needs option kafka.bootstrap.servers")
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if lowered.get(k)]
        if len(chosen) != 1:
            raise ConfigError("give exactly one of subscribe, subscribePattern or assign")
        assign = json.loads(lowered["assign"]) if lowered.get("assign") else None
        return cls(
            client=client,
            subscribe=tuple(
                t.strip() for t in lowered.get("subscribe", "").split(",") if t.strip()
            ),
            pattern=lowered.get("subscribepattern"),
            assign={t: [int(p) for p in ps] for t, ps in assign.items()} if assign else None,
            starting=lowered.get("startingoffsets", "latest"),
            ending=lowered.get("endingoffsets", "latest"),
            max_offsets=int(lowered.get("maxoffsetspertrigger", "0") or 0),
            fail_on_data_loss=lowered.get("failondataloss", "true").lower() != "false",
            poll_timeout_s=int(lowered.get("kafkaconsumer.polltimeoutms", "60000")) / 1000,
        )


def topic_partitions(options: Mapping[str, str]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs a source with these options reads, from the broker."""
    metadata = _Metadata(_Config.parse(options))
    try:
        return metadata.partitions()
    finally:
        metadata.close()


# --------------------------------------------------------------------------------------------
# Metadata (driver side).


class _Metadata:
    """Topic partitions and their low/high watermarks."""

    def __init__(self, config: _Config) -> None:
        from confluent_kafka import Consumer

        self.config = config
        self.consumer = Consumer(
            {
                **config.client,
                "group.id": f"ticdc-spark-{uuid.uuid4()}",
                "enable.auto.commit": False,
            }
        )

    def close(self) -> None:
        self.consumer.close()

    def partitions(self) -> list[tuple[str, int]]:
        if self.config.assign is not None:
            return [(t, p) for t, ps in self.config.assign.items() for p in ps]
        try:
            topics = self.consumer.list_topics(timeout=self.config.poll_timeout_s).topics
        except Exception as exc:
            raise TiCDCSparkError(
                f"cannot list Kafka topics ({exc}); client config {redact(self.config.client)}"
            ) from None
        if self.config.pattern is not None:
            names = [t for t in topics if re.fullmatch(self.config.pattern, t)]
        else:
            names = [t for t in self.config.subscribe if t in topics]
        return sorted((t, p) for t in names for p in topics[t].partitions)

    def bounds(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import TopicPartition

        out = {}
        for topic, partition in partitions:
            out[(topic, partition)] = self.consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.config.poll_timeout_s
            )
        return out

    def resolve(self, spec: str, default: int) -> Offsets:
        """Offsets for "earliest", "latest" or a JSON spec (-2 earliest, -1 latest)."""
        parts = self.partitions()
        bounds = self.bounds(parts)
        wanted = _parse_spec(spec, default)
        offsets: Offsets = {}
        for topic, partition in parts:
            low, high = bounds[(topic, partition)]
            asked = wanted.get(topic, {}).get(
                str(partition), wanted.get("*", {}).get("*", EARLIEST)
            )
            value = low if asked == EARLIEST else high if asked == LATEST else asked
            offsets.setdefault(topic, {})[str(partition)] = value
        return offsets


def _parse_spec(spec: str, default: int) -> dict[str, dict[str, int]]:
    if spec in ("earliest", "latest"):
        return {"*": {"*": EARLIEST if spec == "earliest" else LATEST}}
    try:
        parsed = json.loads(spec)
        return {t: {str(p): int(o) for p, o in ps.items()} for t, ps in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"offsets must be earliest, latest or JSON, not {spec!r}") from None


def _ranges(start: Offsets, end: Offsets, config: _Config) -> list[InputPartition]:
    out = []
    for topic, partitions in sorted(end.items()):
        for partition, until in sorted(partitions.items(), key=lambda p: int(p[0])):
            since = start.get(topic, {}).get(partition, 0)
            if until > since:
                out.append(InputPartition((config, topic, int(partition), since, until)))
    return out


# --------------------------------------------------------------------------------------------
# Readers.


class _BatchReader(DataSourceReader):
    def __init__(self, config: _Config) -> None:
        self.config = config

    def partitions(self) -> list[InputPartition]:
        metadata = _Metadata(self.config)
        try:
            start = metadata.resolve(
                self.config.starting if self.config.starting != "latest" else "earliest", EARLIEST
            )
            end = metadata.resolve(self.config.ending, LATEST)
        finally:
            metadata.close()
        return _ranges(start, end, self.config)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_range(*partition.value)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, config: _Config) -> None:
        self.config = config
        self.target: Offsets | None = None

    def initialOffset(self) -> Offsets:
        metadata = _Metadata(self.config)
        try:
            return metadata.resolve(self.config.starting, LATEST)
        finally:
            metadata.close()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.config.max_offsets > 0:
            return ReadMaxRows(self.config.max_offsets)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        latest = self.target or self._latest()
        end = {
            t: {p: max(o, start.get(t, {}).get(p, 0)) for p, o in ps.items()}
            for t, ps in latest.items()
        }
        if isinstance(limit, ReadMaxRows):
            end = _limit(start, end, limit.max_rows)
        return end

    def _latest(self) -> Offsets:
        metadata = _Metadata(self.config)
        try:
            parts = metadata.partitions()
            bounds = metadata.bounds(parts)
        finally:
            metadata.close()
        latest: Offsets = {}
        for (topic, partition), (_low, high) in bounds.items():
            latest.setdefault(topic, {})[str(partition)] = high
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        return _ranges(start, end, self.config)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read_range(*partition.value)

    def commit(self, end: Offsets) -> None:
        """Offsets live in Spark's checkpoint; nothing is committed to Kafka."""


def _limit(start: Offsets, end: Offsets, budget: int) -> Offsets:
    """Spread ``budget`` records over the partitions in proportion to their backlog, at least
    one record for every partition that has any (none is starved)."""
    backlog = {
        (t, p): o - start.get(t, {}).get(p, 0) for t, ps in end.items() for p, o in ps.items()
    }
    total = sum(v for v in backlog.values() if v > 0)
    if total <= budget:
        return end
    limited: Offsets = {}
    for (topic, partition), waiting in backlog.items():
        since = start.get(topic, {}).get(partition, 0)
        share = max(1, budget * waiting // total) if waiting > 0 else 0
        limited.setdefault(topic, {})[partition] = since + min(waiting, share)
    return limited


def _read_range(
    config: _Config, topic: str, partition: int, since: int, until: int
) -> Iterator[Any]:
    """The records [since, until) of one partition, as Arrow batches (runs in a task)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **config.client,
            "group.id": f"ticdc-spark-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, partition, since)])
    columns = empty_columns()
    position, deadline = since, time.monotonic() + config.poll_timeout_s
    try:
        while position < until:
            batch = consumer.consume(num_messages=min(BATCH_ROWS, until - position), timeout=1)
            if not batch:
                if time.monotonic() > deadline:
                    raise TiCDCSparkError(
                        f"timed out reading {topic}/{partition} offsets {since}..{until} at "
                        f"{position} (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + config.poll_timeout_s
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    _on_error(error, config, topic, partition, position)
                    return
                offset = int(message.offset() or 0)
                if offset >= until:
                    position = until
                    break
                position = offset + 1
                _append(columns, message)
            if len(columns["offset"]) >= BATCH_ROWS:
                yield record_batch(columns)
                columns = empty_columns()
    finally:
        consumer.close()
    if columns["offset"]:
        yield record_batch(columns)


def _on_error(error: Any, config: _Config, topic: str, partition: int, position: int) -> None:
    from confluent_kafka import KafkaError

    lost = error.code() == KafkaError.OFFSET_OUT_OF_RANGE
    if lost and not config.fail_on_data_loss:
        return
    hint = " (data lost; set failOnDataLoss=false to go on)" if lost else ""
    raise TiCDCSparkError(f"Kafka error at {topic}/{partition}@{position}: {error}{hint}")


def _append(columns: dict[str, list[Any]], message: Any) -> None:
    kind, millis = message.timestamp()
    columns["key"].append(message.key())
    columns["value"].append(message.value())
    columns["topic"].append(message.topic())
    columns["partition"].append(message.partition())
    columns["offset"].append(message.offset())
    columns["timestamp"].append(millis if kind else None)
    columns["timestampType"].append(max(0, kind - 1))  # librdkafka 1/2 -> Spark 0/1
    headers = message.headers()
    columns["headers"].append([{"key": k, "value": v} for k, v in headers] if headers else None)


class KafkaDataSource(KafkaColumnsSource):
    """Kafka topics with Spark's Kafka-source columns."""

    source_name = "ticdc-kafka"
    readers = (_BatchReader, _StreamReader)

    def config(self) -> _Config:
        return _Config.parse(self.options)
