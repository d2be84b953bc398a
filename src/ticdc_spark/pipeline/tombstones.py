"""Tables written with tombstones by earlier versions, made live once at the pipeline's start.

Before live tables a delete left its row in the table with ``_op = 'delete'`` (a
*tombstone*), which kept an older change arriving late from writing the row again, and every
reader had to filter.  At start, before recovery, each table that still has ``_op`` (and is
no changelog table) is migrated:

1. its tombstones become guards (:mod:`~ticdc_spark.pipeline.guards`) in each saved consumer
   state that reads whole (the newest, and the older ones a micro-batch run again would
   start from), which is saved (the guards that state's watermarks or retention already
   make unnecessary are collected first; where the protocol keeps no guards, nothing is
   added);
2. then the sink deletes the tombstones and drops ``_op``
   (:meth:`~ticdc_spark.sinks.base.TableSink.drop_tombstones`), and one line is logged.

Killed anywhere, the next start does it again: the guards of a table already in the state
are added again without change (each key keeps its newest), and a table already migrated has
no ``_op`` any more.  The cost is one rewrite per table, once: Delta rewrites the whole
table (delta-rs cannot drop a column in place); Iceberg rewrites the data files holding
tombstones and drops the column in its metadata.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pyarrow as pa

from ticdc_spark.codec.convert import NORMALIZED
from ticdc_spark.errors import DamagedState
from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline import ordering
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.pipeline.failpoints import crash_point
from ticdc_spark.pipeline.guards import encode_keys
from ticdc_spark.pipeline.last_change import key_names
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.pipeline.steps import TableKey
from ticdc_spark.sinks.convert import COMMIT_TS
from ticdc_spark.types import Family

if TYPE_CHECKING:
    from ticdc_spark.pipeline.apply import Applier

__all__ = ["migrate_tombstones"]

log = logging.getLogger(__name__)

# Key columns whose stored text is the changelog's already (integers, strings), and ENUM and
# SET, stored as member names, which the normalized form cannot read back (the changelog
# carries names, or numbers where a protocol sends those: such a key's guard may not match).
_AS_STORED = frozenset((Family.INTEGER, Family.STRING, Family.ENUM, Family.SET))


def migrate_tombstones(applier: Applier) -> list[TableKey]:
    """Migrate every table of ``applier``'s sink that has tombstones (see the module's
    doc); the tables migrated."""
    sink = applier.sink
    states = _readable_states(applier.store) if applier.capabilities.keeps_guards else {}
    migrated = []
    for key in sink.tables():
        dead = sink.tombstones(key)
        if dead is None:
            continue
        kept = _keep_as_guards(applier, states, key, dead)
        crash_point("tombstones")
        sink.drop_tombstones(key)
        log.info(
            "%s.%s: %d tombstones (rows an earlier version kept for deletes) deleted and _op "
            "dropped; %d kept as guards in the consumer state",
            *key,
            dead.num_rows,
            kept,
        )
        migrated.append(key)
    return migrated


def _readable_states(store: StateStore) -> dict[int, ConsumerState]:
    """Every saved state that reads whole: each gets the guards, since a micro-batch Spark
    runs again starts from the state before it, not from the newest (a damaged one is
    rebuilt at recovery from an older one, which has them)."""
    states = {}
    for batch in store.saved():
        try:
            states[batch] = store.read(batch)
        except DamagedState:
            continue
    return states


def _keep_as_guards(
    applier: Applier, states: dict[int, ConsumerState], key: TableKey, dead: pa.Table
) -> int:
    """Add a table's tombstones to the guards of each state, collect those already
    unnecessary, check the bound and save it (before anything is deleted); how many guards
    the table has in the newest."""
    kept = 0
    if applier.capabilities.keeps_guards and not states and dead.num_rows:
        log.warning("%s.%s: no consumer state to keep its tombstones in as guards", *key)
    for batch, state in sorted(states.items()):
        schema = state.tables.get(key)
        if schema is None:
            log.warning("%s.%s: not in batch %d's catalog: no guards there", key[0], key[1], batch)
            continue
        names = key_names(schema)
        texts = [_normalized(schema, name, dead[name]) for name in names]
        state.guards.raise_to(key, names, encode_keys(texts), dead[COMMIT_TS])
        floor = ordering.guard_floor(state, applier.mode, applier.guard_retention)
        state.guards.collect(floor, state.floors)
        ordering.check_guards(
            state, applier.mode, floor, applier.guard_retention, applier.max_guards
        )
        applier.store.save(batch, state)
        kept = sum(t.num_rows for t in state.guards.sets.get(key, {}).values())
    return kept


def _normalized(schema: TableSchema, name: str, text: pa.ChunkedArray) -> pa.Array:
    """A key column's stored text as the changelog writes it (the normalized form of the
    column's MySQL type: a DATETIME's fraction digits, a FLOAT's shortest text)."""
    column = schema.get(name)
    if column is None or column.type.family in _AS_STORED:
        return text.combine_chunks()
    read, write = NORMALIZED.decoder(column.type), NORMALIZED.encoder(column.type)
    out = []
    for value in text.to_pylist():
        try:
            out.append(None if value is None else write(read(value)))
        except (ValueError, TypeError, ArithmeticError):
            out.append(value)  # (compared as stored)
    return pa.array(out, pa.string())
