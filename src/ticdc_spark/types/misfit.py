"""What canonical values look like, to name a value that does not fit its column.

Encoders do not run this on every value (their fast paths accept exactly these types
already); they run it when writing a row failed, to say which column and why."""

from __future__ import annotations

import datetime as _dt
import math
from decimal import Decimal
from typing import Any, cast

from ticdc_spark.types.column import INT_BITS, ColumnType, Family
from ticdc_spark.types.temporal import ZeroDate

__all__ = ["value_misfit"]

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
