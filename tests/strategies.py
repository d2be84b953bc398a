"""Hypothesis strategies: random MySQL column types, canonical values, schemas and events."""

from __future__ import annotations

import datetime as dt
from decimal import Context, Decimal
from typing import Any

from hypothesis import strategies as st

from ticdc_spark.model import (
    Column,
    DDLEvent,
    DDLType,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    compose_ts,
)
from ticdc_spark.types import ColumnType, Family, ZeroDate, to_float32

_INT_NAMES = ("tinyint", "smallint", "mediumint", "int", "bigint")
_TEXT_NAMES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
_BYTES_NAMES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
_ELEMENT = st.text(st.characters(codec="utf-8", exclude_characters=",'\\"), min_size=1, max_size=6)

column_names = st.text(
    st.characters(codec="utf-8", categories=("L", "N", "Pc")), min_size=1, max_size=12
)


@st.composite
def column_types(draw: st.DrawFn) -> ColumnType:
    family = draw(
        st.sampled_from(
            [
                "int",
                "float",
                "double",
                "decimal",
                "text",
                "bytes",
                "date",
                "datetime",
                "timestamp",
                "time",
                "year",
                "enum",
                "set",
                "bit",
                "json",
            ]
        )
    )
    if family == "int":
        return ColumnType(draw(st.sampled_from(_INT_NAMES)), unsigned=draw(st.booleans()))
    if family in ("float", "double"):
        return ColumnType(family, unsigned=draw(st.booleans()))
    if family == "decimal":
        precision = draw(st.integers(1, 65))
        scale = draw(st.integers(0, min(30, precision)))
        return ColumnType("decimal", length=precision, decimal=scale)
    if family == "text":
        return ColumnType(draw(st.sampled_from(_TEXT_NAMES)))
    if family == "bytes":
        return ColumnType(draw(st.sampled_from(_BYTES_NAMES)))
    if family in ("datetime", "timestamp", "time"):
        return ColumnType(family, decimal=draw(st.integers(0, 6)))
    if family in ("enum", "set"):
        elements = tuple(draw(st.lists(_ELEMENT, min_size=1, max_size=8, unique_by=str.casefold)))
        return ColumnType(family, elements=elements)
    if family == "bit":
        return ColumnType("bit", length=draw(st.integers(1, 64)))
    return ColumnType(family)


def _truncate(microsecond: int, fsp: int) -> int:
    step = 10 ** (6 - fsp)
    return microsecond - microsecond % step


@st.composite
def values_of(draw: st.DrawFn, ctype: ColumnType) -> Any:
    family = ctype.family
    if family is Family.INTEGER:
        low, high = ctype.int_range()
        return draw(st.integers(low, high))
    if family is Family.FLOAT:
        return to_float32(draw(st.floats(width=32, allow_nan=False, allow_infinity=False)))
    if family is Family.DOUBLE:
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    if family is Family.DECIMAL:
        precision, scale = ctype.length or 10, ctype.decimal or 0
        digits = draw(st.integers(0, 10**precision - 1))
        sign = draw(st.sampled_from(("", "-")))
        # (scaleb in a context of 65 digits: the default 28 would round the value out of
        # its precision)
        return Decimal(sign + str(digits)).scaleb(-scale, Context(prec=65))
    if family is Family.STRING:
        return draw(st.text(st.characters(codec="utf-8"), max_size=20))
    if family is Family.BYTES:
        return draw(st.binary(max_size=24))
    if family is Family.DATE:
        return draw(_zero_dates(False)) if draw(st.integers(0, 9)) == 0 else draw(st.dates())
    if family is Family.DATETIME:
        fsp = ctype.decimal or 0
        if draw(st.integers(0, 9)) == 0:
            return draw(_zero_dates(True))
        value = draw(st.datetimes())
        return value.replace(microsecond=_truncate(value.microsecond, fsp))
    if family is Family.TIME:
        micros = draw(
            st.integers(-838 * 3600 * 10**6 - 3599 * 10**6, 838 * 3600 * 10**6 + 3599 * 10**6)
        )
        sign = -1 if micros < 0 else 1
        return dt.timedelta(microseconds=sign * _truncate(abs(micros), ctype.decimal or 0))
    if family is Family.YEAR:
        return draw(st.one_of(st.just(0), st.integers(1901, 2155)))
    if family is Family.ENUM:
        return draw(st.integers(1, len(ctype.elements)))
    if family is Family.SET:
        return draw(st.integers(0, (1 << len(ctype.elements)) - 1))
    if family is Family.BIT:
        return draw(st.integers(0, (1 << (ctype.length or 1)) - 1))
    if family is Family.JSON:
        return draw(st.sampled_from(('{"a": 1}', "[1, 2, 3]", '"text"', "null", "{}")))
    raise AssertionError(ctype)


def _zero_dates(with_time: bool) -> st.SearchStrategy[ZeroDate]:
    return st.builds(
        ZeroDate,
        st.just(0) | st.integers(1, 9999),
        st.integers(0, 12),
        st.just(0) | st.integers(0, 31),
        st.integers(0, 23) if with_time else st.just(0),
        st.integers(0, 59) if with_time else st.just(0),
        st.integers(0, 59) if with_time else st.just(0),
        st.just(0),
    ).filter(lambda z: z.year == 0 or z.month == 0 or z.day == 0)


@st.composite
def schemas(draw: st.DrawFn, min_columns: int = 1, max_columns: int = 8) -> TableSchema:
    names = draw(
        st.lists(column_names, min_size=min_columns, max_size=max_columns, unique_by=str.casefold)
    )
    columns = [Column(names[0], ColumnType("bigint"), nullable=False)]
    columns += [Column(n, draw(column_types())) for n in names[1:]]
    database = draw(column_names)
    table = draw(column_names)
    pk = (Index("PRIMARY", (names[0],), primary=True, unique=True),)
    return TableSchema(database, table, tuple(columns), pk).with_derived_flags()


@st.composite
def images(draw: st.DrawFn, schema: TableSchema, key: int | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {}
    for i, column in enumerate(schema.columns):
        if i == 0:
            image[column.name] = key if key is not None else draw(st.integers(-(2**63), 2**63 - 1))
        elif draw(st.integers(0, 9)) == 0:
            image[column.name] = None
        else:
            image[column.name] = draw(values_of(column.type))
    return image


commit_tss = st.builds(
    compose_ts, st.integers(1_500_000_000_000, 2_500_000_000_000), st.integers(0, (1 << 18) - 1)
)


@st.composite
def row_changes(draw: st.DrawFn, schema: TableSchema | None = None) -> RowChange:
    schema = schema if schema is not None else draw(schemas())
    kind = draw(st.sampled_from(list(RowKind)))
    key = draw(st.integers(-(2**63), 2**63 - 1))
    before = draw(images(schema, key)) if kind is not RowKind.INSERT else None
    after = draw(images(schema, key)) if kind is not RowKind.DELETE else None
    return RowChange(kind, schema, draw(commit_tss), before, after)


@st.composite
def other_events(draw: st.DrawFn) -> DDLEvent | Watermark:
    if draw(st.booleans()):
        return Watermark(draw(commit_tss))
    table = draw(column_names)
    return DDLEvent(
        DDLType.CREATE_TABLE,
        f"CREATE TABLE `{table}` (a int)",
        draw(commit_tss),
        draw(column_names),
        table,
    )
