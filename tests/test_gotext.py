"""Go's text rules: strconv.Quote/Unquote, JSON escaping and float formatting."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ticdc_spark.codec.gotext import go_float, go_json, go_json_float, go_quote, go_unquote
from ticdc_spark.types import to_float32


@pytest.mark.parametrize(
    ("raw", "quoted"),
    [
        (b"\x89PNG\r\n\x1a\n", r"\x89PNG\r\n\x1a\n"),  # the Open Protocol document's example
        (b"plain text", "plain text"),
        (b'say "hi" \\ there', r"say \"hi\" \\ there"),
        ("héllo".encode(), "héllo"),
        ("zero\u200bwidth".encode(), r"zero\u200bwidth"),
        (b"\x00\x07\x08\x0b\x0c\x7f", r"\x00\a\b\v\f\x7f"),
        ("\U0001f600".encode(), "\U0001f600"),
        ("\U000e0001".encode(), r"\U000e0001"),
        (b"\xff\xfe", r"\xff\xfe"),
        (b"line\n", r"line\n"),  # a final newline is escaped too (a regex $ once let it by)
    ],
)
def test_go_quote_matches_strconv_quote(raw: bytes, quoted: str) -> None:
    assert go_quote(raw) == quoted
    assert go_unquote(quoted) == raw


@given(st.binary(max_size=64))
def test_go_quote_round_trips_any_bytes(raw: bytes) -> None:
    assert go_unquote(go_quote(raw)) == raw


def test_go_unquote_rejects_unknown_escapes() -> None:
    with pytest.raises(ValueError, match="invalid escape"):
        go_unquote(r"bad \q escape")


@pytest.mark.parametrize("text", ["\\400", "\\777", "a\\400\\u00e9"])
def test_go_unquote_rejects_octal_escapes_past_377(text: str) -> None:
    """Go's strconv.Unquote refuses an octal escape over 255 (it was masked to a byte)."""
    with pytest.raises(ValueError):
        go_unquote(text)
    assert go_unquote("\\377\\000") == b"\xff\x00"


def test_go_json_escapes_like_go() -> None:
    doc = orjson.dumps({"a": "<b>&\u2028\u2029\b\f\\b"})
    assert go_json(doc) == (b'{"a":"\\u003cb\\u003e\\u0026\\u2028\\u2029\\u0008\\u000c\\\\b"}')


def test_go_json_matches_the_canal_varbinary_example() -> None:
    raw = bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])
    text = go_json(orjson.dumps(raw.decode("latin-1")))
    assert text == '"\\u0005\\u0007\\n\\u000f$2+cx\\u003c\\u0026ÿþ-7F"'.encode()


@pytest.mark.parametrize(
    ("value", "bits", "text"),
    [
        (0.1, 64, "0.1"),
        (1e20, 64, "100000000000000000000"),
        (1e21, 64, "1e+21"),
        (1e-7, 64, "1e-7"),
        (0.000001, 64, "0.000001"),
        (-2.5, 64, "-2.5"),
        (0.0, 64, "0"),
        (to_float32(0.1), 32, "0.1"),
        (to_float32(153.123), 32, "153.123"),
        (to_float32(3.4028234663852886e38), 32, "3.4028235e+38"),
    ],
)
def test_go_json_float(value: float, bits: int, text: str) -> None:
    assert go_json_float(value, bits) == text


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (1e6, "g", "1e+06"),
        (123456.0, "g", "123456"),
        (0.0001, "g", "0.0001"),
        (0.00001, "g", "1e-05"),
        (123.456, "e", "1.23456e+02"),
        (1e21, "f", "1000000000000000000000"),
    ],
)
def test_go_float_formats(value: float, fmt: str, text: str) -> None:
    assert go_float(value, fmt) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_go_json_float_reads_back(value: float) -> None:
    assert float(go_json_float(value)) == value


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_go_json_float32_reads_back(value: float) -> None:
    assert to_float32(float(go_json_float(value, 32))) == value
