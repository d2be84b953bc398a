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
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa
import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import kafka_batch
from ticdc_spark.changelog import ChangelogBuilder
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.avro.columns import base64_texts
from ticdc_spark.codec.avro.registry import registry
from ticdc_spark.codec.avro.wire import frame
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import RowChange, RowKind, TableSchema
from ticdc_spark.spark.decode import decode_batches
from ticdc_spark.workload import Workload

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
