"""Avro encoding, as TiCDC's Avro encoder writes it: one message per row change.

INSERT and UPDATE: key = the handle-key record, value = the whole row (``_tidb_op`` ``c`` or
``u`` with the extension); DELETE: key = the handle-key record of the old row, value = None
(a Kafka tombstone).  Both in the Confluent wire format, the schemas registered under
``{topic}-key`` and ``{topic}-value`` (TopicNameStrategy, the topic's dots made ``_``), so a
topic can carry one table only: the topic rule must hold ``{schema}`` and ``{table}``.
DDL and watermarks produce no message (TiCDC's Avro encoder writes none either).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from fastavro import parse_schema, schemaless_writer

from ticdc_spark.codec.avro import schema as avro_schema
from ticdc_spark.codec.avro.dialect import dialect_for
from ticdc_spark.codec.avro.options import PROTOCOL, AvroOptions
from ticdc_spark.codec.avro.registry import registry
from ticdc_spark.codec.avro.wire import frame
from ticdc_spark.codec.base import Message, Route
from ticdc_spark.codec.common import INPUT_ERRORS, LRUCache, row_encode_error
from ticdc_spark.codec.convert import Dialect
from ticdc_spark.codec.topics import TopicRouter
from ticdc_spark.errors import ConfigError, EncodeError
from ticdc_spark.model import Column, Event, RowChange, RowKind, TableSchema, physical_ms

__all__ = ["DEFAULT_TOPIC_RULE", "AvroEncoder", "check_topic_rule"]

DEFAULT_TOPIC_RULE = "{schema}_{table}"
_OPS = {RowKind.INSERT: "c", RowKind.UPDATE: "u"}

# (Avro field name, column name, converter)
_Field = tuple[str, str, Callable[[Any], Any]]


def check_topic_rule(expression: str) -> None:
    """TiCDC refuses an Avro changefeed whose topic rule could put two tables in one topic."""
    if "{schema}" not in expression or "{table}" not in expression:
        raise ConfigError(
            f"the avro protocol needs one topic per table (TopicNameStrategy subjects): the "
            f"topic rule {expression!r} must contain {{schema}} and {{table}}, for example "
            "--topic 'tidb_{schema}_{table}'"
        )


@dataclass(slots=True)
class _Record:
    """One record schema of a table: its text, fastavro's parsed form, and its fields."""

    text: str
    parsed: Any
    fields: tuple[_Field, ...]


@dataclass(slots=True)
class _TablePlan:
    key: _Record | None
    value: _Record


def _record(text: str, columns: tuple[Column, ...], dialect: Dialect) -> _Record:
    fields = tuple(
        (avro_schema.sanitize_name(c.name), c.name, dialect.encoder(c.type)) for c in columns
    )
    return _Record(text, parse_schema(orjson.loads(text)), fields)


class AvroEncoder:
    protocol = PROTOCOL

    def __init__(self, options: AvroOptions) -> None:
        if options.large_message_handle_compression != "none":
            raise ConfigError("the avro protocol does not compress messages")
        self.options = options
        self.registry = registry(options.schema_registry)
        self.dialect = dialect_for(
            options.avro_decimal_handling_mode, options.avro_bigint_unsigned_handling_mode
        )
        self.router = TopicRouter(DEFAULT_TOPIC_RULE)
        self._plans: LRUCache[TableSchema, _TablePlan] = LRUCache(1024)

    def bind_topic_router(self, router: TopicRouter) -> None:
        """Use the producer's topic rule for subjects (checked as TiCDC does)."""
        check_topic_rule(router.expression)
        self.router = router

    def encode(self, events: Iterable[Event]) -> list[Message]:
        return [self._row_message(e) for e in events if isinstance(e, RowChange)]

    # -- rows ---------------------------------------------------------------------------------

    def _plan(self, schema: TableSchema) -> _TablePlan:
        found = self._plans.get(schema)
        return found if found is not None else self._plans.put(schema, self._build(schema))

    def _build(self, schema: TableSchema) -> _TablePlan:
        problem = avro_schema.naming_problem(schema)
        if problem is not None:
            raise EncodeError(f"{PROTOCOL}: table {schema.qualified_name}: {problem}")
        decimal_mode = self.options.avro_decimal_handling_mode
        bigint_mode = self.options.avro_bigint_unsigned_handling_mode
        key_text = avro_schema.key_schema(schema, decimal_mode, bigint_mode)
        value_text = avro_schema.value_schema(
            schema, decimal_mode, bigint_mode, self.options.enable_tidb_extension
        )
        key_columns = avro_schema.key_columns(schema)
        return _TablePlan(
            _record(key_text, key_columns, self.dialect) if key_text else None,
            _record(value_text, schema.columns, self.dialect),
        )

    def _row_message(self, row: RowChange) -> Message:
        schema = row.schema
        plan = self._plan(schema)
        image = row.before if row.kind is RowKind.DELETE else row.after  # (no old image sent)
        if image is None:
            side = "before" if row.kind is RowKind.DELETE else "after"
            raise EncodeError(f"{row.kind.value} of {schema.qualified_name} has no {side} image")
        topic = avro_schema.sanitize_topic(self.router.topic(schema.database, schema.table))
        try:
            key = self._key(row, plan, image, topic)
            value = None if row.kind is RowKind.DELETE else self._value(row, plan, image, topic)
        except EncodeError:
            raise
        except INPUT_ERRORS as exc:
            raise row_encode_error(PROTOCOL, row, exc) from None
        size = len(key or b"") + len(value or b"")
        if size + 0 > self.options.max_message_bytes:
            raise EncodeError(
                f"{PROTOCOL}: row of {schema.qualified_name} at commit ts {row.commit_ts} is "
                f"{size} bytes, over max-message-bytes={self.options.max_message_bytes}"
            )
        return Message(
            key, value, Route.DISPATCH, schema.database, schema.table, rows=1, topic=topic
        )

    def _key(self, row: RowChange, plan: _TablePlan, image: Any, topic: str) -> bytes | None:
        if plan.key is None:
            if row.kind is RowKind.DELETE:
                raise EncodeError(
                    f"{PROTOCOL}: DELETE of {row.schema.qualified_name} cannot be sent: a "
                    "tombstone carries only the key, and the table has no handle key"
                )
            return None
        return self._framed(plan.key, image, f"{topic}-key", {})

    def _value(self, row: RowChange, plan: _TablePlan, image: Any, topic: str) -> bytes:
        extra: dict[str, Any] = {}
        if self.options.enable_tidb_extension:
            extra = {
                avro_schema.TIDB_OP: _OPS[row.kind],
                avro_schema.TIDB_COMMIT_TS: row.commit_ts,
                avro_schema.TIDB_PHYSICAL_TIME: physical_ms(row.commit_ts),
            }
        return self._framed(plan.value, image, f"{topic}-value", extra)

    def _framed(self, record: _Record, image: Any, subject: str, extra: dict[str, Any]) -> bytes:
        datum = extra
        for field, column, encode in record.fields:
            value = image[column]
            datum[field] = None if value is None else encode(value)
        schema_id = self.registry.register(subject, record.text)
        out = io.BytesIO()
        schemaless_writer(out, record.parsed, datum)
        return frame(schema_id, out.getvalue())
