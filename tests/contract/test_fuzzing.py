"""Fuzzing: arbitrary bytes and mutations of real encoded messages (truncation, byte flips,
bad UTF-8, huge lengths, JSON fields deleted or of the wrong type), given to ``decode`` and
to ``decode_into`` a changelog builder, raise nothing but a DecodeError naming the record,
quickly and without allocating far beyond the message's size.

(The generic cases of tests/test_fuzz.py moved here.)
"""

from __future__ import annotations

import contextlib
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import byte_mutations, encode, examples, json_mutations, kafka_batch
from contract.profiles import OPAQUE, Variant, variant_id, variants
from strategies import other_events, row_changes
from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.codec.base import ArrowBatchDecoder, BatchDecoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Column, Event, Index, RowChange, RowKind, TableSchema
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.types import parse_column_type

VARIANTS = variants()
POSITION = {"topic": "fuzz", "partition": 3, "offset": 99}


def _decode_safely(protocol: str, options: Any, message: Message, warm: list[Message]) -> None:
    """Decode through both paths, each with a decoder that first decoded ``warm`` (its
    caches hold the tables' plans, as in a real stream)."""
    for into_changelog in (False, True):
        decoder = make_decoder(protocol, options)
        for good in warm:
            decoder.decode(good)
        tracemalloc.start()
        try:
            if into_changelog:
                decoder.decode_into(message, ChangelogBuilder())
            else:
                decoder.decode(message)
        except DecodeError as exc:
            assert exc.protocol == protocol
            assert exc.position == message.position
            assert message.position in str(exc)
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        budget = 64 * message.size + (4 << 20)
        assert peak < budget, f"decoding {message.size} bytes allocated {peak}"


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(30)
@given(
    data=st.data(),
    events=st.lists(st.one_of(row_changes(), other_events()), min_size=1, max_size=3),
)
def test_mutated_messages_raise_only_decode_errors(
    protocol: str, variant: Variant, data: st.DataObject, events: list[Event]
) -> None:
    messages = encode(protocol, variant.options, events)
    if not messages:  # (watermarks alone, where the protocol does not carry them)
        return
    message = data.draw(st.sampled_from(messages))
    part = data.draw(st.sampled_from(["key", "value"] if message.key else ["value"]))
    original = getattr(message, part) or b""
    mutated = None
    if data.draw(st.booleans()):
        mutated = data.draw(json_mutations(variant.framing, part, original))
    if mutated is None:
        mutated = data.draw(byte_mutations(original))
    fuzzed = Message(
        mutated if part == "key" else message.key,
        mutated if part == "value" else message.value,
        **POSITION,  # type: ignore[arg-type]
    )
    _decode_safely(protocol, variant.options, fuzzed, messages)
    _batch_safely(protocol, variant.options, [*messages, fuzzed])


# What Arrow raises when it refuses the rows a batch path let through (the Spark decode stage
# then decodes the batch one message at a time): the batch paths' only other exceptions.
_ARROW_REFUSED = (ArithmeticError, TypeError, ValueError)


def _batch_safely(protocol: str, options: Any, messages: list[Message]) -> None:
    """The batch paths hand a bad message to the one-by-one callback (whose DecodeError the
    caller turns into a dead letter); they raise nothing but Arrow's refusal."""
    errors: list[int] = []

    def one(decoder: Any, sink: ChangelogBuilder) -> Any:
        def decode_one(i: int) -> None:
            try:
                decoder.decode_into(messages[i], sink)
            except DecodeError as exc:
                assert messages[i].position in str(exc)
                errors.append(i)

        return decode_one

    decoder = make_decoder(protocol, options)
    if isinstance(decoder, BatchDecoder):
        sink = ChangelogBuilder()
        with contextlib.suppress(*_ARROW_REFUSED):
            decoder.decode_batch(
                [m.value for m in messages],
                [m.topic for m in messages],
                [m.partition or 0 for m in messages],
                [m.offset or 0 for m in messages],
                sink,
                one(decoder, sink),
            )
            sink.to_batch()
    decoder = make_decoder(protocol, options)
    if isinstance(decoder, ArrowBatchDecoder):
        sink = ChangelogBuilder()
        with contextlib.suppress(*_ARROW_REFUSED):
            decoder.decode_arrow_batch(kafka_batch(messages), one(decoder, sink), sink)
    assert set(errors) <= {len(messages) - 1}  # only the mutated message may be bad


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(30)
@given(key=st.none() | st.binary(max_size=64), value=st.none() | st.binary(max_size=256))
def test_random_bytes_raise_only_decode_errors(
    protocol: str, variant: Variant, key: bytes | None, value: bytes | None
) -> None:
    _decode_safely(protocol, variant.options, Message(key, value, **POSITION), [])  # type: ignore[arg-type]


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(30)
@given(data=st.data(), rows=st.lists(row_changes(), min_size=1, max_size=2))
def test_json_field_mutations_reach_the_json(
    protocol: str, variant: Variant, data: st.DataObject, rows: list[Event]
) -> None:
    """Field deletions and wrong types inside the documents (not only broken framing):
    the framing helpers split and join a message's JSON documents without change."""
    messages = encode(protocol, variant.options, rows)
    message = data.draw(st.sampled_from(messages))
    for part in ("key", "value"):
        raw = getattr(message, part)
        documents = variant.framing.split(part, raw) if raw else None
        if documents is not None:
            assert variant.framing.join(part, documents) == raw
            mutated = data.draw(json_mutations(variant.framing, part, raw))
            assert mutated is not None
            fuzzed = Message(
                mutated if part == "key" else message.key,
                mutated if part == "value" else message.value,
                **POSITION,  # type: ignore[arg-type]
            )
            _decode_safely(protocol, variant.options, fuzzed, messages)


@pytest.mark.parametrize(
    "protocol", sorted({name for name, v in VARIANTS if v.framing is not OPAQUE})
)  # (binary protocols, Avro: no JSON to find; byte mutations reach them)
def test_the_framings_find_json_where_the_protocol_writes_it(protocol: str) -> None:
    """Field mutations are not silently skipped: some option set of every protocol exposes
    its row messages' JSON documents to the fuzzer."""
    row = RowChange(RowKind.INSERT, SCHEMA, 1 << 20, None, {"id": 1, "v": "x"})
    found = [
        (variant.label, part)
        for name, variant in VARIANTS
        if name == protocol
        for message in encode(protocol, variant.options, [row])
        for part, raw in (("key", message.key), ("value", message.value))
        if raw and variant.framing.split(part, raw)
    ]
    assert found


SCHEMA = TableSchema(
    "d",
    "t",
    (
        Column("id", parse_column_type("bigint"), nullable=False),
        Column("v", parse_column_type("text")),
    ),
    (Index("PRIMARY", ("id",), primary=True, unique=True),),
).with_derived_flags()
