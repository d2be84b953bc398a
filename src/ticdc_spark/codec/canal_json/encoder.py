"""The Canal-JSON encoder: TiCDC's bytes, one message per row, DDL and watermark.

A run of rows is written by the compiled writer when the options let it take rows whole (a
full ``old``, every column of a DELETE, no compression); the rows it leaves, and every row
under other options, are written by :func:`~.rowwriter.row_json`.  ``ts`` is the build time,
so two encodings of one event differ there and only there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import orjson

from ticdc_spark.codec.base import Message, Route
from ticdc_spark.codec.canal_json.options import PROTOCOL, WATERMARK_TYPE, CanalJSONOptions
from ticdc_spark.codec.canal_json.rowwriter import (
    EncodePlan,
    build_encode_plan,
    row_json,
    struct_message,
)
from ticdc_spark.codec.canal_json.sqltypes import canal_ddl_type
from ticdc_spark.codec.common import INPUT_ERRORS, now_ms, row_encode_error
from ticdc_spark.codec.compiled import CanalLayout
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.largemsg import RECORD_OVERHEAD, LargeMessages
from ticdc_spark.errors import EncodeError, TiCDCSparkError
from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    physical_ms,
)

__all__ = ["CanalJSONEncoder"]

_DELETE = RowKind.DELETE
_DISPATCH = Route.DISPATCH
_NEEDS_EXTENSION = " (with enable-tidb-extension=true)"


class CanalJSONEncoder:
    """Encodes events as Canal-JSON messages."""

    protocol = PROTOCOL

    def __init__(
        self, options: CanalJSONOptions | None = None, clock: Callable[[], int] | None = None
    ) -> None:
        self.options = options or CanalJSONOptions()
        self.clock = clock or now_ms
        self._plans: dict[tuple[int, bool], tuple[TableSchema, EncodePlan]] = {}
        # rows the compiled writer can take whole: a full old, every column of a DELETE, no
        # compression (the Python path writes the others)
        self._whole_rows = not (
            self.options.updated_old_only
            or self.options.delete_only_output_handle_key_columns
            or self.options.large_message_handle_compression != "none"
        )
        self._large = LargeMessages(PROTOCOL, self.options, _NEEDS_EXTENSION)
        self._others: dict[type, Callable[[Any], list[Message]]] = {
            DDLEvent: self._ddl_message,
            Watermark: self._watermark_message,
            Bootstrap: _no_message,
        }

    def encode(self, events: Iterable[Event]) -> list[Message]:
        out: list[Message] = []
        rows: list[RowChange] = []  # a run of rows, written together
        for event in events:
            if isinstance(event, RowChange):
                rows.append(event)
                continue
            if rows:
                self._rows_into(rows, out)
                rows = []
            write = self._others.get(type(event))
            if write is None:
                raise EncodeError(f"cannot encode {type(event).__name__} in {PROTOCOL}")
            out.extend(write(event))
        if rows:
            self._rows_into(rows, out)
        return out

    # rows -------------------------------------------------------------------------------

    def _rows_into(self, rows: list[RowChange], out: list[Message]) -> None:
        """Append the rows' messages: a run written by the compiled writer (one wall-clock
        reading for the run's "ts"), any row it leaves, and every row under other options,
        by :meth:`_row_message`.  A value that is not its column's canonical value raises an
        EncodeError naming the row and column, whichever writer met it."""
        try:
            self._write_rows(rows, out)
        except TiCDCSparkError:
            raise
        except INPUT_ERRORS as error:  # a wrong-typed value met a formatter
            raise self._failed_row(rows, error) from error

    def _failed_row(self, rows: list[RowChange], error: Exception) -> EncodeError:
        """The error naming the row of a run that cannot be written: each row is written alone
        (by the Python writer) until one fails, as the run's writer does not say which."""
        for row in rows:
            try:
                self._row_message(row)
            except TiCDCSparkError as own:
                return own if isinstance(own, EncodeError) else EncodeError(str(own))
            except INPUT_ERRORS as failure:
                return row_encode_error(PROTOCOL, row, failure)
        first, last = rows[0], rows[-1]
        return EncodeError(
            f"{PROTOCOL}: the {len(rows)} rows at ts {first.commit_ts}..{last.commit_ts} "
            f"failed together and not alone: {type(error).__name__}: {error}"
        )

    def _write_rows(self, rows: list[RowChange], out: list[Message]) -> None:
        values = None
        if self._whole_rows and compiled_values is not None:
            now = None if self.clock is now_ms else self.clock()  # None: C reads the clock
            with_tidb = self.options.enable_tidb_extension
            values = compiled_values.canal_rows(self._layout, rows, now, with_tidb)
        if values is None:
            out.extend(map(self._row_message, rows))
            return
        largest = self._large.limit - RECORD_OVERHEAD  # (LargeMessages.fits, inlined: per row)
        append, last, names = out.append, None, ("", "")
        for row, value in zip(rows, values, strict=True):
            if value is None or len(value) > largest:  # left to Python, or a large message
                append(self._row_message(row))
                continue
            if row.schema is not last:  # a run of one table's rows looks its names up once
                last = row.schema
                names = (last.database, last.table)
            append(Message(None, value, _DISPATCH, *names, 1))

    def _layout(self, schema: TableSchema) -> CanalLayout | None:
        return self._plan(schema, False).layout

    def _row_message(self, row: RowChange) -> Message:
        key_only = row.kind is _DELETE and self.options.delete_only_output_handle_key_columns
        value = self._large.compress(self._row_json(row, key_only, b""))
        if not self._large.fits(len(value)):
            _, value = self._large.shrink(
                row, len(value), lambda: (None, value), lambda at: self._small_row(row, at)
            )
        schema = row.schema
        return Message(None, value, _DISPATCH, schema.database, schema.table, rows=1)

    def _small_row(self, row: RowChange, location: str | None) -> tuple[None, bytes, int]:
        """The handle-key-only message of a row too large to send, with the claim-check
        location of its full message when it was stored."""
        if location is None:
            marker = b',"onlyHandleKey":true'
        else:
            marker = b',"claimCheckLocation":' + go_json(orjson.dumps(location))
        small = self._large.compress(self._row_json(row, True, marker))
        return None, small, len(small)

    def _row_json(self, row: RowChange, key_only: bool, tidb_marker: bytes) -> bytes:
        opts = self.options
        return row_json(
            self._plan(row.schema, key_only),
            row,
            key_only,
            opts.updated_old_only,
            tidb_marker if opts.enable_tidb_extension else None,
            self.clock(),
        )

    def _plan(self, schema: TableSchema, key_only: bool) -> EncodePlan:
        key = (id(schema), key_only)
        hit = self._plans.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        if len(self._plans) > 4096:
            self._plans.clear()
        plan = build_encode_plan(schema, key_only, self.options.content_compatible)
        self._plans[key] = (schema, plan)
        return plan

    # DDL and watermarks -----------------------------------------------------------------

    def _ddl_message(self, ddl: DDLEvent) -> list[Message]:
        obj = struct_message(
            ddl.database,
            ddl.table,
            True,
            canal_ddl_type(ddl.ddl_type),
            physical_ms(ddl.commit_ts),
            self.clock(),
            ddl.query,
        )
        if self.options.enable_tidb_extension:
            obj["_tidb"] = {"commitTs": ddl.commit_ts}
        value = self._large.compress(go_json(orjson.dumps(obj)))
        return [Message(None, value, Route.FIRST_PARTITION, ddl.database, ddl.table)]

    def _watermark_message(self, watermark: Watermark) -> list[Message]:
        if not self.options.enable_tidb_extension:
            return []
        ts = watermark.ts
        obj = struct_message("", "", False, WATERMARK_TYPE, physical_ms(ts), self.clock(), "")
        obj["_tidb"] = {"watermarkTs": ts}
        return [Message(None, self._large.compress(orjson.dumps(obj)), Route.ALL_TOPICS)]


def _no_message(event: Event) -> list[Message]:
    """Bootstrap events: Canal-JSON has no message for them."""
    return []
