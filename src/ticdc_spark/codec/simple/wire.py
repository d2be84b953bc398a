"""The Simple protocol's message layout: message kinds, DDL kinds, and table schemas.

A message is handled here as the JSON object TiCDC writes (``pkg/sink/codec/simple``'s
``message`` struct), members in its order: ``version``, ``database``, ``table``,
``tableID``, ``type``, ``sql``, ``commitTs``, ``buildTs``, ``schemaVersion``,
``claimCheckLocation``, ``handleKeyOnly``, ``checksum``, ``data``, ``old``, ``tableSchema``,
``preTableSchema``; all but ``version``, ``type``, ``commitTs`` and ``buildTs`` left out
when empty.  The Avro encoding (:mod:`.avro`) converts to and from the same object.

A table schema is ``{"schema","table","tableID","version","columns","indexes"}`` in JSON and
the ``TableSchema`` record (``database`` for ``schema``; optional data type members as
unions) in Avro; :func:`schema_to_json` / :func:`schema_to_avro` write a
:class:`~ticdc_spark.model.TableSchema` in either, :func:`schema_from_wire` reads both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ticdc_spark.codec.common import DDL_KIND, DDL_KIND_ACTIONS
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Column, DDLType, Index, TableSchema
from ticdc_spark.sql import classify
from ticdc_spark.types import ColumnType, Family

__all__ = [
    "BOOTSTRAP",
    "DDL_KINDS",
    "DML_KINDS",
    "VERSION",
    "WATERMARK",
    "ddl_kind",
    "ddl_type_of",
    "schema_from_wire",
    "schema_to_avro",
    "schema_to_json",
]

VERSION = 1
WATERMARK, BOOTSTRAP = "WATERMARK", "BOOTSTRAP"
DML_KINDS = ("INSERT", "UPDATE", "DELETE")
DDL_KINDS = ("CREATE", "ALTER", "ERASE", "RENAME", "TRUNCATE", "CINDEX", "DINDEX", "QUERY")


def ddl_kind(ddl_type: DDLType) -> str:
    """The Simple DDL kind TiCDC writes for a TiDB action."""
    return DDL_KIND.get(ddl_type, "QUERY")


def ddl_type_of(kind: str, sql: str) -> DDLType:
    """The TiDB action of a DDL message: the statement's, when it agrees with the kind sent
    (the kind alone is coarser), else the kind's first action (NONE for QUERY)."""
    action = classify(sql)
    if ddl_kind(action) == kind:
        return action
    actions = DDL_KIND_ACTIONS.get(kind)
    return actions[0] if actions else DDLType.NONE


# --------------------------------------------------------------------------------------------
# Table schemas.

_TEXT_CHARSET = ("utf8mb4", "utf8mb4_bin")
_BINARY_CHARSET = ("binary", "binary")
_TEXT_FAMILIES = frozenset((Family.STRING, Family.ENUM, Family.SET))
# Types whose Avro data type carries unsigned/zerofill (TiCDC's newTableSchemaMap).
_AVRO_SIGNED_TYPES = frozenset(
    ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "bit", "year")
)


def _charset(ctype: ColumnType) -> tuple[str, str]:
    default = _TEXT_CHARSET if ctype.family in _TEXT_FAMILIES else _BINARY_CHARSET
    return ctype.charset or default[0], ctype.collation or default[1]


def _flen(ctype: ColumnType) -> int:
    """The column's flen; 0 (left out) when the schema does not know it: TiDB's defaults
    depend on more than the type (a DECIMAL's precision), so none is made up."""
    return ctype.length or 0


def _scale(ctype: ColumnType) -> int:
    """The ``decimal`` TiCDC writes: never for FLOAT/DOUBLE (TiDB's -1).  A temporal type
    whose fsp the schema does not know (read from a protocol that leaves it out) is written
    with 6, which keeps every value (absent would mean 0 and cut fractions off)."""
    if ctype.family in (Family.FLOAT, Family.DOUBLE):
        return 0
    if ctype.decimal is None and ctype.family in (Family.DATETIME, Family.TIME):
        return 6
    return ctype.decimal or 0


def _data_type_json(ctype: ColumnType) -> dict[str, Any]:
    charset, collate = _charset(ctype)
    out: dict[str, Any] = {"mysqlType": ctype.name, "charset": charset, "collate": collate}
    flen, scale = _flen(ctype), _scale(ctype)
    if flen:
        out["length"] = flen
    if scale:
        out["decimal"] = scale
    if ctype.elements:
        out["elements"] = list(ctype.elements)
    if ctype.unsigned:
        out["unsigned"] = True
    if ctype.zerofill:
        out["zerofill"] = True
    return out


def _data_type_avro(ctype: ColumnType) -> dict[str, Any]:
    charset, collate = _charset(ctype)
    name = ctype.name
    numeric = name in _AVRO_SIGNED_TYPES or name == "decimal"
    return {
        "mysqlType": name,
        "charset": charset,
        "collate": collate,
        "length": _flen(ctype),
        "decimal": (ctype.decimal or 0) if name == "decimal" else None,  # (TiCDC's choice)
        "elements": list(ctype.elements) if name in ("enum", "set") else None,
        "unsigned": ctype.unsigned if numeric else None,
        "zerofill": ctype.zerofill if numeric else None,
    }


def _default_text(column: Column) -> str | None:
    return None if column.default is None else str(column.default)


def _indexes(schema: TableSchema) -> list[dict[str, Any]]:
    """The indexes, each nullable when any of its columns is; a primary key known only from
    column flags is added as ``primary`` (as TiCDC does)."""
    out = []
    for index in schema.indexes:
        nullable = any(
            (column := schema.get(name)) is not None and column.nullable for name in index.columns
        )
        out.append(
            {
                "name": index.name,
                "unique": index.unique or index.primary,
                "primary": index.primary,
                "nullable": nullable,
                "columns": list(index.columns),
            }
        )
    if not any(index.primary for index in schema.indexes) and schema.primary_key:
        out.append(
            {
                "name": "primary",
                "unique": True,
                "primary": True,
                "nullable": False,
                "columns": list(schema.primary_key),
            }
        )
    return out


def schema_to_json(schema: TableSchema) -> dict[str, Any]:
    """A table schema as the JSON encoding's ``tableSchema`` object."""
    return _schema_object(schema, "schema", _data_type_json)


def schema_to_avro(schema: TableSchema) -> dict[str, Any]:
    """A table schema as the Avro ``TableSchema`` record (``database`` for ``schema``)."""
    return _schema_object(schema, "database", _data_type_avro)


def _schema_object(
    schema: TableSchema, database_key: str, data_type: Callable[[ColumnType], dict[str, Any]]
) -> dict[str, Any]:
    return {
        database_key: schema.database,
        "table": schema.table,
        "tableID": schema.table_id,
        "version": schema.version,
        "columns": [
            {
                "name": c.name,
                "dataType": data_type(c.type),
                "nullable": c.nullable,
                "default": _default_text(c),
            }
            for c in schema.columns
        ],
        "indexes": _indexes(schema),
    }


# -- reading ----------------------------------------------------------------------------------


def _field(obj: dict[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DecodeError(f"{what} needs {name!r} of type {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _optional(obj: dict[str, Any], name: str, kind: type, default: Any) -> Any:
    value = obj.get(name)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise DecodeError(f"data type member {name!r} must be a {kind.__name__}, got {value!r}")
    return value


def _column_type(raw: dict[str, Any], avro: bool) -> ColumnType:
    name = _field(raw, "mysqlType", str, "a data type").lower()
    elements = _optional(raw, "elements", list, [])
    if not all(isinstance(e, str) for e in elements):
        raise DecodeError("data type elements must be strings")
    scale = _optional(raw, "decimal", int, None)
    family = ColumnType(name).family
    if scale is None and family is Family.DECIMAL:
        scale = 0  # (left out when 0)
    elif scale is None and family in (Family.DATETIME, Family.TIME) and not avro:
        scale = 0  # (JSON leaves 0 out; Avro never writes a temporal fsp: it stays unknown)
    length = _optional(raw, "length", int, None)
    return ColumnType(
        name,
        unsigned=bool(_optional(raw, "unsigned", bool, False)),
        zerofill=bool(_optional(raw, "zerofill", bool, False)),
        length=length if length else None,
        decimal=scale,
        elements=tuple(elements),
        charset=_optional(raw, "charset", str, None),
        collation=_optional(raw, "collate", str, None),
    )


def _column(raw: Any, avro: bool) -> Column:
    if not isinstance(raw, dict):
        raise DecodeError("a tableSchema column must be an object")
    data_type = _field(raw, "dataType", dict, "a column")
    default = raw.get("default")
    if default is not None and not isinstance(default, str | int | float):
        raise DecodeError(f"column default must be a string, got {default!r}")
    return Column(
        _field(raw, "name", str, "a column"),
        _column_type(data_type, avro),
        nullable=bool(_field(raw, "nullable", bool, "a column")),
        default=None if default is None else str(default),
    )


def _index(raw: Any) -> Index:
    if not isinstance(raw, dict):
        raise DecodeError("a tableSchema index must be an object")
    columns = raw.get("columns") or []
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise DecodeError("index columns must be a list of names")
    return Index(
        _field(raw, "name", str, "an index"),
        tuple(columns),
        primary=bool(_field(raw, "primary", bool, "an index")),
        unique=bool(_field(raw, "unique", bool, "an index")),
        nullable=bool(_field(raw, "nullable", bool, "an index")),
    )


def schema_from_wire(raw: Any, what: str = "tableSchema") -> TableSchema:
    """A ``tableSchema`` (JSON object or Avro record) as a TableSchema with TiCDC's flags."""
    if not isinstance(raw, dict):
        raise DecodeError(f"{what} must be an object, got {type(raw).__name__}")
    database = raw.get("schema", raw.get("database"))
    if not isinstance(database, str):
        raise DecodeError(f"{what} needs 'schema' (the database name)")
    columns = raw.get("columns") or []
    indexes = raw.get("indexes") or []
    if not isinstance(columns, list) or not isinstance(indexes, list):
        raise DecodeError(f"{what} columns and indexes must be lists")
    schema = TableSchema(
        database,
        _field(raw, "table", str, what),
        tuple(_column(c, "database" in raw) for c in columns),
        tuple(_index(i) for i in indexes),
        table_id=_field(raw, "tableID", int, what),
        version=_field(raw, "version", int, what),
    )
    return schema.with_derived_flags()
