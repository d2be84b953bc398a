"""Ordering without a commit ts in deletes (docs/pipeline.md "Rows without a commit ts"):
Avro tombstones, and every row of Avro without the TiDB extension, are placed by their
partition position; with TiCDC's re-sends (at-least-once) and source replays, an old
tombstone never leaves a newer row deleted, nor an old insert a deleted row alive, once the
stream is consumed (a re-send replays old states on its way, in order)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import examples
from pipeline_helpers import changelog, live, run_batches
from ticdc_spark.codec import Message, make_encoder
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import TableChanges
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.types import ColumnType

# rows placed by their partition position, as for a protocol without a commit ts on every row
BY_POSITION = Capabilities(commit_ts=False)

SCHEMA = TableSchema(
    "shop",
    "t",
    (Column("id", ColumnType("int"), nullable=False), Column("v", ColumnType("varchar"))),
    (Index("PRIMARY", ("id",), primary=True, unique=True),),
)
EXTENSION = {"schema-registry": "mock://ordering", "enable-tidb-extension": "true"}
PLAIN = {"schema-registry": "mock://ordering"}


def ts(n: int) -> int:
    return compose_ts(1_700_000_000_000 + n)


def row(kind: RowKind, key: int, value: str | None, at: int) -> RowChange:
    image = {"id": key, "v": value}
    before = image if kind is RowKind.DELETE else None
    return RowChange(kind, SCHEMA, ts(at), before, None if kind is RowKind.DELETE else image)


def messages(options: dict[str, str], rows: list[RowChange]) -> list[Message]:
    out = make_encoder("avro", options).encode(rows)
    for offset, message in enumerate(out):
        message.topic, message.partition, message.offset = "shop_t", 0, offset
    return out


def apply(options: dict[str, str], batches: list[list[Message]]) -> list[dict[int, str]]:
    """The table after each batch, planned in eventual mode with the state carried over
    (and saved and loaded between batches, as the pipeline does), each change kept as the
    sinks keep it (DeltaSink.merge): over an older commit ts (here: place), or at the same
    one over a delete."""
    stored: dict[int, tuple[int, str, str | None]] = {}  # id -> (commit ts, op, v)
    states, state = [], ConsumerState()
    for batch in batches:
        plan = Planner("eventual", state, capabilities=BY_POSITION).plan(
            changelog(batch, "avro", options)
        )
        for step in plan.steps:
            assert isinstance(step, TableChanges)
            for change in step.rows.to_pylist():
                image, at = dict(change["image"]), change["commit_ts"]
                old = stored.get(int(image["id"]))
                newer = old is None or at > old[0]
                if newer or (at == old[0] and old[1] == "delete" != change["op"]):  # type: ignore[index]
                    stored[int(image["id"])] = (at, change["op"], image.get("v"))
        states.append({k: v for k, (_, op, v) in stored.items() if op != "delete"})
        state = ConsumerState.from_json(state.to_json())
    return states  # type: ignore[return-value]


def splits(items: list[Any], cuts: list[int]) -> list[list[Any]]:
    bounds = [0, *sorted(set(cuts)), len(items)]
    return [items[a:b] for a, b in itertools.pairwise(bounds) if b > a]


HISTORY = [
    row(RowKind.INSERT, 1, "v1", 100),
    row(RowKind.DELETE, 1, None, 110),
    row(RowKind.INSERT, 1, "v2", 120),
]


@pytest.mark.parametrize("cut", range(7))
def test_a_resent_tombstone_never_leaves_the_newer_row_deleted(cut: int) -> None:
    """TiCDC restarts and re-sends from ts 90: insert v1, the tombstone, insert v2 again."""
    stream = messages(EXTENSION, HISTORY + HISTORY)
    states = apply(EXTENSION, splits(stream, [cut]))
    assert states[-1] == {1: "v2"}


@pytest.mark.parametrize("cut", range(1, 6))
def test_a_resend_cut_between_two_batches_ends_at_the_newest_state(
    cut: int, tmp_path: Path
) -> None:
    """TiCDC re-sends insert v1, update v2 after a newer change of another key: the re-sent
    rows must not share a place with what the table already holds, or the update's re-send,
    in the next batch, is not newer than the insert's re-send (the key stayed at v1)."""
    history = [row(RowKind.INSERT, 1, "v1", 100), row(RowKind.UPDATE, 1, "v2", 110)]
    history.append(row(RowKind.INSERT, 2, "x", 150))
    stream = messages(EXTENSION, history + history)
    sink = DeltaSink(tmp_path / "lake")
    batches = [stream[:cut], stream[cut:]]
    run_batches(batches, "avro", EXTENSION, sink, tmp_path / "checkpoint", mode="eventual")
    rows = {r["id"]: r["v"] for r in live(sink.read(("shop", "t"))).to_pylist()}
    assert rows == {1: "v2", 2: "x"}
    assert apply(EXTENSION, batches)[-1] == {1: "v2", 2: "x"}


def test_a_transaction_keeps_one_place_and_a_resend_rises_above_it() -> None:
    """Rows of one commit ts share their place (their commit ts); a re-sent older change
    goes above the newest place, and a later row whose commit ts is that place goes above
    it (it is another transaction)."""
    rows = [row(RowKind.INSERT, 1, "a", 100), row(RowKind.INSERT, 2, "b", 100)]
    rows += [row(RowKind.INSERT, 3, "c", 110), rows[0]]  # (key 1 re-sent: at 110 + 1)
    after = RowChange(RowKind.INSERT, SCHEMA, ts(110) + 1, None, {"id": 4, "v": "d"})
    stream = messages(EXTENSION, [*rows, after])
    plan = Planner("eventual", ConsumerState(), capabilities=BY_POSITION).plan(
        changelog(stream, "avro", EXTENSION)
    )
    places = {
        int(dict(r["image"])["id"]): r["commit_ts"]
        for step in plan.steps
        for r in step.rows.to_pylist()  # type: ignore[union-attr]
    }
    assert places == {1: ts(110) + 1, 2: ts(100), 3: ts(110), 4: ts(110) + 2}


@pytest.mark.parametrize("cut", range(5))
def test_a_tombstone_after_an_insert_at_the_same_place_wins(cut: int) -> None:
    rows = [row(RowKind.INSERT, 1, "a", 100), row(RowKind.DELETE, 1, None, 100)]
    rows += [row(RowKind.INSERT, 2, "b", 100), row(RowKind.UPDATE, 2, "c", 130)]
    states = apply(EXTENSION, splits(messages(EXTENSION, rows), [cut]))
    assert states[-1] == {2: "c"}


def test_without_the_extension_rows_keep_their_partition_order() -> None:
    rows = [row(RowKind.INSERT, 1, "a", 1), row(RowKind.DELETE, 1, None, 2)]
    rows += [row(RowKind.INSERT, 1, "b", 3), row(RowKind.UPDATE, 1, "c", 4)]
    rows += [row(RowKind.INSERT, 2, "x", 5), row(RowKind.DELETE, 2, None, 6)]
    stream = messages(PLAIN, rows)
    assert apply(PLAIN, [stream]) == [{1: "c"}]
    assert apply(PLAIN, [[m] for m in stream])[-1] == {1: "c"}


def test_source_replays_of_consumed_offsets_are_dropped() -> None:
    rows = [row(RowKind.INSERT, 1, "a", 1), row(RowKind.DELETE, 1, None, 2)]
    stream = messages(PLAIN, rows)
    states = apply(PLAIN, [stream, stream[:1]])  # the source reads offset 0 again
    assert states == [{}, {}]


@st.composite
def histories(draw: st.DrawFn) -> list[RowChange]:
    """A table's true history: per key, inserts, updates and deletes in a valid order."""
    alive: dict[int, bool] = {}
    out, at = [], 100
    for _ in range(draw(st.integers(1, 14))):
        key = draw(st.integers(1, 3))
        at += draw(st.integers(0, 2))  # several rows may share a commit ts (one transaction)
        if not alive.get(key):
            out.append(row(RowKind.INSERT, key, f"v{at}", at))
        elif draw(st.booleans()):
            out.append(row(RowKind.DELETE, key, None, at))
        else:
            out.append(row(RowKind.UPDATE, key, f"v{at}", at))
        alive[key] = out[-1].kind is not RowKind.DELETE
        at += 1
    return out


def truth(history: list[RowChange]) -> dict[int, str]:
    table: dict[int, str] = {}
    for change in history:
        if change.kind is RowKind.DELETE:
            table.pop(change.before["id"])  # type: ignore[index]
        else:
            table[change.after["id"]] = change.after["v"]  # type: ignore[index]
    return table


@examples(60)
@given(history=histories(), data=st.data())
def test_replays_converge_to_the_true_state(history: list[RowChange], data: Any) -> None:
    """TiCDC re-sends a suffix of the history (from a restart point) any number of times;
    the stream is cut into batches anywhere: the table ends as the history says, with and
    without the extension."""
    stream = list(history)
    for _ in range(data.draw(st.integers(0, 2))):
        start = data.draw(st.integers(0, len(history) - 1))
        # a restart re-sends from a commit ts: whole transactions, from the first of its ts
        first = next(i for i, r in enumerate(history) if r.commit_ts == history[start].commit_ts)
        stream += history[first:]
    for options in (EXTENSION, PLAIN):
        placed = messages(options, stream)
        cuts = data.draw(st.lists(st.integers(1, len(placed)), max_size=3))
        assert apply(options, splits(placed, cuts))[-1] == truth(history)
