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
from ticdc_spark.model import RowChecksum
from ticdc_spark.types import INT_BITS, ColumnType, Family, int64_cast

__all__ = ["SCHEMA", "VARINTS", "VARINT_PAIRS", "dml_head", "dml_members", "dml_options"]
__all__ += ["dml_type", "long_bytes", "plan_column", "read_message", "row_map_bytes", "varint"]
__all__ += ["KINDS", "message_kind", "write_message"]

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
    return _ONE_BYTE[n] if n < 0x80 else varint(n)


def varint(n: int) -> bytes:
    """The base-128 varint of a zigzagged long ``n`` of two bytes or more (``n`` >= 128).

    A value outside the 64-bit range zigzags to 2**64 or more (as ``(v << 1) ^ (v >> 63)``
    on Python's integers leaves it): that is refused.  The bytes are put together from tables
    of every 14-bit group (:data:`VARINTS`, :data:`VARINT_PAIRS`), a lookup per two bytes: a
    loop per byte, or spreading the 7-bit groups with whole-integer masks, costs twice as much
    on the 8- to 10-byte varints of commit timestamps and BIGINT values."""
    if n < 0x4000:
        return VARINTS[n]
    if n < 0x10000000:
        return VARINT_PAIRS[n & 0x3FFF] + VARINTS[n >> 14]
    if n < 0x40000000000:
        return VARINT_PAIRS[n & 0x3FFF] + VARINT_PAIRS[(n >> 14) & 0x3FFF] + VARINTS[n >> 28]
    if n >> 64:
        raise ValueError("a value outside the 64-bit range does not fit an Avro long")
    low = VARINT_PAIRS[n & 0x3FFF] + VARINT_PAIRS[(n >> 14) & 0x3FFF]
    low += VARINT_PAIRS[(n >> 28) & 0x3FFF]
    if n < 0x100000000000000:
        return low + VARINTS[n >> 42]
    return low + VARINT_PAIRS[(n >> 42) & 0x3FFF] + VARINTS[n >> 56]


# The varint of every n below 2**14 (one or two bytes), and every 14-bit group as two bytes
# that more follow (both continuation bits set).
VARINTS = tuple(
    bytes((n,)) if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7)) for n in range(0x4000)
)
VARINT_PAIRS = tuple(bytes(((n & 0x7F) | 0x80, (n >> 7) | 0x80)) for n in range(0x4000))


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
# its name, how (above), its text formatter or None, the bits of its largest zigzagged value:
# 65 where a value may be past 2**63 or the type does not say).
PlanColumn = tuple[bytes, bytes, str, int, Callable[[Any], str] | None, int]


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
    return (key + b"\x00", prefix, name, how, text, _zigzag_bits(ctype))


def _zigzag_bits(ctype: ColumnType) -> int:
    """The bit length of the largest zigzagged long a column of ``ctype`` holds (65 when not
    bounded below 2**63): how many varint bytes its writer must be ready for."""
    family, count = ctype.family, len(ctype.elements)
    if family is Family.INTEGER and ctype.name in INT_BITS:  # (signed: 2**(bits-1) each way)
        return INT_BITS[ctype.name] + ctype.unsigned
    if family is Family.YEAR:  # (0 or 1901..2155)
        return 13
    if family is Family.ENUM:  # an index, at most 65535
        return (count or 0xFFFF).bit_length() + 1
    if family is Family.SET and count:  # a bitmask of its members
        return count + 1
    if family is Family.BIT and ctype.length:
        return ctype.length + 1
    return 65


_HOW = {
    Family.FLOAT: FLOAT,
    Family.DOUBLE: DOUBLE,
    Family.STRING: STRING,
    Family.JSON: STRING,
    Family.BYTES: BYTES,
}


def _as_int64(value: int, bits: int) -> int:
    """A uint64 (a column of more than 63 bits) cast to int64 as TiCDC casts it; anything
    else as it is (out of range, the long's writer refuses it)."""
    return int64_cast(value) if bits > 64 else value


def row_map_bytes(columns: tuple[PlanColumn, ...], image: dict[str, Any]) -> bytes:
    """The ``data``/``old`` union (map branch) of an image: its columns in plan order.

    Kept flat (one loop, the kinds inline): it runs once per column of every row."""
    parts = []
    for null, prefix, name, how, text, bits in columns:
        value = image.get(name, _MISSING)
        if value is None:
            parts.append(null)
        elif value is _MISSING:
            continue
        elif how == LONG:
            if -64 <= value < 64:
                parts.append(prefix + _ONE_BYTE[(value << 1) ^ (value >> 63)])
            else:  # (over 2**63: an unsigned value, cast to int64 as TiCDC does)
                parts.append(prefix + long_bytes(_as_int64(value, bits)))
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
            parts.append(prefix + long_bytes(_as_int64(value, bits)))
    if not parts:
        return b"\x02\x00"
    return b"\x02" + long_bytes(len(parts)) + b"".join(parts) + b"\x00"


def location_bytes(location: str) -> bytes:
    return _string(location)


_DML_TYPES = {"INSERT": b"\x00", "UPDATE": b"\x02", "DELETE": b"\x04"}
_DML_HEAD = b"\x16\x06\x06\x02"  # Message in the union, type DML, payload DML, version 1

# A DML record is written in four pieces (ticdc_spark.codec.simple.encoder joins them): the
# table's constant head (dml_head), the row's type and timestamps (dml_members), the schema
# version (long_bytes), the row's optional members (dml_options), then its images.


def dml_head(database: str, table: str, table_id: int) -> bytes:
    """A table's DML messages up to the row's type: the message's branches, the record's
    ``version``, ``database``, ``table`` and ``tableID``."""
    return _DML_HEAD + _string(database) + _string(table) + long_bytes(table_id)


def dml_type(kind: str) -> bytes:
    """A DML record's ``type`` (INSERT, UPDATE or DELETE) as written."""
    return _DML_TYPES[kind]


def dml_members(kind: bytes, commit_ts: int, build_ts: int) -> bytes:
    """A DML record's ``type`` (from :func:`dml_type`), ``commitTs`` and ``buildTs``."""
    return kind + _known_long(commit_ts) + _known_long(build_ts)


def dml_options(location: str | None, key_only: bool, checksum: RowChecksum | None) -> bytes:
    """A DML record's ``claimCheckLocation``, ``handleKeyOnly`` and ``checksum`` unions."""
    if not location and not key_only and checksum is None:
        return b"\x00\x00\x00"
    return b"".join(
        (
            b"\x00" if not location else b"\x02" + _string(location),
            b"\x02\x01" if key_only else b"\x00",
            b"\x00" if checksum is None else b"\x02" + _checksum(checksum),
        )
    )


# The clock's millisecond repeats from row to row, and so does a transaction's commit ts.
_known_long = lru_cache(maxsize=256)(long_bytes)


def _checksum(checksum: RowChecksum) -> bytes:
    return (
        long_bytes(checksum.version)
        + (b"\x01" if checksum.corrupted else b"\x00")
        + long_bytes(checksum.current)
        + long_bytes(checksum.previous)
    )


def write_message(kind: str, payload: dict[str, Any]) -> bytes:
    """A WATERMARK, BOOTSTRAP, DDL or DML message (``kind``) by fastavro."""
    record = {"type": kind, "payload": (_PAYLOADS[kind], payload)}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMA, (_MESSAGE, record))
    return out.getvalue()


# Errors fastavro raises on bytes that are not a message of the schema, and what each says
# about the bytes (fastavro's own texts name Python internals: "list index out of range").
_READ_ERRORS: tuple[type[BaseException], ...] = (EOFError, ValueError, IndexError, KeyError)
_READ_ERRORS += (TypeError, UnicodeDecodeError, OverflowError, struct.error, MemoryError)
_PROBLEMS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    (UnicodeDecodeError, "holds a string that is not UTF-8"),  # (a ValueError: first)
    (IndexError, "holds a union branch or enum symbol out of the schema's range"),
    ((ValueError, OverflowError, MemoryError), "holds a length or number out of range"),
)
KINDS = ("WATERMARK", "BOOTSTRAP", "DDL", "DML")  # (MessageType's symbols, payload's branches)


def read_message(data: bytes) -> dict[str, Any]:
    """A message read back into the JSON encoding's layout (table schemas keep their Avro
    form, which :func:`~.wire.schema_from_wire` reads too; DML values stay Avro values).
    Bytes that are not one say how, in :func:`message_kind`'s and :func:`_unreadable`'s
    words (tests/test_simple_avro_reasons.py fuzzes them)."""
    kind = message_kind(data)
    stream = io.BytesIO(data)
    try:
        record = fastavro.schemaless_reader(stream, SCHEMA, None)
    except _READ_ERRORS as exc:
        raise DecodeError(_unreadable(kind, exc, stream.tell(), len(data))) from None
    if not isinstance(record, dict) or "payload" not in record:
        raise DecodeError("not a Simple Avro Message record")
    if stream.tell() != len(data):
        extra = len(data) - stream.tell()
        raise DecodeError(f"the Simple Avro {kind} message has {extra} bytes after its end")
    payload = record["payload"]
    if kind in ("WATERMARK", "BOOTSTRAP"):
        payload["type"] = kind
    if kind == "BOOTSTRAP":
        payload["commitTs"] = 0
    return payload  # type: ignore[no-any-return]


def message_kind(data: bytes) -> str:
    """The type a message's first three bytes name (the ``Message`` branch of the schema's
    union, its ``type`` symbol, its ``payload`` branch: each one byte), checked to agree."""
    if data[:1] != b"\x16":
        head = f"0x{data[0]:02x}" if data else "nothing"
        raise DecodeError(
            f"not a Simple Avro message: it starts with {head}, where TiCDC's start with 0x16 "
            "(the Message record of its schema)"
        )
    if len(data) < 3:
        raise DecodeError(f"not a Simple Avro message: it ends early ({len(data)} bytes)")
    symbol, branch = data[1], data[2]  # (zigzag varints: index i is the byte 2i)
    if symbol % 2 or symbol // 2 >= len(KINDS):
        raise DecodeError(
            f"not a Simple Avro message: its type (byte 0x{symbol:02x}) is none of "
            + ", ".join(KINDS)
        )
    kind = KINDS[symbol // 2]
    if branch != symbol:
        raise DecodeError(
            f"the Simple Avro {kind} message holds another record (payload branch "
            f"0x{branch:02x}, where a {kind} record is 0x{symbol:02x})"
        )
    return kind


def _unreadable(kind: str, exc: BaseException, at: int, size: int) -> str:
    """What is wrong with a message of ``kind`` fastavro could not read (raising ``exc``
    after reading ``at`` of its ``size`` bytes)."""
    if isinstance(exc, (EOFError, struct.error)) or (
        at >= size and not isinstance(exc, UnicodeDecodeError)
    ):
        return f"the Simple Avro {kind} message ends early ({size} bytes)"
    problem = next(
        (text for types, text in _PROBLEMS if isinstance(exc, types)),
        "does not fit TiCDC's Simple Avro schema",
    )
    return f"the Simple Avro {kind} message {problem} (read up to byte {at} of {size})"
