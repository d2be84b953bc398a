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
    schema_from_json,
    schema_json,
)
from ticdc_spark.errors import ConfigError, TiCDCSparkError
from ticdc_spark.model import Column, DDLType, DefaultExpression, Index, TableSchema

__all__ = ["ConsumerState", "DDLStep", "Plan", "Planner", "TableChanges"]

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
    watermark: int = 0


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
    ) -> None:
        if mode not in ("consistent", "eventual"):
            raise ConfigError(f"mode must be consistent or eventual, not {mode!r}")
        self.mode = mode
        # protocols without DDL (Avro): a table follows the schemas its rows carry, in order
        self.rows_define_schema = rows_define_schema
        # protocols without watermarks (Avro): rows ordered by their partition position
        self.place_by_position = place_by_position
        self.state = state or ConsumerState()
        self.state.partitions |= set(partitions)
        self._schema_texts: list[str] = []
        self._images: Any = None

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
        bound = self._release_bound()
        plan.watermark = self.state.global_watermark(self.state.partitions)
        ready_mask = pc.less_equal(pending["commit_ts"], bound)
        ready = pending.filter(ready_mask)
        held = self._hold(pending.filter(pc.invert(ready_mask)))
        self.state.held = held if held.num_rows else None
        plan.held = int(pc.sum(pc.equal(held["kind"], ROW)).as_py() or 0) if held.num_rows else 0
        unusable = self._segments(ready, plan)
        plan.dead_letters = _concat([dead_letters(errors), unusable])
        if ready.num_rows:
            self.state.applied_ts = max(
                self.state.applied_ts, int(pc.max(ready["commit_ts"]).as_py() or 0)
            )
        return plan

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
        ids = []
        for key, text in _by_table(rows, "schema"):
            if text:
                number = index.get(text)
                if number is None:
                    number = index[text] = len(texts)
                    texts.append(text)
                last[key] = number
            ids.append(last.get(key, -1))
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
        by (it replaces the row's commit ts), per (partition, table): a row without a commit
        ts the previous place + 1; a row with one its commit ts, but never below the previous
        place (a re-sent older change: at the previous place, after it since at one place
        deletes go first; a re-sent older DELETE at the previous place + 1).  So places
        follow the partition order, and equal the commit ts where those already do.  The
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
        offsets, ops = batch["offset"].to_pylist(), batch["op"].to_pylist()
        ts = batch["commit_ts"].to_numpy(zero_copy_only=False).copy()
        keep = np.ones(len(kinds), dtype=bool)
        marked, places = self.state.watermarks, self.state.positions
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
            if ts[i] == 0 or (ts[i] < previous and ops[i] == "DELETE"):
                ts[i] = previous + 1
            elif ts[i] < previous:
                ts[i] = previous  # (at one place deletes go first: this row stays after)
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
        for row in rows.select(["database", "table", "schema"]).to_pylist():
            if row["schema"]:
                key = (row["database"], row["table"])
                self.state.tables[key] = schema_from_json(row["schema"], *key)

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
        """
        import numpy as np

        ids = rows["_schema_id"].to_numpy(zero_copy_only=False)
        deletes = rows["op"].to_numpy(zero_copy_only=False) == "DELETE"
        stamps = rows["commit_ts"].to_pylist()
        start = 0
        known = self.state.tables.get(key)
        for i in np.flatnonzero(~deletes & (ids >= 0)):
            carried = schema_from_json(self._schema_texts[ids[i]], *key)
            if known is None:
                known = self.state.tables[key] = carried
            elif schema_json(carried) != schema_json(known):
                if i > start:
                    yield rows.slice(start, i - start)
                start = int(i)
                sql = f"-- {key[0]}.{key[1]} follows the schema its rows carry"
                yield DDLStep(key[0], key[1], stamps[i], sql, DDLType.MODIFY_COLUMN, known, carried)
                known = self.state.tables[key] = carried
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
            carried = schema_from_json(self._schema_texts[number], *key)
        known = self.state.tables.get(key)
        if known is None:
            if carried is None:
                raise TiCDCSparkError(f"no schema known for {key[0]}.{key[1]}")
            known = carried
        elif carried is not None:
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
        try:
            _apply_to_catalog(self.state, step, row.get("schema"), ddl_sql)
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
        table = ddl["table"] or ""
        if table and _action(ddl["ddl_type"], ddl["sql"] or "") in _ONE_TABLE_DDLS:
            own.setdefault((ddl["database"] or "", table), []).append(index)
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
    moved &= is_update & ~bad
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
    state: ConsumerState, step: DDLStep, schema_text: str | None, ddl_sql: Any
) -> None:
    """Update the catalog and floors for a DDL, and fill in the step's schemas."""
    key = (step.database, step.table)
    action = step.ddl_type
    if schema_text:  # the protocol carried the schema after the DDL (Simple)
        state.tables[key] = schema_from_json(schema_text, *key)
    elif action is DDLType.CREATE_TABLE:
        created = ddl_sql.parse_create_table(step.sql, step.database)
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
        if step.sql.lstrip()[:5].upper() == "ALTER":
            state.tables[key], step.renamed_columns = ddl_sql.alter_table(step.before, step.sql)
        else:  # CREATE INDEX / DROP INDEX ... ON t
            state.tables[key] = ddl_sql.apply_index_ddl(step.before, step.sql)
        state.schema_ts[key] = max(state.schema_ts.get(key, -1), step.commit_ts)
    step.after = state.tables.get(key)


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
