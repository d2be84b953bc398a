"""The Spark decode stage: mapInArrow over Kafka-shaped DataFrames."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline_helpers import changelog, produce
from ticdc_spark.spark.decode import changes, dead_letters, decode
from ticdc_spark.spark.session import ARROW_BATCH_CONF
from ticdc_spark.testing.workload import Workload

pytestmark = pytest.mark.spark

KAFKA_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
    ]
)


def _kafka_frame(spark, messages) -> object:
    table = pa.table(
        {
            "key": [m.key for m in messages],
            "value": [m.value for m in messages],
            "topic": [m.topic for m in messages],
            "partition": [m.partition for m in messages],
            "offset": [m.offset for m in messages],
        },
        schema=KAFKA_SCHEMA,
    )
    return spark.createDataFrame(table)


@pytest.mark.parametrize(
    ("protocol", "options"),
    [
        ("canal-json", {"enable-tidb-extension": "true"}),
        ("open-protocol", {}),
    ],
)
def test_decode_stage_matches_the_codec(spark, protocol: str, options: dict) -> None:
    messages = produce(Workload(seed=5, rows=200, tables=2), protocol, options, partitions=2)
    result = decode(_kafka_frame(spark, messages), protocol, options).toArrow()
    expected = changelog(messages, protocol, options)
    key = ["topic", "partition", "offset", "seq"]
    got = result.sort_by([(k, "ascending") for k in key])
    want = expected.sort_by([(k, "ascending") for k in key])
    columns = ["kind", "op", "database", "table", "commit_ts", "before", "after", "sql"]
    assert got.select(columns).to_pylist() == want.select(columns).to_pylist()


def test_batches_bounded_by_records_decode_like_one(spark) -> None:
    """The session lifts Spark's per-row byte check and cuts Arrow batches by records instead;
    a stream cut into many batches (tables' schemas memoized across them) decodes the same."""
    conf = spark.conf
    for key, value in ARROW_BATCH_CONF.items():
        assert conf.get(key) == value
    options = {"enable-tidb-extension": "true"}
    messages = produce(Workload(seed=8, rows=600, tables=2), "canal-json", options, partitions=1)
    records = "spark.sql.execution.arrow.maxRecordsPerBatch"
    conf.set(records, "97")  # many batches per task, each boundary mid-table
    try:
        result = decode(_kafka_frame(spark, messages).coalesce(1), "canal-json", options)
        got = result.toArrow()
    finally:
        conf.set(records, ARROW_BATCH_CONF[records])
    expected = changelog(messages, "canal-json", options)
    key = [("offset", "ascending"), ("seq", "ascending")]
    columns = ["kind", "op", "database", "table", "commit_ts", "before", "after", "offset"]
    assert len(messages) > 5 * 97
    assert got.sort_by(key).select(columns).to_pylist() == (
        expected.sort_by(key).select(columns).to_pylist()
    )
    # (the stage joins such small batches again before decoding, decode.COALESCE_RECORDS;
    # that each output batch restates its tables' schemas is test_changelog's to show)
    with_schema = got.filter(pa.compute.is_valid(got["schema"]))
    assert with_schema.num_rows >= 2


def test_bad_messages_become_dead_letters(spark) -> None:
    good = produce(
        Workload(seed=6, rows=20, tables=1),
        "canal-json",
        {"enable-tidb-extension": "true"},
        partitions=1,
    )
    from ticdc_spark.codec import Message

    bad = [
        Message(None, b"{not json", topic="cdc", partition=0, offset=1000),
        Message(
            None,
            b'{"type":"INSERT","isDdl":false,"data":[{"a":1}],"mysqlType":{"a":"int"}}',
            topic="cdc",
            partition=0,
            offset=1001,
        ),
    ]
    frame = _kafka_frame(spark, good + bad)
    out = decode(frame, "canal-json", {"enable-tidb-extension": "true"})
    letters = dead_letters(out).toArrow().sort_by("offset").to_pylist()
    assert [(d["topic"], d["partition"], d["offset"]) for d in letters] == [
        ("cdc", 0, 1000),
        ("cdc", 0, 1001),
    ]
    assert "not valid JSON" in letters[0]["error"] and letters[0]["value"] == b"{not json"
    assert "strings or null" in letters[1]["error"]
    assert changes(out).count() == len(
        changelog(good, "canal-json", {"enable-tidb-extension": "true"})
    )


def test_fail_mode_stops_on_the_first_bad_message(spark) -> None:
    from ticdc_spark.codec import Message

    frame = _kafka_frame(spark, [Message(None, b"nope", topic="t", partition=1, offset=7)])
    with pytest.raises(Exception, match="t/1@7"):
        decode(frame, "canal-json", on_error="fail").collect()
