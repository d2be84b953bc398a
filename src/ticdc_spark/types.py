"""The MySQL type system: column types, their canonical Python values, and their text form.

Every codec converts between its wire form and *one* canonical Python value per type; none
invents its own.  The canonical values are:

==========================================  ===================================================
MySQL type                                  canonical Python value
==========================================  ===================================================
TINYINT .. BIGINT, signed and unsigned,     ``int`` (unsigned BIGINT up to 2**64-1)
BOOL (= TINYINT(1)), YEAR
FLOAT                                       ``float`` holding a float32 value (rounded on entry)
DOUBLE                                      ``float``
DECIMAL(M,D)                                ``decimal.Decimal``, exact, keeps its scale
CHAR, VARCHAR, TINYTEXT .. LONGTEXT         ``str``
BINARY, VARBINARY, TINYBLOB .. LONGBLOB     ``bytes``
DATE                                        ``datetime.date`` or :class:`ZeroDate`
DATETIME, TIMESTAMP                         naive ``datetime.datetime`` or :class:`ZeroDate`
TIME                                        ``datetime.timedelta`` (negative and > 24 h allowed)
ENUM                                        ``int``: the 1-based index (0 is MySQL's '' error)
SET                                         ``int``: the bitmask of the members
BIT(M)                                      ``int``, unsigned
JSON                                        ``str``: the JSON text as TiDB prints it
NULL                                        ``None``
==========================================  ===================================================

ENUM and SET names are available through :meth:`ColumnType.enum_name` and
:meth:`ColumnType.set_names` when the column's elements are known.  Fractional seconds live
in the value (microseconds); how many digits to print (the fsp) lives in
``ColumnType.decimal``.  TIMESTAMP values are wall-clock times in the time zone the producer
used (TiCDC's changefeed time zone); they carry no zone of their own.

The *text form* of a value is MySQL's own rendering of it, as TiCDC writes it in its
all-string protocols: integers in decimal, DECIMAL without exponent, temporal values with the
column's fsp, ENUM as its index and SET as its bitmask, BIT as an unsigned integer.  Binary
values have no text form here: every protocol encodes bytes its own way (Latin-1, base64,
Go-quoted), so codecs supply that converter themselves.
"""

from __future__ import annotations

import datetime as _dt
import enum
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, NamedTuple, cast

__all__ = [
    "BLOB_CODES",
    "TYPE_CODE",
    "TYPE_NAMES",
    "ColumnType",
    "Family",
    "ZeroDate",
    "escape_element",
    "format_time",
    "full_type_desc",
    "int64_cast",
    "parse_column_type",
    "plain_type_desc",
    "text_formatter",
    "text_parser",
    "to_float32",
    "value_misfit",
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


def int64_cast(value: int) -> int:
    """A BIGINT UNSIGNED value past 2**63-1 as Go's ``int64(uint64)`` leaves it (TiCDC writes
    such values so); any other value unchanged (one past 2**64 is no uint64: the writer
    that checks the range refuses it)."""
    return value - (1 << 64) if (1 << 63) <= value < (1 << 64) else value


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
        return _elements_sql(ctype.elements)
    if family in (Family.DECIMAL, Family.FLOAT, Family.DOUBLE):
        if ctype.length is not None and ctype.decimal is not None:
            return f"({ctype.length},{ctype.decimal})"
        return f"({ctype.length})" if ctype.length is not None and family is Family.DECIMAL else ""
    if family in (Family.DATETIME, Family.TIME):
        return f"({ctype.decimal})" if ctype.decimal else ""
    if ctype.length is not None and ctype.name not in _NO_LENGTH:
        return f"({ctype.length})"
    return ""


# Types that print no length (TiDB's GetTypeDesc and MySQL's SHOW CREATE alike).
_NO_LENGTH = frozenset(
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


def _elements_sql(elements: tuple[str, ...]) -> str:
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
    from dataclasses import replace

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


# --------------------------------------------------------------------------------------------
# The facts about MySQL types that protocols write: TiDB's type codes (mysql.Type* bytes),
# and the full type text TiDB prints (GetTypeDesc).

# The type code TiDB gives each type name (CHAR/BINARY, VARCHAR/VARBINARY and TEXT/BLOB
# share theirs: the binary flag tells them apart).
TYPE_CODE: dict[str, int] = {
    "tinyint": 1,
    "smallint": 2,
    "int": 3,
    "float": 4,
    "double": 5,
    "timestamp": 7,
    "bigint": 8,
    "mediumint": 9,
    "date": 10,
    "time": 11,
    "datetime": 12,
    "year": 13,
    "varchar": 15,
    "varbinary": 15,
    "bit": 16,
    "vector": 225,
    "json": 245,
    "decimal": 246,
    "enum": 247,
    "set": 248,
    "tinytext": 249,
    "tinyblob": 249,
    "mediumtext": 250,
    "mediumblob": 250,
    "longtext": 251,
    "longblob": 251,
    "text": 252,
    "blob": 252,
    "char": 254,
    "binary": 254,
    "geometry": 255,
}
# code -> (name without the binary flag, name with it)
TYPE_NAMES: dict[int, tuple[str, str]] = {
    1: ("tinyint",) * 2,
    2: ("smallint",) * 2,
    3: ("int",) * 2,
    4: ("float",) * 2,
    5: ("double",) * 2,
    6: ("null",) * 2,
    7: ("timestamp",) * 2,
    8: ("bigint",) * 2,
    9: ("mediumint",) * 2,
    10: ("date",) * 2,
    11: ("time",) * 2,
    12: ("datetime",) * 2,
    13: ("year",) * 2,
    14: ("date",) * 2,
    15: ("varchar", "varbinary"),
    16: ("bit",) * 2,
    225: ("vector",) * 2,
    245: ("json",) * 2,
    246: ("decimal",) * 2,
    247: ("enum",) * 2,
    248: ("set",) * 2,
    249: ("tinytext", "tinyblob"),
    250: ("mediumtext", "mediumblob"),
    251: ("longtext", "longblob"),
    252: ("text", "blob"),
    253: ("varchar", "varbinary"),
    254: ("char", "binary"),
    255: ("geometry",) * 2,
}
# The codes whose values TiDB keeps as bytes in any charset (the TEXT and BLOB family).
BLOB_CODES = frozenset((249, 250, 251, 252))


def full_type_desc(ctype: ColumnType) -> str:
    """TiDB's full column type (``GetTypeDesc``), as content-compatible mode writes it.

    Where the type carries no length, TiDB's defaults fill in (``int(11)``, ``int(10)
    unsigned``, ``decimal(10,0)``, ``bit(1)``, ``year(4)``).
    """
    name = ctype.name
    length = ctype.length
    if length is None:
        length = _DEFAULT_WIDTH.get(name)
        if length is not None and ctype.unsigned and name in _NARROWER_UNSIGNED:
            length -= 1
    decimal = ctype.decimal
    if name == "decimal":
        params = f"({length if length is not None else 10},{decimal or 0})"
    elif name in ("float", "double"):
        params = f"({length},{decimal})" if decimal and length is not None else ""
    elif name in ("enum", "set"):
        params = _elements_sql(ctype.elements)
    elif name in ("datetime", "timestamp", "time"):
        params = f"({decimal})" if decimal else ""
    elif name in _NO_LENGTH or length is None:
        params = ""
    else:
        params = f"({length})"
    suffix = ""
    if ctype.unsigned and name not in ("bit", "year"):
        suffix += " unsigned"
    if ctype.zerofill and name != "year":
        suffix += " zerofill"
    return name + params + suffix


_DEFAULT_WIDTH = {
    "tinyint": 4,
    "smallint": 6,
    "mediumint": 9,
    "int": 11,
    "bigint": 20,
    "bit": 1,
    "year": 4,
    "char": 1,
    "binary": 1,
}
_NARROWER_UNSIGNED = frozenset(("tinyint", "smallint", "mediumint", "int"))


def plain_type_desc(ctype: ColumnType) -> str:
    """The ``mysqlType`` TiCDC writes by default: no parameters, ``unsigned``/``zerofill`` kept."""
    name = ctype.name
    if ctype.unsigned and name not in ("bit", "year"):
        name += " unsigned"
    if ctype.zerofill and ctype.name != "year":
        name += " zerofill"
    return name


# --------------------------------------------------------------------------------------------
# Canonical values that Python's standard types cannot hold.


class ZeroDate(NamedTuple):
    """A DATE/DATETIME/TIMESTAMP value Python's calendar rejects.

    MySQL stores the zero date ``0000-00-00``, dates with a zero month or day
    (``2020-00-00``), and year 0; ``datetime`` cannot.  Such values decode to a ``ZeroDate``
    holding the fields as written, and print back unchanged.
    """

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def date_text(self) -> str:
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    def datetime_text(self, fsp: int) -> str:
        text = f"{self.date_text()} {self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        return text + _fraction(self.microsecond, fsp)


def to_float32(value: float) -> float:
    """Round a Python float to the nearest float32, as a FLOAT column stores it."""
    try:
        return _F32.unpack(_F32.pack(value))[0]  # type: ignore[no-any-return]
    except OverflowError:
        return float("inf") if value > 0 else float("-inf")


_F32 = struct.Struct("<f")
_F32_SMALLEST_NORMAL = 2.0**-126


def shortest_digits(value: float, bits: int = 64) -> tuple[str, int]:
    """The shortest significant digits that read back as ``value`` (a finite, non-zero
    magnitude) at float32 or float64 precision, and the decimal exponent of the first digit.

    ``abs(value) == float("0." + digits) * 10 ** (exponent + 1)``, like Go's shortest
    ``strconv`` output and Python's ``repr``.
    """
    value = abs(value)
    text = repr(value) if bits == 64 else _shortest_float32_text(value)
    mantissa, _, exponent = text.partition("e")
    if exponent:
        return mantissa.replace(".", "").rstrip("0") or "0", int(exponent)
    whole, _, fraction = mantissa.partition(".")
    whole = whole.lstrip("0")
    if whole:
        return (whole + fraction).rstrip("0") or "0", len(whole) - 1
    stripped = fraction.lstrip("0")
    return stripped.rstrip("0") or "0", -(len(fraction) - len(stripped)) - 1


def _shortest_float32_text(value: float) -> str:
    """The shortest '%.Ne' text that reads back as the same float32.

    Correctly rounded decimal digits that round-trip at N digits also do at N+1, so the
    shortest N is found by bisection over 1..9 digits.
    """
    text = f"{value:.5e}"  # 6 digits: if they read back, no shorter text does (see below)
    if value >= _F32_SMALLEST_NORMAL and _F32.unpack(_F32.pack(float(text)))[0] == value:
        # float32 neighbours are under 1.2e-7 apart relatively; two different decimals of
        # at most 6 significant digits are over 1e-6 apart, so at most one reads back.
        mantissa, _, exponent = text.partition("e")
        return mantissa.rstrip("0").rstrip(".") + "e" + exponent
    # Precision after the point: 7..9 significant digits; a subnormal (fewer significant
    # bits, neighbours relatively far apart) may need as few as 1 (Go: 1e-45).
    low, high = (6, 8) if value >= _F32_SMALLEST_NORMAL else (0, 8)
    best = f"{value:.8e}"
    while low <= high:
        mid = (low + high) // 2
        candidate = f"{value:.{mid}e}"
        if _F32.unpack(_F32.pack(float(candidate)))[0] == value:
            best, high = candidate, mid - 1
        else:
            low = mid + 1
    return best


def positional(digits: str, exponent: int) -> str:
    """Lay shortest digits out without an exponent: ``("15", 1)`` -> ``"15"``."""
    point = exponent + 1  # digits before the decimal point
    if point <= 0:
        return "0." + "0" * (-point) + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def format_float(value: float, bits: int = 64) -> str:
    """A float's text form: shortest digits, positional, as TiCDC prints FLOAT and DOUBLE
    (``strconv.FormatFloat(v, 'f', -1, bits)``): ``1`` not ``1.0``, ``0.0000001`` not ``1e-07``.
    """
    if bits == 64:  # fast path: repr is already shortest, and positional in this range
        text = repr(value)
        if "e" not in text and "n" not in text:
            return text[:-2] if text.endswith(".0") else text
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    return sign + positional(*shortest_digits(value, bits))


def format_float32(value: float) -> str:
    return format_float(value, 32)


def format_float64(value: float) -> str:
    return format_float(value, 64)


# --------------------------------------------------------------------------------------------
# Text form <-> canonical value, one small function per family in dispatch tables.


def _fraction(microsecond: int, fsp: int) -> str:
    if fsp <= 0:
        return ""
    return "." + f"{microsecond:06d}"[:fsp]


def infer_fsp(text: str) -> int:
    """The number of fractional-second digits a temporal text carries (TiCDC prints all)."""
    dot = text.rfind(".")
    return len(text) - dot - 1 if dot >= 0 else 0


_DATE_RE = re.compile(
    r"^(\d{1,4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})\d*)?)?\Z"
)
_TIME_RE = re.compile(r"^(-)?(?:(\d+) )?(\d{1,4}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6})\d*)?\Z")
# (\Z, not $: $ also matches before a final newline)


# fromisoformat is the fast path for the common texts, but it also reads ISO 8601 forms MySQL
# never writes (week dates, a comma before the fraction, time zones): it only sees texts laid
# out as MySQL's, the rest go through the regex.


def _zero_field(text: str) -> bool:
    """Whether a date laid out as MySQL's has a zero year, month or day (no calendar date)."""
    return text[5:7] == "00" or text[8:10] == "00" or text[:4] == "0000"


def parse_date(text: str) -> _dt.date | ZeroDate:
    if len(text) == 10 and text[4] == "-" == text[7] and not _zero_field(text):
        try:
            return _dt.date.fromisoformat(text)
        except ValueError:
            pass
    zero = _parse_irregular(text)
    return _dt.date(zero.year, zero.month, zero.day) if _is_calendar(zero) else zero


def parse_datetime(text: str) -> _dt.datetime | ZeroDate:
    if (
        len(text) >= 19
        and text[4] == "-" == text[7]
        and text[10] == " "
        and text[13] == ":" == text[16]
        and (len(text) == 19 or (text[19] == "." and text[20:].isdigit() and text.isascii()))
        and not _zero_field(text)
    ):
        try:
            return _dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    zero = _parse_irregular(text)
    if _is_calendar(zero):
        return _dt.datetime(*zero)
    return zero


def _parse_irregular(text: str) -> ZeroDate:
    match = _DATE_RE.match(text)
    if match is None:
        raise ValueError(f"not a MySQL date/time: {text!r}")
    year, month, day, hour, minute, second = (int(g) if g else 0 for g in match.groups()[:6])
    fraction = match[7] or ""
    microsecond = int(fraction.ljust(6, "0")) if fraction else 0
    return ZeroDate(year, month, day, hour, minute, second, microsecond)


def _is_calendar(value: ZeroDate) -> bool:
    """Whether ``datetime`` takes the value (without raising: zero dates are common enough in
    real tables for an exception per value to show in decoding time)."""
    year, month, day, hour, minute, second, _ = value
    if not (1 <= year <= 9999 and 1 <= month <= 12 and day >= 1):
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = 29 if month == 2 and leap else _DAYS_IN_MONTH[month]
    return day <= days and hour < 24 and minute < 60 and second < 60


_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def parse_time(text: str) -> _dt.timedelta:
    match = _TIME_RE.match(text)
    if match is None:
        raise ValueError(f"not a MySQL TIME: {text!r}")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    microseconds = int(fraction.ljust(6, "0")) if fraction else 0
    delta = _dt.timedelta(
        days=int(days or 0),
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds),
        microseconds=microseconds,
    )
    return -delta if sign else delta


def format_date(value: _dt.date | ZeroDate) -> str:
    try:
        return value.isoformat()  # type: ignore[union-attr]
    except AttributeError:  # a ZeroDate
        return value.date_text()  # type: ignore[union-attr]


def format_datetime(value: _dt.datetime | _dt.date | ZeroDate, fsp: int) -> str:
    if type(value) is _dt.datetime:  # the fast path: C isoformat, cut to the fsp
        if fsp <= 0:
            return value.isoformat(" ", "seconds")
        return value.isoformat(" ", "microseconds")[: 20 + fsp]
    if isinstance(value, ZeroDate):
        return value.datetime_text(fsp)
    if not isinstance(value, _dt.datetime):  # a DATE value in a DATETIME column
        value = _dt.datetime(value.year, value.month, value.day)
    return format_datetime(_dt.datetime(*value.timetuple()[:6], value.microsecond), fsp)


def format_time(value: _dt.timedelta, fsp: int) -> str:
    """MySQL's TIME text: ``-838:59:59.000000``, hours not wrapped at 24."""
    seconds = value.days * 86400 + value.seconds
    microsecond = value.microseconds
    sign = ""
    if seconds < 0:
        sign = "-"
        if microsecond:
            seconds, microsecond = -seconds - 1, 1_000_000 - microsecond
        else:
            seconds = -seconds
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    text = f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    return text + "." + f"{microsecond:06d}"[:fsp] if fsp > 0 else text


def parse_decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a DECIMAL: {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a DECIMAL: {text!r}")
    return value


def format_decimal(value: Decimal) -> str:
    if not value.is_finite():  # MySQL has no such DECIMAL; format would print "NaN"
        raise ValueError(f"a DECIMAL holds finite numbers, not {value}")
    return format(value, "f")


def parse_float(text: str) -> float:
    return to_float32(float(text))


def _format_datetime_col(ctype: ColumnType) -> Callable[[Any], str]:
    fsp = ctype.decimal
    if fsp is None:
        return lambda v: _trim_fraction(format_datetime(v, 6))
    cut = 20 + fsp if fsp > 0 else 19
    datetime_type = _dt.datetime

    def format_column(value: Any) -> str:
        if type(value) is datetime_type:  # inline fast path of format_datetime
            return value.isoformat(" ", "microseconds")[:cut]
        return format_datetime(value, fsp)

    return format_column


def _format_time_col(ctype: ColumnType) -> Callable[[Any], str]:
    fsp = ctype.decimal
    if fsp is None:
        return lambda v: _trim_fraction(format_time(v, 6))
    return lambda v: format_time(v, fsp)


def _trim_fraction(text: str) -> str:
    """With the fsp unknown, print only the fractional digits the value needs."""
    if "." not in text:
        return text
    return text.rstrip("0").rstrip(".")


_TextParser = Callable[[str], Any]
_TextFormatter = Callable[[Any], str]

_PARSERS: dict[Family, _TextParser] = {
    Family.INTEGER: int,
    Family.YEAR: int,
    Family.ENUM: int,
    Family.SET: int,
    Family.BIT: int,
    Family.FLOAT: parse_float,
    Family.DOUBLE: float,
    Family.DECIMAL: parse_decimal,
    Family.STRING: str,
    Family.JSON: str,
    Family.UNKNOWN: str,
    Family.DATE: parse_date,
    Family.DATETIME: parse_datetime,
    Family.TIME: parse_time,
}

_FORMATTERS: dict[Family, Callable[[ColumnType], _TextFormatter]] = {
    Family.INTEGER: lambda t: str,
    Family.YEAR: lambda t: str,
    Family.ENUM: lambda t: str,
    Family.SET: lambda t: str,
    Family.BIT: lambda t: str,
    Family.FLOAT: lambda t: format_float32,
    Family.DOUBLE: lambda t: format_float64,
    Family.DECIMAL: lambda t: format_decimal,
    Family.STRING: lambda t: str,
    Family.JSON: lambda t: str,
    Family.UNKNOWN: lambda t: str,
    Family.DATE: lambda t: format_date,
    Family.DATETIME: _format_datetime_col,
    Family.TIME: _format_time_col,
}


def text_parser(ctype: ColumnType) -> _TextParser:
    """The function turning MySQL text into this type's canonical value (not for BYTES)."""
    try:
        return _PARSERS[ctype.family]
    except KeyError:
        raise TypeError(f"{ctype.name} values have no text form; decode the bytes") from None


@lru_cache(maxsize=4096)
def text_formatter(ctype: ColumnType) -> _TextFormatter:
    """The function printing a canonical value as MySQL text (not for BYTES)."""
    try:
        return _FORMATTERS[ctype.family](ctype)
    except KeyError:
        raise TypeError(f"{ctype.name} values have no text form; encode the bytes") from None


# What canonical values look like, to name a value that does not fit its column.  Encoders do
# not run this on every value (their fast paths accept exactly these types already); they run
# it when writing a row failed, to say which column and why.

_CANONICAL: dict[Family, tuple[type, ...]] = {
    Family.INTEGER: (int,),
    Family.YEAR: (int,),
    Family.ENUM: (int,),
    Family.SET: (int,),
    Family.BIT: (int,),
    Family.FLOAT: (float, int),
    Family.DOUBLE: (float, int),
    Family.DECIMAL: (Decimal,),
    Family.STRING: (str,),
    Family.JSON: (str,),
    Family.BYTES: (bytes,),
    Family.DATE: (_dt.date, ZeroDate),
    Family.DATETIME: (_dt.datetime, _dt.date, ZeroDate),  # a DATE value is midnight
    Family.TIME: (_dt.timedelta,),
    Family.UNKNOWN: (object,),  # a type TiDB added later: decoders pass its values through
}


def value_misfit(ctype: ColumnType, value: Any) -> str | None:
    """Why ``value`` is not a canonical value of ``ctype`` (see the table above), or None.

    NULL fits every type.  Checks the Python type and the ranges that type leaves open
    (integer widths, ENUM/SET/BIT members, a DATE holding a time of day, non-finite numbers,
    text that UTF-8 cannot hold).  Values of a type TiDB added after this table are not
    checked.
    """
    if value is None:
        return None
    family = ctype.family
    allowed = _CANONICAL[family]
    if not isinstance(value, allowed) or (
        isinstance(value, bool) and family not in (Family.INTEGER, Family.UNKNOWN)
    ):
        names = " or ".join(t.__name__ for t in allowed)
        return f"takes {names}, not {type(value).__name__}"
    value = cast(Any, value)  # of an allowed type now, which the isinstance cannot tell mypy
    if family is Family.INTEGER and ctype.name in INT_BITS:
        low, high = ctype.int_range()
        if not low <= value <= high:
            return f"holds {low}..{high}, not {value}"
    elif family is Family.ENUM and ctype.elements and not 0 <= value <= len(ctype.elements):
        return f"has members 1..{len(ctype.elements)}, not {value}"
    elif family is Family.SET and ctype.elements and not 0 <= value < 1 << len(ctype.elements):
        return f"has {len(ctype.elements)} members, so no bitmask {value}"
    elif family is Family.BIT and not 0 <= value < 1 << (ctype.length or 64):
        return f"holds {ctype.length or 64} bits, not {value}"
    elif family is Family.YEAR and not (value == 0 or 1901 <= value <= 2155):
        return f"holds 0 or 1901..2155, not {value}"
    elif family in (Family.FLOAT, Family.DOUBLE, Family.DECIMAL) and not (
        value.is_finite() if family is Family.DECIMAL else math.isfinite(value)
    ):  # (math.isfinite would turn a Decimal into a float: 1E+400 overflows, sNaN raises)
        return f"holds finite numbers, not {value}"
    elif family in (Family.STRING, Family.JSON) and not _is_unicode(value):
        return "holds Unicode text, not a str with lone surrogates"
    elif family is Family.DATE and isinstance(value, _dt.datetime):
        return "takes a date, not a datetime with a time of day"
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
