"""Open Protocol: the specification's example log (lines 1-14) and TiCDC's golden batches."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import orjson
import pytest

from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.model import DDLEvent, DDLType, RowChange, RowKind, Watermark

_LINE_RE = re.compile(r'^(\d+)\. \[partition=(\d+)\] \[key="(.*)"\] \[value=(?:"(.*)")?\]$')


def _frame(entries: list[bytes], version: bool) -> bytes:
    head = struct.pack(">Q", 1) if version else b""
    return head + b"".join(struct.pack(">Q", len(e)) + e for e in entries)


def spec_log(spec_dir: Path) -> dict[int, Message]:
    """The numbered log lines of the document, framed as the Kafka records they describe."""
    messages = {}
    for line in (spec_dir / "open-protocol.ja.txt").read_text(encoding="utf-8").splitlines():
        match = _LINE_RE.match(line.strip())
        if match is None:
            continue
        number, partition, key, value = match.groups()
        key_json = key.replace('\\"', '"').encode()
        value_json = (value or "").replace('\\"', '"').encode()
        messages[int(number)] = Message(
            _frame([key_json], True),
            _frame([value_json], False),
            topic="spec",
            partition=int(partition),
            offset=int(number),
        )
    return messages


@pytest.fixture(scope="module")
def log(spec_dir: Path) -> dict[int, Message]:
    found = spec_log(spec_dir)
    assert sorted(found) == list(range(1, 15)), "the document's 14 log lines were not all found"
    return found


def _one(message: Message) -> object:
    events = make_decoder("open-protocol").decode(message)
    assert len(events) == 1
    return events[0]


@pytest.mark.parametrize("number", [1, 3])
def test_ddl_is_broadcast_create_table(log: dict[int, Message], number: int) -> None:
    event = _one(log[number])
    assert isinstance(event, DDLEvent)
    assert event.ddl_type is DDLType.CREATE_TABLE
    assert event.query == "CREATE TABLE test.t1(id int primary key, val varchar(16))"
    assert (event.database, event.table, event.commit_ts) == ("test", "t1", 415508856908021766)


@pytest.mark.parametrize("number", [2, 4])
def test_resolved_after_ddl(log: dict[int, Message], number: int) -> None:
    assert _one(log[number]) == Watermark(415508856908021766)


@pytest.mark.parametrize("number", [13, 14])
def test_resolved_at_the_end(log: dict[int, Message], number: int) -> None:
    assert _one(log[number]) == Watermark(415508881038376963)


@pytest.mark.parametrize(
    ("number", "kind", "image"),
    [
        (5, RowKind.INSERT, {"id": 1, "val": "aa"}),
        (6, RowKind.INSERT, {"id": 2, "val": "bb"}),  # the txn's insert then update of id 2
        (7, RowKind.INSERT, {"id": 3, "val": "cc"}),
        (8, RowKind.INSERT, {"id": 3, "val": "cc"}),  # the document's duplicate of line 7
        (9, RowKind.DELETE, {"id": 1}),  # old value off: handle-key columns only
        (10, RowKind.DELETE, {"id": 2}),
        (11, RowKind.INSERT, {"id": 3, "val": "dd"}),  # update without "p": an upsert
        (12, RowKind.INSERT, {"id": 4, "val": "ee"}),
    ],
)
def test_row_events(log: dict[int, Message], number: int, kind: RowKind, image: dict) -> None:
    event = _one(log[number])
    assert isinstance(event, RowChange)
    assert event.kind is kind
    assert (event.database, event.table) == ("test", "t1")
    assert (event.before if kind is RowKind.DELETE else event.after) == image
    assert event.schema.handle_key == ("id",)
    expected_ts = 415508878783938562 if number <= 8 else 415508881418485761
    assert event.commit_ts == expected_ts


def test_update_of_key_is_delete_then_insert(log: dict[int, Message]) -> None:
    # UPDATE t1 SET id = 4 ... WHERE id = 2 arrives as line 10 (delete 2) and 12 (insert 4).
    assert _one(log[10]).before == {"id": 2}  # type: ignore[attr-defined]
    assert _one(log[12]).after == {"id": 4, "val": "ee"}  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# Golden batches from TiCDC's Java example.


def _golden(golden_dir: Path, name: str) -> Message:
    base = golden_dir / "open-protocol"
    key = (base / "key" / f"{name.replace('_', '_key_', 1)}").read_bytes()
    value = (base / "value" / f"{name.replace('_', '_value_', 1)}").read_bytes()
    return Message(key, value, topic="golden", partition=0, offset=0)


def test_golden_row_batches(golden_dir: Path) -> None:
    decoder = make_decoder("open-protocol")
    single = decoder.decode(_golden(golden_dir, "row_0"))
    assert [(e.commit_ts, e.after) for e in single] == [(1, {"col1": "aa"})]  # type: ignore[union-attr]
    batch = decoder.decode(_golden(golden_dir, "row_1"))
    assert [(e.commit_ts, e.table, e.after, e.partition_id) for e in batch] == [  # type: ignore[union-attr]
        (1, "b", {"col1": "aa"}, None),
        (2, "b", {"col1": "bb"}, None),
        (3, "b", {"col1": "bb"}, None),
        (4, "c", {"col1": "cc"}, 6),
    ]
    assert decoder.decode(_golden(golden_dir, "row_2")) == []


def test_golden_ddl_batches(golden_dir: Path) -> None:
    decoder = make_decoder("open-protocol")
    batch = decoder.decode(_golden(golden_dir, "ddl_1"))
    assert [(e.commit_ts, e.query, int(e.ddl_type)) for e in batch] == [  # type: ignore[union-attr]
        (1, "create table a", 1),
        (2, "create table b", 2),
        (3, "create table c", 3),
    ]
    assert decoder.decode(_golden(golden_dir, "ddl_0"))[0].query == "create table a"  # type: ignore[union-attr]
    assert decoder.decode(_golden(golden_dir, "ddl_2")) == []


def test_golden_resolved_batches(golden_dir: Path) -> None:
    decoder = make_decoder("open-protocol")
    assert decoder.decode(_golden(golden_dir, "rts_0")) == [Watermark(1)]
    assert decoder.decode(_golden(golden_dir, "rts_1")) == [
        Watermark(1),
        Watermark(2),
        Watermark(3),
    ]
    assert decoder.decode(_golden(golden_dir, "rts_2")) == []


def test_golden_keys_are_what_the_encoder_writes(golden_dir: Path) -> None:
    """Re-encoding the golden resolved batch's keys gives the same framing bytes."""
    message = _golden(golden_dir, "rts_0")
    key_json = orjson.dumps({"ts": 1, "t": 3})
    assert message.key == _frame([key_json], True)
    assert message.value == b"\x00" * 8
