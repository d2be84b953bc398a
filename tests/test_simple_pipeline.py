"""Simple through the apply stage (no Spark): a consumer that starts mid-stream holds rows
until their schema comes, on another partition and in a later micro-batch, with the held
rows in the checkpointed state; tables come from ``tableSchema``; the bounds stop the job
naming what it waits for; a workload met mid-stream gives the tables of a consumer that
knew every schema from the start."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import simple_stream
from pipeline_helpers import changelog, produce, run_batches
from restart_helpers import assert_same_tables
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import Bootstrap, DDLEvent
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.sinks.base import live
from ticdc_spark.sinks.delta import DeltaSink
from ticdc_spark.testing.workload import Workload

ENCODINGS = ["json", "avro"]


def _options(encoding: str, **more: str) -> dict[str, str]:
    return {**simple_stream.OPTIONS, "encoding-format": encoding, **more}


def _live(sink: DeltaSink, table: str) -> list[dict]:
    return sorted(live(sink.read(("shop", table))).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_rows_before_their_schema_wait_in_the_state_and_apply_once_it_comes(
    encoding: str, tmp_path: Path
) -> None:
    sink = DeltaSink(tmp_path / "lake")
    batches = simple_stream.batches(encoding)
    applier = run_batches(batches[:1], "simple", _options(encoding), sink, tmp_path / "ck")
    first = applier.reports[0]
    assert (first.rows_in, first.rows_applied, first.held, first.awaiting_schema) == (5, 0, 5, 5)
    assert "5 held (5 for their schema)" in first.line()
    assert not sink.tables()
    # the held rows are wire rows in the checkpointed state, with the messages themselves
    held = StateStore(tmp_path / "ck").load(1).held
    assert held.num_rows == 5 and held["value"].null_count == 0

    applier = run_batches(
        batches[1:2], "simple", _options(encoding), sink, tmp_path / "ck", start=1
    )
    second = applier.reports[0]
    assert (second.rows_applied, second.held) == (3, 1)  # orders' rows; users' still waits
    assert _live(sink, "orders") == [
        {"id": 1, "amount": Decimal("9.99"), "note": "upd"},
        {"id": 2, "amount": Decimal("2.00"), "note": None},
        {"id": 3, "amount": Decimal("3.25"), "note": "x"},
    ]

    run_batches(batches[2:], "simple", _options(encoding), sink, tmp_path / "ck", start=2)
    assert _live(sink, "orders") == simple_stream.ORDERS
    assert _live(sink, "users") == simple_stream.USERS_ROWS
    state = StateStore(tmp_path / "ck").load(4)
    assert state.held is None
    # the catalog holds tableSchema's whole schema: types, key, nullability, defaults
    orders = state.tables[("shop", "orders")]
    assert orders == simple_stream.ORDERS_V2
    assert [(c.nullable, c.default) for c in orders.columns] == [
        (False, None),
        (False, None),
        (True, "none"),
        (False, "5"),
    ]
    fields = {f.name: f.type for f in sink.read(("shop", "orders")).schema}
    assert fields["amount"] == pa.decimal128(10, 2) and fields["qty"] == pa.int32()


def test_a_table_created_from_a_bootstrap_has_its_decimal_precision(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "lake")
    batches = simple_stream.batches()
    run_batches([batches[0] + batches[1]], "simple", _options("json"), sink, tmp_path / "ck")
    assert {f.name: f.type for f in sink.read(("shop", "orders")).schema}["amount"] == (
        pa.decimal128(10, 2)
    )


def test_past_the_bounds_the_job_stops_naming_the_table_and_version(tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "lake")
    options = _options("json", **{"max-held-rows": "3"})
    with pytest.raises(ConfigError) as caught:
        run_batches(simple_stream.batches()[:1], "simple", options, sink, tmp_path / "ck")
    message = str(caught.value)
    assert "shop.orders" in message and "schema version 100" in message
    assert "max-held-rows=3" in message and "--option max-held-rows=N" in message


def test_a_row_that_does_not_fit_its_schema_is_a_dead_letter(tmp_path: Path) -> None:
    import orjson

    first = simple_stream.batches()[0]
    bad = orjson.loads(first[0].value)
    bad["data"]["nope"] = "1"  # a column the schema does not have
    first[0] = Message(None, orjson.dumps(bad), topic=first[0].topic, partition=1, offset=0)
    sink = DeltaSink(tmp_path / "lake")
    batches = [first, *simple_stream.batches()[1:]]
    applier = run_batches(batches, "simple", _options("json"), sink, tmp_path / "ck")
    assert sum(r.dead_letters for r in applier.reports) == 1
    (path,) = (tmp_path / "ck" / "ticdc" / "dead-letters").glob("*.jsonl")
    letter = orjson.loads(path.read_bytes())
    assert (letter["partition"], letter["offset"]) == (1, 0)
    assert "'nope' is not in the table schema" in letter["error"] and letter["value"]
    assert [r["id"] for r in _live(sink, "orders")] == [1, 3, 4]


def test_the_decode_stage_finishes_rows_whose_schema_its_task_met() -> None:
    messages = [m for batch in simple_stream.batches() for m in batch]
    table = changelog(messages, "simple", _options("json"))
    rows = table.filter(pa.compute.equal(table["kind"], "ROW"))
    wire = rows["value"].is_valid().to_pylist()
    # partition 1's task met no schema for its first five rows; the users row after the
    # BOOTSTRAP that partition 0 carried still waits (another task), orders v2 rows do not
    assert wire == [True] * 5 + [False, False, True, True]


# -- a workload met mid-stream ------------------------------------------------------------


def _known_up_front(prefix: list[Message], encoding: str, topic: str) -> list[Message]:
    """BOOTSTRAP messages of every schema the messages a late consumer missed brought (on
    one of the stream's partitions, ahead of its records)."""
    options = {"encoding-format": encoding}
    decoder = make_decoder("simple", options)
    schemas = {}
    for message in prefix:
        for event in decoder.decode(message):
            brought = []
            if isinstance(event, Bootstrap):
                brought = [event.schema]
            elif isinstance(event, DDLEvent):
                brought = [s for s in (event.schema, event.schema_before) if s is not None]
            for schema in brought:
                schemas[(schema.database, schema.table, schema.version)] = schema
    encoder = make_encoder("simple", {**options, **simple_stream.OPTIONS})
    out = encoder.encode([Bootstrap(s) for s in schemas.values()])
    for message in out:
        message.topic, message.partition, message.offset = topic, 0, -1
    return out


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("cut", [0.3, 0.6])
def test_a_workload_met_mid_stream(encoding: str, cut: float, tmp_path: Path) -> None:
    """Started mid-stream (every partition from a later offset): the same tables as a
    consumer given every schema at once, whatever micro-batches the rows wait across."""
    options = {"encoding-format": encoding, "send-bootstrap-in-msg-count": "30"}
    workload = Workload(seed=7, rows=500, tables=3, ddl_every=9)
    messages = produce(workload, "simple", options, partitions=3)
    late, missed = [], []
    for partition in range(3):
        mine = [m for m in messages if m.partition == partition]
        at = int(len(mine) * cut)
        missed += mine[:at]
        late += mine[at:]
    late.sort(key=lambda m: (m.timestamp or 0, m.partition, m.offset))
    batches = [late[i : i + 37] for i in range(0, len(late), 37)]
    mid = DeltaSink(tmp_path / "mid")
    applier = run_batches(batches, "simple", options, mid, tmp_path / "ck-mid")
    assert max(r.held for r in applier.reports) > 0
    up_front = [_known_up_front(missed, encoding, late[0].topic) + batches[0], *batches[1:]]
    known = DeltaSink(tmp_path / "known")
    run_batches(up_front, "simple", options, known, tmp_path / "ck-known")
    assert known.tables() and sum(r.rows_applied for r in applier.reports) > 0
    assert_same_tables(mid, known)
    state = StateStore(tmp_path / "ck-mid").load(len(batches))
    waiting = 0 if state.held is None else state.held["value"].is_valid().to_pylist().count(True)
    assert waiting == 0


def test_a_tables_later_changes_wait_behind_a_row_still_waiting(tmp_path: Path) -> None:
    """A key's changes apply in order, and a DDL after them: while a row of a table waits
    for its schema, the table's later changes wait with it (other tables go on)."""
    from dataclasses import replace

    from ticdc_spark.model import RowChange, RowKind

    users_v60 = replace(simple_stream.USERS, version=60)
    encoder = make_encoder("simple", _options("json"))
    ts = simple_stream.ts

    def placed(partition: int, offset: int, event: object) -> Message:
        (message,) = encoder.encode([event])
        message.topic, message.partition, message.offset = "cdc_shop", partition, offset
        return message

    waiting = placed(
        1, 0, RowChange(RowKind.INSERT, simple_stream.USERS, ts(2), None, {"id": 2, "name": "a"})
    )
    first = [
        waiting,
        placed(0, 0, Bootstrap(users_v60)),
        placed(0, 1, RowChange(RowKind.INSERT, users_v60, ts(3), None, {"id": 1, "name": "b"})),
        placed(0, 2, Bootstrap(simple_stream.ORDERS_V1)),
        placed(
            0,
            3,
            RowChange(
                RowKind.INSERT,
                simple_stream.ORDERS_V1,
                ts(3),
                None,
                simple_stream._order(9, "1.00"),
            ),
        ),
    ]
    sink = DeltaSink(tmp_path / "lake")
    applier = run_batches([first], "simple", _options("json"), sink, tmp_path / "ck", "eventual")
    assert (applier.reports[0].rows_applied, applier.reports[0].held) == (1, 2)
    assert sink.tables() == [("shop", "orders")]
    later = [placed(0, 4, Bootstrap(simple_stream.USERS))]
    run_batches([later], "simple", _options("json"), sink, tmp_path / "ck", "eventual", start=1)
    assert _live(sink, "users") == [{"id": 1, "name": "b"}, {"id": 2, "name": "a"}]


def test_ddl_that_carry_their_schema_rename_truncate_and_keep_renamed_values(
    tmp_path: Path,
) -> None:
    """RENAME COLUMN keeps the values, RENAME TABLE moves the table, TRUNCATE empties it:
    the carried tableSchema sets the schema, the statement says what happened."""
    from dataclasses import replace

    from ticdc_spark.model import Column, DDLType, RowChange, RowKind, Watermark

    ts, order = simple_stream.ts, simple_stream._order
    v1 = simple_stream.ORDERS_V1
    renamed_column = replace(
        v1, columns=(*v1.columns[:2], Column("memo", v1.columns[2].type)), version=300
    ).with_derived_flags()
    moved = replace(renamed_column, table="archive").with_derived_flags()
    truncated = replace(moved, table_id=9, version=400).with_derived_flags()

    def ddl(kind: DDLType, sql: str, at: int, after: object, before: object) -> DDLEvent:
        return DDLEvent(kind, sql, ts(at), "shop", after.table, after, before)  # type: ignore[attr-defined]

    events = [
        ddl(
            DDLType.CREATE_TABLE, "CREATE TABLE `shop`.`orders` (`id` INT PRIMARY KEY)", 1, v1, None
        ),
        RowChange(RowKind.INSERT, v1, ts(2), None, order(1, "1.00", "kept")),
        ddl(
            DDLType.MODIFY_COLUMN,
            "ALTER TABLE `shop`.`orders` RENAME COLUMN `note` TO `memo`",
            3,
            renamed_column,
            v1,
        ),
        ddl(
            DDLType.RENAME_TABLE,
            "RENAME TABLE `shop`.`orders` TO `shop`.`archive`",
            4,
            moved,
            renamed_column,
        ),
        RowChange(
            RowKind.INSERT, moved, ts(5), None, {"id": 2, "amount": Decimal("2.00"), "memo": "m"}
        ),
        Watermark(ts(6)),
    ]
    messages = make_encoder("simple", _options("avro")).encode(events)
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "cdc_shop", 0, offset
    sink = DeltaSink(tmp_path / "lake")
    run_batches([messages], "simple", _options("avro"), sink, tmp_path / "ck")
    assert sink.tables() == [("shop", "archive")]
    assert _live(sink, "archive") == [
        {"id": 1, "amount": Decimal("1.00"), "memo": "kept"},
        {"id": 2, "amount": Decimal("2.00"), "memo": "m"},
    ]
    more = make_encoder("simple", _options("avro")).encode(
        [
            ddl(DDLType.TRUNCATE_TABLE, "TRUNCATE TABLE `shop`.`archive`", 7, truncated, moved),
            RowChange(
                RowKind.INSERT,
                truncated,
                ts(8),
                None,
                {"id": 3, "amount": Decimal("3.00"), "memo": None},
            ),
            Watermark(ts(9)),
        ]
    )
    for offset, message in enumerate(more, len(messages)):
        message.topic, message.partition, message.offset = "cdc_shop", 0, offset
    run_batches([more], "simple", _options("avro"), sink, tmp_path / "ck", start=1)
    assert _live(sink, "archive") == [{"id": 3, "amount": Decimal("3.00"), "memo": None}]
    state = StateStore(tmp_path / "ck").load(2)
    assert state.tables[("shop", "archive")] == truncated
    assert ("shop", "orders") not in state.tables


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_state_keeps_each_schema_exactly_as_the_decode_stage_reads_it(encoding: str) -> None:
    """A row finished on the driver must equal one the stage decoded: the versions in the
    state read back to the very schema a decoder reads from the message (every type)."""
    from ticdc_spark.codec import make_finisher

    options = {"encoding-format": encoding}
    schemas = Workload(seed=2, rows=10, tables=4).table_schemas()
    messages = make_encoder("simple", options).encode([Bootstrap(s) for s in schemas])
    decoder = make_decoder("simple", options)
    read = [e.schema for m in messages for e in decoder.decode(m)]
    finisher = make_finisher("simple", options)
    versions: dict = {}
    finisher.learn([m.value for m in messages], versions)
    assert [finisher.schema(text) for text in versions.values()] == read
