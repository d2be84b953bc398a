"""Running a Kafka source to its end as ``replicate --trigger once`` does, on either Kafka
source (``ticdc``: ours; ``spark``: Spark's spark-sql-kafka), collecting what it read: the
tests that compare the two sources side by side."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KAFKA_SOURCES = ("ticdc", "spark")


@dataclass
class Run:
    """What one run read: (partition, offset, value) rows, the rows of each micro-batch, and
    the error that stopped it (None: it finished)."""

    rows: list[tuple[int, int, bytes]] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def run_once(
    spark: Any,
    kafka_source: str,
    source: str,
    checkpoint: Path,
    options: Mapping[str, str] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> Run:
    """Read ``source`` (kafka://...) from ``checkpoint`` up to the end there is when it
    starts, in micro-batches, as ``replicate --trigger once``; ``on_batch(batch_id)`` after
    each micro-batch's rows were collected."""
    from ticdc_spark.spark.sources import read_source
    from ticdc_spark.spark.trigger import once_options, start_query

    ours = kafka_source == "ticdc"
    chosen = once_options(options or {}, "once") if ours else dict(options or {})
    frame = read_source(spark, source, chosen, str(checkpoint), kafka_source)
    run = Run()

    def collect(df: Any, batch_id: int) -> None:
        got = [
            (r.partition, r.offset, bytes(r.value) if r.value is not None else b"")
            for r in df.select("partition", "offset", "value").collect()
        ]
        run.rows.extend(got)
        run.batches.append(len(got))
        if on_batch is not None:
            on_batch(batch_id)

    writer = frame.writeStream.foreachBatch(collect)
    writer = writer.option("checkpointLocation", str(checkpoint / "spark"))
    query = start_query(writer, "once", ours)
    try:
        assert query.awaitTermination(300), "the run did not finish in 300 s"
    except Exception as exc:
        if isinstance(exc, AssertionError):
            raise
        run.error = str(exc)
    run.rows.sort()
    return run


def new_topic(
    bootstrap: str,
    partitions: int,
    records: int = 0,
    config: Mapping[str, str] | None = None,
    prefix: str = "f",
) -> str:
    """A topic of ``partitions`` with ``records`` spread round-robin (value ``v<i>``)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, replication_factor=-1, config=dict(config or {}))
    for future in admin.create_topics([topic]).values():
        future.result(30)
    produce(bootstrap, name, [b"v%d" % i for i in range(records)], partitions)
    return name


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    partitions: int = 1,
    timestamp: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, **(settings or {})})
    for i, value in enumerate(values):
        extra = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value, partition=i % partitions, **extra)
    assert producer.flush(30) == 0


def delete_head(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """Delete a partition's records below ``before`` (Kafka's DeleteRecords: what retention
    does to a partition's oldest segments, at a chosen offset)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(30)


def recreate(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Delete ``topic`` and create it again with ``partitions`` and ``records``."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=30).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while True:  # (the name is refused while the deletion is still going on)
        try:
            for future in admin.create_topics([NewTopic(topic, partitions, -1)]).values():
                future.result(30)
            break
        except Exception:
            assert time.monotonic() < deadline, "the deleted topic could not be created again"
            time.sleep(0.5)
    produce(bootstrap, topic, [b"r%d" % i for i in range(records)], partitions)


def low_watermark(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        low, _high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low)
    finally:
        consumer.close()
