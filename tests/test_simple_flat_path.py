"""Simple's fast paths against the decoder's full path (orjson, every check), on rows of
every type among mutated messages:

* the flat path (the typed msgspec reader of the common JSON row,
  :mod:`ticdc_spark.codec.simple.flat`) gives the same events, changelog rows or error;
* the batch path of the Spark decode stage (``SimpleDecoder.decode_batch``) gives the
  changelog that decoding one record at a time gives: wire rows and dead letters included.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import (
    byte_mutations,
    encode,
    examples,
    json_mutations,
    kafka_batch,
    placed,
)
from contract.profiles import WHOLE_JSON
from strategies import row_changes
from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.codec.simple import SimpleDecoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Event, RowChange
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.spark.decode import _Records, decode_batches
from ticdc_spark.testing.workload import Workload


def _decoder(flat: bool) -> SimpleDecoder:
    decoder = make_decoder("simple", {})
    assert isinstance(decoder, SimpleDecoder)
    if not flat:  # (a decoder that never takes the flat path)
        decoder._flat_row = lambda *args: None  # type: ignore[method-assign]
    return decoder


def _outcomes(messages: list[Message], flat: bool) -> list[Any]:
    """Per message: its events and changelog rows (two decoders fed alike), or its error."""
    events_decoder, rows_decoder = _decoder(flat), _decoder(flat)
    got: list[Any] = []
    for message in messages:
        try:
            events: list[Event] = events_decoder.decode(message)
        except DecodeError as exc:
            events = [str(exc)]  # type: ignore[list-item]
        builder = ChangelogBuilder()
        try:
            rows_decoder.decode_into(message, builder)
            rows: Any = builder.to_batch().to_pylist()
        except (DecodeError, OverflowError) as exc:  # (a commit ts past int64: no changelog)
            rows = str(exc)
        got.append((events, rows))
    return got


def _mutated(data: st.DataObject, messages: list[Message], most: int) -> list[Message]:
    messages = list(messages)
    for i in data.draw(st.sets(st.integers(0, len(messages) - 1), max_size=most)):
        value = messages[i].value or b""
        if data.draw(st.booleans()):
            changed = data.draw(json_mutations(WHOLE_JSON, "value", value))
        else:
            changed = data.draw(byte_mutations(value))
        messages[i] = Message(messages[i].key, changed if changed is not None else value)
    return placed(messages)


@examples(60)
@given(data=st.data(), events=st.lists(row_changes(), min_size=1, max_size=4))
def test_the_flat_path_reads_as_the_full_path(data: st.DataObject, events: list[Event]) -> None:
    messages = _mutated(data, encode("simple", {}, events), most=2)
    assert _outcomes(messages, flat=True) == _outcomes(messages, flat=False)


def _workload_messages() -> list[Message]:
    events = [e for e in Workload(seed=2, rows=40, tables=2).events() if isinstance(e, RowChange)]
    return encode("simple", {}, events)


def _edited(value: bytes, edit: str) -> bytes:
    """A row message with one member edited the way ``edit`` names."""
    obj = orjson.loads(value)
    head = value[:-1]
    edits = {
        "checksum": lambda: orjson.dumps({**obj, "checksum": {"current": 1}}),
        "claim check": lambda: orjson.dumps({**obj, "claimCheckLocation": "file:///x"}),
        "handle key only": lambda: orjson.dumps({**obj, "handleKeyOnly": True}),
        "unknown member": lambda: orjson.dumps({**obj, "extra": 1e999}),
        "duplicate type": lambda: head + b',"type":"DELETE"}',
        "duplicate commitTs": lambda: head + b',"commitTs":7}',
        "float version": lambda: orjson.dumps({**obj, "schemaVersion": 1.0}),
        "bool commitTs": lambda: orjson.dumps({**obj, "commitTs": True}),
        "negative commitTs": lambda: orjson.dumps({**obj, "commitTs": -1}),
        "huge commitTs": lambda: orjson.dumps({**obj, "commitTs": 2**64 - 1}),
        "null data": lambda: orjson.dumps({**obj, "data": None, "old": None}),
        "number value": lambda: orjson.dumps(
            {**obj, "data": dict.fromkeys(obj.get("data") or {"id": 1}, 1)}
        ),
        "timestamp extra key": lambda: value.replace(b'"location":', b'"x":1,"location":'),
        "timestamp number": lambda: value.replace(b'"value":"', b'"value":1,"v":"'),
        "bad utf-8": lambda: value.replace(b'"table":"', b'"table":"\xff', 1),
        "lone surrogate": lambda: value.replace(b'"table":"', b'"table":"\\ud800', 1),
    }
    return edits[edit]()


@pytest.mark.parametrize(
    "edit",
    [
        "checksum",
        "claim check",
        "handle key only",
        "unknown member",
        "duplicate type",
        "duplicate commitTs",
        "float version",
        "bool commitTs",
        "negative commitTs",
        "huge commitTs",
        "null data",
        "number value",
        "timestamp extra key",
        "timestamp number",
        "bad utf-8",
        "lone surrogate",
    ],
)
def test_edited_rows_read_as_the_full_path_reads_them(edit: str) -> None:
    messages = _workload_messages()
    rows = [i for i, m in enumerate(messages) if m.rows and m.value]
    for i in rows[::3]:
        messages[i] = Message(messages[i].key, _edited(messages[i].value or b"", edit))
    placed(messages)
    assert _outcomes(messages, flat=True) == _outcomes(messages, flat=False)


def test_the_flat_path_takes_plain_row_messages() -> None:
    """(So that the cases above compare two paths.)"""
    decoder = _decoder(flat=True)
    taken = []
    for message in _workload_messages():
        flat = decoder._flat_row(message.value, True) if message.rows else None
        if message.rows:
            taken.append(flat is not None)
        decoder.decode(message)  # (learns the schemas the bootstraps bring)
    assert taken and all(taken[1:]), taken


@examples(60)
@given(
    data=st.data(),
    events=st.lists(row_changes(), min_size=1, max_size=4),
    repeat=st.integers(1, 3),
    start=st.integers(0, 3),
)
def test_the_batch_path_gives_the_one_by_one_changelog(
    data: st.DataObject, events: list[Event], repeat: int, start: int
) -> None:
    """Messages read from ``start`` on (rows before their schema's bootstrap become wire
    rows), each table's rows repeated, some messages mutated."""
    messages = [m for _ in range(repeat) for m in encode("simple", {}, events)][start:]
    if not messages:
        return
    batch = kafka_batch(_mutated(data, messages, most=3))
    batched = [
        row for part in decode_batches(iter([batch]), "simple", {}) for row in part.to_pylist()
    ]
    decoder = make_decoder("simple", {}, stage=True)
    one_by_one = _Records(batch, decoder, fail=False).one_by_one().to_pylist()
    assert batched == one_by_one


def test_the_batch_path_takes_plain_rows() -> None:
    """(So that the case above compares two paths.)"""
    messages = placed(_workload_messages())
    decoder = make_decoder("simple", {}, stage=True)
    assert isinstance(decoder, SimpleDecoder)
    records = _Records(kafka_batch(messages), decoder, fail=False)
    careful: list[int] = []

    def one_by_one(i: int) -> None:
        careful.append(i)
        records.decode_one(i)

    decoder.decode_batch(
        records.values, records.topics, records.partitions, records.offsets,
        records.builder, one_by_one,
    )  # fmt: skip
    rows = [i for i, m in enumerate(messages) if m.rows]
    assert len(records.builder) == len(messages)
    assert set(careful) & set(rows) <= {rows[0]}  # (only a row before its table's schema)


def _bootstrap(database: str, table: str, version: int, column_type: str) -> bytes:
    column = {
        "name": "c",
        "dataType": {"mysqlType": column_type, "charset": "binary", "collate": "binary"},
        "nullable": True,
        "default": None,
    }
    schema = {
        "schema": database,
        "table": table,
        "tableID": 7,
        "version": version,
        "columns": [column],
        "indexes": [],
    }
    return orjson.dumps(
        {"version": 1, "type": "BOOTSTRAP", "commitTs": 0, "buildTs": 0, "tableSchema": schema}
    )


def _row(database: str, table: str, version: int, value: object, commit_ts: int = 100) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "database": database,
            "table": table,
            "type": "INSERT",
            "commitTs": commit_ts,
            "schemaVersion": version,
            "data": {"c": value},
        }
    )


@pytest.mark.parametrize(
    ("database", "table", "version"),
    [("db", "t", -1), ("", "t", 1), ("db", "", 1)],
    ids=["negative version", "empty database", "empty table"],
)
def test_rows_the_full_path_refuses_are_refused_with_their_schema_known(
    database: str, table: str, version: int
) -> None:
    """(A BOOTSTRAP may bring such a schema: its rows still go to the full path, which says
    what is wrong with them.)"""
    messages = placed(
        [
            Message(None, _bootstrap(database, table, version, "int")),
            Message(None, _row(database, table, version, "1")),
        ]
    )
    flat, full = _outcomes(messages, flat=True), _outcomes(messages, flat=False)
    assert flat == full
    assert isinstance(full[1][1], str)  # (an error)


def test_a_batch_arrow_refuses_is_decoded_again_from_where_it_started() -> None:
    """A row before its schema's BOOTSTRAP in one batch stays a wire row when a later row of
    that batch (a TIMESTAMP object in a VARCHAR column, which the stage's batch path leaves
    to Arrow) makes the stage decode the batch again one record at a time."""
    messages = placed(
        [
            Message(None, _row("db", "t", 1, "a")),
            Message(None, _bootstrap("db", "t", 1, "varchar")),
            Message(None, _row("db", "t", 1, {"value": "x"}, commit_ts=101)),
        ]
    )
    batch = kafka_batch(messages)
    batched = [
        row for part in decode_batches(iter([batch]), "simple", {}) for row in part.to_pylist()
    ]
    one_by_one = _Records(batch, make_decoder("simple", {}, stage=True), fail=False).one_by_one()
    assert batched == one_by_one.to_pylist()
    assert [row["kind"] for row in batched] == ["ROW", "BOOTSTRAP", "ERROR"]
    assert batched[0]["after"] is None and batched[0]["value"] == messages[0].value  # (wire)
