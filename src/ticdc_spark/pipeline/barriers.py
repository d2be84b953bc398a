"""Release order and DDL barriers: in which order released changes and DDLs are applied.

Released changes are applied in commit-ts order and cut at each DDL: rows committed before
it are applied, then the DDL, then the rows after it.  A DDL of one table (ALTER, TRUNCATE,
...) cuts only that table's rows; one that may touch several (schemas, renames, anything
unrecognized) cuts all.  Broadcast copies of one DDL (TiCDC sends a DDL to every partition)
count once.
"""

from __future__ import annotations

import bisect
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.model import DDLType
from ticdc_spark.pipeline.arrow import by_table
from ticdc_spark.pipeline.catalog import ddl_action
from ticdc_spark.pipeline.changelog import DELETE
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import TableKey

__all__ = ["flush_points", "in_release_order", "one_table", "unique_ddls"]

# Release order.  The topic is left out: a key belongs to one table, so to one topic, and
# sorting on a string column is the costliest part of planning.  At one commit ts deletes go
# first (_RANK): a transaction changes a key once, except that TiCDC splits an update of a
# unique key into a DELETE and an INSERT of the same row, which the dispatcher may send to
# different partitions; the INSERT is the row's final state.
_RANK = "_rank"
_ORDER = ["commit_ts", _RANK, "partition", "offset", "seq"]

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


def in_release_order(table: pa.Table) -> pa.Table:
    """Changelog rows sorted by commit ts, deletes first among equal ones, then position."""
    if table is None or not table.num_rows:
        return table
    rank = pc.fill_null(pc.not_equal(table["op"], DELETE), False).cast("int8")
    ranked = table.append_column(_RANK, rank)
    return ranked.sort_by([(c, "ascending") for c in _ORDER]).drop_columns([_RANK])


def one_table(ddl: dict[str, Any]) -> bool:
    """Whether a DDL row changes its own table only (a barrier for that table's rows)."""
    return bool(ddl["table"]) and ddl_action(ddl["ddl_type"], ddl["sql"] or "") in _ONE_TABLE_DDLS


def flush_points(barriers: list[dict[str, Any]], rows: pa.Table) -> list[int]:
    """For each row, the index of the first barrier after it that concerns its table (rows
    at a DDL's own commit ts come after it), or ``len(barriers)``: apply it before that."""
    everyone: list[int] = []
    own: dict[TableKey, list[int]] = {}
    for index, ddl in enumerate(barriers):
        if one_table(ddl):
            own.setdefault((ddl["database"] or "", ddl["table"]), []).append(index)
        else:
            everyone.append(index)
    concerning: dict[TableKey, tuple[list[int], list[int]]] = {}
    points = []
    for key, ts in by_table(rows, "commit_ts"):
        cuts = concerning.get(key)
        if cuts is None:
            indexes = sorted(everyone + own.get(key, []))
            cuts = concerning[key] = ([barriers[i]["commit_ts"] for i in indexes], indexes)
        at = bisect.bisect_right(cuts[0], ts)
        points.append(cuts[1][at] if at < len(cuts[1]) else len(barriers))
    return points


def unique_ddls(state: ConsumerState, ddls: pa.Table) -> list[dict[str, Any]]:
    """The DDL rows not applied before (broadcast copies and replays count once), as dicts;
    remembered in the state."""
    out = []
    for row in ddls.select(
        ["database", "table", "commit_ts", "sql", "ddl_type", "schema"]
    ).to_pylist():
        key = (row["database"] or "", row["table"] or "", row["commit_ts"], row["sql"] or "")
        if key in state.ddl_seen:
            continue
        state.ddl_seen.add(key)
        out.append(row)
    _prune_ddl_seen(state)
    return out


def _prune_ddl_seen(state: ConsumerState) -> None:
    """Replays below every watermark are dropped anyway; forget DDLs older than that."""
    floor = state.global_watermark(state.partitions)
    if len(state.ddl_seen) > 256:
        state.ddl_seen = {k for k in state.ddl_seen if k[2] >= floor}
