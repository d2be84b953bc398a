"""The Simple protocol's Avro encoding: raw Avro binary of TiCDC's schema, no registry.

TiCDC (goavro) encodes with the whole schema file, a JSON array of named types, which Avro
reads as a union: every message starts with the union index of ``Message`` (11, the byte
``0x16``), then the ``Message`` record (its ``type`` enum and its ``payload`` union).  The
schema is ``message.avsc`` (``shared/spec/simple-avro-schema.json``, TiCDC's
``message.json``).

fastavro writes and reads every message, but for one: a DML message is written here,
byte for byte what fastavro writes for the same record (tests check), from a per-table plan
of constant fragments.  fastavro resolves each map value's union at run time, which costs
more than the rest of the row together on a wide table.  Map entries are written in
column-name order (TiCDC's order is its Go map's, which varies).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro
import orjson

from ticdc_spark.errors import DecodeError
from ticdc_spark.types import ColumnType, Family

__all__ = ["SCHEMA", "long_bytes", "plan_column", "read_message", "row_map_bytes", "write_message"]

SCHEMA: Any = fastavro.parse_schema(
    orjson.loads(resources.files(__package__).joinpath("message.avsc").read_bytes())
)
_NS = "com.pingcap.simple.avro."
_MESSAGE = _NS + "Message"
_PAYLOADS = {"WATERMARK": _NS + "Watermark", "BOOTSTRAP": _NS + "Bootstrap", "DDL": _NS + "DDL"}
_PAYLOADS["DML"] = _NS + "DML"

_ONE_BYTE = [bytes([i]) for i in range(128)]
_FLOAT, _DOUBLE = struct.Struct("<f"), struct.Struct("<d")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def long_bytes(value: int) -> bytes:
    """An Avro ``long``: zigzag, then base-128 varint (short ones without a loop)."""
    if not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"{value} does not fit an Avro long")
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        return _ONE_BYTE[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode()
    return long_bytes(len(data)) + data


def _bytes(data: bytes) -> bytes:
    return long_bytes(len(data)) + data


# How a planned column's canonical value is written (its union branch and value).
LONG, UNSIGNED_BIGINT, FLOAT, DOUBLE, STRING, BYTES, TEXT, TIMESTAMP = range(8)
_BRANCH_BYTE = {
    LONG: b"\x02",
    FLOAT: b"\x04",
    DOUBLE: b"\x06",
    STRING: b"\x08",
    TEXT: b"\x08",
    BYTES: b"\x0a",
    TIMESTAMP: b"\x0c",
    UNSIGNED_BIGINT: b"\x0e",
}
_MISSING = object()

# A plan column: (its map entry with a null value, its map key and value branch as written,
# its name, how (above), its text formatter or None).
PlanColumn = tuple[bytes, bytes, str, int, Callable[[Any], str] | None]


def plan_column(
    name: str, ctype: ColumnType, text: Callable[[Any], str] | None, location: bytes
) -> PlanColumn:
    """How a column's values are written: TiCDC's encodeValue4Avro as a kind (see
    :mod:`.dialect`), ``text`` formatting the TEXT and TIMESTAMP kinds, ``location`` the
    TIMESTAMP record's first member as written."""
    family = ctype.family
    if family in (Family.INTEGER, Family.YEAR, Family.ENUM, Family.SET, Family.BIT):
        unsigned_bigint = ctype.name == "bigint" and ctype.unsigned
        how = UNSIGNED_BIGINT if unsigned_bigint else LONG
    else:
        how = _HOW.get(family, TEXT)
        if how == TEXT and ctype.name == "timestamp":
            how = TIMESTAMP
    key = _string(name)
    prefix = key + _BRANCH_BYTE[how] + (location if how == TIMESTAMP else b"")
    return (key + b"\x00", prefix, name, how, text)


_HOW = {
    Family.FLOAT: FLOAT,
    Family.DOUBLE: DOUBLE,
    Family.STRING: STRING,
    Family.JSON: STRING,
    Family.BYTES: BYTES,
}


def row_map_bytes(
    columns: tuple[PlanColumn, ...], image: dict[str, Any], texts: dict[str, Any] | None = None
) -> bytes:
    """The ``data``/``old`` union (map branch) of an image: its columns in plan order.

    Kept flat (one loop, the kinds inline): it runs once per column of every row.  ``texts``
    may hold the text of the TEXT and TIMESTAMP columns already (from the compiled loop)."""
    if texts:
        image = {**image, **texts}  # (their text: str values, written as is)
    parts = []
    for null, prefix, name, how, text in columns:
        value = image.get(name, _MISSING)
        if value is None:
            parts.append(null)
        elif value is _MISSING:
            continue
        elif how == LONG:
            if -64 <= value < 64:
                parts.append(prefix + _ONE_BYTE[(value << 1) ^ (value >> 63)])
            else:  # (over 2**63: an unsigned value, cast to int64 as TiCDC does)
                parts.append(prefix + long_bytes(value - (1 << 64) if value > _I64_MAX else value))
        elif how in (STRING, TEXT):
            data = (value if type(value) is str else text(value)).encode()  # type: ignore[misc]
            size = len(data)
            parts.append(prefix + (_ONE_BYTE[size << 1] if size < 64 else long_bytes(size)) + data)
        elif how == BYTES:
            size = len(value)
            parts.append(prefix + (_ONE_BYTE[size << 1] if size < 64 else long_bytes(size)) + value)
        elif how == FLOAT:
            parts.append(prefix + _FLOAT.pack(value))
        elif how == DOUBLE:
            parts.append(prefix + _DOUBLE.pack(value))
        elif how == TIMESTAMP:
            parts.append(prefix + _string(value if type(value) is str else text(value)))  # type: ignore[misc]
        else:
            parts.append(prefix + long_bytes(value - (1 << 64) if value > _I64_MAX else value))
    if not parts:
        return b"\x02\x00"
    return b"\x02" + long_bytes(len(parts)) + b"".join(parts) + b"\x00"


def location_bytes(location: str) -> bytes:
    return _string(location)


_DML_TYPES = {"INSERT": b"\x00", "UPDATE": b"\x02", "DELETE": b"\x04"}
_DML_HEAD = b"\x16\x06\x06\x02"  # Message in the union, type DML, payload DML, version 1


def dml_bytes(head: dict[str, Any], data: bytes | None, old: bytes | None) -> bytes:
    """A DML message: ``head`` holds the record's scalar members, ``data``/``old`` the maps
    (from :func:`row_map_bytes`) or None."""
    checksum = head.get("checksum")
    location = head.get("claimCheckLocation")
    parts = [
        _DML_HEAD,
        _known_string(head["database"]),
        _known_string(head["table"]),
        _known_long(head["tableID"]),
        _DML_TYPES[head["type"]],
        long_bytes(head["commitTs"]),
        _known_long(head["buildTs"]),
        _known_long(head["schemaVersion"]),
        b"\x00" if location is None else b"\x02" + _string(location),
        b"\x00" if not head.get("handleKeyOnly") else b"\x02\x01",
        b"\x00" if checksum is None else b"\x02" + _checksum(checksum),
        b"\x00" if data is None else data,
        b"\x00" if old is None else old,
    ]
    return b"".join(parts)


# Members that repeat from row to row (names, ids, versions, the clock's millisecond).
_known_string = lru_cache(maxsize=4096)(_string)
_known_long = lru_cache(maxsize=4096)(long_bytes)


def _checksum(checksum: dict[str, Any]) -> bytes:
    return (
        long_bytes(checksum["version"])
        + (b"\x01" if checksum["corrupted"] else b"\x00")
        + long_bytes(checksum["current"])
        + long_bytes(checksum["previous"])
    )


def write_message(kind: str, payload: dict[str, Any]) -> bytes:
    """A WATERMARK, BOOTSTRAP, DDL or DML message (``kind``) by fastavro."""
    record = {"type": kind, "payload": (_PAYLOADS[kind], payload)}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMA, (_MESSAGE, record))
    return out.getvalue()


# Errors fastavro raises on bytes that are not a message of the schema.
_READ_ERRORS: tuple[type[BaseException], ...] = (EOFError, ValueError, IndexError, KeyError)
_READ_ERRORS += (TypeError, UnicodeDecodeError, OverflowError, struct.error, MemoryError)


def read_message(data: bytes) -> dict[str, Any]:
    """A message read back into the JSON encoding's layout (table schemas keep their Avro
    form, which :func:`~.wire.schema_from_wire` reads too; DML values stay Avro values)."""
    stream = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(stream, SCHEMA, None)
    except EOFError:  # (fastavro's text names the stream object: not for an error message)
        raise DecodeError(f"not a Simple Avro message: it ends early ({len(data)} bytes)") from None
    except _READ_ERRORS as exc:
        raise DecodeError(f"not a Simple Avro message: {type(exc).__name__}: {exc}") from None
    if not isinstance(record, dict) or "payload" not in record:
        raise DecodeError("not a Simple Avro Message record")
    if stream.tell() != len(data):
        raise DecodeError(f"{len(data) - stream.tell()} bytes after the Avro message")
    kind, payload = record["type"], record["payload"]
    if kind in ("WATERMARK", "BOOTSTRAP"):
        payload["type"] = kind
    if kind == "BOOTSTRAP":
        payload["commitTs"] = 0
    return payload  # type: ignore[no-any-return]
