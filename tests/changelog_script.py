"""Changelogs written by hand, message by message (the apply tests' cases that a workload
rarely produces)."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from ticdc_spark.model import DDLEvent, DDLType, Watermark
from ticdc_spark.pipeline.changelog import ChangelogBuilder


def schema_json(columns: list[list[str]], pk: list[str]) -> str:
    """A changelog row's schema JSON: columns as [name, MySQL type], and the key."""
    return orjson.dumps({"columns": columns, "pk": pk}).decode()


ID_V = schema_json([["id", "int"], ["v", "varchar(10)"]], ["id"])
TWO_KEYS = schema_json([["a", "int"], ["b", "int"], ["v", "int"]], ["a", "b"])
NO_KEY = schema_json([["a", "int"], ["b", "varchar(10)"]], [])


class Script:
    """A changelog written by hand, message by message, each partition with its own offsets.
    ``table()`` is everything written so far (applying it again is a replay)."""

    def __init__(self) -> None:
        self.builder = ChangelogBuilder()
        self.offsets: dict[int, int] = {}
        self.batches: list[pa.RecordBatch] = []

    def _position(self, partition: int) -> tuple[str, int, int]:
        offset = self.offsets.get(partition, 0)
        self.offsets[partition] = offset + 1
        return "cdc", partition, offset

    def row(self, op: str, ts: int, before: Any, after: Any, p: int = 0, **kw: Any) -> Script:
        schema, table = kw.get("schema", ID_V), kw.get("table", "t")
        self.builder.append_row(op, "db", table, ts, before, after, schema, (*self._position(p), 0))
        return self

    def insert(self, ts: int, image: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("INSERT", ts, None, image, p, **kw)

    def update(self, ts: int, before: dict, after: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("UPDATE", ts, before, after, p, **kw)

    def delete(self, ts: int, image: dict, p: int = 0, **kw: Any) -> Script:
        return self.row("DELETE", ts, image, None, p, **kw)

    def ddl(self, ts: int, sql: str, kind: DDLType, table: str = "t") -> Script:
        self.builder.add_events([DDLEvent(kind, sql, ts, "db", table)], *self._position(0))
        return self

    def watermark(self, ts: int, *partitions: int) -> Script:
        for p in partitions:
            self.builder.add_events([Watermark(ts)], *self._position(p))
        return self

    def table(self) -> pa.Table:
        self.batches.append(self.builder.to_batch())  # (which starts the builder afresh)
        return pa.Table.from_batches(self.batches)
