"""Open Protocol encoder: TiCDC's exact bytes, batching limits, large-message handling."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from pathlib import Path

import orjson
import pytest

from ticdc_spark.codec import Message, Route, make_decoder, make_encoder
from ticdc_spark.errors import ConfigError, EncodeError
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
from ticdc_spark.types import ColumnType, parse_column_type

TS = 417318403368288260  # an 18-digit TSO, as in TiCDC's size test


def _schema() -> TableSchema:
    return TableSchema(
        "test",
        "t",
        (
            Column("a", ColumnType("varchar", length=10), nullable=False),
            Column("b", ColumnType("varchar", length=10)),
        ),
        (Index("PRIMARY", ("a",), primary=True, unique=True),),
    )


def _insert(a: str = "aa", b: str = "bb", ts: int = TS) -> RowChange:
    return RowChange(RowKind.INSERT, _schema(), ts, after={"a": a, "b": b})


def _entries(data: bytes, start: int) -> list[bytes]:
    out, pos = [], start
    while pos < len(data):
        (length,) = struct.unpack_from(">Q", data, pos)
        out.append(data[pos + 8 : pos + 8 + length])
        pos += 8 + length
    return out


def test_row_bytes_match_ticdc() -> None:
    (message,) = make_encoder("open-protocol").encode([_insert()])
    assert message.route is Route.DISPATCH and message.rows == 1
    assert message.key[:8] == struct.pack(">Q", 1)
    assert _entries(message.key, 8) == [b'{"ts":%d,"scm":"test","tbl":"t","t":1}' % TS]
    assert _entries(message.value, 0) == [
        b'{"u":{"a":{"t":15,"h":true,"f":10,"v":"aa"},"b":{"t":15,"f":64,"v":"bb"}}}'
    ]
    # TiCDC's TestMaxMessageBytes: this row is exactly 188 bytes by its count.
    assert (
        len(_entries(message.key, 8)[0]) + len(_entries(message.value, 0)[0]) + 36 + 16 + 8 == 188
    )


def test_max_message_bytes_is_inclusive_and_splits_batches() -> None:
    encoder = make_encoder("open-protocol", {"max-message-bytes": "188"})
    messages = encoder.encode([_insert(), _insert(), _insert()])
    assert [m.rows for m in messages] == [1, 1, 1]
    with pytest.raises(EncodeError, match="over max-message-bytes=187"):
        make_encoder("open-protocol", {"max-message-bytes": "187"}).encode([_insert()])


def test_max_batch_size_splits_batches() -> None:
    encoder = make_encoder("open-protocol", {"max-batch-size": "16"})
    messages = encoder.encode([_insert(a=str(i)) for i in range(40)])
    assert [m.rows for m in messages] == [16, 16, 8]
    decoded = [e.after["a"] for m in messages for e in make_decoder("open-protocol").decode(m)]
    assert decoded == [str(i) for i in range(40)]


def test_ddl_and_resolved_are_alone_and_broadcast() -> None:
    ddl = DDLEvent(
        DDLType.CREATE_TABLE, "CREATE TABLE test.t (a varchar(10) primary key)", TS, "test", "t"
    )
    messages = make_encoder("open-protocol").encode([_insert(), ddl, _insert(), Watermark(TS)])
    assert [m.route for m in messages] == [
        Route.DISPATCH,
        Route.ALL_PARTITIONS,
        Route.DISPATCH,
        Route.ALL_TOPICS,
    ]
    assert _entries(messages[1].value, 0) == [
        b'{"q":"CREATE TABLE test.t (a varchar(10) primary key)","t":3}'
    ]
    assert messages[3].key == struct.pack(">QQ", 1, 31) + b'{"ts":%d,"t":3}' % TS
    assert messages[3].value == bytes(8)


def test_schema_level_ddl_leaves_out_the_table() -> None:
    ddl = DDLEvent(DDLType.CREATE_SCHEMA, "CREATE DATABASE d", TS, "d", "")
    (message,) = make_encoder("open-protocol").encode([ddl])
    assert _entries(message.key, 8) == [b'{"ts":%d,"scm":"d","t":2}' % TS]


def test_values_of_every_type_are_written_like_ticdc() -> None:
    columns = {
        "i": ("int", 5),
        "u": ("bigint unsigned", 18446744073709551615),
        "f": ("float", 0.5),
        "d": ("double", 1e21),
        "dec": ("decimal(10,4)", Decimal("129012.1230")),
        "dt": ("datetime(3)", dt.datetime(2015, 12, 20, 23, 58, 58, 120000)),
        "t": ("time", dt.timedelta(hours=-838)),
        "y": ("year", 1970),
        "e": ("enum('a','b')", 1),
        "s": ("set('a','b')", 3),
        "bit": ("bit(7)", 81),
        "j": ("json", '{"key1": "value1"}'),
        "vb": ("varbinary(16)", b"\x89PNG\r\n\x1a\n"),
        "tx": ("text", "测试text"),
        "bl": ("blob", "测试text".encode()),
        "c": ("char(4)", "<a&>"),
        "n": ("int", None),
    }
    schema = TableSchema(
        "s", "t", tuple(Column(n, parse_column_type(t)) for n, (t, _) in columns.items())
    )
    row = RowChange(RowKind.INSERT, schema, TS, after={n: v for n, (_, v) in columns.items()})
    (message,) = make_encoder("open-protocol").encode([row])
    (value,) = _entries(message.value, 0)
    got = dict(orjson.loads(value)["u"].items())
    assert list(orjson.loads(value)["u"]) == sorted(columns)  # bytewise name order
    wire = {n: (c["t"], c["f"], c["v"]) for n, c in got.items()}
    assert wire == {
        "i": (3, 65, 5),
        "u": (8, 193, 18446744073709551615),
        "f": (4, 65, 0.5),
        "d": (5, 65, 1e21),
        "dec": (246, 65, "129012.1230"),
        "dt": (12, 65, "2015-12-20 23:58:58.120"),
        "t": (11, 65, "-838:00:00"),
        "y": (13, 193, 1970),
        "e": (247, 64, 1),
        "s": (248, 64, 3),
        "bit": (16, 193, 81),
        "j": (245, 65, '{"key1": "value1"}'),
        "vb": (15, 65, "\\x89PNG\\r\\n\\x1a\\n"),
        "tx": (252, 64, "5rWL6K+VdGV4dA=="),
        "bl": (252, 65, "5rWL6K+VdGV4dA=="),
        "c": (254, 64, "<a&>"),
        "n": (3, 65, None),
    }
    assert b'"v":1e+21' in value and b'"v":"\\u003ca\\u0026\\u003e"' in value
    (back,) = make_decoder("open-protocol").decode(message)
    assert back.after == row.after


def test_update_old_value_options() -> None:
    schema = _schema()
    update = RowChange(
        RowKind.UPDATE, schema, TS, before={"a": "aa", "b": "x"}, after={"a": "aa", "b": "y"}
    )
    delete = RowChange(RowKind.DELETE, schema, TS, before={"a": "aa", "b": "y"})

    def value_of(options: dict, row: RowChange) -> dict:
        (message,) = make_encoder("open-protocol", options).encode([row])
        return orjson.loads(_entries(message.value, 0)[0])

    assert set(value_of({}, update)) == {"u", "p"}
    assert set(value_of({"output-old-value": "false"}, update)) == {"u"}
    assert set(value_of({"only-output-updated-columns": "true"}, update)["p"]) == {"b"}
    assert set(value_of({"delete-only-output-handle-key-columns": "true"}, delete)["d"]) == {"a"}
    assert set(value_of({"output-old-value": "false"}, delete)["d"]) == {"a", "b"}


def test_partition_id_goes_into_ptn() -> None:
    row = _insert()
    row.partition_id = 123
    (message,) = make_encoder("open-protocol").encode([row])
    assert _entries(message.key, 8) == [b'{"ts":%d,"scm":"test","tbl":"t","ptn":123,"t":1}' % TS]
    assert make_decoder("open-protocol").decode(message)[0].partition_id == 123


def test_handle_key_only_for_large_rows() -> None:
    options = {"max-message-bytes": "200", "large-message-handle-option": "handle-key-only"}
    big = _insert(b="x" * 500)
    (message,) = make_encoder("open-protocol", options).encode([big])
    assert b'"ohk":true' in message.key
    (event,) = make_decoder("open-protocol").decode(message)
    assert event.handle_key_only and event.after == {"a": "aa"}


def test_claim_check_round_trip(tmp_path: Path) -> None:
    options = {
        "max-message-bytes": "400",
        "large-message-handle-option": "claim-check",
        "claim-check-storage-uri": f"file://{tmp_path}",
    }
    big = _insert(b="x" * 900)
    (message,) = make_encoder("open-protocol", options).encode([big])
    assert b'"ccl":"file://' in message.key and len(list(tmp_path.iterdir())) == 1
    (event,) = make_decoder("open-protocol", options).decode(message)
    assert event.after == big.after and not event.handle_key_only


def test_claim_check_needs_a_storage_uri() -> None:
    with pytest.raises(ConfigError, match="claim-check-storage-uri"):
        make_encoder("open-protocol", {"large-message-handle-option": "claim-check"})


@pytest.mark.parametrize("method", ["snappy", "lz4"])
def test_compression_round_trip(method: str) -> None:
    options = {"large-message-handle-compression": method}
    rows = [_insert(a=str(i), b="y" * 200) for i in range(5)]
    messages = make_encoder("open-protocol", options).encode(rows)
    plain = make_encoder("open-protocol").encode(rows)
    assert sum(len(m.value) for m in messages) < sum(len(m.value) for m in plain)
    decoded = [e for m in messages for e in make_decoder("open-protocol", options).decode(m)]
    assert [e.after for e in decoded] == [r.after for r in rows]


def test_bootstrap_events_are_not_sent() -> None:
    from ticdc_spark.model import Bootstrap

    assert make_encoder("open-protocol").encode([Bootstrap(_schema())]) == []


def test_message_without_key_is_a_decode_error() -> None:
    from ticdc_spark.errors import DecodeError

    with pytest.raises(DecodeError, match="needs a key"):
        make_decoder("open-protocol").decode(Message(None, b"", topic="t", partition=0, offset=0))


def test_a_negative_zero_keeps_its_sign() -> None:
    """Go writes a DOUBLE or FLOAT -0 as the JSON number -0, which orjson reads as the int 0."""
    import math

    from ticdc_spark.pipeline.changelog import ChangelogBuilder

    schema = TableSchema(
        "test",
        "t",
        (
            Column("id", ColumnType("bigint"), nullable=False),
            Column("d", ColumnType("double")),
            Column("f", ColumnType("float")),
            Column("s", ColumnType("varchar", length=10)),
        ),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    ).with_derived_flags()
    row = RowChange(RowKind.INSERT, schema, TS, after={"id": 0, "d": -0.0, "f": -0.0, "s": ":-0"})
    (message,) = make_encoder("open-protocol", {}).encode([row])
    assert b'"v":-0}' in message.value
    (got,) = make_decoder("open-protocol", {}).decode(message)
    assert [math.copysign(1.0, got.after[c]) for c in "df"] == [-1.0, -1.0]
    assert got.after["id"] == 0 and type(got.after["id"]) is int and got.after["s"] == ":-0"
    builder = ChangelogBuilder()
    make_decoder("open-protocol", {}).decode_into(message, builder)
    (image,) = builder.to_batch().column("after").to_pylist()
    assert dict(image)["d"] in ("-0", "-0.0") and dict(image)["f"] in ("-0", "-0.0")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("type_name", ["double", "float"])
def test_a_value_json_has_no_number_for_is_an_encode_error(value: float, type_name: str) -> None:
    """Open Protocol writes FLOAT/DOUBLE as JSON numbers: NaN and infinities have none (Go's
    encoding/json refuses them; this wrote `NaN` and `+Infe`)."""
    schema = TableSchema(
        "test",
        "t",
        (Column("id", ColumnType("bigint"), nullable=False), Column("x", ColumnType(type_name))),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    ).with_derived_flags()
    row = RowChange(RowKind.INSERT, schema, TS, after={"id": 1, "x": value})
    with pytest.raises(
        EncodeError,
        match=r"INSERT of test\.\w+ at ts \d+: column 'x' .* holds finite numbers.*JSON number",
    ):
        make_encoder("open-protocol", {}).encode([row])
