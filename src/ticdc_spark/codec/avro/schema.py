"""Avro schemas of a table, as TiCDC writes them, and a table read back from them.

Writing (TiCDC's ``rowToAvroSchema``): a record named after the table, in the namespace
``{changefeed namespace}.{database}`` (both sanitized); the key record holds the handle-key
columns, the value record every column plus, with ``enable-tidb-extension``, ``_tidb_op``,
``_tidb_commit_ts`` and ``_tidb_commit_physical_time``.  Each field's type is
``{"type":T,"connect.parameters":{"tidb_type":..}}`` (BIT adds ``length``, ENUM and SET
``allowed``; a precise DECIMAL is ``bytes`` with the decimal logical type); a nullable
column is a union with ``null``.  The JSON text is Go's ``encoding/json`` output of TiCDC's
structures, key order included, so the registry sees the same schema text TiCDC registers.

Reading: Avro carries no DDL, so a consumer learns each table's columns, types and key from
the writer schemas (:func:`table_from_schemas`).  The types come back as the ``tidb_type``
says, which is coarser than MySQL's (every TEXT type reads as ``text``, TINYINT..MEDIUMINT
as ``int``): :func:`avro_type_view` is that view of a column type.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ticdc_spark.codec.gotext import go_json
from ticdc_spark.errors import EncodeError
from ticdc_spark.model import Column, ColumnFlag, Index, RowChange, TableSchema
from ticdc_spark.types import ColumnType, Family

__all__ = [
    "DEFAULT_NAMESPACE",
    "EXTENSION_FIELDS",
    "TIDB_COMMIT_TS",
    "TIDB_OP",
    "TIDB_PHYSICAL_TIME",
    "avro_type_view",
    "key_schema",
    "naming_problem",
    "representable",
    "sanitize_name",
    "sanitize_topic",
    "table_from_schemas",
    "value_schema",
]

DEFAULT_NAMESPACE = "default"  # TiCDC's default changefeed namespace
TIDB_OP = "_tidb_op"
TIDB_COMMIT_TS = "_tidb_commit_ts"
TIDB_PHYSICAL_TIME = "_tidb_commit_physical_time"
EXTENSION_FIELDS: tuple[dict[str, Any], ...] = (
    {"default": "", "name": TIDB_OP, "type": "string"},
    {"default": 0, "name": TIDB_COMMIT_TS, "type": "long"},
    {"default": 0, "name": TIDB_PHYSICAL_TIME, "type": "long"},
)
_EXTENSION_NAMES = frozenset(f["name"] for f in EXTENSION_FIELDS)

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def sanitize_name(name: str) -> str:
    """An Avro name: characters outside ``[A-Za-z0-9_]`` become ``_`` (one per character), and
    a leading digit gets a ``_`` prefix."""
    name = _UNSAFE.sub("_", name)
    return "_" + name if name[:1].isdigit() else name


def sanitize_topic(topic: str) -> str:
    """The topic as TiCDC names subjects after it (``.`` replaced by ``_``)."""
    return topic.replace(".", "_")


# -- writing ------------------------------------------------------------------------------------

_SMALL_INTS = frozenset(("tinyint", "smallint", "mediumint"))
_TEMPORAL_NAMES = {
    Family.DATE: "DATE",
    Family.TIME: "TIME",
    Family.JSON: "JSON",
    Family.STRING: "TEXT",
}


def tidb_type(ctype: ColumnType) -> str:
    """TiCDC's ``tidb_type`` of a column."""
    family = ctype.family
    if family is Family.INTEGER:
        name = "BIGINT" if ctype.name == "bigint" else "INT"
        return name + (" UNSIGNED" if ctype.unsigned else "")
    if family is Family.BYTES:
        return "BLOB"
    if family is Family.DATETIME:
        return ctype.name.upper()  # DATETIME or TIMESTAMP
    if family in _TEMPORAL_NAMES:
        return _TEMPORAL_NAMES[family]
    if family is Family.UNKNOWN:
        raise EncodeError(f"avro: no Avro type for the MySQL type {ctype.sql()}")
    return family.name  # FLOAT, DOUBLE, DECIMAL, YEAR, ENUM, SET, BIT


def _avro_primitive(ctype: ColumnType, decimal_mode: str, bigint_mode: str) -> str:
    family = ctype.family
    if family is Family.INTEGER:
        if ctype.name in _SMALL_INTS or (ctype.name == "int" and not ctype.unsigned):
            return "int"
        if ctype.name == "bigint" and ctype.unsigned and bigint_mode == "string":
            return "string"
        return "long"
    if family in (Family.FLOAT, Family.DOUBLE):
        return "float" if family is Family.FLOAT else "double"
    if family is Family.YEAR:
        return "int"
    if family in (Family.BYTES, Family.BIT):
        return "bytes"
    if family is Family.DECIMAL:
        return "bytes" if decimal_mode == "precise" else "string"
    return "string"


def _escape_element(element: str) -> str:
    return element.replace(",", "\\,").replace("\\'", "'").replace("''", "'")


def column_type_schema(ctype: ColumnType, decimal_mode: str, bigint_mode: str) -> dict[str, Any]:
    """A column's Avro type: ``{"type":..,"connect.parameters":{..}}`` (+ the decimal logical
    type), keys in the order Go writes TiCDC's structures (parameters sorted by name)."""
    params = {"tidb_type": tidb_type(ctype)}
    family = ctype.family
    if family is Family.BIT:
        params = {"length": str(ctype.length or 1), **params}
    elif family in (Family.ENUM, Family.SET):
        params = {"allowed": ",".join(map(_escape_element, ctype.elements)), **params}
    primitive = _avro_primitive(ctype, decimal_mode, bigint_mode)
    schema: dict[str, Any] = {"type": primitive, "connect.parameters": params}
    if family is Family.DECIMAL and primitive == "bytes":
        schema.update(
            logicalType="decimal",
            precision=ctype.length if ctype.length is not None else 10,
            scale=ctype.decimal or 0,
        )
    return schema


def _field(column: Column, decimal_mode: str, bigint_mode: str) -> dict[str, Any]:
    avro_type = column_type_schema(column.type, decimal_mode, bigint_mode)
    name = sanitize_name(column.name)
    if column.nullable:
        return {"default": None, "name": name, "type": ["null", avro_type]}
    return {"name": name, "type": avro_type}


def record_schema(
    schema: TableSchema,
    columns: tuple[Column, ...],
    decimal_mode: str,
    bigint_mode: str,
    extension: bool = False,
    namespace: str = DEFAULT_NAMESPACE,
) -> str:
    """The JSON text of one record schema (as TiCDC's ``json.Marshal`` writes it)."""
    fields = [_field(c, decimal_mode, bigint_mode) for c in columns]
    if extension:
        fields += EXTENSION_FIELDS
    top = {
        "type": "record",
        "name": sanitize_name(schema.table),
        "namespace": f"{sanitize_name(namespace)}.{sanitize_name(schema.database)}",
        "fields": fields,
    }
    return go_json(orjson.dumps(top)).decode()


def key_columns(schema: TableSchema) -> tuple[Column, ...]:
    key = schema.handle_key
    return tuple(schema.column(name) for name in key)


def key_schema(schema: TableSchema, decimal_mode: str, bigint_mode: str) -> str | None:
    """The key record (handle-key columns), None for a table without a handle key."""
    columns = key_columns(schema)
    return record_schema(schema, columns, decimal_mode, bigint_mode) if columns else None


def value_schema(schema: TableSchema, decimal_mode: str, bigint_mode: str, extension: bool) -> str:
    return record_schema(schema, schema.columns, decimal_mode, bigint_mode, extension)


_RESERVED = frozenset(
    ("null", "boolean", "int", "long", "float", "double", "bytes", "string", "record")
)
_RESERVED |= {"enum", "array", "map", "fixed"}


def naming_problem(schema: TableSchema) -> str | None:
    """Why a table's names cannot make an Avro record (TiCDC fails on these too): two column
    names that sanitize alike, a column named like an extension field, a table named like
    an Avro type."""
    seen: dict[str, str] = {}
    for column in schema.columns:
        name = sanitize_name(column.name)
        if name in seen:
            return f"columns {seen[name]!r} and {column.name!r} are both {name!r} in Avro"
        if name in _EXTENSION_NAMES:
            return f"column {column.name!r} has the name of a TiDB extension field"
        seen[name] = column.name
    if sanitize_name(schema.table) in _RESERVED:
        return f"table {schema.table!r} has the name of an Avro type"
    return None


def representable(events: Any) -> bool:
    """Whether every row change's table makes valid Avro records (see :func:`naming_problem`)."""
    rows = (e for e in events if isinstance(e, RowChange))
    return all(naming_problem(row.schema) is None for row in rows)


# -- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldInfo:
    """One column field of a writer schema: its name, column type, nullability and Avro
    primitive (which says the handling mode: a DECIMAL or BIGINT UNSIGNED as ``string``)."""

    name: str
    ctype: ColumnType
    nullable: bool
    primitive: str = ""

    @property
    def modes(self) -> tuple[str, str]:
        """(decimal, bigint-unsigned) handling modes this field was written with."""
        family, as_text = self.ctype.family, self.primitive == "string"
        decimal = "string" if family is Family.DECIMAL and as_text else "precise"
        bigint = "string" if family is Family.INTEGER and as_text else "long"
        return decimal, bigint


_ALLOWED_SPLIT = re.compile(r"(?<!\\),")
_INT_TYPES = {
    ("INT", "int"): ColumnType("int"),
    ("INT UNSIGNED", "int"): ColumnType("mediumint", unsigned=True),
    ("INT UNSIGNED", "long"): ColumnType("int", unsigned=True),
}
_SIMPLE_TYPES = {
    "BIGINT": ColumnType("bigint"),
    "BIGINT UNSIGNED": ColumnType("bigint", unsigned=True),
    "FLOAT": ColumnType("float"),
    "DOUBLE": ColumnType("double"),
    "TEXT": ColumnType("text"),
    "BLOB": ColumnType("blob"),
    "JSON": ColumnType("json"),
    "DATE": ColumnType("date"),
    "DATETIME": ColumnType("datetime"),
    "TIMESTAMP": ColumnType("timestamp"),
    "TIME": ColumnType("time"),
    "YEAR": ColumnType("year"),
}


def _elements(allowed: str) -> tuple[str, ...]:
    if not allowed:
        return ()
    return tuple(e.replace("\\,", ",") for e in _ALLOWED_SPLIT.split(allowed))


def column_type_of(avro_type: Mapping[str, Any]) -> ColumnType:
    """The column type a field's Avro type (with ``connect.parameters``) describes."""
    params = avro_type.get("connect.parameters")
    if not isinstance(params, Mapping) or not isinstance(params.get("tidb_type"), str):
        raise ValueError("a column field has no connect.parameters.tidb_type")
    name, primitive = params["tidb_type"], str(avro_type.get("type"))
    if (name, primitive) in _INT_TYPES:
        return _INT_TYPES[(name, primitive)]
    if name in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[name]
    if name == "DECIMAL":
        if avro_type.get("logicalType") == "decimal":
            return ColumnType("decimal", length=avro_type["precision"], decimal=avro_type["scale"])
        return ColumnType("decimal")
    if name == "BIT":
        return ColumnType("bit", length=int(params.get("length", 1)))
    if name in ("ENUM", "SET"):
        return ColumnType(name.lower(), elements=_elements(str(params.get("allowed", ""))))
    raise ValueError(f"unknown tidb_type {name!r}")


def read_field(field: Mapping[str, Any]) -> FieldInfo:
    """A column field of a writer schema (as fastavro parses it or as JSON)."""
    avro_type = field["type"]
    nullable = isinstance(avro_type, list)
    if nullable:
        branches = [b for b in avro_type if b != "null"]
        if len(branches) != 1 or len(avro_type) != 2:
            raise ValueError(f"field {field['name']!r}: a column union is [null, T]")
        avro_type = branches[0]
    if not isinstance(avro_type, Mapping):
        raise ValueError(f"field {field['name']!r} has no connect.parameters")
    ctype, primitive = column_type_of(avro_type), avro_type.get("type")
    allowed = {
        _avro_primitive(ctype, d, b) for d in ("precise", "string") for b in ("long", "string")
    }
    if primitive not in allowed:
        raise ValueError(
            f"field {field['name']!r}: tidb_type {ctype.sql()} is never Avro {primitive!r}"
        )
    return FieldInfo(field["name"], ctype, nullable, str(primitive))


def column_fields(record: Mapping[str, Any]) -> list[FieldInfo]:
    """The column fields of a record schema (the TiDB extension fields left out)."""
    if record.get("type") != "record":
        raise ValueError("a TiCDC Avro schema is a record")
    return [read_field(f) for f in record["fields"] if f["name"] not in _EXTENSION_NAMES]


def record_names(record: Mapping[str, Any]) -> tuple[str, str]:
    """(database, table) from a record's namespace ``{namespace}.{database}`` and name.

    fastavro's parsed schemas carry the full name ``namespace.name``; either form works."""
    name = str(record["name"])
    namespace = str(record.get("namespace") or name.rpartition(".")[0])
    table = name.rpartition(".")[2]
    return namespace.partition(".")[2] or namespace, table


def table_from_schemas(
    value: Mapping[str, Any] | None, key: Mapping[str, Any] | None
) -> TableSchema:
    """A table's schema as far as its writer schemas tell: columns and types from the value
    record (or the key record alone, for a tombstone), the handle key from the key record."""
    record = value if value is not None else key
    if record is None:
        raise ValueError("neither a key nor a value schema")
    database, table = record_names(record)
    key_names = tuple(f.name for f in column_fields(key)) if key is not None else ()
    columns = tuple(
        Column(
            f.name,
            f.ctype,
            f.nullable,
            flags=ColumnFlag.HANDLE_KEY if f.name in key_names else ColumnFlag.NONE,
        )
        for f in column_fields(record)
    )
    indexes = (Index("PRIMARY", key_names, primary=True, unique=True),) if key_names else ()
    return TableSchema(database, table, columns, indexes)


def avro_type_view(ctype: ColumnType) -> str:
    """What of a column type survives Avro: its ``tidb_type`` and Avro type (both modes'
    defaults), plus BIT length, ENUM/SET members and DECIMAL precision and scale."""
    schema = column_type_schema(ctype, "precise", "long")
    params = schema["connect.parameters"]
    extra = (schema.get("precision"), schema.get("scale"), params.get("length"), ctype.elements)
    return f"{params['tidb_type']}/{schema['type']}/{extra}"
