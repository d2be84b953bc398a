"""The codecs' compiled per-column loops (``ticdc_spark._values``, C), when they are built.

Decoding or encoding a row is a loop over its columns; in Python the loop costs more than
parsing or writing the JSON, so ``_values`` runs it in C (see its header for why no library
fits).  Each codec keeps its Python loop: the compiled one returns None for anything not
plainly right, and the Python loop then gives the same answer or the precise error.  Without
a C compiler at install time ``values`` is None and only the Python loops run.

A codec describes each column to the compiled loop by a *kind* (what C can convert itself) and
its own Python function for the column, which C calls for values outside the kind's strict
syntax.  :func:`kind_of` picks a decoding kind from that function, :func:`text_kind` an
encoding kind from the column type.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType
from typing import Any, ClassVar

from ticdc_spark.codec.catalog import protocols
from ticdc_spark.model import RowKind
from ticdc_spark.types import (
    ColumnType,
    Family,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_float,
    parse_time,
)

try:
    import ticdc_spark._values as values  # type: ignore[import-not-found]
except ImportError:  # built without a C compiler
    values = None

__all__ = ["BASE64", "BASE64_TEXT", "CALL", "DATE", "DATETIME", "DECIMAL", "DOUBLE", "FLOAT32"]
__all__ += ["GO_QUOTED", "INT", "INT_TEXT", "LATIN1", "STR", "TIME", "CanalLayout", "Kind"]
__all__ += ["kind_of", "native", "text_kind", "values"]


class Kind(IntEnum):
    """What the compiled loops convert a column's values as (``_values.c`` says how).

    The one definition of the numbers: setup.py compiles them into ``_values.c`` (read from
    this source, so keep each a plain ``NAME = number``, numbered 0..n-1), which exports
    them as ``KINDS``; a module built from other numbers is not used (see below)."""

    STR = 0
    INT = 1
    INT_TEXT = 2
    FLOAT32 = 3
    DOUBLE = 4
    DATE = 5
    DATETIME = 6
    TIME = 7
    LATIN1 = 8
    DECIMAL = 9
    CALL = 10
    BASE64 = 11
    BASE64_TEXT = 12
    GO_QUOTED = 13


# The names the codecs import.
STR = Kind.STR
INT = Kind.INT
INT_TEXT = Kind.INT_TEXT
FLOAT32 = Kind.FLOAT32
DOUBLE = Kind.DOUBLE
DATE = Kind.DATE
DATETIME = Kind.DATETIME
TIME = Kind.TIME
LATIN1 = Kind.LATIN1
DECIMAL = Kind.DECIMAL
CALL = Kind.CALL
BASE64 = Kind.BASE64
BASE64_TEXT = Kind.BASE64_TEXT
GO_QUOTED = Kind.GO_QUOTED

if values is not None and getattr(values, "KINDS", None) != {k.name: k.value for k in Kind}:
    # a module built before Kind changed would convert columns as other kinds: never use it
    warnings.warn(
        "ticdc_spark._values was built with other kind numbers than "
        "ticdc_spark.codec.compiled.Kind; rebuild it (the Python loops are used meanwhile)",
        RuntimeWarning,
        stacklevel=1,
    )
    values = None


@dataclass(frozen=True, slots=True)
class CanalLayout:
    """What the compiled Canal-JSON writer (``values.canal_rows``) needs of a table's encode
    plan.  C reads the fields by name once per run of one table's rows."""

    columns: tuple[tuple[bytes, str, int, int, Callable[[Any], str]], ...]  # as text_object
    prefix: bytes  # the message up to the type's text: {"id":0,...,"type":"
    mysql_types: bytes  # the mysqlType JSON
    sql_types: bytes | None  # the sqlType JSON, or None when the row's values promote types
    promotions: tuple[tuple[str, int, int], ...]  # limits as `values.exceeding` takes them
    promoted_sql_types: dict[int, bytes]  # sqlType JSON by promotion bits, as seen so far
    # the row kinds, compared by identity (C has no enum lookups of its own)
    insert_kind: ClassVar[RowKind] = RowKind.INSERT
    update_kind: ClassVar[RowKind] = RowKind.UPDATE
    delete_kind: ClassVar[RowKind] = RowKind.DELETE


_KIND_OF: dict[Any, int] = {
    str: STR,
    int: INT,
    float: DOUBLE,
    parse_float: FLOAT32,
    parse_decimal: DECIMAL,
    parse_date: DATE,
    parse_datetime: DATETIME,
    parse_time: TIME,
}


def native() -> bool:
    """Whether the compiled loops are installed."""
    return values is not None


def kind_of(function: Callable[[Any], Any], own: Mapping[Any, int] | None = None) -> int:
    """The kind of a column whose values the codec converts with ``function``; ``own`` maps
    the codec's own functions (which must agree with the kind on every value it accepts)."""
    if own is not None and function in own:
        return own[function]
    return _KIND_OF.get(function, CALL)


# Encoding: the family's text formatter (types.text_formatter) as a kind, with its fsp.
_TEXT_KIND_OF = {
    Family.INTEGER: STR,  # str() of an int
    Family.YEAR: STR,
    Family.ENUM: STR,
    Family.SET: STR,
    Family.BIT: STR,
    Family.STRING: STR,
    Family.JSON: STR,
    Family.UNKNOWN: STR,
    Family.DECIMAL: DECIMAL,
    Family.FLOAT: FLOAT32,
    Family.DOUBLE: DOUBLE,
    Family.DATE: DATE,
    Family.DATETIME: DATETIME,
    Family.TIME: TIME,
}


def text_kind(ctype: ColumnType) -> tuple[int, int]:
    """(kind, fsp) of ``types.text_formatter(ctype)`` for the compiled loops.  Binary columns
    have no text form here: each codec writes its own.

    The fsp is what the formatter does with the column's ``decimal``: -1 when it is unknown
    (six digits, trailing zeros cut), 0 for none or less (no fraction); other kinds ignore it.
    Over six (no MySQL column has it) the formatter's own cut is kept: it would print what an
    aware datetime's isoformat has after the microseconds."""
    kind = _TEXT_KIND_OF.get(ctype.family, CALL)
    if kind not in (DATETIME, TIME):
        return kind, 0
    if ctype.decimal is None:
        return kind, -1
    if ctype.decimal > 6:
        return CALL, 0
    return kind, max(ctype.decimal, 0)


def users() -> list[ModuleType]:
    """Every codec module that calls the compiled loops.  Setting a module's
    ``compiled_values`` to None runs it on its Python paths: what tests and benchmarks do to
    compare the two.  (Every built-in protocol is imported first: the catalog imports them
    lazily.)"""
    protocols()
    return [
        module
        for name, module in sorted(sys.modules.items())
        if name.startswith("ticdc_spark.codec.") and hasattr(module, "compiled_values")
    ]
