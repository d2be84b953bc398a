"""The last change per key: what a segment of one table's changes leaves of each row.

Keys are the schema's handle key (all columns when the table has none).  Within a segment
each key keeps its last change by (commit ts, partition, offset); an UPDATE that changes
the key becomes a delete of the old key just before the update of the new one.  Keys are
compared on narrow text columns and the winners found by one Arrow group-by; the images
(the wide part) are gathered once, for the winners.  Pure Arrow, tested on small tables.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.arrow import is_sorted, whole
from ticdc_spark.pipeline.changelog import DELETE, INSERT, UPDATE
from ticdc_spark.pipeline.dead_letters import dead_letters
from ticdc_spark.pipeline.steps import OP_DELETE, OP_INSERT, OP_UPDATE

__all__ = ["final_changes"]

_KEY_ONLY = (
    "only the handle-key columns were sent (a large message); the full row must be read "
    "from upstream TiDB"
)


def final_changes(rows: pa.Table, schema: TableSchema) -> tuple[pa.Table, pa.Table | None]:
    """The last change per key of one table's rows (changelog rows in release order, with
    their images), and the rows that cannot be applied (dead letters, or None).

    A change that carries only key columns (handle-key-only large messages) can be applied
    only if it is a delete.  The result has ``op`` (``insert``/``update``/``delete``, see
    :mod:`ticdc_spark.pipeline.steps`), ``commit_ts``, ``image`` (the after image, or the
    before image for deletes), ``key_only`` and the source position.
    """
    is_delete = pc.equal(rows["op"], DELETE).to_numpy(zero_copy_only=False)
    bad = np.asarray(rows["key_only"].to_numpy(zero_copy_only=False), dtype=bool) & ~is_delete
    entries = _entries(rows, schema, is_delete, bad)
    position = entries.winners()
    final = _final(rows, entries.source[position], entries.use_before[position])
    return final, dead_letters(rows.filter(pa.array(bad)), _KEY_ONLY) if bad.any() else None


class _Entries(NamedTuple):
    """One entry per change that can apply, plus one per moved key's old key: the key's
    columns, the row it comes from, its order, and whether its image is the before one."""

    keys: list[pa.Array]
    source: np.ndarray
    order: np.ndarray
    use_before: np.ndarray

    def winners(self) -> np.ndarray:
        """The index of each key's last entry (by order), in order."""
        names = [f"k{i}" for i in range(len(self.keys))]
        groups = pa.table(
            {**dict(zip(names, self.keys, strict=True)), "_order": pa.array(self.order, pa.int64())}
        )
        last = groups.group_by(names, use_threads=False).aggregate([("_order", "max")])
        winners = np.sort(last["_order_max"].to_numpy())
        if is_sorted(self.order):
            return np.searchsorted(self.order, winners)
        by_order = np.argsort(self.order, kind="stable")
        found: np.ndarray = by_order[np.searchsorted(self.order[by_order], winners)]
        return found


def _entries(
    rows: pa.Table, schema: TableSchema, is_delete: np.ndarray, bad: np.ndarray
) -> _Entries:
    """The entries of a segment's changes (see :class:`_Entries`).

    Every entry gets a distinct order: row i's change is i * width + width - 1, and the
    deletes of moved keys take the slots below the first change of their commit ts (as
    deletes go first, see pipeline.barriers: a transaction moving key 1 to 2 and key 0 to 1
    leaves key 1 whatever the order its two updates arrive in).
    """
    key_columns = list(schema.handle_key) or list(schema.column_names)
    # (whole arrays: a table's columns are chunked, and moved keys are concatenated below)
    before = [whole(pc.map_lookup(rows["before"], k, "first")) for k in key_columns]
    after = [whole(pc.map_lookup(rows["after"], k, "first")) for k in key_columns]
    moved = _moved(rows, before, after) & ~bad
    keep = ~bad
    mask = pa.array(is_delete)
    source = np.arange(rows.num_rows)[keep]
    keys = [
        pc.if_else(mask, old, new).filter(pa.array(keep))
        for old, new in zip(before, after, strict=True)
    ]
    moved_source = np.arange(rows.num_rows)[moved]
    width = len(moved_source) + 1
    order = source * width + (width - 1)
    use_before = is_delete[keep]
    if not len(moved_source):
        return _Entries(keys, source, order, use_before)
    ts = rows["commit_ts"].to_numpy()
    first = np.searchsorted(ts, ts[moved_source]) if is_sorted(ts) else moved_source
    return _Entries(
        [
            pa.concat_arrays([k, old.filter(pa.array(moved))])
            for k, old in zip(keys, before, strict=True)
        ],
        np.concatenate([source, moved_source]),
        np.concatenate([order, first * width + np.arange(len(moved_source))]),
        np.concatenate([use_before, np.ones(len(moved_source), dtype=bool)]),
    )


def _moved(rows: pa.Table, before: list[pa.Array], after: list[pa.Array]) -> np.ndarray:
    """Which rows are UPDATEs that change the key (a null and a value differ)."""
    moved = np.zeros(rows.num_rows, dtype=bool)
    for old, new in zip(before, after, strict=True):
        differs = pc.fill_null(pc.not_equal(old, new), pc.xor(pc.is_null(old), pc.is_null(new)))
        moved |= differs.to_numpy(zero_copy_only=False)
    moved &= np.asarray(pc.equal(rows["op"], UPDATE).to_numpy(zero_copy_only=False), dtype=bool)
    # (an UPDATE without its before image, e.g. Debezium's old value off, is an upsert)
    has_before = whole(pc.is_valid(rows["before"])).to_numpy(zero_copy_only=False)
    with_before: np.ndarray = moved & np.asarray(has_before, dtype=bool)
    return with_before


def _final(rows: pa.Table, picked: np.ndarray, chosen: np.ndarray) -> pa.Table:
    """The planned changes of the winning entries: rows ``picked``, each a delete with its
    before image where ``chosen``, else an insert or update with its after image."""
    final = rows.take(pa.array(picked))
    is_insert = pc.equal(final["op"], INSERT).to_numpy(zero_copy_only=False)
    ops = np.where(chosen, OP_DELETE, np.where(is_insert, OP_INSERT, OP_UPDATE))
    both = pa.concat_arrays([final["after"].combine_chunks(), final["before"].combine_chunks()])
    image = both.take(pa.array(np.arange(len(picked)) + chosen * len(picked)))
    return pa.table(
        {
            "op": pa.array(ops, pa.string()),
            "commit_ts": final["commit_ts"],
            "image": image,
            "key_only": final["key_only"],
            "topic": final["topic"],
            "partition": final["partition"],
            "offset": final["offset"],
            "seq": final["seq"],
        }
    )
