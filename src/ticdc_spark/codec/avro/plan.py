"""How the records of one writer schema, and of one (value schema, key schema) pair, are read:
what both decode paths share.

A :class:`Record` is a writer schema parsed once, with each field's converters; a
:class:`Plan` the record, table and handle key of a schema pair.  The one decode path
(:mod:`.decoder`) makes them; the Arrow batch path (:mod:`.batch`) reads the records whose
plan is known through :class:`Plans`, and adds the column converters it needs to a record
the first time it reads one (:mod:`.columns` needs pyarrow: the one path never does).
:func:`field_kinds` says whether numpy reads a record's bodies (:mod:`.vectorized`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from fastavro import parse_schema

from ticdc_spark.codec.avro import schema as avro_schema
from ticdc_spark.codec.avro.dialect import dialect_for
from ticdc_spark.codec.convert import Converter
from ticdc_spark.model import TableSchema
from ticdc_spark.types import ColumnType

__all__ = ["ColumnText", "FieldKind", "Plan", "Plans", "Record", "field_kinds", "make_record"]

# (Avro field name, to canonical value, to changelog text)
Field = tuple[str, Converter, Converter]
# (field name, Avro primitive, nullable, (precision, scale) of a decimal or None)
FieldKind = tuple[str, str, bool, "tuple[int, int] | None"]
# A column of values -> (their changelog texts as an Arrow array, rows that did not convert)
ColumnText = Callable[[Sequence[Any]], "tuple[Any, list[int]]"]

_PRIMITIVES = {"int", "long", "float", "double", "string", "bytes"}


@dataclass(slots=True)
class Record:
    """A writer schema, parsed, with what its records' fields become."""

    parsed: Any
    record: dict[str, Any]  # the schema JSON
    fields: tuple[Field, ...]
    column_types: tuple[tuple[ColumnType, str], ...]  # each field's (type, Avro primitive)
    extension: tuple[str, ...]  # the TiDB extension fields it has that give kind and ts
    kinds: list[FieldKind] | None  # its fields, when numpy reads its bodies (.vectorized)
    # each field's changelog text a column at a time: made by the batch path when it first
    # reads the record (.columns)
    columns: tuple[ColumnText, ...] | None = None


@dataclass(slots=True)
class Plan:
    """How records with one (value schema, key schema) pair are read."""

    record: Record  # the value's (a tombstone: the key's)
    table: TableSchema
    table_json: str  # the changelog's schema JSON of ``table``
    key: tuple[str, ...]  # the handle-key columns (an UPDATE's old image)


class Plans(Protocol):
    """What the batch path asks the decoder (:class:`~.decoder.AvroDecoder`)."""

    def known_plan(self, value: bytes, key: bytes) -> Plan | None:
        """The plan of a row record whose schemas the decoder has read before."""
        ...

    def skips(self, table: TableSchema) -> bool:
        """Whether the table filter leaves this table's rows out."""
        ...


def make_record(text: str) -> Record:
    """The record of a writer schema's JSON text."""
    record = orjson.loads(text)
    fields, types = [], []
    for f in avro_schema.column_fields(record):
        dialect = dialect_for(*f.modes)
        fields.append((f.name, dialect.decoder(f.ctype), dialect.text(f.ctype)))
        types.append((f.ctype, f.primitive))
    names = {f["name"] for f in record["fields"]}  # (column_fields checked the record)
    extension = tuple(name for name in ("_tidb_op", "_tidb_commit_ts") if name in names)
    return Record(
        parse_schema(record), record, tuple(fields), tuple(types), extension, field_kinds(record)
    )


def field_kinds(record: Mapping[str, Any]) -> list[FieldKind] | None:
    """The kinds of a record schema's fields, or None when one is not read by numpy."""
    kinds: list[FieldKind] = []
    for field in record.get("fields", ()):
        kind = _field_kind(field)
        if kind is None:
            return None
        kinds.append(kind)
    return kinds


def _field_kind(field: Mapping[str, Any]) -> FieldKind | None:
    avro_type, nullable = field.get("type"), False
    if isinstance(avro_type, list):
        if len(avro_type) != 2 or avro_type[0] != "null":
            return None
        avro_type, nullable = avro_type[1], True
    decimal = None
    if isinstance(avro_type, dict):
        logical = avro_type.get("logicalType")
        if logical == "decimal" and avro_type.get("type") == "bytes":
            precision, scale = avro_type.get("precision"), avro_type.get("scale", 0)
            if type(precision) is not int or type(scale) is not int:
                return None
            if not 0 <= scale <= precision:
                return None
            decimal = (precision, scale)
        elif logical is not None:
            return None
        avro_type = avro_type.get("type")
    if avro_type not in _PRIMITIVES:
        return None
    return field["name"], avro_type, nullable, decimal
