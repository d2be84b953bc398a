"""The Canal text dialect: how Canal-JSON writes each MySQL type in ``data``/``old``.

Every value is a string in MySQL's text form (the shared MySQL-text tables of
:mod:`ticdc_spark.codec.convert`), except where Canal differs:

* BYTES: each byte is the Latin-1 character of the same code (the changelog's text of such a
  value is its base64, like every protocol's binary values);
* ENUM and SET: TiCDC writes the member number, Alibaba Canal may write the member names, so
  the decoder takes either (the changelog keeps the text as written);
* FLOAT: Java's float text, read as a float32.

Besides the dialect, the compiled loops (:mod:`ticdc_spark.codec.compiled`) need each
column's converter as a *kind*: :func:`writer` gives the encoder's, :data:`OWN_KINDS` the
kinds of this dialect's own decoders.
"""

from __future__ import annotations

import binascii
import operator
from collections.abc import Callable
from typing import Any

from ticdc_spark.codec.compiled import LATIN1, text_kind
from ticdc_spark.codec.convert import (
    FAMILIES,
    MYSQL_TEXT_DECODERS,
    MYSQL_TEXT_ENCODERS,
    Converter,
    Dialect,
    constant,
)
from ticdc_spark.types import ColumnType, Family, parse_float

__all__ = ["CANAL", "OWN_KINDS", "latin1_bytes", "latin1_text", "same_text", "writer"]

latin1_text: Callable[[bytes], str] = operator.methodcaller("decode", "latin-1")


def latin1_bytes(text: str) -> bytes:
    return text.encode("latin-1")


def same_text(text: Any) -> Any:
    """The changelog text of a value whose wire text already is it."""
    return text


def _latin1_base64(text: str) -> str:
    try:
        raw = text.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError("binary text has characters over U+00FF") from None
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _member_or_int(lookup: Callable[[str], int | None], what: str) -> Converter:
    """TiCDC writes ENUM/SET as their number; other producers may write the member names."""

    def parse(text: str) -> int:
        if text.isascii() and text.isdigit():  # (str.isdigit alone takes "²", which int refuses)
            return int(text)
        found = lookup(text)
        if found is None:
            raise ValueError(f"{what} value {text!r} is not a number or a known member")
        return found

    return parse


def _enum_member(ctype: ColumnType) -> Converter:
    return _member_or_int(ctype.enum_index, "ENUM")


def _set_members(ctype: ColumnType) -> Converter:
    return _member_or_int(ctype.set_bits, "SET")


CANAL = Dialect(
    "canal-json",
    decoders={
        **MYSQL_TEXT_DECODERS,
        Family.BYTES: constant(latin1_bytes),
        Family.ENUM: _enum_member,
        Family.SET: _set_members,
        Family.FLOAT: constant(parse_float),
    },
    encoders={**MYSQL_TEXT_ENCODERS, Family.BYTES: constant(latin1_text)},
    texts={**dict.fromkeys(FAMILIES, constant(same_text)), Family.BYTES: constant(_latin1_base64)},
)

# The compiled kinds of this dialect's own decoders (the shared ones compiled.kind_of knows).
OWN_KINDS: dict[Any, int] = {latin1_bytes: LATIN1}

# (kind, fsp) of the encoders the shared MySQL-text table does not have.
_OWN_WRITE_KINDS: dict[Family, tuple[int, int]] = {Family.BYTES: (LATIN1, 0)}


def writer(ctype: ColumnType) -> tuple[Callable[[Any], str], int, int]:
    """Canonical value -> the string in ``data``/``old``: the function, and the (kind, fsp)
    telling the compiled loops the same."""
    kind = _OWN_WRITE_KINDS.get(ctype.family)
    return CANAL.encoder(ctype), *(kind or text_kind(ctype))
