"""The ticdc-kafka source against real brokers: Spark's semantics where data could be lost.

Tansu (tests/kafka_broker.py) for the ordinary cases; librdkafka's built-in mock cluster for
what Tansu cannot show (it never deletes records).
"""

from __future__ import annotations

import uuid

import pytest

from kafka_broker import ONE_RECORD_PER_REQUEST
from ticdc_spark.codec import Message
from ticdc_spark.io.kafka import KafkaProducerSink


def _topic(bootstrap: str, partitions: int, records: int, config: dict | None = None) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    sink = KafkaProducerSink(bootstrap, config={**ONE_RECORD_PER_REQUEST, **(config or {})})
    sink.create_topics([name], partitions)
    if records:
        sink.write(
            [
                Message(b"k%d" % i, b"v%d" % i, topic=name, partition=i % partitions)
                for i in range(records)
            ]
        )
    sink.close()
    return name


def _batch(spark, bootstrap: str, **options: str):  # type: ignore[no-untyped-def]
    from ticdc_spark.spark.kafka_source import register

    register(spark)
    reader = spark.read.format("ticdc-kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.kafka
@pytest.mark.spark
def test_a_batch_read_with_nothing_to_read_is_empty(spark, kafka_broker: str) -> None:
    """Spark hands a source planning no range one partition of None: no TypeError."""
    empty = _topic(kafka_broker, 2, 0)
    full = _topic(kafka_broker, 2, 6)
    caught_up = f'{{"{full}": {{"0": 3, "1": 3}}}}'
    reads = [
        _batch(spark, kafka_broker, subscribe=empty, startingOffsets="earliest"),
        _batch(spark, kafka_broker, subscribe=full, startingOffsets=caught_up),
        _batch(spark, kafka_broker, subscribePattern="no-such-topic-.*"),
        _batch(spark, kafka_broker, subscribe=full, endingOffsets="earliest"),
    ]
    for frame in reads:
        assert frame.collect() == []
    assert _batch(spark, kafka_broker, subscribe=full).count() == 6
