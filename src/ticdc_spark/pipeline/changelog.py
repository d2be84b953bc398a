"""The changelog: decoded messages as flat rows, the contract between decode and apply.

Every protocol decodes into the same columns (an Arrow schema, so the Spark decode stage can
build them column by column and the apply stage can read them vectorized):

=============  ===========================================================================
column         meaning
=============  ===========================================================================
kind           ROW, DDL, WATERMARK, BOOTSTRAP, or ERROR (a message that failed to decode)
op             INSERT, UPDATE or DELETE (rows only)
database       upstream database
table          upstream table
commit_ts      TiDB commit TSO (for WATERMARK: the resolved ts)
before/after   row images: column -> value as text (see below), or null
schema         the table's columns and key as JSON, on the first row of a table in a batch and
               whenever it changes; null means "as the previous row of this table"
key_only       the message carried only the handle-key columns (large-message handling)
sql, ddl_type  the DDL statement and TiDB's action name (DDL only)
topic, partition, offset, seq
               where the message came from; seq numbers the events inside one message
error          why decoding failed (ERROR only); key/value then hold the raw message
value          also, for a protocol whose rows name a schema version that other messages
               bring (Simple): on a ROW, the message itself when the decode stage had not
               met its schema (images null: a *wire row*, which the consumer finishes once
               it knows the schema, see :mod:`ticdc_spark.pipeline.wire_rows`); on a
               BOOTSTRAP or DDL, the message, whose schemas the consumer learns
=============  ===========================================================================

Image values are MySQL text as the protocol wrote it, which is the normalized text form of
:mod:`ticdc_spark.normalized` except that the JSON protocols' own spellings pass through
unchanged (a Java ``1.0E10`` float, an ENUM member name): the apply stage reads both.
Binary values are base64.  ``schema`` JSON is ``{"columns": [[name, mysql type], ...],
"pk": [...]}`` plus ``"tableId"``/``"version"`` when known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import Any, Final

import pyarrow as pa

from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    schema_from_json,
    schema_json,
)
from ticdc_spark.normalized import image_to_text

__all__ = [
    "BOOTSTRAP",
    "CHANGELOG_FIELDS",
    "DDL",
    "DELETE",
    "ERROR",
    "INSERT",
    "ROW",
    "UPDATE",
    "WATERMARK",
    "ChangelogBuilder",
    "arrow_schema",
    "schema_from_json",
    "schema_json",
]

# The ``kind`` of a changelog row.
ROW: Final = "ROW"
DDL: Final = "DDL"
WATERMARK: Final = "WATERMARK"
BOOTSTRAP: Final = "BOOTSTRAP"
ERROR: Final = "ERROR"
# The ``op`` of a ROW: TiDB's row change kinds, spelled as the decoders write them.
INSERT: Final = RowKind.INSERT.value
UPDATE: Final = RowKind.UPDATE.value
DELETE: Final = RowKind.DELETE.value

Position = tuple[str, int, int, int]  # topic, partition, offset, seq

CHANGELOG_FIELDS: tuple[tuple[str, str], ...] = (
    ("kind", "string"),
    ("op", "string"),
    ("database", "string"),
    ("table", "string"),
    ("commit_ts", "int64"),
    ("schema", "string"),
    ("key_only", "bool"),
    ("sql", "string"),
    ("ddl_type", "string"),
    ("topic", "string"),
    ("partition", "int32"),
    ("offset", "int64"),
    ("seq", "int32"),
    ("error", "string"),
    ("key", "binary"),
    ("value", "binary"),
    ("before", "map"),
    ("after", "map"),
)


def arrow_schema() -> pa.Schema:
    """The changelog's Arrow schema."""
    types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "int32": pa.int32(),
        "bool": pa.bool_(),
        "binary": pa.binary(),
        "map": pa.map_(pa.string(), pa.string()),
    }
    return pa.schema([(name, types[kind]) for name, kind in CHANGELOG_FIELDS])


class ChangelogBuilder:
    """Accumulates changelog rows and turns them into an Arrow batch.

    It is the :class:`~ticdc_spark.codec.base.ChangelogSink` decoders write into: rows in
    changelog text through :meth:`add_row` (or :meth:`append_row`, the batch paths'
    primitive), any decoder's events through :meth:`add_events`.  Rows are kept as tuples and
    transposed once per batch, the cheapest way to build columns from Python.  The schema JSON
    is written on the first row of a table in a batch and whenever it changes.
    """

    text = True  # row images are taken as changelog text (codec.base.RowSink)
    row_kind = ROW

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []  # every column but before/after
        self.before = _MapColumn()
        self.after = _MapColumn()
        self._last_schema: dict[tuple[str, str], str] = {}
        self._schema_text: dict[int, tuple[TableSchema, str]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    # -- appending --------------------------------------------------------------------------

    def add_row(
        self,
        kind: RowKind,
        schema: TableSchema,
        commit_ts: int,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        position: Position,
        *,
        key_only: bool = False,
        partition_id: int | None = None,
        schema_text: str | None = None,
    ) -> None:
        """Append a row change whose images are changelog text (``codec.base.RowSink``)."""
        self.append_row(
            kind.value,
            schema.database,
            schema.table,
            commit_ts,
            before,
            after,
            schema_text or self.schema_text(schema) or "",
            position,
            key_only,
        )

    def append_row(
        self,
        op: str,
        database: str,
        table: str,
        commit_ts: int,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        schema: str,
        position: Position,
        key_only: bool = False,
    ) -> None:
        """Append a row change; ``schema`` is the table's schema JSON (written if new)."""
        slot = (database, table)
        if self._last_schema.get(slot) == schema:
            written = None
        else:
            written = self._last_schema[slot] = schema
        self.rows.append(
            (
                ROW,
                op,
                database,
                table,
                commit_ts,
                written,
                key_only,
                None,
                None,
                *position,
                None,
                None,
                None,
            )
        )
        self.before.add(before)
        self.after.add(after)

    def add_events(
        self,
        events: Iterable[Event],
        topic: str,
        partition: int,
        offset: int,
        first_seq: int = 0,
    ) -> None:
        """Append decoded events (the generic path: canonical values -> text)."""
        for seq, event in enumerate(events, first_seq):
            position = (topic, partition, offset, seq)
            if isinstance(event, RowChange):
                self._add_change(event, position)
            else:
                self._add_event(event, position)

    def _add_change(self, event: RowChange, position: Position) -> None:
        schema = event.schema
        self.append_row(
            event.kind.value,
            schema.database,
            schema.table,
            event.commit_ts,
            image_to_text(schema, event.before),
            image_to_text(schema, event.after),
            self.schema_text(schema) or "",
            position,
            event.handle_key_only,
        )

    def _add_event(self, event: Event, position: Position) -> None:
        """A DDL, a watermark or a bootstrap (anything else is not a changelog row)."""
        if isinstance(event, DDLEvent):
            self._add_other(
                DDL,
                event.database,
                event.table,
                event.commit_ts,
                position,
                sql=event.query,
                ddl_type=event.ddl_type.name,
                schema=self.schema_text(event.schema),
            )
        elif isinstance(event, Watermark):
            self._add_other(WATERMARK, "", "", event.ts, position)
        elif isinstance(event, Bootstrap):
            schema = event.schema
            text = self.schema_text(schema)
            self._add_other(BOOTSTRAP, schema.database, schema.table, 0, position, schema=text)

    def add_error(
        self,
        reason: str,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        """Append a message that failed to decode (a dead letter)."""
        self._add_other(
            ERROR, "", "", 0, (topic, partition, offset, 0), error=reason, key=key, value=value
        )

    def add_wire_row(
        self,
        op: str,
        database: str,
        table: str,
        commit_ts: int,
        position: Position,
        message: bytes,
        key_only: bool = False,
    ) -> None:
        """Append a row still in its message (a *wire row*: images null, ``value`` the
        message), for the consumer to finish once it knows the row's schema."""
        schema = sql = ddl_type = error = key = None
        row = (ROW, op, database, table, commit_ts, schema, key_only, sql, ddl_type)
        self.rows.append((*row, *position, error, key, message))
        self.before.add(None)
        self.after.add(None)

    def keep_message(self, message: bytes) -> None:
        """Keep the message on the row last appended (``value``), for the consumer to read
        again: the schemas a BOOTSTRAP or DDL message brings."""
        self.rows[-1] = (*self.rows[-1][:-1], message)

    def schema_text(self, schema: TableSchema | None) -> str | None:
        """The schema JSON of a schema object (computed once per object)."""
        if schema is None:
            return None
        hit = self._schema_text.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = self._schema_text[id(schema)] = (schema, schema_json(schema))
        return hit[1]

    def _add_other(
        self,
        kind: str,
        database: str,
        table: str,
        commit_ts: int,
        position: Position,
        *,
        sql: str | None = None,
        ddl_type: str | None = None,
        schema: str | None = None,
        error: str | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
    ) -> None:
        if schema is not None:
            self._last_schema[(database, table)] = schema
        self.rows.append(
            (
                kind,
                None,
                database,
                table,
                commit_ts,
                schema,
                False,
                sql,
                ddl_type,
                *position,
                error,
                key,
                value,
            )
        )
        self.before.add(None)
        self.after.add(None)

    # -- output -----------------------------------------------------------------------------

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema()

    def to_batch(self) -> pa.RecordBatch:
        """The rows so far as an Arrow RecordBatch (and a fresh start)."""
        schema = arrow_schema()
        scalar_fields = [f for f in schema if f.name not in ("before", "after")]
        rows = self.rows
        arrays = {
            f.name: _column(list(map(itemgetter(i), rows)), f.type)
            for i, f in enumerate(scalar_fields)
        }
        map_type = schema.field("after").type
        arrays["before"] = self.before.to_array(map_type)
        arrays["after"] = self.after.to_array(map_type)
        self.rows = []
        self.before, self.after = _MapColumn(), _MapColumn()
        self._last_schema.clear()  # every batch names the schema of each table it holds
        return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _column(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    if values.count(None) == len(values):  # DDL/error-only columns are empty for row batches
        return pa.nulls(len(values), arrow_type)
    return pa.array(values, arrow_type)


class _MapColumn:
    """A map<string,string> column kept as flat keys, values and offsets (cheap to extend)."""

    __slots__ = ("keys", "nulls", "offsets", "values")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.values: list[str | None] = []
        self.offsets: list[int] = [0]
        self.nulls: list[bool] = []

    def add(self, image: Mapping[str, Any] | None) -> None:
        if image is not None:
            self.keys.extend(image)
            self.values.extend(image.values())
        self.offsets.append(len(self.keys))
        self.nulls.append(image is None)

    def to_array(self, map_type: pa.DataType) -> pa.MapArray:
        return pa.MapArray.from_arrays(
            pa.array(self.offsets, pa.int32()),
            pa.array(self.keys, pa.string()),
            pa.array(self.values, pa.string()),
            type=map_type,
            mask=pa.array(self.nulls, pa.bool_()),
        )
