"""What the contract cases share: comparing events by what a protocol carries, switching the
compiled loops off, the changelog read back with column types, and message mutations."""

from __future__ import annotations

import dataclasses
import os
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import orjson
import pyarrow as pa
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

from contract.profiles import PROFILES, Carries, Framing
from ticdc_spark.codec import Message, compiled, make_decoder, make_encoder
from ticdc_spark.codec.base import Encoder
from ticdc_spark.errors import DecodeError, EncodeError
from ticdc_spark.model import (
    Bootstrap,
    DDLEvent,
    Event,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
    physical_ms,
)
from ticdc_spark.pipeline.changelog import ChangelogBuilder, schema_from_json
from ticdc_spark.sinks.convert import convert_column
from ticdc_spark.types import Family, parse_column_type, parse_time

FIXED_CLOCK_MS = 1_700_000_000_000


def examples(n: int) -> settings:
    """Hypothesis settings for a contract case: ``n`` examples per variant, scaled by
    ``TICDC_SPARK_CONTRACT_EXAMPLES`` (a factor, e.g. 10 for a long local run)."""
    factor = float(os.environ.get("TICDC_SPARK_CONTRACT_EXAMPLES", "1"))
    return settings(
        max_examples=max(1, int(n * factor)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- encoding and decoding ---------------------------------------------------------------------


def fixed_encoder(protocol: str, options: Mapping[str, str]) -> Encoder:
    """An encoder whose bytes depend only on its input: a wall clock some protocols write
    (Canal-JSON's ``ts``) is pinned.  (The Encoder protocol does not declare ``clock``.)"""
    encoder = make_encoder(protocol, options)
    if hasattr(encoder, "clock"):
        encoder.clock = lambda: FIXED_CLOCK_MS
    return encoder


def placed(messages: list[Message], topic: str = "cdc", partition: int = 0) -> list[Message]:
    """The messages as read from one Kafka partition: topic, partition and offsets set."""
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = topic, partition, offset
    return messages


def encode(protocol: str, options: Mapping[str, str], events: list[Event]) -> list[Message]:
    _assume_representable(protocol, events)
    return placed(fixed_encoder(protocol, options).encode(events))


def _assume_representable(protocol: str, events: list[Event]) -> None:
    """Pass over events the protocol cannot carry at all (its profile says which)."""
    profile = PROFILES.get(protocol)
    representable = profile.representable if profile is not None else None
    if representable is not None and not representable(events):
        assume(False)


def decode_all(protocol: str, options: Mapping[str, str], messages: list[Message]) -> list[Event]:
    decoder = make_decoder(protocol, options)
    return [e for m in messages for e in decoder.decode(m)]


def outcome(protocol: str, options: Mapping[str, str], messages: list[Message]) -> list[Any]:
    """Per message: its events' repr (repr: Decimal("1.0") != Decimal("1.00")) or the error."""
    decoder = make_decoder(protocol, options)
    out: list[Any] = []
    for message in messages:
        try:
            out.append(repr(decoder.decode(message)))
        except DecodeError as exc:
            out.append(("error", str(exc)))
    return out


def encoded_bytes(protocol: str, options: Mapping[str, str], events: list[Event]) -> list[Any]:
    _assume_representable(protocol, events)
    try:
        return [(m.key, m.value, m.route) for m in fixed_encoder(protocol, options).encode(events)]
    except EncodeError as exc:
        return [("error", str(exc))]


# -- what a protocol carries -------------------------------------------------------------------


def carried_events(carries: Carries, events: list[Event]) -> list[Event]:
    """The events a decoder gives back: watermarks and DDL only where the protocol carries
    them."""
    return [
        e
        for e in events
        if (carries.watermarks or not isinstance(e, Watermark))
        and (carries.ddl or not isinstance(e, DDLEvent))
    ]


def assert_same_commit_ts(carries: Carries, sent: int, got: int) -> None:
    if carries.commit_ts == "none":
        assert got == 0
    elif carries.commit_ts == "physical-ms":
        assert physical_ms(got) == physical_ms(sent)
    else:
        assert got == sent


def assert_same_row(carries: Carries, sent: RowChange, got: RowChange) -> None:
    """``got`` (decoded) equals ``sent`` (encoded) in everything the protocol carries."""
    if carries.rename is not None:
        sent = renamed(sent, carries.rename)
    if sent.kind is RowKind.UPDATE and not carries.update_before:  # (the key only)
        sent = dataclasses.replace(sent, before=_key(sent, sent.after))
    if sent.kind is RowKind.UPDATE and carries.update_without_before:
        sent = dataclasses.replace(sent, before=None)
    if sent.kind is RowKind.DELETE and not carries.delete_commit_ts:
        sent = dataclasses.replace(sent, commit_ts=0)
    upsert = carries.update_as_insert == "all" or (
        carries.update_as_insert == "unchanged" and sent.before == sent.after
    )
    if sent.kind is RowKind.UPDATE and upsert:
        # no old image on the wire (TiCDC leaves out an empty "p"): the update is an upsert
        after = carried_image(carries, sent, sent.after)
        assert (got.kind, got.before, got.after) == (RowKind.INSERT, None, after)
        return
    assert got.kind is sent.kind
    assert (got.database, got.table) == (sent.database, sent.table)
    assert_same_commit_ts(carries, sent.commit_ts, got.commit_ts)
    assert carries.large_key_only or not got.handle_key_only
    key_only = got.handle_key_only or (carries.delete_key_only and sent.kind is RowKind.DELETE)
    if key_only:
        assert (got.before is None, got.after is None) == (sent.before is None, sent.after is None)
        assert got.before is None or got.before == _key(sent, sent.before)
        assert got.after is None or got.after == _key(sent, sent.after)
        return
    assert got.before == carried_image(carries, sent, sent.before)
    assert got.after == carried_image(carries, sent, sent.after)
    assert got.schema.handle_key == sent.schema.handle_key
    view = carries.type_view
    assert {c.name: view(c.type) for c in got.schema.columns} == {
        c.name: view(c.type) for c in sent.schema.columns
    }


def carried_image(
    carries: Carries, row: RowChange, image: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The image as the protocol carries its values (``Carries.value_view``)."""
    if image is None or carries.value_view is None:
        return image
    view = carries.value_view
    return {name: view(row.schema.column(name).type)(value) for name, value in image.items()}


def renamed(row: RowChange, rename: Any) -> RowChange:
    """The row with its database, table and column names as the protocol rewrites them."""
    schema = row.schema
    columns = tuple(dataclasses.replace(c, name=rename(c.name)) for c in schema.columns)
    indexes = tuple(
        dataclasses.replace(i, columns=tuple(map(rename, i.columns))) for i in schema.indexes
    )
    new_schema = TableSchema(rename(schema.database), rename(schema.table), columns, indexes)

    def image(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if values is None else {rename(k): v for k, v in values.items()}

    return dataclasses.replace(
        row, schema=new_schema, before=image(row.before), after=image(row.after)
    )


def _key(row: RowChange, image: Mapping[str, Any] | None) -> dict[str, Any]:
    assert image is not None
    return {name: image[name] for name in row.schema.handle_key}


def assert_same_event(carries: Carries, sent: Event, got: Event) -> None:
    if isinstance(sent, RowChange):
        assert isinstance(got, RowChange)
        assert_same_row(carries, sent, got)
    elif isinstance(sent, Watermark):
        assert got == sent
    else:
        assert isinstance(sent, DDLEvent)
        assert isinstance(got, DDLEvent)
        assert (got.query, got.database, got.table, got.ddl_type) == (
            sent.query,
            sent.database,
            sent.table,
            sent.ddl_type,
        )
        assert_same_commit_ts(carries, sent.commit_ts, got.commit_ts)


def assert_same_events(carries: Carries, sent: list[Event], got: list[Event]) -> None:
    """(Bootstrap events a protocol adds on its own, Simple's, are not compared.)"""
    expected = carried_events(carries, sent)
    if not any(isinstance(e, Bootstrap) for e in sent):
        got = [e for e in got if not isinstance(e, Bootstrap)]
    assert len(got) == len(expected), (got, expected)
    for one, other in zip(expected, got, strict=True):
        assert_same_event(carries, one, other)


# -- the compiled loops ------------------------------------------------------------------------


class Counting:
    """A compiled module standing in for ``compiled_values``, counting the calls into it (so
    a test can see the compiled loops in use)."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        function = getattr(self.module, name)

        def call(*args: Any) -> Any:
            self.calls += 1
            return function(*args)

        return call


@contextmanager
def compiled_loops(replacement: Any) -> Iterator[list[Any]]:
    """Every loaded codec module's ``compiled_values`` replaced (None: the pure-Python
    paths); yields the modules touched."""
    modules = compiled.users()
    saved = [module.compiled_values for module in modules]
    for module in modules:
        module.compiled_values = replacement
    try:
        yield modules
    finally:
        for module, value in zip(modules, saved, strict=True):
            module.compiled_values = value


def native_required() -> bool:
    return os.environ.get("TICDC_SPARK_REQUIRE_NATIVE") == "1"


# -- the changelog -----------------------------------------------------------------------------


def kafka_batch(messages: list[Message]) -> pa.RecordBatch:
    """Kafka records as the Spark Kafka source gives them (an Arrow batch)."""
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([m.key for m in messages], pa.binary()),
            "value": pa.array([m.value for m in messages], pa.binary()),
            "topic": pa.array([m.topic for m in messages], pa.string()),
            "partition": pa.array([m.partition for m in messages], pa.int32()),
            "offset": pa.array([m.offset for m in messages], pa.int64()),
        }
    )


def changelog_of(decoder: Any, messages: list[Message]) -> pa.RecordBatch:
    """The changelog of the messages through the one decode path, one by one."""
    builder = ChangelogBuilder()
    for message in messages:
        decoder.decode_into(message, builder)
    return builder.to_batch()


def changelog_from_events(decoder: Any, messages: list[Message]) -> pa.RecordBatch:
    """The generic path: decode() to events, then the builder's own text."""
    builder = ChangelogBuilder()
    for m in messages:
        builder.add_events(decoder.decode(m), m.topic, m.partition or 0, m.offset or 0)
    return builder.to_batch()


def typed_changelog(
    batch: pa.RecordBatch, fsp: bool = True, version: bool = True
) -> list[dict[str, Any]]:
    """The changelog's rows with image text read back by the apply stage's reader, with each
    column's type (from the ``schema`` column: null means as the table's previous row), so
    that a protocol's own spelling of a value equals the normalized one.  Each row gets its
    table's schema JSON; ``fsp=False`` drops the fractional-second precision of temporal
    types from it, ``version=False`` its version."""
    schemas: dict[tuple[str, str], Any] = {}
    texts: dict[tuple[str, str], str] = {}
    rows: list[dict[str, Any]] = batch.to_pylist()
    for row in rows:
        slot = (row["database"], row["table"])
        if row["schema"]:  # (a BOOTSTRAP or DDL row's schema holds for the rows after it)
            schemas[slot] = schema_from_json(row["schema"], *slot)
            texts[slot] = row["schema"] if fsp else _without_fsp(row["schema"])
            if not version:
                texts[slot] = _without_version(texts[slot])
        if row["kind"] != "ROW":
            continue
        row["schema"] = texts[slot]  # (each row's schema, not only where it changed)
        types = {c.name: c.type for c in schemas[slot].columns}
        for side in ("before", "after"):
            if row[side] is not None:
                row[side] = {name: _read(types.get(name), text) for name, text in row[side]}
    return rows


def _without_version(text: str) -> str:
    obj = orjson.loads(text)
    obj.pop("version", None)
    return orjson.dumps(obj).decode()


def _without_fsp(text: str) -> str:
    obj = orjson.loads(text)
    for column in obj["columns"]:
        ctype = parse_column_type(column[1])
        if ctype.family in (Family.DATETIME, Family.TIME):
            column[1] = dataclasses.replace(ctype, decimal=None).sql()
    return orjson.dumps(obj).decode()


def _read(ctype: Any, text: str | None) -> Any:
    if ctype is None or text is None:
        return text
    values, failed = convert_column(ctype, pa.array([text], pa.string()))
    assert not failed, f"the apply stage cannot read {text!r} as {ctype.sql()}: {failed}"
    value = values.to_pylist()[0]
    if ctype.family is Family.TIME:  # the apply stage keeps TIME text as written
        value = parse_time(value)
    return value


# -- mutations ---------------------------------------------------------------------------------

# JSON texts of the wrong type for most fields (spliced in as text: orjson cannot write some)
_WRONG_TYPES = [b"null", b"true", b"[]", b"{}", b'"x"', b"-1", b"1.5", b"1e999"]
_WRONG_TYPES += [b"18446744073709551616", b'"\\ud800"', b"[" * 34 + b"]" * 34]
_SLOT = "\x00contract-mutation\x00"


@st.composite
def byte_mutations(draw: st.DrawFn, data: bytes) -> bytes:
    """One of: truncate, flip a byte, insert bytes, splice in bad UTF-8 or a huge length,
    replace a JSON scalar with a value of the wrong type, duplicate a tail."""
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
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
        return data[:pos] + bad + data[pos:]
    if kind == "length":
        huge = draw(st.sampled_from([2**63 - 1, 2**64 - 1, 2**40, len(data) + 1]))
        return data[:pos] + struct.pack(">Q", huge) + data[pos + 8 :]
    if kind == "duplicate":
        return data + data[pos:]
    replacement = draw(st.sampled_from(_WRONG_TYPES))
    for token in (b'":"', b'":', b'":{'):
        at = data.find(token, pos)
        if at >= 0:
            start = at + len(token) - (1 if token == b'":"' else 0)
            end = start + 1
            while end < len(data) and data[end] not in b",}]":
                end += 1
            return data[:start] + replacement + data[end:]
    return data + replacement


def _paths(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a member of a JSON document (dict keys and list items)."""
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for key, value in items:
        yield (*path, key)
        yield from _paths(value, (*path, key))


@st.composite
def json_mutations(draw: st.DrawFn, framing: Framing, part: str, data: bytes) -> bytes | None:
    """A structural edit of one JSON document in the part: a field deleted, or a member's
    value replaced by one of the wrong type.  None when the part holds no plain JSON."""
    documents = framing.split(part, data)
    if not documents:
        return None
    i = draw(st.integers(0, len(documents) - 1))
    try:
        obj = orjson.loads(documents[i])
    except orjson.JSONDecodeError:  # compressed bytes that happen to look like JSON's start
        return None
    paths = list(_paths(obj))
    if not paths:
        return None
    path = draw(st.sampled_from(paths))
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = _SLOT
    text = orjson.dumps(obj)
    slot = orjson.dumps(_SLOT)
    documents[i] = text.replace(slot, draw(st.sampled_from(_WRONG_TYPES))) if slot in text else text
    return framing.join(part, documents)
