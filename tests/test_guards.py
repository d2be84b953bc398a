"""Guards: a late change older than a delete never brings the deleted row back, now that
tables are live (a delete deletes), and guards go once nothing older can come.

Each test fails without guards in the planner (the live sinks alone would write the row
again), or without their collection, retention, bound or persistence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from changelog_script import ID_V, Script
from contract.helpers import examples
from restart_helpers import run_harness, target
from ticdc_spark.errors import DamagedState, GuardsExceeded
from ticdc_spark.model import compose_ts
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.guards import Guards, encode_keys
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.sinks import make_sink
from ticdc_spark.sinks.base import live

KINDS = ["delta", "iceberg"]


def _applier(root: Path, kind: str = "delta", mode: str = "eventual", **kw: Any) -> Applier:
    store = StateStore(root / "checkpoint")
    return Applier(make_sink(target(kind, root), store.pipeline_id()), store, mode=mode, **kw)


def _rows(applier: Applier) -> dict[int, str]:
    table = live(applier.sink.read(("db", "t")))
    return {r["id"]: r["v"] for r in table.to_pylist()}


def _guards(root: Path) -> int:
    store = StateStore(root / "checkpoint")
    return store.read(store.latest()).guards.count()


@pytest.mark.parametrize("kind", KINDS)
def test_a_late_change_older_than_a_delete_is_dropped_across_batches(
    kind: str, tmp_path: Path
) -> None:
    """Eventual mode: the delete (partition 1) is applied a batch before an older update of
    its key (partition 0, behind): the row stays deleted, and the report counts the drop."""
    applier = _applier(tmp_path, kind)
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"})
                  .table(), 0)  # fmt: skip
    applier.apply(Script().delete(300, {"id": "1", "v": "a"}, p=1).table(), 1)
    late = Script().update(200, {"id": "1", "v": "a"}, {"id": "1", "v": "late"})
    report = applier.apply(late.insert(250, {"id": "3", "v": "c"}).table(), 2)
    assert _rows(applier) == {2: "b", 3: "c"}
    assert report.guarded == 1 and "1 older than a delete dropped" in report.line()
    assert report.rows_applied == 1


@pytest.mark.parametrize("kind", KINDS)
def test_guards_survive_a_restart(kind: str, tmp_path: Path) -> None:
    """A new applier over the same checkpoint (a restart) reads the guards back."""
    _applier(tmp_path, kind).apply(Script().insert(100, {"id": "1", "v": "a"}).table(), 0)
    _applier(tmp_path, kind).apply(Script().delete(300, {"id": "1", "v": "a"}).table(), 1)
    assert _guards(tmp_path) == 1
    restarted = _applier(tmp_path, kind)
    restarted.apply(Script().insert(200, {"id": "1", "v": "late"}).table(), 2)
    assert _rows(restarted) == {}


def _write(tables: list[pa.Table], directory: Path) -> Path:
    directory.mkdir(parents=True)
    for number, table in enumerate(tables):
        path = directory / f"{number:06d}.arrow"
        with pa.OSFile(str(path), "wb") as raw, pa.ipc.new_file(raw, table.schema) as out:
            out.write_table(table)
    return directory


@pytest.mark.parametrize("point", ["step:1", "state-saved:1", "committed:1"])
def test_guards_survive_a_kill(point: str, tmp_path: Path) -> None:
    """The process dies (as kill -9 would) around the delete's batch; the run started again
    drops the late older insert of the next batch."""
    batches = [
        Script().insert(100, {"id": "1", "v": "a"}).insert(100, {"id": "2", "v": "b"}).table(),
        Script().delete(300, {"id": "1", "v": "a"}, p=1).table(),
        Script()
        .insert(200, {"id": "1", "v": "late"})
        .update(200, {"id": "2", "v": "b"}, {"id": "2", "v": "c"})
        .table(),
    ]
    prepared = _write(batches, tmp_path / "batches")
    spec = target("delta", tmp_path)
    checkpoint = tmp_path / "checkpoint"
    assert run_harness(checkpoint, spec, prepared, point, mode="eventual") == 86
    assert run_harness(checkpoint, spec, prepared, None, mode="eventual") == 0
    table = live(make_sink(spec).read(("db", "t")))
    assert {r["id"]: r["v"] for r in table.to_pylist()} == {2: "c"}


SPLIT_ORDERS = {
    "delete-then-insert": [("delete", 0), ("insert", 1)],
    "insert-then-delete": [("insert", 0), ("delete", 1)],
    "one-batch-insert-first": [("insert", 0), ("delete", 0)],
    "one-batch-delete-first": [("delete", 0), ("insert", 0)],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", SPLIT_ORDERS)
def test_a_split_update_keeps_its_insert_whatever_the_order(
    kind: str, order: str, tmp_path: Path
) -> None:
    """TiCDC splits an update of a unique key into a DELETE and an INSERT at one commit ts,
    on two partitions: the INSERT is the final state in whichever batch either arrives (an
    equal commit ts is never stopped by the DELETE's guard), and a replay of both later
    changes nothing."""
    applier = _applier(tmp_path, kind)
    applier.apply(Script().insert(100, {"id": "1", "v": "x"}).table(), 0)
    scripts = [Script(), Script()]
    for op, batch in SPLIT_ORDERS[order]:
        if op == "delete":
            scripts[batch].delete(200, {"id": "1", "v": "x"}, p=1)
        else:
            scripts[batch].insert(200, {"id": "1", "v": "y"}, p=0)
    for number, script in enumerate(scripts, start=1):
        applier.apply(script.table(), number)
    assert _rows(applier) == {1: "y"}
    replay = Script().delete(200, {"id": "1", "v": "x"}, p=1).insert(200, {"id": "1", "v": "y"})
    applier.apply(replay.table(), 3)
    applier.apply(Script().insert(150, {"id": "1", "v": "older"}).table(), 4)
    assert _rows(applier) == {1: "y"}


def test_consistent_mode_keeps_no_guard_below_the_watermark(tmp_path: Path) -> None:
    """A delete released at or below the global watermark needs no guard: a later change
    older than it is a replay (its partition's watermark passed it) and is dropped as such."""
    applier = _applier(tmp_path, mode="consistent")
    script = Script().insert(100, {"id": "1", "v": "a"}).delete(200, {"id": "1", "v": "a"}, p=1)
    applier.apply(script.watermark(200, 0, 1).table(), 0)
    assert _guards(tmp_path) == 0
    report = applier.apply(Script().insert(150, {"id": "1", "v": "late"}).table(), 1)
    assert _rows(applier) == {} and report.replays == 1


def test_eventual_mode_collects_guards_once_every_watermark_passes(tmp_path: Path) -> None:
    """With watermarks, a guard goes once the lowest partition watermark reaches it (a guard
    at exactly the watermark too: it stops only older changes, all replays by then)."""
    applier = _applier(tmp_path)
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).watermark(50, 0, 1).table(), 0)
    applier.apply(Script().delete(300, {"id": "1", "v": "a"}, p=1).watermark(400, 1).table(), 1)
    assert _guards(tmp_path) == 1  # partition 0 is at 50
    report = applier.apply(Script().insert(250, {"id": "1", "v": "late"}).table(), 2)
    assert report.guarded == 1 and _rows(applier) == {}
    applier.apply(Script().watermark(300, 0).table(), 3)
    assert _guards(tmp_path) == 0
    report = applier.apply(Script().insert(299, {"id": "1", "v": "late"}).table(), 4)
    assert (report.replays, report.guarded) == (1, 0) and _rows(applier) == {}


def test_a_partition_without_watermarks_keeps_guards_for_the_retention(tmp_path: Path) -> None:
    """Without watermarks a guard is kept --guard-retention of commit time behind the newest
    change released, then collected."""
    applier = _applier(tmp_path, guard_retention=60)
    at = compose_ts(1_700_000_000_000)
    applier.apply(Script().insert(at, {"id": "1", "v": "a"}).table(), 0)
    applier.apply(Script().delete(at + 10, {"id": "1", "v": "a"}).table(), 1)
    applier.apply(Script().insert(at + compose_ts(59_000), {"id": "2", "v": "b"}).table(), 2)
    assert _guards(tmp_path) == 1
    report = applier.apply(Script().insert(at + 5, {"id": "1", "v": "late"}).table(), 3)
    assert report.guarded == 1
    applier.apply(Script().insert(at + compose_ts(61_000), {"id": "3", "v": "c"}).table(), 4)
    assert _guards(tmp_path) == 0


def test_guards_past_their_bound_stop_the_batch_before_anything_is_applied(
    tmp_path: Path,
) -> None:
    applier = _applier(tmp_path, max_guards=2)
    script = Script()
    for key in range(4):
        script.insert(100, {"id": str(key), "v": "a"})
    applier.apply(script.table(), 0)
    deletes = Script()
    for key in range(3):
        deletes.delete(200, {"id": str(key), "v": "a"}, p=1)
    with pytest.raises(GuardsExceeded) as raised:
        applier.apply(deletes.table(), 1)
    message = str(raised.value)
    assert "3 guards" in message and "--max-guards" in message and "cdc/1" in message
    assert "--guard-retention" in message
    assert len(_rows(applier)) == 4 and StateStore(tmp_path / "checkpoint").latest() == 0


def test_rows_waiting_in_the_state_keep_the_guards_above_them() -> None:
    """A held row was admitted already, so a guard newer than it stays even once the
    watermarks pass the guard (here: a row held as a Simple row waiting for its schema
    would be; the planner's floor takes the held rows' oldest commit ts)."""
    from ticdc_spark.pipeline.ordering import guard_floor
    from ticdc_spark.pipeline.policy import Mode
    from ticdc_spark.pipeline.state import ConsumerState

    state = ConsumerState(watermarks={"cdc/0": 500}, partitions={"cdc/0"})
    assert guard_floor(state, Mode.CONSISTENT, 60) == 500
    state.held = Script().insert(150, {"id": "1", "v": "a"}).table()
    assert guard_floor(state, Mode.CONSISTENT, 60) == 150
    assert guard_floor(state, Mode.EVENTUAL, 60) == 150


def test_rows_placed_by_position_keep_no_guards() -> None:
    script = Script().insert(100, {"id": "1", "v": "a"}).delete(200, {"id": "1", "v": "a"})
    planner = Planner("eventual", capabilities=Capabilities(commit_ts=False))
    planner.plan(script.table())
    assert planner.state.guards.count() == 0
    planner = Planner("eventual")
    planner.plan(script.table())
    assert planner.state.guards.count() == 1


@pytest.mark.parametrize("damage", ["missing", "cut short"])
def test_a_missing_or_damaged_guards_file_is_named(damage: str, tmp_path: Path) -> None:
    applier = _applier(tmp_path)
    applier.apply(Script().insert(100, {"id": "1", "v": "a"}).table(), 0)
    applier.apply(Script().delete(300, {"id": "1", "v": "a"}).table(), 1)
    store = StateStore(tmp_path / "checkpoint")
    path = Path(store.guards_path(1))
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DamagedState) as raised:
        store.read(1)
    assert str(path) in str(raised.value)


def test_guards_of_a_key_changed_by_ddl_still_screen_by_their_own_columns() -> None:
    """A guard remembers the columns it was made with: after the key changes, a late change
    from before is still matched by the old key."""
    two = '{"columns": [["id", "int"], ["v", "varchar(10)"]], "pk": ["id", "v"]}'
    planner = Planner("eventual")
    planner.plan(Script().delete(300, {"id": "1", "v": "a"}, schema=ID_V).table())
    plan = planner.plan(Script().insert(200, {"id": "1", "v": "a"}, schema=two).table())
    assert plan.guarded == 1 and not plan.steps


def test_saved_guards_read_back_equal() -> None:
    guards = Guards()
    for table, names, keys in [
        (("db", "t"), ("id",), ["1", "2"]),
        (("db", "t"), ("id", "v"), ["1,a"]),
        (("db", "u"), ("id",), ["7"]),
    ]:
        guards.raise_to(table, names, pa.array(keys), pa.array([5] * len(keys), pa.int64()))
    again = Guards.from_arrow(guards.to_arrow())
    assert again.count() == 4
    assert {t: {n: g.to_pylist() for n, g in s.items()} for t, s in again.sets.items()} == {
        t: {n: g.to_pylist() for n, g in s.items()} for t, s in guards.sets.items()
    }


_KEY_PART = st.one_of(st.none(), st.text(alphabet="a,\\N", max_size=4))


@examples(200)
@given(st.lists(st.tuples(_KEY_PART, _KEY_PART), min_size=2, max_size=2))
def test_encoded_keys_are_equal_exactly_when_their_columns_are(keys: list[Any]) -> None:
    columns = [pa.array([k[i] for k in keys], pa.string()) for i in range(2)]
    first, second = encode_keys(columns).to_pylist()
    assert (first == second) == (keys[0] == keys[1])
