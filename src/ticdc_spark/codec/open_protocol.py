"""TiCDC Open Protocol (``open-protocol``): binary batches of JSON events.

Layout (see ``shared/spec/open-protocol.ja.txt`` and REFERENCE.md)::

    key   = u64be(1) { u64be(len) keyJSON }*
    value =          { u64be(len) valueJSON }*      (the i-th value belongs to the i-th key)

Key JSON ``{"ts","scm","tbl","ptn","t","ohk","ccl"}`` (t: 1 row, 2 DDL, 3 resolved).  Row
values ``{"u":{..},"p":{..}}`` / ``{"d":{..}}`` map column names (sorted bytewise, as TiCDC's
Go map encoding writes them) to ``{"t":type,"h":true,"f":flags,"v":value}``.  Rows are
batched up to ``max-batch-size`` rows and ``max-message-bytes``; DDL and resolved events go
one per message.  The encoder writes what TiCDC v5.x-v8.x (tiflow) writes, byte for byte.

The decoder also reads:

* the legacy layout of TiCDC v4.0.0-v4.0.4: columns without ``f`` whose CHAR/VARCHAR values are
  base64 (the specification's own example log uses it);
* old batches that carry DDL and resolved events beside each other (TiCDC's Java example data);
* keys in any member order (TiCDC's newer pingcap/ticdc writes ``ptn`` after ``t``).

An UPDATE sent with old value off has no ``p`` and decodes as an INSERT (an upsert): nothing
in the message tells them apart.
"""

from __future__ import annotations

import binascii
import json
import math
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import orjson

from ticdc_spark.changelog import ChangelogBuilder
from ticdc_spark.codec.base import DecoderBase, Message, Route, RowSink
from ticdc_spark.codec.catalog import CodecSpec, register
from ticdc_spark.codec.common import (
    INPUT_ERRORS,
    LRUCache,
    TemporalFsp,
    changed_columns,
    decoding,
    handle_key_image,
    loads,
    require_dict,
    row_encode_error,
    row_images,
    temporal_columns,
)
from ticdc_spark.codec.compiled import (
    BASE64,
    BASE64_TEXT,
    CALL,
    DECIMAL,
    DOUBLE,
    FLOAT32,
    GO_QUOTED,
    INT,
    INT_TEXT,
    STR,
    kind_of,
    text_kind,
)
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.gotext import go_json, go_json_float, go_quote, go_unquote
from ticdc_spark.codec.largemsg import RECORD_OVERHEAD, ClaimCheckStorage, compress, decompress
from ticdc_spark.codec.options import CommonOptions, alias
from ticdc_spark.errors import ConfigError, DecodeError, EncodeError, TiCDCSparkError
from ticdc_spark.model import (
    Bootstrap,
    Column,
    ColumnFlag,
    DDLEvent,
    DDLType,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.types import (
    BLOB_CODES,
    TYPE_CODE,
    TYPE_NAMES,
    ColumnType,
    Family,
    parse_decimal,
    text_formatter,
    text_parser,
    to_float32,
)

__all__ = ["OpenProtocolDecoder", "OpenProtocolEncoder", "OpenProtocolOptions"]

PROTOCOL = "open-protocol"
BATCH_VERSION = 1
_U64 = struct.Struct(">Q")
_ROW, _DDL, _RESOLVED = 1, 2, 3
_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE  # no enum lookups


@dataclass(frozen=True, slots=True)
class OpenProtocolOptions(CommonOptions):
    """Open Protocol options (TiCDC names)."""

    PROTOCOL: ClassVar[str] = PROTOCOL

    max_batch_size: int = 16
    output_old_value: bool = alias(True, "enable-old-value")
    only_output_updated_columns: bool = False

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.max_batch_size < 1:
            raise ConfigError("max-batch-size must be at least 1")


# --------------------------------------------------------------------------------------------
# Type codes: TiDB's mysql.Type* bytes (types.TYPE_CODE / types.TYPE_NAMES).

_BASE64_CODES = BLOB_CODES  # BLOB and TEXT share these: always base64
_QUOTED_CODES = frozenset((15, 253, 254))  # CHAR/VARCHAR: Go-quoted when binary
_SIGNED_FAMILIES = frozenset((Family.INTEGER, Family.FLOAT, Family.DOUBLE, Family.DECIMAL))


def _column_type(code: int, flags: int) -> ColumnType:
    names = TYPE_NAMES.get(code)
    if names is None:
        return ColumnType(f"type{code}")
    ctype = ColumnType(names[1] if flags & ColumnFlag.BINARY else names[0])
    if flags & ColumnFlag.UNSIGNED and ctype.family in _SIGNED_FAMILIES:
        ctype = ColumnType(ctype.name, unsigned=True)
    return ctype


# --------------------------------------------------------------------------------------------
# Values: canonical <-> the JSON value in "v".


def _wire_encoder(ctype: ColumnType, code: int) -> tuple[Callable[[Any], Any], int, int]:
    """How a column's canonical values become the JSON value in "v": the function, and the
    (kind, fsp) telling compiled_values.column_object the same."""
    family = ctype.family
    if code in _BASE64_CODES:
        if family is Family.BYTES:
            return _to_base64, BASE64, 0
        return _text_to_base64, BASE64_TEXT, 0
    if family is Family.BYTES:  # BINARY/VARBINARY
        return go_quote, GO_QUOTED, 0
    if family in (Family.INTEGER, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return _identity, INT, 0
    if family is Family.FLOAT:
        return _json_float32, FLOAT32, 0
    if family is Family.DOUBLE:
        return _json_float64, DOUBLE, 0
    if family is Family.UNKNOWN:
        return lambda v: v.decode("latin-1") if isinstance(v, bytes) else v, CALL, 0
    return text_formatter(ctype), *text_kind(ctype)


def _json_float(value: float, bits: int) -> orjson.Fragment:
    if not math.isfinite(value):  # (Go's encoding/json refuses them too; TiDB stores none)
        raise ValueError(f"{value!r} cannot be written as a JSON number")  # named by encode()
    return orjson.Fragment(go_json_float(value, bits))


def _json_float32(value: float) -> orjson.Fragment:
    return _json_float(value, 32)


def _json_float64(value: float) -> orjson.Fragment:
    return _json_float(value, 64)


def _identity(value: Any) -> Any:
    return value


def _to_base64(value: bytes) -> str:
    return binascii.b2a_base64(value, newline=False).decode("ascii")


def _text_to_base64(value: str) -> str:
    return binascii.b2a_base64(value.encode("utf-8"), newline=False).decode("ascii")


def _wire_decoder(ctype: ColumnType, code: int, legacy: bool) -> Callable[[Any], Any]:
    family = ctype.family
    if code in _BASE64_CODES:
        return _from_base64 if family is Family.BYTES else _text_from_base64
    if code in _QUOTED_CODES:
        if legacy:
            return _legacy_string
        return _from_go_quoted if family is Family.BYTES else _expect_str
    if family in (Family.INTEGER, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return _lenient_int
    if family is Family.FLOAT:
        return _float32_number
    if family is Family.DOUBLE:
        return _number
    if family is Family.DECIMAL:
        return _decimal_value
    if family in (Family.DATE, Family.DATETIME, Family.TIME):
        return text_parser(ctype)  # a value that is not a string fails its regex (TypeError)
    if family is Family.JSON:
        return lambda v: v if isinstance(v, str) else orjson.dumps(v).decode()
    return _identity


def _float32_number(value: Any) -> float:
    return to_float32(_number(value))


def _decimal_value(value: Any) -> Decimal:
    return parse_decimal(value) if isinstance(value, str) else Decimal(str(value))


def _wire_text(
    ctype: ColumnType, code: int, legacy: bool, decode: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """Wire value -> the changelog's text form, skipping the canonical value where the wire
    already holds the text (the Spark decode stage's fast path; the sink checks values)."""
    family = ctype.family
    if code in _BASE64_CODES:
        return _expect_str if family is Family.BYTES else _text_from_base64
    if code in _QUOTED_CODES and not legacy:
        return _quoted_to_base64 if family is Family.BYTES else _expect_str
    if family in (Family.INTEGER, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        return _int_text
    if family in (Family.FLOAT, Family.DOUBLE):
        return _number_text
    if family in (Family.DECIMAL, Family.DATE, Family.DATETIME, Family.TIME):
        return _expect_str
    formatter = _text_of(ctype)
    return lambda v: formatter(decode(v))


def _text_of(ctype: ColumnType) -> Callable[[Any], str]:
    if ctype.family is Family.BYTES:
        return lambda v: (
            binascii.b2a_base64(v, newline=False).decode() if isinstance(v, bytes) else str(v)
        )
    return lambda v: str(v) if isinstance(v, str) else text_formatter(ctype)(v)


# A JSON -0 (how Go writes a DOUBLE or FLOAT negative zero), which orjson reads as the int 0.
_NEGATIVE_ZERO = re.compile(rb"[:\[,]\s*-0(?![.0-9eE])")


def _row_value(value: bytes) -> Any:
    """A row event's value object, keeping a negative zero's sign (orjson checks the JSON;
    the standard parser, told to read -0 as a float, runs only when the text holds one)."""
    obj = loads(value, "row value")
    # (a substring test first: dates put "-0" in most rows, and the search costs a third of
    # the decoding; Go writes no space after the colon)
    if b":-0" in value and _NEGATIVE_ZERO.search(value):
        obj = json.loads(value, parse_int=lambda text: -0.0 if text == "-0" else int(text))
    return obj


def _int_text(value: Any) -> str:
    return str(value) if type(value) is int else str(_lenient_int(value))


def _number_text(value: Any) -> str:
    if type(value) is int:
        return str(value)
    if type(value) is float:
        return repr(value)
    return repr(_number(value))


def _quoted_to_base64(value: Any) -> str:
    return binascii.b2a_base64(go_unquote(_expect_str(value)), newline=False).decode()


def _lenient_int(value: Any) -> Any:
    """An integer; a string that is not one is kept as written (hand-made producers such as
    TiCDC's own Java example data put strings in integer columns)."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DecodeError(f"expected an integer, got {value!r}")


def _number(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return float(value)
    raise DecodeError(f"expected a number, got {value!r}")


def _expect_str(value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError(f"expected a string, got {value!r}")
    return value


def _from_base64(value: Any) -> bytes:
    return binascii.a2b_base64(value, strict_mode=True)  # TypeError unless str (JSON: no bytes)


def _text_from_base64(value: Any) -> str:
    return _from_base64(value).decode("utf-8")


def _from_go_quoted(value: Any) -> bytes:
    return go_unquote(_expect_str(value))


def _legacy_string(value: Any) -> str | bytes:
    """TiCDC v4.0.0-v4.0.4 wrote CHAR/VARCHAR as base64 of the raw bytes (Go []byte).

    Values filled from a column default were plain strings then, so text that is not base64
    is kept as written; decoded bytes that are not UTF-8 stay bytes.
    """
    text = _expect_str(value)
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return text
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


# --------------------------------------------------------------------------------------------
# Encoder


@dataclass(slots=True)
class _ColumnPlan:
    """How one column is written; ``entry`` is its column object, refilled for every image
    (each image is serialized before the next is filled, so sharing it is safe)."""

    name: str
    encode: Callable[[Any], Any]
    entry: dict[str, Any]


@dataclass(slots=True)
class _TablePlan:
    # (name, encoder or None when the value is written as is, entry), sorted by name bytewise
    # as TiCDC's Go map encoding writes them
    fill: list[tuple[str, Callable[[Any], Any] | None, dict[str, Any]]]
    full: dict[str, dict[str, Any]]  # name -> entry, for images with every column
    # the same for compiled_values.column_object: (JSON up to "v":, name, kind, fsp, encoder)
    compiled: tuple[tuple[bytes, str, int, int, Callable[[Any], Any]], ...]
    key_names: bytes  # ,"scm":..,"tbl":.. of the event key, as Go writes them


class OpenProtocolEncoder:
    """Encodes events as Open Protocol messages, batching rows."""

    protocol = PROTOCOL

    def __init__(self, options: OpenProtocolOptions | None = None) -> None:
        self.options = options or OpenProtocolOptions()
        self._plans: LRUCache[int, tuple[TableSchema, _TablePlan]] = LRUCache()
        self._last: tuple[TableSchema | None, _TablePlan | None] = (None, None)  # last used
        self._storage = (
            ClaimCheckStorage(self.options.claim_check_storage_uri)
            if self.options.large_message_handle_option == "claim-check"
            else None
        )

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
            if isinstance(event, DDLEvent):
                out.append(self._ddl_message(event))
            elif isinstance(event, Watermark):
                out.append(self._resolved_message(event.ts))
            elif not isinstance(event, Bootstrap):  # bootstrap is Simple-only: nothing to send
                raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")
        batch.flush_into(out)
        return out

    # rows ---------------------------------------------------------------------------------

    def _append_row(self, row: RowChange, batch: _Batch, out: list[Message]) -> None:
        key, value = self._row_json(row, key_only=False)
        opts = self.options
        size = 16 + len(key) + len(value)  # TiCDC counts both length prefixes
        if size + RECORD_OVERHEAD + 8 > opts.max_message_bytes:
            key, value = self._large_row(row, key, value)
            size = 16 + len(key) + len(value)
        if batch.rows and (
            batch.rows >= opts.max_batch_size or batch.size + size > opts.max_message_bytes
        ):
            batch.flush_into(out)
        batch.add(key, value, size, row)

    def _large_row(self, row: RowChange, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        option = self.options.large_message_handle_option
        if option == "none":
            raise EncodeError(
                f"row of {row.schema.qualified_name} at commit ts {row.commit_ts} is "
                f"{len(key) + len(value)} bytes, over max-message-bytes="
                f"{self.options.max_message_bytes}; raise it or set "
                "large-message-handle-option"
            )
        location = None
        if self._storage is not None:
            location = self._storage.write(_frame_key([key]), _frame_values([value]))
        small_key, small_value = self._row_json(row, key_only=True, claim_check=location)
        size = len(small_key) + len(small_value) + RECORD_OVERHEAD + 24
        if size > self.options.max_message_bytes:
            raise EncodeError(
                f"row of {row.schema.qualified_name} is over max-message-bytes even with only "
                "its handle-key columns"
            )
        return small_key, small_value

    def _row_json(
        self, row: RowChange, *, key_only: bool, claim_check: str | None = None
    ) -> tuple[bytes, bytes]:
        schema = row.schema
        plan = self._plan(schema)
        value = self._row_value(row, plan, key_only)
        method = self.options.large_message_handle_compression
        if method != "none":
            value = compress(value, method)
        if not key_only and claim_check is None:  # the common key, from the plan's bytes
            partition = row.partition_id
            ptn = b"" if partition is None else b',"ptn":%d' % partition
            return b'{"ts":%d%s%s,"t":1}' % (row.commit_ts, plan.key_names, ptn), value
        key_obj: dict[str, Any] = {"ts": row.commit_ts}
        if schema.database:
            key_obj["scm"] = schema.database
        if schema.table:
            key_obj["tbl"] = schema.table
        if row.partition_id is not None:
            key_obj["ptn"] = row.partition_id
        key_obj["t"] = _ROW
        if key_only and claim_check is None:
            key_obj["ohk"] = True
        if claim_check is not None:
            key_obj["ccl"] = claim_check
        return go_json(orjson.dumps(key_obj)), value

    def _row_value(self, row: RowChange, plan: _TablePlan, key_only: bool) -> bytes:
        kind = row.kind
        before, after = row_images(row)
        opts = self.options
        if key_only or (kind is _DELETE and opts.delete_only_output_handle_key_columns):
            before = handle_key_image(row, before) if before is not None else None
            after = handle_key_image(row, after) if after is not None else None
            if not (before or after):
                raise EncodeError(f"{row.schema.qualified_name} has no handle-key columns")
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
        if hit is not None and hit[0] is schema:
            self._last = hit
            return hit[1]
        derived = schema.with_derived_flags()
        columns = []
        compiled: list[tuple[bytes, str, int, int, Callable[[Any], Any]]] = []
        for column, wire in sorted(
            zip(schema.columns, derived.columns, strict=True), key=lambda p: p[0].name.encode()
        ):
            flags = int(column.flags | wire.flags)
            code = TYPE_CODE.get(column.type.name, 15)
            entry: dict[str, Any] = {"t": code}
            if flags & ColumnFlag.HANDLE_KEY:
                entry["h"] = True
            entry["f"] = flags
            entry["v"] = None
            encode, kind, fsp = _wire_encoder(column.type, code)
            columns.append(_ColumnPlan(column.name, encode, entry))
            head = go_json(orjson.dumps(column.name) + b":" + orjson.dumps(entry)[: -len(b"null}")])
            compiled.append((head, column.name, kind, fsp, encode))
        fill = [(c.name, None if c.encode is _identity else c.encode, c.entry) for c in columns]
        names = b""
        if schema.database:
            names += b',"scm":' + go_json(orjson.dumps(schema.database))
        if schema.table:
            names += b',"tbl":' + go_json(orjson.dumps(schema.table))
        plan = _TablePlan(fill, {c.name: c.entry for c in columns}, tuple(compiled), names)
        self._last = self._plans.put(id(schema), (schema, plan))
        return plan

    # DDL and resolved ---------------------------------------------------------------------

    def _ddl_message(self, ddl: DDLEvent) -> Message:
        key_obj: dict[str, Any] = {"ts": ddl.commit_ts}
        if ddl.database:
            key_obj["scm"] = ddl.database
        if ddl.table:
            key_obj["tbl"] = ddl.table
        key_obj["t"] = _DDL
        value = go_json(orjson.dumps({"q": ddl.query, "t": int(ddl.ddl_type)}))
        value = compress(value, self.options.large_message_handle_compression)
        return Message(
            _frame_key([go_json(orjson.dumps(key_obj))]),
            _frame_values([value]),
            Route.ALL_PARTITIONS,
            ddl.database,
            ddl.table,
        )

    def _resolved_message(self, ts: int) -> Message:
        key = orjson.dumps({"ts": ts, "t": _RESOLVED})
        return Message(_frame_key([key]), _U64.pack(0), Route.ALL_TOPICS)


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
        self.size = 8 + RECORD_OVERHEAD
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
        out.append(
            Message(
                _frame_key(self.keys),
                _frame_values(self.values),
                Route.DISPATCH,
                self.database,
                self.table,
                rows=self.rows,
            )
        )
        self.__init__()  # type: ignore[misc]


def _frame_key(keys: list[bytes]) -> bytes:
    parts = [_U64.pack(BATCH_VERSION)]
    for key in keys:
        parts += (_U64.pack(len(key)), key)
    return b"".join(parts)


def _frame_values(values: list[bytes]) -> bytes:
    parts: list[bytes] = []
    for value in values:
        parts += (_U64.pack(len(value)), value)
    return b"".join(parts)


# --------------------------------------------------------------------------------------------
# Decoder


_Entry = tuple[Any, Any, Any, Any]  # (type code, flag, handle, reader)


@dataclass(slots=True)
class _RowPlan:
    """A table shape seen on the wire: per column its (type code, flags, handle) as sent and
    the function reading its values.  Messages are checked against it column by column."""

    schema: TableSchema
    # name -> (type code, flag, handle, wire -> canonical value, or a reader _image inlines)
    columns: dict[str, _Entry]
    text_columns: dict[str, _Entry]  # the same with wire -> changelog text
    temporal: tuple[str, ...]
    # the same two for compiled_values: (type code, flag, handle, kind, wire -> value)
    compiled: dict[str, tuple[Any, ...]]
    compiled_text: dict[str, tuple[Any, ...]]


class _TextRowChange(RowChange):
    """A row change whose images hold changelog text instead of canonical values."""

    __slots__ = ()


class _ShapeChanged(Exception):
    """A column's type or flags differ from the cached plan (e.g. after MODIFY COLUMN)."""


class OpenProtocolDecoder(DecoderBase):
    """Decodes Open Protocol messages (current, legacy, and mixed old batches)."""

    protocol = PROTOCOL

    def __init__(self, options: OpenProtocolOptions | None = None) -> None:
        self.options = options or OpenProtocolOptions()
        self._plans: LRUCache[tuple[Any, ...], _RowPlan] = LRUCache()
        self._last: tuple[Any, _RowPlan | None] = (None, None)  # (cache key, plan) last used
        self._fsp = TemporalFsp()
        self._storage = (
            ClaimCheckStorage(self.options.claim_check_storage_uri)
            if self.options.claim_check_storage_uri
            else None
        )

    def decode_into(self, message: Message, sink: RowSink) -> None:
        if isinstance(sink, ChangelogBuilder):
            self.decode_changelog(message, sink)
            return
        sink.add_events(
            self.decode(message), message.topic, message.partition or 0, message.offset or 0
        )

    def decode(self, message: Message) -> list[Event]:
        with decoding(PROTOCOL, message):
            if message.key is None:
                raise DecodeError("an Open Protocol message needs a key")
            return list(self._events(message.key, message.value or b""))
        raise AssertionError("unreachable")  # pragma: no cover

    def decode_changelog(self, message: Message, builder: ChangelogBuilder) -> None:
        """Append the message's changelog rows, with row images built straight from the
        wire values (no canonical values); the Spark decode stage's fast path."""
        with decoding(PROTOCOL, message):
            if message.key is None:
                raise DecodeError("an Open Protocol message needs a key")
            events = list(self._events(message.key, message.value or b"", text=True))
        topic, partition, offset = message.topic, message.partition or 0, message.offset or 0
        for seq, event in enumerate(events):
            if isinstance(event, _TextRowChange):
                schema = event.schema
                builder.append_row(
                    event.kind.value,
                    schema.database,
                    schema.table,
                    event.commit_ts,
                    event.before,
                    event.after,
                    builder.schema_text(schema) or "",
                    (topic, partition, offset, seq),
                    event.handle_key_only,
                )
            else:
                builder.add_events([event], topic, partition, offset, first_seq=seq)

    def _events(self, key: bytes, value: bytes, text: bool = False) -> Iterator[Event]:
        if len(key) < 8:
            raise DecodeError(f"key has {len(key)} bytes, shorter than the 8-byte version")
        version = _U64.unpack_from(key)[0]
        if version != BATCH_VERSION:
            raise DecodeError(f"unsupported batch version {version} (expected 1)")
        keys, values = _entries(key, 8, "key"), _entries(value, 0, "value")
        for key_json in keys:
            key_obj = require_dict(loads(key_json, "event key"), "event key")
            value_json = next(values, None)
            yield self._event(key_obj, value_json, text)
        if next(values, None) is not None:
            raise DecodeError("value has more entries than key")

    def _event(self, key: dict[str, Any], value: bytes | None, text: bool = False) -> Event:
        kind = key.get("t")
        if kind is None:  # no type: classify by the value, as TiCDC's Java example does
            kind = _guess_kind(value)
        ts = key.get("ts")
        if type(ts) is not int or ts < 0:
            raise DecodeError(f"event key has no valid ts: {ts!r}")
        if kind == _RESOLVED:
            return Watermark(ts)
        if value is None:
            raise DecodeError("key has more entries than value")
        if self.options.large_message_handle_compression != "none":
            value = decompress(value, self.options.large_message_handle_compression)
        if kind == _DDL:
            obj = require_dict(loads(value, "DDL value"), "DDL value")
            return DDLEvent(
                DDLType(int(obj.get("t") or 0)),
                _expect_str(obj["q"]),
                ts,
                _str_field(key, "scm"),
                _str_field(key, "tbl"),
            )
        if kind != _ROW:
            raise DecodeError(f"unknown event type t={kind!r}")
        if key.get("ccl"):
            return self._claim_checked(key)
        return self._row(key, require_dict(_row_value(value), "row value"), ts, text)

    def _claim_checked(self, key: dict[str, Any]) -> Event:
        if self._storage is None:
            raise DecodeError(
                "message points to claim-check storage; set claim-check-storage-uri to read it"
            )
        full_key, full_value = self._storage.read(_expect_str(key["ccl"]))
        events = list(self._events(full_key or b"", full_value))
        if len(events) != 1:
            raise DecodeError("claim-check file must hold exactly one event")
        return events[0]

    def _row(
        self, key: dict[str, Any], value: dict[str, Any], ts: int, text: bool = False
    ) -> RowChange:
        deleted = value.get("d")
        if deleted:
            kind, columns = _DELETE, require_dict(deleted, "d")
        else:
            columns = require_dict(value.get("u"), "u")
            kind = _UPDATE if value.get("p") is not None else _INSERT
        old_raw = require_dict(value["p"], "p") if kind is _UPDATE else None
        cache_key = (key.get("scm"), key.get("tbl"), tuple(columns))
        last_key, plan = self._last
        if cache_key != last_key:  # not the same table shape as the last row
            plan = self._plans.get(cache_key)
        try:
            if plan is None:
                raise _ShapeChanged
            image = _image(plan, columns, text)
            old_image = _image(plan, old_raw, text) if old_raw is not None else None
        except _ShapeChanged:
            plan = self._plans.put(cache_key, _build_plan(key, columns))
            image = _image(plan, columns, text)
            try:
                old_image = _image(plan, old_raw, text) if old_raw is not None else None
            except _ShapeChanged:
                raise DecodeError("'p' has a column that 'u' lacks or types differently") from None
        self._last = (cache_key, plan)
        before = after = None
        if kind is _DELETE:
            before = image
        else:
            after = image
            if old_image is not None:
                before = {**after, **old_image}  # p may hold only the changed columns
        schema = plan.schema
        if plan.temporal and not text:
            temporal = plan.temporal
            schema = self._fsp.apply(schema, temporal, (columns, old_raw), "v")
        partition = key.get("ptn")
        return (_TextRowChange if text else RowChange)(
            kind,
            schema,
            ts,
            before,
            after,
            partition_id=partition if type(partition) is int else None,
            handle_key_only=bool(key.get("ohk")),
        )


def _build_plan(key: dict[str, Any], wire: dict[str, Any]) -> _RowPlan:
    columns = []
    entries: dict[str, _Entry] = {}
    text_entries: dict[str, _Entry] = {}
    compiled: dict[str, tuple[Any, ...]] = {}
    compiled_text: dict[str, tuple[Any, ...]] = {}
    for name, column in wire.items():
        if not isinstance(column, dict):
            raise DecodeError(f"column {name!r} must be a JSON object")
        code, flags, handle = column.get("t"), column.get("f"), column.get("h")
        if type(code) is not int:
            raise DecodeError(f"column {name!r} has no type code")
        legacy = flags is None
        if not legacy and type(flags) is not int:
            raise DecodeError(f"column {name!r} has a bad flag {flags!r}")
        bits = ColumnFlag(flags & 0xFF) if flags is not None else ColumnFlag.NONE
        if handle is True:
            bits |= ColumnFlag.HANDLE_KEY
        ctype = _column_type(code, bits)
        nullable = bool(bits & ColumnFlag.NULLABLE) or legacy
        columns.append(
            Column(
                name,
                ctype,
                nullable=nullable,
                generated=bool(bits & ColumnFlag.GENERATED),
                flags=bits,
            )
        )
        decode = _wire_decoder(ctype, code, legacy)
        to_text = _wire_text(ctype, code, legacy, decode)
        check = handle if legacy else _ANY
        entries[name] = (code, flags, check, _READERS.get(decode, decode))
        text_entries[name] = (code, flags, check, _READERS.get(to_text, to_text))
        compiled[name] = (code, flags, check, kind_of(decode, _OWN_KINDS), decode)
        compiled_text[name] = (code, flags, check, kind_of(to_text, _OWN_KINDS), to_text)
    schema = TableSchema(_str_field(key, "scm"), _str_field(key, "tbl"), tuple(columns))
    return _RowPlan(
        schema, entries, text_entries, temporal_columns(schema), compiled, compiled_text
    )


_ANY = object()  # "h" is not checked when "f" (which carries the handle bit) is present
_INTEGER = object()  # an integer column: int values are read inline (``str`` for text)
# Readers :func:`_image` inlines for the two commonest kinds of column.
_READERS: dict[Any, Any] = {_expect_str: None, _lenient_int: _INTEGER, _int_text: _INTEGER}
# The compiled kinds of this codec's own readers (each agrees with its kind's fast syntax).
_OWN_KINDS = {
    _expect_str: STR,
    _lenient_int: INT,
    _int_text: INT_TEXT,
    _float32_number: FLOAT32,
    _number: DOUBLE,
    _decimal_value: DECIMAL,
    _from_base64: BASE64,
    _text_from_base64: BASE64_TEXT,
    _from_go_quoted: GO_QUOTED,
}


def _image(plan: _RowPlan, columns: dict[str, Any], text: bool = False) -> dict[str, Any]:
    """A row image from its wire columns: canonical values, or changelog text.

    The compiled loop builds it when it is installed and the row is plainly right; this
    Python loop gives the same image or the precise error.  It runs once per column of every
    row, so it is kept flat: string and integer columns
    are read inline (reader ``None`` and ``_INTEGER``), and the try covers the whole loop
    (free until it raises).
    """
    if compiled_values is not None:
        image = compiled_values.column_image(
            plan.compiled_text if text else plan.compiled, columns, _ANY
        )
        if image is not None:
            return image  # type: ignore[no-any-return]
    entries = plan.text_columns if text else plan.columns
    out: dict[str, Any] = {}
    name = ""
    try:
        for name, column in columns.items():
            code, flags, handle, read = entries[name]
            if (
                column["t"] != code
                or column.get("f") != flags
                or (handle is not _ANY and column.get("h") != handle)
            ):
                raise _ShapeChanged
            value = column.get("v")
            if value is None:
                out[name] = None
            elif read is None:
                if type(value) is not str:
                    raise DecodeError(f"expected a string, got {value!r}")
                out[name] = value
            elif read is _INTEGER:
                if type(value) is int:
                    out[name] = str(value) if text else value
                else:
                    out[name] = (_int_text if text else _lenient_int)(value)
            else:
                out[name] = read(value)
    except DecodeError as exc:
        raise DecodeError(f"column {name!r}: {exc.reason}") from None
    except KeyError:
        if name not in entries:
            raise _ShapeChanged from None
        raise DecodeError(f"column {name!r}: a column needs a type code 't'") from None
    except (ValueError, TypeError, AttributeError, binascii.Error, UnicodeDecodeError) as exc:
        raise DecodeError(f"column {name!r}: {exc}") from None
    return out


def _guess_kind(value: bytes | None) -> int:
    if not value:
        return _RESOLVED
    obj = loads(value, "event value")
    if isinstance(obj, dict) and "q" in obj:
        return _DDL
    return _ROW


def _str_field(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    return _expect_str(value)


def _entries(data: bytes, start: int, what: str) -> Iterator[bytes]:
    """Walk ``u64be(len) bytes`` entries, never trusting a length beyond the data."""
    pos, end = start, len(data)
    while pos < end:
        if end - pos < 8:
            raise DecodeError(f"{what} ends inside a length prefix at byte {pos}")
        length = _U64.unpack_from(data, pos)[0]
        pos += 8
        if length > end - pos:
            raise DecodeError(
                f"{what} entry at byte {pos - 8} claims {length} bytes, only {end - pos} remain"
            )
        yield data[pos : pos + length]
        pos += length


register(
    CodecSpec(
        PROTOCOL,
        OpenProtocolOptions,
        OpenProtocolEncoder,
        OpenProtocolDecoder,
        aliases=("open", "default"),
    )
)
