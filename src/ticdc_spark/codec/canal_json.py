"""Canal-JSON (``canal-json``): Alibaba Canal's flat message format, as TiCDC writes it.

One JSON object per message, no Kafka key.  Every value is a string (or null) in MySQL's text
form; binary values map each byte to the Latin-1 character of the same code.  ``sqlType``
holds Java SQL type codes (value-dependent for unsigned integers), ``mysqlType`` the column
types (``int unsigned``; the full ``int(10) unsigned`` with ``content-compatible``).

The encoder writes TiCDC's bytes: DML keys in the order ``id, database, table, pkNames, isDdl,
type, es, ts, sql, sqlType, mysqlType, old, data, _tidb``, DDL and watermarks in struct order
(``data`` before ``old``), Go's HTML-safe string escaping.  ``ts`` is the build time, so two
encodings of one event differ there and only there.

The decoder also reads genuine Alibaba Canal output: several rows per message, ``old`` with
only the changed columns (a key present with null is a change to NULL, an absent key is
unchanged), parameterised ``mysqlType`` such as ``enum('a','b')``, Canal's own ``sqlType``
codes (never needed: types come from ``mysqlType``) and Java float text.  Without the TiDB
extension a message has no commit ts; the decoder uses ``es`` (milliseconds) shifted into a
TSO, which orders messages to the millisecond.
"""

from __future__ import annotations

import binascii
import operator
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from ticdc_spark.changelog import ChangelogBuilder, schema_json
from ticdc_spark.codec.base import DecoderBase, Message, Route, RowSink
from ticdc_spark.codec.catalog import CodecSpec, register
from ticdc_spark.codec.common import (
    INPUT_ERRORS,
    LRUCache,
    TemporalFsp,
    changed_columns,
    handle_key_image,
    loads,
    require_dict,
    row_encode_error,
    row_images,
    temporal_columns,
)
from ticdc_spark.codec.compiled import LATIN1, CanalLayout, kind_of, text_kind
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.largemsg import RECORD_OVERHEAD, ClaimCheckStorage, compress, decompress
from ticdc_spark.codec.options import CommonOptions
from ticdc_spark.ddl import classify
from ticdc_spark.errors import ConfigError, DecodeError, EncodeError, TiCDCSparkError
from ticdc_spark.model import (
    Bootstrap,
    Column,
    DDLEvent,
    DDLType,
    Event,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    compose_ts,
    physical_ms,
)
from ticdc_spark.types import (
    ColumnType,
    Family,
    full_type_desc,
    parse_column_type,
    parse_float,
    plain_type_desc,
    text_formatter,
    text_parser,
)

__all__ = ["CanalJSONDecoder", "CanalJSONEncoder", "CanalJSONOptions", "java_sql_type"]

PROTOCOL = "canal-json"
WATERMARK_TYPE = "TIDB_WATERMARK"


@dataclass(frozen=True, slots=True)
class CanalJSONOptions(CommonOptions):
    """Canal-JSON options (TiCDC names).  ``content-compatible`` implies only-updated ``old``."""

    PROTOCOL: ClassVar[str] = PROTOCOL

    content_compatible: bool = False
    only_output_updated_columns: bool = False

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.large_message_handle_option != "none" and not self.enable_tidb_extension:
            raise ConfigError(
                "canal-json supports large-message-handle-option only with "
                "enable-tidb-extension=true"
            )

    @property
    def updated_old_only(self) -> bool:
        return self.only_output_updated_columns or self.content_compatible


# --------------------------------------------------------------------------------------------
# Java SQL type codes (java.sql.Types), as TiCDC assigns them.

_JAVA_TYPE: dict[str, int] = {
    "tinyint": -6,
    "smallint": 5,
    "mediumint": 4,
    "int": 4,
    "bigint": -5,
    "float": 7,
    "double": 8,
    "decimal": 3,
    "date": 91,
    "datetime": 93,
    "timestamp": 93,
    "time": 92,
    "year": 12,
    "char": 1,
    "varchar": 12,
    "binary": 2004,
    "varbinary": 2004,
    "tinytext": 2005,
    "text": 2005,
    "mediumtext": 2005,
    "longtext": 2005,
    "tinyblob": 2004,
    "blob": 2004,
    "mediumblob": 2004,
    "longblob": 2004,
    "enum": 4,
    "set": -7,
    "bit": -7,
    "json": 12,
    "vector": 12,
    "geometry": -2,
}
# Unsigned integers whose value no longer fits the signed Java type get the next wider code.
_PROMOTION: dict[str, tuple[int, int]] = {
    "tinyint": (127, 5),
    "smallint": (32767, 4),
    "int": (2147483647, -5),
    "bigint": (9223372036854775807, 3),
}
_DDL_TYPE_NAME: dict[DDLType, str] = {
    DDLType.CREATE_TABLE: "CREATE",
    DDLType.DROP_TABLE: "ERASE",
    DDLType.TRUNCATE_TABLE: "TRUNCATE",
    DDLType.RENAME_TABLE: "RENAME",
    DDLType.RENAME_TABLES: "RENAME",
    DDLType.ADD_INDEX: "CINDEX",
    DDLType.ADD_FOREIGN_KEY: "CINDEX",
    DDLType.ADD_PRIMARY_KEY: "CINDEX",
    DDLType.DROP_INDEX: "DINDEX",
    DDLType.DROP_FOREIGN_KEY: "DINDEX",
    DDLType.DROP_PRIMARY_KEY: "DINDEX",
    **dict.fromkeys(
        (
            DDLType.ADD_COLUMN,
            DDLType.DROP_COLUMN,
            DDLType.MODIFY_COLUMN,
            DDLType.REBASE_AUTO_ID,
            DDLType.SET_DEFAULT_VALUE,
            DDLType.MODIFY_TABLE_COMMENT,
            DDLType.RENAME_INDEX,
            DDLType.ADD_TABLE_PARTITION,
            DDLType.DROP_TABLE_PARTITION,
            DDLType.MODIFY_TABLE_CHARSET_AND_COLLATE,
            DDLType.TRUNCATE_TABLE_PARTITION,
            DDLType.ADD_COLUMNS,
            DDLType.DROP_COLUMNS,
            DDLType.ALTER_INDEX_VISIBILITY,
            DDLType.ACTION_MULTI_SCHEMA_CHANGE,
            DDLType.REORGANIZE_PARTITION,
            DDLType.ALTER_TABLE_PARTITIONING,
            DDLType.REMOVE_PARTITIONING,
        ),
        "ALTER",
    ),
}
# A canal DDL type names fewer actions than TiDB has; the SQL refines it where it can.
_DDL_TYPE_OF_NAME: dict[str, DDLType] = {
    "CREATE": DDLType.CREATE_TABLE,
    "ERASE": DDLType.DROP_TABLE,
    "TRUNCATE": DDLType.TRUNCATE_TABLE,
    "RENAME": DDLType.RENAME_TABLE,
    "CINDEX": DDLType.ADD_INDEX,
    "DINDEX": DDLType.DROP_INDEX,
}


def java_sql_type(ctype: ColumnType, value: Any = None) -> int:
    """The ``sqlType`` code TiCDC writes for a column holding ``value``."""
    code = _JAVA_TYPE.get(ctype.name, 12)
    if ctype.unsigned and type(value) is int:
        promotion = _PROMOTION.get(ctype.name)
        if promotion is not None and value > promotion[0]:
            return promotion[1]
    return code


def canal_ddl_type(ddl_type: DDLType) -> str:
    return _DDL_TYPE_NAME.get(ddl_type, "QUERY")


# --------------------------------------------------------------------------------------------
# Values


def _formatter(ctype: ColumnType) -> tuple[Callable[[Any], str], int, int]:
    """Canonical value -> the string in ``data``/``old``: the function, and the (kind, fsp)
    telling compiled_values the same."""
    if ctype.family is Family.BYTES:
        return _latin1, LATIN1, 0
    return text_formatter(ctype), *text_kind(ctype)


_latin1: Callable[[bytes], str] = operator.methodcaller("decode", "latin-1")


def _parser(ctype: ColumnType) -> Callable[[str], Any]:
    """The string in ``data``/``old`` -> canonical value."""
    family = ctype.family
    if family is Family.BYTES:
        return _latin1_bytes
    if family is Family.ENUM:
        return lambda text: _member_or_int(text, ctype.enum_index, "ENUM")
    if family is Family.SET:
        return lambda text: _member_or_int(text, ctype.set_bits, "SET")
    if family is Family.FLOAT:
        return parse_float
    return text_parser(ctype)


def _latin1_bytes(text: str) -> bytes:
    return text.encode("latin-1")


def _member_or_int(text: str, lookup: Callable[[str], int | None], what: str) -> int:
    """TiCDC writes ENUM/SET as their number; other producers may write the member names."""
    if text.isascii() and text.isdigit():  # (str.isdigit alone takes "²", which int refuses)
        return int(text)
    found = lookup(text)
    if found is None:
        raise ValueError(f"{what} value {text!r} is not a number or a known member")
    return found


# --------------------------------------------------------------------------------------------
# Encoder


@dataclass(slots=True)
class _EncodePlan:
    prefix: bytes  # {"id":0,"database":..,"table":..,"pkNames":[..],"isDdl":false,"type":"
    columns: tuple[tuple[str, Callable[[Any], str]], ...]
    sql_types: bytes | None  # constant sqlType object, or None when value-dependent
    base_codes: dict[str, int]
    promotions: tuple[tuple[str, int, int], ...]  # (column, largest unpromoted value, code)
    mysql_types: bytes
    # columns for compiled_values.text_object: (JSON key and colon, name, kind, fsp, formatter)
    compiled: tuple[tuple[bytes, str, int, int, Callable[[Any], str]], ...]
    layout: CanalLayout  # what compiled_values.canal_rows needs of the plan
    promoted_text: dict[int, bytes]  # sqlType by promotion bits, as seen (layout holds it too)


class CanalJSONEncoder:
    """Encodes events as Canal-JSON messages."""

    protocol = PROTOCOL

    def __init__(
        self, options: CanalJSONOptions | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        self.options = options or CanalJSONOptions()
        self.clock = clock or _now_ms
        self._plans: dict[tuple[int, bool], tuple[TableSchema, _EncodePlan]] = {}
        # rows the compiled writer can take whole: a full old, every column of a DELETE, no
        # compression (the Python path writes the others)
        self._whole_rows = not (
            self.options.updated_old_only
            or self.options.delete_only_output_handle_key_columns
            or self.options.large_message_handle_compression != "none"
        )
        self._storage = (
            ClaimCheckStorage(self.options.claim_check_storage_uri)
            if self.options.large_message_handle_option == "claim-check"
            else None
        )

    def encode(self, events: Iterable[Event]) -> list[Message]:
        out: list[Message] = []
        rows: list[RowChange] = []  # a run of rows, written together
        for event in events:
            if isinstance(event, RowChange):
                rows.append(event)
                continue
            if rows:
                self._rows_into(rows, out)
                rows = []
            if isinstance(event, DDLEvent):
                out.append(self._ddl_message(event))
            elif isinstance(event, Watermark):
                if self.options.enable_tidb_extension:
                    out.append(self._watermark_message(event.ts))
            elif not isinstance(event, Bootstrap):
                raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")
        if rows:
            self._rows_into(rows, out)
        return out

    # rows -------------------------------------------------------------------------------

    def _rows_into(self, rows: list[RowChange], out: list[Message]) -> None:
        """Append the rows' messages: a run written by the compiled writer (one wall-clock
        reading for the run's "ts"), any row it leaves, and every row under other options,
        by :meth:`_row_message`.  A value that is not its column's canonical value raises an
        EncodeError naming the row and column, whichever writer met it."""
        try:
            self._write_rows(rows, out)
        except TiCDCSparkError:
            raise
        except INPUT_ERRORS as error:  # a wrong-typed value met a formatter
            raise self._failed_row(rows, error) from error

    def _failed_row(self, rows: list[RowChange], error: Exception) -> EncodeError:
        """The error naming the row of a run that cannot be written: each row is written alone
        (by the Python writer) until one fails, as the run's writer does not say which."""
        for row in rows:
            try:
                self._row_message(row)
            except TiCDCSparkError as own:
                return own if isinstance(own, EncodeError) else EncodeError(str(own))
            except INPUT_ERRORS as failure:
                return row_encode_error(PROTOCOL, row, failure)
        first, last = rows[0], rows[-1]
        return EncodeError(
            f"{PROTOCOL}: the {len(rows)} rows at ts {first.commit_ts}..{last.commit_ts} "
            f"failed together and not alone: {type(error).__name__}: {error}"
        )

    def _write_rows(self, rows: list[RowChange], out: list[Message]) -> None:
        values = None
        if self._whole_rows and compiled_values is not None:
            now = None if self.clock is _now_ms else self.clock()  # None: C reads the clock
            with_tidb = self.options.enable_tidb_extension
            values = compiled_values.canal_rows(self._layout, rows, now, with_tidb)
        if values is None:
            out.extend(map(self._row_message, rows))
            return
        limit = self.options.max_message_bytes - RECORD_OVERHEAD
        append, last, names = out.append, None, ("", "")
        for row, value in zip(rows, values, strict=True):
            if value is None or len(value) > limit:  # left to Python, or a large message
                append(self._row_message(row))
                continue
            if row.schema is not last:  # a run of one table's rows looks its names up once
                last = row.schema
                names = (last.database, last.table)
            append(Message(None, value, _DISPATCH, *names, 1))

    def _layout(self, schema: TableSchema) -> CanalLayout:
        return self._plan(schema, False).layout

    def _row_message(self, row: RowChange) -> Message:
        opts = self.options
        key_only = row.kind is _DELETE and opts.delete_only_output_handle_key_columns
        value = self._row_json(row, key_only, b"")
        if opts.large_message_handle_compression != "none":
            value = compress(value, opts.large_message_handle_compression)
        if len(value) + RECORD_OVERHEAD > opts.max_message_bytes:
            value = self._large_row(row, value)
        schema = row.schema
        return Message(None, value, _DISPATCH, schema.database, schema.table, rows=1)

    def _large_row(self, row: RowChange, value: bytes) -> bytes:
        opts = self.options
        if opts.large_message_handle_option == "none":
            raise EncodeError(
                f"row of {row.schema.qualified_name} at commit ts {row.commit_ts} is "
                f"{len(value)} bytes, over max-message-bytes={opts.max_message_bytes}; raise it "
                "or set large-message-handle-option (with enable-tidb-extension=true)"
            )
        if self._storage is not None:
            location = self._storage.write(None, value)
            marker = b',"claimCheckLocation":' + go_json(orjson.dumps(location))
        else:
            marker = b',"onlyHandleKey":true'
        small = compress(self._row_json(row, True, marker), opts.large_message_handle_compression)
        if len(small) + RECORD_OVERHEAD > opts.max_message_bytes:
            raise EncodeError(
                f"row of {row.schema.qualified_name} is over max-message-bytes even with only "
                "its handle-key columns"
            )
        return small

    def _row_json(self, row: RowChange, key_only: bool, tidb_marker: bytes) -> bytes:
        kind = row.kind
        before, after = row_images(row)
        opts = self.options
        plan = self._plan(row.schema, key_only)
        if key_only:
            before = handle_key_image(row, before) if before is not None else None
            after = handle_key_image(row, after) if after is not None else None
        data_image = before if kind is _DELETE else after
        data = _text_json(plan, data_image)
        old = b"null"
        if kind is _UPDATE:
            old_image = before or {}
            if opts.updated_old_only:
                old_image = changed_columns(old_image, after or {})
            old = b"[" + _text_json(plan, old_image) + b"]"
        sql_types = plan.sql_types
        if sql_types is None:
            sql_types = _sql_types(plan, data_image or {})
        tidb = b""
        if opts.enable_tidb_extension:
            tidb = b',"_tidb":{"commitTs":%d%s}' % (row.commit_ts, tidb_marker)
        return _ROW_MESSAGE % (
            plan.prefix,
            b"UPDATE" if kind is _UPDATE else b"INSERT" if kind is _INSERT else b"DELETE",
            physical_ms(row.commit_ts),
            self.clock(),
            sql_types,
            plan.mysql_types,
            old,
            data,
            tidb,
        )

    def _plan(self, schema: TableSchema, key_only: bool) -> _EncodePlan:
        key = (id(schema), key_only)
        hit = self._plans.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        if len(self._plans) > 4096:
            self._plans.clear()
        plan = _build_encode_plan(schema, key_only, self.options.content_compatible)
        self._plans[key] = (schema, plan)
        return plan

    # DDL and watermarks -----------------------------------------------------------------

    def _ddl_message(self, ddl: DDLEvent) -> Message:
        obj = _struct_message(
            ddl.database,
            ddl.table,
            True,
            canal_ddl_type(ddl.ddl_type),
            physical_ms(ddl.commit_ts),
            self.clock(),
            ddl.query,
        )
        if self.options.enable_tidb_extension:
            obj["_tidb"] = {"commitTs": ddl.commit_ts}
        value = compress(go_json(orjson.dumps(obj)), self.options.large_message_handle_compression)
        return Message(None, value, Route.FIRST_PARTITION, ddl.database, ddl.table)

    def _watermark_message(self, ts: int) -> Message:
        obj = _struct_message("", "", False, WATERMARK_TYPE, physical_ms(ts), self.clock(), "")
        obj["_tidb"] = {"watermarkTs": ts}
        value = compress(orjson.dumps(obj), self.options.large_message_handle_compression)
        return Message(None, value, Route.ALL_TOPICS)


# A row message after the plan's prefix ({"id":0,..,"type":"); the _tidb object last.
_ROW_MESSAGE = b'%s%s","es":%d,"ts":%d,"sql":"","sqlType":%s,"mysqlType":%s,"old":%s,"data":[%s]%s}'
_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE  # no enum lookups
_DISPATCH = Route.DISPATCH


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _struct_message(
    database: str, table: str, is_ddl: bool, kind: str, es: int, ts: int, sql: str
) -> dict[str, Any]:
    """DDL and watermark messages: TiCDC marshals a struct, so ``data`` comes before ``old``."""
    return {
        "id": 0,
        "database": database,
        "table": table,
        "pkNames": None,
        "isDdl": is_ddl,
        "type": kind,
        "es": es,
        "ts": ts,
        "sql": sql,
        "sqlType": None,
        "mysqlType": None,
        "data": None,
        "old": None,
    }


def _build_encode_plan(schema: TableSchema, key_only: bool, full_types: bool) -> _EncodePlan:
    columns = schema.columns
    if key_only:
        keys = set(schema.handle_key)
        columns = tuple(c for c in columns if c.name in keys)
    primary = set(schema.primary_key)
    pk_names = [c.name for c in schema.columns if c.name in primary]
    prefix = go_json(
        b'{"id":0,"database":'
        + orjson.dumps(schema.database)
        + b',"table":'
        + orjson.dumps(schema.table)
        + b',"pkNames":'
        + orjson.dumps(pk_names)
        + b',"isDdl":false,"type":"'
    )
    base_codes = {c.name: java_sql_type(c.type) for c in columns}
    promotions = tuple(
        (c.name, *_PROMOTION[c.type.name])
        for c in columns
        if c.type.unsigned and c.type.name in _PROMOTION
    )
    describe = full_type_desc if full_types else plain_type_desc
    mysql_types = go_json(orjson.dumps({c.name: describe(c.type) for c in columns}))
    constant = None if promotions else go_json(orjson.dumps(base_codes or None))
    writers = [(c.name, *_formatter(c.type)) for c in columns]
    compiled = tuple(
        (go_json(orjson.dumps(name)) + b":", name, kind, fsp, fmt)
        for name, fmt, kind, fsp in writers
    )
    promoted_text: dict[int, bytes] = {}
    return _EncodePlan(
        prefix,
        tuple((name, fmt) for name, fmt, _, _ in writers),
        constant,
        base_codes,
        promotions,
        mysql_types,
        compiled,
        CanalLayout(compiled, prefix, mysql_types, constant, promotions, promoted_text),
        promoted_text,
    )


def _sql_types(plan: _EncodePlan, image: dict[str, Any]) -> bytes:
    """sqlType with unsigned integers promoted by the value they hold in this row."""
    promotions = plan.promotions
    if compiled_values is not None and len(promotions) <= 64:
        promoted = compiled_values.exceeding(promotions, image)
    else:  # a bit per promotion whose column holds an int above its largest
        promoted = sum(
            1 << i
            for i, (name, largest, _) in enumerate(promotions)
            if type(value := image.get(name)) is int and value > largest
        )
    text = plan.promoted_text.get(promoted)
    if text is None:
        codes = plan.base_codes.copy()
        for i, (name, _, code) in enumerate(promotions):
            if promoted >> i & 1:
                codes[name] = code
        text = plan.promoted_text[promoted] = go_json(orjson.dumps(codes or None))
    return text


def _text_json(plan: _EncodePlan, image: dict[str, Any] | None) -> bytes:
    """An image as the JSON object of a ``data``/``old`` row: by the compiled loop when it
    is built and takes the row, else formatted here."""
    if compiled_values is not None:
        text = compiled_values.text_object(plan.compiled, image or {})
        if text is not None:
            return text  # type: ignore[no-any-return]
    return go_json(orjson.dumps(_text_image(plan.columns, image)))


def _text_image(
    columns: tuple[tuple[str, Callable[[Any], str]], ...], image: dict[str, Any] | None
) -> dict[str, str | None]:
    """Format an image's columns (those it has, in the plan's order)."""
    image = image or {}
    try:  # the common case: the image has every column
        return {name: None if (v := image[name]) is None else fmt(v) for name, fmt in columns}
    except KeyError:  # only some columns (only-updated old, handle-key-only)
        return {
            name: None if (v := image[name]) is None else fmt(v)
            for name, fmt in columns
            if name in image
        }


# --------------------------------------------------------------------------------------------
# Decoder


@dataclass(slots=True)
class _DecodePlan:
    schema: TableSchema
    parsers: dict[str, Callable[[str], Any]]
    temporal: tuple[str, ...]
    schema_text: str  # the changelog's schema JSON
    binary: tuple[str, ...]  # columns whose Latin-1 text becomes base64 in the changelog
    converts: tuple[tuple[str, Callable[[str], Any]], ...]  # columns whose text is not the value
    compiled: tuple[tuple[str, int, Callable[[str], Any]], ...]  # converts, for compiled_values


_OWN_KINDS = {_latin1_bytes: LATIN1}  # compiled kinds of this codec's own parsers
_ROW_KINDS = {"INSERT": RowKind.INSERT, "UPDATE": RowKind.UPDATE, "DELETE": RowKind.DELETE}
_NO_TIDB: dict[str, Any] = {}


class CanalJSONDecoder(DecoderBase):
    """Decodes Canal-JSON from TiCDC and from Alibaba Canal."""

    protocol = PROTOCOL

    def __init__(self, options: CanalJSONOptions | None = None) -> None:
        self.options = options or CanalJSONOptions()
        self._plans: LRUCache[tuple[Any, ...], _DecodePlan] = LRUCache()
        self._last: dict[tuple[str, str], tuple[Any, Any, Any, _DecodePlan]] = {}
        self._shapes: dict[str, tuple[str, tuple[str, str]] | None] = {}
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
        try:  # (not a context manager: this runs once per message)
            value = message.value
            if value is None:
                raise DecodeError("a Canal-JSON message needs a value")
            if self.options.large_message_handle_compression != "none":
                value = decompress(value, self.options.large_message_handle_compression)
            return self.decode_object(require_dict(loads(value), "message"))
        except DecodeError as exc:
            raise exc.at(message.position, PROTOCOL) from None
        except INPUT_ERRORS as exc:
            raise _input_error(exc, message) from None

    def decode_changelog(self, message: Message, builder: ChangelogBuilder) -> None:
        """Append the message's changelog rows, keeping the wire text (no typed values).

        The fast path of the Spark decode stage: values are checked to be strings and binary
        ones re-encoded as base64, nothing else is converted; DDL, watermarks and claim-check
        pointers go through :meth:`decode`.
        """
        try:
            self._changelog(message, builder)
        except DecodeError as exc:
            raise exc.at(message.position, PROTOCOL) from None
        except INPUT_ERRORS as exc:
            raise _input_error(exc, message) from None

    def _changelog(self, message: Message, builder: ChangelogBuilder) -> None:
        value = message.value
        if value is None:
            raise DecodeError("a Canal-JSON message needs a value")
        if self.options.large_message_handle_compression != "none":
            value = decompress(value, self.options.large_message_handle_compression)
        obj = loads(value)
        if type(obj) is not dict:
            raise DecodeError("message must be a JSON object")
        position = (message.topic, message.partition or 0, message.offset or 0)
        kind = _ROW_KINDS.get(obj.get("type"))  # type: ignore[arg-type]
        tidb = obj.get("_tidb")
        if type(tidb) is not dict:
            tidb = {}
        if kind is None or obj.get("isDdl") is True or "claimCheckLocation" in tidb:
            builder.add_events(self.decode_object(obj), *position)
            return
        commit_ts = tidb.get("commitTs")
        if type(commit_ts) is not int or commit_ts < 0:
            commit_ts = self._commit_ts(obj, tidb)
        key_only = tidb.get("onlyHandleKey") is True
        op = kind.value
        for seq, (before, after, plan) in enumerate(self._text_rows(obj, kind)):
            schema = plan.schema
            builder.append_row(
                op,
                schema.database,
                schema.table,
                commit_ts,
                before,
                after,
                plan.schema_text,
                (*position, seq),
                key_only,
            )

    def decode_batch(
        self,
        values: list[bytes | None],
        topics: list[str],
        partitions: list[int],
        offsets: list[int],
        builder: ChangelogBuilder,
        one_by_one: Callable[[int], None],
    ) -> None:
        """Append the changelog rows of a batch of messages (the Spark decode stage's path).

        Row messages with one row of a table shape seen before (TiCDC's, and Alibaba Canal's
        single-row ones) take a short path; every other message, and any message the short
        path does not understand, goes through ``one_by_one(i)``, which decodes message ``i``
        with the full checks (and turns a bad one into a dead letter).  The short path leaves
        one check to Arrow: image values must be strings or null, which the builder's
        conversion enforces for the whole batch (the caller redoes the batch one by one when
        it fails).
        """
        if self.options.large_message_handle_compression != "none":
            for i in range(len(values)):
                one_by_one(i)
            return
        last = self._last
        add_row = builder.append_row
        for i, value in enumerate(values):
            try:
                obj = orjson.loads(value)  # type: ignore[arg-type]
                op = obj["type"]
                tidb = obj.get("_tidb")
                if tidb is None:  # Alibaba Canal
                    tidb = _NO_TIDB
                commit_ts = self._commit_ts(obj, tidb)  # (a bad one raises DecodeError)
                data = obj["data"]
                row = data[0]
                mysql_types = obj["mysqlType"]
                slot = (obj["database"], obj["table"])
                hit = last.get(slot)
                if (
                    op not in _ROW_KINDS
                    or type(slot[0]) is not str  # (null names: the careful path's "")
                    or type(slot[1]) is not str
                    or len(data) != 1
                    or "claimCheckLocation" in tidb
                    or obj["isDdl"] is not False
                    or hit is None
                    or not _same_shape(hit, mysql_types, obj["pkNames"] or (), row)
                ):
                    raise LookupError  # not the short path's shape: see below
                plan = hit[3]
                if op == "INSERT":
                    before, after = None, row
                elif op == "DELETE":
                    before, after = row, None
                else:
                    old = obj["old"]
                    if len(old) != 1:
                        raise LookupError
                    before, after = old[0], row
                    if type(before) is not dict:
                        raise LookupError
                    if tuple(before) != hit[2]:  # Alibaba Canal: only the changed columns
                        if not before.keys() <= row.keys():
                            raise LookupError
                        before = {**row, **before}
                if plan.binary:
                    before = None if before is None else _base64_binary(plan, before)
                    after = None if after is None else _base64_binary(plan, after)
            except (LookupError, TypeError, AttributeError, ValueError, DecodeError):
                one_by_one(i)
                continue
            add_row(
                op,
                slot[0],
                slot[1],
                commit_ts,
                before,
                after,
                plan.schema_text,
                (topics[i], partitions[i], offsets[i], 0),
                tidb.get("onlyHandleKey") is True,
            )

    def decode_arrow_batch(
        self, batch: Any, careful: Callable[[int], None], builder: ChangelogBuilder
    ) -> Any:
        """The changelog batch of an Arrow batch of Kafka records, with the compiled scanner
        (:mod:`ticdc_spark.codec.canal_arrow`); None when it is not installed or does not
        apply.  ``careful(i)`` decodes record ``i`` with every check into ``builder``."""
        from ticdc_spark.codec.canal_arrow import decode_batch

        if self.options.large_message_handle_compression != "none":
            return None
        return decode_batch(self, batch, careful, builder)

    def arrow_shape(self, text: str) -> tuple[str, tuple[str, str]] | None:
        """For the scanner: the schema JSON and table of a shape (``[database, table,
        mysqlType, pkNames, [column, ...]]``), or None if its messages need the careful path
        (a shape the plan refuses, duplicate or unknown columns, binary columns)."""
        hit = self._shapes.get(text, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        result: tuple[str, tuple[str, str]] | None = None
        try:  # (anything unexpected in the shape leaves result None: the careful path)
            database, table, mysql_types, pk, names = orjson.loads(text)
            if type(mysql_types) is dict and len(set(names)) == len(names):
                obj = {
                    "database": database,
                    "table": table,
                    "mysqlType": mysql_types,
                    "pkNames": pk,
                }
                plan = self._plan(obj, dict.fromkeys(names))
                if not plan.binary and plan.parsers.keys() >= set(names):
                    result = (plan.schema_text, (database, table))
        except (DecodeError, ValueError, TypeError):
            pass
        if len(self._shapes) > 4096:
            self._shapes.clear()
        self._shapes[text] = result
        return result

    def _text_rows(
        self, obj: dict[str, Any], kind: RowKind
    ) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None, _DecodePlan]]:
        data, old = _data_and_old(obj, kind)
        plan = self._plan(obj, require_dict(data[0], "data row"))
        if len(data) == 1 and kind is not RowKind.UPDATE:  # TiCDC: one row per message
            image = _changelog_image(plan, data[0])
            return [(image, None, plan) if kind is RowKind.DELETE else (None, image, plan)]
        out: list[tuple[dict[str, Any] | None, dict[str, Any] | None, _DecodePlan]] = []
        for i, raw in enumerate(data):
            image = _changelog_image(plan, require_dict(raw, "data row"))
            if kind is RowKind.DELETE:
                out.append((image, None, plan))
            elif kind is RowKind.INSERT:
                out.append((None, image, plan))
            else:
                changed = _changelog_image(plan, require_dict(old[i], "old row")) if old else {}
                out.append(({**image, **changed}, image, plan))
        return out

    def decode_object(self, obj: dict[str, Any]) -> list[Event]:
        """Decode one parsed Canal-JSON object (raises DecodeError without a position)."""
        kind = obj.get("type")
        tidb = obj.get("_tidb")
        tidb = tidb if isinstance(tidb, dict) else {}
        if obj.get("isDdl") is True:
            return [self._ddl(obj, tidb)]
        if kind == WATERMARK_TYPE:
            return [Watermark(_int(tidb.get("watermarkTs"), "_tidb.watermarkTs"))]
        row_kind = _ROW_KINDS.get(kind)  # type: ignore[arg-type]
        if row_kind is None:
            if isinstance(kind, str) and kind:  # a non-DML statement Canal reports as QUERY
                return [self._ddl(obj, tidb)]
            raise DecodeError(f"unknown message type {kind!r}")
        location = tidb.get("claimCheckLocation")
        if location:
            return self._claim_checked(location)
        return self._rows(obj, row_kind, tidb)

    def _claim_checked(self, location: Any) -> list[Event]:
        if self._storage is None:
            raise DecodeError(
                "message points to claim-check storage; set claim-check-storage-uri to read it"
            )
        _key, value = self._storage.read(str(location))
        value = decompress(value, self.options.large_message_handle_compression)
        obj = require_dict(loads(value, "claim-check message"), "claim-check message")
        obj.get("_tidb", {}).pop("claimCheckLocation", None)
        return self.decode_object(obj)

    def _commit_ts(self, obj: dict[str, Any], tidb: dict[str, Any]) -> int:
        ts = tidb.get("commitTs")
        if ts is not None:
            return _int(ts, "_tidb.commitTs")
        return compose_ts(_int(obj.get("es") or 0, "es"))

    def _ddl(self, obj: dict[str, Any], tidb: dict[str, Any]) -> DDLEvent:
        sql = obj.get("sql") or ""
        if not isinstance(sql, str):
            raise DecodeError("DDL 'sql' must be a string")
        ddl_type = classify(sql)
        if ddl_type is DDLType.NONE:
            ddl_type = _DDL_TYPE_OF_NAME.get(str(obj.get("type")), DDLType.NONE)
        return DDLEvent(
            ddl_type, sql, self._commit_ts(obj, tidb), _str(obj, "database"), _str(obj, "table")
        )

    def _rows(self, obj: dict[str, Any], kind: RowKind, tidb: dict[str, Any]) -> list[Event]:
        data, old = _data_and_old(obj, kind)
        commit_ts = self._commit_ts(obj, tidb)
        only_key = tidb.get("onlyHandleKey") is True
        plan = self._plan(obj, require_dict(data[0], "data row"))
        events: list[Event] = []
        for i, raw in enumerate(data):
            if i:
                require_dict(raw, "data row")
            image = _image(plan, raw)
            raw_old = require_dict(old[i], "old row") if old is not None else None
            schema = plan.schema
            if plan.temporal:
                schema = self._fsp.apply(schema, plan.temporal, (raw, raw_old))
            if kind is RowKind.DELETE:
                events.append(RowChange(kind, schema, commit_ts, image, None, None, only_key))
            elif kind is RowKind.INSERT:
                events.append(RowChange(kind, schema, commit_ts, None, image, None, only_key))
            else:
                before = {**image, **_image(plan, raw_old)} if raw_old is not None else dict(image)
                events.append(RowChange(kind, schema, commit_ts, before, image, None, only_key))
        return events

    def _plan(self, obj: dict[str, Any], first_row: dict[str, Any]) -> _DecodePlan:
        """The decode plan of the message's table shape.

        The last shape seen per table is checked first with C-level dict comparisons, which is
        what a stream of one table's messages needs; other shapes go through the LRU cache.
        """
        mysql_types = obj.get("mysqlType")
        if type(mysql_types) is not dict:
            raise DecodeError("a DML message needs a 'mysqlType' object")
        pk = obj.get("pkNames") or ()
        slot = (obj.get("database"), obj.get("table"))
        last = self._last.get(slot)  # type: ignore[arg-type]
        if last is not None and _same_shape(last, mysql_types, pk, first_row):
            return last[3]
        names = tuple(first_row)
        names += tuple(n for n in mysql_types if n not in first_row)
        key = (
            *slot,
            names,
            tuple(mysql_types.get(n) for n in names),
            tuple(pk) if isinstance(pk, list) else pk,
        )
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans.put(key, _build_decode_plan(obj, names, mysql_types, pk))
        if len(self._last) > 4096:
            self._last.clear()
        self._last[slot] = (mysql_types, pk, tuple(first_row), plan)  # type: ignore[index]
        return plan


def _same_shape(
    last: tuple[dict[str, Any], Any, tuple[str, ...], _DecodePlan],
    mysql_types: dict[str, Any],
    pk: Any,
    row: Any,
) -> bool:
    """Whether a message has the table shape a plan memo entry was made for: the same
    ``mysqlType`` and ``pkNames``, and a first row with the same columns in the same order.
    Order matters (dict and keys-view equality ignore it): the plan's columns are the row's
    in its order, then ``mysqlType``'s others in theirs."""
    return (
        type(row) is dict
        and last[0] == mysql_types
        and last[1] == pk
        and tuple(row) == last[2]
        and (len(row) == len(mysql_types) or tuple(mysql_types) == tuple(last[0]))
    )


def _build_decode_plan(
    obj: dict[str, Any], names: tuple[str, ...], mysql_types: dict[str, Any], pk: Any
) -> _DecodePlan:
    if not isinstance(pk, list | tuple) or not all(isinstance(n, str) for n in pk):
        raise DecodeError("'pkNames' must be an array of column names or null")
    columns = []
    for name in names:
        text = mysql_types.get(name)
        if not isinstance(text, str):
            raise DecodeError(f"column {name!r} has no mysqlType")
        try:
            ctype = parse_column_type(text)
        except ValueError as exc:
            raise DecodeError(f"column {name!r}: {exc}") from None
        columns.append(Column(name, ctype, nullable=name not in pk))
    indexes = (Index("PRIMARY", tuple(pk), primary=True, unique=True),) if pk else ()
    schema = TableSchema(_str(obj, "database"), _str(obj, "table"), tuple(columns), indexes)
    schema = schema.with_derived_flags()
    parsers = {c.name: _parser(c.type) for c in schema.columns}
    binary = tuple(c.name for c in schema.columns if c.type.is_binary)
    converts = tuple((name, parse) for name, parse in parsers.items() if parse is not str)
    kinds = tuple((name, kind_of(parse, _OWN_KINDS), parse) for name, parse in converts)
    return _DecodePlan(
        schema, parsers, temporal_columns(schema), schema_json(schema), binary, converts, kinds
    )


def _input_error(exc: Exception, message: Message) -> DecodeError:
    return DecodeError(
        str(exc) or type(exc).__name__,
        protocol=PROTOCOL,
        position=message.position,
        payload=message.value,
    )


def _image(plan: _DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """Canonical values of a data/old row: by the compiled loop when it is built and the row
    is plainly right, else checked at C speed first, then parsed."""
    if compiled_values is not None:
        image = compiled_values.text_image(plan.compiled, raw, plan.parsers)
        if image is not None:
            return image  # type: ignore[no-any-return]
    _check_texts(plan, raw)
    image = dict(raw)  # text columns (parser str) are their own value: only the rest is parsed
    try:
        for name, parse in plan.converts:
            text = image.get(name)
            if text is not None:
                image[name] = parse(text)
    except (ValueError, UnicodeError):
        return _image_slowly(plan, raw)  # find the column, for the message
    return image


def _image_slowly(plan: _DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    parsers = plan.parsers
    out: dict[str, Any] = {}
    for name, text in raw.items():
        if text is None:
            out[name] = None
            continue
        parse = parsers.get(name)
        if parse is None:
            raise DecodeError(f"column {name!r} is not in mysqlType")
        if type(text) is not str:
            raise DecodeError(f"column {name!r}: values must be strings or null, got {text!r}")
        try:
            out[name] = parse(text)
        except (ValueError, UnicodeError) as exc:
            raise DecodeError(f"column {name!r}: {exc}") from None
    return out


def _data_and_old(obj: dict[str, Any], kind: RowKind) -> tuple[list[Any], list[Any] | None]:
    """The ``data`` rows and, for an UPDATE, the ``old`` rows aligned with them."""
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        raise DecodeError(f"{kind.value} message needs a non-empty 'data' array")
    old = obj.get("old") if kind is RowKind.UPDATE else None
    if old is not None and (not isinstance(old, list) or len(old) != len(data)):
        raise DecodeError("'old' must be an array as long as 'data'")
    return data, old


_TEXT_TYPES = frozenset((str, type(None)))


def _check_texts(plan: _DecodePlan, raw: dict[str, Any]) -> None:
    """Every value a string or null, every column in mysqlType (C-speed set operations)."""
    if not set(map(type, raw.values())) <= _TEXT_TYPES:
        bad = next(n for n, v in raw.items() if type(v) not in _TEXT_TYPES)
        raise DecodeError(f"column {bad!r}: values must be strings or null, got {raw[bad]!r}")
    if not raw.keys() <= plan.parsers.keys():
        unknown = next(n for n in raw if n not in plan.parsers)
        raise DecodeError(f"column {unknown!r} is not in mysqlType")


def _changelog_image(plan: _DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """A data/old row as changelog text: strings checked, binary Latin-1 turned into base64."""
    _check_texts(plan, raw)
    return _base64_binary(plan, raw) if plan.binary else raw


def _base64_binary(plan: _DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of a row with its binary columns' Latin-1 text as base64."""
    image = dict(raw)
    for name in plan.binary:
        text = image.get(name)
        if text is not None:
            try:
                image[name] = binascii.b2a_base64(text.encode("latin-1"), newline=False).decode()
            except UnicodeEncodeError:
                raise DecodeError(
                    f"column {name!r}: binary text has characters over U+00FF"
                ) from None
    return image


def _str(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DecodeError(f"'{name}' must be a string")
    return value


def _int(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"'{what}' must be a non-negative integer, got {value!r}")
    return value


register(
    CodecSpec(
        PROTOCOL, CanalJSONOptions, CanalJSONEncoder, CanalJSONDecoder, aliases=("canal_json",)
    )
)
