"""Round trips over random schemas and values of every MySQL type (tests/strategies.py):
encode then decode gives the same events in everything the protocol carries with the option
set (its profile's :class:`~contract.profiles.Carries`), and a second trip changes nothing.

(Moved here from tests/test_roundtrip.py, which ran the same cases per protocol.)
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract.helpers import (
    assert_same_events,
    decode_all,
    encode,
    examples,
)
from contract.profiles import Variant, variant_id, variants
from strategies import other_events, row_changes
from ticdc_spark.model import Event, RowChange
from ticdc_spark.normalized import event_from_json, event_to_json

VARIANTS = variants()


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(40)
@given(rows=st.lists(row_changes(), min_size=1, max_size=5))
def test_rows_round_trip(protocol: str, variant: Variant, rows: list[Event]) -> None:
    messages = encode(protocol, variant.options, rows)
    assert sum(m.rows for m in messages) == len(rows)
    for message in messages:
        assert (message.key is not None) == variant.carries.key
        assert (message.database, message.table) != ("", "")
    decoded = decode_all(protocol, variant.options, messages)
    assert_same_events(variant.carries, rows, decoded)


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(15)
@given(events=st.lists(other_events(), min_size=1, max_size=4))
def test_ddl_and_watermarks_round_trip(
    protocol: str, variant: Variant, events: list[Event]
) -> None:
    messages = encode(protocol, variant.options, events)
    assert_same_events(variant.carries, events, decode_all(protocol, variant.options, messages))


@pytest.mark.parametrize(("protocol", "variant"), VARIANTS, ids=variant_id)
@examples(20)
@given(events=st.lists(st.one_of(row_changes(), other_events()), min_size=1, max_size=4))
def test_decoding_is_idempotent_on_what_the_protocol_carries(
    protocol: str, variant: Variant, events: list[Event]
) -> None:
    """decode(encode(x)) is a fixed point: a second trip changes nothing, not even types.
    (But for the handle-key-only mark of a row that was too large: its key columns alone
    fit the limit, so the second trip sends them as a whole row.)"""
    once = decode_all(protocol, variant.options, encode(protocol, variant.options, events))
    twice = decode_all(protocol, variant.options, encode(protocol, variant.options, once))

    def normalized(events: list[Event]) -> list[dict[str, Any]]:
        out = [event_to_json(e) for e in events]
        if variant.carries.large_key_only:
            for obj in out:
                obj.pop("handleKeyOnly", None)
        return out

    assert normalized(twice) == normalized(once)


@examples(100)
@given(row=row_changes())
def test_normalized_form_round_trips(row: RowChange) -> None:
    """The normalized form the suite compares events by reads back to the same event."""
    back = event_from_json(event_to_json(row))
    assert isinstance(back, RowChange)
    assert (back.kind, back.commit_ts, back.before, back.after) == (
        row.kind,
        row.commit_ts,
        row.before,
        row.after,
    )
    assert event_to_json(back) == event_to_json(row)
