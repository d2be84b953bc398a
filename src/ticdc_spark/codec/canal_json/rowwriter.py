"""Writing one row message: the per-table encode plan and the bytes TiCDC writes.

DML keys come in the order ``id, database, table, pkNames, isDdl, type, es, ts, sql, sqlType,
mysqlType, old, data, _tidb``; everything up to ``type`` is constant per table and written
once into the plan's prefix.  DDL and watermark messages are marshalled structs (``data``
before ``old``).  Go's HTML-safe escaping throughout (:func:`~ticdc_spark.codec.gotext.go_json`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from ticdc_spark.codec.canal_json.dialect import writer
from ticdc_spark.codec.canal_json.sqltypes import PROMOTION, java_sql_type
from ticdc_spark.codec.common import changed_columns, handle_key_image, row_images
from ticdc_spark.codec.compiled import CanalLayout
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.model import RowChange, RowKind, TableSchema, physical_ms
from ticdc_spark.types import full_type_desc, plain_type_desc

__all__ = ["EncodePlan", "build_encode_plan", "row_json", "struct_message"]

_INSERT, _UPDATE, _DELETE = RowKind.INSERT, RowKind.UPDATE, RowKind.DELETE  # no enum lookups

# A row message after the plan's prefix ({"id":0,..,"type":"); the _tidb object last.
_ROW_MESSAGE = b'%s%s","es":%d,"ts":%d,"sql":"","sqlType":%s,"mysqlType":%s,"old":%s,"data":[%s]%s}'

Formatter = Callable[[Any], str]


@dataclass(slots=True)
class EncodePlan:
    prefix: bytes  # {"id":0,"database":..,"table":..,"pkNames":[..],"isDdl":false,"type":"
    columns: tuple[tuple[str, Formatter], ...]
    sql_types: bytes | None  # constant sqlType object, or None when value-dependent
    base_codes: dict[str, int]
    promotions: tuple[tuple[str, int, int], ...]  # (column, largest unpromoted value, code)
    mysql_types: bytes
    # columns for compiled_values.text_object: (JSON key and colon, name, kind, fsp, formatter)
    compiled: tuple[tuple[bytes, str, int, int, Formatter], ...]
    promoted_text: dict[int, bytes]  # sqlType by promotion bits, as seen (layout holds it too)
    layout: CanalLayout | None = None  # what compiled_values.canal_rows needs of the plan


def build_encode_plan(schema: TableSchema, key_only: bool, full_types: bool) -> EncodePlan:
    columns = schema.columns
    if key_only:
        keys = set(schema.handle_key)
        columns = tuple(c for c in columns if c.name in keys)
    base_codes = {c.name: java_sql_type(c.type) for c in columns}
    promotions = tuple(
        (c.name, *PROMOTION[c.type.name])
        for c in columns
        if c.type.unsigned and c.type.name in PROMOTION
    )
    describe = full_type_desc if full_types else plain_type_desc
    writers = [(c.name, *writer(c.type)) for c in columns]
    plan = EncodePlan(
        _prefix(schema),
        tuple((name, fmt) for name, fmt, _, _ in writers),
        None if promotions else go_json(orjson.dumps(base_codes or None)),
        base_codes,
        promotions,
        go_json(orjson.dumps({c.name: describe(c.type) for c in columns})),
        tuple(
            (go_json(orjson.dumps(name)) + b":", name, kind, fsp, fmt)
            for name, fmt, kind, fsp in writers
        ),
        {},
    )
    plan.layout = _layout(plan)
    return plan


def _layout(plan: EncodePlan) -> CanalLayout:
    """The plan as compiled_values.canal_rows reads it."""
    return CanalLayout(
        plan.compiled,
        plan.prefix,
        plan.mysql_types,
        plan.sql_types,
        plan.promotions,
        plan.promoted_text,
    )


def _prefix(schema: TableSchema) -> bytes:
    primary = set(schema.primary_key)
    pk_names = [c.name for c in schema.columns if c.name in primary]
    return go_json(
        b'{"id":0,"database":'
        + orjson.dumps(schema.database)
        + b',"table":'
        + orjson.dumps(schema.table)
        + b',"pkNames":'
        + orjson.dumps(pk_names)
        + b',"isDdl":false,"type":"'
    )


def row_json(
    plan: EncodePlan,
    row: RowChange,
    key_only: bool,
    updated_old_only: bool,
    tidb: bytes | None,
    ts: int,
) -> bytes:
    """A row's message; ``tidb`` is the ``_tidb`` object's members after ``commitTs`` (None:
    no TiDB extension), ``ts`` the build time."""
    kind = row.kind
    before, after = row_images(row)
    if key_only:
        before = handle_key_image(row, before) if before is not None else None
        after = handle_key_image(row, after) if after is not None else None
    data_image = before if kind is _DELETE else after
    data = text_json(plan, data_image)
    old = b"null"
    if kind is _UPDATE:
        old_image = before or {}
        if updated_old_only:
            old_image = changed_columns(old_image, after or {})
        old = b"[" + text_json(plan, old_image) + b"]"
    return _ROW_MESSAGE % (
        plan.prefix,
        b"UPDATE" if kind is _UPDATE else b"INSERT" if kind is _INSERT else b"DELETE",
        physical_ms(row.commit_ts),
        ts,
        plan.sql_types or sql_types(plan, data_image or {}),
        plan.mysql_types,
        old,
        data,
        b"" if tidb is None else b',"_tidb":{"commitTs":%d%s}' % (row.commit_ts, tidb),
    )


def sql_types(plan: EncodePlan, image: dict[str, Any]) -> bytes:
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


def text_json(plan: EncodePlan, image: dict[str, Any] | None) -> bytes:
    """An image as the JSON object of a ``data``/``old`` row: by the compiled loop when it
    is built and takes the row, else formatted here."""
    if compiled_values is not None:
        text = compiled_values.text_object(plan.compiled, image or {})
        if text is not None:
            return text  # type: ignore[no-any-return]
    return go_json(orjson.dumps(_text_image(plan.columns, image)))


def _text_image(
    columns: tuple[tuple[str, Formatter], ...], image: dict[str, Any] | None
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


def struct_message(
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
