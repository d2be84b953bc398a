"""Numbers: FLOAT's float32 rounding, the shortest text of a float as Go prints it,
DECIMAL's text, and BIGINT UNSIGNED as TiCDC's ``int64`` casts leave it."""

from __future__ import annotations

import math
import struct
from decimal import Decimal, InvalidOperation

__all__ = [
    "format_decimal",
    "format_float",
    "format_float32",
    "format_float64",
    "int64_cast",
    "parse_decimal",
    "parse_float",
    "positional",
    "shortest_digits",
    "to_float32",
]


def int64_cast(value: int) -> int:
    """A BIGINT UNSIGNED value past 2**63-1 as Go's ``int64(uint64)`` leaves it (TiCDC writes
    such values so); any other value unchanged (one past 2**64 is no uint64: the writer
    that checks the range refuses it)."""
    return value - (1 << 64) if (1 << 63) <= value < (1 << 64) else value


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
