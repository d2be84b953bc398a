"""Partition dispatch matches TiCDC's.

The rows and expected partitions are those of TiCDC's own dispatcher tests, in
pingcap/tiflow ``cdc/sink/dmlsink/mq/dispatcher/partition/``: ``index_value_test.go``
(TestIndexValueDispatcher, TestIndexValueDispatcherWithIndexName), ``columns_test.go``
(TestColumnsDispatcher), ``table_test.go``, ``default_test.go`` and ``ts_test.go``.  The hash
is ``pkg/hash/position_inertia.go``: the XOR of one CRC-32 per write.
"""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

import orjson
import pytest

from ticdc_spark.cli import main
from ticdc_spark.dispatch import PartitionDispatcher, make_dispatcher, position_inertia
from ticdc_spark.errors import ConfigError, EncodeError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema
from ticdc_spark.sql import apply_alter_table, parse_create_table
from ticdc_spark.types import parse_column_type

BIGINT = parse_column_type("bigint")


def _schema(
    table: str,
    names: list[str],
    pk: list[str] = (),  # type: ignore[assignment]
    indexes: tuple[Index, ...] = (),
    virtual: tuple[str, ...] = (),
) -> TableSchema:
    columns = tuple(Column(n, BIGINT, nullable=n not in pk) for n in names)
    if pk:
        indexes = (Index("PRIMARY", tuple(pk), primary=True, unique=True), *indexes)
    return TableSchema("test", table, columns, indexes, virtual_columns=virtual)


def _row(
    schema: TableSchema, image: dict, kind: RowKind = RowKind.INSERT, ts: int = 1
) -> RowChange:
    if kind is RowKind.DELETE:
        return RowChange(kind, schema, ts, before=image)
    return RowChange(
        kind, schema, ts, before=dict(image) if kind is RowKind.UPDATE else None, after=image
    )


def test_position_inertia_xors_one_crc_per_write() -> None:
    assert position_inertia() == 0
    assert position_inertia((b"test", b"t1")) == zlib.crc32(b"testt1")
    assert position_inertia((b"test", b"t1"), (b"a", b"11")) == zlib.crc32(b"testt1") ^ zlib.crc32(
        b"a11"
    )
    # the order of the writes does not matter; a write twice cancels out
    assert position_inertia((b"x",), (b"y",)) == position_inertia((b"y",), (b"x",))
    assert position_inertia((b"x",), (b"y",), (b"y",)) == position_inertia((b"x",))


# index_value_test.go, TestIndexValueDispatcher: 16 partitions.
@pytest.mark.parametrize(
    ("table", "pk", "image", "expected"),
    [
        ("t1", ["a"], {"a": 11, "b": 22}, 2),
        ("t1", ["a"], {"a": 22, "b": 22}, 11),
        ("t1", ["a"], {"a": 11, "b": 33}, 2),
        ("t2", ["a", "b"], {"a": 11, "b": 22}, 5),
        ("t2", ["a", "b"], {"b": 22, "a": 11}, 5),
        ("t2", ["a", "b"], {"a": 11, "b": 0}, 14),
        ("t2", ["a", "b"], {"a": 11, "b": 33}, 2),
    ],
)
def test_index_value_partitions_of_ticdcs_test(table, pk, image, expected) -> None:
    schema = _schema(table, list(image), pk).with_derived_flags()
    dispatcher = make_dispatcher("index-value")
    assert dispatcher.partition(_row(schema, image), 16) == expected
    # an update hashes its post image, a delete its pre image
    assert dispatcher.partition(_row(schema, image, RowKind.UPDATE), 16) == expected
    assert dispatcher.partition(_row(schema, image, RowKind.DELETE), 16) == expected


def _index1_schema(virtual: tuple[str, ...] = (), names=("col2", "col1", "col3")) -> TableSchema:
    # TestIndexValueDispatcherWithIndexName / TestColumnsDispatcher: columns col2 (id 1),
    # col1 (id 2), col3 (id 3); the primary index "index1" over (col2, col1).
    index = Index("index1", (names[0], names[1]), primary=True, unique=True)
    columns = tuple(Column(n, BIGINT, nullable=False) for n in names)
    return TableSchema("test", "t1", columns, (index,), virtual_columns=virtual)


_INDEX1_IMAGE = {"col2": 11, "col1": 22, "col3": 33}


def test_index_value_with_an_index_name_of_ticdcs_test() -> None:
    row = _row(_index1_schema().with_derived_flags(), _INDEX1_IMAGE)
    with pytest.raises(EncodeError, match="index not found"):
        make_dispatcher("index-value:index2").partition(row, 16)
    assert make_dispatcher("index-value:index1").partition(row, 16) == 15
    assert make_dispatcher("index-value:INDEX1").partition(row, 16) == 15
    assert make_dispatcher("index-value").partition(row, 16) == 15


def test_columns_partitions_of_ticdcs_test() -> None:
    row = _row(_index1_schema(virtual=("col4",)), _INDEX1_IMAGE)
    with pytest.raises(EncodeError, match=r"column not found.*'col-not-found'"):
        make_dispatcher("columns:col2,col-not-found").partition(row, 16)
    with pytest.raises(EncodeError, match=r"virtual generated column.*'col4'"):
        make_dispatcher("columns:col4").partition(row, 16)
    assert make_dispatcher("columns:col2,col1").partition(row, 16) == 15
    # names match case-insensitively ...
    assert make_dispatcher("columns:COL2,Col1").partition(row, 16) == 15
    # ... and the table's spelling is hashed
    upper = _index1_schema(names=("COL2", "Col1", "col3"))
    row = _row(upper, {"COL2": 11, "Col1": 22, "col3": 33})
    assert make_dispatcher("columns:col2,col1").partition(row, 16) == 5


def test_a_missing_column_is_refused_with_one_partition_too() -> None:
    row = _row(_index1_schema(), _INDEX1_IMAGE)
    with pytest.raises(EncodeError, match="column not found"):
        make_dispatcher("columns:nope").partition(row, 1)


def test_virtual_generated_columns_are_learnt_from_ddl() -> None:
    schema = parse_create_table(
        "CREATE TABLE test.t1 (col2 BIGINT, col1 BIGINT, col3 BIGINT, "
        "col4 BIGINT AS (col1 + 1) VIRTUAL, col5 BIGINT AS (col1 + 2) STORED)"
    )
    assert schema is not None
    assert schema.virtual_columns == ("col4",)
    row = _row(schema, {**_INDEX1_IMAGE, "col5": 24})
    with pytest.raises(EncodeError, match="virtual generated"):
        make_dispatcher("columns:COL4").partition(row, 16)
    # a stored generated column is sent by TiCDC, so it can be dispatched on
    make_dispatcher("columns:col5").partition(row, 16)
    schema = apply_alter_table(schema, "ALTER TABLE test.t1 ADD COLUMN c6 INT AS (col1) VIRTUAL")
    assert schema.virtual_columns == ("col4", "c6")
    schema = apply_alter_table(schema, "ALTER TABLE test.t1 DROP COLUMN col4")
    assert schema.virtual_columns == ("c6",)


# table_test.go, TestTableDispatcher (16 partitions); default_test.go (3 partitions).
@pytest.mark.parametrize(("table", "expected"), [("t1", 15), ("t2", 5), ("t3", 3)])
@pytest.mark.parametrize("ts", [1, 2, 3])
def test_table_partitions_of_ticdcs_test(table, expected, ts) -> None:
    row = _row(_schema(table, ["id"], ["id"]), {"id": 1}, ts=ts)
    assert make_dispatcher("table").partition(row, 16) == expected
    assert make_dispatcher("default").partition(row, 16) == expected


def test_default_partition_of_ticdcs_test() -> None:
    row = _row(_schema("t1", ["id"], ["id"]).with_derived_flags(), {"id": 1})
    assert make_dispatcher("default").partition(row, 3) == 0


@pytest.mark.parametrize("table", ["t1", "t2"])
@pytest.mark.parametrize("ts", [1, 2, 3])
def test_ts_partitions_of_ticdcs_test(table, ts) -> None:
    row = _row(_schema(table, ["id"], ["id"]), {"id": 1}, ts=ts)
    assert make_dispatcher("ts").partition(row, 16) == ts


def test_values_hash_as_column_value_string() -> None:
    """FLOAT at float32 width, DECIMAL keeping its scale, ENUM as its index, bytes raw."""
    columns = (
        Column("id", BIGINT, nullable=False),
        Column("f", parse_column_type("float")),
        Column("d", parse_column_type("decimal(10,2)")),
        Column("e", parse_column_type("enum('x','y')")),
        Column("b", parse_column_type("varbinary(8)")),
        Column("n", BIGINT),
    )
    schema = TableSchema("db", "t", columns, (Index("PRIMARY", ("id",), True, True),))
    from decimal import Decimal

    image = {"id": 1, "f": 1.100000023841858, "d": Decimal("1.50"), "e": 2, "b": b"\xff", "n": None}
    row = _row(schema, image)
    writes = [(b"f", b"1.1"), (b"d", b"1.50"), (b"e", b"2"), (b"b", b"\xff"), (b"n", b"null")]
    expected = zlib.crc32(b"dbt")
    for name, text in writes:
        expected ^= zlib.crc32(name + text)
    assert make_dispatcher("columns:f,d,e,b,n").hash(row) == expected


def test_rule_names() -> None:
    assert make_dispatcher("Index-Value").rule == "index-value"
    assert make_dispatcher("rowid").rule == "index-value"  # TiCDC's deprecated name
    assert make_dispatcher("TS").rule == "ts"
    for bad in ("columns", "hash", "ts:a", "index-value:a,b"):
        with pytest.raises(ConfigError):
            make_dispatcher(bad)
    with pytest.raises(ConfigError):
        PartitionDispatcher("table", index="i")


def _event(image: dict, table: str = "t2", pk=("a", "b")) -> bytes:
    return orjson.dumps(
        {
            "type": "INSERT",
            "database": "test",
            "table": table,
            "columns": dict.fromkeys(image, "bigint"),
            "pk": list(pk),
            "commitTs": 1,
            "after": {n: str(v) for n, v in image.items()},
        }
    )


@pytest.mark.parametrize(
    ("dispatcher", "expected"),
    [("index-value", [2, 11, 5, 14, 2]), ("columns:A,b", [None, None, 5, 14, 2]), ("table", None)],
)
def test_encode_picks_ticdcs_partitions(dispatcher, expected, tmp_path: Path, capsys) -> None:
    """``ticdc-spark encode --partitions 16 --dispatcher ...`` on TiCDC's test rows."""
    rows = [
        _event({"a": 11, "b": 22}, "t1", ["a"]),
        _event({"a": 22, "b": 22}, "t1", ["a"]),
        _event({"a": 11, "b": 22}),
        _event({"a": 11, "b": 0}),
        _event({"a": 11, "b": 33}),
    ]
    if dispatcher == "columns:A,b":
        # t2's rows keyed on a only: the columns dispatcher still hashes a and b, so
        # they land where index-value puts them on a table keyed on (a, b)
        rows = [r.replace(b'"pk":["a","b"]', b'"pk":["a"]') for r in rows[2:]]
        expected = expected[2:]
    if dispatcher == "table":
        expected = [15, 15, 5, 5, 5]
    source = tmp_path / "events.jsonl"
    source.write_bytes(b"\n".join(rows) + b"\n")
    args = ["encode", "-p", "canal-json", "--partitions", "16", "--dispatcher", dispatcher]
    assert main([*args, str(source)]) == 0
    placed = {}  # (table, a, b) -> partition, from the Canal-JSON messages (one row each)
    for line in capsys.readouterr().out.splitlines():
        record = orjson.loads(line)
        message = orjson.loads(base64.b64decode(record["value"]))
        for data in message["data"]:
            placed[(message["table"], data["a"], data["b"])] = record["partition"]
    wanted = {}
    for row, partition in zip(rows, expected, strict=True):
        event = orjson.loads(row)
        wanted[(event["table"], event["after"]["a"], event["after"]["b"])] = partition
    assert placed == wanted


def test_encode_refuses_a_column_the_table_lacks(tmp_path: Path, capsys) -> None:
    source = tmp_path / "events.jsonl"
    source.write_bytes(_event({"a": 1, "b": 2}) + b"\n")
    args = ["encode", "-p", "canal-json", "--partitions", "4", "--dispatcher", "columns:c"]
    assert main([*args, str(source)]) != 0
    assert "column not found" in capsys.readouterr().err
