"""What the Arrow batch paths share: merging their own changelog rows with the rows the
careful path (the one decode path, ``careful(i)``) wrote into the sink, back into message
order, and the ``schema`` column recomputed over the merged rows so that a null still means
"as the previous row of this table".

A batch path builds changelog rows for the records it takes (with each row's table and
schema JSON as numbers from :class:`Tables`, gathered by :func:`own_rows`) and hands every
other record to ``careful`` through :class:`CarefulRows`; :func:`merged` puts the two
together.  (Canal-JSON's compiled scanner, Avro's columnar path and Debezium's typed payload
reader use it.)

numpy and pyarrow are imported where they are used, not at the top as in the other Arrow
modules: the Debezium decoder imports this module through its batch path when it is
imported itself, and the codecs import without pyarrow (without the ``spark`` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeAlias

from ticdc_spark.codec.base import ChangelogSink

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["CarefulRows", "OwnPart", "Tables", "image_column", "merged", "own_rows", "row_batch"]

# A batch path's own rows: (rows, the record each row came from, its table number, its schema
# number), the numbers those of :class:`Tables`.
OwnPart: TypeAlias = "tuple[pa.RecordBatch, np.ndarray, np.ndarray, np.ndarray]"


class CarefulRows:
    """``careful(i)`` with the record each sink row came from noted (rows in sink order)."""

    def __init__(self, careful: Callable[[int], None], sink: ChangelogSink) -> None:
        self.careful = careful
        self.sink = sink
        self.sources: list[int] = []

    def __call__(self, i: int) -> None:
        before = len(self.sink)
        self.careful(i)
        self.sources.extend([i] * (len(self.sink) - before))

    def rows(self) -> tuple[pa.RecordBatch, np.ndarray]:
        """The careful rows (the sink emptied) and the record each came from."""
        import numpy as np

        return self.sink.to_batch(), np.array(self.sources, np.int64)


def row_batch(
    sink: ChangelogSink, batch: pa.RecordBatch, records: np.ndarray, columns: dict[str, pa.Array]
) -> pa.RecordBatch:
    """Changelog ROW rows, one per record of ``records`` (indices into the Kafka ``batch``,
    each row at its record's topic, partition and offset): ``columns`` holds their op,
    database, table, commit_ts, before and after (Arrow arrays); the other columns are what
    ``ChangelogBuilder`` writes for a row (the ``schema`` column is :func:`merged`'s)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n, at = len(records), pa.array(records, pa.int64())
    text, binary = pa.string(), pa.binary()
    rows = {
        "kind": pa.repeat(pa.scalar(sink.row_kind), n),
        "schema": pa.nulls(n, text),
        "key_only": pa.array(np.zeros(n, np.bool_)),
        "sql": pa.nulls(n, text),
        "ddl_type": pa.nulls(n, text),
        "topic": pc.fill_null(batch.column("topic").take(at), ""),
        "partition": pc.fill_null(batch.column("partition").take(at), 0).cast(pa.int32()),
        "offset": pc.fill_null(batch.column("offset").take(at), 0).cast(pa.int64()),
        "seq": pa.array(np.zeros(n, np.int32)),
        "error": pa.nulls(n, text),
        "key": pa.nulls(n, binary),
        "value": pa.nulls(n, binary),
        **columns,
    }
    schema = sink.arrow_schema()
    return pa.RecordBatch.from_arrays([rows[f.name] for f in schema], schema=schema)


def image_column(
    images: list[dict[str, Any] | None], texts: list[Any] | None = None
) -> pa.MapArray:
    """A before/after column of row images (column name -> text; None: no image); ``texts``:
    the images' values in order, when they are not the images' own values."""
    import numpy as np
    import pyarrow as pa

    present = [image for image in images if image is not None]
    if texts is None:
        texts = list(chain.from_iterable(map(dict.values, present)))
    lengths = np.fromiter((0 if image is None else len(image) for image in images), np.int32)
    offsets = np.zeros(len(images) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.MapArray.from_arrays(
        pa.array(offsets),
        pa.array(list(chain.from_iterable(present)), pa.string()),
        pa.array(texts, pa.string()),
        type=pa.map_(pa.string(), pa.string()),
        mask=pa.array([image is None for image in images], pa.bool_()),
    )


def own_rows(parts: list[OwnPart], sink: ChangelogSink) -> OwnPart:
    """A batch path's own rows from its parts, each (rows, the record each row came from, its
    table number, its schema number), as :func:`merged` takes them."""
    import numpy as np
    import pyarrow as pa

    if not parts:
        none = np.zeros(0, np.int64)
        return pa.RecordBatch.from_pylist([], schema=sink.arrow_schema()), none, none, none
    rows = pa.concat_batches([part[0] for part in parts])
    sources, slots, texts = (np.concatenate([part[j] for part in parts]) for j in (1, 2, 3))
    return rows, sources, slots, texts


def merged(
    own: OwnPart,
    careful: tuple[pa.RecordBatch, np.ndarray],
    tables: Tables,
    row_kind: str,
) -> pa.RecordBatch:
    """The changelog batch of a batch path's own rows and the careful rows, in record order.

    ``own`` is (rows, the record each row came from, its table number, its schema number);
    ``careful`` is :meth:`CarefulRows.rows`.  Rows of one record keep their order.
    """
    import numpy as np
    import pyarrow as pa

    rows, rows_from, slots, texts = own
    slow_rows, slow_from = careful
    if not len(slow_from) and _ascending(rows_from):
        merged_rows, own_texts = rows, np.full(len(rows_from), -1, np.int64)
    else:
        order = np.argsort(np.concatenate([rows_from, slow_from]), kind="stable")
        merged_rows = pa.concat_batches([rows, slow_rows]).take(order)
        slow_slots, slow_texts, slow_own = tables.of_rows(slow_rows)
        slots = np.concatenate([slots, slow_slots])[order]
        texts = np.concatenate([texts, slow_texts])[order]
        own_texts = np.concatenate([np.full(len(rows_from), -1, np.int64), slow_own])[order]
    return _with_schema(merged_rows, tables, slots, texts, own_texts, row_kind)


def _ascending(values: np.ndarray) -> bool:
    return bool(len(values) < 2 or (values[1:] > values[:-1]).all())


def _with_schema(
    merged: pa.RecordBatch,
    tables: Tables,
    slots: np.ndarray,
    texts: np.ndarray,
    own: np.ndarray,
    row: str,
) -> pa.RecordBatch:
    import pyarrow.compute as pc

    is_row = pc.equal(merged.column("kind"), row).to_numpy(zero_copy_only=False)
    schema = tables.schema_column(slots, texts, own, is_row)
    return merged.set_column(merged.schema.get_field_index("schema"), "schema", schema)


class Tables:
    """Numbers for tables and schema texts, and the ``schema`` column computed from them."""

    def __init__(self, row_kind: str) -> None:
        self.row_kind = row_kind  # the changelog's kind of a row change
        self.slots: dict[tuple[str, str], int] = {}
        self.texts: dict[str, int] = {}

    def slot(self, table: tuple[str, str]) -> int:
        return self.slots.setdefault(table, len(self.slots))

    def text(self, schema_text: str) -> int:
        return self.texts.setdefault(schema_text, len(self.texts))

    def of_rows(self, rows: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the careful path's rows: table numbers, the schema in effect for each ROW row
        (its own, or its table's previous one in the sink's order), and the schema each
        non-ROW row carries itself (-1: none)."""
        import numpy as np

        slots, texts, own = [], [], []
        last: dict[int, int] = {}
        for kind, database, table, text in zip(
            *(rows.column(name).to_pylist() for name in ("kind", "database", "table", "schema")),
            strict=True,
        ):
            slot = self.slot((database or "", table or ""))
            number = -1 if text is None else self.text(text)
            if number >= 0:
                last[slot] = number
            slots.append(slot)
            texts.append(last.get(slot, -1) if kind == self.row_kind else number)
            own.append(-1 if kind == self.row_kind else number)
        return tuple(np.array(column, np.int64) for column in (slots, texts, own))  # type: ignore[return-value]

    def schema_column(
        self, slots: np.ndarray, texts: np.ndarray, own: np.ndarray, is_row: np.ndarray
    ) -> pa.StringArray:
        """Each row's schema JSON where its table's schema first appears or changes.

        ``texts`` is the schema in effect for each row (-1: none known); non-ROW rows keep the
        schema they carry (``own``).  A ROW row writes its schema when the previous row of its
        table that has one (in this batch) had another.
        """
        import numpy as np
        import pyarrow as pa

        if not self.texts:
            return pa.nulls(len(slots), pa.string())
        known = np.flatnonzero(texts >= 0)
        by_table = np.argsort(slots[known], kind="stable")
        ordered_slots, ordered_texts = slots[known][by_table], texts[known][by_table]
        changed = np.ones(len(known), np.bool_)
        changed[1:] = (ordered_slots[1:] != ordered_slots[:-1]) | (
            ordered_texts[1:] != ordered_texts[:-1]
        )
        write = np.zeros(len(slots), np.bool_)
        write[known[by_table]] = changed
        ids = np.where(is_row, texts, own)
        write = np.where(is_row, write, own >= 0)
        names = pa.array(list(self.texts), pa.string())
        return names.take(pa.array(np.where(write, ids, 0), mask=~write))
