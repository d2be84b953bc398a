"""The ticdc-kafka source against Apache Kafka (tests/kafka_broker.py): Spark's semantics
where data could be lost."""

from __future__ import annotations

import re
import uuid

import pytest

from stream_calls import resumed_at
from ticdc_spark.codec import Message
from ticdc_spark.errors import ConfigError
from ticdc_spark.io.kafka import KafkaProducerSink


def _topic(bootstrap: str, partitions: int, records: int, config: dict | None = None) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    sink = KafkaProducerSink(bootstrap, config=config)
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
    from ticdc_spark.spark.kafka.source import register

    register(spark)
    reader = spark.read.format("ticdc-kafka").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.kafka
@pytest.mark.spark
def test_a_batch_read_with_nothing_to_read_is_empty(spark, kafka_broker: str) -> None:
    """Spark hands a source planning no range one partition of None: no TypeError.
    (endingOffsets=earliest, also in the issue, Spark refuses: see the options test.)"""
    empty = _topic(kafka_broker, 2, 0)
    full = _topic(kafka_broker, 2, 6)
    caught_up = f'{{"{full}": {{"0": 3, "1": 3}}}}'
    reads = [
        _batch(spark, kafka_broker, subscribe=empty, startingOffsets="earliest"),
        _batch(spark, kafka_broker, subscribe=full, startingOffsets=caught_up),
        _batch(spark, kafka_broker, subscribePattern="no-such-topic-.*"),
        _batch(
            spark, kafka_broker, subscribe=full, endingOffsets=f'{{"{full}": {{"0": 0, "1": 0}}}}'
        ),
    ]
    for frame in reads:
        assert frame.collect() == []
    assert _batch(spark, kafka_broker, subscribe=full).count() == 6


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    sink = KafkaProducerSink(bootstrap)
    sink.write([Message(None, v, topic=topic, partition=partition) for v in values])
    sink.close()


def _stream_reader(bootstrap: str, **options: str):  # type: ignore[no-untyped-def]
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    source = KafkaDataSource({"kafka.bootstrap.servers": bootstrap, **options})
    return source.streamReader(source.schema())


@pytest.mark.kafka
def test_initial_offsets_are_resolved_once(kafka_broker: str, tmp_path) -> None:
    """Spark asks for the initial offsets more than once (again when batch 0 is re-run):
    "latest" must mean the latest when first asked, in this run and after a restart."""
    topic = _topic(kafka_broker, 1, 2)
    kept = str(tmp_path / "initial.json")
    reader = _stream_reader(kafka_broker, subscribe=topic, startingOffsets="latest")
    stored = _stream_reader(
        kafka_broker, subscribe=topic, startingOffsets="latest", initialOffsetsPath=kept
    )
    assert reader.initialOffset() == stored.initialOffset() == {topic: {"0": 2}}
    _produce(kafka_broker, topic, [b"a", b"b"])
    assert reader.initialOffset() == stored.initialOffset() == {topic: {"0": 2}}
    restarted = _stream_reader(
        kafka_broker, subscribe=topic, startingOffsets="latest", initialOffsetsPath=kept
    )
    assert restarted.initialOffset() == {topic: {"0": 2}}


@pytest.mark.kafka
@pytest.mark.spark
def test_a_failed_batch_0_rerun_reads_its_records(spark, kafka_broker: str, tmp_path) -> None:
    """startingOffsets=latest, batch 0 fails, more records arrive, the query restarts from
    its checkpoint: batch 0 is re-run from the offsets first resolved, nothing is skipped."""
    import time

    from ticdc_spark.spark.sources import read_source
    from ticdc_spark.spark.trigger import once_options, start_query

    topic = _topic(kafka_broker, 1, 2)
    checkpoint = tmp_path / "ckpt"
    source = f"kafka://{kafka_broker}/{topic}"
    seen: list[bytes] = []

    def fail(df, batch_id):  # type: ignore[no-untyped-def]
        if df.count():
            raise RuntimeError("batch 0 fails")

    def collect(df, batch_id):  # type: ignore[no-untyped-def]
        seen.extend(r.value for r in df.select("value").collect())

    def query(handler, trigger: str):  # type: ignore[no-untyped-def]
        options = once_options({"startingOffsets": "latest"}, trigger)
        frame = read_source(spark, source, options, str(checkpoint))
        writer = frame.writeStream.foreachBatch(handler)
        return start_query(writer.option("checkpointLocation", str(checkpoint / "spark")), trigger)

    running = query(fail, "0.2")
    deadline = time.monotonic() + 120
    while not (checkpoint / "kafka-initial-offsets.json").exists():
        assert time.monotonic() < deadline and running.isActive
        time.sleep(0.2)
    _produce(kafka_broker, topic, [b"x2", b"x3", b"x4"])
    with pytest.raises(Exception, match="batch 0 fails"):
        running.awaitTermination(120)
    _produce(kafka_broker, topic, [b"x5", b"x6"])
    assert query(collect, "once").awaitTermination(120)
    assert seen == [b"x2", b"x3", b"x4", b"x5", b"x6"]


def _recreate(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Delete ``topic`` and, with ``partitions`` > 0, create it again with ``records``."""
    import time

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic], operation_timeout=10).values():
        future.result()
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the deleted topic is still listed"
        time.sleep(0.2)
    if partitions:
        sink = KafkaProducerSink(bootstrap)
        sink.create_topics([topic], partitions)
        sink.write([Message(None, b"r%d" % i, topic=topic, partition=0) for i in range(records)])
        sink.close()


@pytest.mark.kafka
def test_offsets_going_backwards_are_data_loss(kafka_broker: str) -> None:
    """A topic deleted and re-created with fewer records: its end offset is below where the
    query is.  Spark reports that as data loss; it was skipped silently (the planner took the
    higher of the checkpoint and the broker's end)."""
    from ticdc_spark.errors import TiCDCSparkError

    topic = _topic(kafka_broker, 1, 5)
    start = _stream_reader(kafka_broker, subscribe=topic, startingOffsets="earliest").latestOffset()
    assert start == {topic: {"0": 5}}
    _recreate(kafka_broker, topic, 1, 2)
    for bound in ({}, {"maxOffsetsPerTrigger": "10"}):
        options = {"subscribe": topic, "startingOffsets": "earliest", **bound}
        failing = _stream_reader(kafka_broker, **options)
        end = resumed_at(failing, start)
        assert end == {topic: {"0": 2}}
        with pytest.raises(TiCDCSparkError, match=r"offset went back from 5 to 2.*failOnDataLoss"):
            failing.partitions(start, end)
        # failOnDataLoss=false: logged, and the query goes on from the new end (as Spark)
        lenient = _stream_reader(kafka_broker, **options, failOnDataLoss="false")
        assert lenient.partitions(start, resumed_at(lenient, start)) == []


@pytest.mark.kafka
def test_partitions_that_disappear_are_data_loss(kafka_broker: str) -> None:
    """A deleted topic was dropped from the offsets silently, and re-read from 0 when it
    came back.  Spark reports it as gone; a partition coming back is a new partition, read
    from its earliest offset."""
    from ticdc_spark.errors import TiCDCSparkError

    kept = _topic(kafka_broker, 1, 3)
    doomed = _topic(kafka_broker, 2, 4)
    options = {"subscribe": f"{kept},{doomed}", "startingOffsets": "earliest"}
    failing = _stream_reader(kafka_broker, **options)
    lenient = _stream_reader(kafka_broker, **options, failOnDataLoss="false")
    start = failing.latestOffset()
    assert start == {kept: {"0": 3}, doomed: {"0": 2, "1": 2}}
    _recreate(kafka_broker, doomed, 0, 0)
    end = resumed_at(failing, start)
    assert end == {kept: {"0": 3}}
    with pytest.raises(TiCDCSparkError, match=rf"{doomed}-0, {doomed}-1 are gone"):
        failing.partitions(start, end)
    assert lenient.partitions(start, end) == []
    # it comes back: read from its earliest offset, a new partition as Spark reads one
    sink = KafkaProducerSink(kafka_broker)
    sink.create_topics([doomed], 1)
    sink.write([Message(None, b"back", topic=doomed, partition=0)])
    sink.close()
    again = resumed_at(lenient, end)
    ranges = [p.value[1:] for p in lenient.partitions(end, again)]
    assert ranges == [(doomed, 0, 0, 1)]


@pytest.fixture(scope="module")
def mock_cluster(kafka_cluster):  # type: ignore[no-untyped-def]
    return kafka_cluster


def delete_head(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """Delete the records of a partition below offset ``before``, as retention deletes a
    partition's oldest segments (Kafka's DeleteRecords: the log start offset moves)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(30)


def _trimmed_topic(bootstrap: str) -> str:
    """Partition 0 of a new topic with offsets 2..11 left of 0..11."""
    from confluent_kafka import Consumer, TopicPartition

    topic = _topic(bootstrap, 1, 12)
    delete_head(bootstrap, topic, 0, 2)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (2, 12)
    consumer.close()
    return topic


def _offsets(batches) -> list[int]:  # type: ignore[no-untyped-def]
    return [o for batch in batches for o in batch.column("offset").to_pylist()]


@pytest.mark.kafka
def test_deleted_offsets_fail_the_read_or_resume_at_the_earliest(mock_cluster) -> None:
    """Records deleted by retention under a planned range: the consumer jumped to the end
    (librdkafka's default auto.offset.reset), skipping records that still exist.  Spark's
    readers fail (failOnDataLoss) or go on from the earliest offset left."""
    from ticdc_spark.errors import TiCDCSparkError
    from ticdc_spark.spark.kafka.options import SourceConfig
    from ticdc_spark.spark.kafka.reader import read_range

    bootstrap = mock_cluster.bootstrap
    topic = _trimmed_topic(bootstrap)
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "kafkaConsumer.pollTimeoutMs": "20000",
    }
    failing = SourceConfig.parse(options)
    lenient = SourceConfig.parse({**options, "failOnDataLoss": "false"})
    with pytest.raises(TiCDCSparkError, match=r"cannot fetch offset 0 .*failOnDataLoss"):
        list(read_range(failing, topic, 0, 0, 12))
    assert _offsets(read_range(lenient, topic, 0, 0, 12)) == list(range(2, 12))
    assert _offsets(read_range(lenient, topic, 0, 0, 2)) == []  # all of it deleted
    assert _offsets(read_range(failing, topic, 0, 2, 12)) == list(range(2, 12))


@pytest.mark.kafka
def test_a_new_partition_missing_its_first_records_is_data_loss(mock_cluster) -> None:
    """A partition that appears (new, or back) with offsets below its earliest deleted."""
    from ticdc_spark.errors import TiCDCSparkError

    bootstrap = mock_cluster.bootstrap
    topic = _trimmed_topic(bootstrap)
    failing = _stream_reader(bootstrap, subscribe=topic)
    lenient = _stream_reader(bootstrap, subscribe=topic, failOnDataLoss="false")
    end = {topic: {"0": 12}}
    with pytest.raises(TiCDCSparkError, match=rf"added partition {topic}-0 starts at offset 2"):
        failing.partitions({}, end)
    assert [p.value[1:] for p in lenient.partitions({}, end)] == [(topic, 0, 2, 12)]


@pytest.mark.kafka
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_a_range_ending_on_a_transaction_marker_completes(mock_cluster, isolation) -> None:
    """Offsets 0-2 a committed transaction, 3 its marker, 4-5 an aborted one, 6 its marker:
    a range ending on a marker never completed (the reader waited for an offset that is never
    delivered, timed out, and the restarted query planned the same range again).  Spark
    finishes a range by the consumer's position; read_committed leaves the aborted ones out."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from ticdc_spark.spark.kafka.options import SourceConfig
    from ticdc_spark.spark.kafka.reader import read_range

    bootstrap = mock_cluster.bootstrap
    topic = f"x-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic})
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"c%d" % i, partition=0)
    producer.commit_transaction(10)
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"a%d" % i, partition=0)
    producer.flush(10)
    producer.abort_transaction(10)
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    assert probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 7)
    probe.close()
    config = SourceConfig.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "kafka.isolation.level": isolation,
            "kafkaConsumer.pollTimeoutMs": "5000",
        }
    )
    for since, until, expected in [
        (0, 7, [0, 1, 2, 4, 5]),  # ends on the abort marker, at the end of the log
        (6, 7, []),  # only that marker
        (0, 4, [0, 1, 2]),  # ends on the commit marker, records after it
        (3, 4, []),
    ]:
        offsets = _offsets(read_range(config, topic, 0, since, until))
        if isolation == "read_committed":
            expected = [o for o in expected if o < 3]
        assert offsets == expected


@pytest.mark.kafka
def test_assigned_partitions_that_disappear_are_data_loss(kafka_broker: str) -> None:
    """assign: a partition that is gone was asked for its offsets regardless (stale or
    failing answers); it is reported as gone like a subscribed one.  A batch read refuses
    assigned partitions that do not exist."""
    from ticdc_spark.errors import TiCDCSparkError
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    kept = _topic(kafka_broker, 1, 1)
    doomed = _topic(kafka_broker, 1, 2)
    assign = f'{{"{kept}": [0], "{doomed}": [0]}}'
    reader = _stream_reader(kafka_broker, assign=assign, startingOffsets="earliest")
    start = reader.latestOffset()
    assert start == {kept: {"0": 1}, doomed: {"0": 2}}
    _recreate(kafka_broker, doomed, 0, 0)
    end = resumed_at(reader, start)
    assert end == {kept: {"0": 1}}
    with pytest.raises(TiCDCSparkError, match=rf"{doomed}-0 are gone"):
        reader.partitions(start, end)
    source = KafkaDataSource(
        {"kafka.bootstrap.servers": kafka_broker, "assign": f'{{"{kept}": [0, 7]}}'}
    )
    with pytest.raises(TiCDCSparkError, match=rf"do not exist: \['{kept}-7'\]"):
        source.reader(source.schema()).partitions()


@pytest.mark.parametrize(
    ("mode", "options", "message"),
    [
        ("batch", {"startingOffsets": "latest"}, "starting offset can't be latest for batch"),
        ("batch", {"startingOffsets": '{"t": {"0": -1}}'}, "startingOffsets for t-0 can't be"),
        ("batch", {"endingOffsets": "Earliest"}, "ending offset can't be earliest for batch"),
        ("batch", {"endingOffsets": '{"t": {"0": -2}}'}, "ending offset for t-0 can't be"),
        ("stream", {"endingOffsets": "latest"}, "ending offset not valid in streaming"),
        ("stream", {"kafka.auto.offset.reset": "latest"}, "'auto.offset.reset' is not supported"),
        ("batch", {"kafka.enable.auto.commit": "true"}, "'enable.auto.commit' is not supported"),
        ("batch", {"kafka.key.deserializer": "x"}, "'key.deserializer' is not supported"),
        ("stream", {"kafka.value.deserializer": "x"}, "'value.deserializer' is not supported"),
        ("stream", {"kafka.interceptor.classes": "x"}, "'interceptor.classes' is not supported"),
        ("stream", {"endingOffsetsByTimestamp": "{}"}, "ending timestamp not valid in streaming"),
        ("stream", {"endingTimestamp": "1000"}, "ending timestamp not valid in streaming"),
        ("batch", {"startingTimestamp": "soon"}, "expected a single long value, got soon"),
        ("batch", {"endingTimestamp": "1.5"}, "expected a single long value, got 1.5"),
        ("batch", {"startingOffsetsByTimestamp": "[1]"}, "startingOffsetsByTimestamp must be JSON"),
        ("stream", {"startingOffsetsByTimestampStrategy": "skip"}, "must be error or latest"),
        ("stream", {"includeHeaders": "yes"}, "includeHeaders must be true or false"),
    ],
)
def test_options_spark_refuses_or_not_implemented_are_refused(mode, options, message) -> None:
    """Options were silently ignored or misread (batch startingOffsets=latest read from
    earliest); they are refused with Spark's reason, or as not implemented here."""
    from ticdc_spark.errors import ConfigError
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    source = KafkaDataSource(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", **options}
    )
    with pytest.raises(ConfigError, match=re.escape(message)):
        if mode == "batch":
            source.reader(source.schema())
        else:
            source.streamReader(source.schema())


def test_stream_only_options_are_ignored_in_batch_as_spark_does(caplog) -> None:
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    options = {"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "1", "maxTriggerDelay": "1m"}
    source = KafkaDataSource(
        {"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t", **options}
    )
    with caplog.at_level("WARNING"):
        source.reader(source.schema())
    assert "maxTriggerDelay option ignored in batch queries" in caplog.text


@pytest.mark.kafka
def test_specific_offsets_must_name_every_partition(kafka_broker: str) -> None:
    """A startingOffsets JSON omitting a partition started it at earliest, an endingOffsets
    one read it as empty; Spark refuses both, and a JSON naming a partition the source lacks."""
    from ticdc_spark.errors import ConfigError
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    topic = _topic(kafka_broker, 2, 4)
    partial = f'{{"{topic}": {{"0": 1}}}}'
    extra = f'{{"{topic}": {{"0": 1, "1": 1, "2": 0}}}}'
    full = f'{{"{topic}": {{"0": 1, "1": -2}}}}'

    def source(**options: str) -> KafkaDataSource:
        return KafkaDataSource(
            {"kafka.bootstrap.servers": kafka_broker, "subscribe": topic, **options}
        )

    for spec in (partial, extra):
        with pytest.raises(ConfigError, match="must name every partition"):
            _stream_reader(kafka_broker, subscribe=topic, startingOffsets=spec).initialOffset()
        for options in ({"startingOffsets": spec}, {"endingOffsets": spec}):
            batch = source(**options)
            with pytest.raises(ConfigError, match="must name every partition"):
                batch.reader(batch.schema()).partitions()
    stream = _stream_reader(kafka_broker, subscribe=topic, startingOffsets=full)
    assert stream.initialOffset() == {topic: {"0": 1, "1": 0}}
    batch = source(startingOffsets=full)
    assert [p.value[1:] for p in batch.reader(batch.schema()).partitions()] == [
        (topic, 0, 1, 2),
        (topic, 1, 0, 2),
    ]


def test_consumers_are_set_as_sparks() -> None:
    """The group id was always a random ticdc-spark-<uuid>, ignoring kafka.group.id and
    groupIdPrefix, and librdkafka's isolation.level default (read_committed) differs from
    Spark's (read_uncommitted).  (No broker at hand filters aborted records, so this is
    checked on the consumer settings.)"""
    from ticdc_spark.spark.kafka.options import SourceConfig

    base = {"kafka.bootstrap.servers": "h:9", "subscribe": "t"}
    stream = SourceConfig.parse(base, "stream")
    driver, executor = stream.consumer_config("driver"), stream.consumer_config("executor")
    assert driver["isolation.level"] == executor["isolation.level"] == "read_uncommitted"
    assert driver["group.id"] == f"spark-kafka-source-{stream.query_id}-driver"
    assert executor["group.id"] == f"spark-kafka-source-{stream.query_id}-executor"
    assert driver["enable.auto.commit"] is False
    batch = SourceConfig.parse(base, "batch")
    assert batch.consumer_config("driver")["group.id"].startswith("spark-kafka-relation-")
    prefixed = SourceConfig.parse({**base, "groupIdPrefix": "mine"}, "stream")
    assert prefixed.consumer_config("executor")["group.id"].startswith("mine-")
    chosen = SourceConfig.parse(
        {**base, "kafka.group.id": "g1", "kafka.isolation.level": "read_committed"}, "stream"
    )
    assert chosen.consumer_config("driver")["group.id"] == "g1"
    assert chosen.consumer_config("executor")["isolation.level"] == "read_committed"


@pytest.mark.kafka
def test_subscribe_pattern_searches_topic_names(kafka_broker: str) -> None:
    """subscribePattern had to match a whole topic name; Spark 4 searches the name
    (Regex.findFirstIn over the listed topics)."""
    from ticdc_spark.spark.kafka.source import topic_partitions

    topic = _topic(kafka_broker, 2, 0)
    middle = topic[2:8]  # "s-" + 8 hex digits: a piece inside the name
    options = {"kafka.bootstrap.servers": kafka_broker, "subscribePattern": middle}
    assert topic_partitions(options) == [(topic, 0), (topic, 1)]
    anchored = {**options, "subscribePattern": f"^{middle}"}
    assert topic_partitions(anchored) == []


@pytest.mark.kafka
def test_offset_fetches_are_retried_as_fetch_offset_options_say(kafka_broker: str) -> None:
    """fetchOffset.numRetries / fetchOffset.retryIntervalMs were ignored (one failed call
    failed the query); Spark retries its offset fetches."""
    from ticdc_spark.errors import TiCDCSparkError
    from ticdc_spark.spark.kafka.offsets import OffsetReader
    from ticdc_spark.spark.kafka.options import SourceConfig

    topic = _topic(kafka_broker, 1, 3)

    class Flaky:
        """The real consumer, whose first ``failures`` calls of each method fail."""

        def __init__(self, consumer, failures: int) -> None:  # type: ignore[no-untyped-def]
            self.consumer, self.failures, self.calls = consumer, failures, 0

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            method = getattr(self.consumer, name)

            def call(*args, **kwargs):  # type: ignore[no-untyped-def]
                self.calls += 1
                if name != "close" and self.calls <= self.failures:
                    raise RuntimeError("transient")
                return method(*args, **kwargs)

            return call

    def metadata(failures: int, **options: str) -> OffsetReader:
        config = SourceConfig.parse(
            {"kafka.bootstrap.servers": kafka_broker, "subscribe": topic, **options}
        )
        meta = OffsetReader(config)
        meta.consumer = Flaky(meta.consumer, failures)
        return meta

    quick = {"fetchOffset.retryIntervalMs": "10"}
    assert metadata(2, **quick).partitions() == [(topic, 0)]
    assert metadata(1, **quick).bounds([(topic, 0)]) == {(topic, 0): (0, 3)}
    with pytest.raises(TiCDCSparkError, match="transient"):
        metadata(1, **quick, **{"fetchOffset.numRetries": "1"}).partitions()


def test_poll_timeout_defaults_to_sparks() -> None:
    """Spark's kafkaConsumer.pollTimeoutMs falls back to spark.network.timeout (120 s)."""
    from ticdc_spark.spark.kafka.options import SourceConfig

    base = {"kafka.bootstrap.servers": "h:9", "subscribe": "t"}
    assert SourceConfig.parse(base).poll_timeout_s == 120
    assert SourceConfig.parse({**base, "kafkaConsumer.pollTimeoutMs": "500"}).poll_timeout_s == 0.5


_T1, _T2, _T3 = ("t1", 1), ("t2", 1), ("t3", 1)


def _r(tp: tuple[str, int], since: int, until: int) -> tuple[str, int, int, int]:
    return (*tp, since, until)


# Spark's KafkaOffsetRangeCalculatorSuite (connector/kafka-0-10-sql/src/test/scala/org/
# apache/spark/sql/kafka010/KafkaOffsetRangeCalculatorSuite.scala): its inputs and expected
# ranges, as (minPartitions, maxRecordsPerPartition, ranges, expected).
_CALCULATOR_CASES = [
    (None, None, [_r(_T1, 1, 2), _r(_T2, 1, 1)], [_r(_T1, 1, 2)]),
    (
        3,
        None,
        [_r(_T1, 1, 2), _r(_T2, 1, 2), _r(_T3, 1, 2)],
        [_r(_T1, 1, 2), _r(_T2, 1, 2), _r(_T3, 1, 2)],
    ),
    (4, None, [_r(_T1, 1, 5)], [_r(_T1, 1, 2), _r(_T1, 2, 3), _r(_T1, 3, 4), _r(_T1, 4, 5)]),
    (
        4,
        None,
        [_r(_T1, 1, 5), _r(_T2, 1, 21)],
        [_r(_T1, 1, 5), _r(_T2, 1, 7), _r(_T2, 7, 14), _r(_T2, 14, 21)],
    ),
    (
        4,
        None,
        [_r(_T1, 1, 1), _r(_T2, 1, 21)],
        [_r(_T2, 1, 6), _r(_T2, 6, 11), _r(_T2, 11, 16), _r(_T2, 16, 21)],
    ),
    (
        4,
        None,
        [_r(_T1, 1, 2), _r(_T2, 1, 1001)],
        [_r(_T1, 1, 2), _r(_T2, 1, 334), _r(_T2, 334, 667), _r(_T2, 667, 1001)],
    ),
    (1, None, [_r(_T1, 1, 5), _r(_T2, 1, 21)], [_r(_T1, 1, 5), _r(_T2, 1, 21)]),
    (3, None, [_r(_T1, 1, 11)], [_r(_T1, 1, 4), _r(_T1, 4, 7), _r(_T1, 7, 11)]),
    (
        4,
        None,
        [_r(_T1, 1, 5), _r(_T2, 1, 21), _r(_T3, 1, 1)],
        [_r(_T1, 1, 5), _r(_T2, 1, 7), _r(_T2, 7, 14), _r(_T2, 14, 21)],
    ),
    (
        6,
        None,
        [_r(_T1, 0, 10), _r(_T2, 0, 10), _r(_T3, 0, 1)],
        [
            _r(_T1, 0, 3),
            _r(_T1, 3, 6),
            _r(_T1, 6, 10),
            _r(_T2, 0, 3),
            _r(_T2, 3, 6),
            _r(_T2, 6, 10),
            _r(_T3, 0, 1),
        ],
    ),
    (
        9,
        None,
        [_r(_T1, 0, 10000), _r(_T2, 0, 15000), _r(_T3, 0, 20000)],
        [
            _r(_T1, 0, 5000),
            _r(_T1, 5000, 10000),
            _r(_T2, 0, 5000),
            _r(_T2, 5000, 10000),
            _r(_T2, 10000, 15000),
            _r(_T3, 0, 5000),
            _r(_T3, 5000, 10000),
            _r(_T3, 10000, 15000),
            _r(_T3, 15000, 20000),
        ],
    ),
    (
        6,
        None,
        [_r(_T1, 0, 500), _r(_T2, 0, 12000), _r(_T3, 0, 15001)],
        [
            _r(_T1, 0, 500),
            _r(_T2, 0, 6000),
            _r(_T2, 6000, 12000),
            _r(_T3, 0, 5000),
            _r(_T3, 5000, 10000),
            _r(_T3, 10000, 15001),
        ],
    ),
    (
        6,
        None,
        [_r(_T1, 0, 1), _r(_T2, 0, 1), _r(_T3, 0, 10000)],
        [
            _r(_T1, 0, 1),
            _r(_T2, 0, 1),
            _r(_T3, 0, 2500),
            _r(_T3, 2500, 5000),
            _r(_T3, 5000, 7500),
            _r(_T3, 7500, 10000),
        ],
    ),
    (None, 4, [_r(_T1, 1, 5)], [_r(_T1, 1, 5)]),
    (None, 4, [_r(_T1, 1, 2)], [_r(_T1, 1, 2)]),
    (None, 4, [_r(_T1, 1, 6)], [_r(_T1, 1, 3), _r(_T1, 3, 6)]),
    (
        None,
        20,
        [_r(_T1, 1, 40), _r(_T2, 1, 50), _r(_T3, 1, 60)],
        [
            _r(_T1, 1, 20),
            _r(_T1, 20, 40),
            _r(_T2, 1, 17),
            _r(_T2, 17, 33),
            _r(_T2, 33, 50),
            _r(_T3, 1, 20),
            _r(_T3, 20, 40),
            _r(_T3, 40, 60),
        ],
    ),
    (1, 20, [_r(_T1, 1, 40)], [_r(_T1, 1, 20), _r(_T1, 20, 40)]),
    (4, 20, [_r(_T1, 1, 40)], [_r(_T1, 1, 10), _r(_T1, 10, 20), _r(_T1, 20, 30), _r(_T1, 30, 40)]),
]


@pytest.mark.parametrize(("minimum", "maximum", "ranges", "expected"), _CALCULATOR_CASES)
def test_ranges_split_as_sparks_calculator(minimum, maximum, ranges, expected) -> None:
    from ticdc_spark.spark.kafka.offsets import split_ranges

    assert split_ranges(ranges, minimum, maximum) == expected


@pytest.mark.kafka
def test_min_partitions_and_max_records_split_the_read(kafka_broker: str) -> None:
    """minPartitions and maxRecordsPerPartition were ignored (one task per Kafka partition
    whatever they said); the planned ranges now follow them, and the split read returns
    every record once."""
    from ticdc_spark.spark.kafka.reader import read_partition
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    topic = _topic(kafka_broker, 2, 20)
    for options, count in (({"minPartitions": "5"}, 6), ({"maxRecordsPerPartition": "3"}, 8)):
        source = KafkaDataSource(
            {"kafka.bootstrap.servers": kafka_broker, "subscribe": topic, **options}
        )
        planned = source.reader(source.schema()).partitions()
        assert len(planned) == count
        offsets = sorted(
            (batch.column("partition")[i].as_py(), batch.column("offset")[i].as_py())
            for p in planned
            for batch in read_partition(p)
            for i in range(batch.num_rows)
        )
        assert offsets == [(p, o) for p in range(2) for o in range(10)]
    with pytest.raises(ConfigError, match="minPartitions must be a positive integer"):
        KafkaDataSource(
            {"kafka.bootstrap.servers": kafka_broker, "subscribe": topic, "minPartitions": "0"}
        ).reader(None)


@pytest.mark.kafka
def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(kafka_broker: str) -> None:
    """minOffsetsPerTrigger and maxTriggerDelay were ignored (then refused): a batch now
    waits for that many records, or until the delay has passed since the last batch, as
    Spark's KafkaMicroBatchStream.delayBatch; maxOffsetsPerTrigger still caps it and
    availableNow (``--trigger once``) reads everything."""
    import time

    topic = _topic(kafka_broker, 1, 3)
    options = {
        "subscribe": topic,
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "5",
        "maxTriggerDelay": "2s",
    }
    reader = _stream_reader(kafka_broker, **options)
    start = {topic: {"0": 3}}
    assert reader.latestOffset() == start  # the first batch goes
    reader.partitions(reader.initialOffset(), start)
    _produce(kafka_broker, topic, [b"a", b"b"])
    assert reader.latestOffset() == start  # 2 < 5 waiting: no batch
    _produce(kafka_broker, topic, [b"c", b"d", b"e"])
    assert reader.latestOffset() == {topic: {"0": 8}}  # 5 waiting
    start = {topic: {"0": 8}}
    assert resumed_at(reader, start) == start
    _produce(kafka_broker, topic, [b"f"])
    assert reader.latestOffset() == start
    time.sleep(2.1)
    assert reader.latestOffset() == {topic: {"0": 9}}  # the delay passed
    capped = _stream_reader(
        kafka_broker,
        subscribe=topic,
        startingOffsets="earliest",
        minOffsetsPerTrigger="2",
        maxOffsetsPerTrigger="4",
    )
    assert capped.latestOffset() == {topic: {"0": 4}}
    now = _stream_reader(kafka_broker, **options, availableNow="true")
    assert resumed_at(now, {topic: {"0": 8}}) == {topic: {"0": 9}}  # must finish: no waiting
    with pytest.raises(ConfigError, match=r"minOffsetPerTrigger\(5\) is higher"):
        _stream_reader(
            kafka_broker, subscribe=topic, minOffsetsPerTrigger="5", maxOffsetsPerTrigger="4"
        )


@pytest.mark.kafka
def test_headers_column_only_with_include_headers(kafka_broker: str) -> None:
    """includeHeaders was ignored: headers always there.  As Spark's source, the column is
    there only with includeHeaders=true (Spark's default: false)."""
    from ticdc_spark.spark.kafka.reader import read_partition
    from ticdc_spark.spark.kafka.source import KafkaDataSource

    topic = f"h-{uuid.uuid4().hex[:8]}"
    from confluent_kafka import Producer

    sink = KafkaProducerSink(kafka_broker)
    sink.create_topics([topic], 1)
    sink.close()
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce(topic, b"v", b"k", partition=0, headers=[("h", b"1")])
    assert producer.flush(10) == 0
    for include, columns in (({}, 7), ({"includeHeaders": "true"}, 8)):
        source = KafkaDataSource(
            {"kafka.bootstrap.servers": kafka_broker, "subscribe": topic, **include}
        )
        assert ("headers" in source.schema()) == (columns == 8)
        (batch,) = [
            b for p in source.reader(source.schema()).partitions() for b in read_partition(p)
        ]
        assert batch.num_columns == columns
    assert batch.column("headers").to_pylist() == [[{"key": "h", "value": b"1"}]]
