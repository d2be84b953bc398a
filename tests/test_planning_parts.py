"""Planning by parts (pipeline.parts, pipeline.planning) plans what one planner plans (issue
27): the same steps per table, the same figures, the same state, the same rows held back
and guards, batch after batch, over captures of all five protocols and hand-written
changelogs (renames, truncates, drops, late changes older than a delete)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

import simple_stream
from changelog_script import ID_V, Script
from pipeline_helpers import changelog, interleave, produce
from ticdc_spark.codec import make_encoder
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import Bootstrap, DDLEvent, DDLType, RowChange, RowKind
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.ordering import GUARD_RETENTION_SECONDS, MAX_GUARDS, MAX_HELD_ROWS
from ticdc_spark.pipeline.parts import table_groups
from ticdc_spark.pipeline.planning import (
    DriverPlanning,
    LocalRunner,
    PartsPlanning,
    PlanSettings,
    guards_kept,
)
from ticdc_spark.pipeline.policy import Mode
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import DDLStep, Plan, TableChanges
from ticdc_spark.testing.workload import Workload

PROTOCOLS = {
    "canal-json": {"enable-tidb-extension": "true"},
    "open-protocol": {},
    "debezium": {"enable-tidb-extension": "true"},
    "simple": {"send-bootstrap-in-msg-count": "40"},
    "avro": {"schema-registry": "mock://planning-parts", "enable-tidb-extension": "true"},
}
TOPICS = {"avro": "cdc_{schema}_{table}"}
FIGURES = ("rows_in", "rows_released", "replays", "guarded", "held", "awaiting_schema")


def _settings(protocol: str, options: dict[str, str], mode: str) -> PlanSettings:
    return PlanSettings(
        Mode.parse(mode),
        (),
        Capabilities.of(protocol, options),
        MAX_HELD_ROWS,
        GUARD_RETENTION_SECONDS,
        MAX_GUARDS,
    )


def _rows(table: pa.Table | None) -> list[str]:
    return [] if table is None else sorted(repr(r) for r in table.to_pylist())


def _by_table(plan: Plan) -> dict[Any, list[Any]]:
    """Each table's steps in order, every DDL in every table's list (one planner orders
    the tables of a segment its own way; their steps are independent)."""
    out: dict[Any, list[Any]] = {}
    ddls: list[Any] = []
    for step in plan.steps:
        if isinstance(step, DDLStep) and step.sql.startswith("-- "):  # (rows' own schema)
            out.setdefault((step.database, step.table), list(ddls)).append(repr(step))
        elif isinstance(step, DDLStep):
            ddls.append(repr(step))
            for steps in out.values():
                steps.append(repr(step))
        else:
            assert isinstance(step, TableChanges)
            key = (step.database, step.table)
            steps = out.setdefault(key, list(ddls))
            steps.append((repr(step.schema), _rows(step.rows)))
    return out | {"ddl": ddls}


def _state(state: ConsumerState, held: pa.Table | None, guards: pa.Table | None) -> Any:
    """A state's comparable parts: its JSON (but where parts keep things), its held rows
    and guards."""
    import orjson

    saved = orjson.loads(state.to_json())
    for name in ("parts", "held_rows", "guards"):
        saved.pop(name, None)
    saved = {k: sorted(v, key=repr) if isinstance(v, list) else v for k, v in saved.items()}
    return saved, _rows(held), _rows(guards)


def _parts_held(state: ConsumerState, runner: LocalRunner, batch: int) -> Any:
    held, guards = runner.kept[batch]
    rows = [t for t in (state.held, held) if t is not None and t.num_rows]
    if held is not None:
        rows = [t.drop_columns(["_order"]) if "_order" in t.column_names else t for t in rows]
    return (pa.concat_tables(rows) if rows else None), guards_kept(guards, state)


def _compare(batches: list[pa.Table], settings: PlanSettings) -> None:
    one, by_parts, runner = ConsumerState(), ConsumerState(), LocalRunner()
    parts = PartsPlanning(runner)
    for number, batch in enumerate(batches):
        # (as a restart reads it: parts start from the saved state, whose catalog keeps
        # no column charsets)
        one = ConsumerState.from_json(one.to_json(), one.held, one.guards)
        expected, one = DriverPlanning().plan(settings, batch, one, number)
        got, by_parts = parts.plan(settings, batch, by_parts, number)
        assert _by_table(got) == _by_table(expected), number
        assert [getattr(got, f) for f in FIGURES] == [getattr(expected, f) for f in FIGURES]
        assert got.watermark == expected.watermark
        assert _rows(got.dead_letters) == _rows(expected.dead_letters)
        held, guards = _parts_held(by_parts, runner, number)
        assert _state(by_parts, held, guards) == _state(one, one.held, one.guards.to_arrow()), (
            number
        )


# (Avro carries no watermarks: eventual mode only, docs/pipeline.md)
CASES = [
    (p, m)
    for p in sorted(PROTOCOLS)
    for m in ("consistent", "eventual")
    if p != "avro" or m == "eventual"
]


@pytest.mark.parametrize(("protocol", "mode"), CASES)
def test_parts_plan_what_one_planner_plans(protocol: str, mode: str) -> None:
    options = PROTOCOLS[protocol]
    workload = Workload(seed=41, rows=300, tables=5, watermark_every=5, ddl_every=40)
    messages = produce(workload, protocol, options, topic=TOPICS.get(protocol, "cdc_{schema}"))
    batches = list(interleave(messages, seed=9, chunk=max(20, len(messages) // 8)))
    batches = [*batches[:3], batches[1], *batches[3:]]  # (a micro-batch delivered again)
    tables = [changelog(b, protocol, options) for b in batches]
    _compare(tables, _settings(protocol, options, mode))


def _script_batches() -> list[pa.Table]:
    """Renames, truncates and drops between the changes of four tables, on two partitions
    that run at their own pace, and changes older than a delete arriving late."""
    out = []
    s = Script()
    for i, table in enumerate(("a", "b", "c", "d")):
        s.insert(100 + i, {"id": "1", "v": table}, table=table).insert(
            110 + i, {"id": "2", "v": table}, p=1, table=table
        )
    s.delete(120, {"id": "1", "v": "a"}, table="a").watermark(115, 0, 1)
    out.append(s.table())
    s = Script()
    s.offsets = {0: 100, 1: 100}
    s.update(118, {"id": "1", "v": "a"}, {"id": "1", "v": "late"}, p=1, table="a")
    s.ddl(130, "RENAME TABLE db.a TO db.e", DDLType.RENAME_TABLE, table="a")
    s.insert(131, {"id": "3", "v": "e"}, table="e").insert(132, {"id": "4"}, p=1, table="b")
    s.ddl(140, "TRUNCATE TABLE db.b", DDLType.TRUNCATE_TABLE, table="b")
    s.insert(141, {"id": "5", "v": "b"}, p=1, table="b").watermark(135, 0, 1)
    s.ddl(150, "DROP TABLE db.c", DDLType.DROP_TABLE, table="c")
    s.update(145, {"id": "1"}, {"id": "9", "v": "moved"}, p=1, table="d")
    out.append(s.table())
    s = Script()
    s.offsets = {0: 200, 1: 200}
    s.insert(155, {"id": "6", "v": "e"}, table="e").watermark(160, 0, 1)
    s.delete(152, {"id": "9"}, p=1, table="d").insert(158, {"id": "7", "v": "d"}, table="d")
    out.append(s.table())
    return [out[0], out[1], out[1], out[2]]


@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_parts_follow_renames_truncates_and_drops(mode: str) -> None:
    _compare(_script_batches(), _settings("canal-json", {}, mode))


def test_rename_of_a_table_first_seen_in_the_same_batch() -> None:
    """Rows of a (no CREATE: the changefeed started after it), then RENAME a TO e, then
    rows of e, all in one micro-batch: the control part's catalog has no a, so the
    rename step names no renamed_to and a and e land in separate groups."""
    s = Script()
    s.insert(100, {"id": "1", "v": "a"}, table="a")
    s.ddl(110, "RENAME TABLE db.a TO db.e", DDLType.RENAME_TABLE, table="e")
    s.insert(120, {"id": "2", "v": "e"}, table="e").watermark(130, 0)
    _compare([s.table()], _settings("canal-json", {}, "consistent"))


def test_alter_rename_of_a_table_first_seen_in_the_same_batch() -> None:
    s = Script()
    s.insert(100, {"id": "1", "v": "a"}, table="a")
    s.ddl(110, "ALTER TABLE db.a RENAME TO db.e", DDLType.RENAME_TABLE, table="a")
    s.insert(120, {"id": "2", "v": "e"}, table="e").watermark(130, 0)
    _compare([s.table()], _settings("canal-json", {}, "consistent"))


def test_two_pair_rename() -> None:
    s = Script()
    s.insert(100, {"id": "1", "v": "a"}, table="a").insert(101, {"id": "1", "v": "b"}, table="b")
    s.watermark(105, 0)
    first = s.table()
    s = Script()
    s.offsets = {0: 100}
    s.ddl(110, "RENAME TABLE db.a TO db.x, db.b TO db.y", DDLType.RENAME_TABLES, table="x")
    s.insert(120, {"id": "2", "v": "x"}, table="x").insert(121, {"id": "2", "v": "y"}, table="y")
    s.watermark(130, 0)
    _compare([first, s.table()], _settings("canal-json", {}, "consistent"))


def _simple(events: list[Any]) -> list[Any]:

    encoder = make_encoder("simple", {**simple_stream.OPTIONS, "encoding-format": "json"})
    out = []
    for partition, offset, event in events:
        (message,) = encoder.encode([event])
        message.topic, message.partition, message.offset = "cdc_shop", partition, offset
        out.append(message)
    return out


def _simple_case(ddl: Any) -> None:
    ts = simple_stream.ts
    options = {**simple_stream.OPTIONS, "encoding-format": "json"}
    users_v60 = replace(simple_stream.USERS, version=60)
    messages = _simple(
        [
            (
                1,
                0,
                RowChange(RowKind.INSERT, simple_stream.USERS, ts(2), None, {"id": 2, "name": "a"}),
            ),
            (0, 0, Bootstrap(simple_stream.ORDERS_V1)),
            (0, 1, ddl(ts, users_v60)),
            (
                0,
                2,
                RowChange(
                    RowKind.INSERT,
                    simple_stream.ORDERS_V1,
                    ts(5),
                    None,
                    simple_stream._order(9, "1.00"),
                ),
            ),
        ]
    )
    _compare([changelog(messages, "simple", options)], _settings("simple", options, "eventual"))


def test_simple_global_ddl_behind_a_row_waiting_for_its_schema() -> None:
    """One planner holds a DDL that concerns every table, and every later row, while a row
    earlier waits for its schema (wire_rows.awaiting_schema's cut); the control part sees
    no wire row and releases it, the orders part releases orders' later row."""
    _simple_case(
        lambda ts, _: DDLEvent(DDLType.CREATE_SCHEMA, "CREATE DATABASE other", ts(4), "other", "")
    )


def test_simple_table_ddl_behind_a_row_waiting_for_its_schema() -> None:
    """A DDL of the waiting table: one planner holds it with the table's rows; the control
    part releases it, and assemble looks for it among the owning part's barriers."""
    _simple_case(
        lambda ts, v60: DDLEvent(
            DDLType.TRUNCATE_TABLE, "TRUNCATE TABLE shop.users", ts(4), "shop", "users", schema=v60
        )
    )


def test_drop_database_and_empty_batches_and_chained_renames() -> None:
    s = Script()
    s.insert(100, {"id": "1", "v": "a"}, table="a").insert(
        101, {"id": "1", "v": "b"}, p=1, table="b"
    )
    s.delete(102, {"id": "1", "v": "a"}, table="a").watermark(101, 0, 1)
    b0 = s.table()
    s = Script()
    s.offsets = {0: 100, 1: 100}
    s.watermark(103, 0)  # (watermarks only)
    b1 = s.table()
    s = Script()
    s.offsets = {0: 200, 1: 200}
    s.ddl(104, "RENAME TABLE db.a TO db.c", DDLType.RENAME_TABLE, table="c")
    s.insert(105, {"id": "2", "v": "c"}, table="c").watermark(104, 1)
    b2 = s.table()
    s = Script()
    s.offsets = {0: 300, 1: 300}
    s.ddl(106, "RENAME TABLE db.c TO db.d", DDLType.RENAME_TABLE, table="d")
    s.ddl(107, "DROP DATABASE db", DDLType.DROP_SCHEMA, table="")
    s.insert(108, {"id": "3", "v": "d"}, p=1, table="d").watermark(110, 0, 1)
    b3 = s.table()
    empty = b1.slice(0, 0)
    for mode in ("consistent", "eventual"):
        _compare([b0, b1, empty, b2, b3, b2], _settings("canal-json", {}, mode))


def test_a_rename_puts_both_tables_in_one_group() -> None:
    groups = table_groups([("db", "a"), ("db", "b"), ("db", "c")], [(("db", "a"), ("db", "e"))])
    assert groups[("db", "a")] == groups[("db", "e")]
    assert len({groups[("db", "a")], groups[("db", "b")], groups[("db", "c")]}) == 3
    assert ID_V  # (the script's schema)


@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_a_checkpoint_planned_on_the_driver_moves_to_the_parts(mode: str) -> None:
    """The rows the driver held back and its guards go to the parts at the switch."""
    settings = _settings("canal-json", {}, mode)
    batches = _script_batches()
    _, one = DriverPlanning().plan(settings, batches[0], ConsumerState(), 0)
    assert (one.held is not None and one.held.num_rows) or one.guards.count()
    runner = LocalRunner()  # (a state of its own: planners change their guards in place)
    by_parts = ConsumerState.from_json(one.to_json(), one.held, copy.deepcopy(one.guards))
    for number, batch in enumerate(batches[1:], 1):
        one = ConsumerState.from_json(one.to_json(), one.held, one.guards)
        expected, one = DriverPlanning().plan(settings, batch, one, number)
        got, by_parts = PartsPlanning(runner).plan(settings, batch, by_parts, number)
        assert _by_table(got) == _by_table(expected), number
        assert [getattr(got, f) for f in FIGURES] == [getattr(expected, f) for f in FIGURES]


def test_a_checkpoint_whose_parts_keep_rows_is_not_planned_on_the_driver() -> None:
    settings = _settings("canal-json", {}, "consistent")
    batches = _script_batches()
    _, state = PartsPlanning(LocalRunner()).plan(settings, batches[0], ConsumerState(), 0)
    assert state.parts["held"]
    with pytest.raises(ConfigError, match="--planner executors"):
        DriverPlanning().plan(settings, batches[1], state, 1)


def _pickled_results(rows: int) -> int:
    """The bytes of the part results (what the driver collects) of a batch of ``rows``."""
    import pickle

    script = Script()
    for key in range(rows):
        script.insert(100 + key, {"id": str(key), "v": "x" * 9})
    script.watermark(100 + rows, 0)
    runner = LocalRunner()
    settings = _settings("canal-json", {}, "consistent")
    outcome: list[Any] = []
    original = runner.run

    def run(*args: Any) -> Any:
        outcome.append(original(*args))
        return outcome[-1]

    runner.run = run  # type: ignore[method-assign]
    PartsPlanning(runner).plan(settings, script.table(), ConsumerState(), 0)
    return len(pickle.dumps(outcome[0].results))


def test_a_part_result_does_not_grow_with_its_rows() -> None:
    """The driver collects each part's result: its steps carry no rows (an empty slice of
    the part's changes would pickle all of them)."""
    assert _pickled_results(2000) < 1.2 * _pickled_results(200)
