"""The schemas rows carry: numbered per batch, read once, and followed where there is no DDL.

A changelog row carries its table's schema JSON only when it first appears in a batch or
changes; a row without one has its table's previous one.  The planner numbers every row's
schema (:class:`SchemaNumbers`) before anything reorders rows, and reads each text once
(:class:`RowSchemas`).  For protocols that carry no DDL (Avro), a table follows the schemas
its rows carry: columns added, widened or dropped between two rows become a
:class:`~ticdc_spark.pipeline.steps.DDLStep` between them (:meth:`RowSchemas.runs`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ticdc_spark.errors import TiCDCSparkError
from ticdc_spark.model import DDLType, TableSchema, schema_from_json, schema_json
from ticdc_spark.pipeline.arrow import by_table
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.catalog import renamed, with_new_columns
from ticdc_spark.pipeline.changelog import DELETE
from ticdc_spark.pipeline.state import ConsumerState, PartitionTable
from ticdc_spark.pipeline.steps import DDLStep, TableKey

__all__ = ["RowSchemas", "SchemaNumbers"]

SCHEMA_ID = "_schema_id"  # the planning column of each row's schema number (-1: none)


class SchemaNumbers:
    """The schema texts of one batch's rows, each row's numbered by its index in ``texts``."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def number(self, rows: pa.Table, state: ConsumerState) -> pa.Table:
        """``rows`` with the number of the schema in effect for each row's table: its own,
        else its table's previous row's (from this batch or, before it, the last one the
        state remembers as ``carried``, which it then updates)."""
        index: dict[str, int] = {}
        last: dict[TableKey, int] = {}
        self.texts = []
        for key, text in state.carried.items():
            index[text] = len(self.texts)
            last[key] = len(self.texts)
            self.texts.append(text)
        ids = self._numbers(by_table(rows, "schema"), index, last)
        state.carried = {key: self.texts[number] for key, number in last.items()}
        return rows.append_column(SCHEMA_ID, pa.array(ids, pa.int32()))

    def number_more(self, rows: pa.Table) -> pa.Table:
        """Rows added to the batch (finished wire rows), numbered on (a null text: the
        table's previous row's among them)."""
        index = {text: number for number, text in enumerate(self.texts)}
        ids = self._numbers(by_table(rows, "schema"), index, {})
        return rows.append_column(SCHEMA_ID, pa.array(ids, pa.int32()))

    def text(self, number: int) -> str | None:
        return self.texts[number] if number >= 0 else None

    def _numbers(
        self,
        rows: Iterable[tuple[TableKey, str | None]],
        index: dict[str, int],
        last: dict[TableKey, int],
    ) -> list[int]:
        numbers = []
        for key, text in rows:
            if text:
                number = index.get(text)
                if number is None:
                    number = index[text] = len(self.texts)
                    self.texts.append(text)
                last[key] = number
            numbers.append(last.get(key, -1))
        return numbers


class RowSchemas:
    """The table schemas of a batch's rows, read once per text and table."""

    def __init__(
        self, state: ConsumerState, numbers: SchemaNumbers, capabilities: Capabilities
    ) -> None:
        self.state, self.numbers, self.capabilities = state, numbers, capabilities
        self._read: dict[tuple[str, str, str], TableSchema] = {}

    def schema_of(self, text: str, key: TableKey) -> TableSchema:
        """The table schema of a ``schema`` JSON text: the whole schema (nullability,
        defaults, indexes) when the state holds its version (Simple's ``tableSchema``),
        else what the text says (names, types, key)."""
        cached = self._read.get((text, *key))
        if cached is not None:
            return cached
        schema = schema_from_json(text, *key)
        finisher = self.capabilities.finisher
        if finisher is not None and schema.version:
            whole = self.state.versions.get((key[0], key[1], schema.version))
            if whole is not None:
                full = finisher.schema(whole)
                if full.column_names == schema.column_names:
                    schema = renamed(full, key)
        self._read[(text, *key)] = schema
        return schema

    def learn_bootstraps(self, rows: pa.Table) -> None:
        """A table the catalog does not know yet takes its BOOTSTRAP's schema.  (Only that:
        a bootstrap carries no commit ts, so it is released at once, possibly ahead of rows
        of an older version still held; a known table follows its DDLs and rows.)"""
        for row in rows.select(["database", "table", "schema"]).to_pylist():
            if row["schema"]:
                key = (row["database"], row["table"])
                if key not in self.state.tables:
                    self.state.tables[key] = self.schema_of(row["schema"], key)

    def table_schema(self, key: TableKey, rows: pa.Table) -> TableSchema:
        """The catalog schema of a run of rows, extended by columns they carry that it
        lacks (and remembered in the catalog)."""
        number = pc.max(rows[SCHEMA_ID]).as_py()
        text = None if number is None else self.numbers.text(number)
        carried = None if text is None else self.schema_of(text, key)
        known = self.state.tables.get(key)
        if known is None:
            if carried is None:
                raise TiCDCSparkError(f"no schema known for {key[0]}.{key[1]}")
            known = carried
        elif carried is not None and self._widens_here():
            last_ddl = self.state.schema_ts.get(key, -1)
            if pc.max(rows["commit_ts"]).as_py() > last_ddl:  # (older rows: see schema_ts)
                known = with_new_columns(known, carried)
        self.state.tables[key] = known
        return known

    def _widens_here(self) -> bool:
        """Whether :meth:`table_schema` adds the columns rows carry.  (Avro: :meth:`runs`
        moves the table. Simple: also here, as for DDL protocols: a table bootstrapped at an
        older version than the DDLs that follow learns the columns of the versions it missed
        from its rows, DELETEs included, which never cut a run, before a DDL applies only its
        own statement.)"""
        return not self.capabilities.rows_define_schema or self.capabilities.finisher is not None

    def runs(self, key: TableKey, rows: pa.Table) -> Iterator[pa.Table | DDLStep]:
        """A table's rows cut where the schema they carry changes, in order, with a schema
        step at each cut.

        DELETEs carry only the key and say nothing of the other columns: they never cut.
        Which of two schemas is the newer one: the one with the higher ``version`` when both
        have one (Avro: the registry's schema id, in the order schemas were registered);
        else the one a partition moved to from the other (the partitions of a topic are
        read at their own pace, and rows without a commit ts have only their partition's
        order).  A table moves to a newer schema only.  A row carrying an older one (written
        before the change, on a partition behind the others), or one with no order to go by
        (its partition's first), adds the columns the table lacks and changes nothing else:
        taking the table back would drop the columns newer rows filled.
        """
        ids = rows[SCHEMA_ID].to_numpy(zero_copy_only=False)
        deletes = rows["op"].to_numpy(zero_copy_only=False) == DELETE
        stamps = rows["commit_ts"].to_pylist()
        topics, partitions = rows["topic"].to_pylist(), rows["partition"].to_pylist()
        follower = _Follower(self, key)
        start = 0
        for i in np.flatnonzero(~deletes & (ids >= 0)):
            slot = (f"{topics[i]}/{partitions[i]}", *key)
            moved = follower.moves_to(int(ids[i]), slot)
            if moved is None:
                continue
            if i > start:
                yield rows.slice(start, i - start)
            start = int(i)
            sql = f"-- {key[0]}.{key[1]} follows the schema its rows carry"
            yield DDLStep(*key, stamps[i], sql, DDLType.MODIFY_COLUMN, follower.known, moved)
            follower.take(moved)
        yield rows.slice(start)


class _Follower:
    """A table's schema as :meth:`RowSchemas.runs` moves it along its rows."""

    def __init__(self, schemas: RowSchemas, key: TableKey) -> None:
        self.schemas, self.key = schemas, key
        self.known = schemas.state.tables.get(key)
        self.known_json = None if self.known is None else schema_json(self.known)
        # schema number -> (digest, schema, its JSON); JSON compared, once per row (cheap
        # string equality: rows of one schema share the text)
        self._parsed: dict[int, tuple[str, TableSchema, str]] = {}

    def moves_to(self, number: int, slot: PartitionTable) -> TableSchema | None:
        """The schema the table moves to at a row of schema ``number`` read from ``slot``,
        or None if it stays (the first schema the table has is taken without a step)."""
        digest, carried, carried_json = self._read(number)
        carried_by = self.schemas.state.partition_schemas
        previous, carried_by[slot] = carried_by.get(slot), digest
        if self.known is None:
            self.take(carried, carried_json)
            return None
        if carried_json == self.known_json:
            return None
        if carried.version and self.known.version:
            newer = carried.version > self.known.version
        else:  # (schemas without versions: their partition's order)
            newer = previous not in (None, digest)
        if not newer:  # an older schema, or no order to go by: the columns it adds only
            carried = with_new_columns(self.known, carried)
            if carried is self.known:
                return None
        return carried

    def take(self, schema: TableSchema, text: str | None = None) -> None:
        self.known = self.schemas.state.tables[self.key] = schema
        self.known_json = text if text is not None else schema_json(schema)

    def _read(self, number: int) -> tuple[str, TableSchema, str]:
        parsed = self._parsed.get(number)
        if parsed is None:
            text = self.schemas.numbers.texts[number]
            schema = self.schemas.schema_of(text, self.key)
            parsed = self._parsed[number] = (_digest(text), schema, schema_json(schema))
        return parsed


def _digest(text: str) -> str:
    """A short stand-in for a schema JSON (the state keeps one per partition and table)."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
