"""Consuming a changelog the way TiCDC's reference consumer does, planned without Spark.

Per micro-batch the :class:`Planner` takes changelog rows (see :mod:`ticdc_spark.changelog`)
and works out what to apply, in order:

* **Watermarks.** Each topic-partition's resolved ts only moves forward; a row (or DDL)
  whose commit ts is below the watermark its partition had already reached when the row
  arrived is a replay and is dropped (TiCDC delivers at least once).
* **Consistency.** In ``consistent`` mode only changes at or below the *global* watermark (the
  minimum over all partitions) are released, so every applied state is a transaction-
  consistent snapshot of upstream; the rest wait in the state for a later batch.  In
  ``eventual`` mode everything is released at once.
* **DDL barriers.** Released changes are cut at each DDL: rows committed before it are
  applied, then the DDL, then the rows after it.  A DDL of one table (ALTER, TRUNCATE, ...)
  cuts only that table's rows; one that may touch several (schemas, renames) cuts all.
  Broadcast copies of one DDL count once.
* **Last change wins.** Within a segment each key keeps its last change by (commit ts,
  partition, offset); an UPDATE that changes the key deletes the old key and writes the new.
* **Floors.** TRUNCATE and DROP TABLE record their commit ts; older changes of that table
  arriving later are void.
* **Rows without a commit ts** (commit ts 0: an Avro tombstone, any Avro row without the TiDB
  extension, a genuine Debezium stream): for protocols without watermarks
  (``place_by_position``) rows are ordered by their partition position (see
  :meth:`Planner._place_by_position` and docs/pipeline.md "Rows without a commit ts").
* **Rows waiting for their schema** (Simple, a ``finisher``): the decode stage leaves a row
  whose schema version its task had not met as a *wire row*; the planner learns the schemas
  BOOTSTRAP and DDL messages bring into the state (``versions``), finishes the wire rows
  whose schema is known and holds the others, with every later change of their table, in
  the state until their schema comes (see :meth:`Planner._finish_wire_rows`).

The planner also keeps the table catalog: schemas from CREATE/ALTER statements when it sees
them, else from the schema JSON rows carry.  All of it (watermarks, held rows, catalog,
floors) is :class:`ConsumerState`, saved with each batch so a restart resumes exactly.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from ticdc_spark.changelog import (
    BOOTSTRAP,
    DDL,
    ERROR,
    ROW,
    WATERMARK,
    ChangelogBuilder,
    schema_from_json,
    schema_json,
)
from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.model import Column, DDLType, DefaultExpression, Index, TableSchema

__all__ = [
    "MAX_HELD_ROWS",
    "ConsumerState",
    "DDLStep",
    "HeldRowsExceeded",
    "Plan",
    "Planner",
    "TableChanges",
]

log = logging.getLogger(__name__)

TableKey = tuple[str, str]
# Release order.  The topic is left out: a key belongs to one table, so to one topic, and
# sorting on a string column is the costliest part of planning.  At one commit ts deletes go
# first (_RANK): a transaction changes a key once, except that TiCDC splits an update of a
# unique key into a DELETE and an INSERT of the same row, which the dispatcher may send to
# different partitions; the INSERT is the row's final state.
_RANK = "_rank"
_ORDER = ["commit_ts", _RANK, "partition", "offset", "seq"]


@dataclass
class ConsumerState:
    """Everything the consumer must remember between micro-batches."""

    watermarks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> ts
    tables: dict[TableKey, TableSchema] = field(default_factory=dict)
    floors: dict[TableKey, int] = field(default_factory=dict)
    applied_ts: int = 0  # the highest commit ts released so far
    held: Any = None  # pa.Table of changelog rows waiting for the global watermark
    ddl_seen: set[tuple[str, str, int, str]] = field(default_factory=set)
    carried: dict[TableKey, str] = field(default_factory=dict)  # last schema JSON rows carried
    partitions: set[str] = field(default_factory=set)  # every topic/partition seen
    # the commit ts of each table's last schema DDL: rows older than it carry an older
    # schema, whose extra columns (since dropped) must not come back
    schema_ts: dict[TableKey, int] = field(default_factory=dict)
    # partitions without watermarks (rows without a commit ts, see _place_by_position):
    # the latest place given per (topic/partition, database, table)
    positions: dict[tuple[str, str, str], int] = field(default_factory=dict)
    position_offsets: dict[str, int] = field(default_factory=dict)
    # the slots of ``positions`` whose last place is not a row's own commit ts
    placed_by_order: set[tuple[str, str, str]] = field(default_factory=set)
    # tables that follow their rows' schemas (see Planner._schema_runs): a digest of the
    # schema JSON each (topic/partition, database, table) last carried
    partition_schemas: dict[tuple[str, str, str], str] = field(default_factory=dict)
    # protocols whose rows name a schema version (Simple): the schemas BOOTSTRAP and DDL
    # messages brought, each as its protocol's finisher writes it; and for a version a DDL
    # brought as the table's new schema, that DDL's commit ts (see _forget_versions)
    versions: dict[tuple[str, str, int], str] = field(default_factory=dict)
    versions_since: dict[tuple[str, str, int], int] = field(default_factory=dict)

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
            }
        )

    @classmethod
    def from_json(cls, data: bytes, held: Any = None) -> ConsumerState:
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
    from ticdc_spark.types import parse_column_type

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


@dataclass
class TableChanges:
    """The final change per key of one table in one segment.

    ``rows`` columns: ``op`` (insert/update/delete), ``commit_ts``, ``image`` (after image, or
    the before image for deletes), ``key_only``, and the source position columns.
    """

    database: str
    table: str
    schema: TableSchema
    rows: Any


@dataclass
class DDLStep:
    """A DDL to apply, with the table's schema before and after it (None when unknown)."""

    database: str
    table: str
    commit_ts: int
    sql: str
    ddl_type: DDLType
    before: TableSchema | None
    after: TableSchema | None
    renamed_to: TableKey | None = None
    dropped: tuple[TableKey, ...] = ()
    renamed_columns: dict[str, str] = field(default_factory=dict)  # new name -> old name


@dataclass
class Plan:
    """What one micro-batch applies, in order, and what it learned."""

    steps: list[TableChanges | DDLStep] = field(default_factory=list)
    dead_letters: Any = None  # changelog ERROR rows plus rows that cannot be applied
    rows_in: int = 0
    rows_released: int = 0
    replays: int = 0
    held: int = 0
    awaiting_schema: int = 0  # of the held rows, those still waiting for their schema
    watermark: int = 0


# Rows kept for a later micro-batch (waiting for the watermark, or Simple's for their schema)
# live in the driver's memory and in the checkpoint: past this many, the batch stops (see
# Planner._check_held) instead of letting memory grow with a stalled partition.
MAX_HELD_ROWS = 1_000_000


class HeldRowsExceeded(ConfigError):
    """More rows held back than the pipeline's bound (``--max-held-rows``)."""


class Planner:
    """Plans micro-batches over a :class:`ConsumerState` (which it updates in place)."""

    def __init__(
        self,
        mode: str = "consistent",
        state: ConsumerState | None = None,
        partitions: Iterable[str] = (),
        *,
        rows_define_schema: bool = False,
        place_by_position: bool = False,
        finisher: Any = None,
        max_held_rows: int = MAX_HELD_ROWS,
    ) -> None:
        if mode not in ("consistent", "eventual"):
            raise ConfigError(f"mode must be consistent or eventual, not {mode!r}")
        self.mode = mode
        # protocols without DDL (Avro): a table follows the schemas its rows carry, in order
        self.rows_define_schema = rows_define_schema
        # protocols without watermarks (Avro): rows ordered by their partition position
        self.place_by_position = place_by_position
        # protocols whose rows wait for schemas other messages bring (Simple): the codec's
        # finisher of wire rows (codec.simple.pipeline.RowFinisher)
        self.finisher = finisher
        self.max_held_rows = max_held_rows
        self.state = state or ConsumerState()
        self.state.partitions |= set(partitions)
        self._schema_texts: list[str] = []
        self._images: Any = None
        self._carried: dict[tuple[str, str, str], TableSchema] = {}

    def plan(self, changelog: Any) -> Plan:
        """Plan one micro-batch of changelog rows (a pyarrow Table).

        Planning works on the narrow columns; the row images (the wide, costly part) are
        gathered once, for the rows each step applies and the rows held back.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        plan = Plan()
        held = self.state.held
        full = _concat([held, changelog]) if held is not None else changelog
        self._images = full.select(["before", "after"])
        narrow = full.drop_columns(["before", "after"]).append_column(
            "_row", pa.array(range(full.num_rows), pa.int64())
        )
        # Schema JSON is written in decode order, so number it before anything reorders rows.
        narrow = self._number_schemas(narrow)
        held_rows = held.num_rows if held is not None else 0
        pending_held, batch = narrow.slice(0, held_rows), narrow.slice(held_rows)
        is_error = pc.equal(batch["kind"], ERROR)
        errors = batch.filter(is_error) if pc.any(is_error).as_py() else None
        if errors is not None:
            batch = batch.filter(pc.invert(is_error))
        news = False  # (Simple: new schema versions, or new rows waiting for theirs)
        if self.finisher is not None:
            news = self._learn_versions(batch) or pc.any(_wire_rows(batch)).as_py() is True
        plan.rows_in = int(pc.sum(pc.equal(batch["kind"], ROW)).as_py() or 0)
        # No sort: a changelog keeps every partition's records in offset order, which is all
        # replay detection needs.
        batch, plan.replays = self._drop_replays(batch)
        if self.place_by_position:
            batch, replays = self._place_by_position(batch)
            plan.replays += replays
        self._learn_watermarks(batch)
        pending = _concat(
            [pending_held, batch.filter(pc.is_in(batch["kind"], pa.array([ROW, DDL, BOOTSTRAP])))]
        )
        awaiting = None
        if self.finisher is not None and pending.num_rows:
            if news:  # (else the rows held wait for versions still unknown, within bounds)
                pending, unfit = self._finish_wire_rows(pending)
                errors = _concat([errors, unfit])
            awaiting = self._awaiting_schema(pending)
            self._forget_versions()  # (after this batch's rows had every version)
        bound = self._release_bound()
        plan.watermark = self.state.global_watermark(self.state.partitions)
        ready_mask = pc.less_equal(pending["commit_ts"], bound)
        if awaiting is not None:
            ready_mask = pc.and_(ready_mask, pc.invert(awaiting))
        ready = pending.filter(ready_mask)
        held = self._hold(pending.filter(pc.invert(ready_mask)))
        self.state.held = held if held.num_rows else None
        plan.held = int(pc.sum(pc.equal(held["kind"], ROW)).as_py() or 0) if held.num_rows else 0
        if awaiting is not None and held.num_rows:
            plan.awaiting_schema = int(pc.sum(_wire_rows(held)).as_py() or 0)
        self._check_held(held, bound, plan.awaiting_schema)
        unusable = self._segments(ready, plan)
        plan.dead_letters = _concat([dead_letters(errors), unusable])
        if ready.num_rows:
            self.state.applied_ts = max(
                self.state.applied_ts, int(pc.max(ready["commit_ts"]).as_py() or 0)
            )
        return plan

    def _check_held(self, held: Any, bound: int, awaiting_schema: int) -> None:
        """Stop, naming why, when more rows are held back than ``max_held_rows``: rows wait
        for the partition furthest behind (consistent mode) or for their schema (Simple),
        and neither must grow the driver's memory without limit.  Raised before anything of
        the batch is applied or saved, so a restart with a higher bound resumes exactly."""
        if held.num_rows <= self.max_held_rows:
            return
        marks = self.state.watermarks
        behind = sorted(self.state.partitions, key=lambda p: marks.get(p, 0))[:3]
        lagging = ", ".join(f"{p} (watermark {marks.get(p, 0)})" for p in behind) or "none"
        schema = f"; {awaiting_schema} of them wait for their schema" if awaiting_schema else ""
        raise HeldRowsExceeded(
            f"{held.num_rows} rows are held back, more than the bound of {self.max_held_rows} "
            f"(--max-held-rows){schema}. Rows are released up to commit ts {bound}, the "
            f"lowest watermark of the partitions; furthest behind: {lagging}. A partition "
            "that sends no watermarks (a stalled changefeed, or a partition TiCDC does not "
            "write to) holds every other row back in consistent mode: check the changefeed, "
            "replicate with --mode eventual, or raise --max-held-rows (the held rows live in "
            "the driver's memory)"
        )

    def _with_images(self, rows: Any) -> Any:
        """Narrow rows with their before/after images attached again."""
        images = self._images.take(rows["_row"])
        return rows.append_column("before", images["before"]).append_column(
            "after", images["after"]
        )

    # -- schemas carried by rows ------------------------------------------------------------

    def _number_schemas(self, rows: Any) -> Any:
        """Give every row the number of the schema JSON in effect for its table.

        Rows carry their table's schema JSON only when it first appears or changes; a row
        without one has its table's previous one (from this batch or, before that, the last
        one remembered in the state).  Numbers index ``self._schema_texts``.
        """
        import pyarrow as pa

        texts: list[str] = []
        index: dict[str, int] = {}
        last: dict[TableKey, int] = {}
        for key, text in self.state.carried.items():
            index[text] = len(texts)
            last[key] = len(texts)
            texts.append(text)
        ids = _schema_numbers(_by_table(rows, "schema"), texts, index, last)
        self._schema_texts = texts
        self.state.carried = {key: texts[number] for key, number in last.items()}
        return rows.append_column("_schema_id", pa.array(ids, pa.int32()))

    def _hold(self, rows: Any) -> Any:
        """Rows kept for a later batch keep their schema text (numbers are per batch); DDL
        and bootstrap rows keep the schema they carried themselves."""
        import pyarrow as pa

        texts = [
            (self._schema_texts[i] if i >= 0 else None) if kind == ROW else own
            for kind, i, own in zip(
                rows["kind"].to_pylist(),
                rows["_schema_id"].to_pylist(),
                rows["schema"].to_pylist(),
                strict=True,
            )
        ]
        rows = rows.set_column(
            rows.schema.get_field_index("schema"), "schema", pa.array(texts, pa.string())
        )
        return self._with_images(rows).drop_columns(["_schema_id", "_row"])

    # -- watermarks -----------------------------------------------------------------------

    def _drop_replays(self, batch: Any) -> tuple[Any, int]:
        """Drop rows and DDLs committed below their partition's watermark at arrival."""
        import numpy as np
        import pyarrow as pa

        if not batch.num_rows:
            return batch, 0
        kinds = batch["kind"].to_pylist()
        parts = [
            f"{t}/{p}"
            for t, p in zip(batch["topic"].to_pylist(), batch["partition"].to_pylist(), strict=True)
        ]
        ts = batch["commit_ts"].to_numpy(zero_copy_only=False)
        keep = np.ones(len(kinds), dtype=bool)
        current = dict(self.state.watermarks)
        for i, (kind, part) in enumerate(zip(kinds, parts, strict=True)):
            mark = current.get(part, 0)
            if kind == WATERMARK:
                current[part] = max(mark, int(ts[i]))
            elif kind in (ROW, DDL) and ts[i] < mark:
                keep[i] = False
        dropped = int((~keep).sum())
        return (batch.filter(pa.array(keep)) if dropped else batch), dropped

    def _place_by_position(self, batch: Any) -> tuple[Any, int]:
        """Place rows by their partition position where there is no other order to go by
        (see docs/pipeline.md "Rows without a commit ts").

        Only on partitions that carry no watermarks.  Their rows carry no commit ts (Avro
        tombstones, Avro without the TiDB extension, genuine Debezium), or one that cannot
        order them against those.  Every row there gets a *place*, which the planner orders
        by (it replaces the row's commit ts), per (partition, table): its commit ts when that
        is above the previous place, or equal to it when that is the previous row's own
        commit ts (a transaction's rows share their place); else (no commit ts, a re-sent
        older change) the previous place + 1.  So places follow the partition order, and
        equal the commit ts where those already do; two changes share a place only within a
        transaction (a sink keeps a key's change only over an older place: a re-sent older
        change placed at the place of a newer one already applied would leave the re-sent
        changes after it out).  The
        rows of one key all go to one partition (TiCDC dispatches by key), so each key's
        changes apply in the order they were written; a record at or below the last offset
        consumed of its partition is a replay of the source and is dropped.
        """
        import numpy as np
        import pyarrow as pa

        if not batch.num_rows:
            return batch, 0
        kinds = batch["kind"].to_pylist()
        topics, partitions = batch["topic"].to_pylist(), batch["partition"].to_pylist()
        databases, tables = batch["database"].to_pylist(), batch["table"].to_pylist()
        offsets = batch["offset"].to_pylist()
        ts = batch["commit_ts"].to_numpy(zero_copy_only=False).copy()
        keep = np.ones(len(kinds), dtype=bool)
        marked, places = self.state.watermarks, self.state.positions
        by_order = self.state.placed_by_order
        consumed = self.state.position_offsets
        floor = dict(consumed)  # (the rows of one record share its offset)
        for i, kind in enumerate(kinds):
            part = f"{topics[i]}/{partitions[i]}"
            if kind != ROW or part in marked:
                continue
            if offsets[i] <= floor.get(part, -1):
                keep[i] = False
                continue
            consumed[part] = offsets[i]
            if ts[i] == 0 and self.mode == "consistent":
                raise ConfigError(
                    f"the row at {part}@{offsets[i]} ({databases[i]}.{tables[i]}) carries no "
                    "commit ts and its partition no watermarks (genuine Debezium?): no applied "
                    "state could be a consistent snapshot; replicate it with --mode eventual"
                )
            slot = (part, databases[i], tables[i])
            previous = places.get(slot, 0)
            if ts[i] == 0 or ts[i] < previous or (ts[i] == previous and slot in by_order):
                ts[i] = previous + 1  # (no commit ts, or a re-sent older change)
                by_order.add(slot)
            elif ts[i] > previous:
                by_order.discard(slot)
            places[slot] = int(ts[i])
        placed = batch.set_column(
            batch.schema.get_field_index("commit_ts"),
            "commit_ts",
            pa.array(ts, batch.schema.field("commit_ts").type),
        )
        dropped = int((~keep).sum())
        return (placed.filter(pa.array(keep)) if dropped else placed), dropped

    def _learn_watermarks(self, batch: Any) -> None:
        import pyarrow.compute as pc

        marks = batch.filter(pc.equal(batch["kind"], WATERMARK))
        for topic, partition, ts in zip(
            marks["topic"].to_pylist(),
            marks["partition"].to_pylist(),
            marks["commit_ts"].to_pylist(),
            strict=True,
        ):
            key = f"{topic}/{partition}"
            if ts >= self.state.watermarks.get(key, 0):
                self.state.watermarks[key] = ts
        for topic, partition in zip(
            batch["topic"].to_pylist(), batch["partition"].to_pylist(), strict=True
        ):
            self.state.partitions.add(f"{topic}/{partition}")

    def _release_bound(self) -> int:
        if self.mode == "eventual":
            return 2**63 - 1
        return self.state.global_watermark(self.state.partitions)

    # -- segments -------------------------------------------------------------------------

    def _segments(self, ready: Any, plan: Plan) -> Any:
        """Cut released rows at DDL barriers and plan each piece; returns unusable rows.

        A DDL of one table is a barrier for that table's rows only (the other tables' rows
        need not wait for it, and cutting them there would only add merges); a DDL that may
        touch several tables (schemas, renames, anything unrecognized) is a barrier for all.
        """
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        ready = _in_release_order(ready)
        kinds = ready["kind"]
        ddls = ready.filter(pc.equal(kinds, DDL))
        rows = ready.filter(pc.equal(kinds, ROW))
        self._learn_bootstraps(ready.filter(pc.equal(kinds, BOOTSTRAP)))
        plan.rows_released = rows.num_rows
        barriers = self._unique_ddls(ddls)
        flush = np.array(_flush_points(barriers, rows), dtype=np.int64)
        unusable = []
        for index in range(len(barriers) + 1):
            mask = flush == index
            if mask.any():
                unusable.append(self._plan_rows(rows.filter(pa.array(mask)), plan))
            if index < len(barriers):
                step = self._ddl_step(barriers[index])
                if step is not None:
                    plan.steps.append(step)
        return _concat(unusable)

    def _unique_ddls(self, ddls: Any) -> list[dict[str, Any]]:
        out = []
        for row in ddls.select(
            ["database", "table", "commit_ts", "sql", "ddl_type", "schema"]
        ).to_pylist():
            key = (row["database"] or "", row["table"] or "", row["commit_ts"], row["sql"] or "")
            if key in self.state.ddl_seen:
                continue
            self.state.ddl_seen.add(key)
            out.append(row)
        self._prune_ddl_seen()
        return out

    def _prune_ddl_seen(self) -> None:
        """Replays below every watermark are dropped anyway; forget DDLs older than that."""
        floor = self.state.global_watermark(self.state.partitions)
        if len(self.state.ddl_seen) > 256:
            self.state.ddl_seen = {k for k in self.state.ddl_seen if k[2] >= floor}

    def _learn_bootstraps(self, rows: Any) -> None:
        """A table the catalog does not know yet takes its BOOTSTRAP's schema.  (Only that:
        a bootstrap carries no commit ts, so it is released at once, possibly ahead of rows
        of an older version still held; a known table follows its DDLs and rows.)"""
        for row in rows.select(["database", "table", "schema"]).to_pylist():
            if row["schema"]:
                key = (row["database"], row["table"])
                if key not in self.state.tables:
                    self.state.tables[key] = self._schema_of(row["schema"], key)

    def _schema_of(self, text: str, key: TableKey) -> TableSchema:
        """The table schema of a ``schema`` JSON text: the whole schema (nullability,
        defaults, indexes) when the state holds its version (Simple's ``tableSchema``),
        else what the text says (names, types, key)."""
        cached = self._carried.get((text, *key))
        if cached is not None:
            return cached
        schema = schema_from_json(text, *key)
        if self.finisher is not None and schema.version:
            whole = self.state.versions.get((key[0], key[1], schema.version))
            if whole is not None:
                full = self.finisher.schema(whole)
                if full.column_names == schema.column_names:
                    schema = _renamed(full, key)
        self._carried[(text, *key)] = schema
        return schema

    # -- rows waiting for their schema (Simple) ----------------------------------------------

    def _learn_versions(self, batch: Any) -> bool:
        """Learn the schemas the batch's BOOTSTRAP and DDL messages bring (their rows keep the
        message) into the state's ``versions``; whether any was new."""
        import pyarrow as pa
        import pyarrow.compute as pc

        brings = pc.and_(
            pc.is_in(batch["kind"], pa.array([BOOTSTRAP, DDL])), pc.is_valid(batch["value"])
        )
        bringing = batch.filter(brings)
        known = len(self.state.versions)
        self.finisher.learn(bringing["value"].to_pylist(), self.state.versions)
        since = self.state.versions_since
        for row in bringing.select(
            ["kind", "database", "table", "commit_ts", "schema"]
        ).to_pylist():
            if row["kind"] == DDL and row["schema"]:
                version = int(orjson.loads(row["schema"]).get("version") or 0)
                key = (row["database"] or "", row["table"] or "", version)
                since[key] = min(row["commit_ts"], since.get(key, row["commit_ts"]))
        return len(self.state.versions) > known  # (learn only adds)

    def _forget_versions(self) -> None:
        """Forget the schema versions no row can need any more: those older than a version
        a DDL brought at or below the global watermark.  (Versions grow with a table's DDLs;
        a row of an older version was committed before that DDL, so below every partition's
        watermark: a replay, dropped as such.)"""
        mark = self.state.global_watermark(self.state.partitions)
        newest: dict[TableKey, int] = {}
        for (database, table, version), since in self.state.versions_since.items():
            if since <= mark:
                newest[(database, table)] = max(version, newest.get((database, table), version))
        if not newest:
            return
        for key in [k for k in self.state.versions if k[2] < newest.get(k[:2], -1)]:
            del self.state.versions[key]
            self.state.versions_since.pop(key, None)

    def _finish_wire_rows(self, pending: Any) -> tuple[Any, Any]:
        """Finish the wire rows whose schema the state knows: they become ordinary changelog
        rows (images, schema text); those that do not decode against it become dead letters.
        The finisher counts the rows still waiting against ``max-held-rows`` /
        ``max-held-bytes`` and stops past them, naming the table and the version awaited."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        wire = _wire_rows(pending)
        if not pc.any(wire).as_py():
            return pending, None
        waiting = pending.filter(wire)
        records = list(
            zip(
                waiting["value"].to_pylist(),
                waiting["topic"].to_pylist(),
                waiting["partition"].to_pylist(),
                waiting["offset"].to_pylist(),
                strict=True,
            )
        )
        finished, done = self.finisher.finish(records, self.state.versions, ChangelogBuilder())
        if not any(done):
            return pending, None
        finished = pa.Table.from_batches([finished])
        kinds = finished["kind"]
        unfit = finished.filter(pc.equal(kinds, ERROR))
        rows = self._numbered(finished.filter(pc.equal(kinds, ROW)))
        replaced = np.zeros(pending.num_rows, dtype=bool)
        replaced[np.flatnonzero(wire.to_numpy(zero_copy_only=False))[np.array(done)]] = True
        kept = pending.filter(pa.array(~replaced))
        return _concat([kept, rows.select(kept.column_names)]), unfit if unfit.num_rows else None

    def _numbered(self, rows: Any) -> Any:
        """Finished rows (whole changelog rows, in order) as planning rows: images added to
        the batch's, schema texts numbered (a null text: the table's previous row's)."""
        import pyarrow as pa

        first = self._images.num_rows
        self._images = _concat([self._images, rows.select(["before", "after"])])
        index = {text: number for number, text in enumerate(self._schema_texts)}
        ids = _schema_numbers(_by_table(rows, "schema"), self._schema_texts, index, {})
        narrow = rows.drop_columns(["before", "after"])
        narrow = narrow.append_column(
            "_row", pa.array(range(first, first + rows.num_rows), pa.int64())
        )
        return narrow.append_column("_schema_id", pa.array(ids, pa.int32()))

    def _awaiting_schema(self, pending: Any) -> Any:
        """Which pending rows wait, directly or not, for a schema still to come (None: none):
        the wire rows, every later change of their tables (a key's changes apply in order),
        and everything from a DDL that concerns every table on (a barrier for all)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        wire = _wire_rows(pending)
        if not pc.any(wire).as_py():
            return None
        first: dict[TableKey, int] = {}
        for key, ts in _by_table(pending.filter(wire), "commit_ts"):
            first[key] = min(ts, first.get(key, ts))
        earliest = min(first.values())
        ddls = pending.filter(pc.equal(pending["kind"], DDL))
        cut = min(
            (
                ddl["commit_ts"]
                for ddl in ddls.select(["table", "commit_ts", "sql", "ddl_type"]).to_pylist()
                if ddl["commit_ts"] >= earliest and not _one_table(ddl)
            ),
            default=None,
        )
        mask = np.zeros(pending.num_rows, dtype=bool)
        for i, (key, ts) in enumerate(_by_table(pending, "commit_ts")):
            mask[i] = ts >= first.get(key, 2**63) or (cut is not None and ts >= cut)
        return pa.array(mask)

    # -- rows -----------------------------------------------------------------------------

    def _plan_rows(self, rows: Any, plan: Plan) -> Any:
        """Add one TableChanges per table of a segment; returns rows that cannot apply."""
        import pyarrow.compute as pc

        unusable = []
        tables = rows.select(["database", "table"]).group_by(["database", "table"]).aggregate([])
        for database, table in zip(
            tables["database"].to_pylist(), tables["table"].to_pylist(), strict=True
        ):
            mask = pc.and_(pc.equal(rows["database"], database), pc.equal(rows["table"], table))
            part = rows.filter(mask)
            key = (database, table)
            part = self._above_floor(key, part)
            if not part.num_rows:
                continue
            runs = self._schema_runs(key, part) if self.rows_define_schema else [part]
            for run in runs:
                if isinstance(run, DDLStep):
                    plan.steps.append(run)
                    continue
                schema = self._table_schema(key, run)
                changes, bad = final_changes(self._with_images(run), schema)
                unusable.append(bad)
                if changes.num_rows:
                    plan.steps.append(TableChanges(database, table, schema, changes))
        return _concat(unusable)

    def _schema_runs(self, key: TableKey, rows: Any) -> Iterator[Any]:
        """A table's rows cut where the schema they carry changes, in order, with a schema
        step at each cut.

        For protocols that carry no DDL (Avro: each row carries its writer schema), a table
        follows its rows' schemas: columns added, widened or dropped between two rows become
        a :class:`DDLStep` (``after`` the new schema) between them.  DELETEs carry only the
        key and say nothing of the other columns: they never cut.

        Which of two schemas is the newer one: the one with the higher ``version`` when both
        have one (Avro: the registry's schema id, in the order schemas were registered);
        else the one a partition moved to from the other (the partitions of a topic are
        read at their own pace, and rows without a commit ts have only their partition's
        order).  A table moves to a newer schema only.  A row carrying an older one (written
        before the change, on a partition behind the others), or one with no order to go by
        (its partition's first), adds the columns the table lacks and changes nothing else:
        taking the table back would drop the columns newer rows filled.
        """
        import numpy as np

        ids = rows["_schema_id"].to_numpy(zero_copy_only=False)
        deletes = rows["op"].to_numpy(zero_copy_only=False) == "DELETE"
        stamps = rows["commit_ts"].to_pylist()
        topics, partitions = rows["topic"].to_pylist(), rows["partition"].to_pylist()
        carried_by = self.state.partition_schemas
        start = 0
        known = self.state.tables.get(key)
        # schema number -> (digest, schema, its JSON); JSON compared, once per row (cheap
        # string equality: rows of one schema share the text)
        parsed: dict[int, tuple[str, TableSchema, str]] = {}
        known_json = None if known is None else schema_json(known)
        for i in np.flatnonzero(~deletes & (ids >= 0)):
            number = int(ids[i])
            if number not in parsed:
                text = self._schema_texts[number]
                schema = self._schema_of(text, key)
                parsed[number] = (_digest(text), schema, schema_json(schema))
            digest, carried, carried_json = parsed[number]
            slot = (f"{topics[i]}/{partitions[i]}", *key)
            previous, carried_by[slot] = carried_by.get(slot), digest
            if known is None:
                known = self.state.tables[key] = carried
                known_json = carried_json
                continue
            if carried_json == known_json:
                continue
            if carried.version and known.version:
                newer = carried.version > known.version
            else:  # (schemas without versions: their partition's order)
                newer = previous not in (None, digest)
            if not newer:  # an older schema, or no order to go by: the columns it adds only
                carried = _with_new_columns(known, carried)
                if carried is known:
                    continue
            if i > start:
                yield rows.slice(start, i - start)
            start = int(i)
            sql = f"-- {key[0]}.{key[1]} follows the schema its rows carry"
            yield DDLStep(key[0], key[1], stamps[i], sql, DDLType.MODIFY_COLUMN, known, carried)
            known = self.state.tables[key] = carried
            known_json = schema_json(known)
        yield rows.slice(start)

    def _above_floor(self, key: TableKey, rows: Any) -> Any:
        import pyarrow.compute as pc

        floor = self.state.floors.get(key)
        if floor is None:
            return rows
        return rows.filter(pc.greater(rows["commit_ts"], floor))

    def _table_schema(self, key: TableKey, rows: Any) -> TableSchema:
        """The catalog schema, extended by columns the rows carry that it lacks."""
        import pyarrow.compute as pc

        number = pc.max(rows["_schema_id"]).as_py()
        carried = None
        if number is not None and number >= 0:
            carried = self._schema_of(self._schema_texts[number], key)
        known = self.state.tables.get(key)
        if known is None:
            if carried is None:
                raise TiCDCSparkError(f"no schema known for {key[0]}.{key[1]}")
            known = carried
        elif carried is not None and (not self.rows_define_schema or self.finisher is not None):
            # (Avro: _schema_runs moves the table. Simple: also here, as for DDL protocols: a
            # table bootstrapped at an older version than the DDLs that follow learns the
            # columns of the versions it missed from its rows, DELETEs included, which never
            # cut a run, before a DDL applies only its own statement)
            last_ddl = self.state.schema_ts.get(key, -1)
            if pc.max(rows["commit_ts"]).as_py() > last_ddl:  # (older rows: see schema_ts)
                known = _with_new_columns(known, carried)
        self.state.tables[key] = known
        return known

    # -- DDL --------------------------------------------------------------------------------

    def _ddl_step(self, row: dict[str, Any]) -> DDLStep | None:
        from ticdc_spark import ddl_schema as ddl_sql

        database, table, ts = row["database"] or "", row["table"] or "", row["commit_ts"]
        sql = row["sql"] or ""
        action = _action(row["ddl_type"], sql)
        key = (database, table)
        before = self.state.tables.get(key)
        step = DDLStep(database, table, ts, sql, action, before, before)
        text = row.get("schema")
        carried = self._schema_of(text, key) if text else None
        try:
            _apply_to_catalog(self.state, step, carried, ddl_sql)
        except TiCDCSparkError as exc:  # keep going: rows will carry the schema
            log.warning("cannot interpret DDL %r (%s); continuing with row schemas", sql, exc)
        return step


# DDLs that change one table only: a barrier for that table's rows and no other's.
_ONE_TABLE_DDLS = frozenset(
    (
        DDLType.CREATE_TABLE,
        DDLType.DROP_TABLE,
        DDLType.TRUNCATE_TABLE,
        DDLType.ADD_COLUMN,
        DDLType.DROP_COLUMN,
        DDLType.ADD_COLUMNS,
        DDLType.DROP_COLUMNS,
        DDLType.MODIFY_COLUMN,
        DDLType.SET_DEFAULT_VALUE,
        DDLType.ADD_INDEX,
        DDLType.DROP_INDEX,
        DDLType.DROP_INDEXES,
        DDLType.RENAME_INDEX,
        DDLType.ALTER_INDEX_VISIBILITY,
        DDLType.ADD_PRIMARY_KEY,
        DDLType.DROP_PRIMARY_KEY,
        DDLType.ACTION_MULTI_SCHEMA_CHANGE,
        DDLType.MODIFY_TABLE_COMMENT,
        DDLType.MODIFY_TABLE_CHARSET_AND_COLLATE,
        DDLType.ADD_TABLE_PARTITION,
        DDLType.DROP_TABLE_PARTITION,
        DDLType.TRUNCATE_TABLE_PARTITION,
    )
)


def _flush_points(barriers: list[dict[str, Any]], rows: Any) -> list[int]:
    """For each row, the index of the first barrier after it that concerns its table (rows
    at a DDL's own commit ts come after it), or ``len(barriers)``: apply it before that."""
    everyone: list[int] = []
    own: dict[TableKey, list[int]] = {}
    for index, ddl in enumerate(barriers):
        if _one_table(ddl):
            own.setdefault((ddl["database"] or "", ddl["table"]), []).append(index)
        else:
            everyone.append(index)
    concerning: dict[TableKey, tuple[list[int], list[int]]] = {}
    points = []
    for key, ts in _by_table(rows, "commit_ts"):
        cuts = concerning.get(key)
        if cuts is None:
            indexes = sorted(everyone + own.get(key, []))
            cuts = concerning[key] = ([barriers[i]["commit_ts"] for i in indexes], indexes)
        at = bisect.bisect_right(cuts[0], ts)
        points.append(cuts[1][at] if at < len(cuts[1]) else len(barriers))
    return points


def _schema_numbers(
    rows: Iterable[tuple[TableKey, str | None]],
    texts: list[str],
    index: dict[str, int],
    last: dict[TableKey, int],
) -> list[int]:
    """Each row's number in ``texts`` of the schema text in effect for its table: its own,
    else its table's previous row's (``last``; -1 when none).  New texts are appended to
    ``texts`` and ``index``."""
    numbers = []
    for key, text in rows:
        if text:
            number = index.get(text)
            if number is None:
                number = index[text] = len(texts)
                texts.append(text)
            last[key] = number
        numbers.append(last.get(key, -1))
    return numbers


def _one_table(ddl: dict[str, Any]) -> bool:
    """Whether a DDL row changes its own table only (a barrier for that table's rows)."""
    return bool(ddl["table"]) and _action(ddl["ddl_type"], ddl["sql"] or "") in _ONE_TABLE_DDLS


def _wire_rows(rows: Any) -> Any:
    """Which changelog rows are wire rows (a ROW still in its message: see changelog.py)."""
    import pyarrow.compute as pc

    return pc.and_(pc.equal(rows["kind"], ROW), pc.is_valid(rows["value"]))


def _by_table(rows: Any, column: str) -> Iterator[tuple[TableKey, Any]]:
    """Each row's table key (a null database or table as "") with its value in ``column``."""
    for database, table, value in zip(
        rows["database"].to_pylist(),
        rows["table"].to_pylist(),
        rows[column].to_pylist(),
        strict=True,
    ):
        yield (database or "", table or ""), value


DEAD_LETTER_FIELDS = ("topic", "partition", "offset", "error", "key", "value")


def final_changes(rows: Any, schema: TableSchema) -> tuple[Any, Any]:
    """The last change per key of one table's rows, and the rows that cannot be applied.

    Keys are the schema's handle key (all columns when the table has none).  An UPDATE that
    changes the key becomes a delete of the old key just before the update of the new one.
    A change that carries only key columns (handle-key-only large messages) can be applied
    only if it is a delete.  The result has ``op`` (insert/update/delete), ``commit_ts``,
    ``image`` (the after image, or the before image for deletes), ``key_only`` and the
    source position.  Keys are compared on narrow text columns; the images are gathered
    once, for the winners.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    key_columns = list(schema.handle_key) or list(schema.column_names)
    n = rows.num_rows
    ops = rows["op"]
    is_delete = pc.equal(ops, "DELETE").to_numpy(zero_copy_only=False)
    bad = np.asarray(rows["key_only"].to_numpy(zero_copy_only=False), dtype=bool) & ~is_delete
    # (whole arrays: a table's columns are chunked, and moved keys are concatenated below)
    before = [_whole(pc.map_lookup(rows["before"], k, "first")) for k in key_columns]
    after = [_whole(pc.map_lookup(rows["after"], k, "first")) for k in key_columns]
    moved = np.zeros(n, dtype=bool)
    is_update = pc.equal(ops, "UPDATE").to_numpy(zero_copy_only=False)
    for old, new in zip(before, after, strict=True):
        differs = pc.fill_null(pc.not_equal(old, new), pc.xor(pc.is_null(old), pc.is_null(new)))
        moved |= differs.to_numpy(zero_copy_only=False)
    # (an UPDATE without its before image, e.g. Debezium's old value off, is an upsert)
    has_before = _whole(pc.is_valid(rows["before"])).to_numpy(zero_copy_only=False)
    moved &= is_update & has_before & ~bad
    keep = ~bad
    mask = pa.array(is_delete)
    source = np.arange(n)[keep]
    keys = [
        pc.if_else(mask, old, new).filter(pa.array(keep))
        for old, new in zip(before, after, strict=True)
    ]
    moved_source = np.arange(n)[moved]
    # Every entry gets a distinct order: row i's change is i * width + width - 1, and the
    # deletes of moved keys take the slots below the first change of their commit ts (as
    # deletes go first, see _ORDER: a transaction moving key 1 to 2 and key 0 to 1 leaves
    # key 1 whatever the order its two updates arrive in).
    width = len(moved_source) + 1
    order = source * width + (width - 1)
    use_before = is_delete[keep]
    if len(moved_source):
        keys = [
            pa.concat_arrays([k, old.filter(pa.array(moved))])
            for k, old in zip(keys, before, strict=True)
        ]
        source = np.concatenate([source, moved_source])
        ts = rows["commit_ts"].to_numpy()
        first = np.searchsorted(ts, ts[moved_source]) if _is_sorted(ts) else moved_source
        order = np.concatenate([order, first * width + np.arange(len(moved_source))])
        use_before = np.concatenate([use_before, np.ones(len(moved_source), dtype=bool)])
    groups = pa.table(
        {**{f"k{i}": k for i, k in enumerate(keys)}, "_order": pa.array(order, pa.int64())}
    )
    last = groups.group_by([f"k{i}" for i in range(len(keys))], use_threads=False).aggregate(
        [("_order", "max")]
    )
    winners = np.sort(last["_order_max"].to_numpy())
    position = np.searchsorted(order, winners) if _is_sorted(order) else None
    if position is None:
        by_order = np.argsort(order, kind="stable")
        position = by_order[np.searchsorted(order[by_order], winners)]
    picked = source[position]
    final = rows.take(pa.array(picked))
    ops_final = np.where(
        use_before[position],
        "delete",
        np.where(
            pc.equal(final["op"], "INSERT").to_numpy(zero_copy_only=False), "insert", "update"
        ),
    )
    chosen = use_before[position]
    both = pa.concat_arrays([final["after"].combine_chunks(), final["before"].combine_chunks()])
    image = both.take(pa.array(np.arange(len(picked)) + chosen * len(picked)))
    final = pa.table(
        {
            "op": pa.array(ops_final, pa.string()),
            "commit_ts": final["commit_ts"],
            "image": image,
            "key_only": final["key_only"],
            "topic": final["topic"],
            "partition": final["partition"],
            "offset": final["offset"],
            "seq": final["seq"],
        }
    )
    reason = (
        "only the handle-key columns were sent (a large message); the full row must be "
        "read from upstream TiDB"
    )
    return final, dead_letters(rows.filter(pa.array(bad)), reason) if bad.any() else None


def _whole(values: Any) -> Any:
    """An Arrow array, its chunks combined if it is a chunked one."""
    import pyarrow as pa

    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _is_sorted(values: Any) -> bool:
    import numpy as np

    return bool(len(values) < 2 or np.all(values[:-1] <= values[1:]))


def dead_letters(rows: Any, reason: str | None = None) -> Any:
    """Rows in the dead-letter shape: topic, partition, offset, error, key, value."""
    import pyarrow as pa

    if rows is None or not rows.num_rows:
        return None
    n = rows.num_rows
    names = rows.column_names

    def column(name: str, arrow_type: Any) -> Any:
        return rows[name] if name in names else pa.nulls(n, arrow_type)

    error = pa.array([reason] * n, pa.string()) if reason else column("error", pa.string())
    return pa.table(
        {
            "topic": rows["topic"],
            "partition": rows["partition"],
            "offset": rows["offset"],
            "error": error,
            "key": column("key", pa.binary()),
            "value": column("value", pa.binary()),
        }
    )


def _digest(text: str) -> str:
    """A short stand-in for a schema JSON (the state keeps one per partition and table)."""
    import hashlib

    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _with_new_columns(known: TableSchema, carried: TableSchema) -> TableSchema:
    extra = tuple(c for c in carried.columns if known.get(c.name) is None)
    if not extra:
        return known
    return replace(
        known, columns=known.columns + extra, table_id=known.table_id or carried.table_id
    ).with_derived_flags()


def _action(name: str | None, sql: str) -> DDLType:
    from ticdc_spark.ddl import classify

    if name and name in DDLType.__members__:
        action = DDLType[name]
        if action is not DDLType.NONE:
            return action
    return classify(sql)


def _apply_to_catalog(
    state: ConsumerState, step: DDLStep, carried: TableSchema | None, ddl_sql: Any
) -> None:
    """Update the catalog and floors for a DDL, and fill in the step's schemas.

    ``carried``: the table's schema after the DDL when the protocol carries it (Simple's
    ``tableSchema``), which the catalog then takes over what the statement says."""
    key = (step.database, step.table)
    action = step.ddl_type
    if action is DDLType.CREATE_TABLE:
        created = carried or ddl_sql.parse_create_table(step.sql, step.database)
        if created is not None:
            state.tables[key] = _renamed(created, key)
    elif action in (DDLType.DROP_TABLE, DDLType.DROP_VIEW):
        step.dropped = (key,)
        state.tables.pop(key, None)
        state.floors[key] = step.commit_ts
    elif action is DDLType.TRUNCATE_TABLE:
        state.floors[key] = step.commit_ts
    elif action is DDLType.DROP_SCHEMA:
        step.dropped = tuple(k for k in state.tables if k[0] == step.database)
        for dropped in step.dropped:
            state.tables.pop(dropped, None)
            state.floors[dropped] = step.commit_ts
    elif action in (DDLType.RENAME_TABLE, DDLType.RENAME_TABLES):
        _rename(state, step, ddl_sql)
    elif step.before is not None and action in _ALTERS:
        _alter(state, step, key, carried, ddl_sql)
    if carried is not None and not step.dropped:
        state.tables[key] = carried
    step.after = state.tables.get(key)


def _alter(
    state: ConsumerState, step: DDLStep, key: TableKey, carried: TableSchema | None, ddl_sql: Any
) -> None:
    """ALTER TABLE, CREATE/DROP INDEX: the catalog's schema after it, and the columns it
    renames (read from the statement even when the protocol carries the schema after)."""
    try:
        if step.sql.lstrip()[:5].upper() == "ALTER":
            state.tables[key], step.renamed_columns = ddl_sql.alter_table(step.before, step.sql)
        else:  # CREATE INDEX / DROP INDEX ... ON t
            state.tables[key] = ddl_sql.apply_index_ddl(step.before, step.sql)
    except TiCDCSparkError:
        if carried is None:
            raise
    state.schema_ts[key] = max(state.schema_ts.get(key, -1), step.commit_ts)


_ALTERS = frozenset(
    (
        DDLType.ADD_COLUMN,
        DDLType.DROP_COLUMN,
        DDLType.MODIFY_COLUMN,
        DDLType.SET_DEFAULT_VALUE,
        DDLType.ADD_INDEX,
        DDLType.DROP_INDEX,
        DDLType.ADD_PRIMARY_KEY,
        DDLType.DROP_PRIMARY_KEY,
        DDLType.ACTION_MULTI_SCHEMA_CHANGE,
        DDLType.ADD_COLUMNS,
        DDLType.DROP_COLUMNS,
        DDLType.RENAME_INDEX,
    )
)


def _rename(state: ConsumerState, step: DDLStep, ddl_sql: Any) -> None:
    """RENAME TABLE: TiCDC sends one DDL per renamed table, named after the new table."""
    pairs = (
        ddl_sql.parse_rename_tables(step.sql)
        if step.sql.lstrip().upper().startswith("RENAME")
        else []
    )
    if not pairs:  # ALTER TABLE t RENAME TO u
        target = ddl_sql.ddl_target(step.sql, step.database)
        altered = state.tables.get(target)
        if altered is not None:
            renamed = ddl_sql.apply_alter_table(altered, step.sql)
            pairs = [(target, (renamed.database, renamed.table))]
    for (old_db, old_table), (new_db, new_table) in pairs:
        old = (old_db or step.database, old_table)
        new = (new_db or step.database, new_table)
        schema = state.tables.pop(old, None)
        if schema is not None:
            state.tables[new] = _renamed(schema, new)
            step.before, step.renamed_to = schema, new
            step.database, step.table = old
        state.floors[old] = step.commit_ts  # (a late row of the old name must not recreate it)
        state.floors.pop(new, None)


def _renamed(schema: TableSchema, key: TableKey) -> TableSchema:
    return replace(schema, database=key[0], table=key[1])


def _in_release_order(table: Any) -> Any:
    """Changelog rows sorted by :data:`_ORDER` (deletes first among equal commit ts)."""
    import pyarrow.compute as pc

    if table is None or not table.num_rows:
        return table
    rank = pc.fill_null(pc.not_equal(table["op"], "DELETE"), False).cast("int8")
    ranked = table.append_column(_RANK, rank)
    return ranked.sort_by([(c, "ascending") for c in _ORDER]).drop_columns([_RANK])


def _concat(tables: list[Any]) -> Any:
    import pyarrow as pa

    present = [t for t in tables if t is not None and t.num_rows]
    if not present:
        return next((t for t in tables if t is not None), None)
    if len(present) == 1:
        return present[0]
    return pa.concat_tables(present, promote_options="permissive")
