"""Encoders given values that are not their column's canonical value raise EncodeError naming
the row and the column; ``types.value_misfit`` (what names it) accepts every canonical value."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from strategies import row_changes
from ticdc_spark.codec import compiled as compiled_module
from ticdc_spark.codec import make_decoder, make_encoder
from ticdc_spark.errors import EncodeError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema
from ticdc_spark.testing.workload import Workload
from ticdc_spark.types import parse_column_type, value_misfit

PROTOCOLS = [
    ("open-protocol", {}),
    ("canal-json", {}),
    ("canal-json", {"enable-tidb-extension": "true"}),
]

_COLUMNS = {
    "id": "int",
    "f": "float",
    "d": "double",
    "b": "varbinary(10)",
    "blob": "blob",
    "dt": "datetime(3)",
    "t": "time",
    "dec": "decimal(10,2)",
}
SCHEMA = TableSchema(
    "db",
    "t",
    tuple(
        Column(name, parse_column_type(text), nullable=name != "id")
        for name, text in _COLUMNS.items()
    ),
    (Index("PRIMARY", ("id",), primary=True),),
)

# Values of the wrong Python type that no writer can turn into its column's text.
UNWRITABLE = [
    ("f", "x"),
    ("b", "abc"),
    ("blob", "x"),
    ("dt", "2020-01-01 00:00:00"),
    ("t", "10:00:00"),
    ("dec", [1]),
]


def _fits(row: RowChange) -> list[str]:
    """The misfits of a row's values: none, for a canonical row."""
    out = []
    for image in (row.before, row.after):
        for name, value in (image or {}).items():
            column = row.schema.get(name)
            assert column is not None, name
            why = value_misfit(column.type, value)
            if why is not None:
                out.append(f"{name} {column.type.sql()}: {why} ({value!r})")
    return out


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize(("column", "value"), UNWRITABLE)
def test_a_wrong_typed_value_names_its_column(
    protocol: str,
    options: dict[str, str],
    compiled: bool,
    column: str,
    value: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if not compiled:
        for module in compiled_module.users():
            monkeypatch.setattr(module, "compiled_values", None)
    good = RowChange(RowKind.INSERT, SCHEMA, 7, None, {"id": 1, "f": 1.5})
    bad = RowChange(RowKind.UPDATE, SCHEMA, 9, {"id": 2}, {"id": 2, column: value})
    encoder = make_encoder(protocol, options)
    with pytest.raises(EncodeError) as raised:
        encoder.encode([good, bad])
    text = str(raised.value)
    assert protocol in text
    assert "UPDATE of db.t at ts 9" in text
    assert f"column {column!r} {SCHEMA.get(column).type.sql().upper()}" in text  # type: ignore[union-attr]
    assert f"not {type(value).__name__}" in text
    assert "after image" in text
    assert encoder.encode([good])  # the encoder is still usable


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
def test_the_failing_row_is_named_not_an_earlier_odd_one(protocol: str, options: dict) -> None:
    """An out-of-range integer is written as given; a later row's bad value is what fails,
    and the error names that row, its suspect columns and the writer's own error."""
    odd = RowChange(RowKind.INSERT, SCHEMA, 5, None, {"id": 1 << 40})
    good = RowChange(RowKind.INSERT, SCHEMA, 7, None, {"id": 1, "f": 1.5})
    bad = RowChange(RowKind.INSERT, SCHEMA, 9, None, {"id": 1 << 40, "dt": "x"})
    encoder = make_encoder(protocol, options)
    assert encoder.encode([odd])
    with pytest.raises(EncodeError) as raised:
        encoder.encode([odd, good, bad, good])
    text = str(raised.value)
    assert "INSERT of db.t at ts 9" in text
    assert "column 'dt' DATETIME(3) takes" in text
    assert "column 'id' INT holds" in text  # a suspect too: both are listed
    assert "[AttributeError:" in text  # and what the writer said


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@pytest.mark.parametrize(
    ("column", "value"),
    [("dec", Decimal("sNaN")), ("dec", Decimal("NaN")), ("s", "a\ud800b")],
    ids=["signaling-nan", "nan", "lone-surrogate"],
)
def test_unwritable_values_of_the_right_type_are_named(
    protocol: str, options: dict, column: str, value: Any
) -> None:
    schema = TableSchema(
        "db",
        "u",
        (
            Column("id", parse_column_type("int"), nullable=False),
            Column(column, parse_column_type("decimal(10,2)" if column == "dec" else "text")),
        ),
        (Index("PRIMARY", ("id",), primary=True),),
    )
    rows = [
        RowChange(RowKind.INSERT, schema, 7, None, {"id": 1}),
        RowChange(RowKind.INSERT, schema, 9, None, {"id": 2, column: value}),
    ]
    with pytest.raises(EncodeError, match=rf"INSERT of db\.u at ts 9: column '{column}'"):
        make_encoder(protocol, options).encode(rows)


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
def test_a_row_without_its_image_is_an_encode_error(protocol: str, options: dict) -> None:
    row = RowChange(RowKind.UPDATE, SCHEMA, 9, None, {"id": 2})
    with pytest.raises(EncodeError, match=r"UPDATE of db\.t has no before image"):
        make_encoder(protocol, options).encode([row])


@pytest.mark.parametrize(
    ("text", "value", "why"),
    [
        ("int", "12", "takes int, not str"),
        ("tinyint unsigned", -1, "holds 0..255, not -1"),
        ("bigint", 1 << 63, "holds -9223372036854775808..9223372036854775807"),
        ("enum('a','b')", 3, "has members 1..2, not 3"),
        ("enum('a','b')", "a", "takes int, not str"),
        ("set('a','b')", 4, "has 2 members, so no bitmask 4"),
        ("bit(3)", 8, "holds 3 bits, not 8"),
        ("year", 1900, "holds 0 or 1901..2155, not 1900"),
        ("double", float("nan"), "holds finite numbers, not nan"),
        ("decimal(5,2)", Decimal("Infinity"), "holds finite numbers"),
        ("decimal(5,2)", 1.5, "takes Decimal, not float"),
        ("varchar(5)", 12, "takes str, not int"),
        ("json", {"a": 1}, "takes str, not dict"),
        ("date", dt.datetime(2020, 1, 1, 12), "not a datetime with a time of day"),
        ("time", True, "takes timedelta, not bool"),
        ("float", True, "takes float or int, not bool"),
        ("decimal(5,2)", Decimal("sNaN"), "holds finite numbers, not sNaN"),
        ("text", "a\ud800", "not a str with lone surrogates"),
    ],
)
def test_value_misfit_says_why(text: str, value: Any, why: str) -> None:
    result = value_misfit(parse_column_type(text), value)
    assert result is not None and why in result


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_changes())
def test_canonical_values_fit_before_and_after_a_round_trip(row: RowChange) -> None:
    assert _fits(row) == []
    for protocol, options in PROTOCOLS:
        decoder = make_decoder(protocol, options)
        for message in make_encoder(protocol, options).encode([row]):
            for event in decoder.decode(message):
                if isinstance(event, RowChange):
                    assert _fits(event) == [], protocol


def test_the_workloads_values_fit() -> None:
    rows = [e for e in Workload(seed=11, rows=400, tables=2).events() if isinstance(e, RowChange)]
    assert len(rows) >= 400
    assert [m for row in rows for m in _fits(row)] == []


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("decimal(65,0)", Decimal("1E+400")),  # beyond a float, still a finite DECIMAL
        ("bigint unsigned", (1 << 64) - 1),
        ("bit(64)", (1 << 64) - 1),
        ("tinyint(1)", True),
        ("year", 0),
        ("enum('a','b')", 0),
        ("vector", [1.0, 2.0]),  # a type TiDB added later: not checked
    ],
)
def test_value_misfit_accepts_edge_values(text: str, value: Any) -> None:
    assert value_misfit(parse_column_type(text), value) is None
