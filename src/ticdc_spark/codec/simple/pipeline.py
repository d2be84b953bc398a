"""Simple in the Spark pipeline: the decode stage's half and the consumer's half.

A Simple row names its table's schema version but carries no schema; the schema comes from a
BOOTSTRAP or DDL message, possibly on another partition or in an earlier micro-batch, so
possibly in another Spark task.  The tasks keep nothing between micro-batches, so:

* :class:`StageDecoder` (the decode stage) decodes every row whose schema it has met in its
  own task, and leaves the others in the changelog as *wire rows* (the message itself,
  see :meth:`~ticdc_spark.pipeline.changelog.ChangelogBuilder.add_wire_row`); BOOTSTRAP and
  DDL rows keep their message, so that the consumer learns the schemas they bring;
* :class:`RowFinisher` (the consumer, on the driver) learns those schemas into the
  checkpointed consumer state (``ConsumerState.versions``, each schema in this codec's own
  wire form) and finishes the wire rows whose schema is known there; the others stay held
  in the state, bounded by ``max-held-rows`` / ``max-held-bytes`` (see
  :class:`~ticdc_spark.pipeline.planner.Planner`).
"""

from __future__ import annotations

from typing import Any

import orjson

from ticdc_spark.codec.base import Message, Position, RowSink, WireRowSink
from ticdc_spark.codec.simple.decoder import SimpleDecoder
from ticdc_spark.codec.simple.memo import SchemaKey
from ticdc_spark.codec.simple.options import SimpleOptions
from ticdc_spark.codec.simple.wire import schema_from_wire, schema_to_avro, schema_to_json
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Event, TableSchema

__all__ = ["RowFinisher", "StageDecoder"]


class StageDecoder(SimpleDecoder):
    """The decode stage's Simple decoder: a row whose schema this task has not met becomes a
    wire row instead of being held in the task (which would lose it at the task's end)."""

    def _wait(
        self, key: SchemaKey, obj: dict[str, Any], size: int, message: Message, sink: RowSink
    ) -> None:
        if not isinstance(sink, WireRowSink) or message.value is None:
            super()._wait(key, obj, size, message, sink)
            return
        position = (message.topic, message.partition or 0, message.offset or 0, 0)
        key_only = obj.get("handleKeyOnly") is True
        sink.add_wire_row(
            obj["type"], key[0], key[1], obj["commitTs"], position, message.value, key_only
        )

    def _add_schema_event(
        self, event: Event, message: Message, sink: RowSink, where: Position
    ) -> None:
        super()._add_schema_event(event, message, sink, where)
        if isinstance(sink, WireRowSink) and message.value is not None:
            sink.keep_message(message.value)


class RowFinisher:
    """The consumer's half: schemas learned into the state, wire rows finished from them.

    ``versions`` is the consumer state's ``{(database, table, version): text}``, each text
    a schema in this codec's wire form (``tableSchema`` JSON, or the Avro record as JSON),
    read back by the codec's own reader: exactly the schema the decode stage would have.
    """

    def __init__(self, options: SimpleOptions) -> None:
        self.options = options
        self._to_wire = schema_to_avro if options.encoding_format == "avro" else schema_to_json
        self._parsed: dict[str, TableSchema] = {}

    def schema(self, text: str) -> TableSchema:
        """A schema of ``versions`` (parsed once per text)."""
        schema = self._parsed.get(text)
        if schema is None:
            schema = self._parsed[text] = schema_from_wire(orjson.loads(text))
        return schema

    def learn(self, messages: list[bytes], versions: dict[SchemaKey, str]) -> None:
        """Add the schemas BOOTSTRAP and DDL ``messages`` bring (a DDL: its ``tableSchema``
        and ``preTableSchema``) to ``versions`` (the consumer forgets a version once no row
        can need it any more: ``Planner._forget_versions``)."""
        if not messages:
            return
        decoder = SimpleDecoder(self.options)
        for value in messages:
            decoder.decode(Message(None, value))
        for schema in decoder.schemas():
            key = (schema.database, schema.table, schema.version)
            if key not in versions:
                versions[key] = orjson.dumps(self._to_wire(schema)).decode()

    def finish(
        self,
        records: list[tuple[bytes, str, int, int]],
        versions: dict[SchemaKey, str],
        builder: Any,
    ) -> tuple[Any, list[bool]]:
        """Changelog rows (a RecordBatch, from ``builder``: the consumer's empty
        ``ChangelogBuilder``, which a codec does not import) of the wire rows ``records``
        (message, topic, partition, offset) whose schema ``versions`` holds, and for each
        record whether it gave one: a row, or an ERROR row when it does not decode against
        its schema.

        All rows still waiting count against ``max-held-rows`` / ``max-held-bytes``: past
        them a :class:`~ticdc_spark.errors.ConfigError` names the table, the version awaited
        and the options that raise the bounds."""
        decoder = SimpleDecoder(self.options)
        for text in versions.values():
            decoder.learn(self.schema(text))
        done = []
        for value, topic, partition, offset in records:
            before = len(builder)
            message = Message(None, value, topic=topic, partition=partition, offset=offset)
            try:
                decoder.decode_into(message, builder)
            except DecodeError as exc:
                builder.add_error(str(exc), topic, partition, offset, None, value)
            done.append(len(builder) > before)
        return builder.to_batch(), done
