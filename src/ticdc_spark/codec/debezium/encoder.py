"""The Debezium encoder: TiCDC's key and value envelopes, schema-change and checkpoint messages.

A row is one message: the key holds the handle-key columns (``{"payload":{..},"schema":..}``),
the value ``{"payload":{"source":..,"ts_ms":..,"transaction":null,"op":..,"before":..,
"after":..},"schema":..}``; ``debezium-disable-schema`` drops both ``schema`` parts.  The
``schema`` JSON of a table shape is written once and reused.  A DDL is a schema-change message
(key ``{"databaseName":..}``, value with ``ddl`` and ``tableChanges``) sent to every partition;
a watermark a checkpoint message (``op`` ``m``, ``source.commit_ts``) to every partition of
every topic.  ``ts_ms`` is the build time, so two encodings of one event differ there only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ticdc_spark.codec.base import Message, Route
from ticdc_spark.codec.common import INPUT_ERRORS, now_ms, row_encode_error, row_images
from ticdc_spark.codec.debezium.connect import field_schema
from ticdc_spark.codec.debezium.dialect import DEBEZIUM
from ticdc_spark.codec.debezium.options import (
    CHECKPOINT_OP,
    CONNECTOR,
    PROTOCOL,
    VERSION,
    DebeziumOptions,
)
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.errors import EncodeError
from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    DDLType,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    physical_ms,
)

__all__ = ["DebeziumEncoder", "sanitize_name", "sanitize_topic_name"]

_OPS = {RowKind.INSERT: "c", RowKind.UPDATE: "u", RowKind.DELETE: "d"}
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_TOPIC_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")


def sanitize_name(name: str) -> str:
    """Debezium's (and TiCDC's) schema-name adjustment: characters outside ``[A-Za-z0-9_]``
    become ``_``, and a name not starting with a letter or ``_`` gets a ``_`` in front (a
    leading digit kept after it)."""
    if not name:
        return name
    head, tail = name[0], _NAME_UNSAFE.sub("_", name[1:])
    if head.isascii() and (head.isalpha() or head == "_"):
        return head + tail
    return "_" + (head if head.isascii() and head.isdigit() else "") + tail


def sanitize_topic_name(name: str) -> str:
    return _TOPIC_UNSAFE.sub("_", name)


# -- the constant parts ---------------------------------------------------------------------


def _field(connect: str, field: str, optional: bool, **extra: Any) -> dict[str, Any]:
    return {"type": connect, "optional": optional, **extra, "field": field}


def _source_schema(extension: bool) -> dict[str, Any]:
    """The Connect schema of the ``source`` block (Debezium 2.4's, as TiCDC writes it)."""
    snapshot = {
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": "true,last,false,incremental"},
        "default": "false",
    }
    fields = [
        _field("string", "version", False),
        _field("string", "connector", False),
        _field("string", "name", False),
        _field("int64", "ts_ms", False),
        _field("string", "snapshot", True, **snapshot),
        _field("string", "db", False),
        _field("string", "sequence", True),
        _field("string", "table", True),
        _field("int64", "server_id", False),
        _field("string", "gtid", True),
        _field("string", "file", False),
        _field("int64", "pos", False),
        _field("int32", "row", False),
        _field("int64", "thread", True),
        _field("string", "query", True),
    ]
    if extension:
        fields += [_field("int64", "commit_ts", False), _field("string", "cluster_id", False)]
    return {
        "type": "struct",
        "fields": fields,
        "optional": False,
        "name": "io.debezium.connector.mysql.Source",
        "field": "source",
    }


_TRANSACTION_SCHEMA = {
    "type": "struct",
    "fields": [
        _field("string", "id", False),
        _field("int64", "total_order", False),
        _field("int64", "data_collection_order", False),
    ],
    "optional": True,
    "name": "event.block",
    "version": 1,
    "field": "transaction",
}


class _TablePlan:
    """A table shape's writers and the constant ``schema`` JSON of its key and value."""

    def __init__(self, schema: TableSchema, options: DebeziumOptions) -> None:
        ext = options.enable_tidb_extension
        self.schema = schema
        self.writers = [(c.name, DEBEZIUM.encoder(c.type)) for c in schema.columns]
        self.known = frozenset(schema.column_names)
        key = set(schema.handle_key)
        self.key_writers = [w for w in self.writers if w[0] in key]
        prefix = ".".join(
            (
                sanitize_name(options.cluster_id),
                sanitize_name(schema.database),
                sanitize_topic_name(schema.table),
            )
        )
        self.key_schema = self.value_schema = b""
        if options.debezium_disable_schema:
            return
        key_fields = [field_schema(c, ext) for c in schema.columns if c.name in key]
        self.key_schema = orjson.dumps(
            {"type": "struct", "name": f"{prefix}.Key", "optional": False, "fields": key_fields}
        )
        row_fields = [field_schema(c, ext) for c in schema.columns]
        image = {"type": "struct", "optional": True, "name": f"{prefix}.Value"}
        envelope = {
            "type": "struct",
            "optional": False,
            "name": f"{prefix}.Envelope",
            "version": 1,
            "fields": [
                {**image, "field": "before", "fields": row_fields},
                {**image, "field": "after", "fields": row_fields},
                _source_schema(ext),
                _field("string", "op", False),
                _field("int64", "ts_ms", True),
                _TRANSACTION_SCHEMA,
            ],
        }
        self.value_schema = orjson.dumps(envelope)

    def image(self, values: dict[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        if not self.known.issuperset(values):
            raise EncodeError(
                f"the image has columns {sorted(set(values) - self.known)} "
                f"that {self.schema.qualified_name} does not"
            )
        return {
            name: (None if (v := values[name]) is None else write(v))
            for name, write in self.writers
            if name in values
        }

    def key(self, values: dict[str, Any]) -> dict[str, Any]:
        return {
            name: None if (v := values.get(name)) is None else write(v)
            for name, write in self.key_writers
        }


def _envelope(payload: dict[str, Any], schema: bytes) -> bytes:
    body = go_json(orjson.dumps(payload))
    if not schema:
        return b'{"payload":' + body + b"}"
    return b'{"payload":' + body + b',"schema":' + schema + b"}"


# TiCDC's tableChanges type of each DDL it encodes; others it refuses (ErrDDLUnsupportType).
_CHANGE_TYPES: dict[DDLType, str] = {
    **dict.fromkeys(
        (
            DDLType.CREATE_SCHEMA,
            DDLType.CREATE_TABLE,
            DDLType.CREATE_TABLES,
            DDLType.CREATE_VIEW,
        ),
        "CREATE",
    ),
    **dict.fromkeys(
        (
            DDLType.ADD_COLUMN,
            DDLType.MODIFY_COLUMN,
            DDLType.DROP_COLUMN,
            DDLType.ACTION_MULTI_SCHEMA_CHANGE,
            DDLType.ADD_TABLE_PARTITION,
            DDLType.REMOVE_PARTITIONING,
            DDLType.REORGANIZE_PARTITION,
            DDLType.EXCHANGE_TABLE_PARTITION,
            DDLType.ALTER_TABLE_PARTITIONING,
            DDLType.TRUNCATE_TABLE_PARTITION,
            DDLType.DROP_TABLE_PARTITION,
            DDLType.REBASE_AUTO_ID,
            DDLType.SET_DEFAULT_VALUE,
            DDLType.MODIFY_TABLE_COMMENT,
            DDLType.MODIFY_TABLE_CHARSET_AND_COLLATE,
            DDLType.MODIFY_SCHEMA_CHARSET_AND_COLLATE,
            DDLType.ADD_INDEX,
            DDLType.ALTER_INDEX_VISIBILITY,
            DDLType.RENAME_INDEX,
            DDLType.RENAME_TABLE,
            DDLType.RENAME_TABLES,
            DDLType.ADD_PRIMARY_KEY,
            DDLType.DROP_PRIMARY_KEY,
        ),
        "ALTER",
    ),
    **dict.fromkeys(
        (
            DDLType.DROP_SCHEMA,
            DDLType.DROP_TABLE,
            DDLType.DROP_INDEX,
            DDLType.DROP_VIEW,
            DDLType.TRUNCATE_TABLE,
        ),
        "DROP",
    ),
}

_SCHEMA_CHANGE_KEY_SCHEMA = orjson.dumps(
    {
        "type": "struct",
        "name": "io.debezium.connector.mysql.SchemaChangeKey",
        "optional": False,
        "version": 1,
        "fields": [{"field": "databaseName", "optional": False, "type": "string"}],
    }
)


def _schema_change_value_schema() -> bytes:
    """The Connect schema of a schema-change value (tableChanges items left open: TiCDC's
    column descriptions are not written here, see :meth:`DebeziumEncoder._ddl_messages`)."""
    return orjson.dumps(
        {
            "optional": False,
            "type": "struct",
            "version": 1,
            "name": "io.debezium.connector.mysql.SchemaChangeValue",
            "fields": [
                _source_schema(False),
                {"field": "ts_ms", "optional": False, "type": "int64"},
                {"field": "databaseName", "optional": True, "type": "string"},
                {"field": "schemaName", "optional": True, "type": "string"},
                {"field": "ddl", "optional": True, "type": "string"},
                {
                    "field": "tableChanges",
                    "optional": False,
                    "type": "array",
                    "items": {
                        "name": "io.debezium.connector.schema.Change",
                        "optional": False,
                        "type": "struct",
                        "version": 1,
                        "fields": [
                            {"field": "type", "optional": False, "type": "string"},
                            {"field": "id", "optional": False, "type": "string"},
                        ],
                    },
                },
            ],
        }
    )


def _checkpoint_schemas(cluster: str) -> tuple[bytes, bytes]:
    name = f"{sanitize_name(cluster)}.watermark"
    key = {"type": "struct", "name": f"{name}.Key", "optional": False, "fields": []}
    value = {
        "type": "struct",
        "optional": False,
        "name": f"{name}.Envelope",
        "version": 1,
        "fields": [
            _source_schema(False),
            _field("string", "op", False),
            _field("int64", "ts_ms", True),
            _TRANSACTION_SCHEMA,
        ],
    }
    return orjson.dumps(key), orjson.dumps(value)


class DebeziumEncoder:
    """Encodes events as TiCDC's Debezium messages."""

    protocol = PROTOCOL

    def __init__(
        self, options: DebeziumOptions | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        self.options = options or DebeziumOptions()
        self.clock = clock or now_ms
        self._large = LargeMessages(PROTOCOL, self.options)
        self._plans: dict[int, _TablePlan] = {}
        schemas = not self.options.debezium_disable_schema
        self._ddl_schemas = (
            (_SCHEMA_CHANGE_KEY_SCHEMA, _schema_change_value_schema()) if schemas else (b"", b"")
        )
        self._checkpoint_schemas = (
            _checkpoint_schemas(self.options.cluster_id) if schemas else (b"", b"")
        )

    def encode(self, events: Iterable[Event]) -> list[Message]:
        out: list[Message] = []
        for event in events:
            if isinstance(event, RowChange):
                out.append(self._row_message(event))
            elif isinstance(event, Watermark):
                out.append(self._checkpoint_message(event))
            elif isinstance(event, DDLEvent):
                out.append(self._ddl_message(event))
            elif not isinstance(event, Bootstrap):  # (Debezium has no bootstrap message)
                raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")
        return out

    # rows --------------------------------------------------------------------------------

    def _plan(self, schema: TableSchema) -> _TablePlan:
        plan = self._plans.get(id(schema))
        if plan is not None and plan.schema is schema:
            return plan
        if len(self._plans) > 4096:
            self._plans.clear()
        plan = self._plans[id(schema)] = _TablePlan(schema, self.options)
        return plan

    def _source(self, database: str, table: str, commit_ts: int) -> dict[str, Any]:
        cluster = self.options.cluster_id
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": cluster,
            "ts_ms": physical_ms(commit_ts),
            "snapshot": "false",
            "db": database,
            "table": table,
            "server_id": 0,
            "gtid": None,
            "file": "",
            "pos": 0,
            "row": 0,
            "thread": 0,
            "query": None,
            "commit_ts": commit_ts,
            "cluster_id": cluster,
        }

    def _row_message(self, row: RowChange) -> Message:
        try:
            key, value = self._row_bytes(row)
        except EncodeError:
            raise
        except INPUT_ERRORS as error:
            raise row_encode_error(PROTOCOL, row, error) from error
        key, value = self._large.compress(key), self._large.compress(value)
        size = len(key) + len(value)
        if not self._large.fits(size):  # (shrink raises: the only option here is none)
            self._large.shrink(row, size, lambda: (key, value), _no_small)
        schema = row.schema
        return Message(key, value, Route.DISPATCH, schema.database, schema.table, rows=1)

    def _row_bytes(self, row: RowChange) -> tuple[bytes, bytes]:
        plan = self._plan(row.schema)
        before, after = _images(row)
        schema = row.schema
        payload: dict[str, Any] = {
            "source": self._source(schema.database, schema.table, row.commit_ts),
            "ts_ms": self.clock(),
            "transaction": None,
            "op": _OPS[row.kind],
        }
        if row.kind is RowKind.INSERT:
            payload["before"], payload["after"] = None, plan.image(after)
        elif row.kind is RowKind.DELETE:
            payload["after"], payload["before"] = None, plan.image(before)
        else:
            if self.options.debezium_output_old_value and before is not None:
                payload["before"] = plan.image(before)
            payload["after"] = plan.image(after)
        key_image = plan.key(before if row.kind is RowKind.DELETE else after)  # type: ignore[arg-type]
        return (
            _envelope(key_image, plan.key_schema),
            _envelope(payload, plan.value_schema),
        )

    # DDL and checkpoints -------------------------------------------------------------------

    def _ddl_message(self, ddl: DDLEvent) -> Message:
        change = _CHANGE_TYPES.get(ddl.ddl_type)
        if change is None:
            raise EncodeError(
                f"{PROTOCOL}: TiCDC's Debezium encoder does not support DDL type "
                f"{ddl.ddl_type.name} ({ddl.query!r})"
            )
        table_changes = []
        if ddl.table and ddl.ddl_type is not DDLType.TRUNCATE_TABLE:
            # TiCDC also describes the table's columns here (Debezium's schema history
            # format); only the change's type and id are written (see docs/protocols.md)
            table_changes.append({"type": change, "id": f'"{ddl.database}"."{ddl.table}"'})
        payload = {
            "source": {**self._source(ddl.database, ddl.table, ddl.commit_ts)},
            "ts_ms": self.clock(),
            "databaseName": ddl.database,
            "schemaName": None,
            "ddl": ddl.query,
            "tableChanges": table_changes,
        }
        key_schema, value_schema = self._ddl_schemas
        key = self._large.compress(_envelope({"databaseName": ddl.database}, key_schema))
        value = self._large.compress(_envelope(payload, value_schema))
        return Message(key, value, Route.ALL_PARTITIONS, ddl.database, ddl.table)

    def _checkpoint_message(self, watermark: Watermark) -> Message:
        payload = {
            "source": self._source("", "", watermark.ts),
            "ts_ms": self.clock(),
            "transaction": None,
            "op": CHECKPOINT_OP,
        }
        key_schema, value_schema = self._checkpoint_schemas
        key = self._large.compress(_envelope({}, key_schema))
        value = self._large.compress(_envelope(payload, value_schema))
        return Message(key, value, Route.ALL_TOPICS)


def _no_small(location: str | None) -> tuple[bytes | None, bytes, int]:  # pragma: no cover
    raise AssertionError("debezium options allow large-message-handle-option=none only")


def _images(row: RowChange) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The row's (before, after), checked; an UPDATE may lack its before image (one decoded
    from a Debezium stream with the old value off): it is sent without one, as TiCDC sends
    every UPDATE with ``debezium-output-old-value=false``."""
    if row.kind is RowKind.UPDATE and row.before is None:
        return None, row_images(dataclasses.replace(row, kind=RowKind.INSERT))[1]
    return row_images(row)
