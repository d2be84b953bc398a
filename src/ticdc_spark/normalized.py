"""The normalized JSON form of events: what ``ticdc-spark decode`` prints and ``encode`` reads.

One JSON object per event, the same whatever protocol carried it::

    {"type": "UPDATE", "database": "test", "table": "t1", "commitTs": 4155...,
     "before": {"id": "2", "val": "aa"}, "after": {"id": "2", "val": "bb"},
     "columns": {"id": "int", "val": "varchar"}, "pk": ["id"]}

* ``type``: INSERT, UPDATE, DELETE, DDL, WATERMARK or BOOTSTRAP.
* ``before``/``after``: column -> value as a string in MySQL's text form (see
  :mod:`ticdc_spark.types`), or null.  Values of binary types (binary, varbinary, the blob
  family) are base64: ``columns`` names such a type.
* ``columns``: column -> MySQL type as the protocol described it; ``pk``: the key columns.
* DDL events carry ``sql`` and ``ddlType`` (TiDB's action name); WATERMARK only ``commitTs``.
* Optional keys, written only when set: ``tableId``, ``schemaVersion``, ``partitionId``,
  ``handleKeyOnly``.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from ticdc_spark.codec.convert import NORMALIZED
from ticdc_spark.errors import DecodeError
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
)
from ticdc_spark.types import ColumnType, parse_column_type

__all__ = ["event_from_json", "event_to_json", "image_to_text"]

_ROW_KINDS = {k.value: k for k in RowKind}


def event_to_json(event: Event) -> dict[str, Any]:
    """The normalized form of an event, ready for ``orjson.dumps``."""
    if isinstance(event, RowChange):
        return _row_to_json(event)
    if isinstance(event, DDLEvent):
        return {
            "type": "DDL",
            "database": event.database,
            "table": event.table,
            "commitTs": event.commit_ts,
            "sql": event.query,
            "ddlType": event.ddl_type.name,
        }
    if isinstance(event, Watermark):
        return {"type": "WATERMARK", "commitTs": event.ts}
    return {
        "type": "BOOTSTRAP",
        "database": event.schema.database,
        "table": event.schema.table,
        "columns": _columns_json(event.schema),
        "pk": list(event.schema.primary_key),
    }


def _row_to_json(row: RowChange) -> dict[str, Any]:
    schema = row.schema
    out: dict[str, Any] = {
        "type": row.kind.value,
        "database": schema.database,
        "table": schema.table,
        "commitTs": row.commit_ts,
        "before": image_to_text(schema, row.before),
        "after": image_to_text(schema, row.after),
        "columns": _columns_json(schema),
        "pk": list(schema.handle_key),
    }
    if schema.table_id:
        out["tableId"] = schema.table_id
    if schema.version:
        out["schemaVersion"] = schema.version
    if row.partition_id is not None:
        out["partitionId"] = row.partition_id
    if row.handle_key_only:
        out["handleKeyOnly"] = True
    return out


def _columns_json(schema: TableSchema) -> dict[str, str]:
    return {c.name: c.type.sql() for c in schema.columns}


def image_to_text(schema: TableSchema, image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An image's values in the normalized text form (None stays None)."""
    if image is None:
        return None
    formatters = _schema_formatters(schema)
    out: dict[str, Any] = {}
    for name, value in image.items():
        if value is None:
            out[name] = None
        else:
            formatter = formatters.get(name)
            if formatter is None:
                formatter = formatters[name] = _formatter(ColumnType("varchar"))
            out[name] = formatter(value)
    return out


_FORMATTERS_BY_SCHEMA: dict[int, tuple[TableSchema, dict[str, Callable[[Any], str]]]] = {}


def _schema_formatters(schema: TableSchema) -> dict[str, Callable[[Any], str]]:
    """Per-column formatters, kept per schema object (hashing types per value is slow)."""
    hit = _FORMATTERS_BY_SCHEMA.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_FORMATTERS_BY_SCHEMA) > 4096:
            _FORMATTERS_BY_SCHEMA.clear()
        hit = (schema, {c.name: _formatter(c.type) for c in schema.columns})
        _FORMATTERS_BY_SCHEMA[id(schema)] = hit
    return hit[1]


# The normalized text form is the conversion layer's NORMALIZED dialect.
_formatter = lru_cache(maxsize=4096)(NORMALIZED.encoder)
_parser = lru_cache(maxsize=4096)(NORMALIZED.decoder)


# --------------------------------------------------------------------------------------------


def event_from_json(obj: Any, position: str = "") -> Event:
    """Read one normalized event; raises DecodeError naming ``position`` when malformed."""
    try:
        return _event_from_json(obj)
    except DecodeError as exc:
        raise exc.at(position, "normalized") from None
    except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
        raise DecodeError(_reason(exc), protocol="normalized", position=position) from None


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc) or type(exc).__name__


def _event_from_json(obj: Any) -> Event:
    if not isinstance(obj, dict):
        raise DecodeError("an event must be a JSON object")
    kind = obj["type"]
    if kind in _ROW_KINDS:
        return _row_from_json(obj, _ROW_KINDS[kind])
    if kind == "DDL":
        ddl_type = obj.get("ddlType") or "NONE"
        return DDLEvent(
            DDLType[ddl_type] if isinstance(ddl_type, str) else DDLType(int(ddl_type)),
            str(obj["sql"]),
            int(obj["commitTs"]),
            str(obj.get("database") or ""),
            str(obj.get("table") or ""),
        )
    if kind == "WATERMARK":
        return Watermark(int(obj["commitTs"]))
    if kind == "BOOTSTRAP":
        return Bootstrap(_schema_from_json(obj))
    raise DecodeError(f"unknown event type {kind!r}")


def _schema_from_json(obj: Mapping[str, Any]) -> TableSchema:
    columns_obj = obj.get("columns") or {}
    if not isinstance(columns_obj, dict):
        raise DecodeError("'columns' must map column names to MySQL types")
    pk = tuple(str(n) for n in obj.get("pk") or ())
    columns = tuple(
        Column(str(name), parse_column_type(str(sql)), nullable=name not in pk)
        for name, sql in columns_obj.items()
    )
    indexes = (Index("PRIMARY", pk, primary=True, unique=True),) if pk else ()
    return TableSchema(
        str(obj["database"]),
        str(obj["table"]),
        columns,
        indexes,
        table_id=int(obj.get("tableId") or 0),
        version=int(obj.get("schemaVersion") or 0),
    ).with_derived_flags()


def _row_from_json(obj: Mapping[str, Any], kind: RowKind) -> RowChange:
    schema = _schema_from_json(obj)
    before = _image_from_text(schema, obj.get("before"))
    after = _image_from_text(schema, obj.get("after"))
    if kind is not RowKind.INSERT and before is None:
        raise DecodeError(f"{kind.value} needs 'before'")
    if kind is not RowKind.DELETE and after is None:
        raise DecodeError(f"{kind.value} needs 'after'")
    partition_id = obj.get("partitionId")
    return RowChange(
        kind,
        schema,
        int(obj["commitTs"]),
        before,
        after,
        partition_id=None if partition_id is None else int(partition_id),
        handle_key_only=bool(obj.get("handleKeyOnly", False)),
    )


def _image_from_text(schema: TableSchema, image: Any) -> dict[str, Any] | None:
    if image is None:
        return None
    if not isinstance(image, dict):
        raise DecodeError("an image must be a JSON object of column -> string")
    out: dict[str, Any] = {}
    for name, text in image.items():
        column = schema.get(name)
        if column is None:
            raise DecodeError(f"column {name!r} is not in 'columns'")
        if text is None:
            out[name] = None
        elif not isinstance(text, str):
            raise DecodeError(f"column {name!r}: values are strings or null")
        else:
            try:
                out[name] = _parser(column.type)(text)
            except (ValueError, binascii.Error) as exc:
                raise DecodeError(f"column {name!r}: {exc}") from None
    return out
