"""The codecs' compiled per-column loops (``ticdc_spark._values``) against their Python loops.

The compiled loop may give up on any row (it returns None and the Python loop runs), but what
it keeps must be exactly what the Python loop makes: the same values (types, digits, fsp)
when decoding, the same bytes when encoding.  Conversions and texts are compared one value at
a time for every kind a codec uses; decoders and encoders are compared whole, with the
compiled module removed, on workload messages and rows, mutated messages and random rows.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import os
import time
import types
from decimal import Decimal
from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pipeline_helpers import produce
from strategies import row_changes
from ticdc_spark.codec import (
    Message,
    common,
    compiled,
    make_decoder,
    make_encoder,
)
from ticdc_spark.codec.canal_json import dialect as canal_dialect
from ticdc_spark.codec.gotext import go_json
from ticdc_spark.codec.open_protocol import dialect as open_dialect
from ticdc_spark.codec.open_protocol import encoder as open_encoder
from ticdc_spark.codec.open_protocol import wire as open_wire
from ticdc_spark.errors import DecodeError, EncodeError
from ticdc_spark.model import Column, RowChange, TableSchema
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.testing.workload import Workload
from ticdc_spark.types import parse_column_type

needs_compiled = pytest.mark.skipif(
    compiled.values is None, reason="the compiled loops are not built"
)


def test_the_compiled_loops_are_built_where_ci_requires_them() -> None:
    if os.environ.get("TICDC_SPARK_REQUIRE_NATIVE") == "1":
        assert compiled.values is not None
    if compiled.values is None:
        pytest.skip("built without a C compiler: the Python loops are the ones in use")


# Every (function, kind) pair a codec hands the compiled loop.
PAIRS = sorted(
    {
        (function, compiled.kind_of(function, own))
        for own in (canal_dialect.OWN_KINDS, open_dialect.DECODE_KINDS, None)
        for function in (*compiled._KIND_OF, *(own or {}))
    },
    key=lambda pair: (pair[1], getattr(pair[0], "__name__", "")),
)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def _compiled_value(function: Any, kind: int, value: Any) -> Any:
    """The value column_image makes for one column, or the marker when it gives up."""
    marker = object()
    entries = {"c": (1, None, marker, kind, function)}
    image = compiled.values.column_image(entries, {"c": {"t": 1, "v": value}}, marker)
    return GAVE_UP if image is None else image["c"]


GAVE_UP = object()

_digits = st.integers(0, 10**6).map(str)
_texts = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=False).map(repr),
    st.floats(width=32, allow_nan=False).map(repr),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
    st.builds(
        "{:04d}-{:02d}-{:02d}".format, st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32)
    ),
    st.builds(
        "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}{}".format,
        st.integers(0, 9999),
        st.integers(0, 13),
        st.integers(0, 32),
        st.integers(0, 25),
        st.integers(0, 61),
        st.integers(0, 61),
        st.sampled_from(["", "."]).flatmap(lambda dot: st.just(dot) | _digits.map(dot.__add__)),
    ),
    st.builds(
        "{}{:02d}:{:02d}:{:02d}{}".format,
        st.sampled_from(["", "-", "+"]),
        st.integers(0, 99999),
        st.integers(0, 99),
        st.integers(0, 99),
        st.sampled_from(["", ".1", ".123456", ".1234567", "."]),
    ),
    st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
    st.text("AQgw+/=", max_size=9),
    st.text("0123456789-+.eE :_", max_size=12),
    st.text(max_size=8),
    st.text(st.characters(max_codepoint=0x2FF), max_size=8),
)
_values = st.one_of(_texts, st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.booleans())


@needs_compiled
@pytest.mark.parametrize(
    ("function", "kind"), PAIRS, ids=[f"{k}-{getattr(f, '__name__', f)}" for f, k in PAIRS]
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values)
@example(value="")
@example(value="-0")
@example(value="0000-00-00 00:00:00")
@example(value="2024-02-29 23:59:59.5")
@example(value="-838:59:59.000001")
@example(value="-00:00:00.5")
@example(value="QR==")
@example(value="QQ==")
@example(value="3.4028235e38")
@example(value="3.5e38")
@example(value="1e999")
@example(value="caf\u00e9")
@example(value="\u0100")
@example(value="a\\x00")
@example(value=2**64 - 1)
def test_each_conversion_is_the_codecs_own(function: Any, kind: int, value: Any) -> None:
    try:
        expected: Any = function(value)
    except (*common.INPUT_ERRORS, DecodeError):
        expected = GAVE_UP
    got = _compiled_value(function, kind, value)
    assert got is GAVE_UP or _same(got, expected), (got, expected)
    if expected is GAVE_UP:
        assert got is GAVE_UP


@needs_compiled
@given(
    names=st.lists(st.sampled_from("abcd"), unique=True, max_size=4).map(tuple),
    images=st.lists(
        st.none()
        | st.dictionaries(
            st.sampled_from("abcde"),
            st.none() | st.integers() | st.text("0123456789.:- ", max_size=12),
            max_size=5,
        ),
        max_size=3,
    ).map(tuple),
    nested=st.booleans(),
)
def test_first_fsps_match_the_python_reading(names, images, nested) -> None:
    if nested:
        images = tuple(
            None if i is None else {k: {"v": v, "t": 12} for k, v in i.items()} for i in images
        )
    field = "v" if nested else None
    expected = tuple(common._first_fsp(name, images, field) for name in names)
    assert compiled.values.first_fsps(names, images, field) == expected


# --------------------------------------------------------------------------------------------
# Whole decoders, with and without the compiled loops.

PROTOCOLS = {
    "canal-json": {"enable-tidb-extension": "true"},
    "open-protocol": {},
}


@cache
def _workload_messages(protocol: str) -> tuple[Message, ...]:
    return tuple(produce(Workload(seed=5, rows=300, tables=2), protocol, PROTOCOLS[protocol]))


def _outcome(protocol: str, message: Message) -> Any:
    decoder = make_decoder(protocol, PROTOCOLS[protocol])
    try:
        return repr(decoder.decode(message))  # repr: Decimal("1.0") == Decimal("1.00")
    except DecodeError as exc:
        return ("error", exc.reason)


def _set_compiled(monkeypatch: pytest.MonkeyPatch, loops: Any) -> None:
    for module in compiled.users():
        monkeypatch.setattr(module, "compiled_values", loops)


def _without_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_compiled(monkeypatch, None)


class _Counting:
    """compiled.values, counting the images and texts it builds (so a test sees it in use)."""

    def __init__(self) -> None:
        self.built = 0

    def __getattr__(self, name: str) -> Any:
        function = getattr(compiled.values, name)

        def call(*args: Any) -> Any:
            result = function(*args)
            self.built += name != "first_fsps" and result is not None
            return result

        return call


@needs_compiled
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_decoders_give_the_same_events_without_the_compiled_loops(protocol, monkeypatch) -> None:
    messages = _workload_messages(protocol)
    counting = _Counting()
    _set_compiled(monkeypatch, counting)
    fast = [_outcome(protocol, m) for m in messages]
    rows = sum(events.count("RowChange(") for events in fast)
    assert rows >= 300
    assert counting.built >= rows  # every row image (an UPDATE has two) came from C
    changelog = _changelog(protocol, messages)
    _without_compiled(monkeypatch)
    assert [_outcome(protocol, m) for m in messages] == fast
    assert _changelog(protocol, messages) == changelog


def _changelog(protocol: str, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The Spark decode stage's rows (text images, not canonical values)."""
    decoder = make_decoder(protocol, PROTOCOLS[protocol])
    builder = ChangelogBuilder()
    for message in messages:
        decoder.decode_into(message, builder)
    return builder.to_batch().to_pylist()  # type: ignore[no-any-return]


def _mutations(data: bytes, draw: st.DrawFn) -> bytes:
    """Edits that keep most of a JSON document intact: a value's text changed."""
    replacements = [b'"1"', b'"-0"', b'"x"', b"1", b"1.5", b"null", b'"\\u00e9"', b'"QQ=="']
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        start = draw(st.integers(0, len(data) - 1))
        end = min(len(data), start + draw(st.integers(0, 8)))
        data = data[:start] + draw(st.sampled_from(replacements)) + data[end:]
    return data


@needs_compiled
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_messages_decode_the_same_without_the_compiled_loops(protocol, data) -> None:
    messages = _workload_messages(protocol)
    message = data.draw(st.sampled_from([m for m in messages if m.value]))
    if protocol == "open-protocol":  # mutate one JSON entry, keep the framing right
        entries = list(open_wire.entries(message.value, 0, "value"))
        i = data.draw(st.integers(0, len(entries) - 1))
        entries[i] = _mutations(entries[i], data.draw)
        mutated = Message(message.key, open_wire.frame_values(entries))
    else:
        mutated = Message(None, _mutations(message.value, data.draw))
    fast = _outcome(protocol, mutated)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_compiled(monkeypatch)
        assert _outcome(protocol, mutated) == fast


# --------------------------------------------------------------------------------------------
# Encoding: canonical values to text, and whole encoders.

ENCODE_TYPES = [
    "int",
    "bigint unsigned",
    "varchar(20)",
    "json",
    "binary(8)",
    "blob",
    "float",
    "double",
    "decimal(65,30)",
    "date",
    "datetime",
    *(f"datetime({fsp})" for fsp in range(7)),
    "time",
    *(f"time({fsp})" for fsp in range(7)),
    "year",
    "bit(64)",
    # type parameters a message may carry that no MySQL column has (found in review)
    "datetime(-2)",
    "time(-2)",
    "datetime(4294967297)",
    "decimal(10,99999999999999999999)",
]

_canonical = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(),
    st.floats(width=32),
    st.floats(min_value=-1e-3, max_value=1e-3),
    st.decimals(),
    st.text(),
    st.text(st.characters(max_codepoint=0x2FF)),
    st.sampled_from(["<a&b>", "\u2028\u2029", "\x00\x08\x0c\x1f\x7f", '"\\', "\ud800"]),
    st.binary(max_size=16),
    st.dates(),
    st.datetimes(),
    st.timedeltas(),
)


@needs_compiled
@pytest.mark.parametrize("sql", ENCODE_TYPES)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=_canonical)
@example(value=float("nan"))
@example(value=float("inf"))
@example(value=-0.0)
@example(value=1e16)
@example(value=1.5e-7)
@example(value=3.4028234663852886e38)
@example(value=1e300)
@example(value=1.401298464324817e-45)
@example(value=5e-324)
@example(value=dt.timedelta(microseconds=-1))
@example(value=dt.timedelta(days=-35, seconds=1, microseconds=10))
@example(value=dt.datetime(1, 1, 1, 0, 0, 0, 120))
@example(value=Decimal("-0.000"))
@example(value=Decimal("1E+5"))
def test_each_text_is_the_formatters_own(sql: str, value: Any) -> None:
    ctype = parse_column_type(sql)
    formatter, kind, fsp = canal_dialect.writer(ctype)
    columns = ((b'"c":', "c", kind, fsp, formatter),)
    try:
        expected = go_json(orjson.dumps({"c": None if value is None else formatter(value)}))
    except (*common.INPUT_ERRORS, orjson.JSONEncodeError):
        expected = None
    got = compiled.values.text_object(columns, {"c": value})
    assert got is None or got == expected, (got, expected)
    if expected is None:
        assert got is None


def _encoded(protocol: str, rows: list[Any], options: dict[str, str]) -> list[Any]:
    encoder = make_encoder(protocol, options)
    encoder.clock = lambda: 1_700_000_000_000  # Canal-JSON's "ts" is the wall clock
    try:
        return [(m.key, m.value) for m in encoder.encode(rows)]
    except EncodeError as exc:
        return [("error", str(exc))]


ENCODE_OPTIONS = {
    "canal-json": [
        {"enable-tidb-extension": "true"},
        {"content-compatible": "true", "only-output-updated-columns": "true"},
        {"delete-only-output-handle-key-columns": "true"},
    ],
    "open-protocol": [{}, {"only-output-updated-columns": "true"}],
}


@needs_compiled
@pytest.mark.parametrize(
    ("protocol", "options"),
    [(p, o) for p, options in ENCODE_OPTIONS.items() for o in options],
)
def test_encoders_write_the_same_bytes_without_the_compiled_loops(
    protocol, options, monkeypatch
) -> None:
    rows = [e for e in Workload(seed=9, rows=400, tables=2).events() if isinstance(e, RowChange)]
    counting = _Counting()
    _set_compiled(monkeypatch, counting)
    fast = _encoded(protocol, rows, options)
    assert len(fast) > 10
    assert counting.built >= len(rows)  # every row's image went through C
    _without_compiled(monkeypatch)
    assert _encoded(protocol, rows, options) == fast


REPRESENTATIVE = {
    "int": -42,
    "bigint unsigned": 2**64 - 1,
    "varchar(20)": "caf\u00e9 <&>",
    "binary(8)": b"\x00\xff\x89PNG",
    "float": 0.1 + 0.2,
    "double": 1e-7,
    "decimal(65,30)": Decimal("-12.500"),
    "date": dt.date(2024, 2, 29),
    "datetime": dt.datetime(2024, 2, 29, 23, 59, 59, 120000),
    "datetime(3)": dt.datetime(9, 1, 2, 3, 4, 5, 6000),
    "time": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
    "time(2)": dt.timedelta(days=2, microseconds=10000),
}


@needs_compiled
@pytest.mark.parametrize(("sql", "value"), sorted(REPRESENTATIVE.items()))
def test_common_values_are_formatted_in_c(sql: str, value: Any) -> None:
    ctype = parse_column_type(sql)
    formatter, kind, fsp = canal_dialect.writer(ctype)
    assert kind != compiled.CALL
    plain = orjson.dumps({"c": formatter(value)})
    text = compiled.values.text_object(((b'"c":', "c", kind, fsp, formatter),), {"c": value})
    assert text == go_json(plain)


@needs_compiled
@pytest.mark.parametrize("protocol", sorted(ENCODE_OPTIONS))
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row=row_changes())
def test_random_rows_encode_the_same_without_the_compiled_loops(protocol, row) -> None:
    options = ENCODE_OPTIONS[protocol][0]
    fast = _encoded(protocol, [row], options)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_compiled(monkeypatch)
        assert _encoded(protocol, [row], options) == fast


OPEN_TYPES = [*ENCODE_TYPES, "char(4) binary", "varbinary(8)", "text", "mediumblob", "geometry"]


@needs_compiled
@pytest.mark.parametrize("sql", OPEN_TYPES)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(value=_canonical)
@example(value=1e-7)
@example(value=-1.5e-10)
@example(value=1e21)
@example(value=-1.2345e300)
@example(value=2**64 - 1)
@example(value=2**64)
@example(value=-(2**63) - 1)
@example(value=b"\x89PNG\r\n")
@example(value=b'a"b\\c<')
def test_each_open_protocol_value_is_the_encoders_own(sql: str, value: Any) -> None:
    schema = TableSchema("d", "t", (Column("c", parse_column_type(sql)),))
    plan = open_encoder.OpenProtocolEncoder()._plan(schema)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_compiled(monkeypatch)
        try:
            expected = open_encoder._columns_json(plan, {"c": value})
        except (*common.INPUT_ERRORS, orjson.JSONEncodeError, EncodeError):
            expected = None
    got = compiled.values.column_object(plan.compiled, {"c": value})
    assert got is None or got == expected, (got, expected)
    if expected is None:
        assert got is None


@needs_compiled
def test_go_quoting_matches_gotext_on_every_two_byte_string_and_many_code_points() -> None:
    """Go-quoting decides per byte whether UTF-8 is well formed and per code point whether
    it is printable: every pair of bytes and a spread of code points are compared."""
    schema = TableSchema("d", "t", (Column("c", parse_column_type("varbinary(8)")),))
    plan = open_encoder.OpenProtocolEncoder()._plan(schema)
    samples = [bytes((a, b)) for a in range(256) for b in range(256)]
    samples += [chr(c).encode() for c in range(0x80, 0x110000, 97) if not 0xD800 <= c < 0xE000]
    samples += [b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80", b"a\n"]
    got = [compiled.values.column_object(plan.compiled, {"c": s}) for s in samples]
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_compiled(monkeypatch)
        assert got == [open_encoder._columns_json(plan, {"c": s}) for s in samples]


@needs_compiled
def test_canal_rows_written_in_c_carry_the_wall_clock() -> None:
    """With the default clock the compiled writer reads the time itself: "ts" lies between
    the wall clock before and after encoding, and the rest equals the Python writer's."""
    rows = [e for e in Workload(seed=3, rows=40, tables=2).events() if isinstance(e, RowChange)]
    encoder = make_encoder("canal-json", {"enable-tidb-extension": "true"})
    start = time.time_ns() // 1_000_000
    messages = encoder.encode(rows)
    end = time.time_ns() // 1_000_000
    stamps = [orjson.loads(m.value)["ts"] for m in messages]
    assert all(start <= ts <= end for ts in stamps)
    with pytest.MonkeyPatch.context() as monkeypatch:
        _without_compiled(monkeypatch)
        for row, message, ts in zip(rows, messages, stamps, strict=True):
            python = make_encoder("canal-json", {"enable-tidb-extension": "true"})
            python.clock = lambda ts=ts: ts
            assert python.encode([row])[0].value == message.value


_JSON_TRICKY = 'ab<>&"\\\n\r\t\x00\x1f\x7f\u00e9\u2028\u2029\u20ac\U0001f600'


@needs_compiled
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(st.sampled_from(_JSON_TRICKY), max_size=80)
    | st.builds(  # a long plain run, then one character to escape anywhere in a block
        "{}{}{}".format,
        st.integers(0, 40).map("x".__mul__),
        st.sampled_from(_JSON_TRICKY),
        st.integers(0, 40).map("y".__mul__),
    ),
    raw=st.binary(max_size=80)
    | st.text('ab<&"\\\n\xe9\xff', max_size=80).map(lambda t: t.encode("latin-1"))
    | st.builds(bytes.__add__, st.integers(0, 40).map(b"p".__mul__), st.binary(max_size=3)),
)
def test_long_texts_are_escaped_as_go_escapes_them(text: str, raw: bytes) -> None:
    """Texts and Latin-1 binaries long enough for the 16-byte scan, with escapes anywhere."""
    columns = (
        (b'"t":', "t", compiled.STR, 0, str),
        (b'"b":', "b", compiled.LATIN1, 0, canal_dialect.latin1_text),
    )
    expected = go_json(orjson.dumps({"t": text, "b": raw.decode("latin-1")}))
    assert compiled.values.text_object(columns, {"t": text, "b": raw}) == expected


@needs_compiled
def test_decimal_text_does_not_depend_on_the_context_capitals() -> None:
    ctype = parse_column_type("decimal(65,30)")
    columns = ((b'"c":', "c", compiled.DECIMAL, 0, canal_dialect.writer(ctype)[0]),)
    with decimal.localcontext() as context:
        context.capitals = 0  # str(Decimal("1E+2")) is then "1e+2"
        for text in ("1E+2", "1E-9", "-12.5"):
            expected = go_json(orjson.dumps({"c": format(Decimal(text), "f")}))
            assert compiled.values.text_object(columns, {"c": Decimal(text)}) == expected


@needs_compiled
@pytest.mark.parametrize("stamp", [1.7e12, 2**64, -5])
def test_an_odd_clock_value_leaves_the_rows_to_python(stamp: Any, monkeypatch) -> None:
    rows = [e for e in Workload(seed=3, rows=12, tables=1).events() if isinstance(e, RowChange)]
    encoder = make_encoder("canal-json", {})
    encoder.clock = lambda: stamp
    got = [m.value for m in encoder.encode(rows)]
    _without_compiled(monkeypatch)
    python = make_encoder("canal-json", {})
    python.clock = lambda: stamp
    assert got == [m.value for m in python.encode(rows)]


@needs_compiled
def test_first_fsps_reads_plain_text_where_column_objects_were_expected() -> None:
    assert compiled.values.first_fsps(("c",), ({"c": "00:00:01.123"},), "v") == (3,)
    assert compiled.values.first_fsps(("c",), (types.MappingProxyType({}),), None) is None


class _Meddler:
    """A value whose text changes the image being written (found in review: the compiled
    writer held borrowed values, and wrote freed memory)."""

    def __init__(self, image: dict[str, Any]) -> None:
        self.image = image

    def __str__(self) -> str:
        self.image.clear()
        return "meddled"


@needs_compiled
def test_a_formatter_that_changes_the_image_makes_the_writers_give_up() -> None:
    image: dict[str, Any] = {"a": None, "b": "x" * 40}
    image["a"] = _Meddler(image)
    columns = ((b'"a":', "a", compiled.CALL, 0, str), (b'"b":', "b", compiled.STR, 0, str))
    assert compiled.values.text_object(columns, image) is None
    image = {"a": None, "b": "x" * 40}
    image["a"] = _Meddler(image)
    heads = ((b'"a":{"v":', "a", compiled.CALL, 0, str), (b'"b":{"v":', "b", compiled.STR, 0, str))
    assert compiled.values.column_object(heads, image) is None


@needs_compiled
def test_images_that_are_not_plain_dicts_are_left_to_python() -> None:
    import collections

    image = collections.defaultdict(lambda: None, a="x")  # image["b"] would be None
    columns = ((b'"a":', "a", compiled.STR, 0, str), (b'"b":', "b", compiled.STR, 0, str))
    assert compiled.values.text_object(columns, image) is None


@needs_compiled
def test_canal_rows_reads_a_snapshot_of_its_list() -> None:
    rows = [e for e in Workload(seed=3, rows=12, tables=1).events() if isinstance(e, RowChange)]
    encoder = make_encoder("canal-json", {})
    run = list(rows)

    def layout_of(schema: Any) -> Any:
        run.clear()  # Python code pulling the rows away mid-call
        return encoder._layout(schema)

    values = compiled.values.canal_rows(layout_of, run, 5, False)
    assert len(values) == len(rows) and all(isinstance(v, bytes) for v in values)


@needs_compiled
def test_an_interrupt_in_a_row_attribute_propagates() -> None:
    table = next(
        e for e in Workload(seed=3, rows=4, tables=1).events() if isinstance(e, RowChange)
    ).schema

    class Row:
        @property
        def schema(self) -> Any:
            return table

        @property
        def kind(self) -> Any:
            raise KeyboardInterrupt

    encoder = make_encoder("canal-json", {})
    with pytest.raises(KeyboardInterrupt):
        compiled.values.canal_rows(encoder._layout, [Row()], 5, False)
