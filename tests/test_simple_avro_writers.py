"""The Simple-Avro hot path (codec.simple.avrorows) against the careful writer beside it.

Each table's generated writers must give exactly the bytes of ``avro.row_map_bytes`` for
every type, with the compiled texts or without, for an UPDATE's second image taking columns
from the first, for images missing columns, and for values that do not fit their column (the
careful writer's bytes or its error).  The whole message is checked against fastavro in
test_simple_spec.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import images, schemas, values_of
from ticdc_spark.codec.compiled import values as compiled_values
from ticdc_spark.codec.simple import avro, avrorows
from ticdc_spark.codec.simple.avrorows import TableWriter
from ticdc_spark.codec.simple.dialect import json_dialect
from ticdc_spark.codec.simple.encoder import _plan, _texts
from ticdc_spark.model import Column, TableSchema
from ticdc_spark.types import ColumnType, parse_column_type

_MISFITS = st.one_of(st.text(max_size=3), st.integers(-(2**70), 2**70), st.binary(max_size=3))
_MISFITS |= st.floats(allow_nan=False) | st.none()


def _careful(schema: TableSchema, image: dict[str, Any]) -> bytes | type:
    """The careful writer's bytes (its texts by the Python formatters, never the compiled
    loop's), or the type of the error it raises."""
    plan = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True)
    try:
        return avro.row_map_bytes(plan.avro, image)
    except Exception as exc:
        return type(exc)


def _fast(writer: TableWriter, image: dict[str, Any], texts: Any) -> Any:
    try:
        return writer.first(image, texts)
    except Exception as exc:
        return type(exc), None


@st.composite
def image_pairs(draw: st.DrawFn) -> tuple[TableSchema, dict[str, Any], dict[str, Any]]:
    """A schema, an image and a second image sharing most of its value objects (an UPDATE),
    each sometimes missing a column or holding a value that does not fit its column."""
    schema = draw(schemas(max_columns=12))
    first = draw(images(schema))
    second = dict(first)
    for column in schema.columns:
        if draw(st.integers(0, 3)) == 0:
            second[column.name] = draw(values_of(column.type))
    for image in (first, second):
        if draw(st.integers(0, 5)) == 0:
            image.pop(draw(st.sampled_from([c.name for c in schema.columns])))
        if draw(st.integers(0, 5)) == 0:
            image[draw(st.sampled_from([c.name for c in schema.columns]))] = draw(_MISFITS)
    return schema, first, second


@settings(max_examples=300, deadline=None)
@given(pair=image_pairs(), compiled=st.booleans())
def test_the_generated_writers_write_what_the_careful_writer_writes(
    pair: tuple[TableSchema, dict[str, Any], dict[str, Any]], compiled: bool
) -> None:
    if compiled and compiled_values is None:
        pytest.skip("the compiled loops are not built")  # (only on a machine without a compiler)
    schema, first, second = pair
    plan = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True)
    writer = plan.avro_writer
    expected_first = _careful(schema, first)
    texts = None
    if compiled:
        try:
            texts = _texts(plan, first)
        except Exception:
            assert isinstance(expected_first, type)
            return
    written, twin = _fast(writer, first, texts)
    assert written == expected_first
    if isinstance(written, type):
        return
    expected_second = _careful(schema, second)
    try:
        second_written: bytes | type = writer.twin(second, twin)
    except Exception as exc:
        second_written = type(exc)
    assert second_written == expected_second


def test_an_update_takes_the_columns_holding_the_same_values() -> None:
    """The second image reuses the first's bytes by identity of value, never by equality:
    0.0 == -0.0, but their bytes differ."""
    columns = (Column("id", ColumnType("bigint")), Column("x", ColumnType("double")))
    schema = TableSchema("d", "t", columns)
    writer = TableWriter(
        _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True).avro, ()
    )
    zero = 0.0
    data, twin = writer.first({"id": 1, "x": zero}, None)
    assert twin is not None
    assert writer.twin({"id": 1, "x": zero}, twin) == data
    for second in ({"id": 1, "x": -0.0}, {"id": 2, "x": zero}, {"id": 1}):
        assert writer.twin(second, twin) == avro.row_map_bytes(writer.columns, second)
    assert writer.twin({"id": 1, "x": -0.0}, twin) != data


def test_an_update_writes_the_columns_turned_null_or_not_null() -> None:
    columns = (Column("id", ColumnType("bigint")), Column("s", ColumnType("varchar")))
    columns += (Column("d", ColumnType("datetime")), Column("b", ColumnType("blob")))
    schema = TableSchema("d", "t", columns)
    plan = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True)
    writer = plan.avro_writer
    full = {"id": 1, "s": "x" * 70, "d": datetime(2024, 1, 2, 3, 4, 5), "b": b"\x00" * 64}
    empty = {"id": 1, "s": None, "d": None, "b": None}
    for first, second in ((full, empty), (empty, full), (full, {**full, "s": "y"})):
        data, twin = writer.first(first, _texts(plan, first))
        assert data == avro.row_map_bytes(writer.columns, first)
        assert writer.twin(second, twin) == avro.row_map_bytes(writer.columns, second)


# Values about each step of the writers' longs (one, two, three lookups, varint()), and past
# what each column type holds: the generated writers either write them or leave them to the
# careful writer, and the bytes are the same.
_BITS = (6, 7, 13, 14, 27, 28, 41, 42, 55, 56, 62, 63, 64)
_STEPS = [2**bits + d for bits in _BITS for d in (-1, 0)]
_LONG_TYPES = ["tinyint", "tinyint unsigned", "smallint", "smallint unsigned", "mediumint"]
_LONG_TYPES += ["int", "int unsigned", "bigint", "bigint unsigned", "year", "bit(12)", "bit(64)"]
_LONG_TYPES += ["enum('a','b')", "set('a','b','c')"]


@pytest.mark.parametrize("type_text", _LONG_TYPES)
def test_longs_about_each_step_are_written_as_the_careful_writer_writes(type_text: str) -> None:
    schema = TableSchema("d", "t", (Column("x", parse_column_type(type_text)),))
    writer = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True).avro_writer
    for value in _STEPS + [-v for v in _STEPS]:
        try:
            expected: bytes | type = avro.row_map_bytes(writer.columns, {"x": value})
        except ValueError:
            expected = ValueError
        try:
            written: bytes | type = writer.first({"x": value}, None)[0]
        except ValueError:
            written = ValueError
        assert written == expected, value


def _reference_long(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_EDGES = [0, 1, -1, 63, -64, 64, -65, 8191, 8192, 2**13, 2**20, 2**27, 2**28, 2**41, 2**42]
_EDGES += [2**56 - 1, 2**56, 2**62, 2**63 - 1, -(2**63)]


@settings(max_examples=500, deadline=None)
@given(
    value=st.integers(-(2**63), 2**63 - 1)
    | st.sampled_from(_EDGES + [-e for e in _EDGES if -e < 2**63])
)
def test_longs_are_zigzag_varints_over_the_whole_range(value: int) -> None:
    assert avro.long_bytes(value) == _reference_long(value)


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 2**64, -(2**80)])
def test_a_long_outside_64_bits_is_refused(value: int) -> None:
    with pytest.raises(ValueError, match="does not fit an Avro long"):
        avro.long_bytes(value)
    with pytest.raises(ValueError, match="64-bit range"):
        avro.varint((value << 1) ^ (value >> 63))


def test_a_table_wider_than_the_bound_keeps_the_careful_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(avrorows, "MOST_COLUMNS", 2)
    names = ("a", "b", "c")
    schema = TableSchema("d", "t", tuple(Column(n, ColumnType("int")) for n in names))
    columns = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True).avro
    image = {"a": 1, "b": None, "c": -(2**31)}
    written, twin = TableWriter(columns, ()).first(image, None)
    assert twin is None  # (no generated writer: nothing for a twin to take)
    assert written == avro.row_map_bytes(columns, image)
    assert TableWriter(columns[:2], ()).first(image, None)[1] is not None


@pytest.mark.parametrize(
    ("type_text", "value"),
    [("bigint", 2**63), ("int", 2**63), ("bigint unsigned", 2**64), ("bigint unsigned", 2**64 + 5)],
)
def test_an_integer_past_its_column_is_refused_not_wrapped(type_text: str, value: int) -> None:
    """Only a uint64 past 2**63 is cast to int64 (as TiCDC casts it); 2**64 + 5 wrapped
    would read back as 5."""
    from ticdc_spark.codec import make_encoder
    from ticdc_spark.errors import EncodeError
    from ticdc_spark.model import RowChange, RowKind

    schema = TableSchema("db", "t", (Column("u", parse_column_type(type_text)),), version=1)
    options = {"encoding-format": "avro", "send-bootstrap-in-msg-count": "0"}
    options["send-bootstrap-interval-in-sec"] = "0"
    with pytest.raises(EncodeError, match="column 'u'"):
        make_encoder("simple", options).encode(
            [RowChange(RowKind.INSERT, schema, 1, None, {"u": value})]
        )
    columns = _plan(schema, json_dialect("UTC"), avro.location_bytes("UTC"), True).avro
    with pytest.raises(ValueError, match="does not fit an Avro long"):
        avro.row_map_bytes(columns, {"u": value})
    if type_text == "bigint unsigned":  # (the generated writer as well)
        with pytest.raises((ValueError, OverflowError, IndexError)):
            TableWriter(columns, ()).first({"u": value}, None)
