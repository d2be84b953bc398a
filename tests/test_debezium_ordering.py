"""Genuine Debezium through the consumer: its rows carry no commit ts (docs/pipeline.md "Rows
without a commit ts"), so they are placed by partition position; a key's inserts, updates,
deletes and Debezium's own tombstones then apply in the order the connector wrote them,
however the stream is cut into micro-batches. Consistent mode refuses such rows."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import examples
from pipeline_helpers import changelog
from ticdc_spark.codec import Message, get_codec
from ticdc_spark.errors import ConfigError
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import TableChanges

# rows placed by their partition position, as for a protocol without a commit ts on every row
BY_POSITION = Capabilities(commit_ts=False)


def value(op: str, before: Any, after: Any, pos: int) -> bytes:
    """A Debezium 2.x MySQL connector value with ``schemas.enable=false``."""
    source = {
        "version": "2.4.0.Final",
        "connector": "mysql",
        "name": "dbserver1",
        "ts_ms": 1_700_000_000_000,
        "snapshot": "false",
        "db": "shop",
        "table": "t",
        "server_id": 1,
        "gtid": None,
        "file": "mysql-bin.000003",
        "pos": pos,
        "row": 0,
        "thread": 1,
        "query": None,
    }
    envelope = {"before": before, "after": after, "source": source, "op": op}
    return orjson.dumps({**envelope, "ts_ms": 1_700_000_000_001, "transaction": None})


def history() -> list[Message]:
    """Key 1 inserted, updated, deleted (then Debezium's tombstone), inserted again, deleted
    again, inserted a third time; key 2 inserted then updated.  Final: {1: "v4", 2: "b2"}."""
    one, two = b'{"id":1}', b'{"id":2}'
    row = lambda key, v: {"id": key, "v": v}  # noqa: E731
    parts = [
        (one, value("c", None, row(1, "v1"), 1)),
        (two, value("c", None, row(2, "b1"), 2)),
        (one, value("u", row(1, "v1"), row(1, "v2"), 3)),
        (one, value("d", row(1, "v2"), None, 4)),
        (one, None),  # tombstone
        (one, value("c", None, row(1, "v3"), 5)),
        (two, value("u", row(2, "b1"), row(2, "b2"), 6)),
        (one, value("d", row(1, "v3"), None, 7)),
        (one, None),
        (one, value("c", None, row(1, "v4"), 8)),
    ]
    return [
        Message(key, val, topic="dbserver1.shop.t", partition=0, offset=offset)
        for offset, (key, val) in enumerate(parts)
    ]


def apply(batches: list[list[Message]]) -> dict[int, str]:
    """The table after planning every batch in eventual mode, as the pipeline does for
    Debezium (state saved and loaded between batches)."""
    assert not get_codec("debezium").commit_ts  # so the pipeline places its rows
    table: dict[int, str] = {}
    state = ConsumerState()
    for batch in batches:
        plan = Planner("eventual", state, capabilities=BY_POSITION).plan(
            changelog(batch, "debezium", {})
        )
        for step in plan.steps:
            assert isinstance(step, TableChanges)
            for change in step.rows.to_pylist():
                image = dict(change["image"])
                if change["op"] == "delete":
                    table.pop(int(image["id"]), None)
                else:
                    table[int(image["id"])] = image["v"]
        state = ConsumerState.from_json(state.to_json())
    return table


def test_a_whole_stream_applies_in_partition_order() -> None:
    assert apply([history()]) == {1: "v4", 2: "b2"}


def test_a_stream_ending_in_a_delete_leaves_the_key_deleted() -> None:
    assert apply([history()[:8]]) == {2: "b2"}


def test_without_placing_the_deletes_first_rule_would_reorder_it() -> None:
    """Why placing is needed: every row at commit ts 0, where deletes sort first, so key 1's
    last DELETE would go before its INSERTs and leave it alive."""
    plan = Planner("eventual", ConsumerState()).plan(changelog(history()[:8], "debezium", {}))
    keys = {
        int(dict(change["image"])["id"])
        for step in plan.steps
        if isinstance(step, TableChanges)
        for change in step.rows.to_pylist()
        if change["op"] != "delete"
    }
    assert 1 in keys


@examples(30)
@given(cuts=st.lists(st.integers(1, 9), max_size=5), replay=st.integers(0, 9))
def test_any_batch_cuts_and_a_source_replay_give_the_same_table(
    cuts: list[int], replay: int
) -> None:
    messages = history()
    bounds = [0, *sorted(set(cuts)), len(messages)]
    batches = [messages[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    # the source read again from an earlier offset (a restart before a commit): dropped
    batches.append(messages[replay:])
    assert apply(batches) == {1: "v4", 2: "b2"}


def test_consistent_mode_refuses_rows_without_a_commit_ts() -> None:
    planner = Planner("consistent", ConsumerState(), capabilities=BY_POSITION)
    with pytest.raises(ConfigError, match=r"dbserver1\.shop\.t/0@0 .*--mode eventual"):
        planner.plan(changelog(history(), "debezium", {}))
