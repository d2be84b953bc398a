"""Simple-Avro messages that are not what they should be say what is wrong with the message,
in the decoder's own words: never a Python exception's name or text (``IndexError: list index
out of range``, ``UnicodeDecodeError: 'utf-8' codec can't decode ...``), which is what fastavro
raises on such bytes.  Mutated messages of every kind (bytes damaged, or a member of the
record replaced with a value of the wrong kind and the record written again) are decoded;
every reason must be one of the forms below."""

from __future__ import annotations

import io
import re
from typing import Any

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import byte_mutations, encode, examples
from strategies import other_events, row_changes
from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.codec.simple import avro
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Event
from ticdc_spark.pipeline.changelog import ChangelogBuilder

OPTIONS = {"encoding-format": "avro"}
_KIND = "(WATERMARK|BOOTSTRAP|DDL|DML)"

# Every reason a Simple-Avro message may be refused with (the decoder's typed forms).
REASONS = [
    r"the value is empty \(0 bytes, not null\).+",
    r"message points to claim-check storage; set claim-check-storage-uri to read it",
    r"not a Simple Avro message: it (starts with .+|ends early \(\d+ bytes\))",
    r"not a Simple Avro message: its type \(byte 0x[0-9a-f]{2}\) is none of .+",
    rf"the Simple Avro {_KIND} message holds another record \(payload branch .+\)",
    rf"the Simple Avro {_KIND} message ends early \(\d+ bytes\)",
    rf"the Simple Avro {_KIND} message holds (a string that is not UTF-8|a union branch or "
    r"enum symbol out of the schema's range|a length or number out of range) "
    r"\(read up to byte \d+ of \d+\)",
    rf"the Simple Avro {_KIND} message has \d+ bytes after its end",
    r"column '.*' is not in the table schema",
    r"column '.*': (expected .+, got .+|not a .+|a TIMESTAMP must be .+)",
    r"'\w+' must be .+",
    r"a (DML message|BOOTSTRAP message|claim-check file|\w+) (needs|must hold) .+",
    r"table schema .+|index .+|column type .+|unknown .+",
]
# Python's own texts, which no reason may hold.
INTERNAL = re.compile(
    r"\b\w*(Error|Exception)\b|index out of range|codec can't|object has no attribute|"
    r"unsupported operand|invalid literal|not subscriptable|NoneType|positional argument"
)


def _record_mutation(data: st.DataObject, value: bytes) -> bytes | None:
    """The message with one member of its record (at any depth) replaced by a value of
    another kind, written again by fastavro (None when the schema cannot hold it)."""
    record = fastavro.schemaless_reader(io.BytesIO(value), avro.SCHEMA, None)
    paths = list(_paths(record["payload"]))
    if not paths:
        return None
    *parents, last = data.draw(st.sampled_from(paths))
    holder = record["payload"]
    for step in parents:
        holder = holder[step]
    holder[last] = data.draw(st.sampled_from(_WRONG))
    kind = record["type"]
    payload = (_NS + _RECORDS.get(kind, kind), record["payload"])
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(
            out, avro.SCHEMA, (_NS + "Message", {"type": kind, "payload": payload})
        )
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
        return None
    return out.getvalue()


_NS = "com.pingcap.simple.avro."
_RECORDS = {"WATERMARK": "Watermark", "BOOTSTRAP": "Bootstrap"}  # (DDL, DML: the same)
_WRONG = ["", "x", "\xff", "-1", "1e400", "99999999999999999999", -1, 0, 2**62, -(2**63), 1.5]


def _paths(obj: Any, path: tuple[Any, ...] = ()) -> Any:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _paths(value, (*path, i))
    if path:
        yield path


def _reasons(messages: list[Message], fuzzed: Message) -> list[str]:
    """The reasons ``fuzzed`` is refused with, by ``decode`` and ``decode_into``, each by a
    decoder that has read the messages before it (it knows their tables)."""
    out = []
    for into_changelog in (False, True):
        decoder = make_decoder("simple", OPTIONS)
        for good in messages:
            decoder.decode(good)
        try:
            if into_changelog:
                decoder.decode_into(fuzzed, ChangelogBuilder())
            else:
                decoder.decode(fuzzed)
        except DecodeError as exc:
            out.append(exc.reason)
    return out


def _assert_typed(reason: str) -> None:
    assert not INTERNAL.search(reason), reason
    assert any(re.fullmatch(form, reason, re.DOTALL) for form in REASONS), reason


@examples(150)
@given(
    data=st.data(),
    events=st.lists(st.one_of(row_changes(), other_events()), min_size=1, max_size=3),
)
def test_every_reason_says_what_is_wrong_with_the_message(
    data: st.DataObject, events: list[Event]
) -> None:
    messages = encode("simple", OPTIONS, events)
    message = data.draw(st.sampled_from(messages))
    value = message.value or b""
    mutated = _record_mutation(data, value) if data.draw(st.booleans()) else None
    if mutated is None:
        mutated = data.draw(byte_mutations(value))
    fuzzed = Message(message.key, mutated, topic="fuzz", partition=0, offset=7)
    for reason in _reasons(messages[: messages.index(message)], fuzzed):
        _assert_typed(reason)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"\x41\x06\x06", "it starts with 0x41"),
        (b"\x16", "it ends early (1 bytes)"),
        (b"\x16\x08\x08", "its type (byte 0x08) is none of WATERMARK, BOOTSTRAP, DDL, DML"),
        (b"\x16\x06\x04", "the Simple Avro DML message holds another record"),
        (b"\x16\x00\x00\x02", "the Simple Avro WATERMARK message ends early (4 bytes)"),
    ],
)
def test_the_head_of_a_message_is_checked_byte_by_byte(value: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as caught:
        make_decoder("simple", OPTIONS).decode(Message(None, value, topic="t", offset=1))
    assert reason in caught.value.reason
    _assert_typed(caught.value.reason)


def test_a_string_that_is_not_utf8_is_named_so() -> None:
    """(fastavro's reason: UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff ...)"""
    from ticdc_spark.testing.workload import Workload

    ddl = next(e for e in Workload(seed=1, rows=1, tables=1).events())
    (message,) = encode("simple", OPTIONS, [ddl])
    value = (message.value or b"").replace(b"CREATE", b"\xffREATE", 1)
    with pytest.raises(DecodeError) as caught:
        make_decoder("simple", OPTIONS).decode(Message(None, value))
    assert "DDL message holds a string that is not UTF-8" in caught.value.reason
    _assert_typed(caught.value.reason)
