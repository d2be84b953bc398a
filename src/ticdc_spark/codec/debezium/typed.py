"""Typed readers (msgspec) of the common Debezium row message: both decode paths' fast start.

A row message as TiCDC writes it (and Kafka Connect's JsonConverter with a schema) is
``{"payload":{"op":..,"source":{..},"before":{..},"after":{..}},"schema":{..}}``.  Reading it
into typed structs skips what the changelog does not need (most ``source`` fields, the
Connect schema, kept as its raw text) and checks every JSON type while parsing.  A message
these structs do not fit, such as a DDL, a checkpoint, a value of another JSON type, a nested
value, an integer orjson would read as a float or an envelope with other members, fails
here, and the full path (orjson, every check) decodes it: so whatever the typed readers
accept, they read as orjson does.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["ENVELOPE", "KEY", "NOT_TYPED", "PAYLOAD", "RAW_NULL", "Payload", "Source"]

# The int64 integers (orjson reads past 2^64-1 as a float; the full path takes all past int64).
JsonInt = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
# A column value of a row image: a JSON scalar (nested values take the full path).
Value = str | JsonInt | float | bool | None


RAW_NULL = msgspec.Raw(b"null")  # (no schema, or a null one)


class Source(msgspec.Struct):
    db: str = ""
    table: str = ""
    commit_ts: JsonInt | None = None


class Payload(msgspec.Struct):
    op: str
    source: Source | None = None
    before: dict[str, Value] | None = None
    after: dict[str, Value] | None = None


class Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """A value: ``{"payload": P}`` (``debezium-disable-schema``) or with a ``schema``."""

    payload: Payload
    schema: msgspec.Raw = RAW_NULL  # (the raw text: parsed only for a schema not yet planned)


class Key(msgspec.Struct, forbid_unknown_fields=True):
    """A key in the same envelope: only its column names are needed."""

    payload: dict[str, msgspec.Raw]
    schema: msgspec.Raw = RAW_NULL


ENVELOPE = msgspec.json.Decoder(Envelope)
PAYLOAD = msgspec.json.Decoder(Payload)
KEY = msgspec.json.Decoder(Key)
NOT_TYPED = (msgspec.DecodeError, msgspec.ValidationError)  # (the full path says why)
