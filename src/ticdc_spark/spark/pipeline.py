"""The replication pipeline on Spark Structured Streaming.

    source (Kafka or capture files) -> decode (mapInArrow) -> foreachBatch(Applier)

Offsets live in Spark's checkpoint (``CHECKPOINT/spark``); the consumer state and the sinks'
step versions make every micro-batch apply exactly once (see :mod:`ticdc_spark.pipeline.apply`).
Spark's built-in Kafka source works in place of ours: pass its DataFrame to :func:`start`.

By default a micro-batch is applied in a background thread while Spark reads and decodes the
next one (``overlap``, :mod:`ticdc_spark.spark.overlap`): ``foreachBatch`` collects the
changelog, logs it to disk (:class:`~ticdc_spark.pipeline.checkpoint.ChangelogLog`), waits
for the previous batch's apply, starts this one's and returns.  Applying is serial and in
order; a crash after Spark recorded a batch as done but before its apply finished is
repaired at the next start from the log.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import pyarrow as pa

from ticdc_spark.filter import TableFilter
from ticdc_spark.io.kafka import is_kafka_uri, redact
from ticdc_spark.pipeline.apply import Applier, BatchReport
from ticdc_spark.pipeline.capabilities import Capabilities
from ticdc_spark.pipeline.checkpoint import (
    ChangelogLog,
    StateStore,
    check_checkpoint,
    repair_spark_checkpoint,
    spark_batches,
)
from ticdc_spark.pipeline.dead_letters import DeadLetterWriter
from ticdc_spark.pipeline.failpoints import crash_point, watch_commits
from ticdc_spark.pipeline.ordering import MAX_HELD_ROWS
from ticdc_spark.pipeline.policy import Engine, Mode, OnError
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.decode import decode
from ticdc_spark.spark.jars import check_session, engine_features
from ticdc_spark.spark.overlap import Background, RunningPipeline
from ticdc_spark.spark.session import spark_session
from ticdc_spark.spark.sources import bounded_source_options, read_source, source_partitions
from ticdc_spark.spark.trigger import once_options, start_query
from ticdc_spark.storage import StorageOptions

__all__ = [
    "PipelineConfig",
    "RunningPipeline",
    "check_mode",
    "default_mode",
    "pipeline_session",
    "run",
    "start",
]

OnBatch = Callable[[BatchReport], None]


@dataclass
class PipelineConfig:
    """Everything ``ticdc-spark replicate`` takes."""

    source: str  # kafka://HOST:PORT/TOPIC[,TOPIC] or a capture directory
    protocol: str
    target: str  # delta:PATH or iceberg:CATALOG_URI#WAREHOUSE
    checkpoint: str
    mode: str = Mode.CONSISTENT  # a policy.Mode
    trigger: str = "once"  # "once" (everything available, then stop) or seconds
    options: dict[str, str] = field(default_factory=dict)  # codec options
    source_options: dict[str, str] = field(default_factory=dict)  # e.g. maxOffsetsPerTrigger
    on_error: str = OnError.DEAD_LETTER  # a policy.OnError: dead-letter or stop
    dead_letters: str | None = None
    table_filter: tuple[str, ...] = ()  # TiCDC table-filter rules (none: every table)
    track_commits: bool = False  # report applied commit ts per batch (latency measurements)
    overlap: bool = True  # apply a batch while Spark reads the next (see the module doc)
    max_held_rows: int = MAX_HELD_ROWS  # rows held back for a later batch, at most
    kafka_source: str = "ticdc"  # or "spark": Spark's own Kafka source (spark/spark_kafka.py)
    storage: StorageOptions = field(default_factory=StorageOptions.from_environment)
    engine: str = Engine.SPARK  # a policy.Engine: what applies the steps to the tables
    apply_threads: int = 0  # tables applied at once (0: the engine's default)
    master: str | None = None  # spark://HOST:PORT: the executors on that cluster (None: local)

    def __repr__(self) -> str:  # source, target and options may hold credentials
        shown = ", ".join(f"{f.name}={redact(getattr(self, f.name))!r}" for f in fields(self))
        return f"PipelineConfig({shown})"


def default_mode(protocol: str) -> str:
    """consistent, or eventual for a protocol that carries no watermarks."""
    return Capabilities.of(protocol).default_mode()


def check_mode(protocol: str, mode: str) -> None:
    """Refuse consistent mode for a protocol without watermarks, saying why."""
    Capabilities.of(protocol).check_mode(mode)


def pipeline_session(
    config: PipelineConfig, settings: dict[str, str] | None = None, app: str = "ticdc-spark"
) -> Any:
    """The session ``config`` runs on: local, or the driver here and the executors on the
    cluster at ``config.master``; with the JVM libraries its target's engine and its Kafka
    source need (resolved once, shipped by Spark to the executors)."""
    features = engine_features(config.target, config.engine)
    if is_kafka_uri(config.source) and config.kafka_source == "spark":
        features += ("kafka",)
    return spark_session(app, config.master, settings=settings, features=features)


def start(
    spark: Any, source_df: Any, config: PipelineConfig, on_batch: OnBatch | None = None
) -> RunningPipeline:
    """Start the streaming query (``awaitTermination``/``stop`` as usual)."""
    table_filter = TableFilter(config.table_filter)  # (a bad rule fails before anything starts)
    capabilities = Capabilities.of(config.protocol, config.options)
    capabilities.check_mode(config.mode)
    on_error = OnError.parse(config.on_error, (OnError.DEAD_LETTER, OnError.STOP))
    spark_checkpoint = Path(config.checkpoint) / "spark"
    repair_spark_checkpoint(spark_checkpoint)  # what a kill before the first batch leaves
    check_checkpoint(config.checkpoint)
    check_session(spark, engine_features(config.target, config.engine))
    applier = _applier(spark, config, capabilities, on_error)
    changelog = decode(
        source_df, config.protocol, config.options, on_error=on_error, table_filter=table_filter
    )
    log = ChangelogLog(applier.store.root)
    # batches a crash left logged but not applied, and states found missing or damaged
    committed = max(spark_batches(spark_checkpoint, "commits"), default=-1)
    for report in applier.recover(log, committed):
        if on_batch is not None:
            on_batch(report)
    background = Background()
    watch_commits(spark_checkpoint)  # (a test's kill point; inert by default)
    writer = (
        changelog.writeStream.foreachBatch(
            _BatchHandler(applier, log, background, config.overlap, on_batch)
        )
        .option("checkpointLocation", str(spark_checkpoint))
        .queryName("ticdc-spark")
    )
    ours = config.kafka_source == "ticdc" or not is_kafka_uri(config.source)
    return RunningPipeline(start_query(writer, config.trigger, ours), background)


def _applier(
    spark: Any, config: PipelineConfig, capabilities: Capabilities, on_error: OnError
) -> Applier:
    """The applier of a pipeline: its checkpoint's state store, its target's sink."""
    store = StateStore(config.checkpoint)
    sink = make_sink(config.target, store.pipeline_id(), config.engine, spark, config.storage)
    dead = DeadLetterWriter(config.dead_letters or Path(config.checkpoint) / "dead-letters")
    consistent = Mode.parse(config.mode) == Mode.CONSISTENT
    return Applier(
        sink,
        store,
        mode=config.mode,
        partitions=source_partitions(config.source, config.source_options) if consistent else (),
        dead_letters=dead,
        on_error=on_error,
        track_commits=config.track_commits,
        capabilities=capabilities,
        max_held_rows=config.max_held_rows,
        threads=config.apply_threads or default_threads(config.engine, config.target),
    )


def default_threads(engine: str, target: str) -> int:
    """How many tables a micro-batch applies at once by default: the Spark engine's merges
    are Spark jobs, mostly waiting on the executors and on commits, so several overlap well
    (8); delta-rs merges use the driver's cores; pyiceberg's SQL catalog is committed to by
    one thread (a SQLite file)."""
    if Engine.parse(engine) == Engine.SPARK:
        return 8
    return 1 if target.lower().startswith("iceberg:") else min(4, os.cpu_count() or 1)


class _BatchHandler:
    """The ``foreachBatch`` function: collect the micro-batch, log it, apply it (in the
    background with ``overlap``)."""

    def __init__(
        self,
        applier: Applier,
        log: ChangelogLog,
        background: Background,
        overlap: bool,
        on_batch: OnBatch | None,
    ) -> None:
        self.applier, self.log, self.background = applier, log, background
        self.overlap, self.on_batch = overlap, on_batch

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        batch_id = int(batch_id)
        crash_point("offsets-written", batch_id)
        started = time.perf_counter()
        changes = batch_df.toArrow()  # runs the read and decode stages of this micro-batch
        read_seconds = time.perf_counter() - started
        crash_point("decoded", batch_id)
        # before Spark may record the batch as done; kept while a state it could rebuild is
        self.log.write(batch_id, changes)
        crash_point("logged", batch_id)
        if not self.overlap:
            self.finish(changes, batch_id, read_seconds)
            return
        self.background.wait()  # the previous batch's apply; its failure stops the query here
        self.background.run(self.finish, changes, batch_id, read_seconds)

    def finish(self, changes: pa.Table, batch_id: int, read_seconds: float) -> None:
        report = self.applier.apply(changes, batch_id)
        self.log.prune(self.applier.store.oldest())
        report.read_seconds = read_seconds
        if self.on_batch is not None:
            self.on_batch(report)


def run(spark: Any, config: PipelineConfig, on_batch: OnBatch | None = None) -> None:
    """Run the pipeline until it has consumed everything (trigger once) or is stopped; each
    micro-batch bounded (:func:`~ticdc_spark.spark.sources.bounded_source_options`)."""
    options = bounded_source_options(config.source, config.protocol, config.source_options)
    options = once_options(options, config.trigger)  # (the end fixed at the start: trigger.py)
    source_df = read_source(spark, config.source, options, config.checkpoint, config.kafka_source)
    query = start(spark, source_df, config, on_batch)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        print("stopping (the next run resumes from the checkpoint)", file=sys.stderr)
        query.stop()
