"""Avro's Arrow batch path (what the Spark decode stage runs, codec/avro/batch.py) gives the
changelog that decoding one record at a time gives, row for row: over a workload of both
table shapes with tombstones, a schema changed mid-batch and back, records that do not read
(dead letters, named), values only the one-message converters accept or refuse, and a table
filter."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import io
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import kafka_batch
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.avro.columns import base64_texts, column_text
from ticdc_spark.codec.avro.dialect import dialect_for
from ticdc_spark.codec.avro.plan import field_kinds
from ticdc_spark.codec.avro.registry import registry
from ticdc_spark.codec.avro.vectorized import read_columns
from ticdc_spark.codec.avro.wire import HEADER_SIZE, frame
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import RowChange, RowKind, TableSchema
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.spark.decode import decode_batches
from ticdc_spark.testing.workload import Workload
from ticdc_spark.types import parse_column_type

URL = "mock://avro-batch"
OPTIONS = {"schema-registry": URL, "enable-tidb-extension": "true"}


def _workload_rows(count: int) -> list[RowChange]:
    events = Workload(seed=11, rows=count, tables=2).events()
    return [e for e in events if isinstance(e, RowChange)][:count]


def _narrowed(schema: TableSchema) -> TableSchema:
    """The table after a column was dropped (a new writer schema: Avro carries no DDL)."""
    kept = tuple(c for c in schema.columns if c.name != "c_json")
    return dataclasses.replace(schema, columns=kept)


def _rewritten(message: Message, **fields: Any) -> Message:
    """The message with some fields of its value record set (written with its schema)."""
    assert message.value is not None
    schema_id = int.from_bytes(message.value[1:5], "big")
    schema = parse_schema(orjson.loads(registry(URL).schema_text(schema_id)))
    datum = schemaless_reader(io.BytesIO(message.value[5:]), schema, None)
    body = io.BytesIO()
    schemaless_writer(body, schema, {**datum, **fields})
    return dataclasses.replace(message, value=frame(schema_id, body.getvalue()))


def _messages() -> tuple[list[Message], int]:
    """The batch's records, and how many the batch path must leave to the one decode path."""
    rows = _workload_rows(400)
    alltypes = next(r.schema for r in rows if r.schema.table.startswith("alltypes"))
    narrowed = [
        dataclasses.replace(r, schema=_narrowed(alltypes))
        for r in rows
        if r.schema is alltypes and r.kind is not RowKind.DELETE
    ][:20]
    encoder = make_encoder("avro", OPTIONS)
    messages = encoder.encode(rows[:200]) + encoder.encode(narrowed) + encoder.encode(rows[200:])
    inserts = [
        i for i, m in enumerate(messages) if m.value and m.database and "alltypes" in m.table
    ]
    odd: dict[int, Callable[[Message], Message]] = {
        inserts[3]: lambda m: _rewritten(m, c_date="２０２３-01-02"),  # parses (not RE2's \d)
        inserts[4]: lambda m: _rewritten(m, c_date="not a date"),
        inserts[5]: lambda m: _rewritten(m, c_time="-838:59:59.000000"),
        inserts[13]: lambda m: _rewritten(m, c_time="99999999999 10:00:00"),  # no timedelta
        inserts[14]: lambda m: _rewritten(m, c_time="999999 10:00:00"),
        inserts[6]: lambda m: _rewritten(m, c_enum="purple"),
        inserts[7]: lambda m: _rewritten(m, c_datetime="2023-02-30 10:00:00"),  # a zero-ish date
        inserts[8]: lambda m: dataclasses.replace(m, value=b"\x01" + m.value[1:]),
        inserts[9]: lambda m: dataclasses.replace(m, value=m.value[:-7]),
        inserts[10]: lambda m: dataclasses.replace(m, value=m.value + b"\x00"),
        inserts[11]: lambda m: dataclasses.replace(m, value=frame(9999, m.value[5:])),
        inserts[12]: lambda m: _rewritten(m, _tidb_op="d"),
    }
    messages = [odd.get(i, lambda m: m)(m) for i, m in enumerate(messages)]
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "t", offset % 3, offset
    tombstones = sum(1 for m in messages if m.value is None)
    headers = {(m.value[:5], (m.key or b"")[:5]) for m in messages if m.value}
    return messages, tombstones + len(headers) + len(odd)


def _one_by_one(messages: list[Message], table_filter: TableFilter | None) -> pa.RecordBatch:
    batches = decode_batches(
        iter([kafka_batch(messages)]), "avro", OPTIONS, compiled=False, table_filter=table_filter
    )
    return pa.concat_batches(list(batches))


@pytest.mark.parametrize("rules", [None, ["*.alltypes*"]], ids=["all-tables", "filtered"])
def test_arrow_batch_path_gives_the_one_by_one_rows(rules: list[str] | None) -> None:
    messages, _ = _messages()
    table_filter = None if rules is None else TableFilter(rules)
    batch = kafka_batch(messages)
    staged = decode_batches(iter([batch]), "avro", OPTIONS, table_filter=table_filter)
    rows = pa.concat_batches(list(staged)).to_pylist()
    assert rows == _one_by_one(messages, table_filter).to_pylist()
    errors = [r for r in rows if r["kind"] == "ERROR"]
    assert len(errors) == 8  # magic, truncated, trailing, unknown id, op, date, time, enum
    assert all(f"t/{r['partition']}@{r['offset']}" in r["error"] for r in errors)
    dates = {r["after"] and dict(r["after"]).get("c_date") for r in rows}
    assert "２０２３-01-02" in dates  # (the one-message parser's text, kept as written)


def test_the_batch_path_leaves_only_what_it_cannot_take() -> None:
    messages, at_most = _messages()
    decoder = make_decoder("avro", OPTIONS)
    sink = ChangelogBuilder()
    careful: list[int] = []

    def decode_one(i: int) -> None:
        careful.append(i)
        with contextlib.suppress(DecodeError):
            decoder.decode_into(messages[i], sink)

    decoder.decode_arrow_batch(kafka_batch(messages), decode_one, sink)
    assert len(careful) == len(set(careful)) <= at_most < len(messages) // 3


@given(
    values=st.lists(st.none() | st.binary(max_size=20), max_size=30),
    start=st.integers(0, 3),
)
def test_base64_of_a_column_is_each_value_s(values: list[bytes | None], start: int) -> None:
    column = pa.array(values, pa.binary()).slice(min(start, len(values)))
    expected = [None if v is None else base64.b64encode(v).decode() for v in column.to_pylist()]
    assert base64_texts(column).to_pylist() == expected


# -- the column converters against the one-message converters ----------------------------------


def _column_and_each(type_text: str, primitive: str, modes: tuple[str, str]) -> tuple[Any, Any]:
    ctype = parse_column_type(type_text)
    to_text = dialect_for(*modes).text(ctype)
    return column_text(ctype, primitive, to_text), to_text


def _assert_column_is_each(convert: Any, to_text: Any, values: list[Any]) -> None:
    """The column's texts are each value's, and its bad rows the values ``to_text`` refuses
    (the one decode path makes their records dead letters)."""
    texts, bad = convert(values)
    expected, refused = [], []
    for row, value in enumerate(values):
        try:
            expected.append(None if value is None else to_text(value))
        except Exception:
            expected.append(None)
            refused.append(row)
    assert sorted(bad) == refused
    got = texts.to_pylist()
    assert [t for row, t in enumerate(got) if row not in refused] == [
        t for row, t in enumerate(expected) if row not in refused
    ]


_FLOAT32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)
_FLOAT64 = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)


@given(
    values=st.lists(st.none() | _FLOAT32, max_size=40),
    primitive=st.sampled_from(["float", "double"]),
)
def test_float_columns_are_each_value_s_text(values: list[float | None], primitive: str) -> None:
    _assert_column_is_each(*_column_and_each("float", primitive, ("precise", "long")), values)


@given(values=st.lists(st.none() | _FLOAT64 | _FLOAT32, max_size=40))
def test_double_columns_are_each_value_s_text(values: list[float | None]) -> None:
    _assert_column_is_each(*_column_and_each("double", "double", ("precise", "long")), values)


@given(
    values=st.lists(
        st.builds(lambda m, e: m * 10.0**e, st.floats(-10, 10), st.integers(-40, 40)),
        max_size=40,
    ),
    primitive=st.sampled_from(["float", "double"]),
)
def test_float_columns_of_every_magnitude(values: list[float], primitive: str) -> None:
    """Numbers of many digits at every exponent Arrow writes in exponent form (each of the
    layouts: zeros before, zeros after, the point among the digits)."""
    _assert_column_is_each(*_column_and_each(primitive, primitive, ("precise", "long")), values)


def test_float_columns_of_edge_values() -> None:
    edges = [0.0, -0.0, 1e21, 1e-7, 1e16, 1e15, 123456789012345680.0, 5e-324, 1.4e-45, 0.1]
    edges += [float("inf"), float("-inf"), float("nan"), 3.4028234663852886e38, 1e-6, None]
    # (Arrow's exponent form with the point among the digits: from 1e10 on)
    edges += [409307325626.1643, -113623251963.31982, 12345678901.5, 9999999999.5, 1.5e20]
    for ctype, primitive in (("float", "float"), ("double", "double")):
        _assert_column_is_each(*_column_and_each(ctype, primitive, ("precise", "long")), edges)


@given(
    values=st.lists(
        st.none()
        | st.decimals(allow_nan=True, allow_infinity=True, places=None)
        | st.decimals(places=4, allow_nan=False, allow_infinity=False),
        max_size=30,
    )
)
def test_precise_decimal_columns_are_each_value_s_text(values: list[Decimal | None]) -> None:
    convert, to_text = _column_and_each("decimal(65,4)", "bytes", ("precise", "long"))
    _assert_column_is_each(convert, to_text, values)


@given(values=st.lists(st.none() | st.binary(max_size=9), max_size=30))
def test_bit_columns_are_each_value_s_text(values: list[bytes | None]) -> None:
    _assert_column_is_each(*_column_and_each("bit(64)", "bytes", ("precise", "long")), values)


@pytest.mark.parametrize("type_text", ["float", "double", "decimal(10,2)", "bit(8)"])
def test_a_column_of_another_type_takes_the_one_message_converter(type_text: str) -> None:
    """A value fastavro would not read for the column's Avro type (a writer schema of
    another shape) is the one-message converter's to take or refuse."""
    primitive = "bytes" if type_text[0] in "db" and type_text != "double" else type_text
    convert, to_text = _column_and_each(type_text, primitive, ("precise", "long"))
    _assert_column_is_each(convert, to_text, ["1.5", 7, b"\x01", Decimal("2.5"), 2.5, None])


# -- whole batches: the batch path and the one decode path agree ------------------------------

_CORRUPTIONS: dict[str, Callable[[Message], Message]] = {
    "magic": lambda m: dataclasses.replace(m, value=b"\x07" + (m.value or b"")[1:]),
    "truncated": lambda m: dataclasses.replace(m, value=(m.value or b"")[:-3]),
    "trailing": lambda m: dataclasses.replace(m, value=(m.value or b"") + b"\x02"),
    "short": lambda m: dataclasses.replace(m, value=(m.value or b"")[:4]),
    "unknown id": lambda m: dataclasses.replace(m, value=frame(424242, (m.value or b"")[5:])),
    "empty": lambda m: dataclasses.replace(m, value=b""),
    "tombstone": lambda m: dataclasses.replace(m, value=None),
    "no key": lambda m: dataclasses.replace(m, key=None),
    "flipped": lambda m: dataclasses.replace(
        m, value=(m.value or b"")[:-1] + bytes([(m.value or b"\x00")[-1] ^ 0x41])
    ),
}


@pytest.fixture(scope="module")
def mixed_messages() -> list[Message]:
    return _messages()[0]


@given(
    data=st.data(),
    start=st.integers(0, 40),
    rules=st.sampled_from([None, ["*.alltypes*"], ["*.sbtest*"]]),
)
def test_batches_with_bad_records_anywhere_agree(
    mixed_messages: list[Message], data: st.DataObject, start: int, rules: list[str] | None
) -> None:
    """Records corrupted at random places, the batch a slice of a larger Arrow batch (as the
    decode stage cuts them), a table filter or none: the Arrow batch path gives the rows and
    dead letters decoding one record at a time gives."""
    messages = list(mixed_messages[: 120 + start])
    for at in data.draw(st.lists(st.integers(0, len(messages) - 1), max_size=12)):
        kind = data.draw(st.sampled_from(sorted(_CORRUPTIONS)))
        messages[at] = _CORRUPTIONS[kind](messages[at])
    table_filter = None if rules is None else TableFilter(rules)
    whole = kafka_batch([*mixed_messages[:start], *messages[start:]])
    batch = whole.slice(start)  # (Arrow buffers with an offset)
    staged = decode_batches(iter([batch]), "avro", OPTIONS, table_filter=table_filter)
    rows = [r for out in staged for r in out.to_pylist()]
    expected = _one_by_one(messages[start:], table_filter).to_pylist()
    assert rows == expected


# -- numpy's reading of Avro bodies against fastavro's ------------------------------------------

_PLAIN_SCHEMA = {
    "type": "record",
    "name": "plain",
    "fields": [
        {"name": "l", "type": "long"},
        {"name": "i", "type": ["null", "int"]},
        {"name": "s", "type": ["null", "string"]},
        {"name": "b", "type": ["null", "bytes"]},
        {"name": "f", "type": ["null", "float"]},
        {"name": "d", "type": "double"},
        {
            "name": "n",
            "type": [
                "null",
                {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 9},
            ],
        },
        {
            "name": "w",
            "type": [
                "null",
                {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 5},
            ],
        },
        {
            "name": "x",  # (MySQL's widest: values of up to 28 bytes)
            "type": [
                "null",
                {"type": "bytes", "logicalType": "decimal", "precision": 65, "scale": 30},
            ],
        },
    ],
}
_PARSED = parse_schema(_PLAIN_SCHEMA)
_DATUMS = st.fixed_dictionaries(
    {
        "l": st.integers(-(2**63), 2**63 - 1),
        "i": st.none() | st.integers(-(2**31), 2**31 - 1),
        "s": st.none() | st.text(max_size=20),  # (over 12 bytes: not inline in a view)
        "b": st.none() | st.binary(max_size=20),
        "f": st.none() | st.floats(width=32),
        "d": st.floats(),
        "n": st.none() | st.decimals(-999, 999, places=9) | st.just(Decimal(0)),
        "w": st.none() | st.decimals(-(10**35) + 1, 10**35 - 1, places=5),
        "x": st.none()
        | st.decimals(-(10**35) + 1, 10**35 - 1, places=30)
        | st.decimals(-1, 1, places=30),
    }
)


def _body(datum: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, _PARSED, datum)
    return frame(1, out.getvalue())


@given(
    datums=st.lists(_DATUMS, min_size=1, max_size=8),
    cuts=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 60), st.binary(max_size=3))),
)
def test_numpy_reads_what_fastavro_reads(
    datums: list[dict[str, Any]], cuts: list[tuple[int, int, bytes]]
) -> None:
    """Each record numpy reads has the values (decimals: the text) fastavro reads; each it
    leaves is one fastavro would not read or numpy cannot: mutated bodies included."""
    bodies = [_body(d) for d in datums]
    for which, at, inserted in cuts:  # (bytes replaced or cut: bodies fastavro may refuse)
        body = bodies[which % len(bodies)]
        at = HEADER_SIZE + at % max(1, len(body) - HEADER_SIZE)
        bodies[which % len(bodies)] = body[:at] + inserted + body[at + len(inserted) + 1 :]
    columns, ok = read_columns(field_kinds(_PLAIN_SCHEMA) or [], pa.array(bodies, pa.binary()))
    for row, body in enumerate(bodies):
        stream = io.BytesIO(body)
        stream.seek(HEADER_SIZE)
        try:
            datum = schemaless_reader(stream, _PARSED, None)
            whole = stream.tell() == len(body)
        except Exception:
            whole = False
        if not ok[row]:
            continue
        assert whole, "numpy read a record fastavro does not"
        for name, column in columns.items():
            value = datum[name]
            if name in ("n", "w", "x") and value is not None:
                value = format(value, "f")
            got = column[row].as_py()
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(got)
            else:
                assert got == value and type(got) is type(value), name
    if not any(cuts):
        assert ok[: len(datums)].all()


@pytest.mark.parametrize(
    "tenth", [0x00, 0x01, 0x02, 0x7F, 0x80], ids=lambda b: f"tenth byte {b:#04x}"
)
def test_varints_of_ten_bytes(tenth: int) -> None:
    """A long of ten varint bytes is numpy's when its tenth byte holds only bit 63 (what a
    writer of an int64 puts there), and agrees with fastavro; one with more is left."""
    schema = {"type": "record", "name": "t", "fields": [{"name": "l", "type": "long"}]}
    bodies = [frame(1, bytes([0x80 | low] + [0xFF] * 8 + [tenth])) for low in (0x7E, 0x7F)]
    columns, ok = read_columns(field_kinds(schema) or [], pa.array(bodies, pa.binary()))
    assert ok.tolist() == [tenth <= 1] * 2
    for row, body in enumerate(bodies):
        if ok[row]:
            stream = io.BytesIO(body[HEADER_SIZE:])
            assert columns["l"][row].as_py() == schemaless_reader(stream, schema, None)["l"]


_VARINT_BYTE = st.integers(0, 0x7F) | st.integers(0x80, 0xFF)  # (half of them continue)


@given(st.lists(st.lists(_VARINT_BYTE, max_size=12), min_size=1, max_size=20))
def test_varints_of_any_bytes_read_as_fastavro_reads_them(bodies: list[list[int]]) -> None:
    """Bodies of a lone long, of every length and continuation pattern (one-byte columns
    mixed with longer ones): each numpy reads, fastavro reads to the same number and the
    same last byte; each varint of at most 10 bytes that fits an int64 numpy reads."""
    schema = {"type": "record", "name": "t", "fields": [{"name": "l", "type": "long"}]}
    values = [frame(1, bytes(body)) for body in bodies]
    columns, ok = read_columns(field_kinds(schema) or [], pa.array(values, pa.binary()))
    for row, body in enumerate(bodies):
        ends = [j for j, byte in enumerate(body[:10]) if byte < 0x80]
        fits = bool(ends) and ends[0] == len(body) - 1 and (len(body) < 10 or body[9] <= 1)
        assert bool(ok[row]) == fits, body
        if fits:
            stream = io.BytesIO(bytes(body))
            assert columns["l"][row].as_py() == schemaless_reader(stream, schema, None)["l"]
            assert stream.tell() == len(body)


@given(
    raw=st.lists(st.binary(min_size=0, max_size=33), min_size=1, max_size=12),
    precision_scale=st.sampled_from([(1, 0), (12, 9), (20, 6), (38, 38), (40, 5), (65, 30)]),
)
def test_decimal_bytes_read_as_fastavro_reads_them(
    raw: list[bytes], precision_scale: tuple[int, int]
) -> None:
    """Any unscaled bytes (more digits than the precision, 32 bytes and over, none) give
    the text of the Decimal fastavro reads, or are left to it."""
    precision, scale = precision_scale
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    schema = {"type": "record", "name": "t", "fields": [{"name": "d", "type": decimal}]}
    bytes_schema = {"type": "record", "name": "t", "fields": [{"name": "d", "type": "bytes"}]}
    bodies = []
    for value in raw:  # (the wire form of a decimal is its bytes)
        out = io.BytesIO()
        schemaless_writer(out, parse_schema(bytes_schema), {"d": value})
        bodies.append(frame(1, out.getvalue()))
    columns, ok = read_columns(field_kinds(schema) or [], pa.array(bodies, pa.binary()))
    parsed = parse_schema(schema)
    for row, body in enumerate(bodies):
        try:
            datum = schemaless_reader(io.BytesIO(body[HEADER_SIZE:]), parsed, None)
        except Exception:  # (what fastavro refuses numpy must not read)
            assert not ok[row]
            continue
        if ok[row]:
            assert columns["d"][row].as_py() == format(datum["d"], "f")


@given(
    values=st.lists(
        st.none() | st.sampled_from(["a", "b", "a,b", "", "c", "b,a", "A"]), max_size=30
    ),
    type_text=st.sampled_from(["enum('a','b')", "set('a','b')"]),
)
def test_enum_and_set_columns_from_arrow_are_each_value_s_text(
    values: list[str | None], type_text: str
) -> None:
    """Numpy's columns come as Arrow arrays: converted once per distinct value, as a list's."""
    convert, to_text = _column_and_each(type_text, "string", ("precise", "long"))
    _assert_column_is_each(lambda column: convert(pa.array(column, pa.string())), to_text, values)


def test_a_value_shorter_than_the_header_is_a_dead_letter_whatever_its_key() -> None:
    """A 4-byte value with a 1-byte key spells the same 10 header bytes as a whole record
    without a key: it must not join that record's group (its body would start past its end)."""
    options = {"schema-registry": "mock://short", "enable-tidb-extension": "true"}
    events = Workload(seed=11, rows=50, tables=1).events()
    rows = [e for e in events if isinstance(e, RowChange)][:1]
    (whole,) = [m for m in make_encoder("avro", options).encode(rows) if m.value]
    good = dataclasses.replace(whole, key=None, topic="t", partition=0, offset=0)
    short = dataclasses.replace(
        whole, value=whole.value[:4], key=whole.value[4:5], topic="t", partition=0, offset=1
    )
    seen = {}
    for compiled in (False, True):
        out = decode_batches(iter([kafka_batch([good, short])]), "avro", options, compiled=compiled)
        seen[compiled] = [(r["kind"], r["offset"], r["error"]) for b in out for r in b.to_pylist()]
    assert seen[True] == seen[False]
    assert [kind for kind, _, _ in seen[True]] == ["ROW", "ERROR"]
    assert "truncated" in seen[True][1][2]
