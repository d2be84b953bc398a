"""Round trips over random schemas and values of every MySQL type.

What each protocol cannot carry (so is not compared):

* Open Protocol: type parameters (lengths, ENUM/SET elements, DECIMAL precision, zerofill,
  charsets); table and partition ids are not carried except ``ptn``; column order (TiCDC writes
  columns sorted by name); with only-output-updated-columns, an UPDATE that changed nothing
  has no ``p`` and reads as an INSERT (upsert).
* Canal-JSON: type parameters unless ``content-compatible``; the commit ts unless
  ``enable-tidb-extension`` (then only ``es``, in milliseconds); table ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import other_events, row_changes
from ticdc_spark.codec import make_decoder, make_encoder
from ticdc_spark.model import DDLEvent, RowChange, RowKind, Watermark, physical_ms
from ticdc_spark.normalized import event_from_json, event_to_json
from ticdc_spark.types import plain_type_desc

PROTOCOL_OPTIONS = [
    ("open-protocol", {}),
    ("open-protocol", {"max-batch-size": "3", "only-output-updated-columns": "true"}),
    ("open-protocol", {"large-message-handle-compression": "snappy"}),
    ("canal-json", {"enable-tidb-extension": "true"}),
    ("canal-json", {"enable-tidb-extension": "true", "content-compatible": "true"}),
    ("canal-json", {"large-message-handle-compression": "lz4"}),
]
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _carried_type(protocol: str, options: dict[str, str], ctype: Any) -> str:
    if protocol == "canal-json" and options.get("content-compatible") == "true":
        return ctype.sql()
    return plain_type_desc(ctype)


def _assert_same_row(protocol: str, options: dict, sent: RowChange, got: RowChange) -> None:
    if (
        protocol == "open-protocol"
        and options.get("only-output-updated-columns") == "true"
        and sent.kind is RowKind.UPDATE
        and sent.before == sent.after
    ):
        # TiCDC leaves out an empty "p": an update that changed nothing reads as an upsert
        assert (got.kind, got.after) == (RowKind.INSERT, sent.after)
        return
    assert got.kind is sent.kind
    assert (got.database, got.table) == (sent.database, sent.table)
    if protocol == "canal-json" and options.get("enable-tidb-extension") != "true":
        assert physical_ms(got.commit_ts) == physical_ms(sent.commit_ts)
    else:
        assert got.commit_ts == sent.commit_ts
    assert got.before == sent.before
    assert got.after == sent.after
    assert got.schema.handle_key == sent.schema.handle_key
    sent_types = {c.name: _carried_type(protocol, options, c.type) for c in sent.schema.columns}
    got_types = {c.name: _carried_type(protocol, options, c.type) for c in got.schema.columns}
    if protocol == "canal-json" and options.get("content-compatible") == "true":
        # content-compatible carries the full types, with TiDB's default widths filled in
        from ticdc_spark.types import full_type_desc

        sent_types = {c.name: full_type_desc(c.type) for c in sent.schema.columns}
        got_types = {c.name: full_type_desc(c.type) for c in got.schema.columns}
    assert got_types == sent_types


@pytest.mark.parametrize(("protocol", "options"), PROTOCOL_OPTIONS)
@SETTINGS
@given(rows=st.lists(row_changes(), min_size=1, max_size=5))
def test_rows_round_trip(protocol: str, options: dict, rows: list[RowChange]) -> None:
    encoder = make_encoder(protocol, options)
    decoder = make_decoder(protocol, options)
    decoded = [e for m in encoder.encode(rows) for e in decoder.decode(m)]
    assert len(decoded) == len(rows)
    for sent, got in zip(rows, decoded, strict=True):
        assert isinstance(got, RowChange)
        _assert_same_row(protocol, options, sent, got)


@pytest.mark.parametrize(("protocol", "options"), PROTOCOL_OPTIONS)
@SETTINGS
@given(events=st.lists(other_events(), min_size=1, max_size=4))
def test_ddl_and_watermarks_round_trip(protocol: str, options: dict, events: list) -> None:
    encoder = make_encoder(protocol, options)
    decoder = make_decoder(protocol, options)
    decoded = [e for m in encoder.encode(events) for e in decoder.decode(m)]
    expected = [
        e
        for e in events
        if not (
            isinstance(e, Watermark)
            and protocol == "canal-json"
            and options.get("enable-tidb-extension") != "true"
        )
    ]
    assert len(decoded) == len(expected)
    for sent, got in zip(expected, decoded, strict=True):
        if isinstance(sent, Watermark):
            assert got == sent
        else:
            assert isinstance(got, DDLEvent)
            assert (got.query, got.database, got.table, got.ddl_type) == (
                sent.query,
                sent.database,
                sent.table,
                sent.ddl_type,
            )


@pytest.mark.parametrize(("protocol", "options"), PROTOCOL_OPTIONS[:1] + PROTOCOL_OPTIONS[3:4])
@SETTINGS
@given(row=row_changes())
def test_decoding_is_idempotent_on_what_the_protocol_carries(
    protocol: str, options: dict, row: RowChange
) -> None:
    """decode(encode(x)) is a fixed point: a second trip changes nothing, not even types."""
    encoder, decoder = make_encoder(protocol, options), make_decoder(protocol, options)
    once = [e for m in encoder.encode([row]) for e in decoder.decode(m)]
    twice = [e for m in encoder.encode(once) for e in decoder.decode(m)]
    assert [event_to_json(e) for e in twice] == [event_to_json(e) for e in once]


@SETTINGS
@given(row=row_changes())
def test_normalized_form_round_trips(row: RowChange) -> None:
    back = event_from_json(event_to_json(row))
    assert isinstance(back, RowChange)
    assert (back.kind, back.commit_ts, back.before, back.after) == (
        row.kind,
        row.commit_ts,
        row.before,
        row.after,
    )
    assert event_to_json(back) == event_to_json(row)


@SETTINGS
@given(row=row_changes())
def test_only_updated_old_rebuilds_the_full_before_image(row: RowChange) -> None:
    if row.kind is not RowKind.UPDATE or row.before == row.after:
        return
    for protocol in ("canal-json", "open-protocol"):
        options = {"only-output-updated-columns": "true", "enable-tidb-extension": "true"}
        if protocol == "open-protocol":
            del options["enable-tidb-extension"]
        (message,) = make_encoder(protocol, options).encode([row])
        (got,) = make_decoder(protocol, options).decode(message)
        assert got.before == row.before
