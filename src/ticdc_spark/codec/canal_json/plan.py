"""Decode plans: what the decoder knows of a table shape, and the one memo of them.

A Canal-JSON row message names its table's shape itself: ``database``, ``table``,
``mysqlType``, ``pkNames`` and the columns of its first row.  A :class:`DecodePlan` is what
that shape means (the schema, each column's converters in the Canal dialect); the
:class:`PlanMemo` finds the plan of a message's shape, and is the one place that decides
whether two messages share one: every decode path (one message, a batch of values, the
compiled scanner's shapes) asks it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ticdc_spark.codec.canal_json.dialect import CANAL, OWN_KINDS, same_text
from ticdc_spark.codec.canal_json.fields import str_field
from ticdc_spark.codec.common import LRUCache, require_dict, temporal_columns
from ticdc_spark.codec.compiled import kind_of
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import Column, Index, TableSchema
from ticdc_spark.types import parse_column_type

__all__ = ["DecodePlan", "PlanMemo", "SchemaTexts", "Shape"]

Converter = Callable[[Any], Any]


class SchemaTexts(Protocol):
    """What makes a table's changelog schema JSON (a changelog sink)."""

    def schema_text(self, schema: TableSchema | None) -> str | None: ...


@dataclass(slots=True)
class DecodePlan:
    schema: TableSchema
    parsers: dict[str, Converter]  # wire text -> canonical value, per column
    temporal: tuple[str, ...]
    rewrites: tuple[tuple[str, Converter], ...]  # columns whose changelog text is not the wire's
    converts: tuple[tuple[str, Converter], ...]  # columns whose text is not the value
    compiled: tuple[tuple[str, int, Converter], ...]  # converts, for compiled_values
    schema_text: str | None = None  # the changelog's schema JSON, once a sink made it

    def changelog_schema(self, sink: SchemaTexts) -> str:
        """The table's changelog schema JSON, made by the first sink that needs it."""
        text = self.schema_text
        if text is None:
            text = self.schema_text = sink.schema_text(self.schema) or ""
        return text


# A memo entry: the mysqlType object, pkNames and first-row columns a plan was made for.
Shape = tuple[dict[str, Any], Any, tuple[str, ...], DecodePlan]


class PlanMemo:
    """The plans of the table shapes seen.

    The last shape seen per table is checked first with C-level dict comparisons
    (:meth:`recall`), which is what a stream of one table's messages needs; other shapes go
    through an LRU cache.  With a table filter, :meth:`fast_shape` refuses the shapes of
    tables it filters out, so the memo never plans them: their messages go to the careful
    path, which drops them (and the batch paths, which recall planned shapes only, never take
    them).
    """

    def __init__(self, table_filter: TableFilter | None = None) -> None:
        self._filter = table_filter
        self._plans: LRUCache[tuple[Any, ...], DecodePlan] = LRUCache()
        self.last: dict[tuple[Any, Any], Shape] = {}
        self._fast: dict[str, tuple[str, tuple[str, str]] | None] = {}

    def recall(self, slot: tuple[Any, Any], mysql_types: Any, pk: Any, row: Any) -> Shape | None:
        """The memo entry of the table ``slot`` if the message has its last shape: the same
        ``mysqlType`` and ``pkNames``, and a first row with the same columns in the same
        order.  Order matters (dict and keys-view equality ignore it): the plan's columns are
        the row's in its order, then ``mysqlType``'s others in theirs."""
        last = self.last.get(slot)
        if (
            last is not None
            and type(row) is dict
            and last[0] == mysql_types
            and last[1] == pk
            and tuple(row) == last[2]
            and (len(row) == len(mysql_types) or tuple(mysql_types) == tuple(last[0]))
        ):
            return last
        return None

    def plan(self, obj: dict[str, Any], first_row: Any) -> DecodePlan:
        """The decode plan of a row message's table shape (built and remembered if new)."""
        if type(first_row) is not dict:
            first_row = require_dict(first_row, "data row")  # (raises)
        mysql_types = obj.get("mysqlType")
        if type(mysql_types) is not dict:
            raise DecodeError("a DML message needs a 'mysqlType' object")
        pk = obj.get("pkNames") or ()
        slot = (obj.get("database"), obj.get("table"))
        last = self.recall(slot, mysql_types, pk, first_row)
        if last is not None:
            return last[3]
        names = tuple(first_row)
        names += tuple(n for n in mysql_types if n not in first_row)
        key = (*slot, names, tuple(map(mysql_types.get, names)), _hashable(pk))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans.put(key, build_decode_plan(obj, names, mysql_types, pk))
        if len(self.last) > 4096:
            self.last.clear()
        self.last[slot] = (mysql_types, pk, tuple(first_row), plan)
        return plan

    def fast_shape(self, text: str, sink: SchemaTexts) -> tuple[str, tuple[str, str]] | None:
        """For the compiled scanner: the changelog schema JSON and table of a shape text
        (``[database, table, mysqlType, pkNames, [column, ...]]``), or None if its messages
        need the careful path (a shape the plan refuses, duplicate or unknown columns,
        columns whose changelog text is not the wire's)."""
        hit = self._fast.get(text, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        result = None
        try:  # (anything unexpected in the shape leaves result None: the careful path)
            database, table, mysql_types, pk, names = orjson.loads(text)
            if self._filter is not None and not (
                type(database) is str
                and type(table) is str
                and self._filter.matches(database, table)
            ):
                pass  # (a filtered table: the careful path drops its messages)
            elif type(mysql_types) is dict and len(set(names)) == len(names):
                obj = {"database": database, "table": table, "mysqlType": mysql_types}
                plan = self.plan({**obj, "pkNames": pk}, dict.fromkeys(names))
                if not plan.rewrites and plan.parsers.keys() >= set(names):
                    result = (plan.changelog_schema(sink), (database, table))
        except (DecodeError, ValueError, TypeError):
            pass
        if len(self._fast) > 4096:
            self._fast.clear()
        self._fast[text] = result
        return result


def _hashable(pk: Any) -> Any:
    return tuple(pk) if isinstance(pk, list) else pk


def build_decode_plan(
    obj: dict[str, Any], names: tuple[str, ...], mysql_types: dict[str, Any], pk: Any
) -> DecodePlan:
    if not isinstance(pk, list | tuple) or not all(isinstance(n, str) for n in pk):
        raise DecodeError("'pkNames' must be an array of column names or null")
    columns = tuple(_column(name, mysql_types.get(name), pk) for name in names)
    indexes = (Index("PRIMARY", tuple(pk), primary=True, unique=True),) if pk else ()
    schema = TableSchema(str_field(obj, "database"), str_field(obj, "table"), columns, indexes)
    schema = schema.with_derived_flags()
    parsers = {c.name: CANAL.decoder(c.type) for c in schema.columns}
    texts = ((c.name, CANAL.text(c.type)) for c in schema.columns)
    converts = tuple((name, parse) for name, parse in parsers.items() if parse is not str)
    return DecodePlan(
        schema,
        parsers,
        temporal_columns(schema),
        tuple((name, text) for name, text in texts if text is not same_text),
        converts,
        tuple((name, kind_of(parse, OWN_KINDS), parse) for name, parse in converts),
    )


def _column(name: str, text: Any, pk: Any) -> Column:
    if not isinstance(text, str):
        raise DecodeError(f"column {name!r} has no mysqlType")
    try:
        ctype = parse_column_type(text)
    except ValueError as exc:
        raise DecodeError(f"column {name!r}: {exc}") from None
    return Column(name, ctype, nullable=name not in pk)
