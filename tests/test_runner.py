"""The step runner: tables of a micro-batch at once, each table's steps in plan order, a
schema-level DDL a barrier, the first failure (in plan order) raised and nothing started
after it."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

from ticdc_spark.model import DDLType
from ticdc_spark.pipeline.runner import run_steps, touched
from ticdc_spark.pipeline.steps import DDLStep, Step, TableChanges

WAIT = 30  # seconds: a safety net so that a broken runner fails instead of hanging


def rows(db: str, table: str) -> TableChanges:
    return TableChanges(db, table, None, pa.table({"op": pa.array([], pa.string())}))  # type: ignore[arg-type]


def ddl(db: str, table: str, **extra: Any) -> DDLStep:
    return DDLStep(db, table, 1, "DDL", DDLType.NONE, None, None, **extra)


def test_what_a_step_touches() -> None:
    assert touched(rows("d", "a")) == {("d", "a")}
    assert touched(ddl("d", "a", renamed_to=("e", "b"))) == {("d", "a"), ("e", "b")}
    assert touched(ddl("d", "a", dropped=(("d", "a"), ("d", "c")))) == {("d", "a"), ("d", "c")}
    assert touched(ddl("d", "")) is None  # (a schema-level statement: every table)


def test_tables_run_at_once_and_each_table_in_order() -> None:
    """Step 0 (table a) waits until step 1 (table b) has run: only possible if they run at
    once.  Steps 2 and 3 (a again) must come after step 0, in order."""
    b_ran = threading.Event()
    order: list[int] = []
    lock = threading.Lock()

    def apply(number: int, step: Step) -> int:
        if number == 0:
            assert b_ran.wait(WAIT), "table b's step never ran beside table a's"
        if number == 1:
            b_ran.set()
        with lock:
            order.append(number)
        return number * 10

    steps = [rows("d", "a"), rows("d", "b"), rows("d", "a"), rows("d", "a")]
    assert run_steps(steps, apply, threads=4) == [0, 10, 20, 30]
    a_steps = [n for n in order if n in (0, 2, 3)]
    assert a_steps == [0, 2, 3]


def test_a_schema_level_ddl_is_a_barrier() -> None:
    done: list[int] = []
    lock = threading.Lock()

    def apply(number: int, step: Step) -> None:
        with lock:
            if number == 2:  # the barrier: everything before it done, nothing after it
                assert sorted(done) == [0, 1]
            if number in (3, 4):
                assert 2 in done
            done.append(number)

    steps = [rows("d", "a"), rows("d", "b"), ddl("d", ""), rows("d", "a"), rows("d", "c")]
    run_steps(steps, apply, threads=4)
    assert sorted(done) == [0, 1, 2, 3, 4]


def test_a_rename_orders_both_names() -> None:
    done: list[int] = []

    def apply(number: int, step: Step) -> None:
        if number == 2:  # rows of the new name come after the rename
            assert 1 in done
        if number == 1:  # the rename comes after the old name's rows
            assert 0 in done
        done.append(number)

    steps = [rows("d", "a"), ddl("d", "a", renamed_to=("d", "b")), rows("d", "b")]
    run_steps(steps, apply, threads=3)
    assert sorted(done) == [0, 1, 2]


def test_the_first_failure_in_plan_order_and_nothing_after_it() -> None:
    started: list[int] = []

    def apply(number: int, step: Step) -> None:
        started.append(number)
        if number == 1:
            raise ValueError("step 1 failed")

    steps = [rows("d", "a"), rows("d", "a"), rows("d", "a"), rows("d", "a")]
    with pytest.raises(ValueError, match="step 1 failed"):
        run_steps(steps, apply, threads=4)
    assert started == [0, 1]  # (steps 2 and 3 follow step 1 on the same table: never started)


def test_one_thread_is_the_plain_loop() -> None:
    seen: list[int] = []
    run_steps([rows("d", "a"), rows("d", "b")], lambda n, s: seen.append(n), threads=1)
    assert seen == [0, 1]
