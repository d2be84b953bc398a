"""Running a plan's steps: the tables of a micro-batch at once, each table's steps in order.

A step waits only for the earlier steps that touch one of its tables (a rename touches the
old and the new name, a drop every table it drops); a DDL that concerns no single table (a
schema-level statement) waits for every step before it and holds back every step after it.
So the plan's order holds wherever it matters, and tables that share nothing are merged
concurrently: by the Spark engine as concurrent Spark jobs (the executors stay busy while the
driver plans and commits another table's merge), by the embedded engine as concurrent
delta-rs merges (which release the GIL).

Exactly once is unchanged: a step's version is recorded by its own table, and a batch cut
short by a failure or a kill is applied again from the start, each table skipping the steps
it holds.  The first failure (in plan order) is raised once the steps already running end;
no step starts after it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

from ticdc_spark.pipeline.steps import DDLStep, Step, TableKey

__all__ = ["run_steps", "touched"]

Result = TypeVar("Result")


def touched(step: Step) -> frozenset[TableKey] | None:
    """The tables a step reads or changes; None for one that concerns every table."""
    key = (step.database, step.table)
    if not isinstance(step, DDLStep):
        return frozenset({key})
    if not step.table:
        return None
    tables = {key, *step.dropped}
    if step.renamed_to is not None:
        tables.add(step.renamed_to)
    return frozenset(tables)


def run_steps(
    steps: Sequence[Step], apply: Callable[[int, Step], Result], threads: int
) -> list[Result]:
    """``apply(number, step)`` for every step, results in plan order; with ``threads`` > 1,
    steps of tables that share nothing run at once."""
    if threads <= 1 or len(steps) <= 1:
        return [apply(number, step) for number, step in enumerate(steps)]
    futures: list[Future[Result]] = []
    failed = threading.Event()
    with ThreadPoolExecutor(threads, thread_name_prefix="ticdc-step") as pool:
        for number, step in enumerate(steps):
            after = _dependencies(steps, number, futures)
            futures.append(pool.submit(_after, after, failed, apply, number, step))
    errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None and not isinstance(e, _Skipped)), None)
    if first is not None:  # (the first failure in plan order; not a step it kept from starting)
        raise first
    return [future.result() for future in futures]


def _dependencies(
    steps: Sequence[Step], number: int, futures: list[Future[Result]]
) -> list[Future[Result]]:
    """The futures of the nearest earlier steps this one must follow: for each of its
    tables the latest step touching it, or every earlier step for a step (or before a step)
    that concerns every table."""
    mine = touched(steps[number])
    found: list[Future[Result]] = []
    seen: set[TableKey] = set()
    for earlier in range(number - 1, -1, -1):
        theirs = touched(steps[earlier])
        if mine is None or theirs is None:
            found.append(futures[earlier])
            if theirs is None:  # (a barrier: it already waited for everything before it)
                break
            continue
        shared = (mine & theirs) - seen
        if shared:
            found.append(futures[earlier])
            seen |= shared
            if seen >= mine:
                break
    return found


def _after(
    after: list[Future[Result]],
    failed: threading.Event,
    apply: Callable[[int, Step], Result],
    number: int,
    step: Step,
) -> Result:
    wait(after)
    if failed.is_set() or any(f.exception() is not None for f in after):
        failed.set()
        raise _Skipped(number)
    try:
        return apply(number, step)
    except BaseException:
        failed.set()
        raise


class _Skipped(Exception):
    """A step not started because an earlier one failed (never the error reported: the
    earlier step's error comes first in plan order)."""

    def __init__(self, number: int) -> None:
        super().__init__(f"step {number} not started: an earlier step failed")
