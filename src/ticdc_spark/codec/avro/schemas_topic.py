"""A Confluent Schema Registry's own topic, ``_schemas``: schemas learned from its records.

A Confluent registry keeps every schema it registers as a record of the Kafka topic
``_schemas`` (its ``kafkastore.topic``): key ``{"keytype":"SCHEMA","subject":S,"version":V,
"magic":1}``, value ``{"subject":S,"version":V,"id":N,"schema":TEXT,"deleted":false}``
(``schemaType`` beside them for a JSON or Protobuf schema; a null value once a schema is
deleted for good; the other key types hold the registry's settings).  So a capture holding
those records carries the schemas its Avro records name by id, and decodes without a running
registry: the decoder learns each schema from its record (which decodes to no event) and
looks ids up among them first, then in the registry if one is given.  ``ticdc-spark sample
-p avro`` is such a capture (``tests/sample_captures.py`` writes it); a capture of a real
cluster's topics that includes ``_schemas``, read in order, is one too.

This works where one decoder reads the records in order (``decode``): in ``replicate`` each
Spark task decodes its own partitions, so the Avro records need a registry there.
"""

from __future__ import annotations

from typing import Any

import orjson

from ticdc_spark.codec.base import Message
from ticdc_spark.errors import DecodeError, RegistryError

__all__ = ["SCHEMAS_TOPIC", "LearnedSchemas", "schema_record"]

SCHEMAS_TOPIC = "_schemas"


class LearnedSchemas:
    """The Avro schemas of the ``_schemas`` records read so far, by id."""

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def learn(self, message: Message) -> None:
        """Learns the schema a ``_schemas`` record holds (other records: nothing)."""
        key = _object(message.key, "key")
        if key.get("keytype") != "SCHEMA" or message.value is None:
            return  # (settings, no-ops; a null value: deleted, and ids are never reused)
        value = _object(message.value, "value")
        schema_id, text = value.get("id"), value.get("schema")
        if type(schema_id) is not int or not isinstance(text, str):
            raise DecodeError("a _schemas SCHEMA record needs an integer 'id' and a 'schema'")
        if value.get("schemaType", "AVRO") != "AVRO":
            return  # (JSON Schema or Protobuf: no Avro record names it)
        if self.texts.setdefault(schema_id, text) != text:
            raise DecodeError(f"_schemas holds two different schemas under id {schema_id}")

    def missing(self, schema_id: int) -> RegistryError:
        """The error for an id neither learned nor in a registry (none was given)."""
        learned = f" ({len(self.texts)} learned from _schemas records)" if self.texts else ""
        return RegistryError(
            f"no schema id {schema_id}{learned}: the avro protocol needs a schema registry "
            "(--schema-registry URL, or mock://NAME for confluent-kafka's in-process one), or "
            "the registry's _schemas records before the records that name its ids (ticdc-spark "
            "sample -p avro is such a capture)"
        )


def schema_record(subject: str, version: int, schema_id: int, text: str) -> Message:
    """The ``_schemas`` record a Confluent registry writes for a registered Avro schema."""
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id, "schema": text}
    value["deleted"] = False
    return Message(orjson.dumps(key), orjson.dumps(value), topic=SCHEMAS_TOPIC)


def _object(data: bytes | None, part: str) -> dict[str, Any]:
    try:
        obj = orjson.loads(data or b"")
    except orjson.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        raise DecodeError(f"a _schemas record's {part} must be a JSON object")
    return obj
