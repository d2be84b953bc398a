"""End to end on Spark: a workload produced to Apache Kafka (tests/kafka_broker.py),
replicated into Delta Lake and Iceberg tables, verified against the generated state."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

import restart_helpers
from ticdc_spark.codec import Message
from ticdc_spark.dispatch import TopicRouter
from ticdc_spark.io.kafka import KafkaProducerSink
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import live
from ticdc_spark.spark.pipeline import PipelineConfig, run
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.verify import verify_sink
from ticdc_spark.testing.workload import Workload

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PROTOCOLS = {"canal-json": {"enable-tidb-extension": "true"}, "open-protocol": {}}


def _produce(
    kafka_broker: str, protocol: str, root: Path, *, rows: int = 500, seed: int = 21
) -> tuple[Workload, str]:
    """Produce a workload; returns it and the kafka:// source URI of its topics."""
    workload = Workload(
        seed=seed,
        rows=rows,
        tables=2,
        ddl_every=12,
        watermark_every=6,
        start_ms=int(time.time() * 1000),
    )
    expression = f"t{uuid.uuid4().hex[:6]}_{{schema}}"
    topics = sorted(
        {TopicRouter(expression).topic(s.database, s.table) for s in workload.table_schemas()}
    )
    produce_workload(
        workload,
        protocol,
        PROTOCOLS[protocol],
        f"kafka://{kafka_broker}",
        expected=root / "expected",
        topic=expression,
        partitions=3,
    )
    return workload, f"kafka://{kafka_broker}/{','.join(topics)}"


def _config(source: str, protocol: str, target: str, root: Path) -> PipelineConfig:
    return PipelineConfig(
        engine="embedded",
        source=source,
        protocol=protocol,
        target=target,
        checkpoint=str(root / "checkpoint"),
        options=PROTOCOLS[protocol],
        source_options={"maxOffsetsPerTrigger": "100"},
    )


def _assert_verified(target: str, root: Path, spark: Any = None) -> None:
    sink = make_sink(target) if spark is None else make_sink(target, engine="spark", spark=spark)
    reports = verify_sink(sink, root / "expected")
    assert reports and all(r.ok for r in reports), [r.summary() for r in reports]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("target_kind", ["delta", "iceberg"])
def test_kafka_to_lakehouse(
    spark, kafka_broker: str, tmp_path: Path, protocol: str, target_kind: str
) -> None:
    _workload, source = _produce(kafka_broker, protocol, tmp_path)
    target = restart_helpers.target(target_kind, tmp_path)
    reports = []
    run(spark, _config(source, protocol, target, tmp_path), on_batch=reports.append)
    assert len(reports) >= 2  # maxOffsetsPerTrigger split the stream into micro-batches
    assert sum(r.ddl for r in reports) > 0  # DDL mid-stream
    _assert_verified(target, tmp_path)


# (planning on the executors with the spark engine: the batch never on the driver)
@pytest.mark.parametrize("planner", ["driver", "executors"])
def test_duplicates_replays_and_dead_letters(
    spark, kafka_broker: str, tmp_path: Path, planner: str
) -> None:
    protocol = "canal-json"
    _workload, source = _produce(kafka_broker, protocol, tmp_path, seed=22)
    topics = source.split("/")[-1].split(",")
    # at-least-once delivery: resend the head of every partition, plus two malformed messages
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": kafka_broker, "group.id": "dup", "enable.auto.commit": False}
    )
    replay = []
    for topic in topics:
        for partition in range(3):
            consumer.assign([TopicPartition(topic, partition, 0)])
            replay += [
                Message(m.key(), m.value(), topic=topic, partition=partition)
                for m in consumer.consume(40, timeout=5)
            ]
    consumer.close()
    bad = [
        Message(None, b"{broken", topic=topics[0], partition=1),
        Message(
            None, b'{"type":"INSERT","isDdl":false,"data":[{"id":1}]}', topic=topics[0], partition=2
        ),
    ]
    sink = KafkaProducerSink(kafka_broker)
    sink.write(replay + bad)
    sink.close()
    target = restart_helpers.target("delta", tmp_path)
    reports = []
    config = _config(source, protocol, target, tmp_path)
    if planner == "executors":  # (fewer, larger micro-batches: each merge is a Spark job)
        config.engine, config.planner = "spark", planner
        config.source_options = {"maxOffsetsPerTrigger": "400"}
    run(spark, config, on_batch=reports.append)
    _assert_verified(target, tmp_path, spark if planner == "executors" else None)
    assert sum(r.replays for r in reports) > 0
    letters = [
        orjson.loads(line)
        for f in sorted((tmp_path / "checkpoint" / "dead-letters").glob("*.jsonl"))
        for line in f.read_bytes().splitlines()
    ]
    assert sorted((d["topic"], d["partition"]) for d in letters) == [(topics[0], 1), (topics[0], 2)]
    assert all(d["offset"] is not None and d["error"] for d in letters)


def test_kill_and_restart_gives_the_tables_of_a_run_that_never_stopped(
    spark, kafka_broker: str, tmp_path: Path
) -> None:
    protocol = "open-protocol"
    _workload, source = _produce(kafka_broker, protocol, tmp_path, rows=1200, seed=23)
    killed_root, calm_root = tmp_path / "killed", tmp_path / "calm"
    killed_target = restart_helpers.target("delta", killed_root)
    base = [
        sys.executable,
        "-m",
        "ticdc_spark.cli",
        "replicate",
        "--engine",
        "embedded",
        "--source",
        source,
        "--protocol",
        protocol,
        "--target",
        killed_target,
        "--checkpoint",
        str(killed_root / "checkpoint"),
        "--quiet",
        "--source-option",
        "maxOffsetsPerTrigger=150",
    ]
    command = [*base, "--trigger", "0.2"]
    rng = random.Random(7)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    state = killed_root / "checkpoint" / "ticdc"
    for attempt in range(3):  # kill -9 at random points: at start-up, mid-batch, between
        before = _last_batch(state)
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if attempt == 0:
            # Spark's start-up time varies with the machine's load: the first run is killed a
            # random moment after it applied a batch, so that the restarts have state to resume.
            _wait_for_batch_after(state, before, process, timeout=240)
            time.sleep(rng.uniform(0, 1.5))
        else:
            time.sleep(rng.uniform(5, 25))
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    assert _last_batch(state) >= 0, "the killed runs applied nothing: the test would prove nothing"
    final = subprocess.run(
        [*base, "--trigger", "once"], env=env, capture_output=True, timeout=600, check=False
    )
    assert final.returncode == 0, final.stderr.decode()[-2000:]
    calm_target = restart_helpers.target("delta", calm_root)
    run(spark, _config(source, protocol, calm_target, calm_root))
    _assert_verified(killed_target, tmp_path)
    killed, calm = make_sink(killed_target), make_sink(calm_target)
    assert killed.tables() == calm.tables()
    for key in calm.tables():
        names = list(live(calm.read(key)).column_names)
        ordered = [(n, "ascending") for n in names if n.startswith(("id", "c_int"))]
        assert (
            live(killed.read(key))
            .select(names)
            .sort_by(ordered)
            .equals(live(calm.read(key)).select(names).sort_by(ordered))
        ), key


def _last_batch(state: Path) -> int:
    """The newest micro-batch whose consumer state the pipeline saved (-1: none yet)."""
    return max((int(p.stem.split("-")[1]) for p in state.glob("state-*.json")), default=-1)


def _wait_for_batch_after(
    state: Path, batch: int, process: subprocess.Popen[bytes], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while _last_batch(state) <= batch and time.monotonic() < deadline:
        assert process.poll() is None, f"replicate exited early with {process.returncode}"
        time.sleep(0.2)


def test_an_apply_failure_stops_the_job_and_the_restart_resumes_it(spark, tmp_path: Path) -> None:
    """--on-error stop with overlapped apply: a change that cannot be applied (text in an
    integer column) fails the job although Spark had moved on to the next batch; the batch
    stays in the changelog log, and a restart that routes it to the dead letters finishes
    with every other row applied."""
    workload, config, bad_offset = _capture_with_a_bad_insert(tmp_path, "first")
    with pytest.raises(Exception, match=f"cdc/0@{bad_offset}"):
        run(spark, config)
    assert list((tmp_path / "checkpoint" / "ticdc" / "wal").glob("changelog-*.arrow"))

    config.on_error = "dead-letter"
    run(spark, config)
    letters = [
        orjson.loads(line)
        for path in sorted((tmp_path / "checkpoint" / "dead-letters").glob("*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]
    assert [(d["topic"], d["offset"]) for d in letters] == [("cdc", bad_offset)]
    state = tmp_path / "checkpoint" / "ticdc"
    logged = [p.name[len("changelog-") :] for p in (state / "wal").glob("changelog-*.arrow")]
    assert all((state / f"state-{n.replace('.arrow', '.json')}").exists() for n in logged)
    expected = workload.final_state()
    assert len(expected) == 1
    table = make_sink(config.target).read(("sbtest", "sbtest1"))
    assert live(table).num_rows == len(next(iter(expected.values())))


def test_a_failed_last_apply_stops_a_waiting_query(spark, tmp_path: Path) -> None:
    """With a processing-time trigger and nothing more to read, no later micro-batch would
    report the last batch's failed apply: awaiting the query must raise it all the same."""
    from ticdc_spark.spark.pipeline import start
    from ticdc_spark.spark.sources import read_source

    _workload, config, bad_offset = _capture_with_a_bad_insert(tmp_path, "last")
    config.trigger = "0.5"
    query = start(spark, read_source(spark, config.source, config.source_options), config)
    try:
        with pytest.raises(Exception, match=f"cdc/0@{bad_offset}"):
            assert query.awaitTermination(120) is not False, "the failed apply went unnoticed"
    finally:
        query.stop()


def _capture_with_a_bad_insert(root: Path, where: str) -> tuple[Workload, PipelineConfig, int]:
    """Capture files of a Canal-JSON workload, 40 records each, with one extra INSERT of a
    row of its own with text in an integer column, in the first or the last file."""
    from pipeline_helpers import produce
    from ticdc_spark.io.capture import write_capture

    protocol, options = "canal-json", PROTOCOLS["canal-json"]
    workload = Workload(seed=31, rows=120, tables=1, watermark_every=5)
    messages = produce(workload, protocol, options, partitions=1)
    rows = [i for i, m in enumerate(messages) if b'"type":"INSERT"' in (m.value or b"")]
    bad = orjson.loads(messages[rows[0]].value)
    bad["data"][0].update(id="999999999", k="not a number")
    if where == "last":  # committed after everything else (an older change is a replay)
        bad["_tidb"]["commitTs"] = max(
            orjson.loads(m.value)["_tidb"].get("commitTs") or 0 for m in messages
        ) + (1 << 18)
    at = rows[0] + 1 if where == "first" else len(messages)
    messages.insert(at, Message(None, orjson.dumps(bad)))
    source = root / "capture"
    source.mkdir()
    for number, start in enumerate(range(0, len(messages), 40)):
        for offset, message in enumerate(messages[start : start + 40], start):
            message.topic, message.partition, message.offset = "cdc", 0, offset
        with open(source / f"part-{number:04d}.jsonl", "wb") as out:
            write_capture(messages[start : start + 40], out)
    config = PipelineConfig(
        engine="embedded",
        source=str(source),
        protocol=protocol,
        target=f"delta:{root / 'lake'}",
        checkpoint=str(root / "checkpoint"),
        mode="eventual",
        options=options,
        source_options={"maxFilesPerTrigger": "1"},
        on_error="stop",
    )
    return workload, config, at


def test_capture_source_options_ignore_case(tmp_path: Path) -> None:
    """Spark hands data sources their options with lower-cased keys."""
    from ticdc_spark.pipeline.policy import OnError
    from ticdc_spark.spark.capture_source import _Options

    options = _Options({"path": str(tmp_path), "maxfilespertrigger": "2", "onbadrecord": "skip"})
    assert (options.max_files, options.bad_records) == (2, OnError.SKIP)
    options = _Options({"path": str(tmp_path), "maxFilesPerTrigger": "3"})
    assert options.max_files == 3


def test_consistent_mode_waits_for_a_partition_that_has_sent_nothing(
    spark, kafka_broker: str, tmp_path: Path
) -> None:
    """The global watermark is the minimum over every partition of the topic, including one
    that has sent nothing yet (the pipeline asks the broker for them): a row released on
    partition 0's watermark alone could be overtaken by an older row on partition 1."""
    from pipeline_helpers import canal_message
    from ticdc_spark.codec import make_encoder
    from ticdc_spark.model import Watermark

    topic = f"quiet_{uuid.uuid4().hex[:6]}"
    producer = KafkaProducerSink(kafka_broker)
    producer.create_topics([topic], partitions=2)
    ts = 445644800000000003
    (watermark,) = make_encoder("canal-json", PROTOCOLS["canal-json"]).encode([Watermark(ts + 1)])

    def send(partition: int, *values: bytes) -> None:
        producer.write([Message(None, v, topic=topic, partition=partition) for v in values])
        producer.producer.flush(30)

    send(0, canal_message(ts), watermark.value or b"")
    target = restart_helpers.target("delta", tmp_path)
    config = _config(f"kafka://{kafka_broker}/{topic}", "canal-json", target, tmp_path)
    run(spark, config)
    sink = make_sink(target)
    assert not sink.exists(("db", "t"))  # held: partition 1 has no watermark yet
    send(1, watermark.value or b"")
    run(spark, config)
    assert live(make_sink(target).read(("db", "t"))).to_pylist() == [{"id": 1, "v": "a"}]
    producer.close()


def test_a_table_filter_keeps_filtered_tables_out_of_the_pipeline(spark, tmp_path: Path) -> None:
    """replicate with TiCDC's table filter: the filtered table's messages, a malformed one
    among them, are never decoded (--on-error stop does not fire) and never applied."""
    from pipeline_helpers import produce, write_capture_dir

    protocol, options = "canal-json", PROTOCOLS["canal-json"]
    workload = Workload(seed=31, rows=120, tables=2, watermark_every=5)  # sbtest1, alltypes2
    messages = produce(workload, protocol, options, partitions=1)
    filtered = [i for i, m in enumerate(messages) if b'"table":"alltypes2"' in (m.value or b"")]
    bad = orjson.loads(messages[filtered[-1]].value)
    bad["data"] = "not rows"
    messages.insert(filtered[-1] + 1, Message(None, orjson.dumps(bad)))
    source = write_capture_dir(messages, tmp_path)
    config = PipelineConfig(
        engine="embedded",
        source=str(source),
        protocol=protocol,
        target=f"delta:{tmp_path / 'lake'}",
        checkpoint=str(tmp_path / "checkpoint"),
        mode="eventual",
        options=options,
        on_error="stop",
        table_filter=("*.*", "!TEST.*"),
    )
    run(spark, config)
    sink = make_sink(config.target)
    assert not sink.exists(("test", "alltypes2"))
    (name,) = [n for n, s in workload.final_schemas().items() if s.table == "sbtest1"]
    assert live(sink.read(("sbtest", "sbtest1"))).num_rows == len(workload.final_state()[name])
