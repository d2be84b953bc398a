"""Table filters in the decoders, the decode stage's batch paths and the producer.

A filtered table's messages are not decoded at all: a genuine Alibaba Canal capture holding a
malformed row of a filtered-out table decodes cleanly with the filter (and fails without it);
the same for Open Protocol key entries, whose values are never read.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pytest

from pipeline_helpers import ListOutput, canal_message
from test_canal_json_spec import CANAL_DDL, CANAL_DELETE_NO_PK, CANAL_MULTI_UPDATE, CANAL_UPDATE
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.canal_json import native_scanner
from ticdc_spark.codec.open_protocol.wire import frame_key, frame_values
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.producer import Producer
from ticdc_spark.model import DDLEvent, RowChange, Watermark
from ticdc_spark.pipeline.changelog import ERROR, arrow_schema
from ticdc_spark.spark.decode import decode_batches
from ticdc_spark.testing.workload import Workload

RULES = ["*.*", "!canal_demo.tmp_*"]

# Alibaba Canal's spelling of a row of a scratch table (filtered out by RULES, whatever the
# case of its name), its int column holding text and another an object.
MALFORMED = (
    CANAL_UPDATE.replace('"canal_demo_user_test"', '"TMP_scratch"')
    .replace('"id":"10"', '"id":"ten"')
    .replace('"is_active":"0"}]', '"is_active":{"x":0}}]')
)
# ... and a TiCDC-style one of the same table whose mysqlType no plan accepts.
MALFORMED_TYPES = canal_message(
    5 << 18, database="canal_demo", table="tmp_x", mysqlType={"id": "int(", "v": "varchar(10)"}
)
WATERMARK = orjson.dumps(
    {"id": 0, "database": "", "table": "", "isDdl": False, "type": "TIDB_WATERMARK", "es": 1,
     "ts": 1, "sql": "", "data": None, "_tidb": {"watermarkTs": 7 << 18}}
)  # fmt: skip

CAPTURE = [
    CANAL_UPDATE.encode(),
    MALFORMED.encode(),
    CANAL_MULTI_UPDATE.encode(),
    CANAL_DDL.replace('"canal_demo_user_test"', '"tmp_log"').encode(),  # filtered DDL
    MALFORMED_TYPES,
    CANAL_DELETE_NO_PK.encode(),
    WATERMARK,
]


def _decode_all(values: list[bytes], protocol: str, table_filter: TableFilter | None) -> list:
    decoder = make_decoder(protocol, table_filter=table_filter)
    events = []
    for offset, value in enumerate(values):
        events += decoder.decode(Message(None, value, topic="cdc", partition=0, offset=offset))
    return events


def test_a_malformed_row_of_a_filtered_table_is_never_decoded() -> None:
    with pytest.raises(DecodeError, match="cdc/0@1"):
        _decode_all(CAPTURE, "canal-json", None)
    events = _decode_all(CAPTURE, "canal-json", TableFilter(RULES))
    rows = [e for e in events if isinstance(e, RowChange)]
    assert [(e.database, e.table) for e in rows] == [("canal_demo", "canal_demo_user_test")] * 3 + [
        ("test", "test_canal")
    ] * 2
    assert [type(e) for e in events if not isinstance(e, RowChange)] == [Watermark]


def test_only_what_the_rules_keep() -> None:
    events = _decode_all(CAPTURE, "canal-json", TableFilter(["TEST.*"]))
    assert [(type(e).__name__, getattr(e, "table", "")) for e in events] == [
        ("RowChange", "test_canal"),
        ("RowChange", "test_canal"),
        ("Watermark", ""),
    ]
    # a malformed row of a table the rules keep still fails: the filter hides nothing else
    with pytest.raises(DecodeError, match="cdc/0@1"):
        _decode_all(CAPTURE, "canal-json", TableFilter(["canal_demo.tmp_*"]))


def _batch(values: list[bytes]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.nulls(len(values), pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["cdc"] * len(values), pa.string()),
            "partition": pa.array([0] * len(values), pa.int32()),
            "offset": pa.array(range(len(values)), pa.int64()),
        }
    )


def _changelog(values: list[bytes], compiled: bool, rules: list[str] | None) -> list[dict]:
    table_filter = None if rules is None else TableFilter(rules)
    batches = decode_batches(
        iter([_batch(values)]), "canal-json", {}, compiled=compiled, table_filter=table_filter
    )
    return pa.Table.from_batches(list(batches), schema=arrow_schema()).to_pylist()


@pytest.mark.parametrize("compiled", [True, False], ids=["arrow", "batch"])
def test_the_batch_paths_drop_filtered_tables(compiled: bool) -> None:
    if compiled and not native_scanner():
        pytest.skip("built without a C compiler")
    # A filtered table's well-formed messages repeated (a shape the paths would recall), the
    # malformed ones, and kept tables around them.
    scratch = canal_message(3 << 18, database="canal_demo", table="tmp_1")
    kept = [canal_message((10 + i) << 18, data=[{"id": str(i), "v": "x"}]) for i in range(4)]
    values = [kept[0], scratch, *CAPTURE, scratch, kept[1], scratch, kept[2], scratch, kept[3]]
    unfiltered = _changelog(values, compiled, None)
    assert [r["offset"] for r in unfiltered if r["kind"] == ERROR] == [3, 6]
    rows = _changelog(values, compiled, RULES)
    assert not [r for r in rows if r["kind"] == ERROR]
    assert not [r for r in rows if (r["table"] or "").lower().startswith("tmp")]
    expected = [
        r for r in unfiltered if r["kind"] != ERROR and not (r["table"] or "").startswith("tmp")
    ]
    assert rows == expected
    assert rows == _changelog(values, not compiled, RULES)


# --------------------------------------------------------------------------------------------
# Open Protocol: per key entry, from scm/tbl


def _key(t: int, ts: int, database: str = "", table: str = "") -> bytes:
    key = {"ts": ts, "t": t}
    if database or table:
        key |= {"scm": database, "tbl": table}
    return orjson.dumps(key)


def _row(value: object) -> bytes:
    return orjson.dumps({"u": {"id": {"t": 3, "f": 11, "v": value}}})


def test_open_protocol_entries_of_filtered_tables_are_not_decoded() -> None:
    message = (
        frame_key(
            [
                _key(2, 1, "shop", "tmp_a"),  # a DDL of a filtered table, value not JSON
                _key(1, 2, "shop", "orders"),
                _key(1, 3, "SHOP", "TMP_b"),  # a row of a filtered table, value not JSON
                _key(1, 4, "shop", "tmp_c"),  # a row holding a bad int
                _key(1, 5, "shop", "orders"),
                _key(3, 6),  # resolved: always kept
            ]
        ),
        frame_values([b"{not json", _row(1), b"{not json", _row("ten"), _row(2)]),
    )
    with pytest.raises(DecodeError):
        _decode_all_op([message], None)
    events = _decode_all_op([message], TableFilter(["shop.*", "!shop.tmp_*"]))
    assert [(type(e).__name__, getattr(e, "after", None)) for e in events] == [
        ("RowChange", {"id": 1}),
        ("RowChange", {"id": 2}),
        ("Watermark", None),
    ]
    # the changelog sink keeps each event's place in the message
    batches = list(
        decode_batches(
            iter([_op_batch([message])]),
            "open-protocol",
            {},
            table_filter=TableFilter(["shop.*", "!shop.tmp_*"]),
        )
    )
    rows = pa.Table.from_batches(batches, schema=arrow_schema()).to_pylist()
    assert [(r["kind"], r["seq"]) for r in rows if r["kind"] != "WATERMARK"][:2] == [
        (rows[0]["kind"], 1),
        (rows[0]["kind"], 4),
    ]
    assert not [r for r in rows if r["kind"] == ERROR]


def _decode_all_op(messages: list[tuple[bytes, bytes]], table_filter: TableFilter | None) -> list:
    decoder = make_decoder("open-protocol", table_filter=table_filter)
    events = []
    for offset, (key, value) in enumerate(messages):
        events += decoder.decode(Message(key, value, topic="op", partition=0, offset=offset))
    return events


def _op_batch(messages: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([k for k, _ in messages], pa.binary()),
            "value": pa.array([v for _, v in messages], pa.binary()),
            "topic": pa.array(["op"] * len(messages), pa.string()),
            "partition": pa.array([0] * len(messages), pa.int32()),
            "offset": pa.array(range(len(messages)), pa.int64()),
        }
    )


# --------------------------------------------------------------------------------------------
# Encoding: a filtered table's events are not encoded


@pytest.mark.parametrize("protocol", ["canal-json", "open-protocol"])
def test_the_producer_encodes_only_kept_tables(protocol: str) -> None:
    workload = Workload(seed=3, rows=120, tables=2)  # sbtest.sbtest1 and test.alltypes2
    output = ListOutput()
    producer = Producer(
        make_encoder(
            protocol, {"enable-tidb-extension": "true"} if protocol != "open-protocol" else {}
        ),
        output,
        router=TopicRouter("cdc"),
        dispatcher=make_dispatcher("default"),
        table_filter=TableFilter(["*.*", "!TEST.*"]),
    )
    producer.send_all(workload.events())
    producer.send(Watermark(1 << 40))
    producer.close()
    events = _decode_all_values(output.messages, protocol)
    tables = {(e.database, e.table) for e in events if isinstance(e, RowChange | DDLEvent)}
    assert tables == {("sbtest", "sbtest1")}
    assert any(isinstance(e, Watermark) for e in events)


def _decode_all_values(messages: list[Message], protocol: str) -> list:
    decoder = make_decoder(
        protocol, {"enable-tidb-extension": "true"} if protocol != "open-protocol" else {}
    )
    return [event for message in messages for event in decoder.decode(message)]
