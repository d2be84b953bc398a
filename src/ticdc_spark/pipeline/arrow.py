"""Small Arrow helpers that planning, apply and the sinks share."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ticdc_spark.pipeline.steps import TableKey

__all__ = ["by_table", "concat", "concat_tables", "is_sorted", "whole"]


def concat(tables: Iterable[pa.Table | None]) -> pa.Table | None:
    """:func:`concat_tables` of the tables that are not None (None if none is)."""
    present = [t for t in tables if t is not None]
    return concat_tables(*present) if present else None


def concat_tables(first: pa.Table, *rest: pa.Table) -> pa.Table:
    """The tables one after the other (columns a table lacks are null).  Empty tables are
    left out (``first`` comes back when all are), and a table alone comes back as it is (no
    copy)."""
    present = [t for t in (first, *rest) if t.num_rows]
    if not present:
        return first
    if len(present) == 1:
        return present[0]
    return pa.concat_tables(present, promote_options="permissive")


def whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """An Arrow array, its chunks combined if it is a chunked one."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def is_sorted(values: np.ndarray) -> bool:
    """Whether a numpy array is in ascending order (a sort or a search can then be skipped)."""
    return bool(len(values) < 2 or np.all(values[:-1] <= values[1:]))


def by_table(rows: pa.Table, column: str) -> Iterator[tuple[TableKey, Any]]:
    """Each row's table key (a null database or table as "") with its value in ``column``."""
    for database, table, value in zip(
        rows["database"].to_pylist(),
        rows["table"].to_pylist(),
        rows[column].to_pylist(),
        strict=True,
    ):
        yield (database or "", table or ""), value
