"""A key or value of 0 bytes is not a null one (issue 24, item 11): in Avro a null value is a
tombstone (a DELETE) and in Debezium a null key a keyless table, so a record whose bytes were
lost must be a dead letter naming it, never a delete nor a change keyed otherwise.  Every
protocol, on the one-record path and on the decode stage's batch path."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from contract.helpers import kafka_batch
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema
from ticdc_spark.spark.decode import decode_batches
from ticdc_spark.types import ColumnType as T

KEY = (Index("PRIMARY", ("id",), primary=True, unique=True),)
TABLE = TableSchema(
    "d", "t", (Column("id", T("int"), nullable=False), Column("v", T("varchar"))), KEY
)
PROTOCOLS = {
    "avro": {"schema-registry": "mock://empty-is-not-null", "enable-tidb-extension": "true"},
    "debezium": {},
    "open-protocol": {"max-batch-size": "1"},
    "canal-json": {"enable-tidb-extension": "true"},
    "simple": {},
}
# (Canal-JSON and Simple do not read the key: TiCDC sends none)
READS_KEY = {"avro", "debezium", "open-protocol"}


def _messages(protocol: str) -> list[Message]:
    rows = [
        RowChange(RowKind.INSERT, TABLE, (5 + i) << 18, None, {"id": i, "v": f"v{i}"})
        for i in range(4)
    ]
    messages = make_encoder(protocol, PROTOCOLS[protocol]).encode(rows)
    return [dataclasses.replace(m, offset=i, partition=0) for i, m in enumerate(messages)]


def _emptied(message: Message, part: str) -> Message:
    return dataclasses.replace(message, **{part: b""})


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_an_empty_value_is_a_decode_error_never_a_delete(protocol: str) -> None:
    message = _emptied(_messages(protocol)[-1], "value")
    decoder = make_decoder(protocol, PROTOCOLS[protocol])
    with pytest.raises(DecodeError, match=rf"@{message.offset}: ") as error:
        decoder.decode(message)
    # (an Open Protocol message of no events has an empty value, and TiCDC sends such: there
    # the value's entries are missing for the key's)
    reasons = ("empty", "zero-length", "key has more entries than value")
    assert any(reason in str(error.value) for reason in reasons)


@pytest.mark.parametrize("protocol", sorted(READS_KEY))
def test_an_empty_key_is_a_decode_error(protocol: str) -> None:
    message = _emptied(_messages(protocol)[-1], "key")
    with pytest.raises(DecodeError, match=rf"@{message.offset}: "):
        make_decoder(protocol, PROTOCOLS[protocol]).decode(message)


@pytest.mark.parametrize("compiled", [True, False], ids=["batch-path", "one-by-one"])
@pytest.mark.parametrize("part", ["value", "key"])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_the_decode_stage_makes_an_emptied_record_a_dead_letter(
    protocol: str, part: str, compiled: bool
) -> None:
    """Among good records of the same table (so that the batch paths have a plan for their
    header), a record emptied in its value or key gives an ERROR row naming its offset, and
    no DELETE."""
    messages = _messages(protocol) * 3
    messages = [dataclasses.replace(m, offset=i) for i, m in enumerate(messages)]
    messages[7] = _emptied(messages[7], part)
    out = decode_batches(
        iter([kafka_batch(messages)]), protocol, PROTOCOLS[protocol], compiled=compiled
    )
    rows = pa.concat_batches(list(out)).to_pylist()
    assert not [r for r in rows if r["kind"] == "DELETE"]
    errors = [r for r in rows if r["kind"] == "ERROR"]
    if part == "key" and protocol not in READS_KEY:
        assert not errors
        return
    assert [r["offset"] for r in errors] == [7]


def test_a_null_value_with_its_key_is_still_an_avro_tombstone() -> None:
    message = dataclasses.replace(_messages("avro")[0], value=None)
    (event,) = make_decoder("avro", PROTOCOLS["avro"]).decode(message)
    assert isinstance(event, RowChange)
    assert (event.kind, event.before) == (RowKind.DELETE, {"id": 0})
