"""TiCDC's dispatch rules: which topic and partition a message goes to.

* Topic expressions: ``[A-Za-z0-9._-]*`` with optional ``{schema}`` and ``{table}``; the
  substituted names have characters outside ``[A-Za-z0-9._-]`` replaced by ``_`` and the
  result is cut to Kafka's 249-character limit.
* Partition dispatchers (crc32-IEEE, as TiCDC computes it):

  - ``default``/``table``: crc32(schema + table) % N
  - ``index-value``: crc32 over schema, table, then name and value of each handle-key column
    (post image; pre image for deletes), % N
  - ``columns``: the same over the named columns
  - ``ts``: commit ts % N

  A value's text for hashing: null is ``null``, floats in shortest 'f' form, bytes raw.
* Routes: rows go to their dispatched partition; DDL to every partition of the table's topic
  (Canal-JSON: partition 0); watermarks to every partition of every topic.
"""

from __future__ import annotations

import datetime as _dt
import re
import zlib
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ticdc_spark.codec.gotext import go_float
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import RowChange, RowKind
from ticdc_spark.types import Family, text_formatter

__all__ = ["PartitionDispatcher", "TopicRouter", "hash_value_text", "make_dispatcher"]

_NAME_CHARS = r"[A-Za-z0-9._\-]*"
_TOPIC_RE = re.compile(rf"^{_NAME_CHARS}(\{{schema\}}{_NAME_CHARS})?(\{{table\}}{_NAME_CHARS})?\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]")
_MAX_TOPIC = 249


@dataclass(frozen=True, slots=True)
class TopicRouter:
    """Turns a topic expression such as ``cdc_{schema}_{table}`` into topic names."""

    expression: str
    default_topic: str = ""

    def __post_init__(self) -> None:
        if not self.expression or not _TOPIC_RE.match(self.expression):
            raise ConfigError(
                f"invalid topic expression {self.expression!r}: use [A-Za-z0-9._-] with "
                "optional {schema} and {table}"
            )

    def topic(self, schema: str, table: str) -> str:
        if not schema and not table and "{" in self.expression:
            return self.default_topic or self.expression.split("{", 1)[0].rstrip("_-.")
        name = self.expression.replace("{schema}", _UNSAFE.sub("_", schema))
        name = name.replace("{table}", _UNSAFE.sub("_", table))
        return name[:_MAX_TOPIC]


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


@dataclass(slots=True)
class PartitionDispatcher:
    """Picks a partition for a row, as one of TiCDC's partition dispatchers would."""

    rule: str = "default"
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.rule not in ("default", "table", "index-value", "columns", "ts"):
            raise ConfigError(
                f"unknown partition dispatcher {self.rule!r}; valid: default, table, "
                "index-value, columns, ts"
            )
        if self.rule == "columns" and not self.columns:
            raise ConfigError("the columns dispatcher needs column names")

    def partition(self, row: RowChange, partitions: int) -> int:
        if partitions <= 1:
            return 0
        if self.rule == "ts":
            return row.commit_ts % partitions
        crc = zlib.crc32(row.schema.database.encode())
        crc = zlib.crc32(row.schema.table.encode(), crc)
        if self.rule in ("default", "table"):
            return crc % partitions
        image = row.before if row.kind is RowKind.DELETE else row.after
        image = image or {}
        names = self.columns if self.rule == "columns" else row.schema.handle_key
        for name in names:
            if self.rule == "columns" and name not in image:
                continue
            crc = zlib.crc32(name.encode(), crc)
            crc = zlib.crc32(self._value_bytes(row, name, image.get(name)), crc)
        return crc % partitions

    def _value_bytes(self, row: RowChange, name: str, value: Any) -> bytes:
        column = row.schema.get(name)
        if isinstance(value, float) and column is not None and column.type.family is Family.FLOAT:
            return go_float(value, "f", 32).encode()
        if column is None or value is None or isinstance(value, bytes | int | float | str):
            return hash_value_text(value)
        return text_formatter(column.type)(value).encode("utf-8")


def make_dispatcher(spec: str) -> PartitionDispatcher:
    """Parse ``default``, ``ts``, ``index-value`` or ``columns:a,b``."""
    rule, _, cols = spec.partition(":")
    return PartitionDispatcher(rule.strip(), tuple(c.strip() for c in cols.split(",") if c))
