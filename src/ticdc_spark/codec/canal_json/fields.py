"""Reading a parsed Canal-JSON message's fields, with the errors that name them."""

from __future__ import annotations

from typing import Any

from ticdc_spark.codec.common import str_field
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import RowKind, compose_ts

__all__ = ["NO_TIDB", "ROW_KINDS", "commit_ts", "data_and_old", "int_field", "str_field"]

ROW_KINDS = {"INSERT": RowKind.INSERT, "UPDATE": RowKind.UPDATE, "DELETE": RowKind.DELETE}
NO_TIDB: dict[str, Any] = {}  # the _tidb of a message without the extension (never mutated)


def int_field(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise DecodeError(f"'{what}' must be a non-negative integer, got {value!r}")
    return value


def commit_ts(obj: dict[str, Any], tidb: dict[str, Any]) -> int:
    """The TiDB extension's commit ts; without it, ``es`` (milliseconds) shifted into a TSO,
    which orders Alibaba Canal's messages to the millisecond."""
    ts = tidb.get("commitTs")
    if type(ts) is int and ts >= 0:  # (the common case, without a call)
        return ts
    if ts is not None:
        return int_field(ts, "_tidb.commitTs")
    return compose_ts(int_field(obj.get("es") or 0, "es"))


def data_and_old(obj: dict[str, Any], kind: RowKind) -> tuple[list[Any], list[Any] | None]:
    """The ``data`` rows and, for an UPDATE, the ``old`` rows aligned with them."""
    data = obj.get("data")
    if not isinstance(data, list) or not data:
        raise DecodeError(f"{kind.value} message needs a non-empty 'data' array")
    old = obj.get("old") if kind is RowKind.UPDATE else None
    if old is not None and (not isinstance(old, list) or len(old) != len(data)):
        raise DecodeError("'old' must be an array as long as 'data'")
    return data, old
