"""The Confluent wire format: magic byte 0, the schema id as a big-endian int32, then the
Avro binary datum (schemaless)."""

from __future__ import annotations

import struct

from ticdc_spark.errors import DecodeError

__all__ = ["HEADER_SIZE", "frame", "unframe"]

MAGIC = 0
_HEADER = struct.Struct(">bI")
HEADER_SIZE = _HEADER.size


def frame(schema_id: int, body: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + body


def unframe(data: bytes, part: str) -> tuple[int, memoryview]:
    """(schema id, Avro body) of a key or value; a DecodeError when it is not framed."""
    if len(data) < HEADER_SIZE:
        raise DecodeError(
            f"{part} is {len(data)} bytes: a Confluent Avro {part} has at least {HEADER_SIZE} "
            "(magic byte and schema id)"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError(f"{part} starts with byte {data[0]:#04x}, not the Confluent magic 0x00")
    return schema_id, memoryview(data)[HEADER_SIZE:]
