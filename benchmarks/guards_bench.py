"""What guards cost the planner: one micro-batch of sysbench-like changes planned side by side.

Live tables keep no tombstones; the planner drops a change older than a delete already
applied by the delete's *guard* in the consumer state (pipeline/guards.py).  One micro-batch
of ``--changes`` changes to one sysbench-like table (an int key, 120- and 60-character
strings; 60% updates, 20% inserts, 20% deletes), eventual mode, planned by:

* ``no guards``: the planner with guards switched off (what planning cost before them), in
  eventual and in consistent mode;
* ``guards, collected``: consistent mode, every change at or below the watermark: the
  deletes need no guard (a later older change is a replay), so none is added;
* ``guards, kept``: eventual mode without watermarks: every delete adds its guard;
* ``guards, N held``: the same with N guards of the table already in the state (a stream
  without watermarks within its retention), which every step's changes are looked up in.

It also times the guards' part alone (screening the step's changes), and saving and
reading back a state holding N guards (``guards-N.arrow``, written
with every micro-batch while guards are kept).  Run it as::

    python benchmarks/guards_bench.py [--changes 100000] [--held 1000000] [--repeat 5]

The machine is shared: compare the ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from ticdc_spark.model import Watermark
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.guards import encode_keys
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.state import ConsumerState

SCHEMA = (
    '{"columns": [["id", "int"], ["k", "int"], ["c", "char(120)"], ["pad", "char(60)"]], '
    '"pk": ["id"]}'
)
TABLE = ("sbtest", "sbtest1")
MODES = ("consistent", "eventual")
BASE_TS = 450_000_000_000_000_000


@dataclass(frozen=True)
class _NoGuards(Capabilities):
    """Capabilities of a protocol carrying everything, with the guards switched off."""

    @property
    def keeps_guards(self) -> bool:
        return False


def changelog(count: int, watermark: bool, seed: int = 7) -> pa.Table:
    """``count`` changes over keys 0 .. 2 x count, in commit order (and a watermark past
    them at the end)."""
    rng = random.Random(seed)
    builder = ChangelogBuilder()
    for i in range(count):
        key = rng.randrange(2 * count)
        image = {"id": str(key), "k": str(rng.randrange(10**6)), "c": "c" * 120, "pad": "p" * 60}
        draw = rng.random()
        op = "UPDATE" if draw < 0.6 else "INSERT" if draw < 0.8 else "DELETE"
        before = image if op != "INSERT" else None
        after = image if op != "DELETE" else None
        position = ("cdc", 0, i, 0)
        builder.append_row(op, *TABLE, BASE_TS + i, before, after, SCHEMA, position)
    if watermark:
        builder.add_events([Watermark(BASE_TS + count)], "cdc", 0, count)
    return pa.Table.from_batches([builder.to_batch()])


def held_guards(state: ConsumerState, count: int) -> None:
    """``count`` guards of the table, older than the batch (keys beyond its own)."""
    if not count:
        return
    keys = encode_keys([pa.array([str(10**9 + i) for i in range(count)])])
    ts = pa.array([BASE_TS - 1] * count, pa.int64())
    state.guards.raise_to(TABLE, ("id",), keys, ts)


def contenders(held: int) -> dict[str, tuple[str, Capabilities, int]]:
    """Each contender's mode, capabilities and guards already held."""
    return {
        "no guards": ("eventual", _NoGuards(), 0),
        "no guards, consistent": ("consistent", _NoGuards(), 0),
        "guards, collected (consistent)": ("consistent", Capabilities(), 0),
        "guards, kept (eventual)": ("eventual", Capabilities(), 0),
        f"guards, {held:,} held": ("eventual", Capabilities(), held),
    }


def planned(batch: pa.Table, mode: str, capabilities: Capabilities, held: int) -> Planner:
    """A planner whose state holds ``held`` guards, ready to plan ``batch``."""
    state = ConsumerState()
    if held:
        held_guards(state, held)
    return Planner(mode, state, capabilities=capabilities, max_guards=10**8)


def timed_rounds(
    batches: dict[str, pa.Table], held: int, repeat: int
) -> dict[str, tuple[float, int]]:
    """Each contender's best planning time (the state made beforehand, untimed) and how
    many guards it keeps after; the contenders take turns, one warm-up round first."""
    found: dict[str, tuple[float, int]] = {}
    for _ in range(repeat + 1):
        for name, (mode, capabilities, guards) in contenders(held).items():
            planner = planned(batches[mode], mode, capabilities, guards)
            started = time.perf_counter()
            planner.plan(batches[mode])
            seconds = time.perf_counter() - started
            if name in found:
                seconds = min(seconds, found[name][0])
            found[name] = (seconds, planner.state.guards.count())
    return found


def screening(batch: pa.Table, held: int, repeat: int) -> dict[str, float]:
    """The guards' own part alone: the best time to screen the step's final changes (what
    ``final_changes`` left of the batch) against no guard and against ``held``."""
    planner = Planner("eventual", capabilities=_NoGuards())
    (step,) = planner.plan(batch).steps
    rows = step.rows  # type: ignore[union-attr]
    found = {}
    for name, guards in (("no guards yet", 0), (f"{held:,} held", held)):
        times = []
        for _ in range(repeat + 1):
            state = ConsumerState()
            held_guards(state, guards)
            started = time.perf_counter()
            state.guards.screen(TABLE, ("id",), rows, -1)
            times.append(time.perf_counter() - started)
        found[name] = min(times[1:])
    return found


def best(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def persistence(held: int, repeat: int) -> tuple[float, float, int]:
    """Seconds to save and to read back a state of ``held`` guards, and the file's bytes."""
    state = ConsumerState()
    held_guards(state, held)
    with tempfile.TemporaryDirectory() as root:
        store = StateStore(root)
        saved = best(lambda: store.save(0, state), repeat)
        read = best(lambda: store.read(0), repeat)
        size = store.guards_path(0).stat().st_size
    return saved, read, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    batches = {mode: changelog(args.changes, mode == "consistent") for mode in MODES}
    print(f"{args.changes:,} changes, one table, best of {args.repeat}\n")
    print(f"| {'planner':<32} | seconds | vs no guards | guards after |")
    print(f"|{'-' * 34}|---------|--------------|--------------|")
    results = timed_rounds(batches, args.held, args.repeat)
    base = results["no guards"][0]
    for name, (seconds, guards) in results.items():
        print(f"| {name:<32} | {seconds:7.3f} | {seconds / base:11.2f}x | {guards:>12,} |")
    print(f"\nscreening the step's {args.changes:,} changes alone (best of {args.repeat}):")
    for name, seconds in screening(batches["eventual"], args.held, args.repeat).items():
        print(f"  against {name}: {seconds:.3f} s")
    saved, read, size = persistence(args.held, args.repeat)
    print(
        f"\nstate with {args.held:,} guards: saved in {saved:.3f} s, read back in {read:.3f} s, "
        f"guards file {size / 2**20:.1f} MiB ({size / args.held:.0f} bytes a guard)"
    )


if __name__ == "__main__":
    main()
