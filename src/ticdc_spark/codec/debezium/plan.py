"""A table shape as the Debezium decoder reads it: its schema and, per column, the reader of
the wire value and the changelog text of it.

Both decode paths use it: the one-message path (:mod:`.decoder`) plans a shape from a
message's Connect schema (or its guessed column types, :mod:`.guess`); the Arrow batch path
(:mod:`.batch`) reads the records of shapes already planned column by column.
"""

from __future__ import annotations

import logging
from itertools import chain
from typing import Any

from ticdc_spark.codec.common import require_dict
from ticdc_spark.codec.convert import NORMALIZED, Converter
from ticdc_spark.codec.debezium.connect import read_field, sign_unknown
from ticdc_spark.codec.debezium.dialect import DEBEZIUM
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Column, Index, TableSchema
from ticdc_spark.types import ColumnType, Family

__all__ = ["Image", "Plan", "connect_plan", "table_schema"]

Image = dict[str, Any] | None

# The dialect's readers that need no column facts (to recognise them in _text_of).
_DEFAULT_READERS = {
    family: DEBEZIUM.decoder(ColumnType(name))
    for family, name in ((Family.STRING, "text"), (Family.JSON, "json"))
}
_DEFAULT_READERS[Family.INTEGER] = DEBEZIUM.decoder(ColumnType("int"))
log = logging.getLogger(__name__)
_NONE = type(None)
_SEEN_MOST = 256  # (combinations of nulls a table's rows show: past these, the set test)


class Plan:
    """A table shape: its schema and, per column, the reader of its wire value and the
    changelog text of it.  ``exact``: the shape has DECIMAL columns, whose JSON numbers are
    read from their text (:mod:`.typed`), never through a double.  ``sign_unknown``: the
    columns a BIGINT UNSIGNED may hide in (:func:`.connect.sign_unknown`) not yet seen
    negative (:meth:`note_signs`)."""

    __slots__ = (
        "changelog_schema",
        "columnar",
        "converters",
        "exact",
        "order",
        "passes",
        "readers",
        "schema",
        "seen",
        "sign_unknown",
        "texts",
    )

    def __init__(
        self,
        schema: TableSchema,
        readers: dict[str, Converter],
        passes: dict[str, type] | None = None,
        sign_unknown: frozenset[str] = frozenset(),
    ) -> None:
        self.schema = schema
        self.sign_unknown = set(sign_unknown)
        self.readers = readers
        self.changelog_schema: str | None = None  # (the changelog's schema JSON, once asked)
        self.texts = {c.name: _text_of(readers[c.name], c.type) for c in schema.columns}
        self.exact = any(c.type.family is Family.DECIMAL for c in schema.columns)
        # (for the batch path: per column in order, its text converter and the JSON type
        # whose values Arrow makes that text of, if any)
        self.order = tuple(self.texts)
        self.converters = list(self.texts.values())
        self.columnar = [_COLUMNAR.get(text) for text in self.converters]
        # (column, JSON type) pairs whose values the readers return unchanged (for guessed
        # columns only: their readers are type checks, or conversions of the other types)
        self.passes = (
            None
            if passes is None
            else frozenset(chain(passes.items(), ((name, _NONE) for name in readers)))
        )
        # (the images' column names and JSON types seen, and whether they pass unchanged)
        self.seen: dict[tuple[tuple[str, ...], tuple[type, ...]], bool] = {}

    def image(self, raw: Any, text: bool) -> Image:
        if raw is None:
            return None
        if type(raw) is not dict:
            raise DecodeError(f"a row image must be an object, got {type(raw).__name__}")
        if not text and self.passes is not None and self._unchanged(raw):
            return raw  # (every value is what its reader would return: no per-value calls)
        convert = self.texts if text else self.readers
        try:
            return {name: None if v is None else convert[name](v) for name, v in raw.items()}
        except KeyError as missing:
            raise DecodeError(
                f"column {missing.args[0]!r} is not in the schema of {self.schema.qualified_name}"
            ) from None

    def note_signs(self, images: tuple[Any, ...]) -> None:
        """Warns, once per column, of a negative value where a BIGINT UNSIGNED cannot be told
        from a BIGINT (see :func:`.connect.sign_unknown`): it may be one past 2^63-1."""
        for name in [n for n in self.sign_unknown for i in images if _negative(i, n)]:
            if name in self.sign_unknown:
                self.sign_unknown.discard(name)
                log.warning(_SIGN_UNKNOWN, self.schema.qualified_name, name)

    def _unchanged(self, raw: dict[str, Any]) -> bool:
        """Whether each value of ``raw`` is null or of the type its column's reader returns
        unchanged (one set test per combination of names and types, no call per value)."""
        key = (tuple(raw), tuple(map(type, raw.values())))
        known = self.seen.get(key)
        if known is None:
            passes = self.passes or frozenset()
            known = passes.issuperset(zip(*key, strict=True))
            if len(self.seen) < _SEEN_MOST:
                self.seen[key] = known
        return known


def _negative(image: Any, name: str) -> bool:
    value = image.get(name) if type(image) is dict else None
    return type(value) is int and value < 0


_SIGN_UNKNOWN = (
    "debezium: %s column %s holds a negative int64, and its Connect schema cannot tell a "
    "BIGINT from a BIGINT UNSIGNED: read as BIGINT, though it may be a BIGINT UNSIGNED past "
    "2^63-1 sent negative (TiCDC without enable-tidb-extension=true, or Debezium's "
    "bigint.unsigned.handling.mode=long); enable-tidb-extension=true carries the type"
)


def _text_of(read: Converter, ctype: ColumnType) -> Converter:
    """The changelog text of a wire value: its canonical value printed as the normalized
    text; in one step for TiCDC's strings and integers, the common columns."""
    if read is _DEFAULT_READERS.get(ctype.family):
        if ctype.family in (Family.STRING, Family.JSON):
            return read  # (the text itself, checked to be a string)
        if ctype.family is Family.INTEGER and not (ctype.name == "bigint" and ctype.unsigned):
            return _integer_text
    write = NORMALIZED.encoder(ctype)
    return lambda value: write(read(value))


def _integer_text(value: Any) -> str:
    if type(value) is not int:
        raise ValueError(f"expected an integer, got {value!r}")
    return str(value)


# Text converters whose text Arrow makes for a whole column of values of one JSON type.
_COLUMNAR: dict[Converter, type] = {_DEFAULT_READERS[Family.STRING]: str, _integer_text: int}


def table_schema(
    database: str, table: str, columns: list[Column], key: tuple[str, ...]
) -> TableSchema:
    names = {c.name for c in columns}
    key = tuple(k for k in key if k in names)
    if key:  # the key's columns are the handle key (TiCDC: the primary key or a unique key)
        columns = [c if c.name not in key else _not_null(c) for c in columns]
    indexes = (Index("PRIMARY", key, primary=True, unique=True),) if key else ()
    return TableSchema(database, table, tuple(columns), indexes).with_derived_flags()


def _not_null(column: Column) -> Column:
    return Column(column.name, column.type, False, column.default, column.generated)


def connect_plan(schema: Any, database: str, table: str, key: tuple[str, ...]) -> Plan:
    """The plan of a value's Connect schema: the fields of its ``after`` (else ``before``)
    struct."""
    envelope = require_dict(schema, "schema")
    fields = envelope["fields"]
    if not isinstance(fields, list):
        raise DecodeError("schema 'fields' must be an array")
    structs = {f.get("field"): f for f in fields if isinstance(f, dict)}
    image = structs.get("after") or structs.get("before")
    if image is None:
        raise DecodeError("the schema has no 'after' or 'before' struct")
    row_fields = image["fields"]
    if not isinstance(row_fields, list):
        raise DecodeError("the 'after' struct's 'fields' must be an array")
    columns, readers = [], {}
    for field in row_fields:
        column, reader = read_field(field)
        if column.name in readers:
            raise DecodeError(f"column {column.name!r} appears twice in the schema")
        columns.append(column)
        readers[column.name] = reader
    unknown = frozenset(f["field"] for f in row_fields if sign_unknown(f))
    return Plan(table_schema(database, table, columns, key), readers, None, unknown)
