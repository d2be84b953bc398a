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
from importlib import resources
from typing import Any

import fastavro
import orjson

from ticdc_spark.errors import DecodeError

__all__ = ["SCHEMA", "long_bytes", "read_message", "row_map_bytes", "write_message"]

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
    """An Avro ``long``: zigzag, then base-128 varint."""
    if not _I64_MIN <= value <= _I64_MAX:
        raise ValueError(f"{value} does not fit an Avro long")
    n = (value << 1) ^ (value >> 63)
    if n < 0x80:
        return _ONE_BYTE[n]
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


# A map value's union branch: its index (zigzag, one byte) and how its value is written.
_BRANCHES: dict[str, Callable[[Any], bytes]] = {
    "long": lambda v: b"\x02" + long_bytes(v),
    "float": lambda v: b"\x04" + _FLOAT.pack(v),
    "double": lambda v: b"\x06" + _DOUBLE.pack(v),
    "string": lambda v: b"\x08" + _string(v),
    "bytes": lambda v: b"\x0a" + _bytes(v),
    _NS + "Timestamp": lambda v: b"\x0c" + _string(v["location"]) + _string(v["value"]),
    _NS + "UnsignedBigint": lambda v: b"\x0e" + long_bytes(v["value"]),
}

# A plan column: (its map key as written, its name, canonical value -> (branch, value)).
PlanColumn = tuple[bytes, str, Callable[[Any], tuple[str, Any]]]


def plan_column(name: str, encode: Callable[[Any], tuple[str, Any]]) -> PlanColumn:
    return (_string(name), name, encode)


def row_map_bytes(columns: tuple[PlanColumn, ...], image: dict[str, Any]) -> bytes:
    """The ``data``/``old`` union (map branch) of an image: its columns in plan order."""
    parts = []
    for key, name, encode in columns:
        if name not in image:
            continue
        value = image[name]
        if value is None:
            parts.append(key + b"\x00")
        else:
            branch, wire = encode(value)
            parts.append(key + _BRANCHES[branch](wire))
    if not parts:
        return b"\x02\x00"
    return b"\x02" + long_bytes(len(parts)) + b"".join(parts) + b"\x00"


_DML_TYPES = {"INSERT": b"\x00", "UPDATE": b"\x02", "DELETE": b"\x04"}
_DML_HEAD = b"\x16\x06\x06\x02"  # Message in the union, type DML, payload DML, version 1


def dml_bytes(head: dict[str, Any], data: bytes | None, old: bytes | None) -> bytes:
    """A DML message: ``head`` holds the record's scalar members, ``data``/``old`` the maps
    (from :func:`row_map_bytes`) or None."""
    checksum = head.get("checksum")
    location = head.get("claimCheckLocation")
    parts = [
        _DML_HEAD,
        _string(head["database"]),
        _string(head["table"]),
        long_bytes(head["tableID"]),
        _DML_TYPES[head["type"]],
        long_bytes(head["commitTs"]),
        long_bytes(head["buildTs"]),
        long_bytes(head["schemaVersion"]),
        b"\x00" if location is None else b"\x02" + _string(location),
        b"\x00" if not head.get("handleKeyOnly") else b"\x02\x01",
        b"\x00" if checksum is None else b"\x02" + _checksum(checksum),
        b"\x00" if data is None else data,
        b"\x00" if old is None else old,
    ]
    return b"".join(parts)


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
