"""Column types of a Debezium table without a Connect schema, guessed from its JSON values.

An integer is read as BIGINT, a fraction as DOUBLE, a boolean as BIT(1), text as LONGTEXT and
an object or array as JSON; a column seen only NULL so far is LONGTEXT.  A guess is kept for
the table's later rows (a NULL does not change it): a value of another JSON type guesses again.
"""

from __future__ import annotations

from typing import Any

import orjson

from ticdc_spark.codec.convert import Converter
from ticdc_spark.codec.debezium.plan import Image, Plan, table_schema
from ticdc_spark.model import Column
from ticdc_spark.types import ColumnType

__all__ = ["Guess"]


class Guess:
    """Column types of a table without a Connect schema, guessed from its values and kept
    (a NULL does not change a column's guess)."""

    def __init__(self) -> None:
        self.types: dict[str, tuple[ColumnType, Converter]] = {}
        self.plan: Plan | None = None
        self.key: tuple[str, ...] = ()

    def plan_for(
        self, database: str, table: str, images: tuple[Image, ...], key: tuple[str, ...]
    ) -> Plan:
        changed = key != self.key or self.plan is None
        for image in images:
            for name, value in (image or {}).items():
                guess = _guess(value)
                known = self.types.get(name)
                if guess is _INTEGER and known is _DOUBLE:
                    continue  # (a DOUBLE's whole numbers print without a fraction)
                if guess is not None and (known is None or known[0] != guess[0]):
                    self.types[name], changed = guess, True
                elif known is None:
                    self.types[name], changed = _UNKNOWN, True
        if changed or self.plan is None:
            columns = [Column(name, t) for name, (t, _) in self.types.items()]
            readers = {name: reader for name, (_, reader) in self.types.items()}
            passes = {
                name: _PASSES[reader] for name, reader in readers.items() if reader in _PASSES
            }
            self.plan = Plan(table_schema(database, table, columns, key), readers, passes)
            self.key = key
        return self.plan


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _bool_int(value: Any) -> int:
    if type(value) is not bool:
        raise ValueError(f"expected a boolean, got {value!r}")
    return int(value)


def _checked(kind: type) -> Converter:
    def read(value: Any) -> Any:
        if type(value) is not kind:
            raise ValueError(f"expected {kind.__name__}, got {value!r}")
        return value

    return read


def _double(value: Any) -> float:
    if type(value) not in (int, float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


_UNKNOWN = (ColumnType("longtext"), _checked(str))  # (only NULLs seen so far)
_INTEGER = (ColumnType("bigint"), _checked(int))
_DOUBLE = (ColumnType("double"), _double)
_GUESSES: dict[type, tuple[ColumnType, Converter]] = {
    bool: (ColumnType("bit", length=1), _bool_int),
    int: _INTEGER,
    float: _DOUBLE,
    str: (ColumnType("longtext"), _checked(str)),
    dict: (ColumnType("json"), _json_text),
    list: (ColumnType("json"), _json_text),
}


# The JSON type each guessed reader returns unchanged.
_PASSES: dict[Converter, type] = {
    _UNKNOWN[1]: str,
    _INTEGER[1]: int,
    _DOUBLE[1]: float,
    _GUESSES[str][1]: str,
    _json_text: str,
}


def _guess(value: Any) -> tuple[ColumnType, Converter] | None:
    return None if value is None else _GUESSES[type(value)]
