"""Simple decoding: one message, JSON or Avro, into a :class:`~ticdc_spark.codec.base.RowSink`.

The decoder keeps the consumer's state (:mod:`.memo`): the table schemas BOOTSTRAP and DDL
messages brought, by (database, table, version), and the rows whose schema has not arrived
yet.  A held row comes out, at its own position, right after the BOOTSTRAP or DDL event that
brings its schema, at that message's position (sequence numbers 1, 2, ... after the event):
so ``decode`` of that message returns the schema event and then the rows it released, and a
whole input decoded with one decoder gives every row once its schema is known.
:meth:`SimpleDecoder.waiting` says what is still held (at the end of an input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ticdc_spark.codec.base import (
    ChangelogSink,
    DecoderBase,
    EventSink,
    Message,
    Position,
    RowSink,
)
from ticdc_spark.codec.common import decoding, loads, refuse_empty, require_dict
from ticdc_spark.codec.compiled import BASE64, kind_of
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.convert import NORMALIZED, Dialect
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.codec.simple import avro
from ticdc_spark.codec.simple.dialect import (
    avro_dialect,
    is_timestamp,
    json_dialect,
    timestamp_text,
)
from ticdc_spark.codec.simple.flat import FlatTimestamp, read_flat_row
from ticdc_spark.codec.simple.memo import HeldRows, SchemaKey, SchemaMemo
from ticdc_spark.codec.simple.options import PROTOCOL, SimpleOptions
from ticdc_spark.codec.simple.wire import (
    BOOTSTRAP,
    DDL_KINDS,
    WATERMARK,
    ddl_type_of,
    schema_from_wire,
)
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    Event,
    RowChange,
    RowChecksum,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.types import Family

__all__ = ["HeldRowError", "SimpleDecoder"]

_KINDS = {"INSERT": RowKind.INSERT, "UPDATE": RowKind.UPDATE, "DELETE": RowKind.DELETE}
_OPS = {kind: name for name, kind in _KINDS.items()}  # (a dict: cheaper than kind.value)


# A row as the flat path reads it: (kind, schema, commit ts, before, after).
_FlatRow = tuple[RowKind, TableSchema, int, dict[str, Any] | None, dict[str, Any] | None]


@dataclass(slots=True)
class _Held:
    """A DML message waiting for its schema: the message (parsed) and where it was read."""

    obj: dict[str, Any]
    position: str


@dataclass(slots=True)
class _Readers:
    """How one schema version's images are read, to canonical values and to text."""

    schema: TableSchema
    canonical: dict[str, Callable[[Any], Any]]
    text: dict[str, Callable[[Any], Any]]
    timestamps: tuple[str, ...]  # (JSON) columns sent as {"location", "value"}
    # (JSON) for compiled_values.text_image: the columns whose text is not their value
    compiled: tuple[tuple[str, int, Callable[[Any], Any]], ...]
    unwrapped: dict[str, Callable[[Any], Any]]  # (JSON) text -> value, TIMESTAMP text too


def _readers(schema: TableSchema, values: Dialect, json: bool) -> _Readers:
    canonical = {c.name: values.decoder(c.type) for c in schema.columns}
    text = {c.name: values.text(c.type) for c in schema.columns}
    if not json:
        return _Readers(schema, canonical, text, (), (), {})
    unwrapped = {c.name: NORMALIZED.decoder(c.type) for c in schema.columns}
    own = {unwrapped[c.name]: BASE64 for c in schema.columns if c.type.family is Family.BYTES}
    compiled = tuple(
        (name, kind_of(parse, own), parse) for name, parse in unwrapped.items() if parse is not str
    )
    timestamps = tuple(c.name for c in schema.columns if is_timestamp(c.type))
    return _Readers(schema, canonical, text, timestamps, compiled, unwrapped)


class HeldRowError(DecodeError):
    """A held row that does not fit the schema that came for it, named by its own record.

    Raised by the message that released it, after everything else that message decodes to
    (its schema event, the other held rows) went into the sink: :meth:`SimpleDecoder.decode`
    keeps those in ``events``, to be used, not dropped with the bad row.
    """

    events: list[Event]


class SimpleDecoder(DecoderBase):
    """Decodes Simple messages, keeping the schema memo and the held rows across messages."""

    protocol = PROTOCOL

    def __init__(
        self, options: SimpleOptions | None = None, *, table_filter: TableFilter | None = None
    ) -> None:
        self.options = options or SimpleOptions()
        self._keep = None if table_filter is None or table_filter.everything else table_filter
        self._avro = self.options.encoding_format == "avro"
        tz = self.options.time_zone
        self._values = avro_dialect(tz) if self._avro else json_dialect(tz)
        self._large = LargeMessages(PROTOCOL, self.options)
        self.memo: SchemaMemo[_Readers] = SchemaMemo()
        self._known = self.memo.entries  # (read directly by the flat path)
        # the flat path takes JSON rows without compression, table filter or extra members
        self._plain_json = not (self._avro or self._keep is not None)
        self._plain_json = self._plain_json and self._large.compression == "none"
        self.held: HeldRows[_Held] = HeldRows(
            self.options.max_held_rows, self.options.max_held_bytes, PROTOCOL
        )

    def decode(self, message: Message) -> list[Event]:
        """:meth:`decode_into` a list, the common row (see :meth:`_flat_row`) without a sink.

        A held row that does not fit the schema releasing it raises :class:`HeldRowError`
        carrying the events decoded before it (the other released rows are not lost)."""
        if self._plain_json:
            flat = self._flat_row(message.value, False)
            if flat is not None:
                return [RowChange(*flat)]
        sink = EventSink()
        try:
            self.decode_into(message, sink)
        except HeldRowError as exc:
            exc.events = sink.events
            raise
        return sink.events

    def waiting(self) -> list[tuple[SchemaKey, int]]:
        """(schema key, rows) of the rows still held for want of their schema."""
        return self.held.waiting()

    def decode_into(self, message: Message, sink: RowSink) -> None:
        if self._plain_json and self._row_at_once(message, sink):
            return
        where: Position = (message.topic, message.partition or 0, message.offset or 0, 0)
        with decoding(PROTOCOL, message):
            refuse_empty(message, ("value",))
            value = self._large.decompress(message.value or b"")
            obj = self._parse(value)
            kind = obj.get("type")
            if kind in _KINDS:
                waits = self._dml(obj, sink, where, len(value))
            else:
                event = self._event(obj, kind)
        if kind in _KINDS:
            if waits is not None:  # (outside `decoding`: the bound's error is no DecodeError)
                key, full, size = waits  # (full: the message a claim-check pointer named)
                self._wait(key, full, size, message, sink)
            return
        if event is not None:
            self._add_schema_event(event, message, sink, where)

    # What a pipeline decoder changes (codec.simple.pipeline): where a row waits for its
    # schema, and what a BOOTSTRAP or DDL message leaves in the sink.

    def _wait(
        self, key: SchemaKey, obj: dict[str, Any], size: int, message: Message, sink: RowSink
    ) -> None:
        """A row whose schema has not arrived: held, bounded, until a message brings it
        (``size``: the bytes it holds, the decompressed or fetched message)."""
        self.held.add(key, _Held(obj, message.position), size)

    def _add_schema_event(
        self, event: Event, message: Message, sink: RowSink, where: Position
    ) -> None:
        """The event, then the held rows whose schema it brought."""
        sink.add_events([event], *where[:3])
        self._release(_schema_keys(event), sink, where)

    def learn(self, schema: TableSchema) -> None:
        """Know a table schema by its version, as if a BOOTSTRAP had brought it."""
        key = (schema.database, schema.table, schema.version)
        known = self.memo.get(key)
        if known is None or known.schema != schema:
            self.memo.put(key, _readers(schema, self._values, not self._avro))

    def snapshot(self) -> dict[SchemaKey, _Readers]:
        """The schemas known (``codec.base.StatefulDecoder``)."""
        return dict(self.memo.entries)

    def restore(self, snapshot: dict[SchemaKey, _Readers]) -> None:
        entries = self.memo.entries  # (in place: the flat path reads this very dict)
        entries.clear()
        entries.update(snapshot)

    def schemas(self) -> list[TableSchema]:
        """The table schemas known, by version (oldest learned first)."""
        return [readers.schema for readers in self.memo.entries.values()]

    def decode_batch(
        self,
        values: list[bytes | None],
        topics: list[str],
        partitions: list[int],
        offsets: list[int],
        sink: ChangelogSink,
        one_by_one: Callable[[int], None],
    ) -> None:
        """The changelog rows of a batch of messages (the Spark decode stage's path,
        :class:`~ticdc_spark.codec.base.BatchDecoder`): each common row (see
        :meth:`_flat_row`) straight into ``sink`` in its wire text, the values' type left to
        Arrow; every other message through ``one_by_one(i)``, in order (it decodes a
        BOOTSTRAP or DDL message, after which this path knows that schema too)."""
        if not self._plain_json:
            for i in range(len(values)):
                one_by_one(i)
            return
        append_row, flat_row = sink.append_row, self._flat_row
        texts: dict[int, str] = {}  # id(schema) -> its changelog schema JSON
        for i, value in enumerate(values):
            flat = flat_row(value, True, False)
            if flat is None:
                one_by_one(i)
                continue
            kind, schema, commit_ts, before, after = flat
            text = texts.get(id(schema))
            if text is None:
                text = texts[id(schema)] = sink.schema_text(schema) or ""
            where = (topics[i], partitions[i], offsets[i], 0)
            append_row(
                _OPS[kind], schema.database, schema.table, commit_ts, before, after, text, where
            )

    def _row_at_once(self, message: Message, sink: RowSink) -> bool:
        """The common row (see :meth:`_flat_row`) into ``sink``; False (nothing emitted) for
        anything else, which the full path then decodes with every check and the precise
        error."""
        text = sink.text
        flat = self._flat_row(message.value, text)
        if flat is None:
            return False
        where = (message.topic, message.partition or 0, message.offset or 0, 0)
        if text:
            sink.add_row(*flat, where)
        else:
            sink.add_events([RowChange(*flat)], *where)
        return True

    def _flat_row(self, value: bytes | None, text: bool, typed: bool = True) -> _FlatRow | None:
        """The common case in one flat function: a plainly right JSON row whose schema is
        known, as (kind, schema, commit ts, before, after); None for anything else.
        (``typed``: see :func:`_json_image`.)"""
        try:
            row: Any = read_flat_row(value)  # type: ignore[arg-type]  # (a flat.FlatRow)
            kind = _KINDS[row.type]
            readers = self._known[(row.database, row.table, row.schemaVersion)]
            # (an image the kind needs but the message lacks (None) fails in _json_image)
            after = None if kind is RowKind.DELETE else _json_image(readers, row.data, text, typed)
            before = None if kind is RowKind.INSERT else _json_image(readers, row.old, text, typed)
        except Exception:  # (whatever it was, the full path says it precisely)
            return None
        return kind, readers.schema, row.commitTs, before, after

    # parsing ------------------------------------------------------------------------------

    def _parse(self, value: bytes) -> dict[str, Any]:
        if self._avro:
            return avro.read_message(value)
        return require_dict(loads(value), "a Simple message")

    def _event(self, obj: dict[str, Any], kind: Any) -> Event | None:
        if kind == WATERMARK:
            return Watermark(_ts(obj, "commitTs"))
        if kind == BOOTSTRAP:
            schema = self._remember(obj.get("tableSchema"), "tableSchema")
            if schema is None:
                raise DecodeError("a BOOTSTRAP message needs a tableSchema with columns")
            build = obj.get("buildTs")
            event: Event = Bootstrap(schema, build if type(build) is int else 0)
        elif kind in DDL_KINDS:
            event = self._ddl(obj, kind)
        else:
            raise DecodeError(f"unknown message type {kind!r}")
        if self._keep is not None and not self._kept(event):
            return None
        return event

    def _ddl(self, obj: dict[str, Any], kind: str) -> DDLEvent:
        sql = obj.get("sql") or ""
        if not isinstance(sql, str):
            raise DecodeError("DDL 'sql' must be a string")
        raw_schema = obj.get("tableSchema")
        schema = self._remember(raw_schema, "tableSchema")
        before = self._remember(obj.get("preTableSchema"), "preTableSchema")
        named = schema_from_wire(raw_schema) if schema is None and raw_schema else schema
        database = named.database if named is not None else ""
        table = named.table if named is not None else ""
        ddl_type = ddl_type_of(kind, sql)
        return DDLEvent(ddl_type, sql, _ts(obj, "commitTs"), database, table, schema, before)

    def _remember(self, raw: Any, what: str) -> TableSchema | None:
        """Memo a schema (None and a schema without columns are not: a table's name only)."""
        if raw is None:
            return None
        schema = schema_from_wire(raw, what)
        if not schema.columns:
            return None
        key = (schema.database, schema.table, schema.version)
        known = self.memo.get(key)
        if known is not None and known.schema == schema:
            return known.schema  # (the same schema again: its readers are kept)
        self.memo.put(key, _readers(schema, self._values, not self._avro))
        return schema

    def _kept(self, event: Event) -> bool:
        keep = self._keep
        assert keep is not None
        if isinstance(event, Bootstrap):
            return keep.matches(event.schema.database, event.schema.table)
        if isinstance(event, DDLEvent):
            if not event.table:
                return not event.database or keep.matches_schema(event.database)
            return keep.matches(event.database, event.table)
        return True

    # rows ---------------------------------------------------------------------------------

    def _dml(
        self, obj: dict[str, Any], sink: RowSink, where: Position, size: int
    ) -> tuple[SchemaKey, dict[str, Any], int] | None:
        """Emit a row, or return the schema key it must wait for, the full message and the
        bytes it holds (``size``: the message's, decompressed; a claim-check pointer's: the
        message it named, which is what is held)."""
        location = obj.get("claimCheckLocation")
        if location is not None:
            obj, size = self._claim_checked(location)
        database, table = _name(obj, "database"), _name(obj, "table")
        if self._keep is not None and not self._keep.matches(database, table):
            return None
        key = (database, table, _ts(obj, "schemaVersion", 0))
        readers = self.memo.get(key)
        if readers is None:
            _check_images(obj)
            return key, obj, size
        self._emit(obj, readers, sink, where)
        return None

    def _claim_checked(self, location: Any) -> tuple[dict[str, Any], int]:
        """The full message a claim-check pointer names, and its size."""
        if not isinstance(location, str):
            raise DecodeError("claimCheckLocation must be a string")
        _, value = self._large.fetch(location)
        value = self._large.decompress(value)
        obj = self._parse(value)
        if obj.get("type") not in _KINDS or obj.get("claimCheckLocation") is not None:
            raise DecodeError("a claim-check file must hold one full DML message")
        return obj, len(value)

    def _release(self, keys: list[SchemaKey], sink: RowSink, where: Position) -> None:
        """Emit the rows held for schemas that just arrived, in the order they arrived, after
        the event that brought them: at its message's position, numbered on (as ``decode``
        gives them, in one list with that event).  A row that does not fit its schema is
        left out and the others still come out; then a :class:`HeldRowError` names the
        first such row's own record (its message was consumed when the row was held)."""
        topic, partition, offset, _ = where
        failed: list[DecodeError] = []
        for seq, held in enumerate(self.held.release(keys), 1):
            key = (held.obj["database"], held.obj["table"], held.obj.get("schemaVersion", 0))
            readers = self.memo.get(key)
            assert readers is not None  # (released for a schema just memoed)
            try:
                self._emit(held.obj, readers, sink, (topic, partition, offset, seq))
            except DecodeError as exc:
                failed.append(exc.at(held.position, PROTOCOL))
            except (ValueError, TypeError, KeyError, ArithmeticError, UnicodeError) as exc:
                reason = f"held row does not fit schema version {key[2]}: {exc}"
                failed.append(DecodeError(reason, protocol=PROTOCOL, position=held.position))
        if failed:
            first = failed[0]
            others = f" ({len(failed) - 1} other held row(s) failed too)" if len(failed) > 1 else ""
            raise HeldRowError(
                first.reason + others, protocol=PROTOCOL, position=first.position
            ) from None

    def _emit(self, obj: dict[str, Any], readers: _Readers, sink: RowSink, where: Position) -> None:
        kind = _KINDS[obj["type"]]
        text = sink.text
        data, old = obj.get("data"), obj.get("old")
        after = None if kind is RowKind.DELETE else self._image(readers, data, "data", text)
        before = None if kind is RowKind.INSERT else self._image(readers, old, "old", text)
        commit_ts = _ts(obj, "commitTs")
        key_only = obj.get("handleKeyOnly") is True
        if text:
            sink.add_row(kind, readers.schema, commit_ts, before, after, where, key_only=key_only)
            return
        checksum = _checksum(obj.get("checksum"))
        if checksum is not None and checksum.corrupted and self.options.enable_row_checksum:
            raise DecodeError(f"row of {readers.schema.qualified_name} is marked corrupted")
        row = RowChange(kind, readers.schema, commit_ts, before, after, None, key_only)
        row.checksum = checksum
        sink.add_events([row], *where[:3], where[3])

    def _image(self, readers: _Readers, raw: Any, what: str, text: bool) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise DecodeError(f"'{what}' must be an object")
        if not self._avro:
            return _json_image(readers, raw, text)
        convert = readers.text if text else readers.canonical
        return _converted(convert, raw)


def _json_image(
    readers: _Readers, raw: dict[str, Any], text: bool, typed: bool = True
) -> dict[str, Any]:
    """A JSON image: TIMESTAMP objects unwrapped to their text, then the compiled loop (or
    the Python one) for canonical values, or the text checked for the changelog (with
    ``typed`` False, all but the values' type: a batch path leaves that check to Arrow)."""
    for name in readers.timestamps:  # (in place: the parsed message is the decoder's own)
        value = raw.get(name)
        if value is not None:  # (the flat path's reader gives the object as a struct)
            raw[name] = value.value if type(value) is FlatTimestamp else timestamp_text(value)
    if text:
        if not readers.unwrapped.keys() >= raw.keys():
            raise DecodeError(f"column {_unknown(readers, raw)!r} is not in the table schema")
        for name, value in raw.items() if typed else ():
            if value is not None and type(value) is not str:
                raise DecodeError(f"column {name!r}: expected a string, got {value!r}")
        return raw
    if compiled_values is not None:
        image = compiled_values.text_image(readers.compiled, raw, readers.unwrapped)
        if image is not None:
            return image  # type: ignore[no-any-return]
    return _converted(readers.unwrapped, raw, strings=True)


def _converted(
    convert: dict[str, Callable[[Any], Any]], raw: dict[str, Any], strings: bool = False
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in raw.items():
        read = convert.get(name)
        if read is None:
            raise DecodeError(f"column {name!r} is not in the table schema")
        if value is None:
            out[name] = None
            continue
        if strings and type(value) is not str:
            raise DecodeError(f"column {name!r}: expected a string, got {value!r}")
        try:
            out[name] = read(value)
        except (ValueError, TypeError, KeyError, ArithmeticError, UnicodeError) as exc:
            raise DecodeError(f"column {name!r}: {exc}") from None
    return out


def _unknown(readers: _Readers, raw: dict[str, Any]) -> str:
    return next(name for name in raw if name not in readers.unwrapped)


def _check_images(obj: dict[str, Any]) -> None:
    """What can be checked of a row before its schema is known: its images are objects."""
    kind = obj["type"]
    if kind != "DELETE" and not isinstance(obj.get("data"), dict):
        raise DecodeError(f"a {kind} needs 'data'")
    if kind != "INSERT" and not isinstance(obj.get("old"), dict):
        raise DecodeError(f"a {kind} needs 'old'")
    _ts(obj, "commitTs")


def _ts(obj: dict[str, Any], name: str, default: int | None = None) -> int:
    value = obj.get(name, default)
    if type(value) is not int or value < 0:
        raise DecodeError(f"{name!r} must be a non-negative integer, got {value!r}")
    return value


def _name(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise DecodeError(f"a DML message needs {name!r}")
    return value


def _checksum(raw: Any) -> RowChecksum | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise DecodeError("'checksum' must be an object")
    version, current, previous = raw.get("version"), raw.get("current"), raw.get("previous")
    if not all(type(v) is int for v in (version, current, previous)):
        raise DecodeError("'checksum' needs integer version, current and previous")
    return RowChecksum(version, raw.get("corrupted") is True, current, previous)  # type: ignore[arg-type]


def _schema_keys(event: Event) -> list[SchemaKey]:
    schemas: list[TableSchema | None] = []
    if isinstance(event, Bootstrap):
        schemas = [event.schema]
    elif isinstance(event, DDLEvent):
        schemas = [event.schema, event.schema_before]
    return [(s.database, s.table, s.version) for s in schemas if s is not None]
