"""Typed readers (msgspec) of the common Debezium row message: both decode paths' fast start.

A row message as TiCDC writes it (and Kafka Connect's JsonConverter with a schema) is
``{"payload":{"op":..,"source":{..},"before":{..},"after":{..}},"schema":{..}}``.  Reading it
into typed structs skips what the changelog does not need (most ``source`` fields, the
Connect schema, kept as its raw text) and checks every JSON type while parsing.  A message
these structs do not fit, such as a DDL, a checkpoint, a value of another JSON type, a nested
value, an integer orjson would read as a float or an envelope with other members, fails
here, and the full path (orjson, every check) decodes it: so whatever the typed readers
accept, they read as the full path does.  msgspec does not check the members it skips as
closely as orjson: the bytes must be UTF-8 (checked here, :func:`utf8`), but a number past a
double's range (``1e999``) in a member the changelog does not read is passed over where
orjson refuses the whole message (tests/test_debezium_fast_paths.py states this one
difference).

Exact numbers: a JSON number read as a double keeps 15 to 17 significant digits, and orjson
has no decimal mode.  The images of a table with DECIMAL columns are therefore read by
:data:`EXACT_ENVELOPE` / :data:`EXACT_IMAGES` (msgspec with ``float_hook=Decimal``: each
number with a fraction or exponent becomes the ``Decimal`` of its text, each integer an exact
int), on every path: the typed start picks it for a schema it knows is such a table's, the
full path reads such a table's images again with it, the batch path reads such a shape with
it.  Reading every image so would cost a ``Decimal`` per DOUBLE value (about 0.5 µs to make
and turn back into a float) on tables that have no DECIMAL.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import msgspec

__all__ = [
    "ENVELOPE",
    "EXACT_ENVELOPE",
    "EXACT_IMAGES",
    "KEY",
    "KEY_PAYLOAD",
    "NOT_TYPED",
    "RAW_NULL",
    "TICDC_HEAD",
    "TICDC_SCHEMA",
    "CommitTs",
    "Payload",
    "Source",
    "Value",
    "schema_text",
    "utf8",
]

# TiCDC writes a key or value as ``{"payload":{..},"schema":{..}}``: the schema last, so that
# its text (the value's or key's tail from TICDC_SCHEMA on) names a table shape unparsed.
TICDC_HEAD = b'{"payload":'
TICDC_SCHEMA = b',"schema":'

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


class ExactPayload(Payload, gc=False):
    """A payload whose images hold any JSON, numbers exact (see the module)."""

    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


class ExactEnvelope(Envelope, forbid_unknown_fields=True, gc=False):
    payload: ExactPayload


class Images(msgspec.Struct, gc=False):
    """A payload's images only, whatever their JSON (the full path checks them)."""

    before: Any = None
    after: Any = None


class ImagesEnvelope(msgspec.Struct, gc=False):
    payload: Images


class Key(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A key in the same envelope: only its column names are needed."""

    payload: dict[str, msgspec.Raw]
    schema: msgspec.Raw = RAW_NULL


def schema_text(data: bytes | None) -> bytes | None:
    """The ``,"schema":{..}}`` tail of a key or value TiCDC wrote (None for others)."""
    if not data or not data.startswith(TICDC_HEAD):
        return None
    at = data.rfind(TICDC_SCHEMA)
    return data[at:] if at > 0 else None


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
EXACT_ENVELOPE = msgspec.json.Decoder(ExactEnvelope, float_hook=Decimal)
EXACT_IMAGES = msgspec.json.Decoder(ImagesEnvelope, float_hook=Decimal)
KEY = msgspec.json.Decoder(Key)
KEY_PAYLOAD = msgspec.json.Decoder(dict[str, msgspec.Raw])  # (a key's payload: its names)
NOT_TYPED = (msgspec.DecodeError, msgspec.ValidationError)  # (the full path says why)
