"""MySQL column types: :class:`ColumnType`, its :class:`Family`, and reading and writing a
column type's text (``int(10) unsigned``, ``enum('a','b')``)."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from functools import lru_cache

__all__ = [
    "INT_BITS",
    "NO_LENGTH",
    "ColumnType",
    "Family",
    "elements_sql",
    "escape_element",
    "parse_column_type",
]


class Family(enum.Enum):
    """How values of a MySQL type are represented: the unit every conversion table keys on."""

    INTEGER = "integer"
    FLOAT = "float"
    DOUBLE = "double"
    DECIMAL = "decimal"
    STRING = "string"
    BYTES = "bytes"
    DATE = "date"
    DATETIME = "datetime"
    TIME = "time"
    YEAR = "year"
    ENUM = "enum"
    SET = "set"
    BIT = "bit"
    JSON = "json"
    UNKNOWN = "unknown"


_FAMILY_OF: dict[str, Family] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "bigint"), Family.INTEGER),
    "float": Family.FLOAT,
    "double": Family.DOUBLE,
    "decimal": Family.DECIMAL,
    **dict.fromkeys(
        ("char", "varchar", "tinytext", "text", "mediumtext", "longtext"), Family.STRING
    ),
    **dict.fromkeys(
        ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), Family.BYTES
    ),
    "date": Family.DATE,
    "datetime": Family.DATETIME,
    "timestamp": Family.DATETIME,
    "time": Family.TIME,
    "year": Family.YEAR,
    "enum": Family.ENUM,
    "set": Family.SET,
    "bit": Family.BIT,
    "json": Family.JSON,
}

# Spellings MySQL accepts for the canonical names above.
_ALIASES = {
    "integer": "int",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "int4": "int",
    "int8": "bigint",
    "middleint": "mediumint",
    "numeric": "decimal",
    "dec": "decimal",
    "fixed": "decimal",
    "real": "double",
    "double precision": "double",
    "float4": "float",
    "float8": "double",
    "character": "char",
    "character varying": "varchar",
    "var_string": "varchar",
    "long varchar": "mediumtext",
    "long varbinary": "mediumblob",
}

# Integer ranges, for checks and for the value-dependent codes of some protocols.
INT_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64}


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A MySQL column type: ``decimal(10,4)``, ``int(10) unsigned``, ``enum('a','b')``.

    ``length`` is MySQL's flen (display width, character length, BIT width, DECIMAL
    precision); ``decimal`` is the scale of DECIMAL/FLOAT/DOUBLE and the fsp of temporal types.
    ``None`` means the protocol did not say.
    """

    name: str
    unsigned: bool = False
    zerofill: bool = False
    length: int | None = None
    decimal: int | None = None
    elements: tuple[str, ...] = ()
    charset: str | None = None
    collation: str | None = None

    @property
    def family(self) -> Family:
        return _FAMILY_OF.get(self.name, Family.UNKNOWN)

    @property
    def is_binary(self) -> bool:
        """Values are bytes (BINARY, VARBINARY and the BLOB family)."""
        return self.family is Family.BYTES

    @property
    def is_bool(self) -> bool:
        """TiDB's BOOL/BOOLEAN: TINYINT(1)."""
        return self.name == "tinyint" and self.length == 1

    @property
    def base_name(self) -> str:
        """The type without parameters, keeping ``unsigned``/``zerofill`` (``int unsigned``)."""
        return (
            self.name
            + (" unsigned" if self.unsigned else "")
            + (" zerofill" if self.zerofill else "")
        )

    def sql(self) -> str:
        """The full column type as MySQL prints it: ``int(10) unsigned``, ``enum('a','b')``."""
        return (
            self.name
            + _params_sql(self)
            + (" unsigned" if self.unsigned else "")
            + (" zerofill" if self.zerofill else "")
        )

    def enum_name(self, index: int) -> str | None:
        """The ENUM member an index names, or None when elements are unknown or out of range."""
        if 1 <= index <= len(self.elements):
            return self.elements[index - 1]
        return "" if index == 0 and self.elements else None

    def enum_index(self, name: str) -> int | None:
        """The 1-based index of an ENUM member (case-insensitive, as MySQL compares them)."""
        folded = name.casefold()
        for position, element in enumerate(self.elements, 1):
            if element.casefold() == folded:
                return position
        return None

    def set_names(self, bits: int) -> tuple[str, ...] | None:
        """The SET members a bitmask names, or None when elements are unknown."""
        if not self.elements or bits >> len(self.elements):
            return None
        return tuple(e for i, e in enumerate(self.elements) if bits >> i & 1)

    def set_bits(self, names: str) -> int | None:
        """The bitmask of a comma-separated member list such as ``a,b``."""
        bits = 0
        for name in filter(None, names.split(",")):
            index = self.enum_index(name)
            if index is None:
                return None
            bits |= 1 << (index - 1)
        return bits

    def int_range(self) -> tuple[int, int]:
        """The inclusive value range of an integer type."""
        bits = INT_BITS[self.name]
        if self.unsigned:
            return 0, (1 << bits) - 1
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _params_sql(ctype: ColumnType) -> str:
    family = ctype.family
    if family in (Family.ENUM, Family.SET):
        if not ctype.elements:
            return ""
        return elements_sql(ctype.elements)
    if family in (Family.DECIMAL, Family.FLOAT, Family.DOUBLE):
        if ctype.length is not None and ctype.decimal is not None:
            return f"({ctype.length},{ctype.decimal})"
        return f"({ctype.length})" if ctype.length is not None and family is Family.DECIMAL else ""
    if family in (Family.DATETIME, Family.TIME):
        return f"({ctype.decimal})" if ctype.decimal else ""
    if ctype.length is not None and ctype.name not in NO_LENGTH:
        return f"({ctype.length})"
    return ""


# Types that print no length (TiDB's GetTypeDesc and MySQL's SHOW CREATE alike).
NO_LENGTH = frozenset(
    (
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "tinyblob",
        "blob",
        "mediumblob",
        "longblob",
        "json",
        "date",
    )
)

_TYPE_RE = re.compile(
    r"""^\s*(?P<name>[a-z_0-9]+(?:\s+(?:precision|varying|varchar|varbinary))?)\s*
        (?:\((?P<params>.*)\))?\s*(?P<rest>[a-z_0-9\s]*)$""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
# ENUM/SET members as TiDB writes them (format.OutputFormat): quotes doubled, NUL, LF and CR
# as \0 \n \r, a backslash as is.  So a backslash never escapes a quote here, and a member
# holding a backslash followed by 0, n or r reads back as the control character: TiDB's own
# ambiguity (MySQL DDL text is unescaped by the DDL parser before it gets here).
_ELEMENT_RE = re.compile(r"'((?:[^']|'')*)'", re.DOTALL)
_ELEMENT_ESCAPES = {"'": "''", "\0": "\\0", "\n": "\\n", "\r": "\\r"}
_ELEMENT_ESCAPE_RE = re.compile(r"['\x00\n\r]")
_ELEMENT_UNESCAPES = {v: k for k, v in _ELEMENT_ESCAPES.items()}
_ELEMENT_UNESCAPE_RE = re.compile(r"''|\\[0nr]")


def elements_sql(elements: tuple[str, ...]) -> str:
    """ENUM/SET members as a type's parameters: ``('a','b')``."""
    return "(" + ",".join("'" + escape_element(e) + "'" for e in elements) + ")"


def escape_element(element: str) -> str:
    """An ENUM/SET member as it stands between quotes in a column type, as TiDB writes it."""
    return _ELEMENT_ESCAPE_RE.sub(lambda m: _ELEMENT_ESCAPES[m[0]], element)


@lru_cache(maxsize=4096)
def parse_column_type(text: str) -> ColumnType:
    """Parse a MySQL column type string (``int(10) unsigned``, ``enum('a','b')``, ``bool``).

    Unknown type names are kept (family UNKNOWN, values pass through as text) so that a decoder
    never fails on a type newer than this library.  Raises ``ValueError`` on a malformed string.
    """
    match = _TYPE_RE.match(text)
    if match is None:
        raise ValueError(f"not a MySQL column type: {text!r}")
    name = " ".join(match["name"].lower().split())
    rest = match["rest"].lower().split()
    params = match["params"]
    if name in ("bool", "boolean"):
        return ColumnType("tinyint", length=1)
    name = _ALIASES.get(name, name)
    base = ColumnType(name, unsigned="unsigned" in rest, zerofill="zerofill" in rest)
    if params is None:
        return base
    return _with_params(base, params)


def _with_params(base: ColumnType, params: str) -> ColumnType:
    if base.family in (Family.ENUM, Family.SET):
        elements = tuple(_unquote_element(m) for m in _ELEMENT_RE.findall(params))
        return replace(base, elements=elements)
    numbers = [p.strip() for p in params.split(",")]
    try:
        values = [int(p) for p in numbers if p]
    except ValueError:
        raise ValueError(f"bad type parameters ({params})") from None
    if base.family in (Family.DATETIME, Family.TIME):
        return replace(base, decimal=values[0] if values else None)
    if base.name == "float" and len(values) == 1 and values[0] > 24:
        return replace(base, name="double")  # MySQL: FLOAT(p) with p of 25 to 53 is a DOUBLE
    if len(values) >= 2:
        return replace(base, length=values[0], decimal=values[1])
    if base.family is Family.DECIMAL and values:
        return replace(base, length=values[0], decimal=0)
    return replace(base, length=values[0] if values else None)


def _unquote_element(raw: str) -> str:
    return _ELEMENT_UNESCAPE_RE.sub(lambda m: _ELEMENT_UNESCAPES[m[0]], raw)
