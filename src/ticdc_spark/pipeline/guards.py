"""Guards: what keeps a late change older than a delete from bringing the deleted row back.

Tables are live (:mod:`ticdc_spark.sinks.base`): a delete deletes its row, and a change
applies only over an older row (``_commit_ts`` strictly lower).  Once a row is deleted the
table no longer knows when, so a change older than the delete that arrives afterwards (TiCDC
delivers at least once, and in eventual mode partitions run at their own pace) would write
the row again.  A *guard* remembers the delete instead, in the consumer state: per table and
key, the commit ts of the newest delete applied.  After the last change per key of each
table step (:func:`~ticdc_spark.pipeline.last_change.final_changes`):

* every change of a key whose guard is newer (strictly: TiCDC splits an update of a unique
  key into a DELETE and an INSERT at one commit ts, and the INSERT is the final state) is
  dropped;
* each delete applied adds or raises its key's guard; any other change applied removes it
  (the row it writes then carries a commit ts at least the guard's, which keeps older
  changes out by itself).

A guard is needed only while a change older than it can still arrive: the planner collects
the others (:func:`ticdc_spark.pipeline.ordering.guard_floor`, docs/pipeline.md
"Consistency").  Keys are compared as the changelog compares them, as text
(:func:`key_texts`): the handle key's columns, or all of them for a table without one.  A
guard remembers which columns it was made with, so the guards made before a DDL changed a
table's key still screen the late changes from before it (by those columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.pipeline.arrow import concat, whole
from ticdc_spark.pipeline.steps import OP_DELETE, TableKey

__all__ = ["Guards", "KeyNames", "encode_keys", "key_texts"]

KeyNames = tuple[str, ...]  # the columns a table's keys are made of

_NULL = "\\N"  # a null key column (an escaped value never reads so: see encode_keys)
_SET_COLUMNS = ("database", "table", "names")  # (of the saved file: one set per run)


def encode_keys(columns: Sequence[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """One text per row for the key columns' texts: each value with ``\\`` and ``,``
    escaped by a ``\\``, a null as ``\\N``, joined by ``,`` (so two keys are equal exactly
    when their columns are, null matching null, as the changelog's key comparison does)."""
    parts = [
        pc.fill_null(pc.replace_substring(pc.replace_substring(c, "\\", "\\\\"), ",", "\\,"), _NULL)
        for c in columns
    ]
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, ",")
    return whole(joined)


def key_texts(images: pa.Array | pa.ChunkedArray, names: KeyNames) -> pa.Array:
    """The encoded key of each image (a map of column -> text) by the columns ``names``."""
    return encode_keys([pc.map_lookup(images, name, "first") for name in names])


def _guard_table(keys: pa.Array, commit_ts: pa.Array | pa.ChunkedArray) -> pa.Table:
    return pa.table({"key": keys, "commit_ts": whole(commit_ts).cast(pa.int64())})


class _Match(NamedTuple):
    """The guards of one set whose key one of a step's changes has: their positions in the
    set, their commit ts, the changes' positions, and every change's key by the set's
    columns."""

    guard: np.ndarray
    guard_ts: np.ndarray
    change: np.ndarray
    keys: pa.Array


def _match(guards: pa.Table, keys: pa.Array) -> _Match:
    """Match a guard set against a step's changes' keys (each key once in a step): one
    probe of the guards into a hash of the changes' keys, the smaller side."""
    found = whole(pc.index_in(guards["key"], value_set=keys))
    valid = np.asarray(found.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    guard = np.flatnonzero(valid)
    guard_ts = whole(guards["commit_ts"]).to_numpy(zero_copy_only=False)[guard]
    change = found.filter(pa.array(valid)).to_numpy(zero_copy_only=False).astype(np.int64)
    return _Match(guard, guard_ts, change, keys)


@dataclass
class Guards:
    """The guards of every table: per table and key columns, a table of ``key`` (encoded,
    see :func:`encode_keys`) and ``commit_ts`` (the newest delete's), one row per key."""

    sets: dict[TableKey, dict[KeyNames, pa.Table]] = field(default_factory=dict)

    def count(self) -> int:
        return sum(t.num_rows for sets in self.sets.values() for t in sets.values())

    def screen(
        self, table: TableKey, names: KeyNames, changes: pa.Table, floor: int
    ) -> tuple[pa.Table, int]:
        """One table step's changes (``final_changes``' columns) without those older than a
        guard of their key, and how many were dropped; the guards updated by the others
        (a delete at or below ``floor`` adds none: it would be collected at once)."""
        if not changes.num_rows:
            return changes, 0
        ts = whole(changes["commit_ts"]).to_numpy(zero_copy_only=False)
        older = np.zeros(changes.num_rows, dtype=bool)
        matched: dict[KeyNames, _Match] = {}
        for set_names, guards in self.sets.get(table, {}).items():
            match = matched[set_names] = _match(guards, key_texts(changes["image"], set_names))
            older[match.change] |= ts[match.change] < match.guard_ts
        adds = (
            np.asarray(pc.equal(changes["op"], OP_DELETE).to_numpy(zero_copy_only=False), bool)
            & (ts > floor)
            & ~older
        )
        self._update(table, names, changes, matched.get(names), adds, older)
        dropped = int(older.sum())
        return (changes.filter(pa.array(~older)) if dropped else changes), dropped

    def _update(
        self,
        table: TableKey,
        names: KeyNames,
        changes: pa.Table,
        match: _Match | None,
        adds: np.ndarray,
        older: np.ndarray,
    ) -> None:
        """Raise the guards of the keys the applied ``changes`` delete (``adds``), remove
        those of the others applied (not ``older``)."""
        if match is None and not adds.any():
            return
        kept = None
        if match is not None:
            current = self.sets[table][names]
            removed = np.zeros(current.num_rows, dtype=bool)
            removed[match.guard[~older[match.change]]] = True
            kept = current.filter(pa.array(~removed))
        mask = pa.array(adds)
        keys = match.keys.filter(mask) if match is not None else None
        if keys is None:
            keys = key_texts(changes.filter(mask)["image"], names)
        added = _guard_table(keys, changes["commit_ts"].filter(mask))
        self._put(table, names, concat([kept, added]))

    def raise_to(
        self, table: TableKey, names: KeyNames, keys: pa.Array, commit_ts: pa.Array
    ) -> None:
        """Add guards (encoded ``keys`` at ``commit_ts``), each key keeping its newest: the
        tombstones of a table an earlier version wrote (adding the same twice changes
        nothing)."""
        current = self.sets.get(table, {}).get(names)
        merged = concat([current, _guard_table(keys, commit_ts)])
        assert merged is not None
        newest = merged.group_by("key", use_threads=False).aggregate([("commit_ts", "max")])
        self._put(table, names, _guard_table(whole(newest["key"]), newest["commit_ts_max"]))

    def collect(self, bound: int, floors: dict[TableKey, int]) -> None:
        """Forget the guards at or below ``bound``, and those at or below their table's
        floor (its last TRUNCATE, DROP or RENAME: the changes older are void anyway)."""
        for table, sets in list(self.sets.items()):
            limit = max(bound, floors.get(table, -1))
            for names, guards in list(sets.items()):
                self._put(table, names, guards.filter(pc.greater(guards["commit_ts"], limit)))

    def _put(self, table: TableKey, names: KeyNames, guards: pa.Table | None) -> None:
        sets = self.sets.setdefault(table, {})
        if guards is not None and guards.num_rows:
            sets[names] = guards.combine_chunks()
        else:
            sets.pop(names, None)
        if not sets:
            del self.sets[table]

    # -- persistence ------------------------------------------------------------------------

    def to_arrow(self) -> pa.Table | None:
        """All guards as one table (``database``, ``table``, ``names`` as JSON, ``key``,
        ``commit_ts``), None when there are none."""
        parts = []
        for (database, table), sets in sorted(self.sets.items()):
            for names, guards in sorted(sets.items()):
                index = pa.array(np.zeros(guards.num_rows, dtype=np.int32))
                constant = [database, table, orjson.dumps(list(names)).decode()]
                columns = [pa.array([value], pa.string()).take(index) for value in constant]
                names_of = [*_SET_COLUMNS, "key", "commit_ts"]
                parts.append(pa.table([*columns, *guards.columns], names=names_of))
        return concat(parts)

    @classmethod
    def from_arrow(cls, saved: pa.Table | None) -> Guards:
        """The guards :meth:`to_arrow` saved, one run of rows per set (raises ValueError,
        KeyError or an Arrow error on a table that is not such)."""
        guards = cls()
        if saved is None or not saved.num_rows:
            return guards
        for start, end in _runs(saved):
            first = saved.slice(start, 1).to_pylist()[0]
            names = tuple(str(n) for n in orjson.loads(first["names"]))
            table = (str(first["database"]), str(first["table"]))
            part = saved.slice(start, end - start)
            known = guards.sets.get(table, {}).get(names)
            found = _guard_table(whole(part["key"]), part["commit_ts"])
            guards._put(table, names, concat([known, found]))
        return guards


def _runs(saved: pa.Table) -> list[tuple[int, int]]:
    """The (start, end) of each run of rows of one guard set (to_arrow writes each set's
    rows together, and needs no sort to read them back)."""
    n = saved.num_rows
    starts = np.zeros(n, dtype=bool)
    starts[0] = True
    for name in _SET_COLUMNS:
        values = whole(saved[name])
        differs = pc.not_equal(values.slice(1), values.slice(0, n - 1))
        starts[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    first = np.flatnonzero(starts)
    return list(zip(first.tolist(), [*first[1:].tolist(), n], strict=True))
