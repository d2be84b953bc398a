"""Go's text rules, as TiCDC (written in Go) applies them on the wire.

Byte-compatibility with TiCDC needs three things Python does differently:

* JSON string escaping: Go's writers escape ``<`` ``>`` ``&`` and U+2028/U+2029 as
  ``\\u003c``-style sequences and write ``\\b``/``\\f`` as ``\\u0008``/``\\u000c``.  We
  serialize with orjson (fast, correct) and rewrite its output with :func:`go_json`.
* ``strconv.Quote``: Open Protocol writes binary CHAR/VARCHAR values Go-quoted
  (``\\x89PNG\\r\\n``); :func:`go_quote` / :func:`go_unquote` do that without the quotes.
* Float text: ``strconv.FormatFloat(f, 'f'|'e', -1, bits)`` and encoding/json's choice
  between them; :func:`go_float` and :func:`go_json_float`.

No library offers these Go-specific rules, so they are written here, once, for every codec.
"""

from __future__ import annotations

import codecs
import math
import re

from ticdc_spark.types import format_float, positional, shortest_digits

__all__ = ["go_float", "go_json", "go_json_float", "go_quote", "go_unquote"]

# --------------------------------------------------------------------------------------------
# JSON escaping.


def go_json(data: bytes) -> bytes:
    """Rewrite orjson output to the bytes Go's JSON writers produce for the same value.

    Outside strings JSON never contains ``<``, ``>``, ``&`` or U+2028/9, so replacing them in
    the whole document only touches string contents.
    """
    if b"<" in data:
        data = data.replace(b"<", b"\\u003c")
    if b">" in data:
        data = data.replace(b">", b"\\u003e")
    if b"&" in data:
        data = data.replace(b"&", b"\\u0026")
    if b"\xe2\x80" in data:
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    if b"\\b" in data or b"\\f" in data:
        # orjson never writes a raw NUL (it escapes control characters), so NUL can stand in
        # for the escaped backslash pairs while the short escapes are rewritten.
        data = (
            data.replace(b"\\\\", b"\0")
            .replace(b"\\b", b"\\u0008")
            .replace(b"\\f", b"\\u000c")
            .replace(b"\0", b"\\\\")
        )
    return data


# --------------------------------------------------------------------------------------------
# strconv.Quote / strconv.Unquote for byte strings.

_SIMPLE_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x0B: "\\v",
    0x5C: "\\\\",
    0x22: '\\"',
}
_PLAIN_ASCII = re.compile(rb"^[\x20-\x21\x23-\x5b\x5d-\x7e]*\Z")  # \Z: $ allows a final \n


def go_quote(data: bytes) -> str:
    """``strconv.Quote(string(data))`` without the surrounding quotes."""
    if _PLAIN_ASCII.match(data):
        return data.decode("ascii")
    # Bytes that are not UTF-8 decode to lone surrogates U+DC80..U+DCFF, which the table
    # turns into \xNN like Go does for invalid bytes.
    return data.decode("utf-8", "surrogateescape").translate(_QUOTE_TABLE)


class _QuoteTable(dict[int, str]):
    """A str.translate table that works out (and remembers) each code point's Go escape."""

    def __missing__(self, code: int) -> str:
        escaped = self[code] = _quote_rune(chr(code))
        return escaped


_QUOTE_TABLE = _QuoteTable()


def _quote_rune(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not valid UTF-8
        return f"\\x{code - 0xDC00:02x}"
    escape = _SIMPLE_ESCAPES.get(code)
    if escape is not None:
        return escape
    if code < 0x80:
        return ch if 0x20 <= code < 0x7F else f"\\x{code:02x}"
    if ch.isprintable():
        return ch
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_UNQUOTE_RE = re.compile(
    r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-3][0-7]{2}|.)", re.S
)
_UNESCAPE = {
    "a": b"\x07",
    "b": b"\x08",
    "f": b"\x0c",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\x0b",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
}


_VALID_QUOTED_RE = re.compile(
    # (octal escapes stop at \377: Go's strconv.Unquote rejects larger ones)
    r"(?:[^\\]|\\(?:x[0-9a-fA-F]{2}|[0-3][0-7]{2}|[abfnrtv\\\"]|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}))*",
    re.S,
)


def go_unquote(text: str) -> bytes:
    """Reverse :func:`go_quote`: the bytes a Go-quoted string (without quotes) stands for.

    Raises ``ValueError`` on an escape Go would reject.
    """
    if "\\" not in text:
        return text.encode("utf-8", "surrogatepass")
    if _VALID_QUOTED_RE.fullmatch(text) is None:
        raise ValueError(f"invalid escape in Go-quoted string {text[:40]!r}")
    if "\\u" not in text and "\\U" not in text:
        # Only byte escapes left, which Python's bytes-literal decoder reads the same way.
        return codecs.escape_decode(text.encode("utf-8", "surrogatepass"))[0]
    out = bytearray()
    pos = 0
    for match in _UNQUOTE_RE.finditer(text):
        out += text[pos : match.start()].encode("utf-8", "surrogatepass")
        out += _unescape(match[1])
        pos = match.end()
    out += text[pos:].encode("utf-8", "surrogatepass")
    return bytes(out)


def _unescape(escape: str) -> bytes:
    head = escape[0]
    if head == "x":
        return bytes((int(escape[1:], 16),))
    if head in "uU":
        return chr(int(escape[1:], 16)).encode("utf-8")
    if head.isdigit() and len(escape) == 3:
        return bytes((int(escape, 8),))  # (at most 0o377: the pattern allows no more)
    try:
        return _UNESCAPE[head]
    except KeyError:
        raise ValueError(f"invalid escape \\{escape} in Go-quoted string") from None


# --------------------------------------------------------------------------------------------
# Float formatting.


def go_float(value: float, fmt: str = "f", bits: int = 64) -> str:
    """``strconv.FormatFloat(value, fmt, -1, bits)`` for fmt 'f', 'e' or 'g'."""
    if fmt == "f" or not math.isfinite(value):
        return format_float(value, bits)
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + ("0e+00" if fmt == "e" else "0")
    digits, exp = shortest_digits(value, bits)
    if fmt == "g" and -4 <= exp < 6:  # Go: shortest 'g' decides with precision 6
        return sign + positional(digits, exp)
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def go_json_float(value: float, bits: int = 64) -> str:
    """How Go's encoding/json writes a float: 'f' form, 'e' below 1e-6 or from 1e21."""
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = go_float(value, "e", bits)
        mantissa, _, exponent = text.partition("e")
        if exponent.startswith("-0"):
            exponent = "-" + exponent[2:]
        return f"{mantissa}e{exponent}"
    return go_float(value, "f", bits)
