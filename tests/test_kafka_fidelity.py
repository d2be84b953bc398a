"""Our Kafka source beside Spark's own (spark-sql-kafka 4.1.1), against Apache Kafka: the
same rows and the same failures, case by case (docs/kafka-source.md tables the outcome).

Each case runs both sources as ``replicate --trigger once`` runs them (tests/kafka_runs.py)
and asserts what each read or why it stopped, then that the two agree.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kafka_runs import (
    KAFKA_SOURCES,
    Run,
    delete_head,
    low_watermark,
    new_topic,
    produce,
    recreate,
    run_once,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def _both(spark: Any, source: str, root: Path, **options: str) -> dict[str, Run]:
    return {
        ks: run_once(spark, ks, source, root / ks, {"startingOffsets": "earliest", **options})
        for ks in KAFKA_SOURCES
    }


def _offsets(run: Run) -> list[tuple[int, int]]:
    return [(p, o) for p, o, _ in run.rows]


def test_every_record_once_across_restarts(spark, kafka_broker: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_broker, 3, 30)
    source = f"kafka://{kafka_broker}/{topic}"
    first = _both(spark, source, tmp_path)
    assert first["ticdc"].rows == first["spark"].rows
    assert len(first["ticdc"].rows) == 30
    produce(kafka_broker, topic, [b"late"])
    again = _both(spark, source, tmp_path)
    assert again["ticdc"].rows == again["spark"].rows == [(0, 10, b"late")]


def test_empty_ranges_read_nothing(spark, kafka_broker: str, tmp_path: Path) -> None:
    """No rows; at most one micro-batch of none (a new query's first)."""
    empty = new_topic(kafka_broker, 2)
    full = new_topic(kafka_broker, 2, 6)
    caught_up = f'{{"{full}": {{"0": 3, "1": 3}}}}'
    for topic, options in ((empty, {}), (full, {"startingOffsets": caught_up})):
        runs = _both(spark, f"kafka://{kafka_broker}/{topic}", tmp_path / topic, **options)
        for run in runs.values():
            assert run.rows == [] and not run.failed and set(run.batches) <= {0}


def test_starting_offsets(spark, kafka_broker: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_broker, 3, 9)
    source = f"kafka://{kafka_broker}/{topic}"
    latest = _both(spark, source, tmp_path / "latest", startingOffsets="latest")
    assert latest["ticdc"].rows == latest["spark"].rows == []
    spec = f'{{"{topic}": {{"0": 2, "1": -2, "2": -1}}}}'
    chosen = _both(spark, source, tmp_path / "json", startingOffsets=spec)
    assert _offsets(chosen["ticdc"]) == [(0, 2), (1, 0), (1, 1), (1, 2)]
    assert chosen["ticdc"].rows == chosen["spark"].rows
    partial = f'{{"{topic}": {{"0": 2}}}}'
    refused = _both(spark, source, tmp_path / "partial", startingOffsets=partial)
    assert refused["ticdc"].failed and refused["spark"].failed  # must name every partition


def test_starting_offsets_by_timestamp(spark, kafka_broker: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_broker, 2)
    for i, millis in enumerate((1000, 2000, 3000)):
        produce(kafka_broker, topic, [b"t%d" % i], timestamp=millis)
    produce(kafka_broker, topic, [b"-", b"p1"], partitions=2, timestamp=500)  # (one to each)
    source = f"kafka://{kafka_broker}/{topic}"
    each = f'{{"{topic}": {{"0": 1500, "1": 0}}}}'
    runs = _both(spark, source, tmp_path / "each", startingOffsetsByTimestamp=each)
    expected = [(0, 1, b"t1"), (0, 2, b"t2"), (0, 3, b"-"), (1, 0, b"p1")]
    assert runs["ticdc"].rows == runs["spark"].rows == expected
    every = _both(
        spark,
        source,
        tmp_path / "every",
        startingTimestamp="2500",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert every["ticdc"].rows == every["spark"].rows == [(0, 2, b"t2"), (0, 3, b"-")]
    unmatched = _both(spark, source, tmp_path / "none", startingTimestamp="9000")
    assert unmatched["ticdc"].failed and unmatched["spark"].failed
    assert "No offset matched" in str(unmatched["ticdc"].error)


def test_max_offsets_per_trigger_bounds_each_micro_batch(
    spark, kafka_broker: str, tmp_path: Path
) -> None:
    topic = new_topic(kafka_broker, 3, 60)
    runs = _both(spark, f"kafka://{kafka_broker}/{topic}", tmp_path, maxOffsetsPerTrigger="25")
    assert runs["ticdc"].rows == runs["spark"].rows and len(runs["ticdc"].rows) == 60
    assert runs["ticdc"].batches == runs["spark"].batches == [24, 24, 12]  # spread by backlog


def test_min_partitions_splits_the_read(spark, kafka_broker: str) -> None:
    from ticdc_spark.spark.kafka.source import register

    register(spark)
    topic = new_topic(kafka_broker, 2, 40)
    counts = {}
    for name in ("ticdc-kafka", "kafka"):
        frame = (
            spark.read.format(name)
            .option("kafka.bootstrap.servers", kafka_broker)
            .option("subscribe", topic)
            .option("minPartitions", "5")
            .load()
        )
        counts[name] = (frame.rdd.getNumPartitions(), frame.count())
    assert counts["ticdc-kafka"] == counts["kafka"] == (6, 40)  # 20/40 x 5 rounds up, twice


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_transaction_markers_at_range_ends(
    spark, kafka_broker: str, tmp_path: Path, isolation: str
) -> None:
    """Committed 0-2 (marker 3), aborted 4-5 (marker 6), committed 7 (marker 8): micro-batches
    of at most 4 offsets end on markers and inside the aborted records."""
    from confluent_kafka import Producer

    topic = new_topic(kafka_broker, 1)
    producer = Producer({"bootstrap.servers": kafka_broker, "transactional.id": topic})
    producer.init_transactions(30)
    for values, commit in (([b"c0", b"c1", b"c2"], True), ([b"a0", b"a1"], False), ([b"c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    runs = _both(
        spark,
        f"kafka://{kafka_broker}/{topic}",
        tmp_path,
        maxOffsetsPerTrigger="4",
        **{"kafka.isolation.level": isolation},
    )
    committed = [(0, 0, b"c0"), (0, 1, b"c1"), (0, 2, b"c2"), (0, 7, b"c3")]
    aborted = [(0, 4, b"a0"), (0, 5, b"a1")]
    expected = committed if isolation == "read_committed" else sorted(committed + aborted)
    assert runs["ticdc"].rows == expected, runs["ticdc"]
    assert runs["spark"].rows == expected, runs["spark"]


def _first_runs(spark: Any, source: str, root: Path) -> None:
    """A finished run per source and failOnDataLoss value, each with its own checkpoint."""
    for ks in KAFKA_SOURCES:
        for lenient in ("true", "false"):
            run = run_once(
                spark, ks, source, root / f"{ks}-{lenient}", {"startingOffsets": "earliest"}
            )
            assert not run.failed, run.error


def _second_runs(spark: Any, source: str, root: Path) -> dict[tuple[str, str], Run]:
    return {
        (ks, fail): run_once(
            spark,
            ks,
            source,
            root / f"{ks}-{'true' if fail == 'true' else 'false'}",
            {"startingOffsets": "earliest", "failOnDataLoss": fail},
        )
        for ks in KAFKA_SOURCES
        for fail in ("true", "false")
    }


@pytest.mark.parametrize(
    ("before", "after", "left"),
    [
        # offsets going backwards: re-created with fewer records, the end below the checkpoint
        # (records 0-1 of the new topic lie below its offset 5: read by neither)
        ((1, 5), (1, 2), []),
        # partitions gone: re-created with one partition of two (the checkpoint is at 2)
        ((2, 4), (1, 3), [(0, 2, b"r2")]),
    ],
)
def test_a_topic_deleted_and_created_again(
    spark,
    kafka_broker: str,
    tmp_path: Path,
    before: tuple[int, int],
    after: tuple[int, int],
    left: list[Any],
) -> None:
    """Data loss (failOnDataLoss) or, with false, reported and the query goes on from the new
    ends, by both."""
    topic = new_topic(kafka_broker, *before)
    source = f"kafka://{kafka_broker}/{topic}"
    _first_runs(spark, source, tmp_path)
    recreate(kafka_broker, topic, *after)
    runs = _second_runs(spark, source, tmp_path)
    assert runs["ticdc", "true"].failed and runs["spark", "true"].failed
    assert runs["ticdc", "false"].rows == runs["spark", "false"].rows == left
    assert not runs["ticdc", "false"].failed and not runs["spark", "false"].failed


def test_retention_deleting_unread_records(spark, kafka_broker: str, tmp_path: Path) -> None:
    """Retention by time deletes a partition's oldest segment (records of 1970) before the
    query read it: data loss, or with failOnDataLoss=false the read goes on from the
    earliest offset left."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = new_topic(kafka_broker, 1, 0, {"segment.ms": "100"})
    source = f"kafka://{kafka_broker}/{topic}"
    _first_runs(spark, source, tmp_path)  # (checkpoints at offset 0)
    produce(kafka_broker, topic, [b"old%d" % i for i in range(5)], timestamp=1000)
    time.sleep(0.3)  # the next record rolls a new segment
    produce(kafka_broker, topic, [b"new%d" % i for i in range(3)])
    admin = AdminClient({"bootstrap.servers": kafka_broker})
    resource = ConfigResource("topic", topic, set_config={"retention.ms": "3600000"})
    for future in admin.alter_configs([resource]).values():
        future.result(30)
    deadline = time.monotonic() + 60
    while low_watermark(kafka_broker, topic, 0) < 5:
        assert time.monotonic() < deadline, "retention did not delete the old segment"
        time.sleep(0.5)
    runs = _second_runs(spark, source, tmp_path)
    assert runs["ticdc", "true"].failed and runs["spark", "true"].failed
    new = [(0, 5, b"new0"), (0, 6, b"new1"), (0, 7, b"new2")]
    assert runs["ticdc", "false"].rows == runs["spark", "false"].rows == new


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_records_deleted_under_a_running_query(
    spark, kafka_broker: str, tmp_path: Path, fail_on_data_loss: str
) -> None:
    """Records deleted (as retention would) while the query runs, past where it is.  Ours
    reads each range with a new consumer: the deleted records are data loss (failed, or
    skipped and logged).  Spark's keeps a consumer per partition on the executor across
    micro-batches, with the records it fetched ahead: it reads the deleted ones it holds
    already (all 30 here), loses nothing either."""
    runs = {}
    for ks in KAFKA_SOURCES:
        topic = new_topic(kafka_broker, 1, 30)

        def trim(batch_id: int, topic: str = topic) -> None:
            if batch_id == 0:
                delete_head(kafka_broker, topic, 0, 20)

        runs[ks] = run_once(
            spark,
            ks,
            f"kafka://{kafka_broker}/{topic}",
            tmp_path / ks,
            {
                "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": "5",
                "failOnDataLoss": fail_on_data_loss,
            },
            on_batch=trim,
        )
    if fail_on_data_loss == "true":
        assert runs["ticdc"].failed and _offsets(runs["ticdc"]) == [(0, o) for o in range(5)]
        assert "records [5, 10) were deleted" in str(runs["ticdc"].error)
    else:
        assert not runs["ticdc"].failed
        assert _offsets(runs["ticdc"]) == [(0, o) for o in (*range(5), *range(20, 30))]
    assert not runs["spark"].failed and _offsets(runs["spark"]) == [(0, o) for o in range(30)]
