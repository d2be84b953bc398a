"""The typed reader (msgspec) of the common Simple JSON row: the flat path's fast start.

A row message as TiCDC writes it is ``{"version","database","table","tableID","type",
"commitTs","buildTs","schemaVersion","data","old"}`` with image values that are strings, nulls
or, for TIMESTAMP columns, ``{"location","value"}``.  Reading it into a typed struct costs
less than orjson's dict of the whole message (measured by benchmarks/codec_bench.py) and
checks every member's JSON type while parsing.  The struct forbids unknown members and types
every member it has, so msgspec reads (and checks, UTF-8 included) every byte of the message.
A message it does not fit (a DDL, a BOOTSTRAP, a WATERMARK, a claim-check pointer, a
handle-key-only row, a checksum, a value of another JSON type) fails here, and the decoder's
full path (orjson, every check) decodes it: so whatever this reader accepts, it reads as
orjson does.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["NOT_FLAT", "FlatRow", "FlatTimestamp", "read_flat_row"]

# An integer within int64 (the full path takes the others and says what is wrong).
_Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
_Natural = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]
_Name = Annotated[str, msgspec.Meta(min_length=1)]


# (gc=False: these structs hold strings, numbers and dicts of them, never a cycle)
class FlatTimestamp(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A TIMESTAMP value: its text, in the time zone ``location``."""

    value: str
    location: str | None = None


_Image = dict[str, str | FlatTimestamp | None]


class FlatRow(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A plain row message (members as TiCDC names them; a name, a commit ts or a schema
    version the full path refuses is refused here too, even where a schema is known for it)."""

    type: str
    database: _Name
    table: _Name
    commitTs: _Natural
    version: _Int64 = 0
    tableID: _Int64 = 0
    buildTs: _Int64 = 0
    schemaVersion: _Natural = 0
    data: _Image | None = None
    old: _Image | None = None


read_flat_row = msgspec.json.Decoder(FlatRow).decode
# What read_flat_row raises for a message it does not fit (UnicodeDecodeError: bytes that
# are not UTF-8): the full path then says precisely what is wrong, if anything.
NOT_FLAT = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)
