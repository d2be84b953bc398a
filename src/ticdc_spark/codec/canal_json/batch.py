"""The batch path: a list of message values straight into changelog rows.

The Spark decode stage's path when the compiled scanner is not in use.  A row message with
one row of a table shape the plan memo recalls (TiCDC's, and Alibaba Canal's single-row ones)
takes a short path: parsed, its shape recognised, its images kept as the wire text.  Every
other message, and any message the short path does not understand, goes through
``one_by_one(i)``, which decodes message ``i`` with the full checks (and turns a bad one into
a dead letter).  The short path leaves one check to Arrow: image values must be strings or
null, which the sink's conversion enforces for the whole batch (the caller redoes the batch one
by one when it fails).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from ticdc_spark.codec.base import ChangelogSink
from ticdc_spark.codec.canal_json.fields import NO_TIDB, ROW_KINDS, commit_ts
from ticdc_spark.codec.canal_json.images import rewritten
from ticdc_spark.codec.canal_json.plan import PlanMemo
from ticdc_spark.errors import DecodeError

__all__ = ["Columns", "Names", "Numbers", "OneByOne", "Values", "decode_batch"]

# What a message the short path does not take raises on the way (then: the careful path).
_NOT_SHORT = (LookupError, TypeError, AttributeError, ValueError, DecodeError)

# A batch of Kafka records as lists: values, topics, partitions, offsets.
Values = list[bytes | None]
Names = list[str]
Numbers = list[int]
Columns = tuple[Values, Names, Numbers, Numbers]
OneByOne = Callable[[int], None]  # decodes message i with every check (or dead-letters it)
Image = dict[str, Any] | None
ShortRow = tuple[str, str, str, int, Image, Image, str, bool]


def decode_batch(
    memo: PlanMemo, columns: Columns, sink: ChangelogSink, one_by_one: OneByOne
) -> None:
    """Append the changelog rows of a batch of messages to ``sink`` (see the module);
    ``columns`` are the Kafka records' values, topics, partitions and offsets."""
    values, topics, partitions, offsets = columns
    append_row = sink.append_row
    for i, value in enumerate(values):
        try:
            op, database, table, ts, before, after, schema, key_only = _short_row(memo, value, sink)
        except _NOT_SHORT:
            one_by_one(i)
            continue
        position = (topics[i], partitions[i], offsets[i], 0)
        append_row(op, database, table, ts, before, after, schema, position, key_only)


def _short_row(memo: PlanMemo, value: Any, sink: ChangelogSink) -> ShortRow:
    """The changelog row of a message the short path takes; raises one of _NOT_SHORT if it
    does not take it."""
    obj = orjson.loads(value)
    op = obj["type"]
    tidb = obj.get("_tidb")
    if tidb is None:  # Alibaba Canal
        tidb = NO_TIDB
    ts = commit_ts(obj, tidb)  # (a bad one raises DecodeError)
    data = obj["data"]
    row = data[0]
    database, table = obj["database"], obj["table"]
    if (
        op not in ROW_KINDS
        or type(database) is not str  # (null names: the careful path's "")
        or type(table) is not str
        or len(data) != 1
        or "claimCheckLocation" in tidb
        or obj["isDdl"] is not False
    ):
        raise LookupError
    shape = memo.recall((database, table), obj["mysqlType"], obj["pkNames"] or (), row)
    if shape is None:
        raise LookupError  # a shape not seen last for this table: the careful path plans it
    plan = shape[3]
    before, after = _images(op, obj, row, shape[2])
    if plan.rewrites:
        before = None if before is None else rewritten(plan, before)
        after = None if after is None else rewritten(plan, after)
    key_only = tidb.get("onlyHandleKey") is True
    schema = plan.schema_text or plan.changelog_schema(sink)
    return op, database, table, ts, before, after, schema, key_only


def _images(op: str, obj: dict[str, Any], row: dict[str, Any], columns: Any) -> tuple[Image, Image]:
    """(before, after) of a one-row message; ``columns`` are the shape's first-row columns."""
    if op == "INSERT":
        return None, row
    if op == "DELETE":
        return row, None
    old = obj["old"]
    if len(old) != 1:
        raise LookupError
    before = old[0]
    if type(before) is not dict:
        raise LookupError
    if tuple(before) != columns:  # Alibaba Canal: only the changed columns
        if not before.keys() <= row.keys():
            raise LookupError
        before = {**row, **before}
    return before, row
