"""Avro without a running registry: the decoder learns schemas from the records a Confluent
registry keeps in its topic ``_schemas`` (ticdc_spark.codec.avro.schemas_topic)."""

from __future__ import annotations

import orjson
import pytest

from sample_captures import make
from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.codec.avro.schemas_topic import SCHEMAS_TOPIC, schema_record
from ticdc_spark.errors import DecodeError, RegistryError
from ticdc_spark.io.capture import read_capture
from ticdc_spark.model import RowChange


def _sample() -> tuple[list[Message], list[Message]]:
    """The Avro sample's _schemas records and its rows' records."""
    messages = list(read_capture(make("avro").splitlines()))
    schemas = [m for m in messages if m.topic == SCHEMAS_TOPIC]
    return schemas, [m for m in messages if m.topic != SCHEMAS_TOPIC]


def test_records_decode_once_their_schemas_are_learned() -> None:
    schemas, rows = _sample()
    decoder = make_decoder("avro", {})
    assert [e for m in schemas for e in decoder.decode(m)] == []
    assert all(isinstance(e, RowChange) for m in rows for e in decoder.decode(m))


def test_an_id_neither_learned_nor_in_a_registry_says_both_ways() -> None:
    schemas, rows = _sample()
    decoder = make_decoder("avro", {})
    decoder.decode(schemas[0])
    with pytest.raises(RegistryError, match=r"\(1 learned from _schemas records\)") as caught:
        for message in rows:
            decoder.decode(message)
    assert "--schema-registry URL" in str(caught.value)
    assert "_schemas records before the records that name its ids" in str(caught.value)


def test_other_registry_records_teach_nothing() -> None:
    """Settings, no-ops, deleted schemas and JSON/Protobuf schemas give no Avro schema."""
    decoder = make_decoder("avro", {})
    config = Message(
        b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"NONE"}'
    )
    deleted = Message(b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', None)
    json_schema = schema_record("s", 2, 9, "{}")
    json_schema.value = orjson.dumps(
        {**orjson.loads(json_schema.value or b""), "schemaType": "JSON"}
    )
    for message in (config, deleted, json_schema):
        message.topic = SCHEMAS_TOPIC
        assert decoder.decode(message) == []
    assert decoder._learned.texts == {}  # type: ignore[attr-defined]


def test_two_schemas_under_one_id_or_a_record_without_one_are_decode_errors() -> None:
    decoder = make_decoder("avro", {})
    decoder.decode(schema_record("s-value", 1, 1, '"string"'))
    with pytest.raises(DecodeError, match="two different schemas under id 1"):
        decoder.decode(schema_record("t-value", 1, 1, '"long"'))
    broken = schema_record("s-value", 2, 2, '"long"')
    broken.value = b'{"subject":"s-value","version":2}'
    with pytest.raises(DecodeError, match="needs an integer 'id' and a 'schema'"):
        decoder.decode(broken)
