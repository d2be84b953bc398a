"""The Debezium protocol: TiCDC's golden all-types message both ways, the specification's
example, checkpoint and schema-change messages, and genuine Debezium captures
(tests/fixtures/debezium-genuine, see PROVENANCE.md there)."""

from __future__ import annotations

import datetime as dt
import json
import re
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.io.capture import read_capture, read_values
from ticdc_spark.model import (
    UNKNOWN_COMMIT_TS,
    DDLEvent,
    DDLType,
    RowChange,
    RowKind,
    Watermark,
    compose_ts,
)
from ticdc_spark.sql import parse_create_table
from ticdc_spark.types import ZeroDate

FIXTURES = Path(__file__).parent / "fixtures"
GENUINE = FIXTURES / "debezium-genuine"
D, T = dt.datetime, dt.timedelta

# The row MySQL stores for datatype.dml.sql (sql_mode='': 'd' is ENUM 0 and SET 0; fractions
# rounded to each column's fsp; FLOAT as float32).
GOLDEN_ROW: dict[str, Any] = {
    "pk": 1,
    "col_d_2023": dt.date(2023, 11, 30),
    "col_d_1000": dt.date(1000, 1, 1),
    "col_d_9999": dt.date(9999, 12, 31),
    "col_d_0000": ZeroDate(0, 0, 0),
    "col_dt": D(2023, 11, 30, 12, 34, 56),
    "col_dt_fsp_0": D(2023, 11, 30, 12, 34, 56),
    "col_dt_fsp_1": D(2023, 11, 30, 12, 34, 56, 100000),
    "col_dt_fsp_4": D(2023, 11, 30, 12, 34, 56, 123500),
    "col_dt_fsp_6": D(2023, 11, 30, 12, 34, 56, 123456),
    "col_dt_0000": ZeroDate(0, 0, 0),
    "col_t": T(hours=12, minutes=34, seconds=56),
    "col_t_fsp_0": T(hours=12, minutes=34, seconds=56),
    "col_t_fsp_1": T(hours=12, minutes=34, seconds=56, microseconds=100000),
    "col_t_fsp_4": T(hours=12, minutes=34, seconds=56, microseconds=123500),
    "col_t_fsp_6": T(hours=12, minutes=34, seconds=56, microseconds=123456),
    "col_t_neg": -T(hours=12, minutes=34, seconds=56, microseconds=123456),
    "col_ts": D(2023, 11, 30, 12, 34, 56),
    "col_ts_fsp_0": D(2023, 11, 30, 12, 34, 56),
    "col_ts_fsp_1": D(2023, 11, 30, 12, 34, 56, 100000),
    "col_ts_fsp_5": D(2023, 11, 30, 12, 34, 56, 123460),
    "col_ts_fsp_6": D(2023, 11, 30, 12, 34, 56, 123456),
    "col_y": 2023,
    "col_bit_1": 1,
    "col_bit_5": 16,
    "col_bit_6": 16,
    "col_bit_60": 16,
    "col_varchar": "foo",
    "col_char": "foo",
    "col_varbinary": b"foo",
    "col_binary": b"foo" + bytes(97),
    "col_blob": b"foo",
    "col_decimal": Decimal("12345.12345"),
    "col_numeric": Decimal("12345.12345"),
    "col_float": 12345.123046875,
    "col_double": 12345.12345,
    "col_int": -2147483648,
    "col_int_unsigned": 4294967295,
    "col_tinyint": -128,
    "col_tinyint_unsigned": 255,
    "col_smallint": -32768,
    "col_smallint_unsigned": 65535,
    "col_mediumint": -8388608,
    "col_mediumint_unsigned": 16777215,
    "col_bigint": -9223372036854775808,
    "col_bigint_unsigned": 18446744073709551615,
    "col_enum": 1,
    "col_enum_invalid": 0,
    "col_set": 3,
    "col_set_invalid": 0,
    "col_json": '["foo"]',
}
ZERO_DATES = ("col_d_0000", "col_dt_0000")  # Debezium writes NULL for them


def _golden(golden_dir: Path, name: str) -> dict[str, Any]:
    return json.loads((golden_dir / "debezium" / name).read_text())


def _golden_row(golden_dir: Path) -> RowChange:
    ddl = (golden_dir / "debezium" / "datatype.ddl.sql").read_text()
    schema = parse_create_table(ddl, "test")
    assert schema is not None
    schema = schema.with_derived_flags()
    return RowChange(RowKind.INSERT, schema, compose_ts(1701347696000, 5), None, GOLDEN_ROW)


@pytest.mark.parametrize("disable_schema", [False, True])
def test_golden_row_encodes_as_debezium_does(golden_dir: Path, disable_schema: bool) -> None:
    """TiCDC's debezium_test.go TestDataTypes: the value equals Debezium's but for source and
    ts_ms (and schema, when TiCDC leaves it out); the key equals Debezium's key."""
    options = {"cluster-id": "dbserver1", "debezium-disable-schema": str(disable_schema)}
    (message,) = make_encoder("debezium", options).encode([_golden_row(golden_dir)])
    want, want_key = (
        _golden(golden_dir, "datatype.dbz.json"),
        _golden(golden_dir, "datatype.dbz.key.json"),
    )
    value, key = json.loads(message.value or b""), json.loads(message.key or b"")
    for ignored in ("source", "ts_ms"):
        value["payload"].pop(ignored), want["payload"].pop(ignored)
    if disable_schema:
        assert "schema" not in value and "schema" not in key
        want.pop("schema"), want_key.pop("schema")
    assert value == want
    assert key == want_key


def test_golden_source_block(golden_dir: Path) -> None:
    row = _golden_row(golden_dir)
    (message,) = make_encoder("debezium", {"cluster-id": "c1"}).encode([row])
    source = json.loads(message.value or b"")["payload"]["source"]
    assert source == {
        "version": "2.4.0.Final",
        "connector": "TiCDC",
        "name": "c1",
        "ts_ms": 1701347696000,
        "snapshot": "false",
        "db": "test",
        "table": "foo",
        "server_id": 0,
        "gtid": None,
        "file": "",
        "pos": 0,
        "row": 0,
        "thread": 0,
        "query": None,
        "commit_ts": row.commit_ts,
        "cluster_id": "c1",
    }


def test_golden_row_decodes_back_with_the_tidb_extension(golden_dir: Path) -> None:
    row = _golden_row(golden_dir)
    options = {"enable-tidb-extension": "true"}
    (message,) = make_encoder("debezium", options).encode([row])
    (event,) = make_decoder("debezium", options).decode(message)
    assert isinstance(event, RowChange)
    assert (event.kind, event.commit_ts, event.schema.handle_key) == (
        RowKind.INSERT,
        row.commit_ts,
        ("pk",),
    )
    assert event.after == {**GOLDEN_ROW, **dict.fromkeys(ZERO_DATES)}
    types = {c.name: c.type.base_name for c in event.schema.columns}
    assert types["col_bigint_unsigned"] == "bigint unsigned"
    assert types["col_varbinary"] == "varbinary"


def test_genuine_golden_decodes_to_what_its_connect_schema_says(golden_dir: Path) -> None:
    """Debezium's own output has no tidb_type: DECIMAL is a double, binary a base64 string,
    BIGINT UNSIGNED an int64 (-1) - the decoder keeps what the schema cannot say."""
    base = golden_dir / "debezium"
    message = Message(
        (base / "datatype.dbz.key.json").read_bytes(), (base / "datatype.dbz.json").read_bytes()
    )
    (event,) = make_decoder("debezium").decode(message)
    assert isinstance(event, RowChange) and event.after is not None
    assert event.commit_ts == UNKNOWN_COMMIT_TS
    lossy = {"col_varbinary", "col_binary", "col_blob", "col_bigint_unsigned", *ZERO_DATES}
    lossy |= {"col_decimal", "col_numeric"}
    for name, value in GOLDEN_ROW.items():
        if name not in lossy:
            assert event.after[name] == value, name
    assert event.after["col_varbinary"] == "Zm9v"
    assert event.after["col_bigint_unsigned"] == -1
    assert event.after["col_decimal"] == 12345.12345  # a DOUBLE column, as far as it says
    types = {c.name: c.type.sql() for c in event.schema.columns}
    assert types["col_decimal"] == "double"
    assert types["col_tinyint"] == "smallint"
    assert types["col_enum"] == "enum('a','b','c')"
    assert types["col_bit_60"] == "bit(60)"
    assert types["col_dt_fsp_4"] == "datetime(6)"


SPEC_VALUE = b"""{"payload":{"ts_ms":1707103832957,"transaction":null,"op":"c","before":null,
"after":{"a":4,"b":2},"source":{"version":"2.4.0.Final","connector":"TiCDC","name":"default",
"ts_ms":1707103832263,"snapshot":"false","db":"test","table":"t2","server_id":0,"gtid":null,
"file":"","pos":0,"row":0,"thread":0,"query":null,"commit_ts":447507027004751877,
"cluster_id":"default"}},"schema":{"type":"struct","optional":false,
"name":"default.test.t2.Envelope","version":1,"fields":[{"type":"struct","optional":true,
"name":"default.test.t2.Value","field":"before","fields":[{"type":"int32","optional":false,
"field":"a"},{"type":"int32","optional":true,"field":"b"}]},{"type":"struct","optional":true,
"name":"default.test.t2.Value","field":"after","fields":[{"type":"int32","optional":false,
"field":"a"},{"type":"int32","optional":true,"field":"b"}]},{"type":"string",
"optional":false,"field":"op"}]}}"""
SPEC_KEY = b"""{"payload":{"a":4},"schema":{"fields":[{"field":"a","optional":true,
"type":"int32"}],"name":"default.test.t2.Key","optional":false,"type":"struct"}}"""


def test_specification_example_decodes() -> None:
    """debezium-protocol.ja.md's key and value (``schema.fields`` an array, per the errata)."""
    (event,) = make_decoder("debezium").decode(Message(SPEC_KEY, SPEC_VALUE))
    assert isinstance(event, RowChange)
    assert (event.kind, event.database, event.table) == (RowKind.INSERT, "test", "t2")
    assert event.commit_ts == 447507027004751877
    assert event.after == {"a": 4, "b": 2}
    assert event.schema.handle_key == ("a",)
    assert [c.type.sql() for c in event.schema.columns] == ["int", "int"]


def test_checkpoint_message_as_ticdc_writes_it() -> None:
    encoder = make_encoder("debezium", {"cluster-id": "c1"})
    encoder.clock = lambda: 1701326309000  # type: ignore[attr-defined]
    ts = compose_ts(1701326309000, 3)
    (message,) = encoder.encode([Watermark(ts)])
    key, value = json.loads(message.key or b""), json.loads(message.value or b"")
    assert key == {
        "payload": {},
        "schema": {"type": "struct", "name": "c1.watermark.Key", "optional": False, "fields": []},
    }
    payload = value["payload"]
    assert (payload["op"], payload["source"]["commit_ts"], payload["ts_ms"]) == (
        "m",
        ts,
        1701326309000,
    )
    assert value["schema"]["name"] == "c1.watermark.Envelope"
    assert make_decoder("debezium").decode(message) == [Watermark(ts)]


def test_schema_change_message() -> None:
    """TiCDC's codec_test.go TestDDLEvent: the key exactly; the value's payload but for
    tableChanges' table description, which this encoder does not write."""
    ddl = DDLEvent(
        DDLType.RENAME_TABLE, "RENAME TABLE test.table1 to test.table2", 1, "test", "table1"
    )
    encoder = make_encoder("debezium", {"cluster-id": "test_cluster"})
    encoder.clock = lambda: 1701326309000  # type: ignore[attr-defined]
    (message,) = encoder.encode([ddl])
    assert json.loads(message.key or b"") == {
        "payload": {"databaseName": "test"},
        "schema": {
            "type": "struct",
            "name": "io.debezium.connector.mysql.SchemaChangeKey",
            "optional": False,
            "version": 1,
            "fields": [{"field": "databaseName", "optional": False, "type": "string"}],
        },
    }
    payload = json.loads(message.value or b"")["payload"]
    assert payload["source"]["commit_ts"] == 1 and payload["source"]["table"] == "table1"
    assert (payload["ts_ms"], payload["databaseName"], payload["schemaName"]) == (
        1701326309000,
        "test",
        None,
    )
    assert payload["ddl"] == ddl.query
    assert payload["tableChanges"][0]["type"] == "ALTER"
    (back,) = make_decoder("debezium").decode(message)
    assert back == ddl


def test_genuine_schema_exclude_capture() -> None:
    """schemas.enable=false, the shape of Flink's debezium-data-schema-exclude.txt: op r is an
    insert, types are guessed, no commit ts."""
    lines = (GENUINE / "schema-exclude.jsonl").read_bytes().splitlines()
    decoder = make_decoder("debezium")
    events = [e for m in read_values(lines) for e in decoder.decode(m)]
    assert [e.kind for e in events if isinstance(e, RowChange)] == [
        RowKind.INSERT,
        RowKind.UPDATE,
        RowKind.DELETE,
        RowKind.UPDATE,
    ]
    first, update, delete, old_update = events
    assert isinstance(old_update, RowChange) and old_update.after is not None
    assert old_update.after["name"] == "lsn"  # (Debezium 1.0: no "transaction" member)
    assert isinstance(first, RowChange) and isinstance(update, RowChange)
    assert isinstance(delete, RowChange)
    assert first.after == {
        "id": 101,
        "name": "scooter",
        "description": "Small 2-wheel scooter",
        "weight": 3.140000104904175,
    }
    assert update.before is not None and update.before["weight"] == 1.0  # still a DOUBLE
    assert delete.before is not None and delete.before["id"] == 111
    assert {e.commit_ts for e in events if isinstance(e, RowChange)} == {UNKNOWN_COMMIT_TS}
    assert first.schema.column("weight").type.name == "double"


def test_genuine_precise_capture_exact_values() -> None:
    """schemas.enable=true with Debezium 2.x MySQL defaults (decimal precise, adaptive
    microseconds, bigint.unsigned precise), then Debezium's tombstone after the delete."""
    lines = (GENUINE / "schema-enable-precise.capture.jsonl").read_bytes().splitlines()
    decoder = make_decoder("debezium")
    per_message = [decoder.decode(m) for m in read_capture(lines)]
    assert [len(events) for events in per_message] == [1, 1, 0]  # the tombstone: nothing
    (insert,), (delete,) = per_message[:2]
    assert isinstance(insert, RowChange) and isinstance(delete, RowChange)
    assert delete.kind is RowKind.DELETE and delete.before == insert.after
    assert insert.after == {
        "id": 1,
        "price": Decimal("123456789012345678901234567890123.45678"),  # 33 integer digits
        "big": 18446744073709551615,
        "tiny": -128,
        "int8col": 7,
        "d": dt.date(2023, 11, 30),
        "dt3": D(2023, 11, 30, 12, 34, 56, 123000),
        "dt6": D(2023, 11, 30, 12, 34, 56, 123456),
        "t": -T(hours=12, minutes=34, seconds=56, microseconds=123456),
        "ts": D(2023, 11, 30, 12, 34, 56, 500000),  # 20:34:56.5+08:00 in UTC
        "bits": 0xABC,
        "flag": 1,
        "bin": b"\x00\xff",
        "e": 2,
        "s": 0b101,
        "j": '{"k": [1, 2]}',
        "g": struct.pack("<I", 4326) + bytes.fromhex("0101000000000000000000f03f0000000000000040"),
    }
    types = {c.name: c.type.sql() for c in insert.schema.columns}
    assert types["price"] == "decimal(38,5)" and types["big"] == "decimal(20,0)"
    assert insert.schema.handle_key == ("id",)


def test_genuine_string_decimals_and_connect_time_precision() -> None:
    lines = (GENUINE / "schema-enable-string-connect.jsonl").read_bytes().splitlines()
    (event,) = [e for m in read_values(lines) for e in make_decoder("debezium").decode(m)]
    assert isinstance(event, RowChange)
    assert event.after == {
        "id": 2,
        "price": "123456789012345678901234567890123.45678",  # a string: the schema says no more
        "pdouble": 1234.5,
        "d": dt.date(1000, 1, 1),
        "t": T(hours=12, minutes=34, seconds=56, microseconds=123000),
        "dt": D(2023, 11, 30, 12, 34, 56, 123000),
        "ub": -1,  # bigint.unsigned.handling.mode=long: the int64 as sent
    }


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, None, "needs a key or a value"),
        (b"{}", b'{"payload":{"op":"x","source":{}}}', "unknown op 'x'"),
        (b"{}", b'{"payload":{"source":{}}}', "neither 'op' nor 'ddl'"),
        (b"{}", b'{"payload":{"op":"m","source":{"commit_ts":"1"}}}', "commit_ts"),
        (b"{}", b'{"payload":{"op":"c","source":{"db":"d","table":"t"},"after":null}}', "'after'"),
        (b"{}", b"[1]", "must be a JSON object"),
    ],
)
def test_bad_messages_raise_decode_errors_naming_the_record(
    key: bytes | None, value: bytes | None, reason: str
) -> None:
    message = Message(key, value, topic="t", partition=2, offset=9)
    with pytest.raises(DecodeError, match=reason) as caught:
        make_decoder("debezium").decode(message)
    assert "t/2@9" in str(caught.value)


def test_cli_decodes_genuine_and_ticdc_values(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ticdc-spark decode -p debezium --values``: genuine Debezium (one JSON value per line)
    and TiCDC's own messages with a checkpoint, to their normalized events."""
    from ticdc_spark.cli import main

    encoder = make_encoder("debezium", {"debezium-disable-schema": "true"})
    ticdc = encoder.encode([_golden_row(golden_dir), Watermark(compose_ts(1701347697000))])
    values = tmp_path / "values.jsonl"
    genuine = (GENUINE / "schema-exclude.jsonl").read_bytes()
    values.write_bytes(genuine + b"".join((m.value or b"") + b"\n" for m in ticdc))
    assert main(["decode", "-p", "debezium", "--values", str(values)]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    kinds = ["INSERT", "UPDATE", "DELETE", "UPDATE", "INSERT", "WATERMARK"]
    assert [e["type"] for e in events] == kinds
    assert events[0]["after"]["weight"] == "3.140000104904175"
    assert events[4]["commitTs"] == compose_ts(1701347696000, 5)
    assert events[4]["after"]["col_varchar"] == "foo"


# Ways a TiCDC record of a known shape can differ from what the Arrow batch path reads: each
# must take the careful path and come out as decoding it alone does (a row or a dead letter).
_BATCH_MUTATIONS = (
    (b'"op":"c"', b'"op":"r"'),  # a snapshot read: an insert (the careful path's rule)
    (rb'"k":-?\d+', b'"k":true'),  # a boolean in an INT column
    (b'"k":', b'"zz":1,"k":'),  # a column not in the schema
    (b'"table":"sbtest1"', b'"table":"other"'),  # another table under the same schema
    (rb'"k":-?\d+', b'"k":99999999999999999999999'),  # an integer past 64 bits (a float)
    (rb'"k":-?\d+', b'"k":[1]'),  # a nested value
    (b'"op":"u"', b'"op":"u","before":null,"x":0'),  # an update without its old image
    (b'"db":"sbtest"', b'"db":"sbtest","commit_ts":0,"y":0'),  # no TSO
)


def test_arrow_batch_path_gives_what_decoding_one_by_one_gives() -> None:
    """TiCDC's records of one shape, a second table, records the batch path must leave to
    the careful path (mutated, cut short, without a key, a tombstone, a checkpoint) and
    genuine Debezium records: the Arrow batch equals the one-by-one changelog, and most
    records took the batch path."""
    from contract.helpers import kafka_batch
    from ticdc_spark.spark.decode import _Records, decode_batches
    from ticdc_spark.testing.workload import Workload

    encoder = make_encoder("debezium", {})
    events = [e for e in Workload(seed=5, rows=400, tables=2).events() if isinstance(e, RowChange)]
    messages = [m for e in events for m in encoder.encode([e])]
    for i, (old, new) in enumerate(_BATCH_MUTATIONS):
        at = next(j for j in range(10 + 7 * i, len(messages)) if re.search(old, messages[j].value))  # type: ignore[arg-type]
        messages[at] = Message(messages[at].key, re.sub(old, new, messages[at].value, count=1))  # type: ignore[arg-type]
    messages[3] = Message(messages[3].key, (messages[3].value or b"")[:200])  # cut short
    messages[4] = Message(None, messages[4].value)  # no key: another plan (no handle key)
    messages[5] = Message(messages[5].key, None)  # a tombstone
    messages.extend(encoder.encode([Watermark(445644800000000001)]))
    genuine = (GENUINE / "schema-exclude.jsonl").read_bytes().splitlines()
    messages.extend(list(read_values(genuine))[:3])
    messages = [
        Message(m.key, m.value, topic="t", partition=i % 2, offset=i)
        for i, m in enumerate(messages)
    ]
    batch = kafka_batch(messages)
    (one_by_one,) = decode_batches(iter([batch]), "debezium", {}, compiled=False)
    expected = one_by_one.to_pylist()

    decoder = make_decoder("debezium", {})
    records = _Records(batch, decoder, fail=False)  # (dead letters as the decode stage makes)
    careful: list[int] = []

    def one(i: int) -> None:
        careful.append(i)
        records.decode_one(i)

    out = decoder.decode_arrow_batch(batch, one, records.builder)  # type: ignore[attr-defined]
    assert out.to_pylist() == expected
    assert {row["kind"] for row in expected} >= {"ROW", "ERROR", "WATERMARK"}
    assert len(careful) < len(messages) // 4  # (the rest: the batch path)


def test_an_update_without_its_old_value_is_an_update_without_a_before_image() -> None:
    """TiCDC with ``debezium-output-old-value=false`` sends ``"op":"u"`` without ``before``:
    an UPDATE (the planner upserts it by the after image's key), not an INSERT; on the typed
    start, the full path and the Arrow batch path alike (tests/test_debezium_apply.py applies
    such a stream)."""
    from contract.helpers import kafka_batch, placed
    from test_debezium_fast_paths import _full_path, _one_by_one
    from ticdc_spark.codec.debezium import DebeziumDecoder
    from ticdc_spark.spark.decode import _Records
    from ticdc_spark.testing.workload import sbtest_schema

    options = {"debezium-output-old-value": "false"}
    schema, ts = sbtest_schema(), compose_ts(1_700_000_000_000)
    after = {"id": 1, "k": 2, "c": "c", "pad": "p"}
    update = RowChange(RowKind.UPDATE, schema, ts, {**after, "k": 1}, after)
    messages = placed(make_encoder("debezium", options).encode([update]) * 3)
    assert "before" not in json.loads(messages[0].value or b"")["payload"]
    for decoder in (make_decoder("debezium", options), _full_path(options)):
        (got,) = decoder.decode(messages[0])
        assert isinstance(got, RowChange)
        assert (got.kind, got.before, got.after) == (RowKind.UPDATE, None, after)
    batch = kafka_batch(messages)
    decoder = make_decoder("debezium", options)
    assert isinstance(decoder, DebeziumDecoder)
    records = _Records(batch, decoder, fail=False)
    out = decoder.decode_arrow_batch(batch, records.decode_one, records.builder).to_pylist()
    assert out == _one_by_one(batch, options)
    assert [(row["op"], row["before"]) for row in out] == [("UPDATE", None)] * 3
