"""What a Simple row costs when its schema is not met in its own Spark task.

A Simple row whose schema version the decode stage's task has met is decoded there (the
stage's normal path); one whose schema came on another partition or in an earlier
micro-batch leaves the stage as a *wire row* and the consumer (the driver) finishes it from
the schema versions in its state.  For one micro-batch of sysbench-like and all-types rows,
in JSON and Avro, this times side by side:

* stage: decoding the batch in the stage with the schemas known (a BOOTSTRAP first), and
  with none known (every row a wire row);
* plan: planning the batch on the driver (eventual mode), from the first changelog, and
  from the second with the versions in the state (every row finished there).

Run it as::

    python benchmarks/simple_pipeline_bench.py [--rows 20000] [--repeat 3]

The machine is shared: compare the ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ticdc_spark.codec import Message, make_decoder, make_encoder, make_finisher
from ticdc_spark.model import Bootstrap, RowChange
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.pipeline.planner import Planner
from ticdc_spark.pipeline.state import ConsumerState
from ticdc_spark.testing.workload import Workload

NO_BOOTSTRAPS = {"send-bootstrap-interval-in-sec": "0", "send-bootstrap-in-msg-count": "0"}


def messages(encoding: str, rows: int) -> tuple[list[Message], list[Message]]:
    """The bootstraps of the workload's tables, and its rows, as Simple messages."""
    workload = Workload(seed=5, rows=rows, tables=2, ddl_every=0)
    changes = [e for e in workload.events() if isinstance(e, RowChange)]
    encoder = make_encoder("simple", {**NO_BOOTSTRAPS, "encoding-format": encoding})
    bootstraps = encoder.encode([Bootstrap(s) for s in workload.table_schemas()])
    out = encoder.encode(changes)
    for offset, message in enumerate(bootstraps + out):
        message.topic, message.partition, message.offset = "cdc", 0, offset
    return bootstraps, out


def stage(encoding: str, batch: list[Message]) -> Any:
    """The batch through one decode-stage task."""
    decoder = make_decoder("simple", {"encoding-format": encoding}, stage=True)
    builder = ChangelogBuilder()
    for message in batch:
        decoder.decode_into(message, builder)
    return pa.Table.from_batches([builder.to_batch()])


def plan(encoding: str, changelog: Any, state: ConsumerState | None) -> Any:
    finisher = make_finisher("simple", {"encoding-format": encoding})
    copy = ConsumerState(versions=dict(state.versions)) if state else ConsumerState()
    simple = Capabilities(finisher=finisher)  # (rows define the schema: a finisher)
    return Planner("eventual", copy, capabilities=simple).plan(changelog)


def best(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.rows} row changes, best of {args.repeat}; seconds (rows/s)")
    print(f"{'encoding':9} {'step':6} {'schema in task':>22} {'wire rows':>22} {'ratio':>6}")
    for encoding in ("json", "avro"):
        measure(encoding, args.rows, args.repeat)


def measure(encoding: str, count: int, repeat: int) -> None:
    bootstraps, rows = messages(encoding, count)
    known = stage(encoding, bootstraps + rows)
    wire = stage(encoding, rows)
    assert wire["value"].null_count == 0
    state = ConsumerState()
    finisher = make_finisher("simple", {"encoding-format": encoding})
    Planner("eventual", state, capabilities=Capabilities(finisher=finisher)).plan(
        stage(encoding, bootstraps)
    )
    timed = [
        ("stage", lambda: stage(encoding, bootstraps + rows), lambda: stage(encoding, rows)),
        ("plan", lambda: plan(encoding, known, None), lambda: plan(encoding, wire, state)),
    ]
    for name, in_task, finished in timed:
        a, b = best(repeat, in_task), best(repeat, finished)
        print(
            f"{encoding:9} {name:6} {a:8.3f} ({len(rows) / a:9,.0f}) "
            f"{b:8.3f} ({len(rows) / b:9,.0f}) {b / a:6.2f}"
        )


if __name__ == "__main__":
    main()
