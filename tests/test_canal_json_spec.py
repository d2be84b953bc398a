"""Canal-JSON: the specification's examples, its varbinary example byte for byte, and genuine
Alibaba Canal output."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.model import (
    Column,
    DDLEvent,
    DDLType,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.types import parse_column_type

_BLOCK_RE = re.compile(r"```json\n(.*?)```", re.S)


def spec_examples(spec_dir: Path) -> list[dict]:
    """The complete JSON examples of the document (those without '...' elisions)."""
    text = (spec_dir / "canal-json-protocol.ja.md").read_text(encoding="utf-8")
    found = []
    for block in _BLOCK_RE.findall(text):
        cleaned = re.sub(r"//[^\n]*", "", block)
        try:
            found.append(orjson.loads(cleaned))
        except orjson.JSONDecodeError:
            continue  # an example with '...' placeholders
    return found


def _decode(obj: dict | bytes, **options: str) -> list:
    value = obj if isinstance(obj, bytes) else orjson.dumps(obj)
    return make_decoder("canal-json", options).decode(
        Message(None, value, topic="t", partition=0, offset=1)
    )


@pytest.fixture(scope="module")
def examples(spec_dir: Path) -> dict[str, dict]:
    found = {e["type"]: e for e in spec_examples(spec_dir)}
    assert set(found) == {"QUERY", "INSERT", "TIDB_WATERMARK"}
    return found


def test_ddl_example(examples: dict[str, dict]) -> None:
    (event,) = _decode(examples["QUERY"])
    assert event == DDLEvent(
        DDLType.DROP_SCHEMA, "drop database if exists test", 163963309467037594, "test", ""
    )


def test_insert_example(examples: dict[str, dict]) -> None:
    (event,) = _decode(examples["INSERT"])
    assert isinstance(event, RowChange)
    assert event.kind is RowKind.INSERT
    assert event.commit_ts == 163963314122145239
    assert (event.database, event.table, event.schema.primary_key) == ("test", "tp_int", ("id",))
    assert event.after == {
        "c_bigint": 9223372036854775807,
        "c_int": 2147483647,
        "c_mediumint": 8388607,
        "c_smallint": 32767,
        "c_tinyint": 127,
        "id": 2,
    }
    assert event.before is None


def test_watermark_example(examples: dict[str, dict]) -> None:
    assert _decode(examples["TIDB_WATERMARK"]) == [Watermark(429918007904436226)]


_TP_INT_TYPES = {
    "c_bigint": "bigint",
    "c_int": "int",
    "c_mediumint": "mediumint",
    "c_smallint": "smallint",
    "c_tinyint": "tinyint",
    "id": "int",
}
_AFTER = {
    "c_bigint": "9223372036854775807",
    "c_int": "0",
    "c_mediumint": "8388607",
    "c_smallint": "32767",
    "c_tinyint": "0",
    "id": "2",
}
_BEFORE = {**_AFTER, "c_int": "2147483647", "c_tinyint": "127"}


def _update(old: dict) -> dict:
    return {
        "id": 0,
        "database": "test",
        "table": "tp_int",
        "pkNames": ["id"],
        "isDdl": False,
        "type": "UPDATE",
        "es": 1639633141221,
        "ts": 1639633142960,
        "sql": "",
        "sqlType": dict.fromkeys(_AFTER, 4),
        "mysqlType": _TP_INT_TYPES,
        "data": [_AFTER],
        "old": [old],
    }


@pytest.mark.parametrize(
    "old",
    [_BEFORE, {"c_int": "2147483647", "c_tinyint": "127"}],
    ids=["ticdc-full-old", "canal-changed-only"],
)
def test_update_example_both_old_forms(old: dict) -> None:
    (event,) = _decode(_update(old))
    assert event.kind is RowKind.UPDATE
    assert event.before == {k: int(v) for k, v in _BEFORE.items()}
    assert event.after == {k: int(v) for k, v in _AFTER.items()}
    assert event.commit_ts == 1639633141221 << 18  # no _tidb: the es, as a TSO


def test_old_key_with_null_is_a_change_to_null() -> None:
    message = _update({"c_int": None})
    (event,) = _decode(message)
    assert event.before["c_int"] is None
    assert event.before["c_tinyint"] == 0  # absent from old: unchanged


def test_delete_example_before_and_after_v5_4() -> None:
    base = {**_update({}), "type": "DELETE", "old": None}
    for message in (base, {**base, "old": [_AFTER]}):  # v5.4+: old null; before: old == data
        (event,) = _decode(message)
        assert event.kind is RowKind.DELETE
        assert event.before == {k: int(v) for k, v in _AFTER.items()}
        assert event.after is None


# --------------------------------------------------------------------------------------------
# The varbinary example: 16 bytes <-> the document's exact JSON text, both ways.

_VARBINARY = bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])


def _spec_varbinary_literal(spec_dir: Path) -> bytes:
    text = (spec_dir / "canal-json-protocol.ja.md").read_text(encoding="utf-8")
    match = re.search(r'"c_varbinary": ("(?:[^"\\]|\\.)*")', text)
    assert match is not None
    return match[1].encode("utf-8")


def test_varbinary_example_decodes(spec_dir: Path) -> None:
    literal = _spec_varbinary_literal(spec_dir)
    message = (
        b'{"id":0,"database":"test","table":"t","pkNames":[],"isDdl":false,'
        b'"type":"INSERT","es":1,"ts":1,"sql":"","sqlType":{"c_varbinary":2004},'
        b'"mysqlType":{"c_varbinary":"varbinary"},"old":null,'
        b'"data":[{"c_varbinary":' + literal + b"}]}"
    )
    (event,) = _decode(message)
    assert event.after == {"c_varbinary": _VARBINARY}


def test_varbinary_example_encodes_byte_for_byte(spec_dir: Path) -> None:
    schema = TableSchema("test", "t", (Column("c_varbinary", parse_column_type("varbinary")),))
    row = RowChange(RowKind.INSERT, schema, 1 << 18, after={"c_varbinary": _VARBINARY})
    (message,) = make_encoder("canal-json").encode([row])
    assert b'"data":[{"c_varbinary":' + _spec_varbinary_literal(spec_dir) + b"}]" in message.value


# --------------------------------------------------------------------------------------------
# Genuine Alibaba Canal messages (public captures): alphabetical keys, gtid, several rows,
# parameterised mysqlType, only changed columns in old.

CANAL_UPDATE = (
    '{"data":[{"id":"10","username":"eve_adams","email":"eve@example.com","birthdate":'
    '"1995-05-10","is_active":"0"}],"database":"canal_demo","es":1719916925000,"gtid":"","id":'
    '3736,"isDdl":false,"mysqlType":{"id":"int(11)","username":"varchar(50)","email":'
    '"varchar(100)","birthdate":"date","is_active":"tinyint(1)"},"old":[{"birthdate":'
    '"1995-05-14","is_active":"1"}],"pkNames":["id"],"sql":"","sqlType":{"id":4,"username":12,'
    '"email":12,"birthdate":91,"is_active":-6},"table":"canal_demo_user_test","ts":1719916925954,'
    '"type":"UPDATE"}'
)
CANAL_MULTI_UPDATE = (
    '{"data":[{"id":"8","username":"charlie_brown","email":"charlie@example.com","birthdate":'
    '"1995-08-08","is_active":"0"},{"id":"9","username":"diana_prince","email":'
    '"diana@example.com","birthdate":"1995-08-08","is_active":"0"}],"database":"canal_demo",'
    '"es":1719922093000,"gtid":"","id":4600,"isDdl":false,"mysqlType":{"id":"int(11)",'
    '"username":"varchar(50)","email":"varchar(100)","birthdate":"date","is_active":'
    '"tinyint(1)"},"old":[{"birthdate":"1992-10-12","is_active":"1"},{"birthdate":"1987-11-30",'
    '"is_active":"1"}],"pkNames":["id"],"sql":"","sqlType":{"id":4,"username":12,"email":12,'
    '"birthdate":91,"is_active":-6},"table":"canal_demo_user_test","ts":1719922094144,'
    '"type":"UPDATE"}'
)
CANAL_DDL = (
    '{"data":null,"database":"canal_demo","es":1719931675000,"gtid":"","id":628,"isDdl":true,'
    '"mysqlType":null,"old":null,"pkNames":null,"sql":"ALTER TABLE canal_demo_user_test ADD '
    'COLUMN login_time DATETIME","sqlType":null,"table":"canal_demo_user_test","ts":'
    '1719931676148,"type":"ALTER"}'
)
CANAL_DELETE_NO_PK = (
    '{"data":[{"id":"1","name":"a"},{"id":"1","name":"a"}],"database":"test","es":1619332401000,'
    '"id":7,"isDdl":false,"mysqlType":{"id":"int(11)","name":"varchar(20)"},"old":null,'
    '"pkNames":null,"sql":"","sqlType":{"id":4,"name":12},"table":"test_canal","ts":'
    '1619332402880,"type":"DELETE"}'
)


def test_genuine_canal_update_rebuilds_the_before_image() -> None:
    import datetime as dt

    (event,) = _decode(CANAL_UPDATE.encode())
    assert event.after["birthdate"] == dt.date(1995, 5, 10)
    assert event.before == {**event.after, "birthdate": dt.date(1995, 5, 14), "is_active": 1}
    assert event.schema.column("id").type == parse_column_type("int(11)")
    assert event.schema.column("is_active").type.is_bool
    assert event.commit_ts == 1719916925000 << 18


def test_genuine_canal_multi_row_update() -> None:
    events = _decode(CANAL_MULTI_UPDATE.encode())
    assert [(e.after["id"], e.before["is_active"], e.before["birthdate"].year) for e in events] == [
        (8, 1, 1992),
        (9, 1, 1987),
    ]


def test_genuine_canal_ddl() -> None:
    (event,) = _decode(CANAL_DDL.encode())
    assert event.ddl_type is DDLType.ADD_COLUMN
    assert (event.database, event.table) == ("canal_demo", "canal_demo_user_test")


def test_genuine_canal_delete_without_primary_key() -> None:
    events = _decode(CANAL_DELETE_NO_PK.encode())
    assert [e.before for e in events] == [{"id": 1, "name": "a"}] * 2
    assert events[0].schema.primary_key == ()


def test_official_canal_parameterised_types() -> None:
    """The document's 'official Canal' mysqlType column list parses to full types."""
    types = {
        "c_binary": "binary(16)",
        "c_bit": "bit(64)",
        "c_char": "char(16)",
        "c_decimal": "decimal(10, 4)",
        "c_enum": "enum('a','b','c')",
        "c_set": "set('a','b','c')",
        "c_varbinary": "varbinary(16)",
        "c_varchar": "varchar(16)",
        "id": "int",
    }
    data = {
        "c_binary": "abc" + "\x00" * 13,
        "c_bit": "65",
        "c_char": "abc",
        "c_decimal": "123.4560",
        "c_enum": "a",
        "c_set": "a,b",
        "c_varbinary": "abc",
        "c_varchar": "abc",
        "id": "1",
    }
    message = {
        "id": 1,
        "database": "test",
        "table": "t",
        "pkNames": ["id"],
        "isDdl": False,
        "type": "INSERT",
        "es": 1,
        "ts": 1,
        "sql": "",
        "sqlType": {},
        "mysqlType": types,
        "data": [data],
        "old": None,
    }
    (event,) = _decode(message)
    assert event.after == {
        "c_binary": b"abc" + bytes(13),
        "c_bit": 65,
        "c_char": "abc",
        "c_decimal": Decimal("123.4560"),
        "c_enum": 1,
        "c_set": 3,
        "c_varbinary": b"abc",
        "c_varchar": "abc",
        "id": 1,
    }
    assert event.schema.column("c_decimal").type.sql() == "decimal(10,4)"
    assert event.schema.column("c_enum").type.enum_name(1) == "a"


def test_ticdc_unsigned_sql_type_promotion_matches_the_table() -> None:
    from ticdc_spark.codec.canal_json import java_sql_type

    cases = [
        ("tinyint", 127, -6),
        ("tinyint", 128, 5),
        ("smallint", 32767, 5),
        ("smallint", 32768, 4),
        ("mediumint", 16777215, 4),
        ("int", 2147483647, 4),
        ("int", 2147483648, -5),
        ("bigint", 2**63 - 1, -5),
        ("bigint", 2**63, 3),
        ("bigint", None, -5),
    ]
    for name, value, code in cases:
        assert java_sql_type(parse_column_type(name + " unsigned"), value) == code, (name, value)
    assert java_sql_type(parse_column_type("tinyint"), -128) == -6


def test_encoder_writes_ticdc_key_order_and_types() -> None:
    schema = TableSchema(
        "test",
        "tp_int",
        (
            Column("id", parse_column_type("int"), nullable=False),
            Column("c_u", parse_column_type("int(10) unsigned")),
        ),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    )
    row = RowChange(
        RowKind.UPDATE,
        schema,
        (1639633141221 << 18) + 7,
        before={"id": 2, "c_u": 1},
        after={"id": 2, "c_u": 4294967295},
    )
    encoder = make_encoder("canal-json", {"enable-tidb-extension": "true"})
    encoder.clock = lambda: 1639633142960  # type: ignore[attr-defined]
    (message,) = encoder.encode([row])
    assert message.key is None
    assert message.value == (
        b'{"id":0,"database":"test","table":"tp_int","pkNames":["id"],"isDdl":false,'
        b'"type":"UPDATE","es":1639633141221,"ts":1639633142960,"sql":"",'
        b'"sqlType":{"id":4,"c_u":-5},"mysqlType":{"id":"int","c_u":"int unsigned"},'
        b'"old":[{"id":"2","c_u":"1"}],"data":[{"id":"2","c_u":"4294967295"}],'
        b'"_tidb":{"commitTs":%d}}' % ((1639633141221 << 18) + 7)
    )


def test_content_compatible_writes_full_types_and_changed_old() -> None:
    schema = TableSchema(
        "test",
        "t",
        (
            Column("id", parse_column_type("int"), nullable=False),
            Column("e", parse_column_type("enum('a','b')")),
            Column("d", parse_column_type("datetime(3)")),
        ),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    )
    import datetime as dt

    when = dt.datetime(2020, 2, 20, 2, 20, 20)
    row = RowChange(
        RowKind.UPDATE,
        schema,
        1 << 18,
        before={"id": 1, "e": 1, "d": when},
        after={"id": 1, "e": 2, "d": when},
    )
    (message,) = make_encoder("canal-json", {"content-compatible": "true"}).encode([row])
    obj = orjson.loads(message.value)
    assert obj["mysqlType"] == {"id": "int(11)", "e": "enum('a','b')", "d": "datetime(3)"}
    assert obj["old"] == [{"e": "1"}]
    assert obj["data"] == [{"id": "1", "e": "2", "d": "2020-02-20 02:20:20.000"}]


def test_ddl_and_watermark_messages() -> None:
    encoder = make_encoder("canal-json", {"enable-tidb-extension": "true"})
    encoder.clock = lambda: 5  # type: ignore[attr-defined]
    ddl = DDLEvent(DDLType.CREATE_TABLE, "CREATE TABLE t (a int)", 3 << 18, "db", "t")
    (message,) = encoder.encode([ddl])
    assert message.route.value == "first-partition"
    assert message.value == (
        b'{"id":0,"database":"db","table":"t","pkNames":null,"isDdl":true,"type":"CREATE",'
        b'"es":3,"ts":5,"sql":"CREATE TABLE t (a int)","sqlType":null,"mysqlType":null,'
        b'"data":null,"old":null,"_tidb":{"commitTs":786432}}'
    )
    (mark,) = encoder.encode([Watermark(429918007904436226)])
    assert orjson.loads(mark.value)["_tidb"] == {"watermarkTs": 429918007904436226}
    assert make_encoder("canal-json").encode([Watermark(1)]) == []  # only with the extension


@pytest.mark.parametrize("kind", ["BOGUSUPDATE", "QUERY", "", None, 7])
def test_a_row_message_of_an_unknown_type_is_an_error_not_a_dropped_ddl(kind: object) -> None:
    """A message that is not a DDL ("isDdl": false) and names no row kind TiCDC or Canal
    writes is a dead letter: it used to be read as an empty DDL of Canal's QUERY kind and
    ignored, losing its rows without a trace."""
    import pyarrow as pa

    from ticdc_spark.errors import DecodeError
    from ticdc_spark.pipeline.changelog import ChangelogBuilder
    from ticdc_spark.spark.decode import decode_batches

    obj = {
        "id": 0, "database": "test", "table": "t", "pkNames": ["id"], "isDdl": False,
        "type": kind, "es": 1, "ts": 1, "sql": "", "sqlType": {"id": 4},
        "mysqlType": {"id": "int"}, "old": None, "data": [{"id": "1"}],
        "_tidb": {"commitTs": 1 << 18},
    }  # fmt: skip
    message = Message(None, orjson.dumps(obj), topic="cdc", partition=0, offset=9)
    decoder = make_decoder("canal-json", {"enable-tidb-extension": "true"})
    with pytest.raises(DecodeError, match=r"cdc/0@9.*unknown message type"):
        decoder.decode(message)
    with pytest.raises(DecodeError, match=r"unknown message type"):
        decoder.decode_into(message, ChangelogBuilder())
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.nulls(1, pa.binary()),
            "value": pa.array([message.value], pa.binary()),
            "topic": pa.array(["cdc"]),
            "partition": pa.array([0], pa.int32()),
            "offset": pa.array([9], pa.int64()),
        }
    )
    for compiled in (True, False):  # the Arrow scanner's path and the Python paths
        out = pa.Table.from_batches(
            list(decode_batches(iter([batch]), "canal-json", {"enable-tidb-extension": "true"},
                                compiled=compiled))
        )  # fmt: skip
        assert out.column("kind").to_pylist() == ["ERROR"]
        assert "unknown message type" in out.column("error")[0].as_py()
