"""The compiled Canal-JSON scanner (the decode stage's Arrow path) against the careful path.

The scanner may hand any message to the careful path, but for the ones it keeps it must give
exactly the rows the careful path gives: every test here compares the two changelogs whole,
``schema`` column included.
"""

from __future__ import annotations

import json
import os
from functools import cache

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_helpers import canal_message, produce
from ticdc_spark.codec import make_decoder
from ticdc_spark.codec.canal_json import arrow as canal_arrow
from ticdc_spark.codec.canal_json import native
from ticdc_spark.pipeline.changelog import arrow_schema
from ticdc_spark.spark.decode import _Records, decode_batches
from ticdc_spark.testing.workload import Workload

OPTIONS = {"enable-tidb-extension": "true"}


def _batch(values: list[bytes | None], topic: str = "cdc") -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.nulls(len(values), pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array([topic] * len(values), pa.string()),
            "partition": pa.array([i % 3 for i in range(len(values))], pa.int32()),
            "offset": pa.array(range(len(values)), pa.int64()),
        }
    )


def _decoded(batch: pa.RecordBatch, compiled: bool = True) -> list[dict]:
    return pa.Table.from_batches(
        list(decode_batches(iter([batch]), "canal-json", OPTIONS, compiled=compiled)),
        schema=arrow_schema(),
    ).to_pylist()


def _both(batch: pa.RecordBatch) -> tuple[list[dict], list[dict]]:
    """The changelog with the scanner, and without it (the Python path, itself tested
    against one-by-one decoding in test_changelog)."""
    return _decoded(batch), _decoded(batch, compiled=False)


@cache
def _messages() -> tuple[bytes, ...]:
    """TiCDC messages of both workload tables (rows, DDL, watermarks), and the same rows the
    way Alibaba Canal and other JSON writers spell them."""
    values = [
        m.value
        for m in produce(Workload(seed=21, rows=200, tables=2), "canal-json", OPTIONS)
        if m.value
    ]
    rewritten = []
    for value in values[:80]:
        obj = orjson.loads(value)
        if obj.get("type") in ("INSERT", "UPDATE", "DELETE") and not obj.get("isDdl"):
            rewritten.append(json.dumps(obj).encode())  # spaces, \\u escapes for non-ASCII
            canal = dict(obj)
            canal.pop("_tidb")
            rewritten.append(json.dumps(canal, indent=1).encode())  # newlines, commit ts from es
    return tuple(values + rewritten)


def test_the_scanner_is_built_where_ci_requires_it() -> None:
    if os.environ.get("TICDC_SPARK_REQUIRE_NATIVE") == "1":
        assert native.native_scanner()
    if not native.native_scanner():
        pytest.skip("built without a C compiler: the pure Python path is the one in use")


needs_scanner = pytest.mark.skipif(
    not native.native_scanner(), reason="the compiled scanner is not built"
)


@needs_scanner
def test_workload_messages_decode_the_same() -> None:
    scanned, careful = _both(_batch(list(_messages())))
    assert scanned == careful
    assert len({r["table"] for r in scanned if r["kind"] == "ROW"}) == 2
    assert "ERROR" not in {r["kind"] for r in scanned}


@needs_scanner
def test_an_install_without_the_scanner_decodes_in_python(monkeypatch) -> None:
    batch = _batch(list(_messages())[:50])
    scanned = _decoded(batch)
    monkeypatch.setattr(native, "scanner", None)
    assert not native.native_scanner()
    assert _decoded(batch) == scanned


@needs_scanner
def test_workload_messages_decode_as_one_by_one() -> None:
    batch = _batch(list(_messages()))
    careful = _Records(batch, make_decoder("canal-json", OPTIONS), fail=False).one_by_one()
    assert _decoded(batch) == pa.Table.from_batches([careful]).to_pylist()


def _row(**fields: object) -> bytes:
    return canal_message(445644800000000003, **fields)


EDGE_CASES = [
    _row(),
    _row(data=[{"id": "2", "v": None}]),
    _row(data=[{"id": "3", "v": 'é \u2603 \U0001f600 " \\ / \n\t'}]),
    rb'{"database":"db","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT",'
    rb'"mysqlType":{"id":"int","v":"varchar"},"data":[{"id":"4","v":"\u00e9\ud83d\ude00\/"}],'
    rb'"_tidb":{"commitTs":1}}',
    rb'{"database":"db","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT",'
    rb'"mysqlType":{"id":"int","v":"varchar"},"data":[{"id":"5","v":"\ud83d"}],'
    rb'"_tidb":{"commitTs":1}}',  # a lone surrogate: orjson refuses it, so must we
    rb'{"\u0064atabase":"db","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT",'
    rb'"mysqlType":{"id":"int","v":"varchar"},"data":[{"id":"6","v":"x"}],"_tidb":{"commitTs":1}}',
    _row(data=[{"id": "7", "v": "x"}], database=None),
    _row(data=[{"id": "8", "v": 8}]),
    _row(data=[{"id": "9", "w": "x"}]),  # a column mysqlType lacks
    _row(data=[{"id": "10", "v": "x"}, {"id": "11", "v": "y"}]),
    _row(type="UPDATE", data=[{"id": "12", "v": "new"}], old=[{"id": "12", "v": "old"}]),
    _row(type="UPDATE", data=[{"id": "13", "v": "new"}], old=[{"v": "old"}]),  # Canal's old
    _row(type="UPDATE", data=[{"id": "14", "v": "new"}], old=[{"v": "o", "id": "14"}]),
    _row(type="UPDATE", data=[{"id": "15", "v": "new"}], old=None),
    _row(type="DELETE", data=[{"id": "16", "v": "gone"}], old=[1]),
    _row(type="QUERY", isDdl=False, sql="GRANT ALL ON *.* TO u"),
    _row(_tidb={"commitTs": 1 << 63}),
    _row(_tidb={"commitTs": -1}),
    _row(_tidb={"commitTs": "1"}),
    _row(_tidb={"commitTs": 5, "onlyHandleKey": True}),
    _row(_tidb={"commitTs": 5, "claimCheckLocation": "file:///nowhere"}),
    _row(_tidb=None, es=1700000000123),
    _row(_tidb=None, es=None),
    _row(_tidb=None, es=1.5),
    _row(mysqlType={"id": "int", "v": "varbinary(8)"}, data=[{"id": "17", "v": "\u00ff\u0001"}]),
    _row(mysqlType={"id": "int", "v": "nonsense(("}, data=[{"id": "18", "v": "x"}]),
    _row(pkNames=None, data=[{"id": "19", "v": "x"}]),
    _row().replace(b'"ts":1,', b'"ts":1e400,'),  # orjson refuses infinity
    _row().replace(b'"ts":1,', b'"ts":1.5e3,'),
    _row().replace(b'"id":"1"', b'"id":"20","id":"21"'),  # a key twice: orjson keeps the last
    _row().replace(b'"isDdl":false', b'"isDdl":false,"isDdl":true'),
    _row() + b" trailing",
    _row()[:-1],
    b"\xef\xbb\xbf" + _row(),
    _row().replace(b'"a"', b'"\xc3\x28"'),  # bad UTF-8 in a value
    _row().replace(b'"a"', b'"\xed\xa0\x80"'),  # a UTF-8-encoded surrogate
    b"",
    b"null",
    b"[]",
    b"{}",
    b"{" * 500 + b"}" * 500,
    b'{"database":' + b"[" * 200 + b"]" * 200 + b"}",
]


@needs_scanner
def test_edge_cases_decode_the_same() -> None:
    scanned, careful = _both(_batch([*EDGE_CASES, None]))
    assert scanned == careful
    kinds = [r["kind"] for r in scanned]
    assert kinds.count("ROW") >= 15 and kinds.count("ERROR") >= 10


@needs_scanner
def test_a_special_character_at_every_place_of_a_long_string_decodes_the_same() -> None:
    """The scanner reads plain text a block at a time: an escape, non-ASCII or a control
    character at each position of a long value and of a long database name."""
    # JSON text to put inside a string: escapes, raw UTF-8
    specials = [rb"\"", rb"\\", rb"\u00e9", rb"\n", rb"\u2028", rb"\ud83d\ude00", rb"\u0001"]
    specials.append("é".encode())
    values = []
    for special in specials:
        for at in range(40):
            text = b'"' + b"p" * at + special + b"q" * (40 - at) + b'"'
            values.append(_row(data=[{"id": str(at), "v": "x"}]).replace(b'"x"', text))
            values.append(_row().replace(b'"db"', text))
    scanned, careful = _both(_batch(values))
    assert scanned == careful
    assert "ERROR" not in {r["kind"] for r in scanned}


@needs_scanner
def test_shapes_changing_inside_a_batch_keep_the_schema_column_right() -> None:
    """The schema column says where a table's schema changes, also where fast rows and
    careful-path rows of the same table alternate (binary columns take the careful path)."""
    narrow = {"id": "int", "v": "varchar"}
    wide = {"id": "int", "v": "varchar", "b": "varbinary(4)"}
    values = []
    for i in range(12):
        if i % 3 == 2:
            values.append(_row(mysqlType=wide, data=[{"id": str(i), "v": "x", "b": "\u00e9"}]))
        else:
            values.append(_row(table=f"t{i % 2}", data=[{"id": str(i), "v": "x"}]))
        values.append(_row(table="t0", mysqlType={**narrow, "w": "int"},
                           data=[{"id": str(i), "v": "y", "w": str(i)}]))  # fmt: skip
    scanned, careful = _both(_batch(values))
    assert scanned == careful
    assert sum(1 for r in scanned if r["schema"]) > 6


@needs_scanner
def test_repeated_type_maps_and_shapes_are_reused_only_when_byte_identical() -> None:
    """The scanner skips a ``mysqlType``/``sqlType``/``pkNames`` value whose bytes equal one
    it checked earlier in the batch, and numbers a message's shape by the previous one's when
    they are the same: near misses (spacing, a changed type, a truncated or over-closed value
    right after a remembered one, other data keys, another key or table) must not be taken
    for them."""
    types = {"id": "int", "v": "varchar"}
    base = _row(mysqlType=types, data=[{"id": "1", "v": "x"}])
    spelled = b'"mysqlType":{"id":"int","v":"varchar"}'
    assert spelled in base
    variants = [
        base.replace(spelled, b'"mysqlType":{"id":"int", "v":"varchar"}'),
        base.replace(spelled, b'"mysqlType":{"id":"int","v":"text"}'),
        base.replace(spelled, spelled + b"}"),
        base.replace(spelled, spelled[:-1]),
        base[: base.index(spelled) + len(spelled)],
        _row(mysqlType=types, data=[{"v": "x", "id": "2"}]),
        _row(mysqlType=types, pkNames=["v"], data=[{"id": "3", "v": "x"}]),
        _row(mysqlType=types, table="other", data=[{"id": "4", "v": "x"}]),
        _row(mysqlType=types, database="other", data=[{"id": "5", "v": "x"}]),
        _row(mysqlType={**types, "w": "int"}, data=[{"id": "6", "v": "x", "w": "6"}]),
    ]
    values = []
    for variant in variants:
        values += [base, variant, variant, base]
    scanned, careful = _both(_batch(values))
    assert scanned == careful
    kinds = [r["kind"] for r in scanned]
    assert kinds.count("ERROR") == 6 and kinds.count("ROW") == len(values) - 6
    # the schema is written on the first row, on each change of table t's schema (four
    # variants, there and back) and on the first row of the other two tables
    assert sum(1 for r in scanned if r["schema"]) == 1 + 4 * 2 + 2


@needs_scanner
def test_a_row_that_is_not_an_object_after_a_known_shape_is_a_dead_letter_on_every_path() -> None:
    """The batch path's shape memo compares column names: a list row holding them must not
    pass for an object (it failed the job instead of becoming a dead letter)."""
    values = [_row(), _row(data=[["id", "v"]]), _row(type="UPDATE", old=[["id", "v"]])]
    scanned, careful = _both(_batch(values))
    assert scanned == careful
    assert [r["kind"] for r in scanned] == ["ROW", "ERROR", "ERROR"]


@needs_scanner
def test_the_order_of_mysql_type_decides_the_columns_a_row_lacks_on_every_path() -> None:
    """A key-only row lacks columns; the plan lists them in mysqlType's order, so two
    messages whose mysqlType differs only in order must not share a plan (dict equality
    ignores order)."""
    first, second = (
        {"id": "int", "v": "varchar", "w": "int"},
        {"id": "int", "w": "int", "v": "varchar"},
    )
    key_only = {"commitTs": 5, "onlyHandleKey": True}
    two_rows = _row(mysqlType=first, data=[{"id": "1"}, {"id": "2"}], _tidb=key_only)
    one_row = _row(mysqlType=second, data=[{"id": "3"}], _tidb=key_only)
    batch = _batch([two_rows, one_row])
    careful = _Records(batch, make_decoder("canal-json", OPTIONS), fail=False).one_by_one()
    expected = pa.Table.from_batches([careful]).to_pylist()
    assert _decoded(batch) == _decoded(batch, compiled=False) == expected
    assert '"w","int"],["v"' in expected[-1]["schema"]  # the second message's own order


@needs_scanner
def test_a_sliced_input_column_is_read_from_its_offset() -> None:
    values = list(_messages())
    batch = _batch(values).slice(7, 40)
    scanned, careful = _both(batch)
    assert scanned == careful and len(scanned) >= 40


_INSERTS = [
    b"\\", b'"', b"\\u00e9", b"\\ud83d\\ude00", b" ", b"\n", b"null", b"1e5", b"\xff",
    b"\xc3\xa9", b"{", b"}", b",", b"[]", b":", b"0", b"-", b'"x":"y",', b"\x00",
]  # fmt: skip


@needs_scanner
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_messages_decode_the_same(data: st.DataObject) -> None:
    """Truncations, flipped bytes, inserted JSON punctuation, escapes and bad UTF-8: whatever
    the scanner keeps equals the careful path, and what it cannot read the careful path
    turns into dead letters."""
    pool = _messages()
    values = []
    for _ in range(data.draw(st.integers(1, 8))):
        value = bytearray(pool[data.draw(st.integers(0, len(pool) - 1))])
        for _ in range(data.draw(st.integers(0, 3))):
            at = data.draw(st.integers(0, len(value)))
            action = data.draw(st.sampled_from(["cut", "flip", "insert", "delete"]))
            if action == "cut":
                del value[at:]
            elif action == "flip" and at < len(value):
                value[at] ^= 1 << data.draw(st.integers(0, 7))
            elif action == "insert":
                value[at:at] = data.draw(st.sampled_from(_INSERTS))
            elif action == "delete":
                del value[at : at + data.draw(st.integers(1, 20))]
        values.append(bytes(value))
    scanned, careful = _both(_batch(values))
    assert scanned == careful


@needs_scanner
def test_the_scanner_checks_its_buffers() -> None:
    import numpy as np

    from ticdc_spark import _canal_scan  # type: ignore[attr-defined]

    with pytest.raises(ValueError, match="outside"):
        _canal_scan.scan(b"{}", np.array([0, 10], np.int32))
    with pytest.raises(ValueError, match="outside"):
        _canal_scan.scan(b"{}", np.array([2, 1], np.int32))
    with pytest.raises(ValueError, match="int32"):
        _canal_scan.scan(b"{}", b"\x00\x00\x00")


@needs_scanner
def test_the_scanner_names_its_buffers() -> None:
    import numpy as np

    from ticdc_spark import _canal_scan  # type: ignore[attr-defined]

    message = next(m for m in _messages() if b'"type":"INSERT"' in m)
    out = _canal_scan.scan(message, np.array([0, len(message)], np.int32))
    assert type(out).__name__ == "ScanResult" and type(out.after).__name__ == "ScanImage"
    assert out.slow == b"\x00" and np.frombuffer(out.shape_ids, np.int32).tolist() == [0]
    database = bytes(out.database_bytes).decode()
    assert f'"{database}"' in message.decode()
    assert len(out.after.map_offsets) == len(out.before.map_offsets) == 8  # n + 1 int32


@needs_scanner
def test_a_failing_scanner_path_falls_back_to_the_python_path(monkeypatch) -> None:
    """If Arrow refuses the scanner path's batch after the careful path added rows, the
    batch is decoded again by the Python path, with no row twice."""
    values = [*_messages()[:40], EDGE_CASES[9]]  # a two-row message: careful path
    expected = _decoded(_batch(values), compiled=False)

    def refuse(*args: object) -> None:
        raise ValueError("refused")

    monkeypatch.setattr(canal_arrow.Tables, "schema_column", refuse)
    assert _decoded(_batch(values)) == expected
