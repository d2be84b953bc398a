"""Avro decoding: a Kafka record's key and value, each in the Confluent wire format, read with
the writer schema their ids name (looked up once per id, then cached with its plan).

* value present: an INSERT (``_tidb_op`` ``c``, or no extension) or an UPDATE (``u``; Avro
  carries no old image: its before image is the row's handle key, unchanged by an UPDATE
  since TiCDC splits key changes into a DELETE and an INSERT), the whole row; commit ts
  from ``_tidb_commit_ts`` (0 without the extension);
* value null (a tombstone): a DELETE of the row the key names, key columns only, and no
  commit ts (0): the consumer orders it by its partition position (docs/pipeline.md).

The table's columns, types and handle key come from the writer schemas
(:func:`~.schema.table_from_schemas`); a tombstone names the table's columns as the last
value schema this decoder read for it (else the key's).  Each field is read as its writer
schema says (a DECIMAL written as ``string`` reads as text whatever this decoder's options).
A record that is not framed, names an id the registry lacks, or whose body does not read
with its schema is a DecodeError; a registry that cannot be reached is a RegistryError (the
data stays in Kafka).

The Spark stage's path, :meth:`AvroDecoder.decode_arrow_batch` (:mod:`.batch`), reads the
records whose plan is known here and converts their values a column at a time.

The hot path: one plan per (value schema id, key schema id), found by the records' 5-byte
headers in a dict, holds the parsed writer schema, the per-field converters of both sink
kinds and the table schema with its changelog JSON.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastavro import schemaless_reader

from ticdc_spark.codec.avro import schema as avro_schema
from ticdc_spark.codec.avro.options import PROTOCOL, AvroOptions
from ticdc_spark.codec.avro.plan import Plan, Record, make_record
from ticdc_spark.codec.avro.registry import UnknownSchemaId, registry
from ticdc_spark.codec.avro.schemas_topic import SCHEMAS_TOPIC, LearnedSchemas
from ticdc_spark.codec.avro.wire import HEADER_SIZE, unframe
from ticdc_spark.codec.base import ChangelogSink, DecoderBase, Message, RowSink
from ticdc_spark.codec.common import INPUT_ERRORS, as_decode_error, refuse_empty
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import RowKind, TableSchema, schema_json

__all__ = ["AvroDecoder", "read_record", "row_kind_and_ts"]

_KINDS = {"c": RowKind.INSERT, "u": RowKind.UPDATE, "": RowKind.INSERT}
_PLANS_KEPT = 4096  # plans per decoder (the dict is emptied when it holds more)


class AvroDecoder(DecoderBase):
    protocol = PROTOCOL

    def __init__(self, options: AvroOptions, table_filter: TableFilter | None = None) -> None:
        self.options = options
        self.registry = registry(options.schema_registry)
        self._learned = LearnedSchemas()  # (from the registry's _schemas records met)
        self.table_filter = table_filter
        self._records: dict[int, Record] = {}
        self._plans: dict[bytes, Plan] = {}
        # table -> the newest value schema id of its rows so far (a registry numbers schemas
        # in the order they are registered; the consumer orders them so too, see "Tables that
        # follow their rows' schemas" in docs/pipeline.md): the columns its tombstones name
        self._newest: dict[tuple[str, str], int] = {}
        self._plans_cleared = 0  # (times the plan cache was emptied: see restore)

    def snapshot(self) -> tuple[dict[tuple[str, str], int], int, int]:
        """Each table's newest value schema id so far (``codec.base.StatefulDecoder``), and
        where the plan cache stood (its size, how many times it was cleared)."""
        return dict(self._newest), len(self._plans), self._plans_cleared

    def restore(self, snapshot: tuple[dict[tuple[str, str], int], int, int]) -> None:
        """Back to ``snapshot``; the plans made since are dropped too, so that a replay plans
        (and so meets the newer schemas) where the first pass did."""
        newest, planned, cleared = snapshot
        self._newest = dict(newest)
        if cleared != self._plans_cleared:
            self._plans.clear()
            self._plans_cleared += 1
        else:  # (a dict keeps its insertion order: the plans made since are its last ones)
            for header in list(self._plans)[planned:]:
                del self._plans[header]

    def decode_into(self, message: Message, sink: RowSink) -> None:
        try:
            if message.topic == SCHEMAS_TOPIC:  # (a schema the registry stored: no event)
                self._learned.learn(message)
                return
            refuse_empty(message)  # (only a null value is a tombstone: issue 24, item 11)
            if message.value is not None:
                self._row(message, sink)
            elif message.key is not None:
                self._tombstone(message, sink)
            else:
                raise DecodeError("a record with neither key nor value is no Avro row")
        except (DecodeError, *INPUT_ERRORS) as exc:
            raise as_decode_error(PROTOCOL, message, exc) from None

    def decode_arrow_batch(
        self, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
    ) -> Any:
        """The changelog batch of an Arrow batch of Kafka records (:mod:`.batch`)."""
        from ticdc_spark.codec.avro.batch import decode_batch  # (pyarrow: the spark extra)

        return decode_batch(self, batch, careful, sink)

    def known_plan(self, value: bytes, key: bytes) -> Plan | None:
        """The plan of a row record whose schemas this decoder has read before."""
        return self._plans.get(value[:HEADER_SIZE] + key[:HEADER_SIZE])

    def skips(self, table: TableSchema) -> bool:
        """Whether the table filter leaves this table's rows out."""
        return self.table_filter is not None and self._filtered(table)

    # -- the two kinds of record --------------------------------------------------------------

    def _row(self, message: Message, sink: RowSink) -> None:
        value, key = message.value, message.key or b""
        plan = self._plans.get(value[:HEADER_SIZE] + key[:HEADER_SIZE])  # type: ignore[index]
        if plan is None:
            plan = self._plan(value, key)  # type: ignore[arg-type]
        table = plan.table
        if self.table_filter is not None and self._filtered(table):
            return
        datum = read_record(plan.record, value, "value")  # type: ignore[arg-type]
        kind, commit_ts = row_kind_and_ts(datum)
        text = sink.text
        image = _image(plan.record, datum, text)
        before = {name: image[name] for name in plan.key} or None if kind is _UPDATE else None
        sink.add_row(
            kind,
            table,
            commit_ts,
            before,
            image,
            (message.topic, message.partition or 0, message.offset or 0, 0),
            schema_text=plan.table_json if text else None,
        )

    def _tombstone(self, message: Message, sink: RowSink) -> None:
        key: bytes = message.key  # type: ignore[assignment]
        key_id, _ = unframe(key, "key")
        key_record = self._record(key_id)
        database, table_name = avro_schema.record_names(key_record.record)
        value_id = self._newest.get((database, table_name))
        table = self._table(value_id, key_id)
        if self.table_filter is not None and self._filtered(table):
            return
        image = _image(key_record, read_record(key_record, key, "key"), sink.text)
        position = (message.topic, message.partition or 0, message.offset or 0, 0)
        sink.add_row(RowKind.DELETE, table, 0, image, None, position)

    # -- schemas ------------------------------------------------------------------------------

    def _plan(self, value: bytes, key: bytes) -> Plan:
        value_id, _ = unframe(value, "value")
        key_id = unframe(key, "key")[0] if key else None
        if key_id is not None:
            self._record(key_id)
        table = self._table(value_id, key_id)
        # (every row's schema is planned before it is read: the newest is kept here; a plan
        # made again after the cache was cleared never takes a table back to an older one)
        name = (table.database, table.table)
        self._newest[name] = max(value_id, self._newest.get(name, value_id))
        # The changelog's schema JSON has the value schema's id as the table's version (the
        # events have none: an id is the registry's, not the table's).  It orders a table's
        # schemas (a registry numbers schemas in the order they are registered; TiCDC
        # registers a table's new schema with its first row after the change), so that the
        # consumer never takes a table back to an older schema (consume.Planner).
        text = schema_json(replace(table, version=value_id))
        plan = Plan(self._record(value_id), table, text, table.handle_key)
        if len(self._plans) >= _PLANS_KEPT:
            self._plans.clear()
            self._plans_cleared += 1
        self._plans[value[:HEADER_SIZE] + key[:HEADER_SIZE]] = plan
        return plan

    def _record(self, schema_id: int) -> Record:
        found = self._records.get(schema_id)
        if found is not None:
            return found
        text = self._learned.texts.get(schema_id)
        if text is None and not self.registry.url:
            raise self._learned.missing(schema_id)
        try:
            text = text or self.registry.schema_text(schema_id)
        except UnknownSchemaId as exc:
            raise DecodeError(str(exc)) from None
        if len(self._records) >= _PLANS_KEPT:
            self._records.clear()
        found = self._records[schema_id] = make_record(text)
        return found

    def _table(self, value_id: int | None, key_id: int | None) -> TableSchema:
        value = self._record(value_id).record if value_id is not None else None
        key = self._record(key_id).record if key_id is not None else None
        return avro_schema.table_from_schemas(value, key)

    def _filtered(self, schema: TableSchema) -> bool:
        keep = self.table_filter
        return keep is not None and not keep.matches(schema.database, schema.table)


_UPDATE = RowKind.UPDATE


def row_kind_and_ts(datum: dict[str, Any]) -> tuple[RowKind, int]:
    """A row record's kind and commit ts (from the TiDB extension fields, if any)."""
    op = datum.get("_tidb_op", "")
    kind = _KINDS.get(op)
    if kind is None:
        raise DecodeError(f"_tidb_op is {op!r}: TiCDC writes c or u (a delete is a tombstone)")
    commit_ts = datum.get("_tidb_commit_ts", 0)
    if commit_ts < 0:
        raise DecodeError(f"_tidb_commit_ts {commit_ts} is negative")
    return kind, commit_ts


def read_record(record: Record, data: bytes, part: str) -> dict[str, Any]:
    """The record of a framed key or value (its header already checked)."""
    stream = io.BytesIO(data)
    stream.seek(HEADER_SIZE)
    try:
        datum = schemaless_reader(stream, record.parsed, None)
    except (EOFError, StopIteration, IndexError) as exc:
        raise DecodeError(f"{part} body is truncated for its schema") from exc
    if stream.tell() != len(data):
        raise DecodeError(f"{part} has {len(data) - stream.tell()} bytes after its record")
    if type(datum) is not dict:
        raise DecodeError(f"{part} schema is not a record")
    return datum


def _image(record: Record, datum: dict[str, Any], text: bool) -> dict[str, Any]:
    image = {}
    if text:
        for field, _, to_text in record.fields:
            value = datum[field]
            image[field] = None if value is None else to_text(value)
    else:
        for field, decode, _ in record.fields:
            value = datum[field]
            image[field] = None if value is None else decode(value)
    return image
