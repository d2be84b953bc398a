"""Planning and applying changelogs to Delta tables, without Spark: ordering, consistency,
duplicates, DDL barriers, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_helpers import (
    assert_matches,
    canal_message,
    changelog,
    interleave,
    produce,
    run_batches,
)
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.checkpoint import ChangelogLog, StateStore
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.testing.workload import Workload

PROTOCOLS = [("canal-json", {"enable-tidb-extension": "true"}), ("open-protocol", {})]


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@pytest.mark.parametrize("mode", ["consistent", "eventual"])
def test_workload_lands_exactly(protocol: str, options: dict, mode: str, tmp_path: Path) -> None:
    workload = Workload(seed=11, rows=400, tables=2, watermark_every=5)
    messages = produce(workload, protocol, options)
    sink = DeltaSink(tmp_path / "lake")
    run_batches(
        list(interleave(messages, seed=1, chunk=40)),
        protocol,
        options,
        sink,
        tmp_path / "ckpt",
        mode=mode,
    )
    assert_matches(workload, sink)


def test_duplicates_and_replays_are_harmless(tmp_path: Path) -> None:
    protocol, options = PROTOCOLS[0]
    workload = Workload(seed=12, rows=300, tables=2, watermark_every=4)
    messages = produce(workload, protocol, options)
    batches = list(interleave(messages, seed=2, chunk=30))
    replayed = []
    for i, batch in enumerate(batches):  # at-least-once: resend earlier batches now and then
        replayed.append(batch + (batches[i - 2] if i >= 2 and i % 3 == 0 else []))
    sink = DeltaSink(tmp_path / "lake")
    run_batches(replayed, protocol, options, sink, tmp_path / "ckpt")
    assert_matches(workload, sink)


def test_consistent_mode_holds_rows_above_the_watermark(tmp_path: Path) -> None:
    protocol, options = PROTOCOLS[0]
    workload = Workload(seed=13, rows=120, tables=1, watermark_every=1000)
    messages = produce(workload, protocol, options, partitions=2)
    last_watermark = max(i for i, m in enumerate(messages) if b"TIDB_WATERMARK" in (m.value or b""))
    sink = DeltaSink(tmp_path / "lake")
    applier = run_batches(
        [messages[: last_watermark - 4]], protocol, options, sink, tmp_path / "ckpt"
    )
    report = applier.reports[-1]
    assert report.rows_applied == 0 and report.held > 0  # only the first watermark so far
    run_batches(
        [messages[last_watermark - 4 :]], protocol, options, sink, tmp_path / "ckpt", start=1
    )
    assert_matches(workload, sink)


def test_replaying_a_batch_after_a_crash_changes_nothing(tmp_path: Path) -> None:
    protocol, options = PROTOCOLS[1]
    workload = Workload(seed=14, rows=300, tables=2, watermark_every=3, ddl_every=10)
    messages = produce(workload, protocol, options)
    batches = list(interleave(messages, seed=3, chunk=25))
    sink = DeltaSink(tmp_path / "lake")
    run_batches(batches[:5], protocol, options, sink, tmp_path / "ckpt")
    # the process dies after applying batch 5 but before its state was saved: Spark replays 5
    run_batches([batches[5]], protocol, options, sink, tmp_path / "ckpt", start=5)
    (tmp_path / "ckpt" / "ticdc" / "state-000000000005.json").unlink()
    run_batches(batches[5:], protocol, options, sink, tmp_path / "ckpt", start=5)
    assert_matches(workload, sink)


def test_a_ddl_is_a_barrier_for_its_own_table_only(tmp_path: Path) -> None:
    from pipeline_helpers import changelog
    from ticdc_spark.pipeline.planner import Planner
    from ticdc_spark.pipeline.steps import DDLStep, TableChanges

    protocol, options = PROTOCOLS[0]
    workload = Workload(seed=15, rows=600, tables=3, watermark_every=4, ddl_every=10)
    messages = produce(workload, protocol, options)
    plan = Planner(mode="eventual").plan(changelog(messages, protocol, options))
    ddls = [s for s in plan.steps if isinstance(s, DDLStep)]
    merges = [s for s in plan.steps if isinstance(s, TableChanges)]
    tables = {(s.database, s.table) for s in merges}
    assert len(tables) == 3 and any(s.sql.upper().startswith("ALTER") for s in ddls)
    for table in tables:
        # one merge before each of the table's own DDLs that has rows before it, one after
        # the last: other tables' DDLs do not cut this table's rows
        own = [
            i
            for i, s in enumerate(plan.steps)
            if isinstance(s, DDLStep) and (s.database, s.table) == table
        ]
        positions = [
            i
            for i, s in enumerate(plan.steps)
            if isinstance(s, TableChanges) and (s.database, s.table) == table
        ]
        between = {sum(1 for d in own if d < p) for p in positions}
        assert len(between) == len(positions), "two merges of one table with no DDL between"
        assert len(positions) <= len(own) + 1
    # and the result is still exact
    sink = DeltaSink(tmp_path / "lake")
    run_batches([messages], protocol, options, sink, tmp_path / "ckpt", mode="eventual")
    assert_matches(workload, sink)


def test_iceberg_follows_ddl_mid_stream(tmp_path: Path) -> None:
    from ticdc_spark.sinks.iceberg import IcebergSink

    protocol, options = PROTOCOLS[1]
    workload = Workload(seed=16, rows=300, tables=2, watermark_every=3, ddl_every=8)
    messages = produce(workload, protocol, options)
    sink = IcebergSink(f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'wh'}")
    batches = list(interleave(messages, seed=4, chunk=40))
    run_batches(batches, protocol, options, sink, tmp_path / "ckpt")
    assert_matches(workload, sink)
    # a fresh sink (nothing cached) reads the same tables
    fresh = IcebergSink(f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'wh'}")
    assert_matches(workload, fresh)


def test_logged_batches_a_crash_left_unapplied_are_applied_at_restart(tmp_path: Path) -> None:
    """Overlapped apply: Spark has recorded batches 3 and 4 as done, their changelogs are in
    the log, and the process died before applying them (and after applying batch 2 but before
    dropping its log entry).  The restart applies 3 and 4, leaves 2 alone, and the stream goes
    on with batch 5: the tables are those of a run that never stopped."""
    protocol, options = PROTOCOLS[1]
    workload = Workload(seed=16, rows=400, tables=2, watermark_every=5)
    batches = list(interleave(produce(workload, protocol, options), seed=3, chunk=20))
    assert len(batches) > 6
    sink = DeltaSink(tmp_path / "lake")
    checkpoint = tmp_path / "ckpt"
    run_batches(batches[:3], protocol, options, sink, checkpoint)
    store = StateStore(checkpoint)
    log = ChangelogLog(store.root)
    for number in (2, 3, 4):
        log.write(number, changelog(batches[number], protocol, options))
    assert store.latest() == 2

    restarted = Applier(DeltaSink(tmp_path / "lake"), StateStore(checkpoint))
    recovered = restarted.recover(log)
    assert [r.batch for r in recovered] == [3, 4]
    assert log.batches() == [3, 4]  # kept while the states before them are (2, 3, 4)
    assert store.latest() == 4
    assert sum(r.skipped_steps for r in recovered) == 0  # nothing of 3 or 4 had been applied
    for number in range(5, len(batches)):
        restarted.apply(changelog(batches[number], protocol, options), number)
    assert_matches(workload, restarted.sink)


def test_a_replayed_batch_writes_its_dead_letters_again(tmp_path: Path) -> None:
    """The batch's merge committed, then the process died before the dead letters were
    written: the replay skips the merge but must still report the change it could not apply."""
    import orjson

    from ticdc_spark.codec import Message

    protocol, options = PROTOCOLS[0]
    workload = Workload(seed=17, rows=60, tables=1, watermark_every=5)
    messages = produce(workload, protocol, options, partitions=1)
    first = next(m for m in messages if b'"type":"INSERT"' in (m.value or b""))
    bad = orjson.loads(first.value)
    bad["data"][0].update(id="999999999", k="not a number")
    messages.append(Message(None, orjson.dumps(bad), topic="cdc", partition=0, offset=10_000))
    log = changelog(messages, protocol, options)
    checkpoint = tmp_path / "ckpt"
    applier = Applier(DeltaSink(tmp_path / "lake"), StateStore(checkpoint), mode="eventual")
    assert applier.apply(log, 0).dead_letters == 1
    letters = checkpoint / "ticdc" / "dead-letters" / f"dead-letters-{0:012d}.jsonl"
    assert letters.exists()
    letters.unlink()  # the crash: the merge is committed, the dead letters and state are not
    for state in (checkpoint / "ticdc").glob("state-*.json"):
        state.unlink()
    again = Applier(DeltaSink(tmp_path / "lake"), StateStore(checkpoint), mode="eventual")
    report = again.apply(log, 0)
    assert report.skipped_steps > 0 and report.dead_letters == 1
    assert [orjson.loads(line)["offset"] for line in letters.read_bytes().splitlines()] == [10_000]


def _ddl(commit_ts: int, sql: str, kind: str) -> bytes:
    return canal_message(
        commit_ts,
        isDdl=True,
        type=kind,
        sql=sql,
        pkNames=None,
        sqlType=None,
        mysqlType=None,
        data=None,
    )


@pytest.mark.parametrize(
    ("ddl", "tables", "columns"),
    [
        (_ddl(300, "RENAME TABLE `db`.`t` TO `db`.`t2`", "RENAME"), [("db", "t2")], None),
        (_ddl(300, "ALTER TABLE `db`.`t` DROP COLUMN `v`", "ALTER"), [("db", "t")], ["id"]),
    ],
)
def test_replaying_a_batch_with_rows_then_a_ddl_leaves_the_ddl_in_place(
    ddl: bytes, tables: list, columns: list | None, tmp_path: Path
) -> None:
    """The batch's rows and its DDL were applied, then the process died before the state
    was saved: the replay must neither recreate the renamed table nor bring back the dropped
    column."""
    from ticdc_spark.codec import Message

    values = [
        canal_message(100, data=[{"id": "1", "v": "a"}]),
        canal_message(200, data=[{"id": "2", "v": "b"}]),
        ddl,
    ]
    messages = [Message(None, v, topic="c", partition=0, offset=i) for i, v in enumerate(values)]
    log = changelog(messages, "canal-json", {"enable-tidb-extension": "true"})
    checkpoint = tmp_path / "ckpt"
    Applier(DeltaSink(tmp_path / "lake"), StateStore(checkpoint), mode="eventual").apply(log, 0)
    for state in (checkpoint / "ticdc").glob("state-*.json"):
        state.unlink()  # the crash
    replay = Applier(DeltaSink(tmp_path / "lake"), StateStore(checkpoint), mode="eventual")
    assert replay.apply(log, 0).skipped_steps >= 1
    sink = replay.sink
    assert sink.tables() == tables
    table = sink.read(tables[0])
    assert sorted(table["id"].to_pylist()) == [1, 2]
    if columns is not None:
        assert [n for n in table.column_names if not n.startswith("_")] == columns


def test_rows_held_past_the_bound_stop_the_batch_naming_the_partition_behind() -> None:
    """A partition that sends no watermarks holds every row back in consistent mode: past
    ``max_held_rows`` planning stops with an error naming it, rather than grow the driver's
    memory with the stream; within the bound the same batch plans (and holds) as before."""
    from pipeline_helpers import changelog
    from ticdc_spark.errors import HeldRowsExceeded
    from ticdc_spark.pipeline.planner import Planner
    from ticdc_spark.pipeline.state import ConsumerState

    protocol, options = PROTOCOLS[0]
    workload = Workload(seed=16, rows=200, tables=2, watermark_every=4)
    batch = changelog(produce(workload, protocol, options), protocol, options)
    silent = "cdc-silent/0"
    state = ConsumerState()
    plan = Planner("consistent", state, [silent]).plan(batch)
    held = state.held.num_rows if state.held is not None else 0
    assert plan.held > 0 and not plan.steps and held >= plan.held
    with pytest.raises(HeldRowsExceeded) as caught:
        Planner("consistent", ConsumerState(), [silent], max_held_rows=held - 1).plan(batch)
    message = str(caught.value)
    assert f"{held} rows are held back" in message and f"{silent} (watermark 0)" in message
    assert "--max-held-rows" in message and "--mode eventual" in message
    Planner("consistent", ConsumerState(), [silent], max_held_rows=held).plan(batch)
