"""Faults only a real broker shows, on both Kafka sources: compacted topics, a leader change
and a broker killed and restarted mid-run (three nodes), SASL and TLS (credentials never
shown), and ``replicate --kafka-source spark`` end to end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kafka_broker import SASL_PASSWORD, SASL_USER
from kafka_runs import KAFKA_SOURCES, new_topic, run_once

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_compacted_topics_read_alike(spark, kafka_broker: str, tmp_path: Path) -> None:
    """Compaction leaves gaps in the offsets (the older records of a key are gone): both
    sources read the records left, the newest of each key, and finish."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    compact = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.001",
        "delete.retention.ms": "100",
    }
    topic = new_topic(kafka_broker, 1, 0, compact)
    producer = Producer({"bootstrap.servers": kafka_broker})
    for keys in ((0, 1, 2, 3), (1, 2)):  # offsets 0-3, then 4-5 supersede 1-2
        for key in keys:
            producer.produce(topic, b"%d-%d" % (key, len(keys)), b"k%d" % key, partition=0)
        producer.flush(30)
        time.sleep(0.3)  # a new segment for each round
    probe = Consumer({"bootstrap.servers": kafka_broker, "group.id": "probe"})
    deadline = time.monotonic() + 90
    while True:  # until the cleaner has removed offsets 1 and 2
        probe.assign([TopicPartition(topic, 0, 0)])
        left = [m.offset() for m in probe.consume(10, timeout=5)]
        if left[:3] == [0, 3, 4]:
            break
        assert time.monotonic() < deadline, f"the log cleaner did not compact the topic: {left}"
        producer.produce(topic, b"roll", b"roll", partition=0)  # (a new active segment)
        producer.flush(30)
        time.sleep(1)
    probe.close()
    runs = {
        ks: run_once(
            spark,
            ks,
            f"kafka://{kafka_broker}/{topic}",
            tmp_path / ks,
            {"maxOffsetsPerTrigger": "3"},
        )
        for ks in KAFKA_SOURCES
    }
    assert not runs["ticdc"].failed and not runs["spark"].failed
    assert runs["ticdc"].rows == runs["spark"].rows
    offsets = [o for _, o, _ in runs["ticdc"].rows]
    assert offsets[:4] == [0, 3, 4, 5]  # the gap where compaction removed 1 and 2
    assert [v for _, _, v in runs["ticdc"].rows][:4] == [b"0-4", b"3-4", b"1-2", b"2-2"]


def _leader(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return int(metadata.topics[topic].partitions[partition].leader)


def test_a_leader_change_and_a_broker_restart_lose_nothing(
    spark, kafka_cluster3, tmp_path: Path
) -> None:
    """Three nodes, replicas on each: partition 0's leader is killed (kill -9) after the
    second micro-batch and started again after the fifth; every record is read once."""
    cluster = kafka_cluster3
    bootstrap = cluster.bootstrap
    for ks in KAFKA_SOURCES:
        topic = new_topic(bootstrap, 3, 300, {"min.insync.replicas": "2"})
        killed: list[int] = []

        def fault(batch_id: int, topic: str = topic, killed: list[int] = killed) -> None:
            if batch_id == 1:
                killed.append(_leader(bootstrap, topic, 0))
                cluster.kill_node(killed[0])
            elif batch_id == 4:
                cluster.start_node(killed[0])
                cluster.wait_ready()

        run = run_once(
            spark,
            ks,
            f"kafka://{bootstrap}/{topic}",
            tmp_path / ks,
            {"maxOffsetsPerTrigger": "30", "kafkaConsumer.pollTimeoutMs": "60000"},
            on_batch=fault,
        )
        assert not run.failed, (ks, run.error)
        assert sorted(v for _, _, v in run.rows) == sorted(b"v%d" % i for i in range(300)), ks
        assert len(run.batches) >= 10 and killed, ks
        assert _leader(bootstrap, topic, 0) != -1


def test_sasl_and_tls(spark, kafka_cluster, tmp_path: Path) -> None:
    """SCRAM-SHA-256 and PLAIN over SASL_PLAINTEXT, and TLS checked against the cluster's
    CA (PEM), through a kafka://user:password@ URI, on both sources."""
    topic = new_topic(kafka_cluster.bootstrap, 2, 10)
    expected = sorted(b"v%d" % i for i in range(10))
    secured = [
        (
            f"kafka://{SASL_USER}:{SASL_PASSWORD}@{kafka_cluster.sasl_bootstrap}/{topic}",
            {"kafka.sasl.mechanism": mechanism},
        )
        for mechanism in ("SCRAM-SHA-256", "PLAIN")
    ]
    secured.append(
        (
            f"kafka://{kafka_cluster.ssl_bootstrap}/{topic}",
            {"kafka.security.protocol": "SSL", "kafka.ssl.ca.location": str(kafka_cluster.ca_pem)},
        )
    )
    for number, (source, options) in enumerate(secured):
        for ks in KAFKA_SOURCES:
            run = run_once(spark, ks, source, tmp_path / f"{ks}-{number}", options)
            assert not run.failed, (ks, options, run.error)
            assert sorted(v for _, _, v in run.rows) == expected, (ks, options)


def test_replicate_through_sasl_shows_no_credentials(kafka_cluster, tmp_path: Path) -> None:
    """``replicate --kafka-source spark`` over SCRAM into Delta: verified, and the password
    (which Spark's source gets in a JAAS line) is in none of its output nor of its
    checkpoint.  (Ours end to end: tests/test_pipeline.py; its masking: tests/test_kafka.py.)"""
    kafka_source = "spark"
    from ticdc_spark.dispatch import TopicRouter
    from ticdc_spark.sinks.delta import DeltaSink
    from ticdc_spark.testing.produce import produce_workload
    from ticdc_spark.testing.verify import verify_sink
    from ticdc_spark.testing.workload import Workload

    workload = Workload(seed=5, rows=300, tables=2, ddl_every=20, watermark_every=5)
    expression = f"s{uuid.uuid4().hex[:6]}_{{schema}}"
    topics = sorted(
        {TopicRouter(expression).topic(s.database, s.table) for s in workload.table_schemas()}
    )
    produce_workload(
        workload,
        "canal-json",
        {"enable-tidb-extension": "true"},
        f"kafka://{kafka_cluster.bootstrap}",
        expected=tmp_path / "expected",
        topic=expression,
        partitions=2,
    )
    secret = f"kafka://{SASL_USER}:{SASL_PASSWORD}@{kafka_cluster.sasl_bootstrap}"
    command = [
        *(sys.executable, "-m", "ticdc_spark.cli", "replicate"),
        *("--engine", "embedded"),
        *("--source", f"{secret}/{','.join(topics)}", "--protocol", "canal-json"),
        *("-o", "enable-tidb-extension=true", "--kafka-source", kafka_source),
        *("--source-option", "kafka.sasl.mechanism=SCRAM-SHA-256"),
        *("--target", f"delta:{tmp_path / 'delta'}", "--checkpoint", str(tmp_path / "ckpt")),
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=900, env=env, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert SASL_PASSWORD not in output
    stored = "".join(
        p.read_text(errors="replace") for p in (tmp_path / "ckpt").rglob("*") if p.is_file()
    )
    assert SASL_PASSWORD not in stored
    reports = verify_sink(DeltaSink(str(tmp_path / "delta")), tmp_path / "expected")
    assert reports and all(r.ok for r in reports), [r.summary() for r in reports]
