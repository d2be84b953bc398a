"""Changelog Arrow batches assembled from a column-wise fast path and the careful path.

The Arrow batch paths (Canal-JSON's compiled scanner, Debezium's typed payload reader) build
the changelog rows of the messages they understand column by column, with the ``schema``
column left null and each row's table and schema text numbered (:class:`Tables`).  Every
other message is decoded by the careful path (``careful(i)``, into the changelog sink).
:func:`assemble` merges the two back into message order and recomputes the ``schema`` column
over the merged rows, so that a null still means "as the previous row of this table".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ticdc_spark.codec.base import ChangelogSink

__all__ = ["CarefulRows", "Tables", "assemble"]


def assemble(
    rows: Any,
    rows_from: Any,
    numbers: tuple[Any, Any],
    slow: Any,
    careful: CarefulRows,
    tables: Tables,
) -> Any:
    """The changelog batch of a batch of messages.

    ``rows`` are the fast path's rows (``schema`` null), ``rows_from`` the message each came
    from, ``numbers`` each row's table number and schema text number (:class:`Tables`);
    ``slow`` are the messages the careful path is still to decode.
    """
    import numpy as np
    import pyarrow as pa

    for i in slow.tolist():
        careful.run(i)
    slots, texts = numbers
    in_order = len(rows_from) < 2 or bool((rows_from[1:] > rows_from[:-1]).all())
    if not careful.sources and in_order:
        merged, own = rows, np.full(len(rows), -1, np.int64)
    else:
        slow_rows, slow_from = careful.rows()
        order = np.argsort(np.concatenate([rows_from, slow_from]), kind="stable")
        merged = pa.concat_batches([rows, slow_rows]).take(order)
        slow_slots, slow_texts, slow_own = tables.of_rows(slow_rows)
        slots = np.concatenate([slots, slow_slots])[order]
        texts = np.concatenate([texts, slow_texts])[order]
        own = np.concatenate([np.full(len(rows), -1, np.int64), slow_own])[order]
    return _with_schema(merged, tables, slots, texts, own, careful.sink.row_kind)


def _with_schema(merged: Any, tables: Tables, slots: Any, texts: Any, own: Any, row: str) -> Any:
    import pyarrow.compute as pc

    is_row = pc.equal(merged.column("kind"), row).to_numpy(zero_copy_only=False)
    schema = tables.schema_column(slots, texts, own, is_row)
    return merged.set_column(merged.schema.get_field_index("schema"), "schema", schema)


class CarefulRows:
    """The careful path's rows, in the sink, and the message each came from (messages may be
    decoded in any order: :func:`assemble` puts the rows in message order)."""

    def __init__(self, careful: Callable[[int], None], sink: ChangelogSink) -> None:
        self.careful = careful
        self.sink = sink
        self.sources: list[int] = []

    def run(self, i: int) -> None:
        """Decode message ``i`` with every check (its rows, or its dead letter, go to the sink)."""
        before = len(self.sink)
        self.careful(i)
        self.sources.extend([i] * (len(self.sink) - before))

    def rows(self) -> tuple[Any, Any]:
        import numpy as np

        return self.sink.to_batch(), np.array(self.sources, np.int64)


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

    def of_rows(self, rows: Any) -> tuple[Any, Any, Any]:
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

    def schema_column(self, slots: Any, texts: Any, own: Any, is_row: Any) -> Any:
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
