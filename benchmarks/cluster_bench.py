"""Throughput as the cluster grows: ``replicate`` on a standalone cluster of one worker and of
two (tests/spark_cluster.py: each worker pinned with its executor and Python workers to a
core of its own), and locally, with micro-batches planned on the driver and on the
executors, side by side.

A Canal-JSON capture directory of N changes over T tables is made once (``ticdc-spark
produce``); each run replicates it whole (``--trigger once``, the spark engine, Delta) from
a fresh checkpoint, in a process of its own, and its tables are verified against the
workload's expected state.  Two rates per run:

- *whole*: changes / wall time of the process (its JVMs' start and warm-up included);
- *steady*: the changes applied after the first micro-batch / the time from the end of the
  first micro-batch to the end of the last: what a replication that runs for days sees.

And where the CPU went, in seconds, from /proc (Linux), sampled every 0.3 s: the driver's
JVM and Python, the executors' JVMs, their Python workers.  On a machine whose cores the
driver shares with the workers, that says what a second worker can add: the run is bound by
the CPU of all of them together once the workers are busy.

    python benchmarks/cluster_bench.py --rows 300000 --tables 4 --per-batch 75000 \\
        --watermark-every 1250 --planners executors
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from spark_cluster import SparkCluster  # noqa: E402

OPTIONS = ["-o", "enable-tidb-extension=true"]
# process kinds, by a word of their command line (first match wins)
KINDS = (
    ("CoarseGrainedExecutorBackend", "executor JVMs"),
    ("pyspark.daemon", "Python workers"),
    ("pyspark/daemon", "Python workers"),
    ("SparkSubmit", "driver JVM"),
    ("ticdc_spark.cli", "driver Python"),
    ("deploy.master", "master, workers"),
    ("deploy.worker", "master, workers"),
)
SHOWN = ("driver JVM", "driver Python", "executor JVMs", "Python workers")


@dataclass
class Run:
    where: str
    planner: str
    seconds: float
    batches: int
    verified: bool
    steady_rows: int = 0
    steady_seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)


class CpuSampler:
    """CPU seconds (user + system) of Spark's processes on this machine, by kind."""

    def __init__(self) -> None:
        self.seconds: dict[int, tuple[str, float]] = {}
        self.tick = os.sysconf("SC_CLK_TCK")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CpuSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, seconds in list(self.seconds.values()):
            out[kind] = out.get(kind, 0.0) + seconds
        return out

    def _loop(self) -> None:
        while not self.done.wait(0.3):
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    self._sample(int(entry))

    def _sample(self, pid: int) -> None:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            kind = next((k for word, k in KINDS if word in command), None)
            if kind is None:
                return
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, UnicodeDecodeError):  # (a process gone meanwhile)
            return
        self.seconds[pid] = (kind, (int(fields[11]) + int(fields[12])) / self.tick)


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ticdc_spark.cli", *args]


def _env() -> dict[str, str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


def produce(work: Path, args: argparse.Namespace) -> Path:
    capture = work / "capture"
    if not capture.is_dir():
        command = _cli("produce", "-p", "canal-json", *OPTIONS, "--to", str(capture))
        command += ["--expected", str(work / "expected"), "--rows", str(args.rows)]
        command += ["--tables", str(args.tables), "--ddl-every", "0", "--partitions", "4"]
        command += ["--watermark-every", str(args.watermark_every)]
        subprocess.run(command, env=_env(), check=True, stdout=subprocess.DEVNULL)
    return capture


def _applied(line: str) -> int:
    """The changes a progress line ``batch N: X rows in, Y applied (...)`` says applied."""
    found = re.search(r"([\d,]+) applied", line)
    return int(found.group(1).replace(",", "")) if found else 0


def _timed(command: list[str], log: Path, run: Run) -> None:
    """Run ``command`` to its end; the wall time, and the steady part after batch 0."""
    marks: list[tuple[float, int]] = []
    started = time.perf_counter()
    with (
        open(log, "w") as out,
        subprocess.Popen(
            command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if line.startswith("batch "):
                marks.append((time.perf_counter() - started, _applied(line)))
    run.seconds = time.perf_counter() - started
    if process.returncode:
        raise SystemExit(f"{command} failed ({process.returncode}): see {log}")
    run.batches = len(marks)
    if len(marks) > 1:
        run.steady_rows = sum(rows for _, rows in marks[1:])
        run.steady_seconds = marks[-1][0] - marks[0][0]


def replicate(
    work: Path, where: str, master: str | None, planner: str, args: argparse.Namespace
) -> Run:
    name = f"{where}-{planner}".replace(" ", "-").replace("(", "").replace(")", "")
    target, checkpoint = work / f"lake-{name}", work / f"checkpoint-{name}"
    for leftover in (target, checkpoint):
        shutil.rmtree(leftover, ignore_errors=True)
    command = _cli("replicate", "--source", str(work / "capture"), "-p", "canal-json", *OPTIONS)
    command += ["--target", f"delta:{target}", "--checkpoint", str(checkpoint)]
    command += ["--engine", "spark", "--planner", planner, "--trigger", "once"]
    command += ["--source-option", f"maxOffsetsPerTrigger={args.per_batch}"]
    command += ["--master", master] if master else []
    for setting in args.spark_conf:
        command += ["--spark-conf", setting]
    run = Run(where, planner, 0.0, 0, False)
    with CpuSampler() as cpu:
        _timed(command, work / f"{name}.log", run)
    run.cpu = cpu.totals()
    verify = _cli("verify", "--target", f"delta:{target}", "--engine", "spark")
    done = subprocess.run(
        [*verify, "--expected", str(work / "expected")],
        env=_env(),
        capture_output=True,
        check=False,
    )
    run.verified = done.returncode == 0
    return run


def report(runs: list[Run], rows: int) -> None:
    print(
        "| where | planner | micro-batches | seconds | rows/s whole | rows/s steady "
        "| x one worker (steady) | CPU s: " + " / ".join(SHOWN) + " | verified |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        one = next((x for x in runs if x.planner == r.planner and x.where.startswith("1 ")), None)
        steady = r.steady_rows / r.steady_seconds if r.steady_seconds else 0.0
        base = one.steady_rows / one.steady_seconds if one and one.steady_seconds else 0.0
        ratio = f"{steady / base:.2f}x" if base else "-"
        cpu = " / ".join(f"{r.cpu.get(kind, 0.0):.0f}" for kind in SHOWN)
        print(
            f"| {r.where} | {r.planner} | {r.batches} | {r.seconds:.0f} "
            f"| {rows / r.seconds:,.0f} | {steady:,.0f} | {ratio} | {cpu} "
            f"| {'yes' if r.verified else 'NO'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--per-batch", type=int, default=75_000, help="maxOffsetsPerTrigger")
    parser.add_argument(
        "--watermark-every",
        type=int,
        default=1250,
        help="produce's --watermark-every: 1,250 transactions, about one a second at 20,000 "
        "changes/s, as TiCDC sends them (16: one every 64 changes)",
    )
    parser.add_argument("--planners", nargs="+", default=["executors", "driver"])
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for every run (replicate's --spark-conf), for example JVM options",
    )
    parser.add_argument(
        "--where",
        nargs="+",
        choices=["1", "2", "local"],
        default=["1", "2", "local"],
        help="which runs: a cluster of 1 worker, of 2, local",
    )
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    produce(work, args)
    runs: list[Run] = []
    for workers in (int(w) for w in args.where if w != "local"):
        with SparkCluster(workers=workers) as cluster:
            for planner in args.planners:
                where = f"{workers} worker(s)"
                runs.append(replicate(work, where, cluster.master, planner, args))
                print(runs[-1], flush=True)
    for planner in args.planners if "local" in args.where else ():
        runs.append(replicate(work, "local", None, planner, args))
        print(runs[-1], flush=True)
    print(f"\nfiles in {work}; {args.rows:,} changes, {args.tables} tables\n")
    report(runs, args.rows)


if __name__ == "__main__":
    main()
