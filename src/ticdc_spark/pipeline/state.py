"""The consumer state: everything the planner must remember between micro-batches.

Saved with each micro-batch (:class:`~ticdc_spark.pipeline.checkpoint.StateStore`) so that a
restart resumes exactly: watermarks, the rows held for a later batch, the table catalog, the
floors below which a table's changes are void, the DDLs already applied, the guards against
late changes older than a delete (:mod:`~ticdc_spark.pipeline.guards`), and what the
ordering of rows without a commit ts and the schemas rows carry need to go on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa

from ticdc_spark.model import (
    Column,
    DefaultExpression,
    Index,
    TableSchema,
    schema_from_json,
)
from ticdc_spark.pipeline.guards import Guards
from ticdc_spark.pipeline.steps import TableKey
from ticdc_spark.types import parse_column_type

__all__ = ["ConsumerState", "PartitionTable", "SchemaVersion"]

# (topic/partition, database, table): the slots of place-by-position and carried schemas
PartitionTable = tuple[str, str, str]
# (database, table, version): a schema version a protocol's messages bring (Simple)
SchemaVersion = tuple[str, str, int]


@dataclass
class ConsumerState:
    """Everything the consumer must remember between micro-batches."""

    watermarks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> ts
    tables: dict[TableKey, TableSchema] = field(default_factory=dict)
    floors: dict[TableKey, int] = field(default_factory=dict)
    applied_ts: int = 0  # the highest commit ts released so far
    held: pa.Table | None = None  # changelog rows kept for a later batch (see Planner)
    ddl_seen: set[tuple[str, str, int, str]] = field(default_factory=set)
    carried: dict[TableKey, str] = field(default_factory=dict)  # last schema JSON rows carried
    partitions: set[str] = field(default_factory=set)  # every topic/partition seen
    # the commit ts of each table's last schema DDL: rows older than it carry an older
    # schema, whose extra columns (since dropped) must not come back
    schema_ts: dict[TableKey, int] = field(default_factory=dict)
    # partitions without watermarks (rows without a commit ts, see ordering.place_by_position):
    # the latest place given per (topic/partition, database, table)
    positions: dict[PartitionTable, int] = field(default_factory=dict)
    position_offsets: dict[str, int] = field(default_factory=dict)
    # the slots of ``positions`` whose last place is not a row's own commit ts
    placed_by_order: set[PartitionTable] = field(default_factory=set)
    # tables that follow their rows' schemas (see schemas.RowSchemas.runs): a digest of the
    # schema JSON each (topic/partition, database, table) last carried
    partition_schemas: dict[PartitionTable, str] = field(default_factory=dict)
    # protocols whose rows name a schema version (Simple): the schemas BOOTSTRAP and DDL
    # messages brought, each as its protocol's finisher writes it; and for a version a DDL
    # brought as the table's new schema, that DDL's commit ts (see wire_rows.forget_versions)
    versions: dict[SchemaVersion, str] = field(default_factory=dict)
    versions_since: dict[SchemaVersion, int] = field(default_factory=dict)
    # per table and key, the newest delete applied while older changes may still arrive
    guards: Guards = field(default_factory=Guards)
    # planning by parts (pipeline.planning.PartsPlanning): where its runner keeps the rows
    # held back and the guards (not in ``held`` and ``guards``), and the floor the guards
    # are collected by when next read
    parts: dict[str, Any] = field(default_factory=dict)

    def global_watermark(self, partitions: Iterable[str] = ()) -> int:
        """The minimum resolved ts over all known partitions (0 if one has none yet)."""
        known = set(self.watermarks) | set(partitions)
        if not known:
            return 0
        return min(self.watermarks.get(p, 0) for p in known)

    # -- persistence ------------------------------------------------------------------------

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "watermarks": self.watermarks,
                "catalog": [[db, t, _catalog_entry(s)] for (db, t), s in self.tables.items()],
                "floors": [[db, t, ts] for (db, t), ts in self.floors.items()],
                "applied_ts": self.applied_ts,
                "ddl_seen": sorted(self.ddl_seen),
                "carried": [[db, t, text] for (db, t), text in self.carried.items()],
                "partitions": sorted(self.partitions),
                "schema_ts": [[db, t, ts] for (db, t), ts in self.schema_ts.items()],
                # how many rows the held file beside it must hold (a lost file is noticed)
                "held_rows": 0 if self.held is None else self.held.num_rows,
                "guards": self.guards.count(),  # (likewise, of the guards file)
                "positions": [[p, db, t, v] for (p, db, t), v in self.positions.items()],
                "position_offsets": self.position_offsets,
                "placed_by_order": sorted(self.placed_by_order),
                "partition_schemas": [
                    [p, db, t, text] for (p, db, t), text in self.partition_schemas.items()
                ],
                "versions": [[db, t, v, text] for (db, t, v), text in self.versions.items()],
                "versions_since": [
                    [db, t, v, ts] for (db, t, v), ts in self.versions_since.items()
                ],
                "parts": self.parts,
            }
        )

    @classmethod
    def from_json(
        cls, data: bytes, held: pa.Table | None = None, guards: Guards | None = None
    ) -> ConsumerState:
        obj = orjson.loads(data)
        return cls(
            watermarks={str(k): int(v) for k, v in obj["watermarks"].items()},
            tables={
                (db, t): _catalog_schema(entry, db, t) for db, t, entry in obj.get("catalog", [])
            }
            # (states saved before the catalog was: the changelog's schema JSON)
            or {(db, t): schema_from_json(js, db, t) for db, t, js in obj.get("tables", [])},
            floors={(db, t): int(ts) for db, t, ts in obj["floors"]},
            applied_ts=int(obj["applied_ts"]),
            held=held,
            ddl_seen={(a, b, int(c), d) for a, b, c, d in obj["ddl_seen"]},
            carried={(db, t): text for db, t, text in obj.get("carried", [])},
            partitions=set(obj.get("partitions", [])),
            schema_ts={(db, t): int(ts) for db, t, ts in obj.get("schema_ts", [])},
            positions={(p, db, t): int(v) for p, db, t, v in obj.get("positions", [])},
            position_offsets={str(k): int(v) for k, v in obj.get("position_offsets", {}).items()},
            placed_by_order={(p, db, t) for p, db, t in obj.get("placed_by_order", [])},
            partition_schemas={
                (p, db, t): text for p, db, t, text in obj.get("partition_schemas", [])
            },
            versions={(db, t, int(v)): str(text) for db, t, v, text in obj.get("versions", [])},
            versions_since={
                (db, t, int(v)): int(ts) for db, t, v, ts in obj.get("versions_since", [])
            },
            guards=guards or Guards(),
            parts=dict(obj.get("parts", {})),
        )


def _catalog_entry(schema: TableSchema) -> dict[str, Any]:
    """A catalog schema as the consumer state keeps it: everything DDLs work from (the
    changelog's schema JSON keeps only names, types and the handle key)."""
    return {
        "columns": [
            [
                c.name,
                c.type.sql(),
                c.nullable,
                c.default,
                isinstance(c.default, DefaultExpression),
                c.generated,
            ]
            for c in schema.columns
        ],
        "indexes": [
            [i.name, list(i.columns), i.primary, i.unique, i.nullable] for i in schema.indexes
        ],
        "tableId": schema.table_id,
        "version": schema.version,
        "virtual": list(schema.virtual_columns),
    }


def _catalog_schema(entry: dict[str, Any], database: str, table: str) -> TableSchema:
    columns = tuple(
        Column(
            name,
            parse_column_type(sql),
            nullable,
            DefaultExpression(default) if expression else default,
            generated,
        )
        for name, sql, nullable, default, expression, generated in entry["columns"]
    )
    indexes = tuple(
        Index(name, tuple(names), primary, unique, nullable)
        for name, names, primary, unique, nullable in entry["indexes"]
    )
    return TableSchema(
        database,
        table,
        columns,
        indexes,
        int(entry["tableId"]),
        int(entry["version"]),
        tuple(entry.get("virtual", ())),  # (states saved before virtual columns were kept)
    ).with_derived_flags()
