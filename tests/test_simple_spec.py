"""The Simple protocol against its specification (tests/fixtures/spec/simple-protocol.ja.txt)
and TiCDC's behaviour: the six examples, schemas by version, rows held until their schema
arrives, the bootstrap cadence, and the Avro encoding's bytes."""

from __future__ import annotations

import dataclasses
import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.profiles import simple_spec_examples
from strategies import row_changes
from ticdc_spark.codec import Message, Route, make_decoder, make_encoder
from ticdc_spark.codec.simple import avro
from ticdc_spark.errors import ConfigError, DecodeError
from ticdc_spark.model import (
    Bootstrap,
    Column,
    DDLEvent,
    DDLType,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.types import ColumnType

NO_BOOTSTRAPS = {"send-bootstrap-interval-in-sec": "0", "send-bootstrap-in-msg-count": "0"}
USER_V1, USER_V2 = 447984074911121426, 447987408682614791


@pytest.fixture
def examples(spec_dir: Path) -> list[dict[str, Any]]:
    found = simple_spec_examples(spec_dir)
    assert [e["type"] for e in found] == [
        "ALTER",
        "INSERT",
        "UPDATE",
        "DELETE",
        "WATERMARK",
        "BOOTSTRAP",
    ]
    return found


def _message(obj: dict[str, Any], offset: int = 0) -> Message:
    return Message(None, orjson.dumps(obj), topic="t", partition=0, offset=offset)


def test_the_six_examples_decode_to_what_they_describe(examples: list[dict[str, Any]]) -> None:
    decoder = make_decoder("simple")
    events = [e for i, obj in enumerate(examples) for e in decoder.decode(_message(obj, i))]
    ddl, insert, update, delete, watermark, bootstrap = events
    assert isinstance(ddl, DDLEvent) and ddl.ddl_type is DDLType.ADD_COLUMN
    assert (ddl.database, ddl.table, ddl.commit_ts) == ("simple", "user", 447987408682614795)
    assert ddl.schema is not None and ddl.schema_before is not None
    assert (ddl.schema.version, ddl.schema_before.version) == (USER_V2, USER_V1)
    assert ddl.schema.column_names == ("id", "name", "age", "score", "createTime")
    assert ddl.schema.column("createTime").type.name == "timestamp"
    assert ddl.schema.primary_key == ("id",) and not ddl.schema.column("id").nullable
    row = {"age": 25, "id": 1, "name": "John Doe", "score": 90.5}
    assert isinstance(insert, RowChange) and insert.kind is RowKind.INSERT
    assert (insert.before, insert.after) == (None, row)
    assert (insert.schema.version, insert.table_id, insert.commit_ts) == (
        USER_V1,
        148,
        447984084414103554,
    )
    assert insert.schema.column("score").type == ColumnType(
        "float", length=12, charset="binary", collation="binary"
    )
    assert isinstance(update, RowChange) and update.kind is RowKind.UPDATE
    assert (update.before, update.after) == (row, {**row, "score": 95.0})
    assert isinstance(delete, RowChange) and delete.kind is RowKind.DELETE
    assert (delete.before, delete.after) == ({**row, "score": 95.0}, None)
    assert watermark == Watermark(447984124732375041)
    assert isinstance(bootstrap, Bootstrap) and bootstrap.build_ts == 1708924603278
    assert (bootstrap.schema.table, bootstrap.schema.version) == ("new_user", USER_V1)
    assert bootstrap.schema.column("name").type.charset == "utf8mb4"


def test_the_examples_re_encode_to_the_same_json(examples: list[dict[str, Any]]) -> None:
    decoder = make_decoder("simple")
    for i, obj in enumerate(examples):
        (event,) = decoder.decode(_message(obj, i))
        encoder = make_encoder("simple", NO_BOOTSTRAPS)
        encoder.clock = lambda obj=obj: obj["buildTs"]  # type: ignore[attr-defined]
        (message,) = encoder.encode([event])
        assert message.value == orjson.dumps(obj), obj["type"]


def test_rows_before_their_schema_are_held_then_come_out_after_it(
    examples: list[dict[str, Any]],
) -> None:
    """A consumer that joins mid-stream (the specification's second scenario)."""
    ddl, insert, update, delete = examples[:4]
    decoder = make_decoder("simple")
    for offset, obj in enumerate((insert, update, delete)):
        assert decoder.decode(_message(obj, offset)) == []
    assert decoder.waiting() == [(("simple", "user", USER_V1), 3)]  # type: ignore[attr-defined]
    events = decoder.decode(_message(ddl, 3))
    assert [type(e).__name__ for e in events] == ["DDLEvent", *["RowChange"] * 3]
    assert [e.kind for e in events[1:]] == [RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE]  # type: ignore[union-attr]
    assert decoder.waiting() == []  # type: ignore[attr-defined]
    # the changelog gets the released rows after the DDL, in the order they arrived
    from ticdc_spark.pipeline.changelog import ChangelogBuilder

    decoder = make_decoder("simple")
    builder = ChangelogBuilder()
    for offset, obj in enumerate((insert, update, delete, ddl)):
        decoder.decode_into(_message(obj, offset), builder)
    rows = builder.to_batch().to_pylist()
    assert [(r["kind"], r["offset"], r["seq"]) for r in rows] == [
        ("DDL", 3, 0),
        ("ROW", 3, 1),
        ("ROW", 3, 2),
        ("ROW", 3, 3),
    ]
    assert rows[1]["after"] == [("age", "25"), ("id", "1"), ("name", "John Doe"), ("score", "90.5")]


def test_what_is_held_is_bounded_and_the_error_says_what_it_waits_for(
    examples: list[dict[str, Any]],
) -> None:
    decoder = make_decoder("simple", {"max-held-rows": "2"})
    decoder.decode(_message(examples[1], 0))
    decoder.decode(_message(examples[2], 1))
    with pytest.raises(ConfigError) as caught:
        decoder.decode(_message(examples[3], 2))
    text = str(caught.value)
    assert "simple.user" in text and str(USER_V1) in text and "max-held-rows" in text
    small = make_decoder("simple", {"max-held-bytes": "100"})
    with pytest.raises(ConfigError, match="max-held-bytes=100"):
        small.decode(_message(examples[1], 0))


def _schema(table: str = "t", version: int = 5, *extra: Column) -> TableSchema:
    columns = (Column("id", ColumnType("int"), nullable=False), Column("v", ColumnType("text")))
    return TableSchema(
        "db", table, columns + extra, (Index("primary", ("id",), primary=True),), 7, version
    )


def _insert(schema: TableSchema, ts: int, value: Any = "x") -> RowChange:
    return RowChange(RowKind.INSERT, schema, ts, None, {"id": ts, "v": value})


@pytest.mark.parametrize("encoding", ["json", "avro"])
def test_a_rename_keeps_the_version_and_a_ddl_brings_both_schemas(encoding: str) -> None:
    options = {**NO_BOOTSTRAPS, "encoding-format": encoding}
    old, new = _schema("t"), _schema("u")
    rename = DDLEvent(DDLType.RENAME_TABLE, "RENAME TABLE db.t TO db.u", 10, "db", "u", new, old)
    encoder, decoder = make_encoder("simple", options), make_decoder("simple", options)
    messages = encoder.encode([_insert(old, 5), _insert(new, 11), rename])
    assert messages[-1].route is Route.ALL_PARTITIONS
    events = [e for m in messages for e in decoder.decode(m)]
    assert isinstance(events[0], DDLEvent) and events[0].ddl_type is DDLType.RENAME_TABLE
    assert [(e.table, e.commit_ts) for e in events[1:]] == [("t", 5), ("u", 11)]  # type: ignore[union-attr]


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def _kinds(messages: list[Message]) -> list[str]:
    return ["B" if m.rows == 0 and m.route is not Route.ALL_TOPICS else "R" for m in messages]


def test_bootstrap_cadence_by_rows_time_and_idleness() -> None:
    encoder = make_encoder(
        "simple", {"send-bootstrap-in-msg-count": "3", "send-bootstrap-interval-in-sec": "120"}
    )
    clock = encoder.clock = Clock()  # type: ignore[attr-defined]
    schema = _schema()
    rows = [_insert(schema, ts) for ts in range(1, 8)]
    assert _kinds(encoder.encode(rows)) == list("BRRRBRRRBR")
    clock.ms += 120_000  # the interval passes: due before the next row
    assert _kinds(encoder.encode([_insert(schema, 9)])) == list("BR")
    clock.ms += 119_000  # not yet; a watermark sends what is due, here nothing
    assert _kinds(encoder.encode([Watermark(10)])) == ["R"]
    clock.ms += 1_000
    bootstrap, watermark = encoder.encode([Watermark(11)])
    assert (bootstrap.rows, bootstrap.table, watermark.route) == (0, "t", Route.ALL_TOPICS)
    clock.ms += 31 * 60_000  # idle 31 minutes: forgotten, no bootstrap on watermarks
    assert _kinds(encoder.encode([Watermark(12)])) == ["R"]
    assert _kinds(encoder.encode([_insert(schema, 13)])) == list("BR")


def test_bootstrap_routes_and_switch() -> None:
    schema = _schema()
    (first, _) = make_encoder("simple").encode([_insert(schema, 1)])
    assert (first.route, first.database, first.table) == (Route.ALL_PARTITIONS, "db", "t")
    one = make_encoder("simple", {"send-bootstrap-to-all-partition": "false"})
    assert one.encode([_insert(schema, 1)])[0].route is Route.FIRST_PARTITION
    assert _kinds(make_encoder("simple", NO_BOOTSTRAPS).encode([_insert(schema, 1)])) == ["R"]
    # a schema that changes under the same version is bootstrapped before its next row
    encoder = make_encoder("simple")
    wider = _schema("t", 5, Column("w", ColumnType("int")))
    assert _kinds(encoder.encode([_insert(schema, 1), _insert(wider, 2)])) == list("BRBR")


def test_json_values_per_type_and_timestamp_location() -> None:
    columns = (
        Column("id", ColumnType("bigint", unsigned=True), nullable=False),
        Column("f", ColumnType("float")),
        Column("d", ColumnType("double")),
        Column("m", ColumnType("decimal", length=10, decimal=2)),
        Column("b", ColumnType("varbinary", length=8)),
        Column("ts", ColumnType("timestamp", decimal=3)),
        Column("e", ColumnType("enum", elements=("a", "b"))),
        Column("s", ColumnType("set", elements=("a", "b"))),
        Column("bit", ColumnType("bit", length=8)),
    )
    import datetime as dt

    schema = TableSchema("db", "x", columns, (Index("primary", ("id",), primary=True),), 1, 2)
    image = {
        "id": 2**64 - 1,
        "f": 1e20,
        "d": 0.1,
        "m": Decimal("1.50"),
        "b": b"\x00\xff<",
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 600000),
        "e": 2,
        "s": 3,
        "bit": 255,
    }
    encoder = make_encoder("simple", {**NO_BOOTSTRAPS, "time-zone": "Asia/Shanghai"})
    encoder.clock = lambda: 1  # type: ignore[attr-defined]
    (message,) = encoder.encode([RowChange(RowKind.INSERT, schema, 9, None, image)])
    assert message.value == (
        b'{"version":1,"database":"db","table":"x","tableID":1,"type":"INSERT","commitTs":9,'
        b'"buildTs":1,"schemaVersion":2,"data":{"b":"AP88","bit":"255","d":"0.1","e":"2",'
        b'"f":"100000000000000000000","id":"18446744073709551615","m":"1.50","s":"3",'
        b'"ts":{"location":"Asia/Shanghai","value":"2024-01-02 03:04:05.600"}}}'
    )
    decoder = make_decoder("simple")
    decoder.decode(Message(None, make_encoder("simple").encode([Bootstrap(schema)])[0].value))
    (row,) = decoder.decode(message)
    assert row.after == {**image, "f": 1.0000000200408773e20}  # type: ignore[union-attr]


def test_avro_messages_start_with_the_message_branch_and_read_back() -> None:
    encoder = make_encoder("simple", {**NO_BOOTSTRAPS, "encoding-format": "avro"})
    (watermark,) = encoder.encode([Watermark(446266400629063682)])
    assert watermark.value is not None and watermark.value[:2] == b"\x16\x00"
    decoder = make_decoder("simple", {"encoding-format": "avro"})
    assert decoder.decode(watermark) == [Watermark(446266400629063682)]
    with pytest.raises(DecodeError, match="the Simple Avro WATERMARK message ends early"):
        decoder.decode(Message(None, watermark.value[:-1], topic="t", partition=0, offset=3))


@settings(max_examples=60, deadline=None)
@given(row=row_changes(), build=st.integers(0, 2**62), checksum=st.booleans())
def test_the_planned_avro_dml_writer_writes_what_fastavro_writes(
    row: RowChange, build: int, checksum: bool
) -> None:
    """The hand-planned DML bytes equal fastavro's for the same record, for every type."""
    from ticdc_spark.codec.simple.dialect import avro_dialect
    from ticdc_spark.model import RowChecksum

    if checksum:
        row = dataclasses.replace(row, checksum=RowChecksum(1, False, 2**32 - 1, 7))
    encoder = make_encoder("simple", {**NO_BOOTSTRAPS, "encoding-format": "avro"})
    encoder.clock = lambda: build  # type: ignore[attr-defined]
    (message,) = encoder.encode([row])
    values = avro_dialect("UTC")  # fastavro's (branch, value) pairs: an independent writer
    encoders = {c.name: values.encoder(c.type) for c in row.schema.columns}
    head: dict[str, Any] = encoder._dml_head(row, build, False, None)  # type: ignore[attr-defined]

    def native(image: dict[str, Any] | None) -> Any:
        if image is None or (row.kind is RowKind.INSERT and image is row.before):
            return None
        ordered = sorted(image.items(), key=lambda item: item[0].encode())  # (name order)
        return {name: None if v is None else encoders[name](v) for name, v in ordered}

    payload = {**head, "claimCheckLocation": None, "handleKeyOnly": None}
    payload["checksum"] = head.get("checksum")
    payload["data"] = None if row.kind is RowKind.DELETE else native(row.after)
    payload["old"] = None if row.kind is RowKind.INSERT else native(row.before)
    expected = io.BytesIO()
    fastavro.schemaless_writer(
        expected,
        avro.SCHEMA,
        (
            "com.pingcap.simple.avro.Message",
            {"type": "DML", "payload": ("com.pingcap.simple.avro.DML", payload)},
        ),
    )
    assert message.value == expected.getvalue()


def test_cli_decode_keeps_the_memo_across_the_input(
    examples: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ticdc-spark decode -p simple``: rows before their schema come out once it arrives;
    rows whose schema never comes are reported, with exit status 2."""
    from ticdc_spark.cli import main

    ddl, insert, update, delete, watermark, bootstrap = examples
    values = tmp_path / "values.jsonl"
    values.write_bytes(
        b"".join(orjson.dumps(o) + b"\n" for o in (insert, update, ddl, delete, watermark))
    )
    assert main(["decode", "-p", "simple", "--values", str(values)]) == 0
    out = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["type"] for o in out] == ["DDL", "INSERT", "UPDATE", "DELETE", "WATERMARK"]
    values.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in (insert, bootstrap)))
    assert main(["decode", "-p", "simple", "--values", str(values)]) == 2
    captured = capsys.readouterr()
    assert [orjson.loads(line)["type"] for line in captured.out.splitlines()] == ["BOOTSTRAP"]
    assert f"1 row(s) of simple.user await schema version {USER_V1}" in captured.err


def test_a_bad_held_row_loses_none_of_the_others(
    examples: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three rows held, the second of which does not fit its schema once it comes: the
    schema's event and the two good rows still come out, and the bad one is reported by its
    own record (before, its error took the whole message's events with it)."""
    from ticdc_spark.cli import main

    ddl, insert, update, delete = examples[:4]
    bad = {**update, "data": {**update["data"], "age": "not a number"}}
    values = tmp_path / "values.jsonl"
    values.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in (insert, bad, delete, ddl)))
    assert main(["decode", "-p", "simple", "--on-error", "skip", "--values", str(values)]) == 0
    captured = capsys.readouterr()
    assert [orjson.loads(line)["type"] for line in captured.out.splitlines()] == [
        "DDL",
        "INSERT",
        "DELETE",
    ]
    assert "values.jsonl line 2: column 'age'" in captured.err
    assert "1 bad record(s) skipped" in captured.err
    decoder = make_decoder("simple")
    for offset, obj in enumerate((insert, bad, delete)):
        decoder.decode(_message(obj, offset))
    with pytest.raises(DecodeError, match="t/0@1") as caught:
        decoder.decode(_message(ddl, 3))
    assert [type(e).__name__ for e in caught.value.events] == ["DDLEvent", "RowChange", "RowChange"]


def test_held_claim_check_rows_count_the_bytes_they_hold(tmp_path: Path) -> None:
    """A row waiting for its schema holds the full message its claim-check pointer named:
    max-held-bytes bounds those bytes, not the pointer's (memory stays bounded)."""
    options = {
        **NO_BOOTSTRAPS,
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": f"file://{tmp_path}",
        "max-message-bytes": "600",
    }
    schema = _schema()
    encoder = make_encoder("simple", options)
    pointers = encoder.encode([_insert(schema, key, "x" * 5000) for key in range(3)])
    assert all(len(p.value or b"") < 600 for p in pointers)
    decoder = make_decoder("simple", {**options, "max-held-bytes": "12000"})
    decoder.decode(pointers[0])
    decoder.decode(pointers[1])
    with pytest.raises(ConfigError, match="max-held-bytes=12000"):
        decoder.decode(pointers[2])  # (a third 5 kB row would hold more than 12000 bytes)


def test_held_compressed_rows_count_the_bytes_they_hold() -> None:
    """The same for a compressed message: what is held is the message decompressed."""
    options = {**NO_BOOTSTRAPS, "large-message-handle-compression": "lz4"}
    encoder = make_encoder("simple", options)
    messages = encoder.encode([_insert(_schema(), key, "x" * 5000) for key in range(3)])
    assert all(len(m.value or b"") < 1000 for m in messages)
    decoder = make_decoder("simple", {**options, "max-held-bytes": "12000"})
    decoder.decode(messages[0])
    decoder.decode(messages[1])
    with pytest.raises(ConfigError, match="max-held-bytes=12000"):
        decoder.decode(messages[2])


@pytest.mark.parametrize("encoding", ["json", "avro"])
def test_claim_check_sends_a_pointer_and_the_key_and_reads_the_full_row_back(
    encoding: str, tmp_path: Path
) -> None:
    options = {
        **NO_BOOTSTRAPS,
        "encoding-format": encoding,
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": f"file://{tmp_path}",
        "max-message-bytes": "600",
    }
    schema = _schema()
    row = _insert(schema, 3, "x" * 1000)
    encoder = make_encoder("simple", options)
    bootstrap, pointer = encoder.encode([Bootstrap(schema), row])
    assert pointer.value is not None and len(pointer.value) < 600
    assert len(list(tmp_path.iterdir())) == 1
    if encoding == "json":
        sent = orjson.loads(pointer.value)
        assert sent["handleKeyOnly"] is True and sent["data"] == {"id": "3"}
        assert sent["claimCheckLocation"].startswith(f"file://{tmp_path}/")
    decoder = make_decoder("simple", options)
    decoder.decode(bootstrap)
    (got,) = decoder.decode(pointer)
    assert isinstance(got, RowChange) and got.after == row.after and not got.handle_key_only
