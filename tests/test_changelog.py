"""The changelog: the Spark decode stage's batch paths (Canal-JSON).

That every protocol's decode path into a changelog means the same values as its events, and
that its batch paths give the one-by-one rows, is in tests/contract/test_changelog_agrees.py."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from contract.helpers import kafka_batch
from ticdc_spark.codec import make_decoder


def _genuine_canal(messages: list) -> list:
    """TiCDC messages rewritten the way Alibaba Canal writes them (no ``_tidb``, ``old`` with
    only the changed columns, two rows in one message) so the batch path must hand them over."""
    import orjson

    from ticdc_spark.codec import Message

    out = []
    for m in messages:
        obj = orjson.loads(m.value)
        if obj.get("isDdl") or obj.get("type") not in ("INSERT", "UPDATE", "DELETE"):
            continue
        obj.pop("_tidb", None)
        if obj["old"]:
            old, data = obj["old"][0], obj["data"][0]
            obj["old"] = [{k: v for k, v in old.items() if data.get(k) != v}]
        if obj["type"] == "INSERT":
            obj["data"] = obj["data"] * 2
        out.append(Message(None, orjson.dumps(obj), topic="canal", partition=9, offset=len(out)))
    return out


def test_batch_path_equals_one_by_one() -> None:
    from pipeline_helpers import produce
    from ticdc_spark.spark.decode import _Records, decode_batches
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    messages = produce(Workload(seed=11, rows=300, tables=2), "canal-json", options)
    messages += _genuine_canal(messages[:60])
    batch = kafka_batch(messages)
    batched = pa.Table.from_batches(list(decode_batches(iter([batch]), "canal-json", options)))
    careful = _Records(batch, make_decoder("canal-json", options), fail=False).one_by_one()
    assert batched.num_rows == careful.num_rows > len(messages)  # DDL, watermarks, two-row msgs
    assert batched.to_pylist() == pa.Table.from_batches([careful]).to_pylist()
    assert "ERROR" not in batched["kind"].to_pylist()


def test_batch_path_hands_a_bad_value_to_the_checks() -> None:
    """A message in the batch path's shape with a number in its data: Arrow's conversion
    rejects the batch, and the one-by-one decode turns just that message into a dead letter."""
    import orjson

    from pipeline_helpers import produce
    from ticdc_spark.codec import Message
    from ticdc_spark.spark.decode import decode_batches
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    good = produce(Workload(seed=12, rows=40, tables=1), "canal-json", options, partitions=1)
    rows = [m for m in good if b'"type":"INSERT"' in (m.value or b"")]
    obj = orjson.loads(rows[-1].value)
    column = next(iter(obj["data"][0]))
    obj["data"][0][column] = 12345
    bad = Message(None, orjson.dumps(obj), topic="cdc", partition=0, offset=10_000)
    out = pa.Table.from_batches(
        list(decode_batches(iter([kafka_batch([*good, bad])]), "canal-json", options))
    )
    errors = out.filter(pa.compute.equal(out["kind"], "ERROR")).to_pylist()
    assert [(e["topic"], e["offset"]) for e in errors] == [("cdc", 10_000)]
    assert "strings or null" in errors[0]["error"] and errors[0]["value"] == bad.value
    assert (
        out.num_rows - 1
        == pa.Table.from_batches(
            list(decode_batches(iter([kafka_batch(good)]), "canal-json", options))
        ).num_rows
    )


def test_large_input_batches_are_decoded_in_slices(monkeypatch) -> None:
    from pipeline_helpers import produce
    from ticdc_spark.spark import decode as stage
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    batch = kafka_batch(produce(Workload(seed=13, rows=120, tables=1), "canal-json", options))
    whole = pa.Table.from_batches(list(stage.decode_batches(iter([batch]), "canal-json", options)))
    monkeypatch.setattr(stage, "MAX_INPUT_BYTES", batch.nbytes // 5)
    # (slices are never joined again: they are over half MAX_INPUT_BYTES, past COALESCE_BYTES)
    monkeypatch.setattr(stage, "COALESCE_BYTES", batch.nbytes // 10)
    sliced = list(stage.decode_batches(iter([batch]), "canal-json", options))
    assert len(sliced) >= 5
    # the same rows; each slice names the schema of the tables it holds again
    assert pa.Table.from_batches(sliced).drop_columns(["schema"]).to_pylist() == (
        whole.drop_columns(["schema"]).to_pylist()
    )
    for part in sliced:
        rows = [r for r in part.to_pylist() if r["kind"] == "ROW"]
        assert not rows or rows[0]["schema"]


def _small_canal_batches(seed: int) -> tuple[dict[str, str], list[Any]]:
    from pipeline_helpers import produce
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    batch = kafka_batch(produce(Workload(seed=seed, rows=90, tables=2), "canal-json", options))
    return options, [batch.slice(start, 7) for start in range(0, batch.num_rows, 7)]


def _rows_without_schema(batches: list[Any]) -> list[dict[str, Any]]:
    return pa.Table.from_batches(batches).drop_columns(["schema"]).to_pylist()  # type: ignore[no-any-return]


def test_small_input_batches_are_decoded_together_in_order_and_bounded(monkeypatch) -> None:
    from ticdc_spark.spark import decode as stage

    options, small = _small_canal_batches(15)
    alone = [list(stage.decode_batches(iter([b]), "canal-json", options)) for b in small]
    monkeypatch.setattr(stage, "COALESCE_RECORDS", 30)
    joining = stage._Joining()
    assert [len(g) for g in stage._coalesced(iter(small[:3]), joining)] == [1, 1, 1]  # (unseen)
    joining.per_record = 1.0
    groups = list(stage._coalesced(iter(small), joining))
    assert [len(g) for g in groups[:-1]] == [4] * (len(groups) - 1)  # 4 of 7 records fit in 30
    assert [b for g in groups for b in g] == small
    together = list(stage.decode_batches(iter(small), "canal-json", options))
    # the first batch alone (to see how large its changelog is), then groups of four
    assert len(together) == 1 + -(-(len(small) - 1) // 4) < len(small)
    # the same rows in the same order (each output batch names its tables' schemas once)
    assert _rows_without_schema(together) == [r for p in alone for r in _rows_without_schema(p)]
    for part in together:  # each output batch restates the schema of the tables it holds
        first: dict[Any, Any] = {}
        for r in part.to_pylist():
            first.setdefault((r["database"], r["table"]), r)
        assert all(r["schema"] for r in first.values() if r["kind"] == "ROW")
    monkeypatch.setattr(stage, "COALESCE_BYTES", small[0].nbytes + 1)
    assert len(list(stage._coalesced(iter(small), joining))) == len(small)  # the byte bound


def test_batches_join_only_while_their_changelog_stays_bounded(monkeypatch) -> None:
    """A batch's changelog can be many times its messages (Avro's images name every column):
    the stage joins only as many records as the bytes per record it has seen allow."""
    from ticdc_spark.spark import decode as stage

    options, small = _small_canal_batches(16)
    first = next(stage.decode_batches(iter(small[:1]), "canal-json", options))
    per_record = first.nbytes / small[0].num_rows
    monkeypatch.setattr(stage, "MAX_JOINED_OUTPUT_BYTES", int(per_record * 15))
    out = list(stage.decode_batches(iter(small), "canal-json", options))
    assert 1 + -(-(len(small) - 1) // 2) <= len(out) < len(small)  # (two of 7 fit in ~15)
    assert max(b.num_rows for b in out) <= 2 * 7 + 2  # (a DDL row or two beside the rows)
    monkeypatch.setattr(stage, "MAX_JOINED_OUTPUT_BYTES", int(per_record * 3))
    assert len(list(stage.decode_batches(iter(small), "canal-json", options))) == len(small)


def test_joined_batches_the_batch_path_refuses_are_decoded_as_spark_cut_them(
    monkeypatch,
) -> None:
    from ticdc_spark.spark import decode as stage

    options, small = _small_canal_batches(17)
    want = _rows_without_schema(list(stage.decode_batches(iter(small), "canal-json", options)))
    batch_path = stage._Stage._batch_path
    sizes = []

    def only_small(self: Any, batch: Any, records: Any, before: Any) -> Any:
        sizes.append(batch.num_rows)
        return batch_path(self, batch, records, before) if batch.num_rows <= 7 else None

    monkeypatch.setattr(stage._Stage, "_batch_path", only_small)
    out = list(stage.decode_batches(iter(small), "canal-json", options))
    assert max(sizes) > 7  # (joined batches were tried, and refused)
    assert len(out) == len(small)
    assert _rows_without_schema(out) == want


def test_batch_path_reads_null_names_as_the_careful_path_does() -> None:
    import orjson

    from pipeline_helpers import produce
    from ticdc_spark.codec import Message
    from ticdc_spark.spark.decode import _Records, decode_batches
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    rows = [
        m
        for m in produce(Workload(seed=14, rows=30, tables=1), "canal-json", options)
        if b'"type":"INSERT"' in (m.value or b"")
    ][:3]
    nameless = []
    for offset, m in enumerate(rows):
        obj = orjson.loads(m.value)
        obj["database"] = None
        nameless.append(Message(None, orjson.dumps(obj), topic="t", partition=0, offset=offset))
    batch = kafka_batch(nameless)
    batched = pa.Table.from_batches(list(decode_batches(iter([batch]), "canal-json", options)))
    careful = _Records(batch, make_decoder("canal-json", options), fail=False).one_by_one()
    assert batched.to_pylist() == pa.Table.from_batches([careful]).to_pylist()
    assert set(batched["database"].to_pylist()) == {""}


def test_a_value_arrow_cannot_hold_becomes_a_dead_letter() -> None:
    """A commit ts past int64 passes the decoder's checks but no changelog column holds it:
    that record, and only it, becomes a dead letter (and in fail mode, the error)."""
    import orjson

    from pipeline_helpers import produce
    from ticdc_spark.codec import Message
    from ticdc_spark.errors import DecodeError
    from ticdc_spark.spark.decode import decode_batches
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    good = produce(Workload(seed=15, rows=30, tables=1), "canal-json", options, partitions=1)
    first = next(m for m in good if b'"type":"INSERT"' in (m.value or b""))
    huge = orjson.loads(first.value)
    huge["_tidb"]["commitTs"] = 1 << 63  # a JSON integer orjson reads, past int64
    bad = Message(None, orjson.dumps(huge), topic="cdc", partition=0, offset=77_777)
    batch = kafka_batch([*good, bad])
    out = pa.Table.from_batches(list(decode_batches(iter([batch]), "canal-json", options)))
    errors = out.filter(pa.compute.equal(out["kind"], "ERROR")).to_pylist()
    assert [(e["offset"], e["value"]) for e in errors] == [(77_777, bad.value)]
    expected = pa.Table.from_batches(
        list(decode_batches(iter([kafka_batch(good)]), "canal-json", options))
    )
    assert out.num_rows == expected.num_rows + 1
    with pytest.raises(DecodeError, match="cdc/0@77777"):
        list(decode_batches(iter([batch]), "canal-json", options, fail=True))


@pytest.mark.parametrize("protocol", ["avro", "canal-json"])
def test_large_var_type_columns_decode_as_the_default_ones(protocol: str) -> None:
    """With spark.sql.execution.arrow.useLargeVarTypes Spark sends large_binary and
    large_string columns (Avro's batch path had no kernel for them and the task died)."""
    from ticdc_spark.codec import make_encoder
    from ticdc_spark.spark.decode import decode_batches
    from ticdc_spark.testing.workload import Workload

    options = {"enable-tidb-extension": "true"}
    if protocol == "avro":
        options["schema-registry"] = "mock://large-var-types"
    events = list(Workload(seed=18, rows=40, tables=1).events())
    messages = [m for m in make_encoder(protocol, options).encode(events) if m.value]
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "t", 0, offset
    batch = kafka_batch(messages)
    large = {pa.binary(): pa.large_binary(), pa.string(): pa.large_string()}
    wide = batch.cast(pa.schema([f.with_type(large.get(f.type, f.type)) for f in batch.schema]))
    assert wide.schema.field("value").type == pa.large_binary()
    want = _rows_without_schema(list(decode_batches(iter([batch]), protocol, options)))
    got = _rows_without_schema(list(decode_batches(iter([wide]), protocol, options)))
    assert got == want and any(r["kind"] == "ROW" for r in got)
