"""The compiled value loops against the pure-Python paths: the same events, the same
changelog and the same encoded bytes (and the same errors) with ``compiled_values`` on and
off, on random rows of every type, mutated messages and the golden files.

Never skipped: without the compiled module, CI fails (``TICDC_SPARK_REQUIRE_NATIVE=1``);
elsewhere the Python paths alone are checked against the round trip.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import (
    Counting,
    assert_same_events,
    byte_mutations,
    changelog_of,
    compiled_loops,
    encode,
    encoded_bytes,
    examples,
    json_mutations,
    native_required,
    outcome,
)
from contract.profiles import PROFILES, Golden, Variant, variant_id, variants
from strategies import other_events, row_changes
from ticdc_spark.codec import Message, make_decoder, make_encoder, protocols
from ticdc_spark.codec.compiled import native
from ticdc_spark.errors import DecodeError
from ticdc_spark.model import Event, RowChange

VARIANTS = variants()


def test_the_compiled_loops_are_built_where_ci_requires_them() -> None:
    if native_required():
        assert native(), "TICDC_SPARK_REQUIRE_NATIVE=1 but ticdc_spark._values is not built"
    for name in protocols():  # load every codec module
        make_decoder(name), make_encoder(name)
    with compiled_loops(None) as modules:
        assert modules, "no codec module holds compiled_values: the parity cases test nothing"


def _changelog(protocol: str, options: Any, messages: list[Message]) -> Any:
    try:
        return changelog_of(make_decoder(protocol, options), messages).to_pylist()
    except DecodeError as exc:
        return ("error", str(exc))


def _both_ways(protocol: str, options: Any, run: Any) -> tuple[Any, Any, int]:
    """``run()`` with the compiled loops (counting calls into them), then without."""
    make_decoder(protocol, options), make_encoder(protocol, options)  # load the modules
    if not native():
        with compiled_loops(None):
            python = run()
        return python, python, 0
    counting = Counting(_compiled_module())
    with compiled_loops(counting):
        fast = run()
    with compiled_loops(None):
        python = run()
    return fast, python, counting.calls


def _compiled_module() -> Any:
    from ticdc_spark.codec import compiled

    return compiled.values


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(30)
@given(events=st.lists(st.one_of(row_changes(), other_events()), min_size=1, max_size=4))
def test_same_bytes_events_and_changelog_without_the_compiled_loops(
    protocol: str, variant: Variant, events: list[Event]
) -> None:
    options = variant.options

    def run() -> Any:
        messages = encode(protocol, options, events)
        return (
            encoded_bytes(protocol, options, events),
            outcome(protocol, options, messages),
            _changelog(protocol, options, messages),
        )

    fast, python, calls = _both_ways(protocol, options, run)
    assert python == fast
    if native() and variant.carries.compiled and any(isinstance(e, RowChange) for e in events):
        assert calls > 0, "the compiled loops were never called"
    # the Python paths on their own: the round trip holds
    with compiled_loops(None):
        messages = encode(protocol, options, events)
        decoder = make_decoder(protocol, options)  # (one for the stream: Simple's memo)
        decoded = [e for m in messages for e in decoder.decode(m)]
    assert_same_events(variant.carries, events, decoded)


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(40)
@given(data=st.data(), rows=st.lists(row_changes(), min_size=1, max_size=3))
def test_mutated_messages_decode_the_same_without_the_compiled_loops(
    protocol: str, variant: Variant, data: st.DataObject, rows: list[Event]
) -> None:
    """Values the compiled loop must give up on (or reject the same way)."""
    messages = encode(protocol, variant.options, rows)
    message = data.draw(st.sampled_from(messages))
    part = data.draw(st.sampled_from(["key", "value"] if message.key else ["value"]))
    raw = getattr(message, part) or b""
    mutated = data.draw(json_mutations(variant.framing, part, raw)) or data.draw(
        byte_mutations(raw)
    )
    fuzzed = Message(
        mutated if part == "key" else message.key,
        mutated if part == "value" else message.value,
        topic="t",
        partition=0,
        offset=len(messages),
    )
    stream = [*messages, fuzzed]  # the tables' plans cached first, as in a real stream

    def run() -> Any:
        return outcome(protocol, variant.options, stream), _changelog(
            protocol, variant.options, stream
        )

    fast, python, _ = _both_ways(protocol, variant.options, run)
    assert python == fast


GOLDENS = [
    pytest.param(name, golden, id=f"{name}-{golden.name}")
    for name in protocols()
    if name in PROFILES
    for golden in PROFILES[name].goldens
]


@pytest.mark.parametrize(("protocol", "golden"), GOLDENS)
def test_golden_messages_decode_and_re_encode_the_same_without_the_compiled_loops(
    protocol: str, golden: Golden, golden_dir: Path
) -> None:
    messages = golden.load(golden_dir)
    events = [e for m in messages for e in make_decoder(protocol, golden.options).decode(m)]

    def run() -> Any:
        return (
            outcome(protocol, golden.options, messages),
            _changelog(protocol, golden.options, messages),
            [encoded_bytes(protocol, golden.options, [e]) for e in events],
        )

    fast, python, calls = _both_ways(protocol, golden.options, run)
    assert python == fast
    assert not [o for o in python[0] if isinstance(o, tuple)]  # (no message failed)
    if native() and any(v.carries.compiled for v in PROFILES[protocol].variants):
        assert calls > 0
