"""The Avro protocol: TiCDC's schemas and values (its Go tests' exact outputs), round trips
over every type in both handling modes, tombstones, bad records as dead letters, and the
Confluent Schema Registry over real HTTP (auth, retries, refusals, secrets kept out)."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import examples
from strategies import values_of
from ticdc_spark.cli import main
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.avro import schema as avro_schema
from ticdc_spark.codec.avro.decoder import AvroDecoder
from ticdc_spark.codec.avro.dialect import dialect_for
from ticdc_spark.codec.avro.registry import Retries, SchemaRegistry, registry
from ticdc_spark.codec.avro.wire import frame
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.errors import ConfigError, DecodeError, EncodeError, RegistryError
from ticdc_spark.io.producer import CaptureStreamOutput, Producer
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.testing.registry_server import RegistryServer
from ticdc_spark.types import ColumnType as T

FIXTURES = Path(__file__).parent / "fixtures" / "avro"

# TiCDC's avroTestColumns (pkg/sink/codec/avro/avro_test.go): (name, type, value in TiCDC's
# test as our canonical value, the Avro datum TiCDC's columnToAvroData gives)
TICDC_COLUMNS: list[tuple[str, T, Any, Any]] = [
    ("tiny", T("tinyint"), 1, 1),
    ("short", T("smallint"), 1, 1),
    ("int24", T("mediumint"), 1, 1),
    ("long", T("int"), 1, 1),
    ("longlong", T("bigint"), 1, 1),
    ("tinyunsigned", T("tinyint", unsigned=True), 1, 1),
    ("shortunsigned", T("smallint", unsigned=True), 1, 1),
    ("int24unsigned", T("mediumint", unsigned=True), 1, 1),
    ("longunsigned", T("int", unsigned=True), 1, 1),
    ("longlongunsigned", T("bigint", unsigned=True), 1, 1),
    ("float", T("float"), 3.140000104904175, 3.140000104904175),
    ("double", T("double"), 3.14, 3.14),
    ("bit", T("bit"), 683, b"\x02\xab"),
    ("decimal", T("decimal"), Decimal("129012.1230000"), Decimal("129012")),
    ("tinytext", T("tinytext"), "hello world", "hello world"),
    ("mediumtext", T("mediumtext"), "hello world", "hello world"),
    ("text", T("text"), "hello world", "hello world"),
    ("longtext", T("longtext"), "hello world", "hello world"),
    ("varchar", T("varchar"), "hello world", "hello world"),
    ("varstring", T("varchar"), "hello world", "hello world"),
    ("string", T("char"), "hello world", "hello world"),
    ("tinyblob", T("tinyblob"), b"hello world", b"hello world"),
    ("mediumblob", T("mediumblob"), b"hello world", b"hello world"),
    ("blob", T("blob"), b"hello world", b"hello world"),
    ("longblob", T("longblob"), b"hello world", b"hello world"),
    ("varbinary", T("varbinary"), b"hello world", b"hello world"),
    ("varbinary1", T("varbinary"), b"hello world", b"hello world"),
    ("binary", T("binary"), b"hello world", b"hello world"),
    ("enum", T("enum", elements=("a", "b")), 1, "a"),
    ("set", T("set", elements=("a", "b")), 1, "a"),
    ("json", T("json"), '{"key": "value"}', '{"key": "value"}'),
    ("date", T("date"), dt.date(2000, 1, 1), "2000-01-01"),
    ("datetime", T("datetime"), dt.datetime(2015, 12, 20, 23, 58, 58), "2015-12-20 23:58:58"),
    ("timestamp", T("timestamp"), dt.datetime(1973, 12, 30, 15, 30), "1973-12-30 15:30:00"),
    ("time", T("time"), dt.timedelta(hours=23, minutes=59, seconds=59), "23:59:59"),
    ("year", T("year"), 1970, 1970),
]


def ticdc_table() -> TableSchema:
    """The table of TiCDC's TestRowToAvroSchema (newLargeEvent): the key ``id``, then each
    column and its nullable twin."""
    columns = [Column("id", T("int"), nullable=False)]
    for name, ctype, _, _ in TICDC_COLUMNS:
        columns += [Column(name, ctype, nullable=False), Column(name + "nullable", ctype)]
    primary = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    return TableSchema("testdb", "avroencode", tuple(columns), primary)


@pytest.mark.parametrize(
    ("extension", "fixture"),
    [(False, "tiflow_row_schema.json"), (True, "tiflow_row_schema_extension.json")],
)
def test_value_schema_is_ticdc_s(extension: bool, fixture: str) -> None:
    text = avro_schema.value_schema(ticdc_table(), "precise", "long", extension)
    expected = (FIXTURES / fixture).read_text().rstrip("\n")
    assert json.dumps(json.loads(text), indent=2) == expected  # order of keys included
    assert text == json.dumps(json.loads(text), separators=(",", ":"))  # compact, as Go's
    fastavro.parse_schema(json.loads(text))


@pytest.mark.parametrize(("name", "ctype", "value", "datum"), TICDC_COLUMNS)
def test_column_datum_is_ticdc_s(name: str, ctype: T, value: Any, datum: Any) -> None:
    encoded = dialect_for("precise", "long").encoder(ctype)(value)
    assert encoded == datum and type(encoded) is type(datum)


def test_string_handling_modes_as_ticdc() -> None:
    """TestColumnToAvroSchema/Data with decimal and bigint-unsigned handling ``string``."""
    dialect = dialect_for("string", "string")
    assert dialect.encoder(T("decimal"))(Decimal("129012.1230000")) == "129012.1230000"
    assert dialect.encoder(T("bigint", unsigned=True))(1) == "1"
    decimal = avro_schema.column_type_schema(T("decimal"), "string", "long")
    assert decimal == {"type": "string", "connect.parameters": {"tidb_type": "DECIMAL"}}
    unsigned = avro_schema.column_type_schema(T("bigint", unsigned=True), "precise", "string")
    assert unsigned == {"type": "string", "connect.parameters": {"tidb_type": "BIGINT UNSIGNED"}}


def test_names_sanitized_as_ticdc() -> None:
    """TestSanitizeName and TestGetAvroNamespace."""
    assert avro_schema.sanitize_name("normalColumnName123") == "normalColumnName123"
    assert avro_schema.sanitize_name("1ColumnNameStartWithNumber") == "_1ColumnNameStartWithNumber"
    assert avro_schema.sanitize_name("A.B") == "A_B"
    assert avro_schema.sanitize_name("columnNameWith中文") == "columnNameWith__"
    for namespace, database, expected in [
        ("normalNamespace", "normalSchema", "normalNamespace.normalSchema"),
        ("1Namespace", "1Schema", "_1Namespace._1Schema"),
        ("N-amespace", "S.chema", "N_amespace.S_chema"),
    ]:
        schema = TableSchema(database, "t", (Column("a", T("int")),))
        text = avro_schema.record_schema(
            schema, schema.columns, "precise", "long", False, namespace
        )
        assert json.loads(text)["namespace"] == expected


def test_enum_and_set_members_with_commas_survive() -> None:
    ctype = T("set", elements=("a,b", "c"))
    params = avro_schema.column_type_schema(ctype, "precise", "long")["connect.parameters"]
    assert params == {"allowed": "a\\,b,c", "tidb_type": "SET"}
    back = avro_schema.column_type_of({"type": "string", "connect.parameters": params})
    assert back.elements == ("a,b", "c")


# -- round trips -------------------------------------------------------------------------------

ALL_TYPES = TableSchema(
    "shop",
    "all_types",
    (
        Column("id", T("bigint"), nullable=False),
        *(Column(f"c_{n}", t) for n, t, _, _ in TICDC_COLUMNS),
        Column("c_decimal_scaled", T("decimal", length=20, decimal=6)),
        Column("c_datetime6", T("datetime", decimal=6)),
        Column("c_time3", T("time", decimal=3)),
        Column("c_bit64", T("bit", length=64)),
        Column("c_enum3", T("enum", elements=("x", "y", "z"))),
    ),
    (Index("PRIMARY", ("id",), primary=True, unique=True),),
)


@st.composite
def all_type_rows(draw: st.DrawFn) -> dict[str, Any]:
    image: dict[str, Any] = {"id": draw(st.integers(-(2**63), 2**63 - 1))}
    for column in ALL_TYPES.columns[1:]:
        image[column.name] = draw(st.none() | values_of(column.type))
    return image


@pytest.mark.parametrize("decimal", ["precise", "string"])
@pytest.mark.parametrize("bigint", ["long", "string"])
@examples(60)
@given(image=all_type_rows(), kind=st.sampled_from([RowKind.INSERT, RowKind.UPDATE]))
def test_every_type_round_trips(decimal: str, bigint: str, image: dict, kind: RowKind) -> None:
    options = {
        "schema-registry": "mock://round-trip",
        "enable-tidb-extension": "true",
        "avro-decimal-handling-mode": decimal,
        "avro-bigint-unsigned-handling-mode": bigint,
    }
    ts = compose_ts(1_700_000_000_123, 7)
    before = image if kind is RowKind.UPDATE else None
    [message] = make_encoder("avro", options).encode(
        [RowChange(kind, ALL_TYPES, ts, before, image)]
    )
    [row] = make_decoder("avro", options).decode(message)
    assert isinstance(row, RowChange)
    key = {"id": image["id"]} if kind is RowKind.UPDATE else None
    assert (row.kind, row.commit_ts, row.before, row.database, row.table) == (
        kind,
        ts,
        key,
        "shop",
        "all_types",
    )
    assert row.after == image
    for sent, got in zip(ALL_TYPES.columns, row.schema.columns, strict=True):
        if decimal == "string" and sent.type.name == "decimal":  # precision, scale not sent
            assert got.type == T("decimal")
            continue
        assert avro_schema.avro_type_view(sent.type) == avro_schema.avro_type_view(got.type)
    assert row.schema.handle_key == ("id",)


def test_bigint_unsigned_above_int64_in_long_mode_reads_back() -> None:
    options = {"schema-registry": "mock://u64", "enable-tidb-extension": "true"}
    schema = TableSchema(
        "d",
        "t",
        (Column("id", T("bigint", unsigned=True), nullable=False),),
        (Index("PRIMARY", ("id",), primary=True, unique=True),),
    )
    [message] = make_encoder("avro", options).encode(
        [RowChange(RowKind.INSERT, schema, 1 << 18, None, {"id": 2**64 - 1})]
    )
    body = message.value[5:]  # the long is the signed reinterpretation, as Go's cast writes it
    parsed = fastavro.parse_schema(
        json.loads(registry("mock://u64").schema_text(int.from_bytes(message.value[1:5], "big")))
    )
    assert fastavro.schemaless_reader(io.BytesIO(body), parsed, None)["id"] == -1
    [row] = make_decoder("avro", options).decode(message)
    assert row.after == {"id": 2**64 - 1}


def test_without_extension_rows_are_upserts_without_commit_ts() -> None:
    options = {"schema-registry": "mock://plain"}
    row = RowChange(RowKind.UPDATE, ALL_TYPES, 99 << 18, {"id": 1}, _full({"id": 1}))
    [message] = make_encoder("avro", options).encode([row])
    [back] = make_decoder("avro", options).decode(message)
    assert (back.kind, back.commit_ts) == (RowKind.INSERT, 0)
    value_schema = json.loads(
        registry("mock://plain").schema_text(int.from_bytes(message.value[1:5], "big"))
    )
    assert not {f["name"] for f in value_schema["fields"]} & {"_tidb_op", "_tidb_commit_ts"}


def _full(image: dict[str, Any]) -> dict[str, Any]:
    return {c.name: image.get(c.name) for c in ALL_TYPES.columns}


def test_delete_is_a_tombstone_with_the_key() -> None:
    options = {"schema-registry": "mock://tomb", "enable-tidb-extension": "true"}
    encoder, decoder = make_encoder("avro", options), make_decoder("avro", options)
    insert = RowChange(RowKind.INSERT, ALL_TYPES, 5 << 18, None, _full({"id": 7}))
    delete = RowChange(RowKind.DELETE, ALL_TYPES, 6 << 18, _full({"id": 7}), None)
    messages = encoder.encode([insert, delete])
    assert messages[1].value is None and messages[1].key == messages[0].key
    assert messages[0].topic == "shop_all_types"
    back = [e for m in messages for e in decoder.decode(m)]
    assert back[1].kind is RowKind.DELETE
    assert (back[1].before, back[1].commit_ts) == ({"id": 7}, 0)
    assert back[1].schema == back[0].schema  # the table's columns as its last value schema


def test_a_restored_decoder_names_tombstones_as_it_did_before() -> None:
    """(The decode stage restores the decoder before decoding a batch again one record at a
    time, codec.base.StatefulDecoder.)  A tombstone names its table's columns by the newest
    value schema of its rows before it: replayed after a restore, a tombstone ahead of its
    table's next schema names the older one again, as it did the first time, and one after
    it the newer one."""
    options = {"schema-registry": "mock://restore", "enable-tidb-extension": "true"}
    encoder, decoder = make_encoder("avro", options), make_decoder("avro", options)
    key = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    old = TableSchema("d", "t", (Column("id", T("int"), nullable=False),), key)
    new = TableSchema("d", "t", (*old.columns, Column("v", T("int"))), key)
    first, tombstone, later = encoder.encode(
        [
            RowChange(RowKind.INSERT, old, 5 << 18, None, {"id": 1}),
            RowChange(RowKind.DELETE, old, 6 << 18, {"id": 1}, None),
            RowChange(RowKind.INSERT, new, 7 << 18, None, {"id": 2, "v": 3}),
        ]
    )
    assert isinstance(decoder, AvroDecoder)

    def columns_named() -> list[tuple[str, ...]]:
        events = [e for m in (tombstone, later, tombstone) for e in decoder.decode(m)]
        return [tuple(c.name for c in e.schema.columns) for e in events]

    decoder.decode(first)
    saved = decoder.snapshot()
    assert columns_named() == [("id",), ("id", "v"), ("id", "v")]
    decoder.restore(saved)
    assert decoder.known_plan(first.value, first.key) is not None  # (made before: kept)
    assert decoder.known_plan(later.value, later.key) is None  # (made since: planned again)
    assert columns_named() == [("id",), ("id", "v"), ("id", "v")]
    assert columns_named()[0] == ("id", "v")  # (without a restore: the newer one)
    decoder.decode(first)  # (an older schema's row does not take the table back)
    assert columns_named()[0] == ("id", "v")


def test_delete_of_a_table_without_key_is_refused() -> None:
    schema = TableSchema("d", "nokey", (Column("a", T("int")),))
    encoder = make_encoder("avro", {"schema-registry": "mock://nokey"})
    with pytest.raises(EncodeError, match="no handle key"):
        encoder.encode([RowChange(RowKind.DELETE, schema, 1, {"a": 1}, None)])


def test_an_unsigned_bigint_past_64_bits_is_refused_not_wrapped() -> None:
    primary = (Index("PRIMARY", ("id",), primary=True, unique=True),)
    column = Column("id", T("bigint", unsigned=True), nullable=False)
    schema = TableSchema("d", "u", (column,), primary)
    encoder = make_encoder("avro", {"schema-registry": "mock://u64"})
    (message,) = encoder.encode([RowChange(RowKind.INSERT, schema, 1, None, {"id": 2**64 - 1})])
    assert message.value
    with pytest.raises(EncodeError):  # (wrapped, 2**64 + 5 would read back as 5)
        encoder.encode([RowChange(RowKind.INSERT, schema, 2, None, {"id": 2**64 + 5})])


def test_ddl_and_watermarks_make_no_messages() -> None:
    from ticdc_spark.model import DDLEvent, DDLType, Watermark

    encoder = make_encoder("avro", {"schema-registry": "mock://none"})
    assert (
        encoder.encode([Watermark(5), DDLEvent(DDLType.CREATE_TABLE, "create", 5, "d", "t")]) == []
    )


def test_topic_rule_without_schema_and_table_is_rejected_up_front() -> None:
    encoder = make_encoder("avro", {"schema-registry": "mock://rule"})
    with pytest.raises(ConfigError, match=r"\{schema\} and \{table\}"):
        Producer(
            encoder,
            CaptureStreamOutput(io.BytesIO()),
            router=TopicRouter("cdc_{schema}"),
            dispatcher=make_dispatcher("default"),
        )
    Producer(
        encoder,
        CaptureStreamOutput(io.BytesIO()),
        router=TopicRouter("cdc.{schema}.{table}"),
        dispatcher=make_dispatcher("default"),
    )
    [message] = encoder.encode([RowChange(RowKind.INSERT, ALL_TYPES, 1, None, _full({"id": 1}))])
    assert message.topic == "cdc_shop_all_types"  # subjects: the topic's dots made "_"


def test_codecs_without_a_registry_say_they_need_one() -> None:
    decoder, encoder = make_decoder("avro", {}), make_encoder("avro", {})
    with pytest.raises(RegistryError, match="needs a schema registry"):
        decoder.decode(Message(None, b"\x00\x00\x00\x00\x01\x02", topic="t", offset=1))
    with pytest.raises(RegistryError, match="needs a schema registry"):
        encoder.encode([RowChange(RowKind.INSERT, ALL_TYPES, 1, None, _full({"id": 1}))])


# -- bad records -------------------------------------------------------------------------------


def _one_message(url: str) -> Message:
    options = {"schema-registry": url, "enable-tidb-extension": "true"}
    [message] = make_encoder("avro", options).encode(
        [RowChange(RowKind.INSERT, ALL_TYPES, 1 << 18, None, _full({"id": 1, "c_text": "x" * 40}))]
    )
    message.topic, message.partition, message.offset = "shop_all_types", 2, 41
    return message


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda v: b"\x01" + v[1:], "not the Confluent magic"),
        (lambda v: v[:3], "at least 5"),
        (lambda v: v[:1] + (9999).to_bytes(4, "big") + v[5:], "no schema id 9999"),
        (lambda v: v[:-20], "truncated"),
        (lambda v: v + b"\x00", "after its record"),
    ],
    ids=["bad-magic", "short-header", "unknown-id", "truncated-body", "trailing-bytes"],
)
def test_bad_value_is_a_decode_error_naming_the_record(mutate: Any, reason: str) -> None:
    message = _one_message("mock://bad")
    message.value = mutate(message.value)
    with pytest.raises(DecodeError, match=reason) as caught:
        make_decoder("avro", {"schema-registry": "mock://bad"}).decode(message)
    assert "shop_all_types/2@41" in str(caught.value)


@examples(200)
@given(data=st.data())
def test_fuzzed_bodies_never_crash(data: st.DataObject) -> None:
    message = _one_message("mock://fuzz")
    value = bytearray(message.value)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(5, len(value) - 1))
        value[at] = data.draw(st.integers(0, 255))
    message.value = bytes(value[: data.draw(st.integers(5, len(value)))])
    try:
        make_decoder("avro", {"schema-registry": "mock://fuzz"}).decode(message)
    except DecodeError as exc:
        assert "shop_all_types/2@41" in str(exc)


# -- the registry over HTTP --------------------------------------------------------------------

FAST = Retries(max_retries=3, wait_ms=5, max_wait_ms=20)


def test_registry_basic_auth_and_secret_never_shown() -> None:
    with RegistryServer(auth=("ci user", "s3cr@t:pw")) as server:
        url = server.url.replace("http://", "http://ci%20user:s3cr%40t%3Apw@")
        client = SchemaRegistry(url, FAST)
        text = avro_schema.value_schema(ALL_TYPES, "precise", "long", True)
        schema_id = client.register("t-value", text)
        assert SchemaRegistry(url, FAST).schema_text(schema_id) == text
        wrong = SchemaRegistry(url.replace("s3cr%40t", "guess"), FAST)
        with pytest.raises(RegistryError, match="HTTP 401") as caught:
            wrong.schema_text(schema_id)
        assert "guess" not in str(caught.value) and "s3cr" not in client.url
        server.fail(10)
        with pytest.raises(RegistryError, match="unavailable") as down:
            SchemaRegistry(url, FAST).schema_text(schema_id)
        assert "s3cr" not in str(down.value) and "ci user" not in str(down.value)


@pytest.mark.parametrize("password", ["s3cr/t", "s3cr#t", "s3cr?t"])
def test_a_password_left_unencoded_is_still_the_password(password: str) -> None:
    """A base64 password holds "/": left unencoded in the URL, it is still sent as the
    password, and errors never show it (it was taken for the host and printed)."""
    with RegistryServer(auth=("ci", password)) as server:
        url = server.url.replace("http://", f"http://ci:{password}@")
        client = SchemaRegistry(url, FAST)
        assert client.register("t-value", '"string"') > 0 and "s3cr" not in client.url
        server.fail(10)
        with pytest.raises(RegistryError, match="unavailable") as down:
            SchemaRegistry(url, FAST).schema_text(999)
        assert "s3cr" not in str(down.value)
    with pytest.raises(RegistryError, match="unreachable") as gone:
        SchemaRegistry(url, Retries(max_retries=0)).schema_text(999)
    assert "s3cr" not in str(gone.value)
    with pytest.raises(ConfigError, match="Port could not be cast") as port:
        SchemaRegistry(f"http://ci:{password}@127.0.0.1:http", FAST)
    assert "s3cr" not in str(port.value)


def test_ids_are_cached_no_call_per_message() -> None:
    with RegistryServer() as server:
        options = {"schema-registry": server.url, "enable-tidb-extension": "true"}
        rows = [
            RowChange(RowKind.INSERT, ALL_TYPES, i << 18, None, _full({"id": i})) for i in range(50)
        ]
        messages = make_encoder("avro", options).encode(rows)
        registered = server.requests
        assert registered == 2  # the key schema and the value schema, once
        decoded = [e for m in messages for e in make_decoder("avro", options).decode(m)]
        assert len(decoded) == 50 and server.requests - registered <= 2


def test_registry_down_for_a_while_loses_nothing() -> None:
    with RegistryServer() as server:
        message = _one_message(server.url)
        decoder = make_decoder("avro", {"schema-registry": server.url})
        decoder.registry = SchemaRegistry(server.url, FAST)  # a fresh client: nothing cached
        server.fail(3)  # within the client's retries: the record decodes
        [row] = decoder.decode(message)
        assert row.after["id"] == 1
        other = make_decoder("avro", {"schema-registry": server.url})
        other.registry = SchemaRegistry(server.url, FAST)
        server.fail(50)  # stays down: a RegistryError (not a dead letter), the record unread
        with pytest.raises(RegistryError, match="unavailable looking up schema id"):
            other.decode(message)


def test_incompatible_schema_stops_the_encoder_naming_subject() -> None:
    with RegistryServer() as server:
        options = {"schema-registry": server.url}
        encoder = make_encoder("avro", options)
        encoder.encode([RowChange(RowKind.INSERT, ALL_TYPES, 1, None, _full({"id": 1}))])
        wider = TableSchema(
            ALL_TYPES.database,
            ALL_TYPES.table,
            (*ALL_TYPES.columns, Column("added", T("int"), nullable=False)),
            ALL_TYPES.indexes,
        )
        image = {**_full({"id": 2}), "added": 5}
        with pytest.raises(RegistryError, match=r"'shop_all_types-value' as incompatible.*added"):
            encoder.encode([RowChange(RowKind.INSERT, wider, 2, None, image)])


def test_cli_decodes_a_capture_of_key_and_value(tmp_path: Path, capsys: Any) -> None:
    with RegistryServer() as server:
        options = {"schema-registry": server.url, "enable-tidb-extension": "true"}
        encoder = make_encoder("avro", options)
        rows = [
            RowChange(RowKind.INSERT, ALL_TYPES, 10 << 18, None, _full({"id": 1, "c_enum": 2})),
            RowChange(RowKind.DELETE, ALL_TYPES, 11 << 18, _full({"id": 1}), None),
        ]
        lines = []
        for offset, m in enumerate(encoder.encode(rows)):
            lines.append(
                orjson.dumps(
                    {
                        "topic": m.topic,
                        "partition": 0,
                        "offset": offset,
                        "timestamp": None,
                        "key": base64.b64encode(m.key).decode(),
                        "value": base64.b64encode(m.value).decode() if m.value else None,
                    }
                )
            )
        capture = tmp_path / "capture.jsonl"
        capture.write_bytes(b"\n".join(lines) + b"\n")
        code = main(
            [
                "decode",
                "-p",
                "avro",
                "--schema-registry",
                server.url,
                "--option",
                "enable-tidb-extension=true",
                str(capture),
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        events = [orjson.loads(line) for line in out.splitlines()]
        assert [e["type"] for e in events] == ["INSERT", "DELETE"]
        assert events[0]["after"]["c_enum"] == "2" and events[1]["before"] == {"id": "1"}
        assert events[0]["pk"] == ["id"]
        server.__exit__()
        code = main(
            ["decode", "-p", "avro", "--schema-registry", "http://127.0.0.1:9", str(capture)]
        )
        assert code == 1 and "unreachable" in capsys.readouterr().err


def test_value_with_unknown_id_then_valid_ones_in_order() -> None:
    message = _one_message("mock://order")
    good = frame(int.from_bytes(message.value[1:5], "big"), message.value[5:])
    assert good == message.value
