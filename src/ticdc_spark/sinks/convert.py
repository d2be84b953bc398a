"""MySQL types to Arrow types, and changelog text images to typed Arrow columns.

The lakehouse types keep every value (the mapping is the same for Delta and Iceberg, which
adjusts the narrow integers it lacks):

=========================  =================================  ==============================
MySQL                      Arrow                              why
=========================  =================================  ==============================
TINYINT / UNSIGNED         int8 / int16                       the next signed type holds it
SMALLINT / UNSIGNED        int16 / int32
MEDIUMINT                  int32
INT / UNSIGNED             int32 / int64
BIGINT / UNSIGNED          int64 / decimal(20,0)              no unsigned 64-bit type
FLOAT, DOUBLE              float32, float64
DECIMAL(p,s), p <= 38      decimal128(p,s)
DECIMAL(p,s), p > 38       string                             lakehouse decimals stop at 38
DECIMAL, precision unknown string                             (plain Canal-JSON types)
CHAR .. LONGTEXT, JSON     string
BINARY .. LONGBLOB         binary
DATE                       date32                             zero dates become null
DATETIME, TIMESTAMP        timestamp[us] (no zone)            wall clock as TiCDC wrote it
TIME                       string ``-838:59:59.000000``       negative and > 24 h
YEAR                       int16
ENUM, SET                  string: member names               the index when names unknown
BIT(n<=63) / BIT(64)       int64 / decimal(20,0)
=========================  =================================  ==============================

Conversion is vectorized with Arrow compute; a value that does not convert makes its row a
dead letter (named by topic/partition/offset), never a silently wrong value.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.dead_letters import dead_letters
from ticdc_spark.types import ColumnType, Family, ZeroDate, parse_date, parse_datetime

__all__ = [
    "COMMIT_TS",
    "OP",
    "arrow_type",
    "changelog_texts",
    "convertible",
    "table_arrow_schema",
    "typed_rows",
]

# A text-to-Arrow conversion of one column family: (column type, text, Arrow type) -> array.
Converter = Callable[[ColumnType, pa.Array, pa.DataType], pa.Array]

COMMIT_TS = "_commit_ts"
OP = "_op"


def arrow_type(ctype: ColumnType) -> pa.DataType:
    """The Arrow type a MySQL column is stored as."""

    family, name = ctype.family, ctype.name
    if family is Family.INTEGER:
        return _INTEGER_TYPES[(name, ctype.unsigned)]
    if family is Family.FLOAT:
        return pa.float32()
    if family is Family.DOUBLE:
        return pa.float64()
    if family is Family.DECIMAL:
        if ctype.length is None or ctype.length > 38:
            return pa.string()
        return pa.decimal128(ctype.length, ctype.decimal or 0)
    if family is Family.BYTES:
        return pa.binary()
    if family is Family.DATE:
        return pa.date32()
    if family is Family.DATETIME:
        return pa.timestamp("us")
    if family is Family.YEAR:
        return pa.int16()
    if family is Family.BIT:
        return (
            pa.int64() if ctype.length is not None and ctype.length <= 63 else pa.decimal128(20, 0)
        )
    return pa.string()


_INTEGER_TYPES: dict[tuple[str, bool], pa.DataType] = {
    ("tinyint", False): pa.int8(),
    ("tinyint", True): pa.int16(),
    ("smallint", False): pa.int16(),
    ("smallint", True): pa.int32(),
    ("mediumint", False): pa.int32(),
    ("mediumint", True): pa.int32(),
    ("int", False): pa.int32(),
    ("int", True): pa.int64(),
    ("bigint", False): pa.int64(),
    ("bigint", True): pa.decimal128(20, 0),
}


def table_arrow_schema(schema: TableSchema, *, op: bool = False) -> pa.Schema:
    """The Arrow schema of a target table: the columns, then ``_commit_ts`` (the commit ts
    of the change that wrote the row: a change applies only over an older one); with ``op``
    also ``_op`` (``insert``/``update``/``delete``): the changes a merge takes, and the rows
    of a changelog table (``T__changes``, see :mod:`ticdc_spark.sinks.base`).  A table holds
    upstream's live rows only, so it has no ``_op``."""

    fields = [pa.field(c.name, arrow_type(c.type), nullable=True) for c in schema.columns]
    fields.append(pa.field(COMMIT_TS, pa.int64(), nullable=False))
    if op:
        fields.append(pa.field(OP, pa.string(), nullable=False))
    return pa.schema(fields)


def typed_rows(schema: TableSchema, changes: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """Typed target rows for planned changes (the table's columns, ``_commit_ts`` and the
    change's ``_op``, which the merge needs and the table does not keep), and the changes
    that failed to convert.

    ``changes`` has ``op``, ``commit_ts``, ``image`` (a map of text) and position columns
    (see :func:`ticdc_spark.pipeline.last_change.final_changes`).  Returns ``(rows, bad)`` where
    ``bad`` holds the position and reason of every change with a value its column cannot hold.
    """

    rows, reasons = _converted(schema, changes)
    if not any(reasons):
        return rows, None
    bad = pa.array([r is not None for r in reasons])
    return rows.filter(pc.invert(bad)), _failed(changes, bad, reasons)


def convertible(schema: TableSchema, changes: pa.Table) -> tuple[pa.Table, pa.Table | None]:
    """The planned changes whose values all convert to the table's types (as they came),
    and the dead letters of the others (as :func:`typed_rows` makes them): planning on the
    executors screens its changes so that the merge reads them once."""
    _rows, reasons = _converted(schema, changes)
    if not any(reasons):
        return changes, None
    bad = pa.array([r is not None for r in reasons])
    return changes.filter(pc.invert(bad)), _failed(changes, bad, reasons)


def _converted(schema: TableSchema, changes: pa.Table) -> tuple[pa.Table, list[str | None]]:
    """Every change typed (a value that does not convert: null), and per change the reason
    it does not convert, or None."""
    target = table_arrow_schema(schema, op=True)
    arrays = []
    reasons: list[str | None] = [None] * changes.num_rows
    texts = image_columns(changes["image"], schema.column_names)
    for column in schema.columns:
        values, failed = convert_column(column.type, texts[column.name])
        for i in failed:
            reasons[i] = reasons[i] or f"column {column.name!r}: {failed[i]}"
        arrays.append(values)
    arrays += [changes["commit_ts"], changes["op"]]
    return pa.Table.from_arrays(arrays, schema=target), reasons


def _failed(changes: pa.Table, bad: pa.Array, reasons: list[str | None]) -> pa.Table | None:
    broken = changes.filter(bad).append_column(
        "error", pa.array([r for r in reasons if r is not None], pa.string())
    )
    return dead_letters(broken)


def changelog_texts(rows: pa.Table) -> pa.Table:
    """Stored rows as the changelog's text, by their Arrow types (``_commit_ts`` kept as it
    is): numbers, dates and strings as Arrow prints them, binary values as base64.  MySQL's
    own text depends on types Arrow does not tell (a DATETIME's fraction digits): a reader
    that knows the column types normalizes the rest (pipeline.tombstones)."""
    columns = []
    for name in rows.column_names:
        values = rows[name]
        if name == COMMIT_TS or pa.types.is_string(values.type):
            columns.append(values)
        elif pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type):
            columns.append(pa.array(_base64(values.to_pylist()), pa.string()))
        else:
            columns.append(pc.cast(values, pa.string()))
    return pa.table(columns, names=rows.column_names)


def _base64(values: list[bytes | None]) -> list[str | None]:
    return [None if v is None else binascii.b2a_base64(v, newline=False).decode() for v in values]


def image_columns(
    images: pa.MapArray | pa.ChunkedArray, names: tuple[str, ...] | list[str]
) -> dict[str, pa.Array]:
    """The text of each named column of a map<string,string> column of row images.

    Images decoded from one table shape hold the same keys in the same order (the wire's
    order, not always the schema's), so when every row has the first row's keys the flat
    values slice into columns with a stride, after one vectorized check of the keys; anything
    else (rows with other columns, null images) is looked up per column with ``map_lookup``.
    """

    if isinstance(images, pa.ChunkedArray):
        images = images.combine_chunks()
    n = len(images)
    if n and not images.null_count:
        offsets = images.offsets.to_numpy()
        width = int(offsets[1] - offsets[0])
        if width and bool((np.diff(offsets) == width).all()):
            start = int(offsets[0])
            keys = images.keys.slice(start, n * width)
            first = keys.slice(0, width)
            ordinals = pc.index_in(keys, value_set=first)
            if not ordinals.null_count and np.array_equal(
                ordinals.to_numpy(), np.tile(np.arange(width, dtype=np.int32), n)
            ):
                values = images.items.slice(start, n * width)
                where = {key: j for j, key in enumerate(first.to_pylist())}
                return {
                    name: values.take(pa.array(np.arange(where[name], n * width, width)))
                    if name in where
                    else pa.nulls(n, pa.string())
                    for name in names
                }
    return {name: pc.map_lookup(images, name, "first") for name in names}


def convert_column(ctype: ColumnType, text: pa.Array) -> tuple[pa.Array, dict[int, str]]:
    """Text (an Arrow string array) to the column's Arrow type.

    Returns the array (failed values null) and {row index: reason} for values that failed.
    """
    target = arrow_type(ctype)
    convert = _CONVERTERS.get(ctype.family, _cast)
    try:
        return convert(ctype, text, target), {}
    except _CONVERSION_ERRORS:  # pyarrow's ArrowInvalid is a ValueError
        return _one_by_one(ctype, text, target, convert)


_CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, binascii.Error)


def _one_by_one(
    ctype: ColumnType, text: pa.Array, target: pa.DataType, convert: Converter
) -> tuple[pa.Array, dict[int, str]]:
    """Convert value by value to find the ones that fail (the rare slow path)."""

    values: list[Any] = []
    failed: dict[int, str] = {}
    for i, value in enumerate(text.to_pylist()):
        try:
            values.append(convert(ctype, pa.array([value], pa.string()), target)[0].as_py())
        except _CONVERSION_ERRORS as exc:
            failed[i] = f"cannot store {value!r} as {target}: {exc}"
            values.append(None)
    return pa.array(values, target), failed


def _cast(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:

    return pc.cast(text, target, safe=True)


def _integer(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:

    if pa.types.is_decimal(target):  # unsigned BIGINT
        return pc.cast(text, target, safe=True)
    return pc.cast(pc.cast(text, pa.int64(), safe=True), target, safe=True)


def _floating(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:

    return pc.cast(pc.cast(text, pa.float64()), target, safe=False)


def _temporal(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:
    """Dates and datetimes; zero dates (which Arrow cannot hold) become null."""

    try:
        values = pc.cast(text, target)
        # Arrow takes year 0, which MySQL treats like its zero dates and Python cannot hold.
        before_year_one = pc.less(pc.year(values), 1)
        if pc.any(before_year_one).as_py():
            values = pc.if_else(before_year_one, pa.scalar(None, target), values)
        return values
    except pa.ArrowInvalid:
        pass
    parse = parse_date if ctype.family is Family.DATE else parse_datetime
    values = []
    for value in text.to_pylist():
        parsed = None if value is None else parse(value)
        values.append(None if isinstance(parsed, ZeroDate) else parsed)
    return pa.array(values, target)


def _binary(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:

    return pa.array(
        [None if v is None else binascii.a2b_base64(v, strict_mode=True) for v in text.to_pylist()],
        pa.binary(),
    )


def _member_names(ctype: ColumnType, text: pa.Array, target: pa.DataType) -> pa.Array:
    """ENUM index / SET bitmask to member names (when the type lists them)."""

    if not ctype.elements:
        return text
    lookup = ctype.enum_name if ctype.family is Family.ENUM else _set_text(ctype)
    out = []
    for value in text.to_pylist():
        if value is None or not (value.isascii() and value.isdigit()):
            out.append(value)  # already names (Alibaba Canal) or null
            continue
        name = lookup(int(value))
        if name is None:
            raise ValueError(f"{value} is not a member of {ctype.sql()}")
        out.append(name)
    return pa.array(out, pa.string())


def _set_text(ctype: ColumnType) -> Callable[[int], str | None]:
    def names(bits: int) -> str | None:
        found = ctype.set_names(bits)
        return None if found is None else ",".join(found)

    return names


_CONVERTERS: dict[Family, Converter] = {
    Family.INTEGER: _integer,
    Family.YEAR: _integer,
    Family.BIT: _integer,
    Family.FLOAT: _floating,
    Family.DOUBLE: _floating,
    Family.DATE: _temporal,
    Family.DATETIME: _temporal,
    Family.BYTES: _binary,
    Family.ENUM: _member_names,
    Family.SET: _member_names,
}
