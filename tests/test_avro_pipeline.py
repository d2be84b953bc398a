"""Avro through the apply stage (no Spark): a table follows its writer schemas, three
versions mid-stream (a column added and one widened, then one dropped), in order with the
rows, however the stream is cut into batches; and the pipeline's mode rules for Avro."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline_helpers import assert_matches, changelog, interleave, live, produce, run_batches
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import Column, Index, RowChange, RowKind, TableSchema, compose_ts
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.spark.pipeline import check_mode, default_mode
from ticdc_spark.testing.workload import Workload
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


def _two_partitions(options: dict[str, str]) -> tuple[list[Message], list[Message]]:
    """Column b added between the rows of each partition: partition 1 has more rows written
    before the change than partition 0 (the rows of one table spread over partitions)."""
    with_b = TableSchema("shop", "t", (*V1.columns, Column("b", T("varchar"))), PK)

    def insert(schema: TableSchema, key: int, at: int, **b: str) -> RowChange:
        return RowChange(RowKind.INSERT, schema, compose_ts(at), None, {"id": key, "a": key, **b})

    encoder = make_encoder("avro", options)
    p0 = encoder.encode([insert(V1, 1, 1001), insert(with_b, 2, 1010, b="x")])
    p1 = encoder.encode([insert(V1, 3, 1002), insert(V1, 4, 1003), insert(with_b, 5, 1011, b="y")])
    for partition, messages in enumerate((p0, p1)):
        for offset, message in enumerate(messages):
            message.topic, message.partition, message.offset = "shop_t", partition, offset
    return p0, p1


@pytest.mark.parametrize("extension", ["true", "false"])
@pytest.mark.parametrize("lagging", [False, True], ids=["one batch", "partition 1 behind"])
def test_rows_of_a_partition_behind_never_take_the_table_back_to_their_schema(
    extension: str, lagging: bool, tmp_path: Path
) -> None:
    """Partition 1's rows written before the change reach the planner after partition 0's
    rows with column b (by place without the extension, or in a later batch): the table
    keeps b and its values."""
    options = {"schema-registry": "mock://evolution", "enable-tidb-extension": extension}
    p0, p1 = _two_partitions(options)
    batches = [p0 + p1[:1], p1[1:]] if lagging else [p0 + p1]
    sink = DeltaSink(tmp_path / "lake")
    run_batches(batches, "avro", options, sink, tmp_path / "checkpoint", mode="eventual")
    rows = {r["id"]: r for r in live(sink.read(("shop", "t"))).to_pylist()}
    assert {k: r["b"] for k, r in rows.items()} == {1: None, 2: "x", 3: None, 4: None, 5: "y"}


def test_a_partition_s_first_rows_add_their_columns_whatever_else_the_batch_carries(
    tmp_path: Path,
) -> None:
    """Partition 1 first appears with column b while partition 0's task, which has read no
    value of the table, sends a tombstone (its schema: the key's columns only): b and its
    value stay (the table's columns were those of the last schema the batch numbered)."""
    options = {"schema-registry": "mock://first-rows"}
    with_b = TableSchema("shop", "t", (*V1.columns, Column("b", T("varchar"))), PK)
    encoder = make_encoder("avro", options)
    p0 = encoder.encode(
        [
            RowChange(RowKind.INSERT, V1, compose_ts(1), None, {"id": 1, "a": 1}),
            RowChange(RowKind.DELETE, V1, compose_ts(3), {"id": 1, "a": 1}, None),
        ]
    )
    p1 = encoder.encode(
        [RowChange(RowKind.INSERT, with_b, compose_ts(2), None, {"id": 2, "a": 2, "b": "x"})]
    )
    for partition, messages in enumerate((p0, p1)):
        for offset, message in enumerate(messages):
            message.topic, message.partition, message.offset = "shop_t", partition, offset
    sink = DeltaSink(tmp_path / "lake")
    store = StateStore(tmp_path / "checkpoint")
    avro = Capabilities(ddl=False, commit_ts=False)  # (rows define the schema, by position)
    applier = Applier(sink, store, mode="eventual", capabilities=avro)
    applier.apply(changelog(p0[:1], "avro", options), 0)
    # each partition decoded by a decoder of its own, as Spark's tasks do
    both = pa.concat_tables([changelog(p1, "avro", options), changelog(p0[1:], "avro", options)])
    applier.apply(both, 1)
    assert live(sink.read(("shop", "t"))).to_pylist() == [{"id": 2, "a": 2, "b": "x"}]


@pytest.mark.parametrize("extension", ["true", "false"])
def test_a_workload_with_column_changes_over_three_partitions(
    extension: str, tmp_path: Path
) -> None:
    """Tables whose columns change every few transactions, their rows over three partitions
    read at their own pace: partitions behind by several schemas never take a table back
    (they did, and the tables lost the values of the columns added)."""
    options = {
        "schema-registry": f"mock://workload-{extension}",
        "enable-tidb-extension": extension,
    }
    workload = Workload(rows=400, tables=2, seed=0, ddl_every=15)
    messages = produce(workload, "avro", options, partitions=3, topic="ticdc_{schema}_{table}")
    sink = DeltaSink(tmp_path / "lake")
    batches = list(interleave(messages, seed=0, chunk=60))
    run_batches(batches, "avro", options, sink, tmp_path / "checkpoint", mode="eventual")
    assert_matches(workload, sink)
