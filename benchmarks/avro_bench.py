"""Avro throughput beside fastavro's own reader, and the Spark decode stage beside a naive UDF.

Part 1 (one process): the same Avro value bodies decoded by ``fastavro.schemaless_reader``
(the floor: the bare Avro binary to Python dicts, no framing, no registry, no MySQL values)
and by this project's Avro decoder: into events (``decode``), into the changelog one record
at a time (``decode_into``), and by the columnar Arrow batch path the Spark stage runs
(``decode_arrow_batch``, when the decoder has one: the script also measures older code), fed
batches of the size the Spark stage gets (``session.ARROW_BATCH_CONF``).  ``ratio`` is floor
time / decoder time (1.0: the protocol logic is free).  Times are CPU seconds of this
process (``time.process_time``, pyarrow's threads included): on a shared machine the wall
clock measures the neighbours as much as the code.

Part 2 (``--spark``, local[2]): over the same cached DataFrame of Kafka records, a naive
per-row Python UDF doing the same with fastavro (unframe, look the schema up once per worker,
``schemaless_reader``, the changelog fields as a struct), this project's ``decode()`` stage,
and the transfer floor (pipeline_bench.py's: the records moved into the Python workers and
a changelog of the same rows moved back, the decoding left out).  Schemas come from a
Confluent-compatible registry served over HTTP by this process (the workers are other
processes).

    python benchmarks/avro_bench.py [--rows 20000] [--repeat 3] [--spark --messages 200000]
"""

from __future__ import annotations

import argparse
import gc
import io
import time
from collections.abc import Callable
from typing import Any

import orjson
from fastavro import parse_schema, schemaless_reader

from pipeline_bench import timed, transfer_floor  # (the transfer floor, shared)
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.avro.registry import registry
from ticdc_spark.codec.base import ArrowBatchDecoder
from ticdc_spark.model import RowChange, RowKind
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.spark.session import ARROW_BATCH_CONF
from ticdc_spark.testing.workload import Workload

OPTIONS = {"enable-tidb-extension": "true"}
# The records per Arrow batch the Spark stage's Python workers get.
BATCH = int(ARROW_BATCH_CONF["spark.sql.execution.arrow.maxRecordsPerBatch"])


def avro_messages(url: str, count: int, table: str) -> list[Message]:
    """``count`` INSERT/UPDATE messages of one workload table (``sbtest`` or ``alltypes``)."""
    workload = Workload(seed=7, rows=count * 3, tables=2)
    rows = [
        e
        for e in workload.events()
        if isinstance(e, RowChange) and e.table.startswith(table) and e.kind is not RowKind.DELETE
    ][:count]
    messages = make_encoder("avro", {**OPTIONS, "schema-registry": url}).encode(rows)
    for offset, message in enumerate(messages):
        message.topic, message.partition, message.offset = "bench", offset % 2, offset
    return messages


def best(repeat: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        started = time.process_time()
        run()
        times.append(time.process_time() - started)
    return min(times)


def codec(url: str, rows: int, repeat: int) -> None:
    print(f"\nAvro decode, {rows:,} messages per table, best of {repeat}, CPU seconds")
    print(f"{'table':<10} {'decoder':<26} {'seconds':>8} {'msgs/s':>10} {'ratio':>6}")
    for table in ("sbtest", "alltypes"):
        messages = avro_messages(url, rows, table)
        client = registry(url)
        ids = {int.from_bytes(m.value[1:5], "big") for m in messages if m.value}
        schemas = {i: parse_schema(orjson.loads(client.schema_text(i))) for i in ids}
        bodies = [(schemas[int.from_bytes(m.value[1:5], "big")], m.value[5:]) for m in messages]
        decoder = make_decoder("avro", {**OPTIONS, "schema-registry": url})
        for name, seconds, base in _timings(messages, bodies, decoder, repeat):
            print(
                f"{table:<10} {name:<26} {seconds:>8.3f} {len(messages) / seconds:>10,.0f}"
                f" {base / seconds:>6.2f}"
            )


def _timings(
    messages: list[Message], bodies: list[tuple[Any, bytes]], decoder: Any, repeat: int
) -> list[tuple[str, float, float]]:
    """(what, seconds, floor seconds) for fastavro alone and the decoder's two paths."""

    def floor() -> None:
        for schema, body in bodies:
            schemaless_reader(io.BytesIO(body), schema, None)

    def events() -> None:
        for message in messages:
            decoder.decode(message)

    def changelog() -> None:
        sink = ChangelogBuilder()
        for message in messages:
            decoder.decode_into(message, sink)
        sink.to_batch()

    def arrow_batch() -> None:
        for start in range(0, len(messages), BATCH):
            sink = ChangelogBuilder()
            careful = CarefulPath(messages[start : start + BATCH], decoder, sink)
            decoder.decode_arrow_batch(records.slice(start, BATCH), careful, sink)

    records = kafka_batch(messages)
    base = best(repeat, floor)
    timings = [
        ("fastavro schemaless_reader", base, base),
        ("decode() to events", best(repeat, events), base),
        ("decode_into the changelog", best(repeat, changelog), base),
    ]
    if isinstance(decoder, ArrowBatchDecoder):  # (the code before it had none)
        timings.append(("decode_arrow_batch", best(repeat, arrow_batch), base))
    return timings


class CarefulPath:
    """The Spark stage's ``careful(i)``: record ``i`` through the one decode path."""

    def __init__(self, messages: list[Message], decoder: Any, sink: ChangelogBuilder) -> None:
        self.messages, self.decoder, self.sink = messages, decoder, sink

    def __call__(self, i: int) -> None:
        self.decoder.decode_into(self.messages[i], self.sink)


# -- the Spark decode stage ----------------------------------------------------------------------


def kafka_batch(messages: list[Message]) -> Any:
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([m.key for m in messages], pa.binary()),
            "value": pa.array([m.value for m in messages], pa.binary()),
            "topic": pa.array([m.topic for m in messages]),
            "partition": pa.array([m.partition for m in messages], pa.int32()),
            "offset": pa.array([m.offset for m in messages], pa.int64()),
        }
    )


def kafka_frame(spark: Any, messages: list[Message]) -> Any:
    import pyarrow as pa

    table = pa.Table.from_batches([kafka_batch(messages)])
    return spark.createDataFrame(table).repartition(2).cache()


def naive(df: Any, url: str) -> Any:
    from pyspark.sql import functions as F

    out = "struct<op:string,database:string,table:string,commit_ts:bigint,after:map<string,string>>"
    schemas: dict[int, Any] = {}

    @F.udf(out, useArrow=False)  # the classic pickled row-at-a-time UDF
    def parse(value: bytes) -> Any:
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in schemas:
            text = registry(url).schema_text(schema_id)
            schemas[schema_id] = (parse_schema(orjson.loads(text)), orjson.loads(text))
        parsed, record = schemas[schema_id]
        datum = schemaless_reader(io.BytesIO(value[5:]), parsed, None)
        op = "UPDATE" if datum.pop("_tidb_op") == "u" else "INSERT"
        ts = datum.pop("_tidb_commit_ts")
        datum.pop("_tidb_commit_physical_time")
        after = {k: None if v is None else str(v) for k, v in datum.items()}
        database = record["namespace"].partition(".")[2]
        return (op, database, record["name"], ts, after)

    return df.select(parse("value").alias("c")).select("c.*")


def ours(df: Any, url: str) -> Any:
    from ticdc_spark.spark.decode import decode

    return decode(df, "avro", {**OPTIONS, "schema-registry": url})


def floor(df: Any, url: str) -> Any:
    return transfer_floor(df, "avro", {**OPTIONS, "schema-registry": url})


def decode_stage(url: str, count: int, rounds: int) -> None:
    from ticdc_spark.spark.session import local_session

    spark = local_session("avro-bench")
    spark.sparkContext.setLogLevel("ERROR")
    messages = avro_messages(url, count // 2, "sbtest") + avro_messages(url, count // 2, "alltypes")
    df = kafka_frame(spark, messages)
    df.count()
    contenders = {
        "naive fastavro UDF": naive,
        "ticdc decode": ours,
        "transfer floor": floor,
    }
    results: dict[str, float] = {}
    for _ in range(rounds):  # interleaved rounds: the machine's noise hits all alike
        for name, build in contenders.items():
            seconds = timed(build(df, url))
            results[name] = min(results.get(name, float("inf")), seconds)
    print(f"\nAvro decode stage, {len(messages):,} messages, local[2], best of {rounds}")
    print(f"{'approach':<20} {'seconds':>8} {'msgs/s':>10} {'ticdc is':>9} {'floor is':>9}")
    for name, seconds in results.items():
        print(
            f"{name:<20} {seconds:>8.2f} {len(messages) / seconds:>10,.0f}"
            f" {seconds / results['ticdc decode']:>8.2f}x"
            f" {seconds / results['transfer floor']:>8.2f}x"
        )


def main() -> None:
    from ticdc_spark.testing.registry_server import RegistryServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spark", action="store_true", help="also the Spark decode stage")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with RegistryServer() as server:
        codec(server.url, args.rows, args.repeat)
        if args.spark:
            decode_stage(server.url, args.messages, args.rounds)


if __name__ == "__main__":
    main()
