"""The Debezium decoder: TiCDC's Debezium messages and genuine Debezium MySQL connector output.

What a message is, from its value:

* ``{"payload": P, "schema": S}`` (Kafka Connect's JsonConverter with ``schemas.enable=true``,
  TiCDC by default), ``{"payload": P}`` (TiCDC with ``debezium-disable-schema``), or ``P``
  itself (JsonConverter with ``schemas.enable=false``);
* a null value is a tombstone, which Debezium sends after a delete so that log compaction can
  drop the key: it carries no change, and gives nothing;
* ``P.op`` ``c``/``r`` (snapshot read)/``u``/``d`` is a row, ``m`` TiCDC's checkpoint (a
  watermark at ``source.commit_ts``); no ``op`` and a ``ddl`` is a schema change.

Column types come from the Connect schema (:mod:`.connect`); a table with DECIMAL columns has
its numbers read from their text, never through a double (:mod:`.typed`).  Without a schema,
types are guessed from the JSON values (:mod:`.guess`): an integer is read as BIGINT, a
fraction as DOUBLE, a boolean as BIT(1), text as LONGTEXT and an object as JSON, so
DATE/DATETIME numbers, DECIMAL doubles, base64 binary values and ENUM names stay in their wire
form; a warning says so, once per table.

TiCDC puts the commit ts in ``source.commit_ts``.  Genuine Debezium has none: its rows carry
:data:`~ticdc_spark.model.UNKNOWN_COMMIT_TS`, and their order is their partition position (a
warning says so once per table).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from ticdc_spark.codec.base import ChangelogSink, DecoderBase, Message, RowSink
from ticdc_spark.codec.common import (
    LRUCache,
    decoding,
    loads,
    refuse_empty,
    require_dict,
    str_field,
)
from ticdc_spark.codec.debezium.batch import decode_batch
from ticdc_spark.codec.debezium.guess import Guess
from ticdc_spark.codec.debezium.options import CHECKPOINT_OP, PROTOCOL, DebeziumOptions
from ticdc_spark.codec.debezium.plan import Image, Plan, connect_plan
from ticdc_spark.codec.debezium.typed import (
    ENVELOPE,
    EXACT_ENVELOPE,
    EXACT_IMAGES,
    KEY,
    NOT_TYPED,
    RAW_NULL,
    schema_text,
    utf8,
)
from ticdc_spark.codec.debezium.typed import Source as _Source
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import (
    UNKNOWN_COMMIT_TS,
    DDLEvent,
    RowKind,
    Watermark,
)
from ticdc_spark.sql import classify

__all__ = ["DebeziumDecoder"]

log = logging.getLogger(__name__)

_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE
_TSO_END = 1 << 64
_KINDS = {"c": RowKind.INSERT, "r": RowKind.INSERT, "u": RowKind.UPDATE, "d": RowKind.DELETE}
_ENVELOPE_KEYS = frozenset(("payload", "schema"))


# A message's value (decompressed), its Connect schema (an object, or its raw text) and the
# schema's text at the value's end when TiCDC wrote it (None: not looked for yet).
Connect = tuple[bytes, Any, bytes | None]


class DebeziumDecoder(DecoderBase):
    """Decodes TiCDC's Debezium messages and genuine Debezium MySQL connector messages."""

    protocol = PROTOCOL

    def __init__(
        self, options: DebeziumOptions | None = None, *, table_filter: TableFilter | None = None
    ) -> None:
        self.options = options or DebeziumOptions()
        self._keep = None if table_filter is None or table_filter.everything else table_filter
        self._large = LargeMessages(PROTOCOL, self.options)
        self._compressed = self.options.large_message_handle_compression != "none"
        self._plans: LRUCache[Any, Plan] = LRUCache(4096)
        # (value schema text, key schema text) -> (plan, the key's column names), for the
        # batch path's TiCDC records
        self._shapes: LRUCache[tuple[bytes, bytes], tuple[Plan, tuple[str, ...]]] = LRUCache(4096)
        # (the schema texts of TiCDC's tables with DECIMAL columns: .typed reads them exactly)
        self._exact: set[bytes] = set()
        self._guesses: dict[tuple[str, str], Guess] = {}
        self._warned: set[tuple[str, str, str]] = set()

    def snapshot(self) -> dict[tuple[str, str], tuple[Any, ...]]:
        """The column types guessed so far for tables without a Connect schema
        (``codec.base.StatefulDecoder``: the guesses depend on the records seen)."""
        return {table: (dict(g.types), g.plan, g.key) for table, g in self._guesses.items()}

    def restore(self, snapshot: dict[tuple[str, str], tuple[Any, ...]]) -> None:
        self._guesses = {}
        for table, (types, plan, key) in snapshot.items():
            guess = self._guesses[table] = Guess()
            guess.types, guess.plan, guess.key = dict(types), plan, key

    def decode_into(self, message: Message, sink: RowSink) -> None:
        try:
            refuse_empty(message)  # (a null key is a keyless table, a null value a tombstone)
            if not self._typed_into(message, sink):
                self._message_into(message, sink)
        except Exception:
            with decoding(PROTOCOL, message):  # (entered on failure only: it costs per call)
                raise

    def decode_arrow_batch(
        self, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
    ) -> Any:
        """The changelog batch of an Arrow batch of Kafka records: TiCDC's records of the
        table shapes ``careful(i)`` (the one decode path with every check, for every other
        record) has planned are read column by column (:mod:`.batch`)."""
        if self._compressed or self._keep is not None:
            return None
        return decode_batch(self._shapes, batch, careful, sink)

    # one message ------------------------------------------------------------------------------

    def _typed_into(self, message: Message, sink: RowSink) -> bool:
        """Decodes a row message the typed readers fit (:mod:`.typed`); False for any other
        message, and for one this path cannot finish: :meth:`_message_into` then decodes it
        (and says what is wrong with it)."""
        value, key = message.value, message.key
        if value is None or self._compressed or not utf8(value) or not utf8(key or b""):
            return False
        tail = schema_text(value) if self._exact else None  # (no search while none is known)
        exact = tail is not None and tail in self._exact
        try:
            envelope = (EXACT_ENVELOPE if exact else ENVELOPE).decode(value)
            key_names = tuple(KEY.decode(key).payload) if key else ()
        except NOT_TYPED:
            return False
        payload = envelope.payload
        kind, source = _KINDS.get(payload.op), payload.source
        if kind is None or source is None:
            return False
        if self._keep is not None and not self._keep.matches(source.db, source.table):
            return True
        connect = None if envelope.schema == RAW_NULL else (value, envelope.schema, tail)
        images = (payload.before, payload.after)
        try:
            self._row_into(
                message, sink, kind, payload.op, source, images, connect, key_names, exact
            )
        except Exception:  # (nothing was added: the row is added last)
            return False
        return True

    def _message_into(self, message: Message, sink: RowSink) -> None:
        opened = self._open(message)
        if opened is None:
            return
        value, payload, schema = opened
        position = (message.topic, message.partition or 0, message.offset or 0)
        op = payload.get("op")
        source = require_dict(payload.get("source") or {}, "source")
        if op is None:
            if "ddl" not in payload:
                raise DecodeError("neither 'op' nor 'ddl': not a Debezium change event")
            self._ddl_into(payload, source, sink, position)
            return
        if op == CHECKPOINT_OP:
            ts = self._commit_ts(source.get("commit_ts"), required=True)
            sink.add_events([Watermark(ts)], *position)
            return
        kind = _KINDS.get(op)
        if kind is None:
            raise DecodeError(f"unknown op {op!r}: not c, r, u, d or m")
        database, table = str_field(source, "db"), str_field(source, "table")
        if self._keep is not None and not self._keep.matches(database, table):
            return
        key_names = self._key_names(message.key)
        images = (payload.get("before"), payload.get("after"))
        connect = None if schema is None else (value, schema, None)
        names = _Source(database, table, source.get("commit_ts"))
        self._row_into(message, sink, kind, op, names, images, connect, key_names)

    def _row_into(
        self,
        message: Message,
        sink: RowSink,
        kind: RowKind,
        op: str,
        source: _Source,
        raw: tuple[Any, Any],
        connect: Connect | None,
        key_names: tuple[str, ...],
        exact: bool = False,
    ) -> None:
        """A row change into the sink; ``exact``: its images were read with exact numbers.
        An UPDATE without its ``before`` (TiCDC's ``debezium-output-old-value=false``) stays
        an UPDATE, without a before image: the planner upserts it by its after image's key."""
        if kind is _INSERT:
            raw = (None, raw[1])
        elif kind is _DELETE:
            raw = (raw[0], None)
        if connect is None:
            plan, images = self._guessed(source, raw, key_names, sink.text)
        else:
            plan = self._schema_plan(connect, source.db, source.table, key_names, message.key)
            if plan.exact and not exact:
                raw = self._exact_images(connect[0], raw)
            images = (plan.image(raw[0], sink.text), plan.image(raw[1], sink.text))
            if plan.sign_unknown:
                plan.note_signs(raw)
        if images[kind is not _DELETE] is None:
            side = "before" if kind is _DELETE else "after"
            raise DecodeError(f"op {op!r} without its {side!r} image")
        commit_ts = source.commit_ts
        if type(commit_ts) is not int or not 0 < commit_ts < _TSO_END:
            commit_ts = self._commit_ts(commit_ts)  # (raises, or the unknown ts, warned once)
            if commit_ts == UNKNOWN_COMMIT_TS:
                self._warn_once(source.db, source.table, "ts", _NO_COMMIT_TS)
        position = (message.topic, message.partition or 0, message.offset or 0, 0)
        sink.add_row(kind, plan.schema, commit_ts, *images, position)

    def _exact_images(self, value: bytes, raw: tuple[Any, Any]) -> tuple[Any, Any]:
        """The images ``raw`` of a table with DECIMAL columns, read again from ``value`` with
        their numbers exact (:mod:`.typed`): those the change has (an INSERT no before...)."""
        try:
            payload = EXACT_IMAGES.decode(value).payload
        except NOT_TYPED as exc:  # (orjson read it: a difference between the two parsers)
            raise DecodeError(f"message is not valid JSON: {exc}") from None
        before, after = raw
        return (
            None if before is None else payload.before,
            None if after is None else payload.after,
        )

    def _open(self, message: Message) -> tuple[bytes, dict[str, Any], Any] | None:
        """The value (decompressed), its payload and its Connect schema (None when absent);
        None for a tombstone."""
        value = message.value
        if value is None:
            if message.key is None:
                raise DecodeError("a Debezium message needs a key or a value")
            return None  # a tombstone: Debezium's marker for log compaction after a delete
        if self._compressed:
            value = self._large.decompress(value)
        obj = require_dict(loads(value), "message")
        if "payload" not in obj or not _ENVELOPE_KEYS.issuperset(obj):
            return value, obj, None  # JsonConverter with schemas.enable=false
        payload = obj["payload"]
        if payload is None:
            return None  # JsonConverter's form of a tombstone ({"schema":null,"payload":null})
        return value, require_dict(payload, "payload"), obj.get("schema")

    def _commit_ts(self, ts: Any, required: bool = False) -> int:
        """A source's ``commit_ts``, checked (the unknown ts when absent and not required)."""
        if ts is None and not required:
            return UNKNOWN_COMMIT_TS
        if type(ts) is not int or not 0 <= ts < _TSO_END:  # (0: a re-encoded unknown ts)
            raise DecodeError(f"source.commit_ts must be a TiDB TSO, got {ts!r}")
        return ts

    def _key_names(self, key: bytes | None) -> tuple[str, ...]:
        """The handle-key column names: the fields of the key's payload."""
        if not key:
            return ()
        if self._compressed:
            key = self._large.decompress(key)
        obj = loads(key, "key")
        if isinstance(obj, dict) and "payload" in obj and _ENVELOPE_KEYS.issuperset(obj):
            obj = obj["payload"]
        if not isinstance(obj, dict):  # (a key of another converter: no key columns known)
            return ()
        return tuple(obj)

    def _ddl_into(
        self, payload: dict[str, Any], source: dict[str, Any], sink: RowSink, position: Any
    ) -> None:
        query = payload["ddl"]
        if not isinstance(query, str):
            raise DecodeError("'ddl' must be a string")
        database = str_field(payload, "databaseName") or str_field(source, "db")
        table = str_field(source, "table")
        if self._keep is not None:
            kept = self._keep.matches(database, table) if table else None
            if kept is False or (kept is None and not self._keep.matches_schema(database)):
                return
        ts = self._commit_ts(source.get("commit_ts"))
        ddl = DDLEvent(classify(query), query, ts, database, table)
        sink.add_events([ddl], *position)

    # table shapes -----------------------------------------------------------------------------

    def _schema_plan(
        self,
        connect: Connect,
        database: str,
        table: str,
        key: tuple[str, ...],
        key_data: bytes | None,
    ) -> Plan:
        # TiCDC writes the schema last: its text is the cache key, found without serializing
        value, schema, tail = connect
        tail = tail if tail is not None else schema_text(value)
        text = tail if tail is not None else _schema_text(schema)
        cache_key = (text, database, table, key)
        plan = self._plans.get(cache_key)
        if plan is None:
            if isinstance(schema, msgspec.Raw):  # (the typed path's raw text)
                schema = loads(bytes(schema), "schema")
            plan = self._plans.put(cache_key, connect_plan(schema, database, table, key))
        if tail is not None:
            if plan.exact and tail not in self._exact:  # (the typed start reads it exactly)
                if len(self._exact) >= 4096:
                    self._exact.clear()
                self._exact.add(tail)
            key_schema = schema_text(key_data)
            if key_schema is not None:  # (a shape the batch path may take from now)
                self._shapes.put((text, key_schema), (plan, key))
        return plan

    def _guessed(
        self, source: _Source, raw: tuple[Any, Any], key: tuple[str, ...], text: bool
    ) -> tuple[Plan, tuple[Image, Image]]:
        """The plan and images of a row without a Connect schema: the table's last guess
        when its readers take the values (they check the JSON types), else a new guess."""
        database, table = source.db, source.table
        slot = (database, table)
        guess = self._guesses.get(slot)
        if guess is None:
            if len(self._guesses) > 4096:
                self._guesses.clear()
            guess = self._guesses[slot] = Guess()
            self._warn_once(database, table, "schema", _NO_SCHEMA)
        plan = guess.plan
        if plan is not None and guess.key == key:
            try:
                return plan, (plan.image(raw[0], text), plan.image(raw[1], text))
            except (DecodeError, ValueError):
                pass  # a new column or a value of another JSON type: guess again
        for image in raw:
            if image is not None and type(image) is not dict:
                raise DecodeError(f"a row image must be an object, got {type(image).__name__}")
        plan = guess.plan_for(database, table, raw, key)
        return plan, (plan.image(raw[0], text), plan.image(raw[1], text))

    def _warn_once(self, database: str, table: str, what: str, text: str) -> None:
        slot = (database, table, what)
        if slot not in self._warned and len(self._warned) < 100_000:
            self._warned.add(slot)
            log.warning(text, PROTOCOL, f"{database}.{table}")


_NO_SCHEMA = (
    "%s: %s has no Connect schema (schemas.enable=false or debezium-disable-schema): column "
    "types are guessed from the JSON values (integers BIGINT, fractions DOUBLE, text "
    "LONGTEXT); dates, times, decimals, binary (base64), ENUM/SET names, BIT bytes and "
    "unsigned BIGINTs over 2^63-1 stay in their wire form, and a DECIMAL sent as a number "
    "keeps the 15-17 digits of a DOUBLE"
)
_NO_COMMIT_TS = (
    "%s: %s rows carry no source.commit_ts (genuine Debezium, not TiCDC): their commit ts is "
    "unknown (0) and their order is their partition offset"
)


def _schema_text(schema: Any) -> bytes:
    return bytes(schema) if isinstance(schema, msgspec.Raw) else orjson.dumps(schema)
