"""A standalone Spark cluster on this machine, from PySpark's own wheel: a master and N
workers, each its own JVM (``pyspark/bin/spark-class``), with its own executor JVM and
Python workers, all on 127.0.0.1.

    python tests/spark_cluster.py --workers 2    # prints the master's URL; Ctrl-C stops it
    ticdc-spark replicate --master spark://127.0.0.1:PORT ...

Each worker offers ``--cores`` cores (1) and ``--memory`` (2g) to one executor, and is pinned
with its executor and Python workers to cores of its own (``taskset``; worker i on the i-th
core this process may use) where the machine has enough, unless ``--no-pin``: on this 2-core
machine one worker and two workers then differ by a core, which is what a throughput
benchmark of the cluster compares.  The driver (the application's process) is not pinned.
The master and worker JVMs get a 512 MiB heap (``SPARK_DAEMON_MEMORY``).

Logs, work and scratch directories live in one temporary directory, removed by :meth:`stop`.
Ports are chosen free on 127.0.0.1 (the workers' own ports: by the OS).  Every process is
started in a session of its own and killed by process group; the master and workers also die
with the process that started them (``setpriv --pdeathsig``), and their executors with them
(an executor exits when its worker goes); what is left after :meth:`stop` (a Python worker
whose executor was killed) is found by its working directory, inside the cluster's, and
killed.  Started in about 6-8 s (master and workers at once); the test suite starts one per
session, on first use (``tests/conftest.py``'s ``spark_cluster``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka_broker import free_port

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
DAEMON_HEAP = "512m"


def spark_home() -> Path:
    """PySpark's wheel is a Spark distribution: ``bin/spark-class`` and ``jars/``."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkCluster:
    """A master and ``workers`` workers on 127.0.0.1; :meth:`start`, then :attr:`master`."""

    def __init__(
        self, workers: int = 2, cores: int = 1, memory: str = "2g", pinned: bool = True
    ) -> None:
        self.workers, self.cores, self.memory, self.pinned = workers, cores, memory, pinned
        self.root = Path(tempfile.mkdtemp(prefix="ticdc-spark-cluster-"))
        self.port, self.ui_port = free_port(), free_port()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def master(self) -> str:
        """The URL to give ``--master`` (``spark.master``)."""
        return f"spark://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, str]:
        """Settings an application on this cluster needs: executors no larger than a worker
        offers (a larger one is never granted, and the job waits for ever)."""
        return {"spark.executor.memory": self.memory, "spark.executor.cores": str(self.cores)}

    def start(self, timeout: float = 120) -> SparkCluster:
        """Start the master and the workers at once; return when every worker registered."""
        master_args = ("--host", "127.0.0.1", "--port", str(self.port))
        self._launch("master", MASTER, *master_args, "--webui-port", str(self.ui_port))
        for number in range(self.workers):
            self._launch(
                f"worker-{number}", WORKER, *self._worker_args(number), pin=self._pin(number)
            )
        self._wait_ready(timeout)
        return self

    def _pin(self, number: int) -> set[int] | None:
        """The cores worker ``number`` keeps to: its own, while this process may use enough
        for every worker."""
        usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if not self.pinned or len(usable) < self.workers * self.cores:
            return None
        return set(usable[number * self.cores : (number + 1) * self.cores])

    def _worker_args(self, number: int) -> list[str]:
        work = self.root / f"worker-{number}"
        return [
            *("--host", "127.0.0.1", "--port", "0", "--webui-port", "0"),
            *("--cores", str(self.cores), "--memory", self.memory),
            *("--work-dir", str(work / "work"), self.master),
        ]

    def _launch(self, name: str, main: str, *args: str, pin: set[int] | None = None) -> None:
        directory = self.root / name
        (directory / "local").mkdir(parents=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(directory / "local"),  # executors' scratch (shuffles)
            "SPARK_DAEMON_MEMORY": DAEMON_HEAP,
            # a port taken meanwhile fails the start (rather than a master on another port);
            # no REST submission server (its fixed port 6066 may be another cluster's)
            "SPARK_MASTER_OPTS": "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false",
        }
        with open(directory / "daemon.log", "wb") as log:
            self.processes[name] = subprocess.Popen(
                [*_prefix(pin), str(spark_home() / "bin" / "spark-class"), main, *args],
                env=env,
                cwd=directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.status().get("aliveworkers", 0) < self.workers:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    self._fail(f"the cluster's {name} exited ({process.returncode})", name)
            if time.monotonic() > deadline:
                self._fail(f"the cluster did not start within {timeout:.0f} s", "master")
            time.sleep(0.2)

    def status(self) -> dict[str, Any]:
        """The master's state (its web UI's JSON: workers, cores, applications); {} while it
        does not answer."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with contextlib.suppress(OSError, ValueError), urllib.request.urlopen(url, timeout=2) as a:
            return dict(json.load(a))
        return {}

    def applications(self) -> dict[str, str]:
        """The applications the master ran or runs: id -> name."""
        state = self.status()
        return {
            a["id"]: a["name"] for k in ("activeapps", "completedapps") for a in state.get(k, ())
        }

    def finished_tasks(self, app_id: str) -> list[int]:
        """How many tasks each worker's executors finished for an application (from the
        executors' logs in the workers' work directories)."""
        return [
            sum(
                log.read_text(errors="replace").count(" Finished task ")
                for log in (self.root / f"worker-{n}" / "work" / app_id).glob("*/stderr")
            )
            for n in range(self.workers)
        ]

    def log(self, name: str, chars: int = 3000) -> str:
        path = self.root / name / "daemon.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def _fail(self, reason: str, name: str) -> None:
        tail = self.log(name)
        self.stop()
        raise RuntimeError(f"{reason}; its log ends:\n{tail}")

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master; kill what is left in the
        cluster's directory; remove it."""
        for name in sorted(self.processes, key=lambda n: n == "master"):
            _stop_group(self.processes[name])
        self.processes.clear()
        for pid in _processes_in(self.root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _prefix(cores: set[int] | None) -> list[str]:
    """What runs ``spark-class``: util-linux's ``setpriv`` makes it die with this process,
    ``taskset`` keeps it (with the executor and Python workers it starts) to ``cores``;
    each where installed.  (Not a ``preexec_fn``: it may deadlock a process with threads,
    as a test process with a Spark driver is.)"""
    prefix = []
    if shutil.which("setpriv"):
        prefix += ["setpriv", "--pdeathsig", "KILL"]
    if cores is not None and shutil.which("taskset"):
        prefix += ["taskset", "--cpu-list", ",".join(map(str, sorted(cores)))]
    return prefix


def _stop_group(process: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM to the process's group (a worker stops its executors), SIGKILL after
    ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
            return


def _processes_in(root: Path) -> list[int]:
    """Processes whose working directory is inside ``root`` (executors and their Python
    workers run in the workers' work directories); Linux's /proc, none elsewhere."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                found.append(int(entry.name))
    return found


def main(argv: list[str] | None = None, out: IO[str] = sys.stdout) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    parser.add_argument("--memory", default="2g", help="memory each worker offers")
    parser.add_argument("--no-pin", action="store_true", help="workers on any core")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.perf_counter()
    with SparkCluster(args.workers, args.cores, args.memory, not args.no_pin) as cluster:
        seconds = time.perf_counter() - started
        print(
            f"# Spark {cluster.status().get('url')}: {args.workers} worker(s) in {seconds:.1f} s",
            file=out,
        )
        print(f"# files in {cluster.root}; master UI http://127.0.0.1:{cluster.ui_port}", file=out)
        settings = " ".join(f"--spark-conf {k}={v}" for k, v in cluster.settings().items())
        print(f"ticdc-spark replicate --master {cluster.master} {settings} ...", file=out)
        print("# Ctrl-C (or SIGTERM) stops it", file=out, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
