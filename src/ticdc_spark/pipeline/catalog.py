"""The table catalog: what each DDL does to the schemas the consumer knows.

CREATE TABLE adds a table (from the statement, or from the schema a protocol carries with
it, which wins); ALTER TABLE and CREATE/DROP INDEX change it; RENAME moves it; DROP and
TRUNCATE set the table's *floor* (its changes committed before are void, so a late one
cannot bring rows back).  A statement the SQL readers cannot follow is logged and skipped:
the rows that follow carry their schema.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.model import DDLType, TableSchema
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import DDLStep, TableKey
from ticdc_spark.sql import (
    alter_table,
    apply_alter_table,
    apply_index_ddl,
    ddl_target,
    parse_create_table,
    parse_rename_tables,
)
from ticdc_spark.sql.classification import classify

__all__ = ["ddl_action", "ddl_step", "renamed", "with_new_columns"]

log = logging.getLogger(__name__)

# DDLs that change a table's columns or indexes in place (ALTER TABLE, CREATE/DROP INDEX)
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


def ddl_action(name: str | None, sql: str) -> DDLType:
    """A DDL's action: TiDB's action name when the protocol sent one, else the statement's."""
    if name and name in DDLType.__members__:
        action = DDLType[name]
        if action is not DDLType.NONE:
            return action
    return classify(sql)


def ddl_step(state: ConsumerState, row: dict[str, Any], carried: TableSchema | None) -> DDLStep:
    """The step of a changelog DDL row, the catalog updated by it.

    ``carried``: the table's schema after the DDL when the protocol carries it (Simple's
    ``tableSchema``), which the catalog then takes over what the statement says."""
    database, table, ts = row["database"] or "", row["table"] or "", row["commit_ts"]
    sql = row["sql"] or ""
    before = state.tables.get((database, table))
    step = DDLStep(database, table, ts, sql, ddl_action(row["ddl_type"], sql), before, before)
    try:
        _apply_to_catalog(state, step, carried)
    except TiCDCSparkError as exc:  # keep going: rows will carry the schema
        log.warning("cannot interpret DDL %r (%s); continuing with row schemas", sql, exc)
    return step


def _apply_to_catalog(state: ConsumerState, step: DDLStep, carried: TableSchema | None) -> None:
    """Update the catalog and floors for a DDL, and fill in the step's schemas."""
    key = (step.database, step.table)
    action = step.ddl_type
    if action is DDLType.CREATE_TABLE:
        created = carried or parse_create_table(step.sql, step.database)
        if created is not None:
            state.tables[key] = renamed(created, key)
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
        _rename(state, step)
    elif step.before is not None and action in _ALTERS:
        _alter(state, step, step.before, carried)
    if carried is not None and not step.dropped:
        state.tables[key] = carried
    step.after = state.tables.get(key)


def _alter(
    state: ConsumerState, step: DDLStep, before: TableSchema, carried: TableSchema | None
) -> None:
    """ALTER TABLE, CREATE/DROP INDEX: the catalog's schema after it, and the columns it
    renames (read from the statement even when the protocol carries the schema after)."""
    key = (step.database, step.table)
    try:
        if step.sql.lstrip()[:5].upper() == "ALTER":
            state.tables[key], step.renamed_columns = alter_table(before, step.sql)
        else:  # CREATE INDEX / DROP INDEX ... ON t
            state.tables[key] = apply_index_ddl(before, step.sql)
    except TiCDCSparkError:
        if carried is None:
            raise
    state.schema_ts[key] = max(state.schema_ts.get(key, -1), step.commit_ts)


def _rename(state: ConsumerState, step: DDLStep) -> None:
    """RENAME TABLE: TiCDC sends one DDL per renamed table, named after the new table."""
    pairs = parse_rename_tables(step.sql) if step.sql.lstrip().upper().startswith("RENAME") else []
    if not pairs:  # ALTER TABLE t RENAME TO u
        target = ddl_target(step.sql, step.database)
        altered = state.tables.get(target)
        if altered is not None:
            moved = apply_alter_table(altered, step.sql)
            pairs = [(target, (moved.database, moved.table))]
    for (old_db, old_table), (new_db, new_table) in pairs:
        old = (old_db or step.database, old_table)
        new = (new_db or step.database, new_table)
        schema = state.tables.pop(old, None)
        if schema is not None:
            state.tables[new] = renamed(schema, new)
            step.before, step.renamed_to = schema, new
            step.database, step.table = old
        state.floors[old] = step.commit_ts  # (a late row of the old name must not recreate it)
        state.floors.pop(new, None)


def renamed(schema: TableSchema, key: TableKey) -> TableSchema:
    """The schema under another (database, table) name."""
    return replace(schema, database=key[0], table=key[1])


def with_new_columns(known: TableSchema, carried: TableSchema) -> TableSchema:
    """``known`` plus the columns ``carried`` has that it lacks (``known`` itself if none)."""
    extra = tuple(c for c in carried.columns if known.get(c.name) is None)
    if not extra:
        return known
    return replace(
        known, columns=known.columns + extra, table_id=known.table_id or carried.table_id
    ).with_derived_flags()
