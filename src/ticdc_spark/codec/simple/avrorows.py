"""Simple-Avro image writers made for each table: the hot path of encoding a row.

An image is written as the Avro map of the DML record's ``data``/``old``: for each column
its key, its union branch and its value (:func:`.avro.row_map_bytes`, the careful writer, says
how).  As a loop over the columns, finding each column's plan and branching on its kind cost
more than writing the value itself.  So each table gets a function written for its columns:
every value unpacked into a local by one ``itemgetter`` call and written by an expression of
its column's kind, inline, no per-row dispatch on type (about two thirds of the loop's time).
An UPDATE's second image has a function of its own, which takes the first image's bytes for
every column holding the very same value object.

The generated source holds no name or value from the schema: only locals numbered by column
(``v3``) and names of constants given in the function's namespace (``P3``, the column's key
and branch as written; ``Z3``, its entry when null; ``T3``, its text formatter).  Nothing a
schema or a row says is ever executed.

A writer takes the plain case only: every planned column present.  Anything else raises (a
missing column, a value not of its column's type), and :class:`TableWriter` then writes the
image with the careful writer, which gives the same bytes or the precise error.  Tests check
that the two agree on every type.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import compress
from operator import is_not, itemgetter
from typing import Any

from ticdc_spark.codec.simple.avro import (
    BYTES,
    DOUBLE,
    FLOAT,
    LONG,
    STRING,
    TEXT,
    TIMESTAMP,
    UNSIGNED_BIGINT,
    VARINT_PAIRS,
    VARINTS,
    PlanColumn,
    long_bytes,
    row_map_bytes,
    varint,
)

__all__ = ["MOST_COLUMNS", "TableWriter", "Twin"]

# A long, written by the fewest steps its column's values need (the plan column's zigzag bits):
# one table lookup below 2**14, two below 2**28, three below 2**42, else varint(), which
# refuses what passes 64 bits.  A value past what its form takes raises (IndexError or
# ValueError), and the careful writer then writes it: no value is ever cut short.
_ZIGZAG = "(v{i} << 1) ^ (v{i} >> 63)"
_TWO = "VARINTS[n] if (n := {zigzag}) < 16384 else PAIRS[n & 16383] + VARINTS[n >> 14]"
_THREE = " if n < 268435456 else PAIRS[n & 16383] + PAIRS[(n >> 14) & 16383] + VARINTS[n >> 28]"
_MORE = _THREE + " if n < 4398046511104 else VARINT(n)"
# past 2**63 (BIGINT UNSIGNED, BIT(64)): wrapped to int64 first, as TiCDC casts a uint64
_WRAPPED = "((w := v{i} - WRAP if I64_MAX < v{i} < WRAP else v{i}) << 1) ^ (w >> 63)"
_LONGS = {
    14: "VARINTS[" + _ZIGZAG + "]",
    28: _TWO.format(zigzag=_ZIGZAG),
    42: _TWO.format(zigzag=_ZIGZAG) + _THREE,
    64: _TWO.format(zigzag=_ZIGZAG) + _MORE,
    65: _TWO.format(zigzag=_WRAPPED) + _MORE,
}
# The value of the other kinds but the sized ones (below).
_VALUE = {FLOAT: "PACK_FLOAT(v{i})", DOUBLE: "PACK_DOUBLE(v{i})"}
# A TEXT or TIMESTAMP column whose text ``first`` has from the compiled loop, as a kind.
_COMPILED = -1
# A string's or bytes' length is written with its column's prefix, from the column's table of
# both for every one-byte length (``S3``), and its bytes are the value piece (``b``, bound by
# the walrus): a long value is then never copied into a piece of its own.
_SIZED = "S{i}[n] if (n := len(b := {data})) < 64 else P{i} + LONG(n)"
_DATA = {
    STRING: "(v{i} if type(v{i}) is str else T{i}(v{i})).encode()",
    BYTES: "v{i}",
    # in ``first``: the compiled text's bytes (see _text_locals)
    _COMPILED: "s{i}",
}
_DATA[TEXT] = _DATA[TIMESTAMP] = _DATA[STRING]
_CONSTANTS = {
    "VARINTS": VARINTS,
    "PAIRS": VARINT_PAIRS,
    "LONG": long_bytes,
    "VARINT": varint,
    "WRAP": 1 << 64,
    "I64_MAX": (1 << 63) - 1,
    "PACK_FLOAT": struct.Struct("<f").pack,
    "PACK_DOUBLE": struct.Struct("<d").pack,
    "NOTHING": b"",
}


# Wider tables keep the careful writer: compiling their writers would cost about a second per
# schema version at TiDB's 4096 columns (a quarter of one at this bound).
MOST_COLUMNS = 1024

# What the first image's writer leaves for its twin: the image's values and pieces.
Twin = tuple[tuple[Any, ...], tuple[bytes, ...]]
# The generated functions: (image, texts) -> Twin; a column's value -> its two pieces.
_First = Callable[[dict[str, Any], list[bytes] | None], Twin]
_Column = Callable[[Any], tuple[bytes, bytes]]


class TableWriter:
    """The writers of one table's images: ``first`` writes an image whole; ``twin`` writes the
    other image of an UPDATE: the first's pieces, but for the columns not holding the very
    same value object (an UPDATE changes a few columns: the rest are the same objects),
    which are found by a comparison in C (``map(is_not, ...)``) and written one by one.

    ``texts`` names the columns whose text the compiled loop gives ``first``, in its order."""

    __slots__ = ("_columns", "_first", "_values", "columns")

    def __init__(self, columns: tuple[PlanColumn, ...], texts: tuple[str, ...]) -> None:
        self.columns = columns
        self._first: _First | None = None
        if 0 < len(columns) <= MOST_COLUMNS:
            self._first, self._columns = _generated(columns, texts)
            self._values = _getter([column[2] for column in columns])

    def first(self, image: dict[str, Any], texts: list[bytes] | None) -> tuple[bytes, Twin | None]:
        """An image's map, and what its twin may take from it.  ``texts``: the compiled loop's
        pieces of the image's texts (see :func:`_text_locals`), or None."""
        if self._first is not None:
            try:
                values, pieces = self._first(image, texts)
                return b"".join(pieces), (values, pieces)
            except Exception:  # (the careful writer: the same bytes, or the precise error)
                pass
        return row_map_bytes(self.columns, image), None

    def twin(self, image: dict[str, Any], first: Twin | None) -> bytes:
        """The map of an UPDATE's other image, after :meth:`first` wrote one."""
        if first is not None and self._first is not None:
            twin_values, twin_pieces = first
            try:
                values = self._values(image)
                pieces = list(twin_pieces)
                for i in compress(range(len(values)), map(is_not, values, twin_values)):
                    pieces[2 * i + 1], pieces[2 * i + 2] = self._columns[i](values[i])
                return b"".join(pieces)
            except Exception:  # (as above)
                pass
        return row_map_bytes(self.columns, image)


def _generated(
    columns: tuple[PlanColumn, ...], texts: tuple[str, ...]
) -> tuple[_First, tuple[_Column, ...]]:
    """The source of ``first`` and of each column's writer (see the module's docstring),
    compiled.

    Each column is two pieces, its prefix (or its null entry) and its value (or nothing):
    joining two pieces costs less than making one by ``+``."""
    names = [column[2] for column in columns]
    namespace: dict[str, Any] = {**_CONSTANTS, "GET": _getter(names)}
    namespace["HEAD"] = b"\x02" + long_bytes(len(columns))  # (the map's one block: its count)
    values = ", ".join(f"v{i}" for i in range(len(columns)))
    compiled = {names.index(name) for name in texts}
    first = ["def first(image, texts):", "    values = GET(image)", f"    ({values},) = values"]
    first += _text_locals(sorted(compiled))
    first.append("    return values, (HEAD,")
    each = []
    for i, (null, prefix, _, how, text, bits) in enumerate(columns):
        namespace.update({f"Z{i}": null, f"P{i}": prefix, f"T{i}": text})
        if how in _DATA:  # (its prefix with every one-byte length)
            namespace[f"S{i}"] = tuple(prefix + VARINTS[n << 1] for n in range(64))
        key, value = _pieces(i, _COMPILED if i in compiled else how, bits)
        first.append(f"        {key}, {value},")
        key, value = _pieces(i, how, bits)
        each += [f"def column{i}(v{i}):", f"    return ({key}), ({value})"]
    first.append("        b'\\x00')")
    source = "\n".join(first + each)
    exec(compile(source, "<simple-avro image writer>", "exec"), namespace)
    return namespace["first"], tuple(namespace[f"column{i}"] for i in range(len(columns)))


def _getter(names: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """The image's values of ``names`` as a tuple (``itemgetter`` of one name gives no
    tuple)."""
    if len(names) > 1:
        return itemgetter(*names)
    name = names[0]
    return lambda image: (image[name],)


def _pieces(i: int, how: int, bits: int) -> tuple[str, str]:
    """The expressions of column ``i``'s two pieces: its key (with a string's length) and
    its value."""
    if how in _DATA:
        key = _SIZED.format(i=i, data=_DATA[how].format(i=i))
        return f"Z{i} if v{i} is None else ({key})", f"NOTHING if v{i} is None else b"
    if how in (LONG, UNSIGNED_BIGINT):
        value = _LONGS[next(most for most in _LONGS if bits <= most)]
    else:
        value = _VALUE[how]
    return f"Z{i} if v{i} is None else P{i}", f"NOTHING if v{i} is None else ({value.format(i=i)})"


def _text_locals(compiled: list[int]) -> list[str]:
    """The bytes of each compiled text column's text, ``s3`` (for a null value, whatever).

    The compiled loop gives them in ``encoder._texts``: its object written with the key
    ``\\x00`` (no JSON string holds that byte raw), split there: the object's ``{``, then a
    piece per column, ``"text",`` (the last ending ``}``) or ``null,``; no text in it has an
    escape.  Without them (not built, or it gave up), each text is formatted here."""
    if not compiled:
        return []
    pieces = ", ".join(f"s{i}" for i in compiled)
    source = ["    if texts is None:"]
    source += [
        f"        s{i} = None if v{i} is None else "
        f"(v{i} if type(v{i}) is str else T{i}(v{i})).encode()"
        for i in compiled
    ]
    source += ["    else:", f"        (_, {pieces},) = texts"]
    source += [f"        s{i} = s{i}[1:-2]" for i in compiled]
    return source
