"""Helpers every codec shares: error wrapping, row image selection, schema caches."""

from __future__ import annotations

import binascii
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Generic, TypeVar

import orjson

from ticdc_spark.codec.base import Message
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.errors import DecodeError, EncodeError
from ticdc_spark.model import DDLType, RowChange, RowKind, TableSchema
from ticdc_spark.types import Family, infer_fsp, value_misfit

__all__ = [
    "DDL_KIND",
    "DDL_KIND_ACTIONS",
    "LRUCache",
    "TemporalFsp",
    "as_decode_error",
    "changed_columns",
    "decoding",
    "handle_key_image",
    "loads",
    "now_ms",
    "row_encode_error",
    "str_field",
]

K = TypeVar("K")
V = TypeVar("V")

# Exceptions that malformed input can raise inside a decoder; all become DecodeError.
INPUT_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    ArithmeticError,  # decimal.InvalidOperation (a JSON list in a DECIMAL column), overflow
    UnicodeError,
    binascii.Error,
    orjson.JSONDecodeError,
    RecursionError,
)


def now_ms() -> int:
    """The wall clock in ms: the encoders' default clock (``ts``/``es``/``ts_ms`` fields)."""
    return time.time_ns() // 1_000_000


@contextmanager
def decoding(protocol: str, message: Message) -> Iterator[None]:
    """Turn any error that bad input causes into a DecodeError naming the record."""
    try:
        yield
    except (DecodeError, *INPUT_ERRORS) as exc:
        raise as_decode_error(protocol, message, exc) from None


def as_decode_error(protocol: str, message: Message, exc: Exception) -> DecodeError:
    """The DecodeError naming the record for an error bad input caused (what
    :func:`decoding` raises; for hot paths that catch errors themselves)."""
    if isinstance(exc, DecodeError):
        return exc.at(message.position, protocol)
    reason = (
        f"missing field {exc.args[0]!r}"
        if isinstance(exc, KeyError)
        else (str(exc) or type(exc).__name__)
    )
    return DecodeError(reason, protocol=protocol, position=message.position, payload=message.value)


def refuse_empty(message: Message, parts: tuple[str, ...] = ("value", "key")) -> None:
    """A key or value of 0 bytes is not a null one: for a protocol where a null value means a
    delete (an Avro tombstone) or a null key a keyless table (Debezium), a record whose bytes
    were lost must not read as either.  Raises naming the part (of ``parts``: a protocol
    checks those it reads)."""
    for part in parts:
        data = message.value if part == "value" else message.key
        if data is not None and not data:
            raise DecodeError(
                f"the {part} is empty (0 bytes, not null): a record that lost its {part}, "
                f"not a null {part}"
            )


def loads(data: bytes | str, what: str = "message") -> Any:
    """orjson.loads with a reason that says which part was not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{what} is not valid JSON: {exc}", payload=data) from None


def str_field(obj: dict[str, Any], name: str) -> str:
    """A message's string field (``""`` when absent or null)."""
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DecodeError(f"'{name}' must be a string")
    return value


def require_dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


class LRUCache(Generic[K, V]):
    """A small bounded mapping for schemas and compiled per-schema plans."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        self._data[key] = value
        if len(self._data) > self.size:
            self._data.popitem(last=False)
        return value

    def get_or_build(self, key: K, build: Callable[[], V]) -> V:
        value = self.get(key)
        return value if value is not None else self.put(key, build())


def handle_key_image(row: RowChange, image: Mapping[str, Any] | None) -> dict[str, Any]:
    """Only the handle-key columns of an image (for handle-key-only messages)."""
    image = image or {}
    return {name: image.get(name) for name in row.schema.handle_key if name in image}


def changed_columns(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of ``before`` whose value differs in ``after`` (only-output-updated-columns).

    NULL and non-NULL differ; values compare by canonical value (bytes by bytes).
    """
    missing = object()
    out = {}
    for name, value in before.items():
        new = after.get(name, missing)
        if new is missing or new != value or (new is None) != (value is None):
            out[name] = value
    return out


def row_encode_error(protocol: str, row: RowChange, error: Exception) -> EncodeError:
    """The :class:`EncodeError` for a row whose writing raised ``error`` (a value of the wrong
    Python type makes the formatters raise TypeError, AttributeError and the like).

    It names the row, the error, and every column whose value is not its type's canonical
    value (:func:`ticdc_spark.types.value_misfit`): the likely culprits.  Run only after a
    failure: the encoders' fast paths take canonical values as they are.
    """
    where = f"{protocol}: {row.kind.value} of {row.schema.qualified_name} at ts {row.commit_ts}"
    suspects = []
    for side, image in (("before", row.before), ("after", row.after)):
        for name, value in (image or {}).items():
            column = row.schema.get(name)
            if column is None:
                suspects.append(f"the {side} image has a column {name!r} the table does not")
                continue
            try:
                why = value_misfit(column.type, value)
            except Exception as failure:  # checking an odd value must not hide the error
                why = f"cannot be checked ({type(failure).__name__})"
            if why is not None:
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                suspects.append(
                    f"column {name!r} {column.type.sql().upper()} {why} ({side} image: {shown})"
                )
    cause = f"{type(error).__name__}: {error}"
    if suspects:
        return EncodeError(f"{where}: {'; '.join(suspects)} [{cause}]")
    return EncodeError(f"{where}: {cause}")


def row_images(row: RowChange) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(before, after) with the images a kind must have checked (on every row an encoder
    writes: hence the enum members bound once)."""
    before, after = row.before, row.after
    if before is None and row.kind is not _INSERT:
        raise EncodeError(f"{row.kind.value} of {row.schema.qualified_name} has no before image")
    if after is None and row.kind is not _DELETE:
        raise EncodeError(f"{row.kind.value} of {row.schema.qualified_name} has no after image")
    return before, after


_INSERT, _DELETE = RowKind.INSERT, RowKind.DELETE


def temporal_columns(schema: TableSchema) -> tuple[str, ...]:
    """Columns whose fsp the protocol left unknown (DATETIME/TIMESTAMP/TIME)."""
    return tuple(
        c.name
        for c in schema.columns
        if c.type.family in (Family.DATETIME, Family.TIME) and c.type.decimal is None
    )


class TemporalFsp:
    """Fills in the fsp of temporal columns from the digits their wire text carries.

    TiCDC prints DATETIME/TIME values with exactly the column's fsp, so the text tells what
    the protocol's type name (``datetime``) leaves out, and the normalized form can print the
    value back unchanged.  Schema variants are cached per (schema, fsps).
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._variants: dict[tuple[int, tuple[int, ...]], tuple[TableSchema, TableSchema]] = {}

    def apply(
        self,
        schema: TableSchema,
        names: tuple[str, ...],
        raw_images: tuple[Mapping[str, Any] | None, ...],
        field: str | None = None,
    ) -> TableSchema:
        """The schema with the fsp of each temporal column ``names`` from the first of the
        raw images holding text there; ``field`` names the key inside column objects that
        holds the text (Open Protocol's ``"v"``), None when images map names to text."""
        fsps = None
        if compiled_values is not None:  # None back: images that are not dicts
            fsps = compiled_values.first_fsps(names, raw_images, field)
        if fsps is None:
            fsps = tuple(_first_fsp(name, raw_images, field) for name in names)
        key = (id(schema), fsps)
        hit = self._variants.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        if len(self._variants) >= self.size:
            self._variants.clear()
        known = {n: f for n, f in zip(names, fsps, strict=True) if f >= 0}
        columns = tuple(
            replace(c, type=replace(c.type, decimal=known[c.name])) if c.name in known else c
            for c in schema.columns
        )
        variant = TableSchema(
            schema.database, schema.table, columns, schema.indexes, schema.table_id, schema.version
        )
        self._variants[key] = (schema, variant)
        return variant


def _first_fsp(name: str, images: tuple[Mapping[str, Any] | None, ...], field: str | None) -> int:
    for image in images:
        text = image.get(name) if image else None
        if field is not None and isinstance(text, dict):
            text = text.get(field)
        if isinstance(text, str):
            return infer_fsp(text)
    return -1


# TiCDC's DDL kinds (Canal-JSON's DDL ``type`` and Simple's, tiflow's getDDLType): the TiDB
# actions of each kind, the first being the one a kind alone stands for; QUERY is every
# other action.
DDL_KIND_ACTIONS: dict[str, tuple[DDLType, ...]] = {
    "CREATE": (DDLType.CREATE_TABLE,),
    "ERASE": (DDLType.DROP_TABLE,),
    "TRUNCATE": (DDLType.TRUNCATE_TABLE,),
    "RENAME": (DDLType.RENAME_TABLE, DDLType.RENAME_TABLES),
    "CINDEX": (DDLType.ADD_INDEX, DDLType.ADD_FOREIGN_KEY, DDLType.ADD_PRIMARY_KEY),
    "DINDEX": (DDLType.DROP_INDEX, DDLType.DROP_FOREIGN_KEY, DDLType.DROP_PRIMARY_KEY),
    "ALTER": (
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
}
DDL_KIND: dict[DDLType, str] = {
    action: kind for kind, actions in DDL_KIND_ACTIONS.items() for action in actions
}
