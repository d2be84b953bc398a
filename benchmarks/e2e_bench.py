"""End to end, broker to Delta: throughput and commit-to-apply latency, of both Kafka
sources (ours, ``ticdc``, and Spark's spark-sql-kafka, ``spark``) and both apply engines
(``spark``: Delta MERGE by Spark; ``embedded``: delta-rs on the driver) side by side.

Uses the Apache Kafka broker the tests use (tests/kafka_broker.py: one KRaft node on
loopback, from Maven Central's jars).

* Throughput: a workload of N changes is produced first, then replicated with the streaming
  pipeline (consistent mode, micro-batches of ``maxOffsetsPerTrigger``); rows/s = changes
  applied / wall time of the replication.
* Latency: a producer thread sends changes at a steady rate with commit timestamps from the
  wall clock while the pipeline runs with a 1 s trigger; latency = the time a change's
  micro-batch finished applying - the physical time of its commit ts.

    python benchmarks/e2e_bench.py --rows 1000000 --protocol canal-json open-protocol
    python benchmarks/e2e_bench.py --kafka-source ticdc --engine spark embedded

Each protocol's workload is produced once; each source replicates it into its own table.
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

from kafka_broker import KafkaCluster
from ticdc_spark.dispatch import TopicRouter
from ticdc_spark.spark.pipeline import PipelineConfig, run, start
from ticdc_spark.spark.sources import read_source
from ticdc_spark.testing.produce import produce_workload
from ticdc_spark.testing.workload import Workload

PROTOCOL_OPTIONS = {"canal-json": {"enable-tidb-extension": "true"}, "open-protocol": {}}


@dataclass(frozen=True)
class Bench:
    """What one run measures: the protocol and the size of its micro-batches."""

    protocol: str = "canal-json"
    kafka_source: str = "ticdc"  # or "spark"
    per_batch: int = 0  # Kafka records per micro-batch (0: about 100,000 changes)
    tables: int = 2  # 1: the sysbench-like table only; 2: and the all-types table (heavier)
    engine: str = "spark"  # what applies the changes (a policy.Engine)

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
        kafka_source=bench.kafka_source,
        engine=bench.engine,
    )


def produce_backlog(bench: Bench, bootstrap: str, rows: int) -> list[str]:
    """The throughput run's workload, produced first; returns its topics."""
    workload = Workload(seed=9, rows=rows, tables=bench.tables, watermark_every=20)
    expression = f"bench_{bench.protocol.replace('-', '_')}_{{schema}}"
    print(f"producing {rows:,} {bench.protocol} changes to the broker ...", flush=True)
    started = time.perf_counter()
    produce_workload(
        workload,
        bench.protocol,
        bench.options,
        f"kafka://{bootstrap}",
        topic=expression,
        partitions=2,
    )
    print(f"  produced in {time.perf_counter() - started:.0f}s", flush=True)
    return _topics(workload, expression)


def throughput(spark: Any, bench: Bench, bootstrap: str, topics: list[str], root: Path) -> float:
    """Replicate the backlog of ``topics`` as ``replicate --trigger once``: rows/s."""
    # About 100,000 changes per micro-batch: Canal-JSON sends one per message, Open Protocol
    # batches up to 16.
    per_batch = bench.per_batch or (100_000 if bench.protocol == "canal-json" else 6_250)
    config = _config(bench, bootstrap, topics, root, "once", per_batch)
    reports: list[Any] = []
    started = time.perf_counter()
    run(spark, config, on_batch=reports.append)
    seconds = time.perf_counter() - started
    applied = sum(r.rows_in for r in reports)
    rate = applied / seconds
    print(
        f"  {bench.kafka_source}: {applied:,} changes in {seconds:.1f}s, {rate:,.0f} rows/s, "
        f"{len(reports)} micro-batches (read+decode {sum(r.read_seconds for r in reports):.1f}s"
        f", apply {sum(r.seconds for r in reports):.1f}s)",
        flush=True,
    )
    return rate


def latency(
    spark: Any, bench: Bench, bootstrap: str, rate: int, seconds: int, root: Path
) -> tuple[float, float] | None:
    """Changes produced at ``rate`` for ``seconds`` while the pipeline runs on a 1 s
    trigger: p50 and p99 of commit-to-applied, in seconds."""
    import numpy as np

    workload = Workload(
        seed=10,
        rows=rate * seconds,
        tables=bench.tables,
        watermark_every=4,
        live_clock=True,
        txn_size=4,
    )
    expression = (
        f"live_{bench.kafka_source}_{bench.engine}_{bench.protocol.replace('-', '_')}_{{schema}}"
    )
    config = _config(bench, bootstrap, _topics(workload, expression), root, "1", 1_000_000)
    finished: list[tuple[float, Any]] = []

    def on_batch(report: Any) -> None:
        now = time.time()
        finished.extend((now, ts) for ts in report.commit_ts)

    producer = threading.Thread(
        target=_paced_producer, args=(bench, workload, bootstrap, expression, rate)
    )
    producer.start()
    frame = read_source(spark, config.source, config.source_options, None, bench.kafka_source)
    query = start(spark, frame, config, on_batch=on_batch)
    producer.join()
    time.sleep(8)  # let the last watermarks through
    query.stop()
    lat = (
        np.concatenate([now * 1000 - (ts.to_numpy() >> 18) for now, ts in finished])
        if finished
        else np.array([])
    )
    if not len(lat):
        print(f"  {bench.kafka_source}: no rows applied during the latency run")
        return None
    p50, p99 = np.percentile(lat, 50) / 1000, np.percentile(lat, 99) / 1000
    print(f"  {bench.kafka_source}: latency p50 {p50:.2f}s, p99 {p99:.2f}s", flush=True)
    return float(p50), float(p99)


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
        events=paced(),
    )


def end_to_end(
    spark: Any, benches: list[Bench], rows: int, rate: int = 2000, seconds: int = 30
) -> None:
    """Every bench on one broker; a table of the sources side by side at the end."""
    broker = KafkaCluster()
    results: dict[tuple[str, str, str], list[str]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            backlogs: dict[str, list[str]] = {}
            for bench in benches:
                if bench.protocol not in backlogs:
                    backlogs[bench.protocol] = produce_backlog(bench, broker.bootstrap, rows)
                root = Path(tmp) / bench.protocol / bench.kafka_source / bench.engine
                rate_in = throughput(spark, bench, broker.bootstrap, backlogs[bench.protocol], root)
                cells = [f"{rate_in:,.0f}"]
                found = None
                if seconds:
                    found = latency(spark, bench, broker.bootstrap, rate, seconds, root / "live")
                cells += [f"{v:.2f}" for v in found] if found else ["-", "-"]
                results[(bench.protocol, bench.kafka_source, bench.engine)] = cells
    finally:
        broker.stop()
    print(
        f"\n{rows:,} changes, broker to Delta, local[2]; latency at ~{rate:,} rows/s, 1 s trigger"
    )
    first = next(iter(results))
    print(
        f"{'protocol':<14} {'source':<7} {'engine':<9} {'rows/s':>10} {'p50 s':>7} {'p99 s':>7}"
        f"  vs {first[1]}/{first[2]}"
    )
    for (protocol, source, engine), cells in results.items():
        base = float(results[(protocol, *first[1:])][0].replace(",", ""))
        ratio = f"{float(cells[0].replace(',', '')) / base:.2f}x"
        print(
            f"{protocol:<14} {source:<7} {engine:<9} {cells[0]:>10} "
            + " ".join(f"{c:>7}" for c in cells[1:])
            + f"  {ratio}"
        )


def main() -> None:
    from ticdc_spark.spark.session import local_session

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=2000, help="rows/s in the latency run")
    parser.add_argument(
        "--seconds", type=int, default=30, help="length of the latency run (0: no latency run)"
    )
    parser.add_argument(
        "--protocol", nargs="+", default=[Bench.protocol], choices=sorted(PROTOCOL_OPTIONS)
    )
    parser.add_argument(
        "--kafka-source", nargs="+", default=["ticdc", "spark"], choices=("ticdc", "spark")
    )
    parser.add_argument("--per-batch", type=int, default=0, help="Kafka records per batch")
    parser.add_argument(
        "--engine", nargs="+", default=["spark"], choices=("spark", "embedded"), help="apply"
    )
    parser.add_argument(
        "--tables", type=int, default=2, choices=(1, 2), help="1: sysbench-like only; 2: mixed"
    )
    args = parser.parse_args()
    benches = [
        Bench(protocol, source, args.per_batch, args.tables, engine)
        for protocol in args.protocol
        for source in args.kafka_source
        for engine in args.engine
    ]
    spark = local_session("e2e-bench", features=["kafka", "delta"])
    spark.sparkContext.setLogLevel("ERROR")
    end_to_end(spark, benches, args.rows, args.rate, args.seconds)


if __name__ == "__main__":
    main()
