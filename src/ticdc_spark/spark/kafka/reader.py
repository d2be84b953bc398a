"""Reading one planned offset range of one Kafka partition in a Spark task, as Arrow batches
with the columns of Spark's Kafka source."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.spark.kafka.options import SourceConfig, report_data_loss
from ticdc_spark.spark.kafka.schema import empty_columns, record_batch

__all__ = ["BATCH_ROWS", "read_partition", "read_range"]

BATCH_ROWS = 10_000


def read_partition(partition: InputPartition | None) -> Iterator[Any]:
    """One planned range; nothing for the ``InputPartition(None)`` Spark hands a batch source
    that planned no range (an empty topic, a pattern matching nothing, a caught-up range)."""
    if partition is None or partition.value is None:
        return iter(())
    return read_range(*partition.value)


def read_range(
    config: SourceConfig, topic: str, partition: int, since: int, until: int
) -> Iterator[Any]:
    """The records [since, until) of one partition, as Arrow batches (runs in a task).

    The consumer never resets its offset by itself (``auto.offset.reset`` is ``error``, as
    Spark's readers use ``none``): offsets the broker no longer has are data loss, which
    fails the query, or with ``failOnDataLoss=false`` is logged and skipped, the read going
    on from the earliest offset left (Spark's KafkaDataConsumer).

    A range is finished by the consumer's position, not by its last record: offsets that
    are never delivered (transaction markers; aborted records under read_committed) may end
    it, and the consumer moves past them (at the end of the log it says so with an EOF)."""
    consumer = _range_consumer(config, topic, partition, since)
    columns = empty_columns()
    position, deadline = since, time.monotonic() + config.poll_timeout_s
    try:
        while position < until:
            batch = consumer.consume(num_messages=min(BATCH_ROWS, until - position), timeout=1)
            if not batch:
                # nothing delivered: the consumer may still have moved past invisible offsets
                position = max(position, min(_position(consumer, topic, partition), until))
                if position < until and time.monotonic() > deadline:
                    raise TiCDCSparkError(
                        f"timed out reading {topic}/{partition} offsets {since}..{until} at "
                        f"{position} (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            deadline = time.monotonic() + config.poll_timeout_s
            position = _take(batch, columns, consumer, config, topic, partition, position, until)
            if len(columns["offset"]) >= BATCH_ROWS:
                yield record_batch(columns, config.include_headers)
                columns = empty_columns()
    finally:
        consumer.close()
    if columns["offset"]:
        yield record_batch(columns, config.include_headers)


def _range_consumer(config: SourceConfig, topic: str, partition: int, since: int) -> Any:
    """A consumer assigned to ``partition`` at ``since``: it reports the end of the log (an
    EOF, which may finish a range ending in invisible offsets) and never resets its offset
    by itself (an offset the broker lost is an error here, for :func:`_recover`)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **config.consumer_config("executor"),
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
        }
    )
    consumer.assign([TopicPartition(topic, partition, since)])
    return consumer


def _take(
    batch: list[Any],
    columns: dict[str, list[Any]],
    consumer: Any,
    config: SourceConfig,
    topic: str,
    partition: int,
    position: int,
    until: int,
) -> int:
    """Append to ``columns`` the records of one consumed ``batch`` below ``until``, and return
    the position after them: past an EOF's offset, the offset the read goes on from after a
    data loss, or ``until`` once a record reaches it.  Any other Kafka error fails the task."""
    from confluent_kafka import KafkaError

    for message in batch:
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                # the end of the log: what lies below it was delivered or is invisible
                position = max(position, min(int(message.offset() or 0), until))
                continue
            if error.code() not in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                raise TiCDCSparkError(f"Kafka error at {topic}/{partition}@{position}: {error}")
            # what else this batch holds was fetched before the reset
            return _recover(consumer, config, topic, partition, position, until)
        offset = int(message.offset() or 0)
        if offset >= until:
            return until
        position = offset + 1
        _append(columns, message)
    return position


def _position(consumer: Any, topic: str, partition: int) -> int:
    """The consumer's position: past the records delivered and the invisible ones after
    them (a negative number while it has none)."""
    from confluent_kafka import TopicPartition

    return int(consumer.position([TopicPartition(topic, partition)])[0].offset)


def _recover(
    consumer: Any, config: SourceConfig, topic: str, partition: int, position: int, until: int
) -> int:
    """After the broker said ``position`` is out of its range: report the data loss, and
    return where the read goes on (the earliest offset the broker still has, or ``until``
    when none of [position, until) is left), the consumer assigned there."""
    from confluent_kafka import TopicPartition

    low, high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=config.poll_timeout_s
    )
    if position < low:
        lost = f"records [{position}, {min(low, until)}) were deleted"
    else:
        lost = "the partition ends below it (re-created?)"
    report_data_loss(
        config,
        f"cannot fetch offset {position} of {topic}-{partition}: the broker has offsets "
        f"[{low}, {high}), {lost}",
    )
    resume = max(int(low), position)
    if resume >= until or resume >= high:
        return until  # nothing of the range is left
    consumer.unassign()
    consumer.assign([TopicPartition(topic, partition, resume)])
    return resume


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
