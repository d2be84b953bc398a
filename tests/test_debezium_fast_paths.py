"""Debezium's fast paths against its full path, on rows of every type, with and without the
Connect schema, among mutated messages:

* the typed start of the one decode path (msgspec, :mod:`ticdc_spark.codec.debezium.typed`)
  gives what the orjson path alone gives: the same events, changelog rows or error;
* the Arrow batch path (:mod:`ticdc_spark.codec.debezium.batch`) gives the changelog that
  decoding one record at a time gives, dead letters included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import (
    byte_mutations,
    encode,
    examples,
    json_mutations,
    kafka_batch,
    placed,
)
from contract.profiles import WHOLE_JSON
from strategies import row_changes
from ticdc_spark.codec import Message, make_decoder
from ticdc_spark.codec.debezium import DebeziumDecoder
from ticdc_spark.errors import DecodeError
from ticdc_spark.io.capture import read_capture, read_values
from ticdc_spark.model import Event, RowChange
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.spark.decode import _Records, decode_batches

_SCHEMA = {"enable-tidb-extension": "true"}
_NO_SCHEMA = {"debezium-disable-schema": "true"}
OPTIONS = [
    pytest.param({}, id="schema"),
    pytest.param(_SCHEMA, id="schema-tidb-extension"),
    pytest.param(_NO_SCHEMA, id="no-schema"),
    pytest.param({**_NO_SCHEMA, **_SCHEMA}, id="no-schema-tidb-extension"),
]


def _full_path(options: dict[str, str]) -> DebeziumDecoder:
    """A decoder whose one decode path never takes the typed start."""
    decoder = make_decoder("debezium", options)
    assert isinstance(decoder, DebeziumDecoder)
    decoder._typed_into = lambda message, sink: False  # type: ignore[method-assign]
    return decoder


def _mutated(data: st.DataObject, messages: list[Message], most: int) -> list[Message]:
    """Up to ``most`` of the messages with a member deleted or of a wrong JSON type, or their
    bytes damaged."""
    messages = list(messages)
    for i in data.draw(st.sets(st.integers(0, len(messages) - 1), max_size=most)):
        parts = {"key": messages[i].key or b"", "value": messages[i].value or b""}
        part = data.draw(st.sampled_from(["key", "value", "value"]))
        if data.draw(st.booleans()):
            changed = data.draw(json_mutations(WHOLE_JSON, part, parts[part]))
        else:
            changed = data.draw(byte_mutations(parts[part]))
        parts[part] = changed if changed is not None else parts[part]
        messages[i] = Message(parts["key"], parts["value"])
    return placed(messages)


def _outcomes(decoder: Any, messages: list[Message]) -> list[Any]:
    """Per message: its events and changelog rows, or its error."""
    got: list[Any] = []
    for message in messages:
        try:
            events: list[Event] = decoder.decode(message)
            builder = ChangelogBuilder()
            decoder.decode_into(message, builder)
            got.append((events, builder.to_batch().to_pylist()))
        except DecodeError as exc:
            got.append(str(exc))
    return got


@pytest.mark.parametrize("options", OPTIONS)
@examples(40)
@given(data=st.data(), events=st.lists(row_changes(), min_size=1, max_size=4))
def test_the_typed_start_reads_as_the_full_path(
    options: dict[str, str], data: st.DataObject, events: list[Event]
) -> None:
    messages = _mutated(data, encode("debezium", options, events), most=2)
    typed = _outcomes(make_decoder("debezium", options), messages)
    full = _outcomes(_full_path(options), messages)
    for message, got, expected in zip(messages, typed, full, strict=True):
        if got != expected and _out_of_range_number_unread(message, expected):
            continue  # (the one difference: typed.py's docstring)
        assert got == expected


def _out_of_range_number_unread(message: Message, full_path: Any) -> bool:
    """orjson refused the message for a number past a double's range (the mutations write
    1e999) that the typed readers passed over: in a member the changelog does not read."""
    return (
        isinstance(full_path, str)
        and "infinity" in full_path
        and b"1e999" in (message.value or b"") + (message.key or b"")
    )


@pytest.mark.parametrize("options", OPTIONS)
def test_the_typed_start_takes_plain_row_messages(options: dict[str, str]) -> None:
    """(So that the case above compares two paths.)"""
    from ticdc_spark.testing.workload import Workload

    events = [e for e in Workload(seed=2, rows=60, tables=2).events() if isinstance(e, RowChange)]
    messages = encode("debezium", options, events)
    decoder = make_decoder("debezium", options)
    assert isinstance(decoder, DebeziumDecoder)
    taken = [decoder._typed_into(m, ChangelogBuilder()) for m in messages if m.value]
    assert taken and all(taken)


def _one_by_one(batch: Any, options: dict[str, str]) -> list[dict[str, Any]]:
    out = list(decode_batches(iter([batch]), "debezium", options, compiled=False))
    return [row for part in out for row in part.to_pylist()]


@pytest.mark.parametrize("options", OPTIONS)
@examples(40)
@given(
    data=st.data(),
    events=st.lists(row_changes(), min_size=1, max_size=4),
    repeat=st.integers(1, 3),
)
def test_the_batch_path_gives_the_one_by_one_changelog(
    options: dict[str, str], data: st.DataObject, events: list[Event], repeat: int
) -> None:
    """Each table's rows repeated (a shape planned by an earlier record takes the batch
    path), some records mutated; dead letters as the Spark decode stage makes them."""
    messages = [m for _ in range(repeat) for m in encode("debezium", options, events)]
    batch = kafka_batch(_mutated(data, messages, most=3))
    decoder = make_decoder("debezium", options)
    assert isinstance(decoder, DebeziumDecoder)
    records = _Records(batch, decoder, fail=False)
    out = decoder.decode_arrow_batch(batch, records.decode_one, records.builder)
    assert out.to_pylist() == _one_by_one(batch, options)


_GENUINE = Path(__file__).parent / "fixtures" / "debezium-genuine"


def _genuine(name: str) -> list[Message]:
    lines = (_GENUINE / name).read_bytes().splitlines()
    return list(read_capture(lines) if ".capture." in name else read_values(lines))


@pytest.mark.parametrize(
    "name",
    [
        "schema-enable-precise.capture.jsonl",
        "schema-enable-string-connect.jsonl",
        "schema-exclude.jsonl",
    ],
)
def test_genuine_captures_and_the_golden_row_through_the_batch_path(
    name: str, golden_dir: Path
) -> None:
    """Genuine Debezium records (twice: the second time their shapes are known) and the
    golden all-types message: the batch path's changelog is the one-by-one changelog."""
    golden = Message(
        (golden_dir / "debezium" / "datatype.dbz.key.json").read_bytes(),
        (golden_dir / "debezium" / "datatype.dbz.json").read_bytes(),
    )
    messages = placed([*_genuine(name), golden] * 2)
    batch = kafka_batch(messages)
    decoder = make_decoder("debezium", {})
    assert isinstance(decoder, DebeziumDecoder)
    records = _Records(batch, decoder, fail=False)
    out = decoder.decode_arrow_batch(batch, records.decode_one, records.builder)
    expected = _one_by_one(batch, {})
    assert out.to_pylist() == expected
    assert not any(row["kind"] == "ERROR" for row in expected)


def test_a_restored_decoder_guesses_as_it_did_before() -> None:
    """(The decode stage restores the decoder before decoding a batch again one record at a
    time, codec.base.StatefulDecoder: the guesses of a table without a schema start over
    from where they stood.)  Column ``w`` is guessed NULL-only, then BIGINT, then DOUBLE."""
    import orjson

    source = {"db": "inventory", "table": "products"}
    messages = placed(
        [
            Message(
                orjson.dumps({"id": i}),
                orjson.dumps(
                    {"before": None, "after": {"id": i, "w": w}, "source": source, "op": "c"}
                ),
            )
            for i, w in enumerate([None, 1, 1.5, 2])
        ]
    )
    decoder = make_decoder("debezium", {})
    assert isinstance(decoder, DebeziumDecoder)
    decoder.decode(messages[0])
    saved = decoder.snapshot()
    first = _outcomes(decoder, messages[1:])
    decoder.restore(saved)
    assert _outcomes(decoder, messages[1:]) == first
    assert _outcomes(decoder, messages[1:]) != first  # (without a restore: other guesses)
