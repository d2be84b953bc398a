"""The replication pipeline on Spark Structured Streaming.

    source (Kafka or capture files) -> decode (mapInArrow) -> foreachBatch(Applier)

Offsets live in Spark's checkpoint (``CHECKPOINT/spark``); the consumer state and the sinks'
step versions make every micro-batch apply exactly once (see :mod:`ticdc_spark.apply`).
Spark's built-in Kafka source works in place of ours: pass its DataFrame to :func:`start`.

By default a micro-batch is applied in a background thread while Spark reads and decodes the
next one (``overlap``): ``foreachBatch`` collects the changelog, logs it to disk
(:class:`~ticdc_spark.apply.ChangelogLog`), waits for the previous batch's apply, starts this
one's and returns.  Applying is serial and in order; a crash after Spark recorded a batch as
done but before its apply finished is repaired at the next start from the log.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ticdc_spark.apply import (
    Applier,
    BatchReport,
    ChangelogLog,
    DeadLetterWriter,
    StateStore,
    protocol_planning,
)
from ticdc_spark.checkpoint import check_checkpoint, repair_spark_checkpoint, spark_batches
from ticdc_spark.codec import get_codec
from ticdc_spark.consume import MAX_HELD_ROWS
from ticdc_spark.crashpoints import crash_point, watch_commits
from ticdc_spark.errors import ConfigError
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.kafka import SECRET_KEY_PATTERN, is_kafka_uri, redact
from ticdc_spark.sinks.base import TableSink
from ticdc_spark.spark.decode import decode
from ticdc_spark.storage import StorageOptions

__all__ = [
    "DEFAULT_CHANGES_PER_BATCH",
    "DEFAULT_MAX_BYTES_PER_TRIGGER",
    "PipelineConfig",
    "RunningPipeline",
    "bounded_source_options",
    "make_sink",
    "read_source",
    "run",
    "start",
]

log = logging.getLogger(__name__)

# The bound per micro-batch ``run`` (``ticdc-spark replicate``) gives its source unless the
# source options set one.  Each micro-batch's changelog is collected to the driver to be
# applied, so without a bound a job started on a backlog collects all of it at once (a
# 2M-message Canal-JSON capture: one micro-batch of 2,000,000 rows, ~8.5 GB resident).  About
# this many changes: maxOffsetsPerTrigger counts Kafka records, and a record carries one
# change (Canal-JSON) or up to TiCDC's default max-batch-size, 16 (Open Protocol).
DEFAULT_CHANGES_PER_BATCH = 100_000
_CHANGES_PER_RECORD = {"open-protocol": 16}
# For a capture directory also its bytes (Spark's file sources name it maxBytesPerTrigger):
# records of large messages (up to TiCDC's max-message-bytes, 10 MiB by default).  Spark's
# Kafka source has no byte bound, and neither has ours: Kafka offsets carry no sizes.
DEFAULT_MAX_BYTES_PER_TRIGGER = 256 * 2**20


@dataclass
class PipelineConfig:
    """Everything ``ticdc-spark replicate`` takes."""

    source: str  # kafka://HOST:PORT/TOPIC[,TOPIC] or a capture directory
    protocol: str
    target: str  # delta:PATH or iceberg:CATALOG_URI#WAREHOUSE
    checkpoint: str
    mode: str = "consistent"
    trigger: str = "once"  # "once" (everything available, then stop) or seconds
    options: dict[str, str] = field(default_factory=dict)  # codec options
    source_options: dict[str, str] = field(default_factory=dict)  # e.g. maxOffsetsPerTrigger
    on_error: str = "dead-letter"
    dead_letters: str | None = None
    table_filter: tuple[str, ...] = ()  # TiCDC table-filter rules (none: every table)
    track_commits: bool = False  # report applied commit ts per batch (latency measurements)
    overlap: bool = True  # apply a batch while Spark reads the next (see the module doc)
    max_held_rows: int = MAX_HELD_ROWS  # rows held back for a later batch, at most
    storage: StorageOptions = field(default_factory=StorageOptions.from_environment)

    def __repr__(self) -> str:  # source, target and options may hold credentials
        shown = ", ".join(f"{f.name}={redact(getattr(self, f.name))!r}" for f in fields(self))
        return f"PipelineConfig({shown})"


def default_mode(protocol: str) -> str:
    """consistent, or eventual for a protocol that carries no watermarks."""
    return "consistent" if get_codec(protocol).watermarks else "eventual"


def check_mode(protocol: str, mode: str) -> None:
    """Refuse consistent mode for a protocol without watermarks, saying why."""
    if mode == "consistent" and not get_codec(protocol).watermarks:
        raise ConfigError(
            f"the {protocol} protocol carries no watermarks (resolved ts), so no applied "
            "state can be known to be a transaction-consistent snapshot of upstream: "
            "replicate it with --mode eventual (rows are ordered by commit ts and by their "
            "partition position, see docs/pipeline.md)"
        )


def make_sink(
    target: str, app_id: str = "ticdc-spark", storage: StorageOptions | None = None
) -> TableSink:
    """``delta:PATH`` or ``iceberg:CATALOG_URI#WAREHOUSE`` (PATH and WAREHOUSE local or an
    object store's URI, configured by ``storage``: by default the environment's)."""
    kind, sep, rest = target.partition(":")
    kind = kind.lower()
    if kind == "delta" and sep and rest:
        from ticdc_spark.sinks.delta import DeltaSink

        return DeltaSink(rest, app_id=app_id, storage=storage)
    if kind == "iceberg" and sep and rest:
        from ticdc_spark.sinks.iceberg import IcebergSink, parse_iceberg_target

        return IcebergSink(*parse_iceberg_target(rest), storage=storage)
    raise ConfigError(
        f"unknown target {redact(target)!r}: use delta:PATH or iceberg:CATALOG_URI#WAREHOUSE"
    )


def read_source(
    spark: Any,
    source: str,
    options: Mapping[str, str] | None = None,
    checkpoint: str | None = None,
) -> Any:
    """A streaming DataFrame with Spark's Kafka-source columns for a source spec.  With a
    ``checkpoint`` (the pipeline's), a Kafka source keeps the initial offsets it resolved
    there, so a restart re-running batch 0 starts where the first run did."""
    options = dict(options or {})
    if is_kafka_uri(source):
        if checkpoint is not None and not any(k.lower() == "initialoffsetspath" for k in options):
            options["initialOffsetsPath"] = str(Path(checkpoint) / "kafka-initial-offsets.json")
        from ticdc_spark.spark.kafka_source import register

        register(spark)
        _mask_secret_options(spark)
        reader = spark.readStream.format("ticdc-kafka")
        for key, value in _kafka_options(source, options).items():
            reader = reader.option(key, value)
        return reader.load()
    path = Path(source)
    if not path.is_dir():
        raise ConfigError(
            f"source {redact(source)!r} is neither kafka://... nor a capture directory"
        )
    from ticdc_spark.spark.capture_source import register as register_capture

    register_capture(spark)
    reader = spark.readStream.format("ticdc-capture").option("path", str(path))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _mask_secret_options(spark: Any) -> None:
    """Have Spark mask in query plans (``explain``) the option values :func:`redact` masks:
    Spark's own patterns miss e.g. ``kafka.ssl.key.pem`` and ``kafka.sasl.username``."""
    name, ours = "spark.sql.redaction.options.regex", f"(?i:{SECRET_KEY_PATTERN})"
    current = spark.conf.get(name)
    if ours not in current:
        spark.conf.set(name, f"{current}|{ours}" if current else ours)


def _kafka_options(source: str, options: Mapping[str, str]) -> dict[str, str]:
    """The ticdc-kafka source options of a kafka:// source spec and --source-option values."""
    from ticdc_spark.io.kafka import parse_kafka_uri

    servers, topics, extra = parse_kafka_uri(source)
    options = dict(options)
    return {
        "kafka.bootstrap.servers": servers,
        "subscribe": ",".join(topics),
        "startingOffsets": options.pop("startingOffsets", "earliest"),
        **extra,
        **options,
    }


def bounded_source_options(
    source: str, protocol: str, options: Mapping[str, str]
) -> dict[str, str]:
    """``options`` with the default bound per micro-batch where they set none (Spark's option
    names, compared ignoring case): ``maxOffsetsPerTrigger`` of about
    :data:`DEFAULT_CHANGES_PER_BATCH` changes, and for a capture directory
    ``maxBytesPerTrigger`` :data:`DEFAULT_MAX_BYTES_PER_TRIGGER`.  Under ``--trigger once``
    (Spark's Trigger.AvailableNow) the backlog is applied in as many bounded micro-batches
    as it takes.  Set a larger value to lift a bound."""
    out = dict(options)
    given = {k.lower(): v for k, v in options.items()}
    if "maxoffsetspertrigger" not in given:
        records = max(1, DEFAULT_CHANGES_PER_BATCH // _CHANGES_PER_RECORD.get(protocol, 1))
        least = given.get("minoffsetspertrigger", "").strip()
        if least.isdigit():  # Spark refuses a minimum above the maximum
            records = max(records, int(least))
        out["maxOffsetsPerTrigger"] = str(records)
    if not is_kafka_uri(source) and "maxbytespertrigger" not in given:
        out["maxBytesPerTrigger"] = str(DEFAULT_MAX_BYTES_PER_TRIGGER)
    return out


def source_partitions(config: PipelineConfig) -> tuple[str, ...]:
    """The ``topic/partition`` names a source reads: as the broker lists them now, or for a
    capture directory as its records name them now.  Consistent mode waits for a watermark
    from each of them: a partition that has sent nothing yet (or whose records come later
    in the directory than a micro-batch reaches) must hold back the others' rows too."""
    if not is_kafka_uri(config.source):
        if not Path(config.source).is_dir():
            return ()
        from ticdc_spark.spark.capture_source import capture_partitions

        return tuple(f"{t}/{p}" for t, p in capture_partitions(config.source))
    from ticdc_spark.spark.kafka_source import topic_partitions

    return tuple(
        f"{t}/{p}"
        for t, p in topic_partitions(_kafka_options(config.source, config.source_options))
    )


def start(
    spark: Any,
    source_df: Any,
    config: PipelineConfig,
    on_batch: Callable[[BatchReport], None] | None = None,
) -> RunningPipeline:
    """Start the streaming query (``awaitTermination``/``stop`` as usual)."""
    table_filter = TableFilter(config.table_filter)  # (a bad rule fails before anything starts)
    spark_checkpoint = Path(config.checkpoint) / "spark"
    check_mode(config.protocol, config.mode)
    repair_spark_checkpoint(spark_checkpoint)  # what a kill before the first batch leaves
    check_checkpoint(config.checkpoint)
    store = StateStore(config.checkpoint)
    sink = make_sink(config.target, app_id=store.pipeline_id(), storage=config.storage)
    dead = DeadLetterWriter(config.dead_letters or Path(config.checkpoint) / "dead-letters")
    applier = Applier(
        sink,
        store,
        mode=config.mode,
        partitions=source_partitions(config) if config.mode == "consistent" else (),
        dead_letters=dead,
        on_error="stop" if config.on_error == "stop" else "dead-letter",
        track_commits=config.track_commits,
        max_held_rows=config.max_held_rows,
        **protocol_planning(config.protocol, config.options),
    )
    changelog = decode(
        source_df,
        config.protocol,
        config.options,
        on_error="fail" if config.on_error == "stop" else "dead-letter",
        table_filter=table_filter,
    )
    log = ChangelogLog(store.root)
    # batches a crash left logged but not applied, and states found missing or damaged
    committed = max(spark_batches(spark_checkpoint, "commits"), default=-1)
    for report in applier.recover(log, committed):
        if on_batch is not None:
            on_batch(report)
    background = _Background()
    watch_commits(spark_checkpoint)  # (a test's kill point; inert by default)

    def finish(changes: Any, batch_id: int, read_seconds: float) -> None:
        report = applier.apply(changes, batch_id)
        log.prune(store.oldest())
        report.read_seconds = read_seconds
        if on_batch is not None:
            on_batch(report)

    def apply_batch(batch_df: Any, batch_id: int) -> None:
        batch_id = int(batch_id)
        crash_point("offsets-written", batch_id)
        started = time.perf_counter()
        changes = batch_df.toArrow()  # runs the read and decode stages of this micro-batch
        read_seconds = time.perf_counter() - started
        crash_point("decoded", batch_id)
        # before Spark may record the batch as done; kept while a state it could rebuild is
        log.write(batch_id, changes)
        crash_point("logged", batch_id)
        if not config.overlap:
            finish(changes, batch_id, read_seconds)
            return
        background.wait()  # the previous batch's apply; its failure stops the query here
        background.run(finish, changes, batch_id, read_seconds)

    writer = (
        changelog.writeStream.foreachBatch(apply_batch)
        .option("checkpointLocation", str(Path(config.checkpoint) / "spark"))
        .queryName("ticdc-spark")
    )
    if config.trigger == "once":
        writer = writer.trigger(availableNow=True)
    else:
        try:
            seconds = float(config.trigger)
        except ValueError:
            raise ConfigError(f"--trigger is 'once' or seconds, not {config.trigger!r}") from None
        writer = writer.trigger(processingTime=f"{seconds} seconds")
    return RunningPipeline(writer.start(), background)


class _Background:
    """At most one apply running beside Spark; its error is raised by the next ``wait``."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def failed(self) -> bool:
        """The last apply ended with an error not yet raised."""
        return self._error is not None and not (self._thread and self._thread.is_alive())

    def run(self, func: Callable[..., None], *args: Any) -> None:
        def target() -> None:
            try:
                func(*args)
            except BaseException as exc:  # handed to the caller of wait()
                self._error = exc

        self._thread = threading.Thread(target=target, name="ticdc-apply", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error


class RunningPipeline:
    """The streaming query, plus the apply that may still run after Spark's last batch.

    ``awaitTermination`` and ``stop`` return once that apply has finished too; anything else
    is the underlying ``StreamingQuery``'s.
    """

    def __init__(self, query: Any, background: _Background) -> None:
        self.query = query
        self._background = background

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait for the query to end (or ``timeout`` seconds), and for its last apply.

        A failed apply stops the query at once, even when no further micro-batch comes
        (with a processing-time trigger and no new data, ``foreachBatch`` would not run again
        to report it).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:  # (Spark refuses a timeout that is not > 0)
                return False
            try:
                done = bool(self.query.awaitTermination(1.0 if left is None else min(1.0, left)))
            except BaseException:
                self._settle()
                raise
            if done:
                self._background.wait()
                return True if timeout is not None else None
            if self._background.failed:
                self.query.stop()
                self._background.wait()  # raises the apply's error

    def stop(self) -> None:
        try:
            self.query.stop()
        finally:
            self._background.wait()

    def _settle(self) -> None:
        """Wait for the apply while the query's own error is on its way (which wins)."""
        try:
            self._background.wait()
        except BaseException:
            log.exception("the last micro-batch's apply failed too")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)


def run(
    spark: Any, config: PipelineConfig, on_batch: Callable[[BatchReport], None] | None = None
) -> None:
    """Run the pipeline until it has consumed everything (trigger once) or is stopped; each
    micro-batch bounded (:func:`bounded_source_options`)."""
    options = bounded_source_options(config.source, config.protocol, config.source_options)
    source_df = read_source(spark, config.source, options, config.checkpoint)
    query = start(spark, source_df, config, on_batch)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        print("stopping (the next run resumes from the checkpoint)", file=sys.stderr)
        query.stop()
