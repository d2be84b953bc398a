"""What the Spark-native sinks say in Spark SQL: types, identifiers, the MERGE of one step,
and the schema changes that follow a DDL without rewriting the table.

Pure functions over names and Arrow types, tested without Spark.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ticdc_spark.pipeline.steps import OP_DELETE
from ticdc_spark.sinks.convert import COMMIT_TS, OP

__all__ = [
    "SchemaChange",
    "insert_sql",
    "key_match",
    "merge_sql",
    "quote",
    "schema_change",
    "spark_type",
    "sql_literal",
]


# Integer types by width: a column moves up this ladder in place (Delta's type widening,
# Iceberg's int -> long; Iceberg has no tinyint/smallint and stores them as int).
_INTEGERS = ("tinyint", "smallint", "int", "bigint")


def quote(name: str) -> str:
    """A Spark SQL identifier (backticks doubled inside)."""
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: Any) -> str:
    """A typed value (as the changes' conversion gives it) as a Spark SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | decimal.Decimal):
        return f"'{value}'" if isinstance(value, decimal.Decimal) else str(value)
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def spark_type(arrow_type: pa.DataType, narrow_integers: bool = True) -> str:
    """The Spark SQL type a column of ``arrow_type`` (``sinks.convert.arrow_type``) is
    stored as: wall-clock timestamps without a zone (TiCDC's DATETIME and TIMESTAMP text)
    are ``timestamp_ntz``.  Without ``narrow_integers`` (Iceberg) tinyint and smallint are
    int."""
    if pa.types.is_integer(arrow_type):
        name = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}[arrow_type.bit_width]
        return name if narrow_integers or name in ("int", "bigint") else "int"
    if pa.types.is_decimal(arrow_type):
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_timestamp(arrow_type):
        return "timestamp_ntz"
    simple = {
        pa.float32(): "float",
        pa.float64(): "double",
        pa.string(): "string",
        pa.large_string(): "string",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
        pa.date32(): "date",
        pa.bool_(): "boolean",
    }
    try:
        return simple[arrow_type]
    except KeyError:
        raise ValueError(f"no Spark type for the Arrow type {arrow_type}") from None


def merge_sql(
    target: str,
    source: str,
    columns: Sequence[str],
    keys: Sequence[str],
    nullable_keys: set[str],
    inserts: bool = True,
) -> str:
    """The MERGE of one step's final changes (``source``: a view with the table's columns,
    ``_commit_ts`` and ``_op``) into a live table (no tombstones: a delete deletes).

    A change applies only over an older row (``_commit_ts`` strictly lower): an equal commit
    ts is the same change again, or the DELETE half of an update TiCDC split in two whose
    INSERT half already applied (which must stay).  Changes older than a deleted row's
    delete are dropped by the planner's guards before they get here.  Without ``inserts``
    the changes of keys the table lacks are left out (:func:`insert_sql` adds them).
    """
    stored = [*columns, COMMIT_TS]
    sets = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in stored)
    newer = f"s.{quote(COMMIT_TS)} > t.{quote(COMMIT_TS)}"
    is_delete = f"s.{quote(OP)} = '{OP_DELETE}'"
    statement = (
        f"MERGE INTO {target} t USING {source} s ON {key_match('t', 's', keys, nullable_keys)} "
        f"WHEN MATCHED AND {is_delete} AND {newer} THEN DELETE "
        f"WHEN MATCHED AND NOT {is_delete} AND {newer} THEN UPDATE SET {sets}"
    )
    if not inserts:
        return statement
    names = ", ".join(quote(c) for c in stored)
    values = ", ".join(f"s.{quote(c)}" for c in stored)
    return (
        f"{statement} WHEN NOT MATCHED AND NOT {is_delete} THEN INSERT ({names}) VALUES ({values})"
    )


def insert_sql(target: str, source: str, columns: Sequence[str]) -> str:
    """The INSERT of a step's changes to keys the table lacks (``source`` holds only those):
    what :func:`merge_sql`'s NOT MATCHED clause does."""
    names = ", ".join(quote(c) for c in [*columns, COMMIT_TS])
    return (
        f"INSERT INTO {target} ({names}) SELECT {names} FROM {source} "
        f"WHERE {quote(OP)} <> '{OP_DELETE}'"
    )


def key_match(left: str, right: str, keys: Sequence[str], nullable_keys: set[str]) -> str:
    """Rows of ``left`` and ``right`` with the same key (NULL equal to NULL in a nullable
    key column: a unique key may hold NULLs)."""
    return " AND ".join(
        f"{left}.{quote(k)} {'<=>' if k in nullable_keys else '='} {right}.{quote(k)}" for k in keys
    )


@dataclass
class SchemaChange:
    """How a table's columns become a new schema's, in place where the format allows.

    ``renames`` (old, new), ``drops``, ``adds`` (name, Spark type, constant default or None)
    and ``retypes`` (name, wider Spark type) are each metadata changes; ``rewrite`` says one
    change cannot be made in place (a type that does not widen), so the table is rewritten.
    """

    renames: list[tuple[str, str]] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)
    adds: list[tuple[str, str, Any]] = field(default_factory=list)
    retypes: list[tuple[str, str]] = field(default_factory=list)
    rewrite: bool = False

    @property
    def empty(self) -> bool:
        return not (self.renames or self.drops or self.adds or self.retypes or self.rewrite)


def schema_change(
    current: Mapping[str, str],
    target: Mapping[str, str],
    renamed: Mapping[str, str],
    defaults: Mapping[str, Any],
    widens: frozenset[tuple[str, str]] = frozenset(),
) -> SchemaChange:
    """The changes from a table's ``current`` columns (name -> Spark type) to ``target``'s.

    ``renamed`` maps new names to old ones (a DDL's RENAME/CHANGE COLUMN); ``defaults`` the
    constant DEFAULT of each target column (existing rows hold it once it is added);
    ``widens`` the extra (from, to) type changes the format makes in place, beyond the
    integer ladder, float -> double and a decimal's precision at the same scale.  Every
    part is computed from the table as it is now, so a DDL replayed after a kill finds
    nothing left to do.
    """
    change = SchemaChange()
    columns = {k: v for k, v in current.items() if k != COMMIT_TS}
    for new, old in renamed.items():
        if old in columns and new not in columns and new in target:
            change.renames.append((old, new))
            columns[new] = columns.pop(old)
    change.drops = [name for name in columns if name not in target]
    for name, wanted in target.items():
        have = columns.get(name)
        if have is None:
            change.adds.append((name, wanted, defaults.get(name)))
        elif have != wanted:
            if _widens(have, wanted, widens):
                change.retypes.append((name, wanted))
            else:
                change.rewrite = True
    return change


def _widens(have: str, wanted: str, extra: frozenset[tuple[str, str]]) -> bool:
    if (have, wanted) in extra:
        return True
    if have in _INTEGERS and wanted in _INTEGERS:
        return _INTEGERS.index(have) < _INTEGERS.index(wanted)
    if (have, wanted) == ("float", "double"):
        return True
    if have.startswith("decimal(") and wanted.startswith("decimal("):
        (p1, s1), (p2, s2) = _decimal(have), _decimal(wanted)
        return s1 == s2 and p2 > p1
    return False


def _decimal(text: str) -> tuple[int, int]:
    precision, scale = text[len("decimal(") : -1].split(",")
    return int(precision), int(scale)
