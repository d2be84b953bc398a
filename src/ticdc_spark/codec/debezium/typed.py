"""Typed readers (msgspec) of the common Debezium row message: both decode paths' fast start.

A row message as TiCDC writes it (and Kafka Connect's JsonConverter with a schema) is
``{"payload":{"op":..,"source":{..},"before":{..},"after":{..}},"schema":{..}}``.  Reading it
into typed structs skips what the changelog does not need (most ``source`` fields, the
Connect schema, kept as its raw text) and checks every JSON type while parsing.  A message
these structs do not fit, such as a DDL, a checkpoint, a value of another JSON type, a nested
value, an integer orjson would read as a float or an envelope with other members, fails
here, and the full path (orjson, every check) decodes it: so whatever the typed readers
accept, they read as orjson does.  msgspec does not check the members it skips as closely as
orjson: the bytes must be UTF-8 (checked here, :func:`utf8`), but a number past a double's
range (``1e999``) in a member the changelog does not read is passed over where orjson refuses
the whole message (tests/test_debezium_fast_paths.py states this one difference).
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = [
    "ENVELOPE",
    "KEY",
    "KEY_PAYLOAD",
    "NOT_TYPED",
    "RAW_NULL",
    "CommitTs",
    "Payload",
    "Source",
    "Value",
    "utf8",
]

# Integers within int64 (orjson reads past 2^64-1 as a float: the full path takes past int64).
JsonInt = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
# A commit ts TiCDC writes (a TSO within int64).
CommitTs = Annotated[int, msgspec.Meta(gt=0, le=(1 << 63) - 1)]
# A column value of a row image: a JSON scalar (nested values take the full path).
Value = str | JsonInt | float | bool | None


RAW_NULL = msgspec.Raw(b"null")  # (no schema, or a null one)


# (gc=False: these structs hold strings, numbers and dicts of scalars, never a cycle)
class Source(msgspec.Struct, gc=False):
    db: str = ""
    table: str = ""
    commit_ts: JsonInt | None = None


class Payload(msgspec.Struct, gc=False):
    op: str
    source: Source | None = None
    before: dict[str, Value] | None = None
    after: dict[str, Value] | None = None


class Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A value: ``{"payload": P}`` (``debezium-disable-schema``) or with a ``schema``."""

    payload: Payload
    schema: msgspec.Raw = RAW_NULL  # (the raw text: parsed only for a schema not yet planned)


class Key(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A key in the same envelope: only its column names are needed."""

    payload: dict[str, msgspec.Raw]
    schema: msgspec.Raw = RAW_NULL


def utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 (as orjson requires of a whole document)."""
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


ENVELOPE = msgspec.json.Decoder(Envelope)
KEY = msgspec.json.Decoder(Key)
KEY_PAYLOAD = msgspec.json.Decoder(dict[str, msgspec.Raw])  # (a key's payload: its names)
NOT_TYPED = (msgspec.DecodeError, msgspec.ValidationError)  # (the full path says why)
