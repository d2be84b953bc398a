"""Test helpers: run a workload through encode -> decode -> plan -> sink without Spark."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.io.producer import Producer
from ticdc_spark.pipeline.apply import Applier
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.pipeline.checkpoint import StateStore
from ticdc_spark.sinks.base import TableSink, live
from ticdc_spark.testing.verify import compare_tables
from ticdc_spark.testing.workload import Workload


class ListOutput:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    def write(self, messages: list[Message]) -> None:
        self.messages += messages

    def close(self) -> None:
        pass


def produce(
    workload: Workload,
    protocol: str,
    options: dict[str, str],
    partitions: int = 3,
    topic: str = "cdc_{schema}",
    dispatcher: str = "index-value",
) -> list[Message]:
    output = ListOutput()
    producer = Producer(
        make_encoder(protocol, options),
        output,
        router=TopicRouter(topic),
        dispatcher=make_dispatcher(dispatcher),
        partitions=partitions,
    )
    producer.send_all(workload.events(), flush_every=64)
    producer.close()
    return output.messages


def interleave(messages: list[Message], seed: int, chunk: int) -> Iterator[list[Message]]:
    """Deliver per-partition streams in order, interleaved randomly, in micro-batches."""
    rng = random.Random(seed)
    queues: dict[tuple[str, int], list[Message]] = {}
    for m in messages:
        queues.setdefault((m.topic, m.partition or 0), []).append(m)
    batch: list[Message] = []
    while queues:
        slot = rng.choice(sorted(queues))
        take = rng.randint(1, 8)
        batch += queues[slot][:take]
        queues[slot] = queues[slot][take:]
        if not queues[slot]:
            del queues[slot]
        if len(batch) >= chunk:
            yield batch
            batch = []
    if batch:
        yield batch


def changelog(messages: list[Message], protocol: str, options: dict[str, str]) -> Any:
    """A micro-batch's changelog as the Spark decode stage makes it: each partition's
    messages by a decoder of its own (one Spark task each), none kept between batches."""
    decoders: dict[tuple[str, int], Any] = {}
    builder = ChangelogBuilder()
    for m in messages:
        slot = (m.topic, m.partition or 0)
        if slot not in decoders:
            decoders[slot] = make_decoder(protocol, options, stage=True)
        decoders[slot].decode_into(m, builder)
    import pyarrow as pa

    return pa.Table.from_batches([builder.to_batch()])


def run_batches(
    batches: list[list[Message]],
    protocol: str,
    options: dict[str, str],
    sink: TableSink,
    checkpoint: Path,
    mode: str = "consistent",
    start: int = 0,
) -> Applier:
    applier = Applier(
        sink,
        StateStore(checkpoint),
        mode=mode,
        capabilities=Capabilities.of(protocol, options),
    )
    for number, batch in enumerate(batches, start):
        applier.apply(changelog(batch, protocol, options), number)
    return applier


def assert_matches(workload: Workload, sink: TableSink) -> None:
    from ticdc_spark.normalized import image_to_text

    schemas = workload.final_schemas()
    state = workload.final_state()
    for name, schema in schemas.items():
        key = (schema.database, schema.table)
        rows = [image_to_text(schema, r) for r in state[name].values()]
        actual = live(sink.read(key)) if sink.exists(key) else None
        report = compare_tables((schema, rows), actual)
        assert report.ok, report.summary()


def canal_message(commit_ts: int, **fields: Any) -> bytes:
    """A TiCDC Canal-JSON INSERT into ``db.t`` (``id`` int key, ``v`` varchar(10)) committed
    at ``commit_ts``; ``fields`` replace the message's own."""
    import orjson

    message = {
        "id": 0,
        "database": "db",
        "table": "t",
        "pkNames": ["id"],
        "isDdl": False,
        "type": "INSERT",
        "es": 1,
        "ts": 1,
        "sql": "",
        "sqlType": {"id": 4, "v": 12},
        "mysqlType": {"id": "int", "v": "varchar(10)"},
        "old": None,
        "data": [{"id": "1", "v": "a"}],
        "_tidb": {"commitTs": commit_ts},
    }
    message.update(fields)
    return orjson.dumps(message)


def write_capture_dir(messages: list[Message], root: Path) -> Path:
    """``messages`` as one partition (offsets from 0) of a capture directory ``root/capture``."""
    from ticdc_spark.io.capture import write_capture

    source = root / "capture"
    source.mkdir()
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "cdc", 0, offset
    with open(source / "part-0000.jsonl", "wb") as out:
        write_capture(messages, out)
    return source
