"""The Simple consumer's state: table schemas by version, and the rows waiting for one.

A Simple DML message names its table's schema version but carries no schema: the consumer
looks the schema up by ``(database, table, schemaVersion)`` among those that BOOTSTRAP and
DDL messages brought (a DDL brings two: ``tableSchema`` and ``preTableSchema``).  A consumer
that joins mid-stream meets rows before any schema of their table; those rows are held,
never dropped, until a message brings the schema (TiCDC sends BOOTSTRAP periodically for
that).  What is held is bounded by a count and by bytes: past either bound the consumer stops
with an error naming the table, the version it waits for and the options that raise the
bounds, rather than grow without limit.

Both are plain data (no codec objects inside), so a pipeline can keep them in its
checkpointed state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ticdc_spark.errors import ConfigError

__all__ = ["HeldRows", "SchemaKey", "SchemaMemo"]

SchemaKey = tuple[str, str, int]  # (database, table, schema version)
T = TypeVar("T")
V = TypeVar("V")


class SchemaMemo(Generic[V]):
    """Values (schemas, or what a decoder builds from them) by (database, table, version).

    Bounded by ``size`` entries, the oldest out first: a table's versions are few, and a
    schema that falls out comes back with the next BOOTSTRAP.  ``entries`` is the mapping
    itself, for hot paths that look keys up directly.
    """

    def __init__(self, size: int = 16384) -> None:
        self.size = size
        self.entries: dict[SchemaKey, V] = {}

    def get(self, key: SchemaKey) -> V | None:
        return self.entries.get(key)

    def put(self, key: SchemaKey, value: V) -> None:
        self.entries.pop(key, None)
        self.entries[key] = value
        if len(self.entries) > self.size:
            del self.entries[next(iter(self.entries))]

    def __contains__(self, key: object) -> bool:
        return key in self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def items(self) -> list[tuple[SchemaKey, V]]:
        return list(self.entries.items())


@dataclass(slots=True)
class HeldRows(Generic[T]):
    """Rows waiting for their schema, in arrival order per schema key, bounded.

    ``add`` raises :class:`~ticdc_spark.errors.ConfigError` when one more row would pass
    ``max_rows`` or ``max_bytes``; ``release`` hands back (in arrival order) the rows a
    schema just brought.
    """

    max_rows: int
    max_bytes: int
    protocol: str = "simple"
    _rows: dict[SchemaKey, list[tuple[int, T, int]]] = field(default_factory=dict)
    count: int = 0
    bytes: int = 0
    _arrivals: int = 0

    def add(self, key: SchemaKey, row: T, size: int) -> None:
        if self.count + 1 > self.max_rows or self.bytes + size > self.max_bytes:
            raise ConfigError(self._overflow(key, size))
        self._arrivals += 1
        self._rows.setdefault(key, []).append((self._arrivals, row, size))
        self.count += 1
        self.bytes += size

    def release(self, keys: list[SchemaKey]) -> list[T]:
        """The rows held for any of ``keys``, in the order they arrived."""
        rows = [held for key in keys for held in self._rows.pop(key, ())]
        self.count -= len(rows)
        self.bytes -= sum(size for _, _, size in rows)
        return [row for _, row, _ in sorted(rows, key=lambda held: held[0])]

    def waiting(self) -> list[tuple[SchemaKey, int]]:
        """(schema key, rows held) for every schema still awaited."""
        return [(key, len(rows)) for key, rows in self._rows.items()]

    def __len__(self) -> int:
        return self.count

    def _overflow(self, key: SchemaKey, size: int) -> str:
        database, table, version = key
        return (
            f"{self.protocol}: holding {self.count} rows ({self.bytes} bytes) that wait for "
            f"their table schema; one more row of {database}.{table} (schema version "
            f"{version}, {size} bytes) would pass max-held-rows={self.max_rows} or "
            f"max-held-bytes={self.max_bytes}.  No BOOTSTRAP or DDL message has brought "
            f"{database}.{table} version {version} yet: raise the bounds (--option "
            "max-held-rows=N / max-held-bytes=N), or check that the producer sends bootstrap "
            "messages (send-bootstrap-interval-in-sec, send-bootstrap-in-msg-count)"
        )


def describe_waiting(waiting: list[tuple[SchemaKey, int]]) -> str:
    """Held rows in words, for an end-of-input report."""
    return "; ".join(f"{n} row(s) of {d}.{t} await schema version {v}" for (d, t, v), n in waiting)


def schema_key(database: Any, table: Any, version: Any) -> SchemaKey:
    return (database, table, version)
