"""Debezium DECIMAL values sent as JSON numbers are read from their text, never through a
double (which keeps 15 to 17 digits): Kafka Connect Decimal columns (JsonConverter's
``decimal.format=NUMERIC``) and any column TiCDC's ``tidb_type`` says is DECIMAL, on the one
decode path (typed start and full path) and the Arrow batch path alike."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from contract.helpers import kafka_batch, placed
from test_debezium_fast_paths import _full_path, _one_by_one
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.debezium import DebeziumDecoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.io.capture import read_capture
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.types import parse_column_type

GENUINE = Path(__file__).parent / "fixtures" / "debezium-genuine"

# More digits than a double holds: each reads back as something else through a float.
EXACT = [
    "12345678901234567890.12345678901234567890",  # 40 digits
    "0.30000000000000001",  # a double reads 0.3
    "123456789012345678901234567890",  # an integer past 2^64 (orjson: a float)
    "-9.87654321098765432109876543210E+5",  # an exponent
]


def _genuine_numeric(price: str) -> Message:
    """The genuine capture's first record (a Connect Decimal ``price``, scale 5) with its
    price written as Kafka's JsonConverter does with ``decimal.format=NUMERIC``."""
    record = next(iter(read_capture((GENUINE / "schema-enable-precise.capture.jsonl").open("rb"))))
    value = orjson.loads(record.value or b"")
    value["payload"]["after"]["price"] = "@price@"
    text = orjson.dumps(value).replace(b'"@price@"', price.encode())
    return Message(record.key, text, topic="t", partition=0, offset=0)


def _ticdc(price: str, count: int = 1) -> list[Message]:
    """TiCDC's Debezium INSERTs (TiDB extension: ``tidb_type`` decimal(65,30)) of a row
    whose DECIMAL ``price`` is written with the digits ``price``, beside a DOUBLE."""
    columns = (
        Column("id", parse_column_type("int"), nullable=False),
        Column("price", parse_column_type("decimal(65,30)")),
        Column("ratio", parse_column_type("double")),
    )
    schema = TableSchema("shop", "t", columns, (Index("PRIMARY", ("id",), primary=True),))
    encoder = make_encoder("debezium", {"enable-tidb-extension": "true"})
    rows = [
        RowChange(
            RowKind.INSERT,
            schema.with_derived_flags(),
            compose_ts(1_700_000_000_000, i),
            after={"id": i, "price": Decimal("1.5"), "ratio": 0.1},
        )
        for i in range(count)
    ]
    messages = [m for row in rows for m in encoder.encode([row])]
    for m in messages:
        m.value = re.sub(rb'"price":1\.5', b'"price":' + price.encode(), m.value or b"")
    return placed(messages)


def _after(decoder: Any, message: Message) -> dict[str, Any]:
    (row,) = decoder.decode(message)
    assert isinstance(row, RowChange)
    return row.after or {}


@pytest.mark.parametrize("price", EXACT)
def test_a_connect_decimal_number_reads_exactly(price: str) -> None:
    message = _genuine_numeric(price)
    for decoder in (make_decoder("debezium"), _full_path({})):
        assert _after(decoder, message)["price"] == Decimal(price)


@pytest.mark.parametrize("price", EXACT)
def test_a_tidb_decimal_number_reads_exactly_on_every_path(price: str) -> None:
    """The first record plans the shape (typed start, then the images read again exactly),
    the next ones take the exact typed start; the full path and the batch path agree."""
    messages = _ticdc(price, count=3)
    decoder = make_decoder("debezium", {"enable-tidb-extension": "true"})
    for message in messages:
        after = _after(decoder, message)
        assert (after["price"], after["ratio"]) == (Decimal(price), 0.1)
        assert _after(_full_path({}), message)["price"] == Decimal(price)
    batch = kafka_batch(messages)
    assert isinstance(decoder, DebeziumDecoder)
    from ticdc_spark.spark.decode import _Records

    records = _Records(batch, decoder, fail=False)
    out = decoder.decode_arrow_batch(batch, records.decode_one, records.builder).to_pylist()
    assert out == _one_by_one(batch, {"enable-tidb-extension": "true"})
    assert {dict(row["after"])["price"] for row in out} == {format(Decimal(price), "f")}


def test_a_decimal_past_65_digits_is_refused() -> None:
    """(MySQL's widest DECIMAL: a number past it is bad input, as orjson refuses 1e999.)"""
    for message in (_genuine_numeric("1e70"), _ticdc("1e70")[0]):
        with pytest.raises(DecodeError, match="not a DECIMAL"):
            make_decoder("debezium").decode(message)


def test_tables_without_decimals_keep_the_typed_reading() -> None:
    """(The exact reading costs a Decimal per number: only tables with DECIMAL columns.)"""
    from ticdc_spark.testing.workload import Workload

    encoder = make_encoder("debezium", {"enable-tidb-extension": "true"})
    events = [e for e in Workload(seed=1, rows=40, tables=2).events() if isinstance(e, RowChange)]
    decoder = make_decoder("debezium", {"enable-tidb-extension": "true"})
    assert isinstance(decoder, DebeziumDecoder)
    for message in placed([m for e in events for m in encoder.encode([e])]):
        decoder.decode(message)
    exact = {plan.schema.table for plan in decoder._plans._data.values() if plan.exact}
    assert exact and all(name.startswith("alltypes") for name in exact)
