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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from ticdc_spark.errors import ConfigError
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
    state_root,
)
from ticdc_spark.pipeline.dead_letters import DeadLetterWriter
from ticdc_spark.pipeline.failpoints import crash_point, watch_commits
from ticdc_spark.pipeline.ordering import GUARD_RETENTION_SECONDS, MAX_GUARDS, MAX_HELD_ROWS
from ticdc_spark.pipeline.planning import PartsPlanning
from ticdc_spark.pipeline.policy import Engine, Mode, OnError, PlanningSite
from ticdc_spark.pipeline.tombstones import migrate_tombstones
from ticdc_spark.sinks import make_sink
from ticdc_spark.spark.bad_lines import skip_bad_frame_lines, skip_bad_lines
from ticdc_spark.spark.decode import decode
from ticdc_spark.spark.failures import Failure
from ticdc_spark.spark.jars import check_session, engine_features
from ticdc_spark.spark.overlap import Background, RunningPipeline
from ticdc_spark.spark.planning import PlannedLog, SparkRunner
from ticdc_spark.spark.session import spark_session
from ticdc_spark.spark.sources import bounded_source_options, read_source, source_partitions
from ticdc_spark.spark.trigger import once_options, start_query
from ticdc_spark.storage import Lease, StorageOptions, join, open_store
from ticdc_spark.storage.hadoop import checkpoint_features, s3a_settings

__all__ = [
    "PipelineConfig",
    "RunningPipeline",
    "activate",
    "bad_line_policy",
    "check_mode",
    "default_mode",
    "pipeline_session",
    "run",
    "spark_checkpoint",
    "start",
    "take_lease",
    "trigger_seconds",
]

OnBatch = Callable[[BatchReport], None]
Log = ChangelogLog | PlannedLog  # (see _changelog_log)


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
    # deletes remembered against late older changes (pipeline.guards): how long without
    # watermarks (seconds of commit time), and how many at most
    guard_retention: float = GUARD_RETENTION_SECONDS
    max_guards: int = MAX_GUARDS
    changelog_tables: bool = False  # beside each table T, T__changes (sinks.base)
    kafka_source: str = "ticdc"  # or "spark": Spark's own Kafka source (spark/spark_kafka.py)
    storage: StorageOptions = field(default_factory=StorageOptions.from_environment)
    engine: str = Engine.SPARK  # a policy.Engine: what applies the steps to the tables
    apply_threads: int = 0  # tables applied at once (0: the engine's default)
    master: str | None = None  # spark://HOST:PORT: the executors on that cluster (None: local)
    planner: str = PlanningSite.DRIVER  # a policy.PlanningSite: where micro-batches are planned

    def __repr__(self) -> str:  # source, target and options may hold credentials
        shown = ", ".join(f"{f.name}={redact(getattr(self, f.name))!r}" for f in fields(self))
        return f"PipelineConfig({shown})"


def default_mode(protocol: str, options: Mapping[str, str] | None = None) -> str:
    """consistent, or eventual for a protocol that carries no watermarks (with ``options``:
    Canal-JSON without its TiDB extension)."""
    return Capabilities.of(protocol, options).default_mode()


def check_mode(protocol: str, mode: str, options: Mapping[str, str] | None = None) -> None:
    """Refuse consistent mode for a protocol (with ``options``) without watermarks, saying
    why and what to do."""
    Capabilities.of(protocol, options).check_mode(mode)


def bad_line_policy(config: PipelineConfig) -> OnError:
    """What a capture source does with a line that is not a Kafka record: its option
    ``onBadRecord`` (stop, dead-letter or skip), by default the pipeline's ``on_error``."""
    given = {k.lower(): v for k, v in config.source_options.items()}.get("onbadrecord")
    return OnError.parse(given or config.on_error)


def pipeline_session(
    config: PipelineConfig,
    settings: dict[str, str] | None = None,
    app: str = "ticdc-spark",
    features: tuple[str, ...] = (),
) -> Any:
    """The session ``config`` runs on: local, or the driver here and the executors on the
    cluster at ``config.master``; with the JVM libraries its target's engine, its Kafka
    source, its checkpoint's store and ``features`` need (resolved once, shipped by Spark to
    the executors), S3A configured from ``config.storage`` when one of them is on ``s3://``
    (``settings`` win)."""
    features += engine_features(config.target, config.engine)
    features += checkpoint_features(config.checkpoint)
    if is_kafka_uri(config.source) and config.kafka_source == "spark":
        features += ("kafka",)
    settings = s3a_settings(features, config.storage) | (settings or {})
    return spark_session(app, config.master, settings=settings, features=features)


def start(
    spark: Any,
    source_df: Any,
    config: PipelineConfig,
    on_batch: OnBatch | None = None,
    lease: Lease | None = None,
) -> RunningPipeline:
    """Start the streaming query (``awaitTermination``/``stop`` as usual).  The job holds
    the checkpoint's lease (:func:`take_lease`, or ``lease`` if taken already) until the
    query ends or is stopped."""
    TableFilter(config.table_filter)  # (a bad rule fails before anything starts)
    Capabilities.of(config.protocol, config.options).check_mode(config.mode)
    OnError.parse(config.on_error, (OnError.DEAD_LETTER, OnError.STOP))
    lease = lease or take_lease(config.checkpoint, config.storage)
    try:
        return _start_query(spark, source_df, config, on_batch, lease)
    except BaseException:
        lease.release()
        raise


def _start_query(
    spark: Any, source_df: Any, config: PipelineConfig, on_batch: OnBatch | None, lease: Lease
) -> RunningPipeline:
    """The checkpoint repaired and checked, the state recovered, the query started."""
    on_error = OnError.parse(config.on_error, (OnError.DEAD_LETTER, OnError.STOP))
    spark_dir = spark_checkpoint(config.checkpoint)
    repair_spark_checkpoint(spark_dir, config.storage)  # what a kill before the first batch leaves
    check_checkpoint(config.checkpoint, config.storage)
    check_session(spark, engine_features(config.target, config.engine))
    capabilities = Capabilities.of(config.protocol, config.options, config.storage)
    applier = _applier(spark, config, capabilities, on_error, lease)
    changelog = decode(
        source_df,
        config.protocol,
        config.options,
        on_error=on_error,
        table_filter=TableFilter(config.table_filter),
        storage=config.storage,
    )
    log = _recover(config, applier, on_batch, _changelog_log(spark, config, applier))
    activate(spark)  # (the spark engine's sinks made their own sessions active meanwhile)
    background, failure = Background(), Failure()
    writer = (
        changelog.writeStream.foreachBatch(
            _BatchHandler(applier, log, background, config, on_batch, failure)
        )
        .option("checkpointLocation", spark_dir)
        .queryName("ticdc-spark")
    )
    ours = config.kafka_source == "ticdc" or not is_kafka_uri(config.source)
    query = start_query(writer, config.trigger, ours)
    return RunningPipeline(query, background, failure, lease)


def activate(spark: Any) -> None:
    """Make ``spark`` this thread's active session again in the JVM, where settings read
    there come from (a spark-engine sink activates its own, per thread: sinks.spark.base)."""
    spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def take_lease(checkpoint: str, storage: StorageOptions) -> Lease:
    """The single-writer lease of a checkpoint (``CHECKPOINT/ticdc/lease.json``), taken and
    renewed from a thread; :class:`~ticdc_spark.storage.LeaseHeld` names the job that holds
    it."""
    lease = Lease(open_store(str(state_root(checkpoint)), storage))
    lease.acquire()
    lease.start_heartbeat()
    return lease


def spark_checkpoint(checkpoint: str) -> str:
    """Spark's part of the checkpoint: ``CHECKPOINT/spark`` (a path or a URI)."""
    return join(checkpoint, "spark")


def _changelog_log(spark: Any, config: PipelineConfig, applier: Applier) -> Log:
    """Where micro-batches are logged before they are applied: Arrow files the driver
    writes, or Parquet the executors write when they plan."""
    if PlanningSite.parse(config.planner) == PlanningSite.EXECUTORS:
        log = PlannedLog(spark, applier.store)
        log.skip_bad_lines = bad_line_policy(config) == OnError.SKIP
        return log
    return ChangelogLog(applier.store.root, config.storage)


def _recover(config: PipelineConfig, applier: Applier, on_batch: OnBatch | None, log: Log) -> Log:
    """Bring the consumer state up to Spark's commits and the logged batches (see
    :mod:`ticdc_spark.pipeline.checkpoint`); the changelog log."""
    spark_dir = spark_checkpoint(config.checkpoint)
    migrate_tombstones(applier)  # (tables an earlier version wrote, once: before any apply)
    # batches a crash left logged but not applied, and states found missing or damaged
    committed = max(spark_batches(spark_dir, "commits", config.storage), default=-1)
    for report in applier.recover(log, committed):
        if on_batch is not None:
            on_batch(report)
    watch_commits(spark_dir, config.storage)  # (a test's kill point; inert by default)
    return log


def _applier(
    spark: Any,
    config: PipelineConfig,
    capabilities: Capabilities,
    on_error: OnError,
    lease: Lease | None,
) -> Applier:
    """The applier of a pipeline: its checkpoint's state store, its target's sink."""
    store = StateStore(config.checkpoint, storage=config.storage, lease=lease)
    sink = make_sink(config.target, store.pipeline_id(), config.engine, spark, config.storage)
    sink.changelog_tables = config.changelog_tables
    dead_dir = config.dead_letters or join(config.checkpoint, "dead-letters")
    consistent = Mode.parse(config.mode) == Mode.CONSISTENT
    return Applier(
        sink,
        store,
        mode=config.mode,
        partitions=source_partitions(config.source, config.source_options) if consistent else (),
        dead_letters=DeadLetterWriter(dead_dir, config.storage),
        on_error=on_error,
        track_commits=config.track_commits,
        capabilities=capabilities,
        max_held_rows=config.max_held_rows,
        guard_retention=config.guard_retention,
        max_guards=config.max_guards,
        threads=config.apply_threads or default_threads(config.engine, config.target),
        planning=_planning(spark, config, store),
    )


def _planning(spark: Any, config: PipelineConfig, store: StateStore) -> PartsPlanning | None:
    """Planning on the executors when asked (None: on the driver)."""
    if PlanningSite.parse(config.planner) != PlanningSite.EXECUTORS:
        return None
    if Engine.parse(config.engine) != Engine.SPARK:
        raise ConfigError("--planner executors needs the spark engine (--engine spark)")
    if any(c in config.checkpoint for c in "*?[]{}\\"):  # (Spark reads paths as globs)
        raise ConfigError(
            f"--planner executors reads its files under --checkpoint with Spark, which "
            f"takes *?[]{{}}\\ in a path as a pattern: {config.checkpoint!r} has one; "
            "choose a checkpoint path without them"
        )
    return PartsPlanning(SparkRunner(spark, str(store.root), config.storage))


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
    background with ``overlap``).  An error is noted (``failure``) before Spark wraps it."""

    def __init__(
        self,
        applier: Applier,
        log: Log,
        background: Background,
        config: PipelineConfig,
        on_batch: OnBatch | None,
        failure: Failure,
    ) -> None:
        self.applier, self.log, self.background = applier, log, background
        self.overlap, self.on_batch, self.failure = config.overlap, on_batch, failure
        self.skip_bad_lines = bad_line_policy(config) == OnError.SKIP

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        try:
            self._handle(batch_df, int(batch_id))
        except BaseException as exc:
            self.failure.note(exc)
            raise

    def _handle(self, batch_df: Any, batch_id: int) -> None:
        crash_point("offsets-written", batch_id)
        started = time.perf_counter()
        if isinstance(self.log, PlannedLog):  # (planning on the executors: rows stay there)
            changes, skipped = self._log_planned(batch_df, batch_id)
        else:
            changes, skipped = self._log_collected(batch_df, batch_id)
        read_seconds = time.perf_counter() - started
        crash_point("logged", batch_id)
        if not self.overlap:
            self.finish(changes, batch_id, read_seconds, skipped)
            return
        self.background.wait()  # the previous batch's apply; its failure stops the query here
        self.background.run(self.finish, changes, batch_id, read_seconds, skipped)

    def _log_collected(self, batch_df: Any, batch_id: int) -> tuple[pa.Table, int]:
        """The micro-batch collected and logged (before Spark may record it as done; kept
        while a state it could rebuild is); how many bad capture lines it skipped."""
        changes = batch_df.toArrow()  # runs the read and decode stages of this micro-batch
        crash_point("decoded", batch_id)
        skipped = 0
        if self.skip_bad_lines:
            changes, skipped = skip_bad_lines(changes, batch_id)
        self.log.write(batch_id, changes)
        return changes, skipped

    def _log_planned(self, batch_df: Any, batch_id: int) -> tuple[Any, int]:
        """The micro-batch logged by the executors (read, decoded and written there),
        read back from the log (which drops bad capture lines, when they are skipped); how
        many bad capture lines it skipped, counted in the log."""
        assert isinstance(self.log, PlannedLog)
        self.log.write(batch_id, batch_df)
        crash_point("decoded", batch_id)
        skipped = 0
        if self.skip_bad_lines:
            logged = self.log.spark.read.parquet(self.log.location(batch_id))
            skipped = skip_bad_frame_lines(logged, batch_id)
        return self.log.read(batch_id), skipped

    def finish(self, changes: Any, batch_id: int, read_seconds: float, skipped: int) -> None:
        report = self.applier.apply(changes, batch_id)
        self.log.prune(self.applier.store.oldest())
        report.read_seconds = read_seconds
        report.skipped = skipped
        if self.on_batch is not None:
            self.on_batch(report)


def trigger_seconds(trigger: str) -> float | None:
    """The seconds between micro-batches a trigger names, or None for ``once``."""
    if trigger == "once":
        return None
    try:
        seconds = float(trigger)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(f"--trigger is 'once' or a number of seconds, not {trigger!r}")
    return seconds


def run(
    spark: Any, config: PipelineConfig, on_batch: OnBatch | None = None, lease: Lease | None = None
) -> None:
    """Run the pipeline until it has consumed everything (trigger once) or is stopped; each
    micro-batch bounded (:func:`~ticdc_spark.spark.sources.bounded_source_options`).  The
    checkpoint's ``lease``, if taken already, is released when the run ends."""
    options = bounded_source_options(config.source, config.protocol, config.source_options)
    if not is_kafka_uri(config.source):
        options = {k: v for k, v in options.items() if k.lower() != "onbadrecord"}
        options["onBadRecord"] = bad_line_policy(config).value
    options = once_options(options, config.trigger)  # (the end fixed at the start: trigger.py)
    try:
        source_df = read_source(
            spark, config.source, options, config.checkpoint, config.kafka_source, config.storage
        )
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    query = start(spark, source_df, config, on_batch, lease)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        print("stopping (the next run resumes from the checkpoint)", file=sys.stderr)
        query.stop()
