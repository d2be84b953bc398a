"""The Canal-JSON decoder: one decode path, and the two batch paths that fall back to it.

:meth:`CanalJSONDecoder.decode_into` decodes one message into a sink, its row images as
canonical values or as changelog text (``sink.text``: the wire text checked, binary values
rewritten as base64, nothing else converted).  The batch paths (:mod:`.batch`, a list of
values; :mod:`.arrow`, the compiled scanner) take the messages they understand at a glance and
hand every other one to the one path; all three find table shapes in one :class:`PlanMemo`.

The decoder also reads genuine Alibaba Canal output: several rows per message, ``old`` with
only the changed columns (a key present with null is a change to NULL, an absent key is
unchanged), parameterised ``mysqlType`` such as ``enum('a','b')``, Canal's own ``sqlType``
codes (never needed: types come from ``mysqlType``) and Java float text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import orjson

from ticdc_spark.codec.base import ChangelogSink, DecoderBase, EventSink, Message, RowSink
from ticdc_spark.codec.canal_json.batch import Names, Numbers, OneByOne, Values
from ticdc_spark.codec.canal_json.batch import decode_batch as decode_values
from ticdc_spark.codec.canal_json.fields import (
    NO_TIDB,
    ROW_KINDS,
    commit_ts,
    data_and_old,
    int_field,
    str_field,
)
from ticdc_spark.codec.canal_json.images import canonical_image, text_image
from ticdc_spark.codec.canal_json.options import PROTOCOL, WATERMARK_TYPE, CanalJSONOptions
from ticdc_spark.codec.canal_json.plan import PlanMemo, SchemaTexts
from ticdc_spark.codec.canal_json.sqltypes import DDL_TYPE_OF_NAME
from ticdc_spark.codec.common import INPUT_ERRORS, TemporalFsp, loads, require_dict
from ticdc_spark.codec.largemsg import LargeMessages
from ticdc_spark.errors import DecodeError
from ticdc_spark.filter import TableFilter
from ticdc_spark.model import DDLEvent, DDLType, Event, RowKind, Watermark
from ticdc_spark.sql import classify

__all__ = ["CanalJSONDecoder"]

_UPDATE, _DELETE = RowKind.UPDATE, RowKind.DELETE
Position = tuple[str, int, int]
Image = dict[str, Any] | None


class CanalJSONDecoder(DecoderBase):
    """Decodes Canal-JSON from TiCDC and from Alibaba Canal."""

    protocol = PROTOCOL

    def __init__(
        self, options: CanalJSONOptions | None = None, *, table_filter: TableFilter | None = None
    ) -> None:
        self.options = options or CanalJSONOptions()
        # the table filter, or None when every table is kept (TableFilter's default)
        self._keep = None if table_filter is None or table_filter.everything else table_filter
        self._memo = PlanMemo(self._keep)
        self._fsp = TemporalFsp()
        self._large = LargeMessages(PROTOCOL, self.options)
        self._compressed = self.options.large_message_handle_compression != "none"
        self._events = EventSink()

    def decode(self, message: Message) -> list[Event]:
        """:meth:`decode_into` an :class:`EventSink`, as :class:`DecoderBase` does, with one
        sink per decoder rather than per message (making one costs 4% of a small message's
        decoding).  A decoder serves one thread, as its plan memo already requires."""
        sink = self._events
        events: list[Event] = []  # (a fresh list: callers keep the one returned)
        sink.events = events
        self.decode_into(message, sink)
        return events

    def decode_into(self, message: Message, sink: RowSink) -> None:
        try:  # (not a context manager: this runs once per message)
            value = message.value
            if value is None:
                raise DecodeError("a Canal-JSON message needs a value")
            if self._compressed:
                value = self._large.decompress(value)
            try:
                obj = orjson.loads(value)
            except orjson.JSONDecodeError:
                obj = loads(value)  # (raises, saying the message is not JSON)
            if type(obj) is not dict:
                obj = require_dict(obj, "message")  # (raises: this is the error's text)
            position = (message.topic, message.partition or 0, message.offset or 0)
            self._object_into(obj, sink, position)
        except DecodeError as exc:
            raise exc.at(message.position, PROTOCOL) from None
        except INPUT_ERRORS as exc:
            raise DecodeError(
                str(exc) or type(exc).__name__,
                protocol=PROTOCOL,
                position=message.position,
                payload=message.value,
            ) from None

    def decode_batch(
        self,
        values: Values,
        topics: Names,
        partitions: Numbers,
        offsets: Numbers,
        sink: ChangelogSink,
        one_by_one: OneByOne,
    ) -> None:
        """The changelog rows of a batch of messages (:func:`.batch.decode_batch`)."""
        if self._compressed:
            for i in range(len(values)):
                one_by_one(i)
            return
        columns = (values, topics, partitions, offsets)
        decode_values(self._memo, columns, sink, one_by_one)

    def decode_arrow_batch(
        self, batch: Any, careful: Callable[[int], None], sink: ChangelogSink
    ) -> Any:
        """The changelog batch of an Arrow batch of Kafka records, with the compiled scanner
        (:mod:`.arrow`); None when it is not installed or does not apply.  ``careful(i)``
        decodes record ``i`` with every check into ``sink``."""
        if self._compressed:
            return None
        from ticdc_spark.codec.canal_json.arrow import decode_batch  # (pyarrow: the spark extra)

        memo = self._memo
        return decode_batch(batch, careful, sink, lambda text: memo.fast_shape(text, sink))

    # one message ----------------------------------------------------------------------------

    def _object_into(self, obj: dict[str, Any], sink: RowSink, position: Position) -> None:
        """Decode one parsed message (errors carry no position: the caller adds it)."""
        kind = obj.get("type")
        if self._keep is not None and kind != WATERMARK_TYPE and not self._kept(obj):
            return  # a filtered table's message: its rows are never looked at
        tidb = obj.get("_tidb")
        tidb = tidb if isinstance(tidb, dict) else NO_TIDB
        if obj.get("isDdl") is True:
            sink.add_events([self._ddl(obj, tidb)], *position)
            return
        if kind == WATERMARK_TYPE:
            watermark = Watermark(int_field(tidb.get("watermarkTs"), "_tidb.watermarkTs"))
            sink.add_events([watermark], *position)
            return
        row_kind = ROW_KINDS.get(kind)  # type: ignore[arg-type]
        if row_kind is None:  # (a statement Canal calls QUERY comes with "isDdl": true)
            raise DecodeError(
                f"unknown message type {kind!r}: not INSERT, UPDATE, DELETE, "
                f'{WATERMARK_TYPE} or a DDL ("isDdl": true)'
            )
        location = tidb.get("claimCheckLocation")
        if location:
            self._object_into(self._claim_checked(location), sink, position)
            return
        self._rows_into(obj, row_kind, tidb, sink, position)

    def _kept(self, obj: dict[str, Any]) -> bool:
        """Whether the table filter keeps the message's table (a DDL without a table: its
        schema).  A name that is not a string counts as empty."""
        database, table = obj.get("database"), obj.get("table")
        database = database if type(database) is str else ""
        table = table if type(table) is str else ""
        keep = cast(TableFilter, self._keep)
        if not table and obj.get("isDdl") is True:
            return keep.matches_schema(database)
        return keep.matches(database, table)

    def _claim_checked(self, location: Any) -> dict[str, Any]:
        """The full message a claim-check pointer names."""
        _key, value = self._large.fetch(str(location))
        value = self._large.decompress(value)
        obj = require_dict(loads(value, "claim-check message"), "claim-check message")
        obj.get("_tidb", {}).pop("claimCheckLocation", None)
        return obj

    def _ddl(self, obj: dict[str, Any], tidb: dict[str, Any]) -> DDLEvent:
        sql = obj.get("sql") or ""
        if not isinstance(sql, str):
            raise DecodeError("DDL 'sql' must be a string")
        ddl_type = classify(sql)
        if ddl_type is DDLType.NONE:
            ddl_type = DDL_TYPE_OF_NAME.get(str(obj.get("type")), DDLType.NONE)
        database, table = str_field(obj, "database"), str_field(obj, "table")
        return DDLEvent(ddl_type, sql, commit_ts(obj, tidb), database, table)

    def _rows_into(
        self,
        obj: dict[str, Any],
        kind: RowKind,
        tidb: dict[str, Any],
        sink: RowSink,
        position: Position,
    ) -> None:
        data, old = data_and_old(obj, kind)
        ts = commit_ts(obj, tidb)
        plan = self._memo.plan(obj, data[0])
        image = text_image if (text := sink.text) else canonical_image
        schema_text = None  # (a changelog sink takes the schema JSON the plan keeps)
        if text and hasattr(sink, "schema_text"):
            schema_text = plan.changelog_schema(cast(SchemaTexts, sink))
        fsp, temporal = None if text or not plan.temporal else self._fsp, plan.temporal
        add_row, key_only = sink.add_row, tidb.get("onlyHandleKey") is True
        for seq, raw in enumerate(data):
            row = image(plan, raw if not seq else require_dict(raw, "data row"))
            raw_old = require_dict(old[seq], "old row") if old is not None else None
            schema = (
                plan.schema if fsp is None else fsp.apply(plan.schema, temporal, (raw, raw_old))
            )
            before: Image = row  # (a DELETE's)
            after: Image = None
            if kind is _UPDATE:
                before = {**row, **image(plan, raw_old)} if raw_old is not None else dict(row)
                after = row
            elif kind is not _DELETE:
                before, after = None, row
            add_row(
                kind,
                schema,
                ts,
                before,
                after,
                (*position, seq),
                key_only=key_only,
                schema_text=schema_text,
            )
