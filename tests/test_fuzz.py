"""Protocol-specific malformed messages: each is a DecodeError naming the record.

The generic fuzzing (random bytes and mutated messages of every registered protocol: only
DecodeError may escape, quickly, without allocating far beyond the message's size) is in
tests/contract/test_fuzzing.py."""

from __future__ import annotations

import struct

import orjson
import pytest

from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.errors import DecodeError


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
