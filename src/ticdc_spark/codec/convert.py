"""The conversion layer: how each protocol writes MySQL values, as tables per type family.

Every protocol converts between its wire values and the one canonical Python value per MySQL
type (:mod:`ticdc_spark.types`).  A :class:`Dialect` holds a protocol's conversions as three
tables keyed by :class:`~ticdc_spark.types.Family`, in the style of fastavro's reader and
writer tables:

* ``decoders``: wire value -> canonical value;
* ``encoders``: canonical value -> wire value;
* ``texts``: wire value -> the changelog's text form (the Spark decode stage's fast path,
  which skips the canonical value where the wire already holds that text).

Each entry is a *factory*: given the column's :class:`~ticdc_spark.types.ColumnType` it
returns the converter for that column, so per-column facts (a DATETIME's fsp, an ENUM's
members, a TEXT column's base64 wire form) are looked up once per table shape, not per
value.  Building a dialect checks that every family has an entry in every table, so a
family a protocol forgot fails at import, not on a row.

The dialects share their common part through :data:`MYSQL_TEXT_DECODERS` and
:data:`MYSQL_TEXT_ENCODERS` (MySQL's text form for every family but BYTES, which every
all-string protocol starts from) and :meth:`Dialect.derive`; :data:`NORMALIZED` is the
library's own text form (MySQL text, binary values as base64), used by the normalized events
and as the changelog's text.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ticdc_spark.types import ColumnType, Family, text_formatter, text_parser

__all__ = [
    "MYSQL_TEXT_DECODERS",
    "MYSQL_TEXT_ENCODERS",
    "NORMALIZED",
    "Converter",
    "Dialect",
    "Factory",
    "constant",
]

Converter = Callable[[Any], Any]
Factory = Callable[[ColumnType], Converter]
FAMILIES = frozenset(Family)


def constant(converter: Converter) -> Factory:
    """A factory for a converter that is the same for every column of its family."""

    def factory(ctype: ColumnType) -> Converter:
        return converter

    factory.converter = converter  # type: ignore[attr-defined]  # (for introspection in tests)
    return factory


@dataclass(frozen=True)
class Dialect:
    """One protocol's conversions (see the module docstring); every table covers every family.

    ``texts`` may be left out: the changelog text is then the :data:`NORMALIZED` text of the
    decoded value.
    """

    name: str
    decoders: Mapping[Family, Factory]
    encoders: Mapping[Family, Factory]
    texts: Mapping[Family, Factory] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.texts:
            texts = {f: _text_of_decoded(self.decoders[f]) for f in self.decoders}
            object.__setattr__(self, "texts", texts)
        for table in ("decoders", "encoders", "texts"):
            entries = getattr(self, table)
            missing = FAMILIES - entries.keys()
            if missing:
                names = ", ".join(sorted(f.name for f in missing))
                raise TypeError(f"dialect {self.name!r} has no {table[:-1]} for {names}")
            object.__setattr__(self, table, MappingProxyType(dict(entries)))

    def decoder(self, ctype: ColumnType) -> Converter:
        """Wire value -> canonical value, for a column of type ``ctype``."""
        return self.decoders[ctype.family](ctype)

    def encoder(self, ctype: ColumnType) -> Converter:
        """Canonical value -> wire value."""
        return self.encoders[ctype.family](ctype)

    def text(self, ctype: ColumnType) -> Converter:
        """Wire value -> changelog text."""
        return self.texts[ctype.family](ctype)

    def derive(
        self,
        name: str,
        *,
        decoders: Mapping[Family, Factory] | None = None,
        encoders: Mapping[Family, Factory] | None = None,
        texts: Mapping[Family, Factory] | None = None,
    ) -> Dialect:
        """A dialect that differs from this one in the entries given.

        Texts not given are derived from the new decoders unless this dialect's own texts
        were given explicitly for them (``texts`` of the families whose decoder changed are
        recomputed from the new decoder).
        """
        new_decoders = {**self.decoders, **(decoders or {})}
        new_texts = {**self.texts}
        for family in decoders or {}:
            new_texts[family] = _text_of_decoded(new_decoders[family])
        new_texts.update(texts or {})
        return Dialect(name, new_decoders, {**self.encoders, **(encoders or {})}, new_texts)


def _text_of_decoded(decoder: Factory) -> Factory:
    """The changelog text of a decoded value: decode, then print as :data:`NORMALIZED`."""

    def factory(ctype: ColumnType) -> Converter:
        decode, print_ = decoder(ctype), NORMALIZED.encoder(ctype)

        def text(value: Any) -> Any:
            return print_(decode(value))

        return text

    return factory


def _text_parser(ctype: ColumnType) -> Converter:
    return text_parser(ctype)


def _text_formatter(ctype: ColumnType) -> Converter:
    return text_formatter(ctype)


def _identity(value: Any) -> Any:
    return value


def _base64(value: bytes) -> str:
    return binascii.b2a_base64(value, newline=False).decode("ascii")


def _unbase64(text: str) -> bytes:
    return binascii.a2b_base64(text, strict_mode=True)


_TEXT_FAMILIES = FAMILIES - {Family.BYTES}

# MySQL's text form for every family but BYTES, which no two protocols write alike: a partial
# table that dialects complete.
MYSQL_TEXT_DECODERS: Mapping[Family, Factory] = MappingProxyType(
    dict.fromkeys(_TEXT_FAMILIES, _text_parser)
)
MYSQL_TEXT_ENCODERS: Mapping[Family, Factory] = MappingProxyType(
    dict.fromkeys(_TEXT_FAMILIES, _text_formatter)
)

NORMALIZED = Dialect(
    "normalized",
    {**MYSQL_TEXT_DECODERS, Family.BYTES: constant(_unbase64)},
    {**MYSQL_TEXT_ENCODERS, Family.BYTES: constant(_base64)},
    # the changelog text of normalized text is itself
    dict.fromkeys(FAMILIES, constant(_identity)),
)
