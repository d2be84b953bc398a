"""TiCDC's dispatch rules: which topic and partition a message goes to.

* Topic expressions (:class:`~ticdc_spark.codec.topics.TopicRouter`, in the codec layer: the
  Avro encoder names its subjects after the topic): ``[A-Za-z0-9._-]*`` with optional
  ``{schema}`` and ``{table}``; the substituted names have characters outside
  ``[A-Za-z0-9._-]`` replaced by ``_`` and the result is cut to Kafka's 249-character limit.
* Partition dispatchers, as TiCDC's ``cdc/sink/dmlsink/mq/dispatcher/partition`` computes
  them with ``pkg/hash.PositionInertia``: a hash that starts at 0 and, for every *write* of a
  few byte strings, XORs in the CRC-32 (IEEE) of that write's bytes run together.  The
  partition is the hash modulo the partition count.

  - ``default``/``table``: one write, schema + table
  - ``index-value``: the table's write, then one write per handle-key column present in the
    row (name + value); ``index-value:NAME`` takes that index's columns instead (the index
    matched case-insensitively, as TiCDC's ``index`` option)
  - ``columns:a,b``: the table's write, then one write per listed column (name + value); the
    names are matched case-insensitively, the table's spelling is hashed, and a column the
    table lacks, or a virtual generated one, is refused (an :class:`EncodeError`)
  - ``ts``: commit ts % N

  The values are the post image's (the pre image's for deletes), in TiCDC's
  ``ColumnValueString`` text: null is ``null``, integers (ENUM index, SET bitmask, BIT too) in
  decimal, FLOAT and DOUBLE in Go's shortest 'f' form at their width, DECIMAL and temporal
  types as TiDB prints them, bytes raw.  Rule names are case-insensitive; ``rowid`` is
  TiCDC's old name of ``index-value``.
* Routes: rows go to their dispatched partition; DDL to every partition of the table's topic
  (Canal-JSON: partition 0); watermarks to every partition of every topic.
"""

from __future__ import annotations

import datetime as _dt
import zlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ticdc_spark.codec.gotext import go_float
from ticdc_spark.codec.topics import TopicRouter
from ticdc_spark.errors import ConfigError, EncodeError
from ticdc_spark.model import RowChange, TableSchema
from ticdc_spark.types import Family, text_formatter

__all__ = [
    "PartitionDispatcher",
    "TopicRouter",
    "hash_value_text",
    "make_dispatcher",
    "position_inertia",
]


def hash_value_text(value: Any) -> bytes:
    """The bytes TiCDC hashes for a column value (``ColumnValueString``)."""
    if value is None:
        return b"null"
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool):
        return b"1" if value else b"0"
    if isinstance(value, float):
        return go_float(value, "f", 64).encode()
    if isinstance(value, Decimal):
        return format(value, "f").encode()
    if isinstance(value, _dt.timedelta | _dt.datetime | _dt.date):
        return str(value).encode()
    return str(value).encode("utf-8")


_RULES = ("default", "table", "index-value", "columns", "ts")


def position_inertia(*writes: tuple[bytes, ...]) -> int:
    """TiCDC's ``PositionInertia`` hash of a sequence of writes: the XOR of the CRC-32 of
    each write's byte strings run together (so the order of the writes does not matter)."""
    value = 0
    for parts in writes:
        crc = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
        value ^= crc
    return value


@dataclass(slots=True)
class PartitionDispatcher:
    """Picks a partition for a row, as one of TiCDC's partition dispatchers would.

    ``columns`` are the ``columns`` dispatcher's column names; ``index`` the name of the index
    whose columns ``index-value`` hashes (empty: the handle key)."""

    rule: str = "default"
    columns: tuple[str, ...] = ()
    index: str = ""

    def __post_init__(self) -> None:
        rule = self.rule.strip().lower()
        self.rule = "index-value" if rule == "rowid" else rule
        if self.rule not in _RULES:
            raise ConfigError(
                f"unknown partition dispatcher {self.rule!r}; valid: default, table, "
                "index-value, columns, ts"
            )
        if self.rule == "columns" and not self.columns:
            raise ConfigError("the columns dispatcher needs column names")
        if self.rule != "columns" and self.columns:
            raise ConfigError(f"the {self.rule} dispatcher takes no column names")
        if self.index and self.rule != "index-value":
            raise ConfigError(f"the {self.rule} dispatcher takes no index name")

    def partition(self, row: RowChange, partitions: int) -> int:
        return self.hash(row, partitions) % max(partitions, 1)

    def hash(self, row: RowChange, partitions: int = 1) -> int:
        """The 32-bit hash TiCDC computes for ``row`` (for ``ts``, the commit ts)."""
        if self.rule == "ts":
            return row.commit_ts
        table = (row.schema.database.encode(), row.schema.table.encode())
        if self.rule in ("default", "table"):
            return position_inertia(table)
        image = row.image
        writes = [table]
        for name in self._hashed_columns(row.schema):
            if name in image:  # a column the message left out is skipped, as TiCDC skips nil
                value = self._value_bytes(row, name, image[name])
                writes.append((name.encode(), value))
        return position_inertia(*writes)

    def _hashed_columns(self, schema: TableSchema) -> tuple[str, ...]:
        """The names, as the table spells them, whose values are hashed."""
        if self.rule == "index-value" and not self.index:
            return tuple(_spelling(schema, name) or name for name in schema.handle_key)
        if self.rule == "index-value":
            wanted = self.index.lower()
            for index in schema.indexes:
                if index.name.lower() == wanted:
                    return tuple(_spelling(schema, name) or name for name in index.columns)
            raise EncodeError(
                f"index not found when dispatching a row of {schema.qualified_name}: {self.index!r}"
            )
        names = []
        virtual = {name.lower() for name in schema.virtual_columns}
        for name in self.columns:
            if name.lower() in virtual:
                raise EncodeError(
                    f"found a virtual generated column when dispatching a row of "
                    f"{schema.qualified_name}: {name!r} (columns {list(self.columns)})"
                )
            spelled = _spelling(schema, name)
            if spelled is None:
                raise EncodeError(
                    f"column not found when dispatching a row of {schema.qualified_name}: "
                    f"{name!r} (columns {list(self.columns)})"
                )
            names.append(spelled)
        return tuple(names)

    def _value_bytes(self, row: RowChange, name: str, value: Any) -> bytes:
        column = row.schema.get(name)
        if isinstance(value, float) and column is not None and column.type.family is Family.FLOAT:
            return go_float(value, "f", 32).encode()
        if column is None or value is None or isinstance(value, bytes | int | float | str):
            return hash_value_text(value)
        return text_formatter(column.type)(value).encode("utf-8")


def _spelling(schema: TableSchema, name: str) -> str | None:
    """The table's spelling of a column name matched case-insensitively (MySQL's rule)."""
    if schema.get(name) is not None:
        return name
    wanted = name.lower()
    for column in schema.columns:
        if column.name.lower() == wanted:
            return column.name
    return None


def make_dispatcher(spec: str) -> PartitionDispatcher:
    """Parse ``default``, ``table``, ``ts``, ``index-value``, ``index-value:INDEX`` or
    ``columns:a,b``."""
    rule, _, rest = spec.partition(":")
    rule = rule.strip().lower()
    names = tuple(c.strip() for c in rest.split(",") if c.strip())
    if rule in ("index-value", "rowid"):
        if len(names) > 1:
            raise ConfigError(f"index-value takes one index name, not {rest!r}")
        return PartitionDispatcher(rule, index=names[0] if names else "")
    return PartitionDispatcher(rule, names)
