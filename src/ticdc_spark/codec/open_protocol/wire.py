"""Open Protocol's wire layout: the batch framing, event keys and TiDB type codes.

A message is a batch (``shared/spec/open-protocol.ja.txt``, REFERENCE.md)::

    key   = u64be(1) { u64be(len) keyJSON }*
    value =          { u64be(len) valueJSON }*      (the i-th value belongs to the i-th key)

Key JSON ``{"ts","scm","tbl","ptn","t","ohk","ccl"}`` (t: 1 row, 2 DDL, 3 resolved); TiCDC's
newer pingcap/ticdc writes ``ptn`` after ``t``, so keys are read in any member order.  The
row values' columns carry TiDB's ``mysql.Type*`` byte (``types.TYPE_CODE``) and flags.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from typing import Any

import orjson

from ticdc_spark.codec.common import loads, require_dict
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import ColumnFlag
from ticdc_spark.types import TYPE_CODE, TYPE_NAMES, ColumnType, Family

__all__ = ["PROTOCOL", "column_type", "entries", "frame_key", "frame_values", "key_json"]

PROTOCOL = "open-protocol"
BATCH_VERSION = 1
U64 = struct.Struct(">Q")
ROW, DDL, RESOLVED = 1, 2, 3  # the key's "t"
# What TiCDC counts for one entry of a batch besides its JSON: the key's and the value's
# length prefixes.
ENTRY_PREFIXES = 16
VERSION_PREFIX = 8  # the batch key's version, counted once per message

# --------------------------------------------------------------------------------------------
# Framing


def frame_key(keys: list[bytes]) -> bytes:
    """A batch key: the version, then each key JSON with its length."""
    return U64.pack(BATCH_VERSION) + frame_values(keys)


def frame_values(values: list[bytes]) -> bytes:
    parts: list[bytes] = []
    for value in values:
        parts += (U64.pack(len(value)), value)
    return b"".join(parts)


def entries(data: bytes, start: int, what: str) -> Iterator[bytes]:
    """Walk ``u64be(len) bytes`` entries, never trusting a length beyond the data."""
    pos, end = start, len(data)
    while pos < end:
        if end - pos < 8:
            raise DecodeError(f"{what} ends inside a length prefix at byte {pos}")
        length = U64.unpack_from(data, pos)[0]
        pos += 8
        if length > end - pos:
            raise DecodeError(
                f"{what} entry at byte {pos - 8} claims {length} bytes, only {end - pos} remain"
            )
        yield data[pos : pos + length]
        pos += length


def batch(key: bytes, value: bytes) -> Iterator[tuple[dict[str, Any], bytes | None]]:
    """The (key object, value JSON) pairs of a batch; the value is None past its last entry
    (a resolved event may have none)."""
    if len(key) < 8:
        raise DecodeError(f"key has {len(key)} bytes, shorter than the 8-byte version")
    version = U64.unpack_from(key)[0]
    if version != BATCH_VERSION:
        raise DecodeError(f"unsupported batch version {version} (expected 1)")
    values = entries(value, 0, "value")
    for key_json in entries(key, 8, "key"):
        key_obj = loads(key_json, "event key")
        if type(key_obj) is not dict:
            require_dict(key_obj, "event key")  # (the error; called only then: once per row)
        yield key_obj, next(values, None)
    if next(values, None) is not None:
        raise DecodeError("value has more entries than key")


# --------------------------------------------------------------------------------------------
# Event keys


def names_json(database: str, table: str) -> bytes:
    """``,"scm":..,"tbl":..`` of an event key, as Go writes them (empty names left out)."""
    names = b""
    if database:
        names += b',"scm":' + go_json(orjson.dumps(database))
    if table:
        names += b',"tbl":' + go_json(orjson.dumps(table))
    return names


def key_json(
    ts: int, kind: int, names: bytes, partition: int | None = None, marks: bytes = b""
) -> bytes:
    """An event key in TiCDC's member order; ``marks`` are the large-message members."""
    ptn = b"" if partition is None else b',"ptn":%d' % partition
    return b'{"ts":%d%s%s,"t":%d%s}' % (ts, names, ptn, kind, marks)


def large_marks(location: str | None) -> bytes:
    """The key members of a row sent with only its handle-key columns: the claim-check
    location when the full row was stored, else the handle-key-only marker."""
    if location is None:
        return b',"ohk":true'
    return b',"ccl":' + go_json(orjson.dumps(location))


def guess_kind(value: bytes | None) -> int:
    """An event type from the value, for keys without "t" (TiCDC's Java example data)."""
    if not value:
        return RESOLVED
    obj = loads(value, "event value")
    if isinstance(obj, dict) and "q" in obj:
        return DDL
    return ROW


def expect_str(value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError(f"expected a string, got {value!r}")
    return value


def str_field(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if value is None:
        return ""
    return expect_str(value)


# --------------------------------------------------------------------------------------------
# Row values

# A JSON -0 (how Go writes a DOUBLE or FLOAT negative zero), which orjson reads as the int 0.
_NEGATIVE_ZERO = re.compile(rb"[:\[,]\s*-0(?![.0-9eE])")


def row_value(value: bytes) -> dict[str, Any]:
    """A row event's value object, keeping a negative zero's sign (orjson checks the JSON;
    the standard parser, told to read -0 as a float, runs only when the text holds one)."""
    obj = loads(value, "row value")
    # (a substring test first: dates put "-0" in most rows, and the search costs a third of
    # the decoding; Go writes no space after the colon)
    if b":-0" in value and _NEGATIVE_ZERO.search(value):
        obj = json.loads(value, parse_int=lambda text: -0.0 if text == "-0" else int(text))
    if type(obj) is not dict:
        require_dict(obj, "row value")  # (the error)
    return obj  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# Type codes: TiDB's mysql.Type* bytes (types.TYPE_CODE / types.TYPE_NAMES).

_SIGNED_FAMILIES = frozenset((Family.INTEGER, Family.FLOAT, Family.DOUBLE, Family.DECIMAL))
_VARCHAR = 15  # the code of a type TiDB has no code for


def column_type(code: int, flags: int) -> ColumnType:
    """The column type a type code and flags stand for."""
    names = TYPE_NAMES.get(code)
    if names is None:
        return ColumnType(f"type{code}")
    ctype = ColumnType(names[1] if flags & ColumnFlag.BINARY else names[0])
    if flags & ColumnFlag.UNSIGNED and ctype.family in _SIGNED_FAMILIES:
        ctype = ColumnType(ctype.name, unsigned=True)
    return ctype


def type_code(ctype: ColumnType) -> int:
    return TYPE_CODE.get(ctype.name, _VARCHAR)
