"""Open Protocol decoding: one decode path into a :class:`~ticdc_spark.codec.base.RowSink`.

Besides what the encoder writes it reads the legacy layout of TiCDC v4.0.0-v4.0.4 (columns
without ``f``; see :data:`~ticdc_spark.codec.open_protocol.dialect.LEGACY`), old batches that
carry DDL and resolved events beside each other (TiCDC's Java example data), and keys in any
member order.  An UPDATE sent with old value off has no ``p`` and decodes as an INSERT (an
upsert): nothing in the message tells them apart.

Each table shape seen on the wire gets a plan holding two readers per column: to canonical
values (for sinks that take events) and to changelog text (for the Spark decode stage's
changelog sink, skipping the canonical value where the wire already holds the text).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, field
from typing import Any, cast

from ticdc_spark.codec.base import DecoderBase, Message, RowSink
from ticdc_spark.codec.common import (
    LRUCache,
    TemporalFsp,
    decoding,
    loads,
    require_dict,
    temporal_columns,
)
from ticdc_spark.codec.compiled import kind_of
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.convert import Converter, Dialect
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.codec.open_protocol.dialect import (
    CURRENT,
    DECODE_KINDS,
    INTEGER_DECODER,
    LEGACY,
    STRING_DECODER,
)
from ticdc_spark.codec.open_protocol.options import OpenProtocolOptions
from ticdc_spark.codec.open_protocol.wire import (
    DDL,
    PROTOCOL,
    RESOLVED,
    ROW,
    batch,
    column_type,
    expect_str,
    guess_kind,
    row_value,
    str_field,
)
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import (
    Column,
    ColumnFlag,
    DDLEvent,
    DDLType,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)

__all__ = ["OpenProtocolDecoder"]

_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE  # no enum lookups

_ANY = object()  # "h" is not checked when "f" (which carries the handle bit) is present
_INTEGER = object()  # an integer column: int values are read inline
# Readers :func:`_python_image` inlines for the two commonest kinds of column (None: a string).
_INLINE: dict[Any, Any] = {STRING_DECODER: None, INTEGER_DECODER: _INTEGER}

# A row decoded, before the sink takes it (a message goes to the sink whole or not at all): a
# RowChange for a sink of canonical values, which takes the message's events in one call;
# for a text sink (kind, schema, commit ts, before, after, handle-key only, partition id).
_TextRow = tuple[RowKind, TableSchema, int, Any, Any, bool, int | None]
_Row = RowChange | _TextRow
_Item = _Row | DDLEvent | Watermark


@dataclass(slots=True)
class _Readers:
    """One way of reading a table shape's wire values: to canonical values or to text."""

    # name -> (type code, flag, handle check, wire -> value or a reader _python_image inlines)
    columns: dict[str, tuple[Any, Any, Any, Any]] = field(default_factory=dict)
    # the same for compiled_values.column_image: (type code, flag, handle, kind, wire -> value)
    compiled: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def add(self, name: str, code: int, flags: Any, check: Any, convert: Converter) -> None:
        self.columns[name] = (code, flags, check, _INLINE.get(convert, convert))
        self.compiled[name] = (code, flags, check, kind_of(convert, DECODE_KINDS), convert)


@dataclass(slots=True)
class _RowPlan:
    """A table shape seen on the wire: per column its (type code, flags, handle) as sent and
    the functions reading its values.  Messages are checked against it column by column."""

    schema: TableSchema
    temporal: tuple[str, ...]
    readers: tuple[_Readers, _Readers]  # by side: to canonical values, to changelog text


# Which readers a sink wants (RowSink.text): an index into _RowPlan.readers.
_Side = int
_CANONICAL, _TEXT = 0, 1


class _ShapeChanged(Exception):
    """A column's type or flags differ from the cached plan (e.g. after MODIFY COLUMN)."""


class OpenProtocolDecoder(DecoderBase):
    """Decodes Open Protocol messages (current, legacy, and mixed old batches)."""

    protocol = PROTOCOL

    def __init__(
        self, options: OpenProtocolOptions | None = None, *, table_filter: TableFilter | None = None
    ) -> None:
        self.options = options or OpenProtocolOptions()
        # the table filter, or None when every table is kept (TableFilter's default)
        self._keep = None if table_filter is None or table_filter.everything else table_filter
        self._large = LargeMessages(PROTOCOL, self.options)
        self._compressed = self._large.compression != "none"
        self._plans: LRUCache[tuple[Any, ...], _RowPlan] = LRUCache()
        self._last: tuple[Any, _RowPlan | None] = (None, None)  # (cache key, plan) last used
        self._fsp = TemporalFsp()

    def decode_into(self, message: Message, sink: RowSink) -> None:
        with decoding(PROTOCOL, message):
            if message.key is None:
                raise DecodeError("an Open Protocol message needs a key")
            side = _TEXT if sink.text else _CANONICAL
            items = self._items(message.key, message.value or b"", side)
        where = (message.topic, message.partition or 0, message.offset or 0)
        if side == _CANONICAL:
            if self._keep is not None:
                items = [item for item in items if item is not None]
            sink.add_events(items, *where)  # type: ignore[arg-type]  # (rows are RowChanges)
        else:
            _hand_over(items, sink, *where)

    def _items(self, key: bytes, value: bytes, side: _Side) -> list[_Item | None]:
        """The events of a message's key entries; None for an entry of a table the filter
        drops (its value is never decoded), so the others keep their places."""
        return [self._item(key_obj, entry, side) for key_obj, entry in batch(key, value)]

    def _item(self, key: dict[str, Any], value: bytes | None, side: _Side) -> _Item | None:
        kind = key.get("t")
        if kind is None:  # no type: classify by the value, as TiCDC's Java example does
            kind = guess_kind(value)
        ts = key.get("ts")
        if type(ts) is not int or ts < 0:
            raise DecodeError(f"event key has no valid ts: {ts!r}")
        if kind == RESOLVED:
            return Watermark(ts)
        if self._keep is not None and not self._kept(key, kind):
            return None
        if value is None:
            raise DecodeError("key has more entries than value")
        if self._compressed:
            value = self._large.decompress(value)
        if kind == DDL:
            return _ddl_event(key, value, ts)
        if kind != ROW:
            raise DecodeError(f"unknown event type t={kind!r}")
        if key.get("ccl"):
            return self._claim_checked(key, side)
        return self._row(key, row_value(value), ts, side)

    def _kept(self, key: dict[str, Any], kind: Any) -> bool:
        """Whether the table filter keeps the table of a key entry (a DDL without a table:
        its schema).  A name that is not a string counts as empty."""
        database, table = key.get("scm"), key.get("tbl")
        database = database if type(database) is str else ""
        table = table if type(table) is str else ""
        keep = cast(TableFilter, self._keep)
        if not table and kind == DDL:
            return keep.matches_schema(database)
        return keep.matches(database, table)

    def _claim_checked(self, key: dict[str, Any], side: _Side) -> _Item | None:
        full_key, full_value = self._large.fetch(expect_str(key["ccl"]))
        items = self._items(full_key or b"", full_value, side)
        if len(items) != 1:
            raise DecodeError("claim-check file must hold exactly one event")
        return items[0]

    def _row(self, key: dict[str, Any], value: dict[str, Any], ts: int, side: _Side) -> _Row:
        """A row event: "d" (DELETE), or "u" with "p" (UPDATE) or without (INSERT)."""
        deleted, sent_old = value.get("d"), value.get("p")
        old: dict[str, Any] | None = None
        if deleted:
            kind, columns = _DELETE, require_dict(deleted, "d")
        else:
            columns = require_dict(value.get("u"), "u")
            kind = _INSERT if sent_old is None else _UPDATE
            old = None if sent_old is None else require_dict(sent_old, "p")
        plan, image, old_image = self._images(key, columns, old, side)
        schema = plan.schema
        if plan.temporal and side == _CANONICAL:
            schema = self._fsp.apply(schema, plan.temporal, (columns, old), "v")
        partition = key.get("ptn")
        ptn = partition if type(partition) is int else None
        before, after = (image, None) if kind is _DELETE else (old_image, image)
        if old_image is not None:
            before = {**image, **old_image}  # p may hold only the changed columns
        if side == _CANONICAL:
            return RowChange(kind, schema, ts, before, after, ptn, bool(key.get("ohk")))
        return (kind, schema, ts, before, after, bool(key.get("ohk")), ptn)

    def _images(
        self, key: dict[str, Any], columns: dict[str, Any], old: dict[str, Any] | None, side: _Side
    ) -> tuple[_RowPlan, dict[str, Any], dict[str, Any] | None]:
        """The row's plan and its images read by it (a new plan when the shape changed)."""
        cache_key = (key.get("scm"), key.get("tbl"), tuple(columns))
        last_key, plan = self._last
        if cache_key != last_key:  # not the same table shape as the last row
            plan = self._plans.get(cache_key)
        try:
            if plan is None:
                raise _ShapeChanged
            readers = plan.readers[side]
            image = _image(readers, columns)
            old_image = _image(readers, old) if old is not None else None
        except _ShapeChanged:
            plan = self._plans.put(cache_key, _build_plan(key, columns))
            image, old_image = _fresh_images(plan.readers[side], columns, old)
        self._last = (cache_key, plan)
        return plan, image, old_image


def _hand_over(
    items: list[_Item | None], sink: RowSink, topic: str, partition: int, offset: int
) -> None:
    """Give a message's events to a text sink, each at its place in the message."""
    add_row = sink.add_row
    for seq, item in enumerate(items):
        if type(item) is tuple:
            kind, schema, ts, before, after, key_only, ptn = item
            where = (topic, partition, offset, seq)
            if key_only or ptn is not None:
                add_row(kind, schema, ts, before, after, where, key_only=key_only, partition_id=ptn)
            else:  # (the defaults: a call without keywords costs less, once per row)
                add_row(kind, schema, ts, before, after, where)
        elif item is not None:  # (None: a filtered table's)
            sink.add_events([item], topic, partition, offset, seq)  # type: ignore[list-item]


def _ddl_event(key: dict[str, Any], value: bytes, ts: int) -> DDLEvent:
    obj = require_dict(loads(value, "DDL value"), "DDL value")
    kind = DDLType(int(obj.get("t") or 0))
    return DDLEvent(kind, expect_str(obj["q"]), ts, str_field(key, "scm"), str_field(key, "tbl"))


def _fresh_images(
    readers: _Readers, columns: dict[str, Any], old: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The images read by a plan just built from ``columns``: "p" must fit it too."""
    image = _image(readers, columns)
    try:
        return image, (_image(readers, old) if old is not None else None)
    except _ShapeChanged:
        raise DecodeError("'p' has a column that 'u' lacks or types differently") from None


# --------------------------------------------------------------------------------------------
# Plans


def _build_plan(key: dict[str, Any], wire: dict[str, Any]) -> _RowPlan:
    columns = []
    canonical, text = _Readers(), _Readers()
    for name, raw in wire.items():
        column, check, dialect = _wire_column(name, raw)
        columns.append(column)
        code, flags = raw["t"], raw.get("f")
        canonical.add(name, code, flags, check, dialect.decoder(column.type))
        text.add(name, code, flags, check, dialect.text(column.type))
    schema = TableSchema(str_field(key, "scm"), str_field(key, "tbl"), tuple(columns))
    return _RowPlan(schema, temporal_columns(schema), (canonical, text))


def _wire_column(name: str, raw: Any) -> tuple[Column, Any, Dialect]:
    """A column as its first object on the wire says: the column, the "h" value later
    objects must repeat (legacy columns have no "f" carrying it), and its dialect."""
    if not isinstance(raw, dict):
        raise DecodeError(f"column {name!r} must be a JSON object")
    code, flags, handle = raw.get("t"), raw.get("f"), raw.get("h")
    if type(code) is not int:
        raise DecodeError(f"column {name!r} has no type code")
    legacy = flags is None
    if not legacy and type(flags) is not int:
        raise DecodeError(f"column {name!r} has a bad flag {flags!r}")
    bits = ColumnFlag.NONE if flags is None else ColumnFlag(flags & 0xFF)
    if handle is True:
        bits |= ColumnFlag.HANDLE_KEY
    nullable = bool(bits & ColumnFlag.NULLABLE) or legacy
    generated = bool(bits & ColumnFlag.GENERATED)
    ctype = column_type(code, bits)
    column = Column(name, ctype, nullable=nullable, generated=generated, flags=bits)
    if legacy:
        return column, handle, LEGACY
    return column, _ANY, CURRENT


# --------------------------------------------------------------------------------------------
# Images


def _image(readers: _Readers, columns: dict[str, Any]) -> dict[str, Any]:
    """A row image from its wire columns, by one set of readers: by the compiled loop when
    it is installed and the row is plainly right, else by :func:`_python_image`, which gives
    the same image or the precise error."""
    if compiled_values is not None:
        image = compiled_values.column_image(readers.compiled, columns, _ANY)
        if image is not None:
            return image  # type: ignore[no-any-return]
    return _python_image(readers.columns, columns)


def _python_image(entries: dict[str, Any], columns: dict[str, Any]) -> dict[str, Any]:
    """It runs once per column of every row the compiled loop does not take, so it is kept
    flat: string and integer columns are read inline (reader ``None`` and ``_INTEGER``), and
    the try covers the whole loop (free until it raises)."""
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
                out[name] = value if type(value) is int else INTEGER_DECODER(value)
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
