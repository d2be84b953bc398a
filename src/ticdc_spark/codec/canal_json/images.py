"""A ``data``/``old`` row as a row image: canonical values, or the changelog's text.

Canonical values come from the compiled loop when it is built and the row is plainly right;
otherwise the row is checked at C speed (set operations) and parsed here, and a value that
does not parse is looked for column by column, for the message.  The changelog text is the
wire text, checked to be strings, with the columns whose text differs (binary: Latin-1 ->
base64) rewritten.
"""

from __future__ import annotations

from typing import Any

from ticdc_spark.codec.canal_json.plan import DecodePlan
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.errors import DecodeError

__all__ = ["canonical_image", "rewritten", "text_image"]

_TEXT_TYPES = frozenset((str, type(None)))


def canonical_image(plan: DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """Canonical values of a data/old row: by the compiled loop when it is built and the row
    is plainly right, else checked at C speed first, then parsed."""
    if compiled_values is not None:
        image = compiled_values.text_image(plan.compiled, raw, plan.parsers)
        if image is not None:
            return image  # type: ignore[no-any-return]
    _check_texts(plan, raw)
    image = dict(raw)  # text columns (parser str) are their own value: only the rest is parsed
    try:
        for name, parse in plan.converts:
            text = image.get(name)
            if text is not None:
                image[name] = parse(text)
    except (ValueError, UnicodeError):
        return _parsed_slowly(plan, raw)  # find the column, for the message
    return image


def _parsed_slowly(plan: DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    parsers = plan.parsers
    out: dict[str, Any] = {}
    for name, text in raw.items():
        if text is None:
            out[name] = None
            continue
        parse = parsers.get(name)
        if parse is None:
            raise DecodeError(f"column {name!r} is not in mysqlType")
        if type(text) is not str:
            raise DecodeError(f"column {name!r}: values must be strings or null, got {text!r}")
        try:
            out[name] = parse(text)
        except (ValueError, UnicodeError) as exc:
            raise DecodeError(f"column {name!r}: {exc}") from None
    return out


def _check_texts(plan: DecodePlan, raw: dict[str, Any]) -> None:
    """Every value a string or null, every column in mysqlType (C-speed set operations)."""
    if not set(map(type, raw.values())) <= _TEXT_TYPES:
        bad = next(n for n, v in raw.items() if type(v) not in _TEXT_TYPES)
        raise DecodeError(f"column {bad!r}: values must be strings or null, got {raw[bad]!r}")
    if not raw.keys() <= plan.parsers.keys():
        unknown = next(n for n in raw if n not in plan.parsers)
        raise DecodeError(f"column {unknown!r} is not in mysqlType")


def text_image(plan: DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """A data/old row as changelog text: strings checked, rewritten where the plan says."""
    _check_texts(plan, raw)
    return rewritten(plan, raw) if plan.rewrites else raw


def rewritten(plan: DecodePlan, raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of a row with the changelog text of the columns whose wire text is not it."""
    image = dict(raw)
    for name, text_of in plan.rewrites:
        text = image.get(name)
        if text is not None:
            try:
                image[name] = text_of(text)
            except ValueError as exc:
                raise DecodeError(f"column {name!r}: {exc}") from None
    return image
