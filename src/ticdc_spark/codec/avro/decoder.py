"""Avro decoding: a Kafka record's key and value, each in the Confluent wire format, read with
the writer schema their ids name (looked up once per id, then cached with its plan).

* value present: an INSERT (``_tidb_op`` ``c``, or no extension) or an UPDATE (``u``; Avro
  carries no old image: its before image is the row's handle key, unchanged by an UPDATE
  since TiCDC splits key changes into a DELETE and an INSERT), the whole row; commit ts from ``_tidb_commit_ts`` (0 without the
  extension);
* value null (a tombstone): a DELETE of the row the key names, key columns only, and no
  commit ts (0): the consumer orders it by its partition position (docs/pipeline.md).

The table's columns, types and handle key come from the writer schemas
(:func:`~.schema.table_from_schemas`); a tombstone names the table's columns as the last
value schema this decoder read for it (else the key's).  A record that is not framed, names
an id the registry lacks, or whose body does not read with its schema is a DecodeError; a
registry that cannot be reached is a RegistryError (the data stays in Kafka).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import orjson
from fastavro import parse_schema, schemaless_reader

from ticdc_spark.codec.avro import schema as avro_schema
from ticdc_spark.codec.avro.dialect import dialect_for
from ticdc_spark.codec.avro.options import PROTOCOL, AvroOptions
from ticdc_spark.codec.avro.registry import UnknownSchemaId, registry
from ticdc_spark.codec.avro.wire import unframe
from ticdc_spark.codec.base import DecoderBase, Message, RowSink
from ticdc_spark.codec.common import LRUCache, decoding
from ticdc_spark.codec.convert import Converter, Dialect
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import RowKind, TableSchema

__all__ = ["AvroDecoder"]

_KINDS = {"c": RowKind.INSERT, "u": RowKind.UPDATE, "": RowKind.INSERT}
# (Avro field name, column name, to canonical value, to changelog text)
_Field = tuple[str, str, Converter, Converter]


@dataclass(slots=True)
class _ReadPlan:
    """A writer schema, parsed, with what its records become."""

    parsed: Any
    record: dict[str, Any]  # the schema JSON
    fields: tuple[_Field, ...]
    extension: bool  # whether the record has the TiDB extension fields


def _read_plan(text: str, dialect: Dialect) -> _ReadPlan:
    record = orjson.loads(text)
    fields = tuple(
        (f.name, f.name, dialect.decoder(f.ctype), dialect.text(f.ctype))
        for f in avro_schema.column_fields(record)
    )
    names = {f["name"] for f in record["fields"]}
    return _ReadPlan(parse_schema(record), record, fields, avro_schema.TIDB_OP in names)


class AvroDecoder(DecoderBase):
    protocol = PROTOCOL

    def __init__(self, options: AvroOptions, table_filter: TableFilter | None = None) -> None:
        self.options = options
        self.registry = registry(options.schema_registry)
        self.dialect = dialect_for(
            options.avro_decimal_handling_mode, options.avro_bigint_unsigned_handling_mode
        )
        self.table_filter = table_filter
        self._plans: LRUCache[int, _ReadPlan] = LRUCache(4096)
        self._tables: LRUCache[tuple[int, int], TableSchema] = LRUCache(4096)
        self._last_value: dict[tuple[str, str], int] = {}  # table -> its last value schema id

    def decode_into(self, message: Message, sink: RowSink) -> None:
        with decoding(PROTOCOL, message):
            if message.value:
                self._row(message, sink)
            elif message.key:
                self._tombstone(message, sink)
            else:
                raise DecodeError("a record with neither key nor value is no Avro row")

    # -- the two kinds of record --------------------------------------------------------------

    def _row(self, message: Message, sink: RowSink) -> None:
        value_id, value_plan, datum = self._read(message.value, "value")  # type: ignore[arg-type]
        key_id = self._key_id(message)
        schema = self._table(value_id, key_id)
        if self._filtered(schema):
            return
        self._last_value[(schema.database, schema.table)] = value_id
        op = datum.get(avro_schema.TIDB_OP, "")
        kind = _KINDS.get(op)
        if kind is None:
            raise DecodeError(f"_tidb_op is {op!r}: TiCDC writes c or u (a delete is a tombstone)")
        commit_ts = datum.get(avro_schema.TIDB_COMMIT_TS, 0)
        if commit_ts < 0:
            raise DecodeError(f"_tidb_commit_ts {commit_ts} is negative")
        image = _image(value_plan, datum, sink.text)
        before = _key_image(schema, image) if kind is RowKind.UPDATE else None
        sink.add_row(kind, schema, commit_ts, before, image, _position(message))

    def _tombstone(self, message: Message, sink: RowSink) -> None:
        key_id, key_plan, datum = self._read(message.key, "key")  # type: ignore[arg-type]
        database, table = avro_schema.record_names(key_plan.record)
        value_id = self._last_value.get((database, table))
        schema = self._table(value_id, key_id)
        if self._filtered(schema):
            return
        image = _image(key_plan, datum, sink.text)
        sink.add_row(RowKind.DELETE, schema, 0, image, None, _position(message))

    # -- schemas ------------------------------------------------------------------------------

    def _plan(self, schema_id: int) -> _ReadPlan:
        found = self._plans.get(schema_id)
        if found is not None:
            return found
        try:
            text = self.registry.schema_text(schema_id)
        except UnknownSchemaId as exc:
            raise DecodeError(str(exc)) from None
        return self._plans.put(schema_id, _read_plan(text, self.dialect))

    def _read(self, data: bytes, part: str) -> tuple[int, _ReadPlan, dict[str, Any]]:
        schema_id, body = unframe(data, part)
        plan = self._plan(schema_id)
        stream = io.BytesIO(body)
        try:
            datum = schemaless_reader(stream, plan.parsed, None)
        except (EOFError, StopIteration, IndexError) as exc:
            raise DecodeError(f"{part} body is truncated for schema id {schema_id}") from exc
        if stream.tell() != len(body):
            raise DecodeError(
                f"{part} has {len(body) - stream.tell()} bytes after its record (schema id "
                f"{schema_id})"
            )
        if not isinstance(datum, dict):
            raise DecodeError(f"{part} schema id {schema_id} is not a record")
        return schema_id, plan, datum

    def _key_id(self, message: Message) -> int | None:
        if not message.key:
            return None
        key_id, _ = unframe(message.key, "key")
        self._plan(key_id)
        return key_id

    def _table(self, value_id: int | None, key_id: int | None) -> TableSchema:
        """The table schema of a (value schema, key schema) pair, built once per pair."""
        pair = (value_id or 0, key_id or 0)
        found = self._tables.get(pair)
        if found is not None:
            return found
        value = self._plan(value_id).record if value_id is not None else None
        key = self._plan(key_id).record if key_id is not None else None
        return self._tables.put(pair, avro_schema.table_from_schemas(value, key))

    def _filtered(self, schema: TableSchema) -> bool:
        keep = self.table_filter
        return keep is not None and not keep.matches(schema.database, schema.table)


def _image(plan: _ReadPlan, datum: dict[str, Any], text: bool) -> dict[str, Any]:
    image = {}
    for field, column, decode, to_text in plan.fields:
        value = datum[field]
        image[column] = None if value is None else (to_text(value) if text else decode(value))
    return image


def _key_image(schema: TableSchema, image: dict[str, Any]) -> dict[str, Any] | None:
    """An UPDATE's old image as far as Avro tells: its handle key, which TiCDC never changes
    in an UPDATE (it splits such a change into a DELETE and an INSERT)."""
    return {name: image[name] for name in schema.handle_key} or None


def _position(message: Message) -> tuple[str, int, int, int]:
    return (message.topic, message.partition or 0, message.offset or 0, 0)
