"""Rows waiting for their schema (Simple): learned versions, finished rows, rows held back.

The decode stage leaves a row whose schema version its task had not met as a *wire row*
(images null, ``value`` the message; see :mod:`ticdc_spark.pipeline.changelog`).  The
planner learns the schemas BOOTSTRAP and DDL messages bring into the state (``versions``),
finishes the wire rows whose schema is known with the protocol's finisher, and holds the
others, with every later change of their table, in the state until their schema comes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.pipeline.arrow import by_table
from ticdc_spark.pipeline.barriers import one_table
from ticdc_spark.pipeline.capabilities import RowFinisher
from ticdc_spark.pipeline.changelog import BOOTSTRAP, DDL, ERROR, ROW, ChangelogBuilder
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import TableKey

__all__ = [
    "Finished",
    "awaiting_schema",
    "finish",
    "forget_versions",
    "learn_versions",
    "waiting_since",
    "wire",
]


def wire(rows: pa.Table) -> pa.BooleanArray:
    """Which changelog rows are wire rows (a ROW still in its message)."""
    return pc.and_(pc.equal(rows["kind"], ROW), pc.is_valid(rows["value"]))


def learn_versions(state: ConsumerState, finisher: RowFinisher, batch: pa.Table) -> bool:
    """Learn the schemas the batch's BOOTSTRAP and DDL messages bring (their rows keep the
    message) into the state's ``versions``; whether any was new."""
    brings = pc.and_(
        pc.is_in(batch["kind"], pa.array([BOOTSTRAP, DDL])), pc.is_valid(batch["value"])
    )
    bringing = batch.filter(brings)
    known = len(state.versions)
    finisher.learn(bringing["value"].to_pylist(), state.versions)
    since = state.versions_since
    for row in bringing.select(["kind", "database", "table", "commit_ts", "schema"]).to_pylist():
        if row["kind"] == DDL and row["schema"]:
            version = int(orjson.loads(row["schema"]).get("version") or 0)
            key = (row["database"] or "", row["table"] or "", version)
            since[key] = min(row["commit_ts"], since.get(key, row["commit_ts"]))
    return len(state.versions) > known  # (learn only adds)


def forget_versions(state: ConsumerState) -> None:
    """Forget the schema versions no row can need any more: those older than a version
    a DDL brought at or below the global watermark.  (Versions grow with a table's DDLs;
    a row of an older version was committed before that DDL, so below every partition's
    watermark: a replay, dropped as such.)"""
    mark = state.global_watermark(state.partitions)
    newest: dict[TableKey, int] = {}
    for (database, table, version), since in state.versions_since.items():
        if since <= mark:
            newest[(database, table)] = max(version, newest.get((database, table), version))
    if not newest:
        return
    for key in [k for k in state.versions if k[2] < newest.get(k[:2], -1)]:
        del state.versions[key]
        state.versions_since.pop(key, None)


class Finished(NamedTuple):
    """Pending rows once the wire rows whose schema is known are finished."""

    kept: pa.Table  # the pending rows but those finished
    rows: pa.Table  # the finished rows: whole changelog rows, in order
    unfit: pa.Table | None  # ERROR rows: wire rows that do not decode against their schema


def finish(state: ConsumerState, finisher: RowFinisher, pending: pa.Table) -> Finished | None:
    """Finish the wire rows whose schema the state knows (None: there are none).  The
    finisher counts the rows still waiting against ``max-held-rows`` / ``max-held-bytes``
    and stops past them, naming the table and the version awaited."""
    mask = wire(pending)
    if not pc.any(mask).as_py():
        return None
    waiting = pending.filter(mask)
    records = list(
        zip(
            waiting["value"].to_pylist(),
            waiting["topic"].to_pylist(),
            waiting["partition"].to_pylist(),
            waiting["offset"].to_pylist(),
            strict=True,
        )
    )
    batch, done = finisher.finish(records, state.versions, ChangelogBuilder())
    if not any(done):
        return None
    finished = pa.Table.from_batches([batch])
    kinds = finished["kind"]
    unfit = finished.filter(pc.equal(kinds, ERROR))
    replaced = np.zeros(pending.num_rows, dtype=bool)
    replaced[np.flatnonzero(mask.to_numpy(zero_copy_only=False))[np.array(done)]] = True
    return Finished(
        pending.filter(pa.array(~replaced)),
        finished.filter(pc.equal(kinds, ROW)),
        unfit if unfit.num_rows else None,
    )


def waiting_since(pending: pa.Table) -> dict[TableKey, int]:
    """Per table, the earliest commit ts of its pending wire rows (those still waiting for
    their schema)."""
    mask = wire(pending)
    first: dict[TableKey, int] = {}
    if not pc.any(mask).as_py():
        return first
    for key, ts in by_table(pending.filter(mask), "commit_ts"):
        first[key] = min(ts, first.get(key, ts))
    return first


def awaiting_schema(
    pending: pa.Table, first: dict[TableKey, int] | None = None
) -> pa.BooleanArray | None:
    """Which pending rows wait, directly or not, for a schema still to come (None: none):
    the wire rows, every later change of their tables (a key's changes apply in order),
    and everything from a DDL that concerns every table on (a barrier for all).  ``first``:
    :func:`waiting_since` of every table (planning by parts: of other parts' rows too),
    else of ``pending``'s."""
    first = waiting_since(pending) if first is None else first
    if not first:
        return None
    earliest = min(first.values())
    ddls = pending.filter(pc.equal(pending["kind"], DDL))
    cut = min(
        (
            ddl["commit_ts"]
            for ddl in ddls.select(["table", "commit_ts", "sql", "ddl_type"]).to_pylist()
            if ddl["commit_ts"] >= earliest and not one_table(ddl)
        ),
        default=None,
    )
    waits = np.zeros(pending.num_rows, dtype=bool)
    for i, (key, ts) in enumerate(by_table(pending, "commit_ts")):
        waits[i] = ts >= first.get(key, 2**63) or (cut is not None and ts >= cut)
    return pa.array(waits)
