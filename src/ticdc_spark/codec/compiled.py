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

from collections.abc import Callable
from typing import Any

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
    from ticdc_spark import _values as values  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler
    values = None

__all__ = ["BASE64", "BASE64_TEXT", "CALL", "DECIMAL", "DOUBLE", "FLOAT32", "GO_QUOTED"]
__all__ += ["INT", "INT_TEXT", "LATIN1", "STR", "kind_of", "native", "text_kind", "values"]

# The kinds, as _values.c numbers them.
STR, INT, INT_TEXT, FLOAT32, DOUBLE, DATE, DATETIME, TIME, LATIN1, DECIMAL, CALL = range(11)
BASE64, BASE64_TEXT, GO_QUOTED = range(11, 14)

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


def kind_of(function: Callable[[Any], Any], own: dict[Any, int] | None = None) -> int:
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
