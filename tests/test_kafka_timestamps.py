"""The ticdc-kafka source's timestamp options, with Spark's semantics, against Apache Kafka
(whose ListOffsets by timestamp the earlier test brokers did not implement)."""

from __future__ import annotations

import uuid

import pytest

from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.io.kafka import KafkaProducerSink
from ticdc_spark.spark.kafka.offsets import offsets_at_times
from ticdc_spark.spark.kafka.options import Timestamps
from ticdc_spark.spark.kafka.source import KafkaDataSource


@pytest.fixture(scope="module")
def mock_cluster(kafka_cluster):  # type: ignore[no-untyped-def]
    return kafka_cluster


def _topic(bootstrap: str) -> str:
    """A topic of 4 partitions, records 0..2 in partition 0 at times 1000, 2000, 3000 ms."""
    from confluent_kafka import Producer

    topic = f"ts-{uuid.uuid4().hex[:8]}"
    sink = KafkaProducerSink(bootstrap)
    sink.create_topics([topic], 4)
    sink.close()
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        producer.produce(topic, b"%d" % i, partition=0, timestamp=1000 * (i + 1))
    producer.flush(10)
    return topic


def _source(bootstrap: str, topic: str, **options: str) -> KafkaDataSource:
    return KafkaDataSource({"kafka.bootstrap.servers": bootstrap, "subscribe": topic, **options})


def _ranges(source: KafkaDataSource) -> list[tuple[str, int, int, int]]:
    return [p.value[1:] for p in source.reader(source.schema()).partitions()]


def test_found_offsets_plan_the_read_and_no_match_follows_the_strategy() -> None:
    bounds = {("t", 0): (0, 10), ("t", 1): (5, 8)}
    every = Timestamps("startingTimestamp", every=1500)
    found = {("t", 0): 4, ("t", 1): 6}
    assert offsets_at_times(found, every, bounds, True) == {"t": {"0": 4, "1": 6}}
    each = Timestamps("startingOffsetsByTimestamp", each={"t": {"0": 1500, "1": 9000}})
    unmatched = {("t", 0): 4, ("t", 1): -1}
    with pytest.raises(TiCDCSparkError, match=r"topic-partition t-1 and timestamp 9000 "):
        offsets_at_times(unmatched, each, bounds, True)
    # strategy latest, and every ending time: the partition's end
    assert offsets_at_times(unmatched, each, bounds, False) == {"t": {"0": 4, "1": 8}}


@pytest.mark.kafka
def test_a_starting_time_no_record_reaches_fails_or_starts_at_the_end(mock_cluster) -> None:
    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    failing = _source(bootstrap, topic, startingTimestamp="4000")
    with pytest.raises(TiCDCSparkError, match=rf"{topic}-0 and timestamp 4000 "):
        _ranges(failing)
    # startingTimestamp outranks startingOffsets: no records, where earliest would read 3
    latest = _source(
        bootstrap,
        topic,
        startingTimestamp="4000",
        startingOffsets="earliest",
        startingOffsetsByTimestampStrategy="LATEST",
    )
    assert _ranges(latest) == []
    assert _ranges(_source(bootstrap, topic, startingOffsets="earliest")) == [(topic, 0, 0, 3)]
    # outranked, a batch startingOffsets=latest is not refused (as in Spark)
    outranked = _source(
        bootstrap,
        topic,
        startingOffsets="latest",
        startingOffsetsByTimestamp=_each(topic, 4000),
        startingOffsetsByTimestampStrategy="latest",
    )
    assert _ranges(outranked) == []


def _each(topic: str, millis: int) -> str:
    return "{" + f'"{topic}": {{' + ", ".join(f'"{p}": {millis}' for p in range(4)) + "}}"


@pytest.mark.kafka
def test_a_time_that_matches_a_record_starts_or_ends_there(mock_cluster) -> None:
    """Each partition starts (ends) at its earliest offset whose time is at or after the
    one asked: 1500 is offset 1 of partition 0; the empty partitions match nothing."""
    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    assert _ranges(
        _source(
            bootstrap, topic, startingTimestamp="1500", startingOffsetsByTimestampStrategy="latest"
        )
    ) == [(topic, 0, 1, 3)]
    assert _ranges(_source(bootstrap, topic, endingTimestamp="2000")) == [(topic, 0, 0, 1)]
    each = f'{{"{topic}": {{"0": 3000, "1": 1, "2": 1, "3": 1}}}}'
    with pytest.raises(TiCDCSparkError, match=rf"{topic}-1 and timestamp 1 "):
        _ranges(_source(bootstrap, topic, startingOffsetsByTimestamp=each))


@pytest.mark.kafka
def test_an_ending_time_no_record_reaches_ends_at_the_latest(mock_cluster) -> None:
    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    for options in (
        {"endingTimestamp": "9000", "endingOffsets": '{"x": {"0": 0}}'},
        {"endingOffsetsByTimestamp": _each(topic, 9000)},
    ):
        assert _ranges(_source(bootstrap, topic, **options)) == [(topic, 0, 0, 3)]


@pytest.mark.kafka
def test_offsets_by_timestamp_must_name_every_partition(mock_cluster) -> None:
    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    partial = f'{{"{topic}": {{"0": 1000}}}}'
    for option in ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(ConfigError, match=rf"if {option} .* must name every partition"):
            _ranges(_source(bootstrap, topic, **{option: partial}))


@pytest.mark.kafka
def test_a_stream_resolves_its_starting_time_once(mock_cluster, tmp_path) -> None:
    """As startingOffsets: fixed when first asked, and kept in initialOffsetsPath."""
    from confluent_kafka import Producer

    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    kept = str(tmp_path / "initial.json")
    options = {
        "startingTimestamp": "4000",
        "startingOffsetsByTimestampStrategy": "latest",
        "initialOffsetsPath": kept,
    }
    first = _source(bootstrap, topic, **options)
    reader = first.streamReader(first.schema())
    assert reader.initialOffset() == {topic: {"0": 3, "1": 0, "2": 0, "3": 0}}
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"later", partition=0, timestamp=5000)
    producer.flush(10)
    assert reader.initialOffset() == {topic: {"0": 3, "1": 0, "2": 0, "3": 0}}
    again = _source(bootstrap, topic, **options)
    restarted = again.streamReader(again.schema())
    assert restarted.initialOffset() == {topic: {"0": 3, "1": 0, "2": 0, "3": 0}}


@pytest.mark.kafka
def test_a_batch_starting_after_its_end_fails_as_sparks_reader(mock_cluster) -> None:
    bootstrap = mock_cluster.bootstrap
    topic = _topic(bootstrap)
    spec = '{"%s": {"0": %d, "1": 0, "2": 0, "3": 0}}'
    inverted = _source(
        bootstrap, topic, startingOffsets=spec % (topic, 2), endingOffsets=spec % (topic, 1)
    )
    with pytest.raises(TiCDCSparkError, match=r"Beginning offset 2 is after the ending offset 1"):
        _ranges(inverted)
