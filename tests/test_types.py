"""The MySQL type system: type strings, canonical values and their text form."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import numpy as np  # the oracle of float32's shortest text
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ticdc_spark.types import (
    ColumnType,
    Family,
    ZeroDate,
    format_float,
    parse_column_type,
    parse_date,
    parse_datetime,
    text_formatter,
    text_parser,
    to_float32,
)


@pytest.mark.parametrize(
    ("text", "sql", "family"),
    [
        ("int(10) unsigned", "int(10) unsigned", Family.INTEGER),
        ("INT UNSIGNED ZEROFILL", "int unsigned zerofill", Family.INTEGER),
        ("bool", "tinyint(1)", Family.INTEGER),
        ("decimal(10, 4)", "decimal(10,4)", Family.DECIMAL),
        ("numeric", "decimal", Family.DECIMAL),
        ("enum('a','b''c','d,e')", "enum('a','b''c','d,e')", Family.ENUM),
        ("set('x')", "set('x')", Family.SET),
        ("datetime(3)", "datetime(3)", Family.DATETIME),
        ("timestamp", "timestamp", Family.DATETIME),
        ("varbinary(16)", "varbinary(16)", Family.BYTES),
        ("longtext", "longtext", Family.STRING),
        ("bit(64)", "bit(64)", Family.BIT),
        ("double precision", "double", Family.DOUBLE),
        ("vector(3)", "vector(3)", Family.UNKNOWN),
    ],
)
def test_parse_column_type(text: str, sql: str, family: Family) -> None:
    ctype = parse_column_type(text)
    assert ctype.sql() == sql
    assert ctype.family is family


def test_enum_and_set_names() -> None:
    enum = parse_column_type("enum('red','green')")
    assert (enum.enum_name(2), enum.enum_index("GREEN"), enum.enum_name(0)) == ("green", 2, "")
    flags = parse_column_type("set('a','b','c')")
    assert flags.set_names(5) == ("a", "c") and flags.set_bits("a,c") == 5
    assert flags.set_names(8) is None


@pytest.mark.parametrize(
    ("sql", "text", "value"),
    [
        ("bigint unsigned", "18446744073709551615", 18446744073709551615),
        ("tinyint", "-128", -128),
        (
            "decimal(65,30)",
            "-12345678901234567890123456789012345.123456789012345678901234567890",
            Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
        ),
        ("decimal(10,4)", "0.0000", Decimal("0.0000")),
        ("date", "0000-00-00", ZeroDate(0, 0, 0)),
        ("date", "2020-00-15", ZeroDate(2020, 0, 15)),
        ("date", "1000-01-01", dt.date(1000, 1, 1)),
        ("datetime(6)", "0000-00-00 00:00:00.000000", ZeroDate(0, 0, 0)),
        ("datetime(3)", "2023-11-30 12:34:56.123", dt.datetime(2023, 11, 30, 12, 34, 56, 123000)),
        ("timestamp", "2023-11-30 12:34:56", dt.datetime(2023, 11, 30, 12, 34, 56)),
        (
            "time(6)",
            "-12:34:56.123456",
            -dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=123456),
        ),
        ("time", "838:59:59", dt.timedelta(hours=838, minutes=59, seconds=59)),
        ("year", "0", 0),
        ("year", "2155", 2155),
        ("bit(64)", "18446744073709551615", 2**64 - 1),
        ("enum('a')", "1", 1),
        ("json", '{"a": [1, 2]}', '{"a": [1, 2]}'),
        ("float", "0.1", to_float32(0.1)),
        ("double", "1e21", 1e21),
    ],
)
def test_text_form_round_trips(sql: str, text: str, value: object) -> None:
    ctype = parse_column_type(sql)
    assert text_parser(ctype)(text) == value
    expected = {"1e21": "1000000000000000000000"}.get(text, text)  # TiCDC prints floats plain
    assert text_formatter(ctype)(value) == expected


def test_float_text_is_go_positional_shortest() -> None:
    assert format_float(to_float32(153.123), 32) == "153.123"
    assert format_float(1.0) == "1"
    assert format_float(1e-7) == "0.0000001"
    assert format_float(-0.0) == "-0"


def test_float32_subnormals_take_their_shortest_digits() -> None:
    # Go's strconv.FormatFloat(v, 'f', -1, 32): a subnormal's neighbours are far apart, so
    # fewer than six digits can read back (the smallest float32 is "1e-45", not "1.4013e-45").
    assert format_float(to_float32(1e-45), 32) == "0." + "0" * 44 + "1"
    assert format_float(to_float32(3e-45), 32) == "0." + "0" * 44 + "3"
    assert format_float(to_float32(5.877472e-39), 32) == "0." + "0" * 38 + "5877472"


@given(st.integers(min_value=1, max_value=0x7F7FFFFF))
def test_float32_text_is_numpys_shortest(bits: int) -> None:
    value = struct.unpack("<f", struct.pack("<I", bits))[0]
    assert format_float(value, 32) == np.format_float_positional(
        np.float32(value), unique=True, trim="-"
    )


def test_bad_text_is_a_value_error() -> None:
    for sql, text in [
        ("int", "abc"),
        ("decimal", "NaN"),
        ("date", "2020-13"),
        ("time", "12h"),
        ("datetime", "yesterday"),
    ]:
        with pytest.raises(ValueError):
            text_parser(parse_column_type(sql))(text)


def test_binary_types_have_no_text_form() -> None:
    with pytest.raises(TypeError):
        text_parser(ColumnType("blob"))


@pytest.mark.parametrize("text", ["2024-W01-1", "2024-01-01 12:00:00+05:00",
                                  "2024-01-01 12:00:00,5", "2024-01-01 12:00:00Z",
                                  "2024-01-01 12:00:00.5+05:00"])  # fmt: skip
def test_iso_8601_forms_mysql_never_writes_are_not_dates(text: str) -> None:
    """fromisoformat (the fast path) reads week dates, time zones and comma fractions."""
    with pytest.raises(ValueError):
        (parse_date if len(text) == 10 else parse_datetime)(text)
    assert parse_datetime("2024-01-01 12:00:00.5") == dt.datetime(2024, 1, 1, 12, 0, 0, 500000)


@pytest.mark.parametrize(
    "elements", [("a\nb", "c"), ("x\x00y", "z\r"), ("a\\", "b"), ("a\\\\b", "it's"), ("\\'",)]
)
def test_enum_members_read_back_from_the_type_text(elements: tuple[str, ...]) -> None:
    """Members are written as TiDB writes them (quotes doubled, NUL/LF/CR escaped, a
    backslash as is), and read back exactly: a trailing backslash used to end the member
    list, and escaped control characters stayed escaped."""
    for name in ("enum", "set"):
        ctype = ColumnType(name, elements=elements)
        assert parse_column_type(ctype.sql()).elements == elements


@given(
    st.tuples(
        st.integers(0, 9999),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 99),
        st.integers(0, 999_999),
    )
)
def test_a_zero_date_is_one_datetime_refuses(fields: tuple[int, ...]) -> None:
    """(types.temporal.is_calendar decides without calling datetime: the two must agree)."""
    from ticdc_spark.types.temporal import ZeroDate, is_calendar

    try:
        dt.datetime(*fields)
        expected = True
    except ValueError:
        expected = False
    assert is_calendar(ZeroDate(*fields)) == expected
    text = "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format(*fields[:6])
    if expected:
        assert parse_datetime(text) == dt.datetime(*fields[:6])
    else:
        assert parse_datetime(text) == ZeroDate(*fields[:6], 0)
