"""Throughput as the cluster grows: ``replicate`` on a standalone cluster of one worker and of
two (tests/spark_cluster.py: each worker pinned with its executor and Python workers to a
core of its own), and locally, with micro-batches planned on the driver and on the
executors, side by side.

A Canal-JSON capture directory of N changes over T tables is made once (``ticdc-spark
produce``); each run replicates it whole (``--trigger once``, the spark engine, Delta) from
a fresh checkpoint, in a process of its own; rows/s = changes / wall time of that process
(its JVM's start included: the same in every run), and the tables are verified against the
workload's expected state.

    python benchmarks/cluster_bench.py --rows 200000 --tables 8
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from spark_cluster import SparkCluster  # noqa: E402

OPTIONS = ["-o", "enable-tidb-extension=true"]


@dataclass
class Run:
    where: str
    planner: str
    seconds: float
    batches: int
    verified: bool


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ticdc_spark.cli", *args]


def _env() -> dict[str, str]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


def produce(work: Path, rows: int, tables: int) -> Path:
    capture = work / "capture"
    if not capture.is_dir():
        command = _cli("produce", "-p", "canal-json", *OPTIONS, "--to", str(capture))
        command += ["--expected", str(work / "expected"), "--rows", str(rows)]
        command += ["--tables", str(tables), "--ddl-every", "0", "--partitions", "4"]
        subprocess.run(command, env=_env(), check=True, stdout=subprocess.DEVNULL)
    return capture


def replicate(work: Path, where: str, master: str | None, planner: str, per_batch: int) -> Run:
    name = f"{where}-{planner}"
    target, checkpoint = work / f"lake-{name}", work / f"checkpoint-{name}"
    for leftover in (target, checkpoint):
        shutil.rmtree(leftover, ignore_errors=True)
    command = _cli("replicate", "--source", str(work / "capture"), "-p", "canal-json", *OPTIONS)
    command += ["--target", f"delta:{target}", "--checkpoint", str(checkpoint)]
    command += ["--engine", "spark", "--planner", planner, "--trigger", "once"]
    command += ["--source-option", f"maxOffsetsPerTrigger={per_batch}"]
    command += ["--master", master] if master else []
    started = time.perf_counter()
    with open(work / f"{name}.log", "wb") as log:
        subprocess.run(command, env=_env(), stdout=log, stderr=log, check=True)
    seconds = time.perf_counter() - started
    text = (work / f"{name}.log").read_text(errors="replace")
    batches = sum(1 for line in text.splitlines() if line.startswith("batch "))
    verify = _cli("verify", "--target", f"delta:{target}", "--engine", "spark")
    done = subprocess.run(
        [*verify, "--expected", str(work / "expected")],
        env=_env(),
        capture_output=True,
        check=False,
    )
    return Run(where, planner, seconds, batches, done.returncode == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--per-batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--planners", nargs="+", default=["executors", "driver"])
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    produce(work, args.rows, args.tables)
    runs: list[Run] = []
    for workers in (1, 2):
        with SparkCluster(workers=workers) as cluster:
            for planner in args.planners:
                runs.append(
                    replicate(work, f"{workers} worker(s)", cluster.master, planner, args.per_batch)
                )
                print(runs[-1], flush=True)
    for planner in args.planners:
        runs.append(replicate(work, "local", None, planner, args.per_batch))
        print(runs[-1], flush=True)
    print(f"\nfiles in {work}; {args.rows:,} changes, {args.tables} tables\n")
    print("| where | planner | micro-batches | seconds | rows/s | x one worker | verified |")
    print("|---|---|---|---|---|---|---|")
    for r in runs:
        one = next(x for x in runs if x.planner == r.planner and x.where.startswith("1 "))
        print(
            f"| {r.where} | {r.planner} | {r.batches} | {r.seconds:.0f} "
            f"| {args.rows / r.seconds:,.0f} | {one.seconds / r.seconds:.2f}x "
            f"| {'yes' if r.verified else 'NO'} |"
        )


if __name__ == "__main__":
    main()
