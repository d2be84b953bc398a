"""The driver's peak memory while ``replicate --trigger once`` applies a capture backlog.

Each micro-batch's changelog is collected to the driver to be applied, so the driver's
memory follows the size of a micro-batch; ``replicate`` bounds it by default (about 100,000
changes: ``maxOffsetsPerTrigger``, and for capture directories ``maxBytesPerTrigger``).  For
each backlog size this makes a Canal-JSON capture directory with ``ticdc-spark produce``,
runs ``ticdc-spark replicate --trigger once`` into Delta Lake, samples the resident memory
(RSS, from /proc) of the whole process tree (the Python driver, Spark's JVM, the Python
workers) every 0.2 s, verifies the tables, and prints the peaks side by side.

    python benchmarks/memory_bench.py --messages 100000 500000 1000000 2000000
    python benchmarks/memory_bench.py --messages 100000 500000 --unbounded   # also without

A backlog directory already holding ``capture/`` is used as it is: e.g. the first files of
a larger backlog's capture (its tables then cannot be verified: no expected state).
``--unbounded`` runs each backlog again with the bounds lifted (the behaviour before the
default bound: the whole backlog in one micro-batch).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = ["-o", "enable-tidb-extension=true"]
PAGE = os.sysconf("SC_PAGE_SIZE")
UNBOUNDED = [
    "--source-option",
    f"maxOffsetsPerTrigger={2**62}",
    "--source-option",
    f"maxBytesPerTrigger={2**62}",
]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ticdc_spark.cli", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)  # this checkout's code first
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
    )
    return env


def _tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _rss(pid: int) -> tuple[str, int]:
    """(command name, resident bytes) of a process; ("", 0) once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="ascii", errors="replace") as comm:
            name = comm.read().strip()
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return name, int(statm.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return "", 0


@dataclass
class Peak:
    total: int = 0
    jvm: int = 0
    python: int = 0  # the driver's Python and the Python workers
    driver: int = 0  # the driver's Python alone (collects and applies each micro-batch)
    heap: int = 0  # the JVM's committed heap (jstat), 0 without jstat
    samples: int = 0


def _committed_heap(pid: int) -> int:
    """The JVM's committed heap in bytes (survivors, eden, old), from ``jstat -gc``; 0 when
    jstat is missing or fails."""
    try:
        lines = subprocess.run(
            ["jstat", "-gc", str(pid)], capture_output=True, text=True, timeout=5, check=False
        ).stdout.split("\n")
        fields = dict(zip(lines[0].split(), map(float, lines[1].split()), strict=False))
        return int(sum(fields[k] for k in ("S0C", "S1C", "EC", "OC")) * 1024)
    except (OSError, IndexError, KeyError, ValueError, subprocess.SubprocessError):
        return 0


def _sample(pid: int, peak: Peak, done: threading.Event) -> None:
    heap_due = 0.0
    while not done.is_set():
        jvm = python = driver = 0
        for member in _tree(pid):
            name, rss = _rss(member)
            if name == "java":
                jvm += rss
                if time.monotonic() >= heap_due and shutil.which("jstat"):  # (1 s apart)
                    peak.heap = max(peak.heap, _committed_heap(member))
                    heap_due = time.monotonic() + 1
            else:
                python += rss
                driver += rss if member == pid else 0
        peak.total = max(peak.total, jvm + python)
        peak.jvm, peak.python = max(peak.jvm, jvm), max(peak.python, python)
        peak.driver = max(peak.driver, driver)
        peak.samples += 1
        done.wait(0.2)


@dataclass
class Run:
    messages: int
    bounded: bool
    batches: int
    seconds: float
    peak: Peak
    verified: bool | None  # None: no expected state (a backlog made of another's files)


def produce(rows: int, where: Path, ddl_every: int) -> int:
    """A Canal-JSON capture directory of ``rows`` changes; returns its messages."""
    capture = where / "capture"
    if not capture.is_dir():  # (made whole elsewhere then renamed in, or made here)
        started = time.perf_counter()
        shutil.rmtree(where / "producing", ignore_errors=True)
        subprocess.run(
            _cli(
                "produce",
                "-p",
                "canal-json",
                *OPTIONS,
                "--to",
                str(where / "producing"),
                "--expected",
                str(where / "expected"),
                "--rows",
                str(rows),
                "--tables",
                "4",
                "--ddl-every",
                str(ddl_every),
            ),
            env=_env(),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.replace(where / "producing", capture)
        print(f"  produced {rows:,} changes in {time.perf_counter() - started:.0f}s", flush=True)
    return sum(f.read_bytes().count(b"\n") for f in capture.glob("*.jsonl"))


def replicate(
    where: Path, messages: int, bounded: bool, extra: list[str], name: str | None = None
) -> Run:
    name = name or ("bounded" if bounded else "unbounded")
    target, checkpoint = where / f"lake-{name}", where / f"checkpoint-{name}"
    for leftover in (target, checkpoint):  # a run from scratch
        shutil.rmtree(leftover, ignore_errors=True)
    command = _cli(
        "replicate",
        "--source",
        str(where / "capture"),
        "-p",
        "canal-json",
        *OPTIONS,
        "--target",
        f"delta:{target}",
        "--checkpoint",
        str(checkpoint),
        "--trigger",
        "once",
        *([] if bounded else UNBOUNDED),
        *extra,
    )
    started = time.perf_counter()
    peak, done = Peak(), threading.Event()
    with open(where / f"replicate-{name}.log", "wb") as log:
        process = subprocess.Popen(command, env=_env(), stderr=log, stdout=log)
        sampler = threading.Thread(target=_sample, args=(process.pid, peak, done), daemon=True)
        sampler.start()
        code = process.wait()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    text = (where / f"replicate-{name}.log").read_text(errors="replace")
    if code != 0:
        raise SystemExit(f"replicate failed ({code}); see {where}/replicate-{name}.log")
    batches = sum(1 for line in text.splitlines() if line.startswith("batch "))
    if not (where / "expected").is_dir():
        return Run(messages, bounded, batches, seconds, peak, None)
    engine = ["--engine", "spark"] if "--planner" in extra else []  # (Delta with deletion vectors)
    verify = subprocess.run(
        _cli(
            "verify", "--target", f"delta:{target}", *engine, "--expected", str(where / "expected")
        ),
        env=_env(),
        capture_output=True,
        check=False,
    )
    return Run(messages, bounded, batches, seconds, peak, verify.returncode == 0)


def _verdict(verified: bool | None) -> str:
    return "n/a (prefix of a larger backlog)" if verified is None else "yes" if verified else "NO"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--messages",
        type=int,
        nargs="+",
        default=[100_000, 2_000_000],
        help="backlog sizes, in changes (row messages; plus DDL and watermarks)",
    )
    parser.add_argument(
        "--unbounded", action="store_true", help="also run each backlog with the bounds lifted"
    )
    parser.add_argument(
        "--ddl-every",
        type=int,
        default=0,
        help="produce's --ddl-every (default none: each ALTER TABLE ADD COLUMN "
        "rewrites its table, which costs time, not driver memory)",
    )
    parser.add_argument("--work", type=Path, default=None, help="keep the files here")
    parser.add_argument(
        "--replicate-arg",
        action="append",
        default=[],
        help="passed to replicate (e.g. --replicate-arg=--serial-apply)",
    )
    parser.add_argument(
        "--micro-batches",
        type=int,
        nargs="+",
        default=None,
        help="instead: the first backlog replicated in micro-batches of these many messages "
        "(maxOffsetsPerTrigger), by each --planners (the spark engine), side by side",
    )
    parser.add_argument("--planners", nargs="+", default=["driver", "executors"])
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="memory-bench-"))
    if args.micro_batches:
        by_micro_batch(work, args)
        return
    runs: list[Run] = []
    for rows in args.messages:
        where = work / f"rows-{rows}"
        where.mkdir(parents=True, exist_ok=True)
        print(f"backlog of {rows:,} changes ...", flush=True)
        messages = produce(rows, where, args.ddl_every)
        for bounded in [True, False] if args.unbounded else [True]:
            run = replicate(where, messages, bounded, args.replicate_arg)
            runs.append(run)
            print(
                f"  {'bounded' if bounded else 'unbounded'}: {run.batches} micro-batches, "
                f"{run.seconds:.0f}s, peak {run.peak.total / 2**30:.2f} GiB, "
                f"verified: {run.verified}",
                flush=True,
            )
    print(f"\nfiles in {work}\n")
    print(
        "| backlog (messages) | bounds | micro-batches | seconds | peak RSS, process tree "
        "| peak JVM (committed heap) | peak Python (driver + workers) | peak driver Python "
        "| tables verified |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r.messages:,} | {'default' if r.bounded else 'lifted'} | {r.batches} "
            f"| {r.seconds:.0f} | {r.peak.total / 2**30:.2f} GiB | {r.peak.jvm / 2**30:.2f} GiB "
            f"({r.peak.heap / 2**30:.2f}) | {r.peak.python / 2**30:.2f} GiB "
            f"| {r.peak.driver / 2**30:.2f} GiB | {_verdict(r.verified)} |"
        )


def by_micro_batch(work: Path, args: argparse.Namespace) -> None:
    """The driver's memory as micro-batches grow, planned on the driver and on the
    executors (issue 27: flat within 20% while a micro-batch grows 10x)."""
    rows = args.messages[0]
    where = work / f"rows-{rows}"
    where.mkdir(parents=True, exist_ok=True)
    messages = produce(rows, where, args.ddl_every)
    runs: list[tuple[str, int, Run]] = []
    for size in args.micro_batches:
        for planner in args.planners:  # (alternating: the machine's noise shared)
            bounds = [f"maxOffsetsPerTrigger={size}", f"maxBytesPerTrigger={2**62}"]
            extra = ["--engine", "spark", "--planner", planner, *args.replicate_arg]
            extra += [a for b in bounds for a in ("--source-option", b)]
            run = replicate(where, messages, True, extra, f"{planner}-{size}")
            runs.append((planner, size, run))
            print(
                f"  {planner}, micro-batches of {size:,}: {run.seconds:.0f}s, driver "
                f"{run.peak.driver / 2**20:,.0f} MiB, verified {run.verified}",
                flush=True,
            )
    print(f"\nfiles in {work}\n")
    print(
        "| planner | micro-batch (messages) | micro-batches | seconds | peak driver Python "
        "| x smallest | peak JVM (committed heap) | peak Python workers | tables verified |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for planner, size, r in runs:
        first = next(x for p, _, x in runs if p == planner)
        print(
            f"| {planner} | {size:,} | {r.batches} | {r.seconds:.0f} "
            f"| {r.peak.driver / 2**20:,.0f} MiB | {r.peak.driver / first.peak.driver:.2f}x "
            f"| {r.peak.jvm / 2**30:.2f} GiB ({r.peak.heap / 2**30:.2f}) "
            f"| {(r.peak.python - r.peak.driver) / 2**20:,.0f} MiB | {_verdict(r.verified)} |"
        )


if __name__ == "__main__":
    main()
