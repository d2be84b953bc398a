"""Issue 24 item 1: a Kafka source no broker answers is one clear line naming the broker,
well within a minute, on both Kafka sources (before: ~1,000 librdkafka lines a minute for
over 6 minutes, then a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ticdc_spark.errors import KafkaUnreachable
from ticdc_spark.io.kafka import check_reachable


@pytest.mark.parametrize("kafka_source", ["ticdc", "spark"])
def test_replicate_from_an_unreachable_broker_says_so_in_one_line(
    tmp_path: Path, kafka_source: str
) -> None:
    command = [
        *(sys.executable, "-m", "ticdc_spark.cli", "replicate"),
        *("--engine", "embedded"),
        *("--source", "kafka://127.0.0.1:1/t", "--protocol", "canal-json"),
        *("--target", f"delta:{tmp_path / 'table'}", "--checkpoint", str(tmp_path / "ckpt")),
        *("--kafka-source", kafka_source),
    ]
    started = time.monotonic()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, env=dict(os.environ)
    )
    elapsed = time.monotonic() - started
    output = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 1, output
    assert elapsed < 60, elapsed
    assert len(output) <= 8, output
    assert "Traceback" not in "\n".join(output)
    assert "cannot reach the Kafka broker 127.0.0.1:1" in output[-1]
    assert "Connection refused" in output[-1]


@pytest.mark.kafka
def test_refused_credentials_are_named_never_shown(kafka_cluster) -> None:  # type: ignore[no-untyped-def]
    """A broker that refuses the SASL password: the message says so without the password."""
    source = f"kafka://alice:Wr0ngSecret@{kafka_cluster.sasl_bootstrap}/t"
    options = {"kafka.sasl.mechanism": "SCRAM-SHA-256"}
    with pytest.raises(KafkaUnreachable) as caught:
        check_reachable(source, options, timeout_s=10)
    assert "Wr0ngSecret" not in str(caught.value)
    assert "Authentication failed" in str(caught.value) or "SASL" in str(caught.value)
    check_reachable(  # the right password answers
        f"kafka://alice:alice-secret@{kafka_cluster.sasl_bootstrap}/t", options, timeout_s=30
    )
