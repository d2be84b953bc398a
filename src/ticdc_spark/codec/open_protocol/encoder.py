"""Open Protocol encoding: rows batched up to ``max-batch-size`` rows and ``max-message-bytes``,
DDL and resolved events one per message, byte for byte what TiCDC v5.x-v8.x (tiflow) writes.

Columns are written sorted by name bytewise, as TiCDC's Go map encoding writes them, each as
``{"t":code,"h":true,"f":flags,"v":value}`` (``h`` only on handle-key columns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from ticdc_spark.codec.base import Message, Route
from ticdc_spark.codec.common import (
    INPUT_ERRORS,
    LRUCache,
    changed_columns,
    handle_key_image,
    row_encode_error,
    row_images,
)
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.largemsg import RECORD_OVERHEAD, LargeMessages
from ticdc_spark.codec.open_protocol.dialect import CURRENT, WRITTEN_AS_IS, encode_kind
from ticdc_spark.codec.open_protocol.options import OpenProtocolOptions
from ticdc_spark.codec.open_protocol.wire import (
    DDL,
    ENTRY_PREFIXES,
    PROTOCOL,
    RESOLVED,
    ROW,
    U64,
    VERSION_PREFIX,
    frame_key,
    frame_values,
    key_json,
    large_marks,
    names_json,
    type_code,
)
from ticdc_spark.errors import EncodeError, TiCDCSparkError
from ticdc_spark.model import (
    Bootstrap,
    Column,
    ColumnFlag,
    DDLEvent,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)

__all__ = ["OpenProtocolEncoder"]

_UPDATE, _DELETE = RowKind.UPDATE, RowKind.DELETE  # no enum lookups per row
_ROW_KEY = b'{"ts":%%d%%s%%s,"t":%d%%s}' % ROW  # key_json's layout for a row

# A column for compiled_values.column_object: (its JSON up to "v":, name, kind, fsp, encoder).
_CompiledColumn = tuple[bytes, str, int, int, Callable[[Any], Any]]


@dataclass(slots=True)
class _TablePlan:
    """How one table's images are written.  Each column's ``entry`` (its column object) is
    refilled for every image: each image is serialized before the next is filled."""

    # (name, encoder or None when the value is written as is, entry), sorted by name bytewise
    fill: list[tuple[str, Callable[[Any], Any] | None, dict[str, Any]]]
    full: dict[str, dict[str, Any]]  # name -> entry, for images with every column
    compiled: tuple[_CompiledColumn, ...]  # the same for compiled_values.column_object
    key_names: bytes  # ,"scm":..,"tbl":.. of the event key, as Go writes them


def _table_plan(schema: TableSchema) -> _TablePlan:
    derived = schema.with_derived_flags()
    fill: list[tuple[str, Callable[[Any], Any] | None, dict[str, Any]]] = []
    compiled: list[_CompiledColumn] = []
    for column, wire in sorted(
        zip(schema.columns, derived.columns, strict=True), key=lambda p: p[0].name.encode()
    ):
        entry = _column_entry(column, int(column.flags | wire.flags))
        encode = CURRENT.encoder(column.type)
        fill.append((column.name, None if encode is WRITTEN_AS_IS else encode, entry))
        head = go_json(orjson.dumps(column.name) + b":" + orjson.dumps(entry)[: -len(b"null}")])
        compiled.append((head, column.name, *encode_kind(column.type, encode), encode))
    full = {name: entry for name, _, entry in fill}
    return _TablePlan(fill, full, tuple(compiled), names_json(schema.database, schema.table))


def _column_entry(column: Column, flags: int) -> dict[str, Any]:
    """A column's object, its value left null: ``{"t":..,"h":true,"f":..,"v":null}``."""
    entry: dict[str, Any] = {"t": type_code(column.type)}
    if flags & ColumnFlag.HANDLE_KEY:
        entry["h"] = True
    entry["f"] = flags
    entry["v"] = None
    return entry


def _columns_json(plan: _TablePlan, image: dict[str, Any] | None) -> bytes:
    """The JSON of one image's columns (``{"name":{"t":..,"f":..,"v":..},...}``) as Go
    writes it: by the compiled loop when it is built and takes the image, else here."""
    image = image or {}
    if compiled_values is not None:
        data = compiled_values.column_object(plan.compiled, image)
        if data is not None:
            return data  # type: ignore[no-any-return]
    try:  # the common case: every column is in the image
        for name, encode, entry in plan.fill:
            value = image[name]
            entry["v"] = value if value is None or encode is None else encode(value)
        return go_json(orjson.dumps(plan.full))
    except KeyError:
        out = {}
        for name, encode, entry in plan.fill:
            if name in image:
                value = image[name]
                entry["v"] = value if value is None or encode is None else encode(value)
                out[name] = entry
        return go_json(orjson.dumps(out))


class _Batch:
    """The message being filled: keys and values with their running size (TiCDC's count)."""

    __slots__ = ("database", "keys", "rows", "size", "table", "values")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        self.rows = 0
        self.size = VERSION_PREFIX + RECORD_OVERHEAD
        self.database = self.table = ""

    def add(self, key: bytes, value: bytes, size: int, row: RowChange) -> None:
        if not self.rows:
            self.database, self.table = row.schema.database, row.schema.table
        self.keys.append(key)
        self.values.append(value)
        self.rows += 1
        self.size += size

    def flush_into(self, out: list[Message]) -> None:
        if not self.rows:
            return
        keys, values = frame_key(self.keys), frame_values(self.values)
        out.append(Message(keys, values, Route.DISPATCH, self.database, self.table, self.rows))
        self.__init__()  # type: ignore[misc]


class OpenProtocolEncoder:
    """Encodes events as Open Protocol messages, batching rows."""

    protocol = PROTOCOL

    def __init__(self, options: OpenProtocolOptions | None = None) -> None:
        self.options = options or OpenProtocolOptions()
        self._large = LargeMessages(PROTOCOL, self.options)
        self._compressing = self._large.compression != "none"
        self._plans: LRUCache[int, tuple[TableSchema, _TablePlan]] = LRUCache()
        self._last: tuple[TableSchema | None, _TablePlan | None] = (None, None)  # last used

    def encode(self, events: Iterable[Event]) -> list[Message]:
        out: list[Message] = []
        batch = _Batch()
        for event in events:
            if isinstance(event, RowChange):
                try:
                    self._append_row(event, batch, out)
                except TiCDCSparkError:
                    raise
                except INPUT_ERRORS as error:  # a wrong-typed value met a formatter
                    raise row_encode_error(PROTOCOL, event, error) from error
                continue
            batch.flush_into(out)
            message = self._event_message(event)
            if message is not None:
                out.append(message)
        batch.flush_into(out)
        return out

    # rows ---------------------------------------------------------------------------------

    def _append_row(self, row: RowChange, batch: _Batch, out: list[Message]) -> None:
        key, value = self._row_json(row)
        size = ENTRY_PREFIXES + len(key) + len(value)
        if not self._large.fits(VERSION_PREFIX + size):  # too large for a message of its own
            key, value = self._shrunk(row, key, value)
            size = ENTRY_PREFIXES + len(key) + len(value)
        opts = self.options
        if batch.rows and (
            batch.rows >= opts.max_batch_size or batch.size + size > opts.max_message_bytes
        ):
            batch.flush_into(out)
        batch.add(key, value, size, row)

    def _shrunk(self, row: RowChange, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The row with only its handle-key columns (LargeMessages.shrink: the error, or the
        full row stored for claim-check)."""

        def full() -> tuple[bytes | None, bytes]:
            return frame_key([key]), frame_values([value])

        def small(location: str | None) -> tuple[bytes | None, bytes, int]:
            small_key, small_value = self._row_json(row, large_marks(location))
            return small_key, small_value, _alone_size(small_key, small_value)

        small_key, small_value = self._large.shrink(row, _alone_size(key, value), full, small)
        return small_key or b"", small_value

    def _row_json(self, row: RowChange, marks: bytes = b"") -> tuple[bytes, bytes]:
        """Key and value JSON of a row; with ``marks`` (the large-message key members) the
        value holds only the handle-key columns."""
        plan = self._plan(row.schema)
        value = self._row_value(row, plan, key_only=bool(marks))
        if self._compressing:
            value = self._large.compress(value)
        partition = row.partition_id  # (key_json, written out: this runs once per row)
        ptn = b"" if partition is None else b',"ptn":%d' % partition
        return _ROW_KEY % (row.commit_ts, plan.key_names, ptn, marks), value

    def _row_value(self, row: RowChange, plan: _TablePlan, key_only: bool) -> bytes:
        kind = row.kind
        before, after = row_images(row)
        opts = self.options
        if key_only or (kind is _DELETE and opts.delete_only_output_handle_key_columns):
            before, after = _handle_key_images(row, before, after)
        if kind is _DELETE:
            return b'{"d":' + _columns_json(plan, before) + b"}"
        value = b'{"u":' + _columns_json(plan, after)
        if kind is _UPDATE and opts.output_old_value and before is not None:
            old = before
            if opts.only_output_updated_columns:
                old = changed_columns(before, after or {})
            if old:
                value += b',"p":' + _columns_json(plan, old)
        return value + b"}"

    def _plan(self, schema: TableSchema) -> _TablePlan:
        last_schema, last_plan = self._last
        if last_schema is schema and last_plan is not None:  # a run of one table's rows
            return last_plan
        hit = self._plans.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = self._plans.put(id(schema), (schema, _table_plan(schema)))
        self._last = hit
        return hit[1]

    # DDL and resolved ---------------------------------------------------------------------

    def _event_message(self, event: Event) -> Message | None:
        """The message of a DDL or resolved event; None for bootstrap events (Simple-only:
        nothing to send)."""
        if isinstance(event, DDLEvent):
            return self._ddl_message(event)
        if isinstance(event, Watermark):
            return _resolved_message(event.ts)
        if isinstance(event, Bootstrap):
            return None
        raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")

    def _ddl_message(self, ddl: DDLEvent) -> Message:
        key = key_json(ddl.commit_ts, DDL, names_json(ddl.database, ddl.table))
        value = go_json(orjson.dumps({"q": ddl.query, "t": int(ddl.ddl_type)}))
        value = self._large.compress(value)
        route = Route.ALL_PARTITIONS
        return Message(frame_key([key]), frame_values([value]), route, ddl.database, ddl.table)


def _alone_size(key: bytes, value: bytes) -> int:
    """The size TiCDC counts for a message holding only this row."""
    return VERSION_PREFIX + ENTRY_PREFIXES + len(key) + len(value)


def _resolved_message(ts: int) -> Message:
    return Message(frame_key([key_json(ts, RESOLVED, b"")]), U64.pack(0), Route.ALL_TOPICS)


def _handle_key_images(
    row: RowChange, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Only the handle-key columns of each image; a table without any cannot be sent so."""
    before = handle_key_image(row, before) if before is not None else None
    after = handle_key_image(row, after) if after is not None else None
    if not (before or after):
        raise EncodeError(f"{row.schema.qualified_name} has no handle-key columns")
    return before, after
