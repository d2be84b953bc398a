"""Avro through the apply stage (no Spark): a table follows its writer schemas, three
versions mid-stream (a column added and one widened, then one dropped), in order with the
rows, however the stream is cut into batches; and the pipeline's mode rules for Avro."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pipeline_helpers import live, run_batches
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.spark.pipeline import check_mode, default_mode
from ticdc_spark.types import ColumnType as T

PK = (Index("PRIMARY", ("id",), primary=True, unique=True),)
V1 = TableSchema("shop", "t", (Column("id", T("int"), False), Column("a", T("int"))), PK)
V2 = TableSchema(
    "shop", "t", (*V1.columns[:1], Column("a", T("bigint")), Column("b", T("varchar"))), PK
)
V3 = TableSchema("shop", "t", (V1.columns[0], Column("b", T("varchar"))), PK)
OPTIONS = {"schema-registry": "mock://evolution", "enable-tidb-extension": "true"}


def stream() -> list[Message]:
    rows = [
        RowChange(RowKind.INSERT, V1, compose_ts(1001), None, {"id": 1, "a": 5}),
        RowChange(RowKind.INSERT, V1, compose_ts(1002), None, {"id": 4, "a": 7}),
        RowChange(RowKind.INSERT, V2, compose_ts(1003), None, {"id": 2, "a": 2**40, "b": "x"}),
        RowChange(RowKind.UPDATE, V2, compose_ts(1004), {"id": 1}, {"id": 1, "a": 6, "b": "y"}),
        RowChange(RowKind.DELETE, V2, compose_ts(1005), {"id": 4, "a": 7, "b": None}, None),
        RowChange(RowKind.INSERT, V3, compose_ts(1006), None, {"id": 3, "b": "z"}),
        RowChange(RowKind.DELETE, V3, compose_ts(1007), {"id": 2, "b": "x"}, None),
    ]
    messages = make_encoder("avro", OPTIONS).encode(rows)
    for offset, message in enumerate(messages):
        message.partition, message.offset = 0, offset
    return messages


def test_older_schema_ids_still_decode() -> None:
    messages = stream()
    decoder = make_decoder("avro", OPTIONS)
    late = [e for m in messages[5:] for e in decoder.decode(m)]
    early = decoder.decode(messages[0])[0]  # a v1 record after v3 ones
    assert late[0].schema.column_names == ("id", "b")
    assert early.schema.column_names == ("id", "a") and early.after == {"id": 1, "a": 5}


@pytest.mark.parametrize("cuts", [[], [1, 2, 3, 4, 5, 6], [3], [5]], ids=str)
def test_the_table_follows_three_schema_versions(cuts: list[int], tmp_path: Path) -> None:
    messages = stream()
    bounds = [0, *cuts, len(messages)]
    batches = [messages[a:b] for a, b in itertools.pairwise(bounds)]
    sink = DeltaSink(tmp_path / "lake")
    run_batches(batches, "avro", OPTIONS, sink, tmp_path / "checkpoint", mode="eventual")
    table = sink.read(("shop", "t"))
    assert [f.name for f in table.schema if not f.name.startswith("_")] == ["id", "b"]
    assert sorted(live(table).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "b": "y"},
        {"id": 3, "b": "z"},
    ]


def test_widening_keeps_values_that_need_the_wider_type(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "lake")
    run_batches([stream()[:3]], "avro", OPTIONS, sink, tmp_path / "checkpoint", mode="eventual")
    rows = {r["id"]: r for r in live(sink.read(("shop", "t"))).to_pylist()}
    assert rows[2]["a"] == 2**40 and rows[1] == {"id": 1, "a": 5, "b": None}


def test_avro_replicates_in_eventual_mode_and_refuses_consistent() -> None:
    assert default_mode("avro") == "eventual" and default_mode("canal-json") == "consistent"
    with pytest.raises(ConfigError, match=r"carries no watermarks.*--mode eventual"):
        check_mode("avro", "consistent")
    check_mode("avro", "eventual")
