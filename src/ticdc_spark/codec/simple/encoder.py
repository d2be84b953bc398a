"""Simple encoding: one message per event, JSON or Avro, as TiCDC's simple marshallers write.

Rows get BOOTSTRAP messages on TiCDC's cadence (:class:`BootstrapCadence`): before a table's
first row, then every ``send-bootstrap-interval-in-sec`` seconds or
``send-bootstrap-in-msg-count`` rows, none for a table idle 30 minutes (its next row starts
over).  TiCDC's bootstrap worker checks on a 5 s ticker; here the check runs on each row
and on each watermark, with the encoder's ``clock`` (milliseconds, injectable for tests),
which also gives each message's ``buildTs``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ticdc_spark.codec.base import Message, Route
from ticdc_spark.codec.common import INPUT_ERRORS, LRUCache, handle_key_image, row_encode_error
from ticdc_spark.codec.compiled import text_kind
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.convert import NORMALIZED, Dialect
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.codec.simple import avro, avrorows
from ticdc_spark.codec.simple.dialect import is_timestamp, json_dialect
from ticdc_spark.codec.simple.options import PROTOCOL, SimpleOptions
from ticdc_spark.codec.simple.wire import (
    BOOTSTRAP,
    VERSION,
    WATERMARK,
    ddl_kind,
    schema_to_avro,
    schema_to_json,
)
from ticdc_spark.errors import EncodeError, TiCDCSparkError
from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    DDLType,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.sql import parse_create_table
from ticdc_spark.types import ColumnType, Family

__all__ = ["BootstrapCadence", "SimpleEncoder"]

IDLE_MS = 30 * 60 * 1000  # TiCDC's defaultMaxInactiveDuration


@dataclass(slots=True)
class _TableCadence:
    schema: TableSchema
    sent_ms: int
    last_row_ms: int
    rows: int = 0  # rows since the last bootstrap


class BootstrapCadence:
    """When each table is due a BOOTSTRAP message (TiCDC's bootstrapWorker)."""

    def __init__(self, interval_s: int, every_rows: int, idle_ms: int = IDLE_MS) -> None:
        self.interval_ms = interval_s * 1000
        self.every_rows = every_rows
        self.idle_ms = idle_ms
        self._tables: dict[tuple[str, str], _TableCadence] = {}

    def before_row(self, row: RowChange, now: int) -> TableSchema | None:
        """The schema to bootstrap before ``row``: its table's first row (or first after 30
        idle minutes), or a bootstrap is due."""
        slot = (row.schema.database, row.schema.table)
        table = self._tables.get(slot)
        if table is None or now - table.last_row_ms > self.idle_ms:
            self._tables[slot] = _TableCadence(row.schema, now, now, 1)
            return row.schema
        table.last_row_ms = now
        changed = table.schema is not row.schema and table.schema != row.schema
        table.schema = row.schema
        due = self._due(table, now, changed)
        table.rows += 1
        return row.schema if due else None

    def sent(self, schema: TableSchema, now: int) -> None:
        """``schema`` was sent (a Bootstrap event, or a DDL's tableSchema): the cadence of its
        table starts over from it."""
        self._tables[(schema.database, schema.table)] = _TableCadence(schema, now, now)

    def due(self, now: int) -> list[TableSchema]:
        """Schemas of the active tables due a periodic bootstrap (idle ones are forgotten)."""
        out = []
        for slot, table in list(self._tables.items()):
            if now - table.last_row_ms > self.idle_ms:
                del self._tables[slot]
            elif self._due(table, now):
                out.append(table.schema)
        return out

    def _due(self, table: _TableCadence, now: int, changed: bool = False) -> bool:
        """Due: the interval or the row count reached, or (``changed``) the table's schema
        changed under the same version (TiCDC bumps the version; events built by hand or
        read from another protocol may not, and a consumer must not read the rows with the
        old one)."""
        if changed or now - table.sent_ms >= self.interval_ms or table.rows >= self.every_rows:
            table.sent_ms, table.rows = now, 0
            return True
        return False


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Plan:
    """How one table schema's images are written: columns in name order (TiCDC's Go map
    order in JSON), each with its value writer."""

    json: tuple[tuple[str, Callable[[Any], Any]], ...]
    avro: tuple[avro.PlanColumn, ...]
    # for compiled_values.text_object: (JSON key and colon, name, kind, fsp, formatter)
    compiled: tuple[tuple[bytes, str, int, int, Callable[[Any], str]], ...]
    timestamps: tuple[bytes, ...]  # the JSON keys (with ':"') of the TIMESTAMP columns
    avro_texts: tuple[tuple[bytes, str, int, int, Callable[[Any], str]], ...]  # (see _texts)
    avro_writer: avrorows.TableWriter  # the images' writers made for the table
    avro_head: bytes  # a DML message up to its type: Message branch ... tableID
    avro_version: bytes  # the schemaVersion as written


def _plan(schema: TableSchema, json_values: Dialect, location: bytes, avro_too: bool) -> _Plan:
    """A table's plan; its Avro writers compiled only for the Avro encoding (``avro_too``)."""
    columns = sorted(schema.columns, key=lambda c: c.name.encode())
    avro_columns = tuple(
        avro.plan_column(c.name, c.type, _text_of(c.type), location) for c in columns
    )
    avro_texts = tuple(
        (b"\x00", c.name, *text_kind(c.type), NORMALIZED.encoder(c.type))
        for c in columns
        if c.type.family in _AVRO_TEXTS
    )
    return _Plan(
        tuple((c.name, json_values.encoder(c.type)) for c in columns),
        avro_columns,
        tuple(
            (orjson.dumps(c.name) + b":", c.name, *text_kind(c.type), NORMALIZED.encoder(c.type))
            for c in columns
        ),
        tuple(orjson.dumps(c.name) + b':"' for c in columns if is_timestamp(c.type)),
        avro_texts,
        avrorows.TableWriter(
            avro_columns if avro_too else (), tuple(name for _, name, *_ in avro_texts)
        ),
        avro.dml_head(schema.database, schema.table, schema.table_id),
        avro.long_bytes(schema.version),
    )


# The families Avro writes as MySQL text: their texts come from the compiled loop at once.
_AVRO_TEXTS = frozenset((Family.DECIMAL, Family.DATE, Family.DATETIME, Family.TIME))


def _texts(plan: _Plan, image: dict[str, Any]) -> list[bytes] | None:
    """The MySQL text of an image's DECIMAL and temporal columns by the compiled loop, as
    the pieces :func:`.avrorows._text_locals` reads, or None (not built, nothing to do, it
    gave up, a column is missing, or a text has an escape: the Avro writer formats them)."""
    if compiled_values is None or not plan.avro_texts:
        return None
    data = compiled_values.text_object(plan.avro_texts, image)
    if data is None or b"\\" in data:
        return None
    pieces: list[bytes] = data.split(b"\x00")
    return pieces if len(pieces) == len(plan.avro_texts) + 1 else None


def _json_object(plan: _Plan, image: dict[str, Any], location: bytes) -> bytes | None:
    """The JSON of an image by the compiled loop (None when it is not built or gives up):
    MySQL text per column, each TIMESTAMP's text then wrapped in its object."""
    if compiled_values is None:
        return None
    data: bytes | None = compiled_values.text_object(plan.compiled, image)
    if data is None:
        return None
    for key in plan.timestamps:
        # a structural quote: inside a string value every quote is escaped
        at = 0 if data.startswith(b"{" + key) else data.find(b"," + key)
        if at < 0:
            continue  # (absent, or null)
        start = at + len(key)  # the value's opening quote
        end = data.index(b'"', start + 1) + 1  # (temporal text holds no quote)
        wrapped = b'{"location":' + location + b',"value":' + data[start:end] + b"}"
        data = data[:start] + wrapped + data[end:]
    return data


_INSERT, _UPDATE, _DELETE = (avro.dml_type(kind) for kind in ("INSERT", "UPDATE", "DELETE"))


def _avro_row(
    plan: _Plan,
    row: RowChange,
    now: int,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    key_only: bool,
    location: str | None,
) -> bytes:
    """A DML message in Avro: the table's constant head, the row's members, its images."""
    writer = plan.avro_writer
    # (the kind by the images _row_value left it: hashing the RowKind costs as much again)
    kind = _DELETE if after is None else _INSERT if before is None else _UPDATE
    if after is None:
        data = None
        old = None if before is None else writer.first(before, _texts(plan, before))[0]
    else:
        data, twin = writer.first(after, _texts(plan, after))
        old = None if before is None else writer.twin(before, twin)
    return b"".join(
        (
            plan.avro_head,
            avro.dml_members(kind, row.commit_ts, now),
            plan.avro_version,
            avro.dml_options(location, key_only, row.checksum),
            b"\x00" if data is None else data,
            b"\x00" if old is None else old,
        )
    )


def _text_of(ctype: ColumnType) -> Callable[[Any], str] | None:
    """The MySQL text formatter of a column Avro writes as text (none for bytes)."""
    return None if ctype.family is Family.BYTES else NORMALIZED.encoder(ctype)


class SimpleEncoder:
    """Encodes events as Simple messages (``encoding-format`` json or avro)."""

    protocol = PROTOCOL

    def __init__(self, options: SimpleOptions | None = None) -> None:
        self.options = options or SimpleOptions()
        self.clock: Callable[[], int] = _wall_clock_ms
        self._avro = self.options.encoding_format == "avro"
        self._large = LargeMessages(PROTOCOL, self.options)
        self._uncompressed = self._large.compression == "none"
        self._json_values = json_dialect(self.options.time_zone)
        self._location = avro.location_bytes(self.options.time_zone)
        self._location_json = go_json(orjson.dumps(self.options.time_zone))
        self._plans: LRUCache[int, tuple[TableSchema, _Plan]] = LRUCache()
        self._last_plan: tuple[TableSchema, _Plan] | None = None
        opts = self.options
        self._cadence = (
            BootstrapCadence(opts.send_bootstrap_interval_in_sec, opts.send_bootstrap_in_msg_count)
            if opts.sends_bootstraps
            else None
        )
        self._bootstrap_route = (
            Route.ALL_PARTITIONS if opts.send_bootstrap_to_all_partition else Route.FIRST_PARTITION
        )

    def encode(self, events: Iterable[Event]) -> list[Message]:
        out: list[Message] = []
        for event in events:
            if isinstance(event, RowChange):
                self._row_messages(event, out)
            elif isinstance(event, DDLEvent):
                out.append(self._ddl_message(event))
            elif isinstance(event, Watermark):
                if self._cadence is not None:
                    now = self.clock()
                    out.extend(self._bootstrap_message(s, now) for s in self._cadence.due(now))
                out.append(self._watermark_message(event.ts))
            elif isinstance(event, Bootstrap):
                now = self.clock()
                if self._cadence is not None:
                    self._cadence.sent(event.schema, now)
                out.append(self._bootstrap_message(event.schema, now))
            else:
                raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")
        return out

    # rows ---------------------------------------------------------------------------------

    def _row_messages(self, row: RowChange, out: list[Message]) -> None:
        now = self.clock()
        if self._cadence is not None:
            schema = self._cadence.before_row(row, now)
            if schema is not None:
                out.append(self._bootstrap_message(schema, now))
        try:
            value = self._row_value(row, now)
        except TiCDCSparkError:
            raise
        except INPUT_ERRORS as error:
            raise row_encode_error(PROTOCOL, row, error) from error
        if not self._large.fits(len(value)):
            value = self._shrunk(row, now, value)
        table = row.schema
        out.append(Message(None, value, Route.DISPATCH, table.database, table.table, 1))

    def _shrunk(self, row: RowChange, now: int, value: bytes) -> bytes:
        def small(location: str | None) -> tuple[bytes | None, bytes, int]:
            small_value = self._row_value(row, now, key_only=True, location=location)
            return None, small_value, len(small_value)

        return self._large.shrink(row, len(value), lambda: (None, value), small)[1]

    def _row_value(
        self, row: RowChange, now: int, key_only: bool = False, location: str | None = None
    ) -> bytes:
        before, after = row.before, row.after
        if row.kind is not RowKind.INSERT and before is None:
            raise EncodeError(f"{row.kind.value} of {row.schema.qualified_name} has no before")
        if row.kind is not RowKind.DELETE and after is None:
            raise EncodeError(f"{row.kind.value} of {row.schema.qualified_name} has no after")
        if key_only:
            before = handle_key_image(row, before) if before is not None else None
            after = handle_key_image(row, after) if after is not None else None
        if row.kind is RowKind.INSERT:
            before = None
        elif row.kind is RowKind.DELETE:
            after = None
        key_only = key_only or row.handle_key_only
        plan = self._plan(row.schema)
        if self._avro:
            value = _avro_row(plan, row, now, before, after, key_only, location)
        else:
            value = self._json_row(
                self._dml_head(row, now, key_only, location), plan, before, after
            )
        return value if self._uncompressed else self._large.compress(value)

    def _json_row(
        self,
        head: dict[str, Any],
        plan: _Plan,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> bytes:
        """A JSON row message: the images by the compiled loop when it takes them, spliced
        after the head (``data`` and ``old`` are its last members), else by orjson."""
        location = self._location_json
        data = None if after is None else _json_object(plan, after, location)
        old = None if before is None else _json_object(plan, before, location)
        if (data is None) == (after is None) and (old is None) == (before is None):
            value = go_json(orjson.dumps(head))[:-1]
            if data is not None:
                value += b',"data":' + data
            if old is not None:
                value += b',"old":' + old
            return value + b"}"
        if after is not None:
            head["data"] = _json_image(plan.json, after)
        if before is not None:
            head["old"] = _json_image(plan.json, before)
        return go_json(orjson.dumps(head))

    def _dml_head(
        self, row: RowChange, now: int, key_only: bool, location: str | None
    ) -> dict[str, Any]:
        schema = row.schema
        head: dict[str, Any] = {"version": VERSION, "database": schema.database}
        head["table"] = schema.table
        if schema.table_id or self._avro:
            head["tableID"] = schema.table_id
        head["type"] = row.kind.value
        head["commitTs"] = row.commit_ts
        head["buildTs"] = now
        if schema.version or self._avro:
            head["schemaVersion"] = schema.version
        if location:
            head["claimCheckLocation"] = location
        if key_only:
            head["handleKeyOnly"] = True
        checksum = row.checksum
        if checksum is not None:
            head["checksum"] = {
                "version": checksum.version,
                "corrupted": checksum.corrupted,
                "current": checksum.current,
                "previous": checksum.previous,
            }
        return head

    def _plan(self, schema: TableSchema) -> _Plan:
        last = self._last_plan
        if last is not None and last[0] is schema:  # (rows come in runs of one table)
            return last[1]
        hit = self._plans.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = self._plans.put(
                id(schema),
                (schema, _plan(schema, self._json_values, self._location, self._avro)),
            )
        self._last_plan = hit
        return hit[1]

    # other events -------------------------------------------------------------------------

    def _watermark_message(self, ts: int) -> Message:
        now = self.clock()
        if self._avro:
            payload = {"version": VERSION, "commitTs": ts, "buildTs": now}
            value = avro.write_message(WATERMARK, payload)
        else:
            value = orjson.dumps(
                {"version": VERSION, "type": WATERMARK, "commitTs": ts, "buildTs": now}
            )
        return Message(None, self._large.compress(value), Route.ALL_TOPICS)

    def _bootstrap_message(self, schema: TableSchema, now: int) -> Message:
        if self._avro:
            payload = {"version": VERSION, "buildTs": now, "tableSchema": schema_to_avro(schema)}
            value = avro.write_message(BOOTSTRAP, payload)
        else:
            obj = {"version": VERSION, "type": BOOTSTRAP, "commitTs": 0, "buildTs": now}
            obj["tableSchema"] = schema_to_json(schema)
            value = go_json(orjson.dumps(obj))
        value = self._checked(self._large.compress(value), f"bootstrap of {schema.qualified_name}")
        return Message(None, value, self._bootstrap_route, schema.database, schema.table)

    def _ddl_message(self, ddl: DDLEvent) -> Message:
        schema, before = _ddl_schemas(ddl)
        kind, now = ddl_kind(ddl.ddl_type), self.clock()
        if self._cadence is not None and schema is not None:
            # what consumers now hold for the table: a row of another schema (under the same
            # version) gets its bootstrap first
            self._cadence.sent(schema, now)
        if self._avro:
            payload = {"version": VERSION, "type": kind, "sql": ddl.query}
            payload.update(commitTs=ddl.commit_ts, buildTs=now)
            payload["tableSchema"] = None if schema is None else schema_to_avro(schema)
            payload["preTableSchema"] = None if before is None else schema_to_avro(before)
            value = avro.write_message("DDL", payload)
        else:
            obj: dict[str, Any] = {"version": VERSION, "type": kind}
            if ddl.query:
                obj["sql"] = ddl.query
            obj.update(commitTs=ddl.commit_ts, buildTs=now)
            if schema is not None:
                obj["tableSchema"] = schema_to_json(schema)
            if before is not None:
                obj["preTableSchema"] = schema_to_json(before)
            value = go_json(orjson.dumps(obj))
        value = self._checked(self._large.compress(value), f"DDL at commit ts {ddl.commit_ts}")
        database = schema.database if schema is not None else ddl.database
        table = schema.table if schema is not None else ddl.table
        return Message(None, value, Route.ALL_PARTITIONS, database, table)

    def _checked(self, value: bytes, what: str) -> bytes:
        if not self._large.fits(len(value)):
            raise EncodeError(
                f"{PROTOCOL}: {what} is {len(value)} bytes, over "
                f"max-message-bytes={self._large.limit}"
            )
        return value


def _json_image(
    columns: tuple[tuple[str, Callable[[Any], Any]], ...], image: dict[str, Any]
) -> dict[str, Any]:
    out = {}
    for name, encode in columns:
        if name in image:
            value = image[name]
            out[name] = None if value is None else encode(value)
    return out


def _ddl_schemas(ddl: DDLEvent) -> tuple[TableSchema | None, TableSchema | None]:
    """The DDL's table schema after and before.  A DDL event without one (from a protocol
    that carries only the statement) gets what its statement says: the created table's
    columns for CREATE TABLE, else the table's name alone."""
    schema = ddl.schema
    if schema is None and ddl.ddl_type is DDLType.CREATE_TABLE:
        try:
            schema = parse_create_table(ddl.query, ddl.database)
        except TiCDCSparkError:
            schema = None
    if schema is None and ddl.table:
        schema = TableSchema(ddl.database, ddl.table)
    return schema, ddl.schema_before
