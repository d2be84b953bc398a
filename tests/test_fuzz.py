"""Fuzzing the decoders with mutated messages: only DecodeError may escape, quickly, and no
message may make a decoder allocate far beyond its own size."""

from __future__ import annotations

import struct
import tracemalloc

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import other_events, row_changes
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import DecodeError

PROTOCOLS = [
    ("open-protocol", {}),
    ("open-protocol", {"large-message-handle-compression": "snappy"}),
    ("canal-json", {"enable-tidb-extension": "true"}),
    ("canal-json", {"large-message-handle-compression": "lz4"}),
]
FUZZ = settings(
    max_examples=200,
    deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """One of: truncate, flip a byte, insert bytes, splice in bad UTF-8 or a huge length,
    replace a JSON scalar with a value of the wrong type."""
    if not data:
        return draw(st.binary(max_size=16))
    kind = draw(
        st.sampled_from(["truncate", "flip", "insert", "utf8", "length", "json-type", "duplicate"])
    )
    pos = draw(st.integers(0, len(data) - 1))
    if kind == "truncate":
        return data[:pos]
    if kind == "flip":
        return data[:pos] + bytes([data[pos] ^ draw(st.integers(1, 255))]) + data[pos + 1 :]
    if kind == "insert":
        return data[:pos] + draw(st.binary(min_size=1, max_size=8)) + data[pos:]
    if kind == "utf8":
        return (
            data[:pos]
            + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
            + data[pos:]
        )
    if kind == "length":
        huge = draw(st.sampled_from([2**63 - 1, 2**64 - 1, 2**40, len(data) + 1]))
        return data[:pos] + struct.pack(">Q", huge) + data[pos + 8 :]
    if kind == "duplicate":
        return data + data[pos:]
    replacement = draw(
        st.sampled_from(
            [
                b"null",
                b"true",
                b"[]",
                b"{}",
                b'"x"',
                b"-1",
                b"1e999",
                b"18446744073709551616",
                b'"\\ud800"',
                b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
            ]
        )
    )
    for token in (b'":"', b'":', b'":{'):
        at = data.find(token, pos)
        if at >= 0:
            start = at + len(token) - (1 if token == b'":"' else 0)
            end = start + 1
            while end < len(data) and data[end] not in b",}]":
                end += 1
            return data[:start] + replacement + data[end:]
    return data + replacement


def _decode_safely(protocol: str, options: dict, message: Message) -> None:
    decoder = make_decoder(protocol, options)
    tracemalloc.start()
    try:
        decoder.decode(message)
    except DecodeError as exc:
        assert exc.protocol == protocol
        assert exc.position == message.position
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    budget = 64 * (len(message.key or b"") + len(message.value or b"")) + (4 << 20)
    assert peak < budget, f"decoding {message.size} bytes allocated {peak}"


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@FUZZ
@given(
    data=st.data(),
    events=st.lists(st.one_of(row_changes(), other_events()), min_size=1, max_size=3),
)
def test_mutated_messages_raise_only_decode_errors(
    protocol: str, options: dict, data: st.DataObject, events: list
) -> None:
    encoder = make_encoder(protocol, options)
    if hasattr(encoder, "clock"):
        encoder.clock = lambda: 1_700_000_000_000  # deterministic bytes for hypothesis
    messages = encoder.encode(events)
    if not messages:
        return
    message = data.draw(st.sampled_from(messages))
    part = data.draw(st.sampled_from(["key", "value"] if message.key else ["value"]))
    original = getattr(message, part) or b""
    mutated = data.draw(mutations(original))
    fuzzed = Message(
        mutated if part == "key" else message.key,
        mutated if part == "value" else message.value,
        topic="fuzz",
        partition=3,
        offset=99,
    )
    _decode_safely(protocol, options, fuzzed)


@pytest.mark.parametrize(("protocol", "options"), PROTOCOLS)
@FUZZ
@given(key=st.none() | st.binary(max_size=64), value=st.none() | st.binary(max_size=256))
def test_random_bytes_raise_only_decode_errors(
    protocol: str, options: dict, key: bytes | None, value: bytes | None
) -> None:
    _decode_safely(protocol, options, Message(key, value, topic="fuzz", partition=0, offset=1))


def test_huge_length_prefix_is_rejected_without_allocating() -> None:
    key = struct.pack(">QQ", 1, 2**63 - 1) + b"{}"
    with pytest.raises(DecodeError, match="claims 9223372036854775807 bytes"):
        make_decoder("open-protocol").decode(Message(key, b"", topic="t", partition=0, offset=5))


def test_decode_error_names_the_record() -> None:
    message = Message(
        None, b'{"type":"INSERT","isDdl":false}', topic="orders", partition=2, offset=41
    )
    with pytest.raises(DecodeError) as info:
        make_decoder("canal-json").decode(message)
    assert "orders/2@41" in str(info.value)
    assert "data" in info.value.reason


def _open_protocol_row(columns: dict, offset: int) -> Message:
    """A one-row Open Protocol record of table d.t from its column objects, read at x/0@offset."""
    key = orjson.dumps({"ts": 1 << 20, "scm": "d", "tbl": "t", "t": 1})
    value = orjson.dumps({"u": columns})
    return Message(
        struct.pack(">QQ", 1, len(key)) + key,
        struct.pack(">Q", len(value)) + value,
        topic="x",
        partition=0,
        offset=offset,
    )


def test_open_protocol_decimal_of_the_wrong_json_type_is_a_decode_error() -> None:
    """decimal.InvalidOperation (a JSON list or bool in a DECIMAL column) is a DecodeError."""
    for wrong in ([1], True, {"a": 1}):
        message = _open_protocol_row({"a": {"t": 246, "f": 0, "v": wrong}}, offset=3)
        with pytest.raises(DecodeError, match="x/0@3"):
            make_decoder("open-protocol", {}).decode(message)


def test_open_protocol_binary_text_with_an_octal_escape_past_377_is_a_decode_error() -> None:
    """Go's strconv.Unquote refuses ``\\400``; it used to become the byte 0."""
    binary = {"t": 15, "f": 65, "v": "\\400"}  # (flag 1: binary)
    with pytest.raises(DecodeError, match="x/0@4"):
        make_decoder("open-protocol", {}).decode(_open_protocol_row({"b": binary}, offset=4))
