"""The Debezium decoder: TiCDC's Debezium messages and genuine Debezium MySQL connector output.

What a message is, from its value:

* ``{"payload": P, "schema": S}`` (Kafka Connect's JsonConverter with ``schemas.enable=true``,
  TiCDC by default), ``{"payload": P}`` (TiCDC with ``debezium-disable-schema``), or ``P``
  itself (JsonConverter with ``schemas.enable=false``);
* a null value is a tombstone, which Debezium sends after a delete so that log compaction can
  drop the key: it carries no change, and gives nothing;
* ``P.op`` ``c``/``r`` (snapshot read)/``u``/``d`` is a row, ``m`` TiCDC's checkpoint (a
  watermark at ``source.commit_ts``); no ``op`` and a ``ddl`` is a schema change.

Column types come from the Connect schema (:mod:`.connect`).  Without one, they are guessed
from the JSON values: an integer is read as BIGINT, a fraction as DOUBLE, a boolean as BIT(1),
text as LONGTEXT and an object as JSON, so DATE/DATETIME numbers, DECIMAL doubles, base64
binary values and ENUM names stay in their wire form; a warning says so, once per table.

TiCDC puts the commit ts in ``source.commit_ts``.  Genuine Debezium has none: its rows carry
:data:`~ticdc_spark.model.UNKNOWN_COMMIT_TS`, and their order is their partition position (a
warning says so once per table).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import chain
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
from ticdc_spark.codec.convert import NORMALIZED, Converter
from ticdc_spark.codec.debezium.batch import TICDC_HEAD, TICDC_SCHEMA, decode_batch
from ticdc_spark.codec.debezium.batch import key_schema_text as _key_schema_text
from ticdc_spark.codec.debezium.connect import read_field
from ticdc_spark.codec.debezium.dialect import DEBEZIUM
from ticdc_spark.codec.debezium.options import CHECKPOINT_OP, PROTOCOL, DebeziumOptions
from ticdc_spark.codec.debezium.typed import ENVELOPE, KEY, NOT_TYPED, RAW_NULL, utf8
from ticdc_spark.codec.debezium.typed import Source as _Source
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import (
    UNKNOWN_COMMIT_TS,
    Column,
    DDLEvent,
    Index,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.sql import classify
from ticdc_spark.types import ColumnType, Family

__all__ = ["DebeziumDecoder"]

# The dialect's readers that need no column facts (to recognise them in _text_of).
_DEFAULT_READERS = {
    family: DEBEZIUM.decoder(ColumnType(name))
    for family, name in ((Family.STRING, "text"), (Family.JSON, "json"))
}
_DEFAULT_READERS[Family.INTEGER] = DEBEZIUM.decoder(ColumnType("int"))

log = logging.getLogger(__name__)

_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE
_TSO_END = 1 << 64
_KINDS = {"c": RowKind.INSERT, "r": RowKind.INSERT, "u": RowKind.UPDATE, "d": RowKind.DELETE}
_ENVELOPE_KEYS = frozenset(("payload", "schema"))
_TICDC_HEAD, _TICDC_SCHEMA = TICDC_HEAD, TICDC_SCHEMA
Image = dict[str, Any] | None


class _Plan:
    """A table shape: its schema and, per column, the reader of its wire value and the
    changelog text of it."""

    __slots__ = (
        "changelog_schema",
        "columnar",
        "converters",
        "order",
        "passes",
        "readers",
        "schema",
        "seen",
        "texts",
    )

    def __init__(
        self,
        schema: TableSchema,
        readers: dict[str, Converter],
        passes: dict[str, type] | None = None,
    ) -> None:
        self.schema = schema
        self.readers = readers
        self.changelog_schema: str | None = None  # (the changelog's schema JSON, once asked)
        self.texts = {c.name: _text_of(readers[c.name], c.type) for c in schema.columns}
        # (for the batch path: per column in order, its text converter and the JSON type
        # whose values Arrow makes that text of, if any)
        self.order = tuple(self.texts)
        self.converters = list(self.texts.values())
        self.columnar = [_COLUMNAR.get(text) for text in self.converters]
        # (column, JSON type) pairs whose values the readers return unchanged (for guessed
        # columns only: their readers are type checks, or conversions of the other types)
        self.passes = (
            None
            if passes is None
            else frozenset(chain(passes.items(), ((name, _NONE) for name in readers)))
        )
        # (the images' column names and JSON types seen, and whether they pass unchanged)
        self.seen: dict[tuple[tuple[str, ...], tuple[type, ...]], bool] = {}

    def image(self, raw: Any, text: bool) -> Image:
        if raw is None:
            return None
        if type(raw) is not dict:
            raise DecodeError(f"a row image must be an object, got {type(raw).__name__}")
        if not text and self.passes is not None and self._unchanged(raw):
            return raw  # (every value is what its reader would return: no per-value calls)
        convert = self.texts if text else self.readers
        try:
            return {name: None if v is None else convert[name](v) for name, v in raw.items()}
        except KeyError as missing:
            raise DecodeError(
                f"column {missing.args[0]!r} is not in the schema of {self.schema.qualified_name}"
            ) from None

    def _unchanged(self, raw: dict[str, Any]) -> bool:
        """Whether each value of ``raw`` is null or of the type its column's reader returns
        unchanged (one set test per combination of names and types, no call per value)."""
        key = (tuple(raw), tuple(map(type, raw.values())))
        known = self.seen.get(key)
        if known is None:
            passes = self.passes or frozenset()
            known = passes.issuperset(zip(*key, strict=True))
            if len(self.seen) < _SEEN_MOST:
                self.seen[key] = known
        return known


_SEEN_MOST = 256  # (combinations of nulls a table's rows show: past these, the set test)


def _text_of(read: Converter, ctype: ColumnType) -> Converter:
    """The changelog text of a wire value: its canonical value printed as the normalized
    text; in one step for TiCDC's strings and integers, the common columns."""
    if read is _DEFAULT_READERS.get(ctype.family):
        if ctype.family in (Family.STRING, Family.JSON):
            return read  # (the text itself, checked to be a string)
        if ctype.family is Family.INTEGER and not (ctype.name == "bigint" and ctype.unsigned):
            return _integer_text
    write = NORMALIZED.encoder(ctype)
    return lambda value: write(read(value))


def _integer_text(value: Any) -> str:
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {value!r}")
    return str(value)


# Text converters whose text Arrow makes for a whole column of values of one JSON type.
_COLUMNAR: dict[Converter, type] = {_DEFAULT_READERS[Family.STRING]: str, _integer_text: int}


def _schema(database: str, table: str, columns: list[Column], key: tuple[str, ...]) -> TableSchema:
    names = {c.name for c in columns}
    key = tuple(k for k in key if k in names)
    if key:  # the key's columns are the handle key (TiCDC: the primary key or a unique key)
        columns = [c if c.name not in key else _not_null(c) for c in columns]
    indexes = (Index("PRIMARY", key, primary=True, unique=True),) if key else ()
    return TableSchema(database, table, tuple(columns), indexes).with_derived_flags()


def _not_null(column: Column) -> Column:
    return Column(column.name, column.type, False, column.default, column.generated)


class _Guess:
    """Column types of a table without a Connect schema, guessed from its values and kept
    (a NULL does not change a column's guess)."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[ColumnType, Converter]] = {}
        self.plan: _Plan | None = None
        self.key: tuple[str, ...] = ()

    def plan_for(
        self, database: str, table: str, images: tuple[Image, ...], key: tuple[str, ...]
    ) -> _Plan:
        changed = key != self.key or self.plan is None
        for image in images:
            for name, value in (image or {}).items():
                guess = _guess(value)
                known = self.types.get(name)
                if guess is _INTEGER and known is _DOUBLE:
                    continue  # (a DOUBLE's whole numbers print without a fraction)
                if guess is not None and (known is None or known[0] != guess[0]):
                    self.types[name], changed = guess, True
                elif known is None:
                    self.types[name], changed = _UNKNOWN, True
        if changed or self.plan is None:
            columns = [Column(name, t) for name, (t, _) in self.types.items()]
            readers = {name: reader for name, (_, reader) in self.types.items()}
            passes = {
                name: _PASSES[reader] for name, reader in readers.items() if reader in _PASSES
            }
            self.plan = _Plan(_schema(database, table, columns, key), readers, passes)
            self.key = key
        return self.plan


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _bool_int(value: Any) -> int:
    if type(value) is not bool:
        raise ValueError(f"expected a boolean, got {value!r}")
    return int(value)


def _checked(kind: type) -> Converter:
    def read(value: Any) -> Any:
        if type(value) is not kind:
            raise ValueError(f"expected {kind.__name__}, got {value!r}")
        return value

    return read


def _double(value: Any) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


_UNKNOWN = (ColumnType("longtext"), _checked(str))  # (only NULLs seen so far)
_INTEGER = (ColumnType("bigint"), _checked(int))
_DOUBLE = (ColumnType("double"), _double)
_GUESSES: dict[type, tuple[ColumnType, Converter]] = {
    bool: (ColumnType("bit", length=1), _bool_int),
    int: _INTEGER,
    float: _DOUBLE,
    str: (ColumnType("longtext"), _checked(str)),
    dict: (ColumnType("json"), _json_text),
    list: (ColumnType("json"), _json_text),
}


# The JSON type each guessed reader returns unchanged.
_PASSES: dict[Converter, type] = {
    _UNKNOWN[1]: str,
    _INTEGER[1]: int,
    _DOUBLE[1]: float,
    _GUESSES[str][1]: str,
    _json_text: str,
}
_NONE = type(None)


def _guess(value: Any) -> tuple[ColumnType, Converter] | None:
    return None if value is None else _GUESSES[type(value)]


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
        self._plans: LRUCache[Any, _Plan] = LRUCache(4096)
        # (value schema text, key schema text) -> (plan, the key's column names), for the
        # batch path's TiCDC records
        self._shapes: LRUCache[tuple[bytes, bytes], tuple[_Plan, tuple[str, ...]]] = LRUCache(4096)
        self._guesses: dict[tuple[str, str], _Guess] = {}
        self._warned: set[tuple[str, str, str]] = set()

    def snapshot(self) -> dict[tuple[str, str], tuple[Any, ...]]:
        """The column types guessed so far for tables without a Connect schema
        (``codec.base.StatefulDecoder``: the guesses depend on the records seen)."""
        return {table: (dict(g.types), g.plan, g.key) for table, g in self._guesses.items()}

    def restore(self, snapshot: dict[tuple[str, str], tuple[Any, ...]]) -> None:
        self._guesses = {}
        for table, (types, plan, key) in snapshot.items():
            guess = self._guesses[table] = _Guess()
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
        try:
            envelope = ENVELOPE.decode(value)
            key_names = tuple(KEY.decode(key).payload) if key else ()
        except NOT_TYPED:
            return False
        payload = envelope.payload
        kind, source = _KINDS.get(payload.op), payload.source
        if kind is None or source is None:
            return False
        if self._keep is not None and not self._keep.matches(source.db, source.table):
            return True
        schema = None if envelope.schema == RAW_NULL else (value, envelope.schema)
        images = (payload.before, payload.after)
        try:
            self._row_into(message, sink, kind, payload.op, source, images, schema, key_names)
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
        connect = None if schema is None else (value, schema)
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
        connect: tuple[bytes, Any] | None,
        key_names: tuple[str, ...],
    ) -> None:
        """A row change into the sink; ``connect`` is the (decompressed) value and its Connect
        schema (an object, or its raw text), None when the message has none."""
        database, table = source.db, source.table
        before, after = raw
        if kind is _UPDATE and before is None:
            kind = _INSERT  # output-old-value off: the update is an upsert
        if kind is _INSERT:
            before = None
        elif kind is _DELETE:
            after = None
        text = sink.text
        if connect is not None:
            plan = self._schema_plan(
                *connect,
                database,
                table,
                key_names,
                _key_schema_text(message.key),
            )
            images = (plan.image(before, text), plan.image(after, text))
        else:
            plan, images = self._guessed(database, table, (before, after), key_names, text)
        if images[kind is not _DELETE] is None:
            side = "before" if kind is _DELETE else "after"
            raise DecodeError(f"op {op!r} without its {side!r} image")
        commit_ts = source.commit_ts
        if type(commit_ts) is not int or not 0 < commit_ts < _TSO_END:
            commit_ts = self._commit_ts(commit_ts)  # (raises, or the unknown ts, warned once)
            if commit_ts == UNKNOWN_COMMIT_TS:
                self._warn_once(database, table, "ts", _NO_COMMIT_TS)
        position = (message.topic, message.partition or 0, message.offset or 0, 0)
        sink.add_row(kind, plan.schema, commit_ts, *images, position)

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
        value: bytes,
        schema: Any,
        database: str,
        table: str,
        key: tuple[str, ...],
        key_schema: bytes | None,
    ) -> _Plan:
        # TiCDC writes the schema last: its text is the cache key, found without serializing
        at = value.rfind(_TICDC_SCHEMA) if value.startswith(_TICDC_HEAD) else -1
        text = value[at:] if at > 0 else _schema_text(schema)
        cache_key = (text, database, table, key)
        plan = self._plans.get(cache_key)
        if plan is None:
            if isinstance(schema, msgspec.Raw):  # (the typed path's raw text)
                schema = loads(bytes(schema), "schema")
            plan = self._plans.put(cache_key, _connect_plan(schema, database, table, key))
        if at > 0 and key_schema is not None:  # (a shape the batch path may take from now)
            self._shapes.put((text, key_schema), (plan, key))
        return plan

    def _guessed(
        self,
        database: str,
        table: str,
        raw: tuple[Any, Any],
        key: tuple[str, ...],
        text: bool,
    ) -> tuple[_Plan, tuple[Image, Image]]:
        """The plan and images of a row without a Connect schema: the table's last guess
        when its readers take the values (they check the JSON types), else a new guess."""
        slot = (database, table)
        guess = self._guesses.get(slot)
        if guess is None:
            if len(self._guesses) > 4096:
                self._guesses.clear()
            guess = self._guesses[slot] = _Guess()
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
    "unsigned BIGINTs over 2^63-1 stay in their wire form"
)
_NO_COMMIT_TS = (
    "%s: %s rows carry no source.commit_ts (genuine Debezium, not TiCDC): their commit ts is "
    "unknown (0) and their order is their partition offset"
)


def _schema_text(schema: Any) -> bytes:
    return bytes(schema) if isinstance(schema, msgspec.Raw) else orjson.dumps(schema)


def _connect_plan(schema: Any, database: str, table: str, key: tuple[str, ...]) -> _Plan:
    """The plan of a value's Connect schema: the fields of its ``after`` (else ``before``)
    struct."""
    envelope = require_dict(schema, "schema")
    fields = envelope["fields"]
    if not isinstance(fields, list):
        raise DecodeError("schema 'fields' must be an array")
    structs = {f.get("field"): f for f in fields if isinstance(f, dict)}
    image = structs.get("after") or structs.get("before")
    if image is None:
        raise DecodeError("the schema has no 'after' or 'before' struct")
    row_fields = image["fields"]
    if not isinstance(row_fields, list):
        raise DecodeError("the 'after' struct's 'fields' must be an array")
    columns, readers = [], {}
    for field in row_fields:
        column, reader = read_field(field)
        if column.name in readers:
            raise DecodeError(f"column {column.name!r} appears twice in the schema")
        columns.append(column)
        readers[column.name] = reader
    return _Plan(_schema(database, table, columns, key), readers)
