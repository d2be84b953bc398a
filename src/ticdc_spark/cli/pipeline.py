"""The pipeline commands: ``replicate`` (TiCDC topics to lakehouse tables, exactly once)
and ``verify`` (target tables against an expected state).  Spark is imported when a
command runs, not before: the other commands start without it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ticdc_spark.cli.args import (
    EXIT_FAILURE,
    EXIT_OK,
    codec_options,
    filter_argument,
    key_values_argument,
    parse_key_values,
    registry_argument,
    subcommand,
)
from ticdc_spark.codec import protocols

__all__ = ["add_replicate", "add_verify"]


def add_replicate(commands: Any) -> None:
    parser = subcommand(commands, "replicate", _run_replicate)
    _ends_arguments(parser)
    _codec_source_arguments(parser)
    _error_arguments(parser)
    _resource_arguments(parser)
    _table_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no per-batch progress lines")
    filter_argument(parser)
    _storage_argument(parser)


def _storage_argument(parser: argparse.ArgumentParser) -> None:
    key_values_argument(
        parser,
        "--storage-option",
        help="an object-store setting over the environment's, e.g. AWS_ENDPOINT_URL=http://"
        "127.0.0.1:9000 or AWS_REGION=eu-west-1 (repeatable; see docs/pipeline.md)",
    )


def _storage(args: argparse.Namespace) -> Any:
    from ticdc_spark.storage import StorageOptions, parse_storage_options

    return StorageOptions.from_environment(parse_storage_options(args.storage_option))


def _ends_arguments(parser: argparse.ArgumentParser) -> None:
    """Where from, in what protocol, and where to."""
    parser.add_argument(
        "--source",
        required=True,
        metavar="kafka://HOST:PORT/TOPIC[,TOPIC]|DIR",
        help="Kafka topics (credentials as kafka://user:password@host:port/...), or a "
        "directory of capture files (as produce writes them)",
    )
    parser.add_argument(
        "--protocol",
        "-p",
        required=True,
        help=f"the changefeed's protocol: {', '.join(protocols())}",
    )
    parser.add_argument(
        "--target",
        required=True,
        metavar="delta:PATH|iceberg:CATALOG_URI#WAREHOUSE",
        help="Delta tables under PATH (PATH/<db>/<table>), or an Iceberg catalog (e.g. "
        "sqlite:////tmp/catalog.db) and its warehouse (namespace <db>)",
    )
    parser.add_argument(
        "--checkpoint",
        required=True,
        metavar="DIR|s3://BUCKET/PREFIX",
        help="where the offsets and the consumer state live: run again with the same one "
        "to resume exactly (one job per checkpoint: a second is refused, naming the first)",
    )
    _when_arguments(parser)


def _when_arguments(parser: argparse.ArgumentParser) -> None:
    """What is applied when."""
    parser.add_argument(
        "--kafka-source",
        choices=("ticdc", "spark"),
        default="ticdc",
        help="what reads a kafka:// source: ticdc (ours, on librdkafka: no JVM download) or "
        "spark (Spark's own spark-sql-kafka, resolved from Maven Central on first use)",
    )
    parser.add_argument(
        "--mode",
        choices=("consistent", "eventual"),
        default=None,
        help="consistent: apply only up to the global watermark (snapshots of "
        "upstream); eventual: apply at once (streams without watermarks). Default: "
        "consistent, or eventual (said on stderr) when the protocol carries no watermarks: "
        "avro, canal-json without enable-tidb-extension=true",
    )
    parser.add_argument(
        "--trigger",
        default="once",
        metavar="SECONDS|once",
        help="micro-batch interval, or once: apply what is there and stop",
    )


def _codec_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The codec's options and the source's."""
    key_values_argument(parser, "--option", "-o", help="a codec option (TiCDC name), repeatable")
    registry_argument(parser)
    key_values_argument(
        parser,
        "--source-option",
        help="a source option, e.g. maxOffsetsPerTrigger=10000 or "
        "kafka.security.protocol=SASL_SSL, or for a capture directory onBadRecord="
        "dead-letter|skip|stop (default: as --on-error) (repeatable; docs/kafka-source.md)",
    )


def _error_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--on-error",
        choices=("dead-letter", "stop"),
        default="dead-letter",
        help="route bad records to the dead-letter directory, or stop at the first",
    )
    parser.add_argument(
        "--dead-letters",
        metavar="DIR|URI",
        help="dead-letter directory or object-store prefix (default CHECKPOINT/dead-letters)",
    )


def _resource_arguments(parser: argparse.ArgumentParser) -> None:
    """Memory, overlap and Spark's own settings."""
    parser.add_argument(
        "--max-held-rows",
        type=int,
        default=None,
        metavar="N",
        help="rows held back for a later micro-batch (waiting for the watermark, or for "
        "their schema) at most; past it the job stops naming the partitions behind "
        "(default 1000000)",
    )
    parser.add_argument(
        "--serial-apply",
        action="store_true",
        help="apply each micro-batch before reading the next (default: apply it while Spark "
        "reads the next, with the batch logged to the checkpoint first)",
    )
    parser.add_argument(
        "--master",
        metavar="spark://HOST:PORT",
        help="run the executors on this Spark cluster, the driver here (default: local, two "
        "cores; see docs/pipeline.md, On a cluster)",
    )
    key_values_argument(
        parser,
        "--spark-conf",
        help="a Spark setting for the session, e.g. spark.driver.memory=8g (repeatable)",
    )
    _engine_arguments(parser)


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=("spark", "embedded"),
        default="spark",
        help="what applies the changes: spark (Spark SQL MERGE in the executors: Delta with "
        "deletion vectors, Iceberg merge-on-read; schema changes as metadata; Delta's and "
        "Iceberg's Spark jars are fetched from Maven Central on first use and cached) or "
        "embedded (delta-rs / pyiceberg on the driver, copy-on-write; no JVM jars). "
        "Default: spark",
    )
    parser.add_argument(
        "--planner",
        choices=("driver", "executors"),
        default="driver",
        help="where micro-batches are planned: driver (collected to the driver, planned by "
        "one thread; its memory follows the micro-batch) or executors (each table's rows "
        "planned where they are, on the executors; the driver holds per-table results only; "
        "needs --engine spark). Default: driver",
    )
    parser.add_argument(
        "--apply-threads",
        type=int,
        default=0,
        metavar="N",
        help="tables of a micro-batch applied at once (default: 8 with the spark engine, up "
        "to 4 with embedded Delta, 1 with embedded Iceberg)",
    )


def _table_arguments(parser: argparse.ArgumentParser) -> None:
    """What the tables keep, and what is kept against late changes."""
    parser.add_argument(
        "--changelog-tables",
        action="store_true",
        help="beside each table T, an append-only table T__changes of every change applied "
        "(its op and commit ts): for readers who want the deletes",
    )
    parser.add_argument(
        "--guard-retention",
        type=float,
        default=None,
        metavar="SECONDS",
        help="on a stream whose partitions carry no watermarks (eventual mode), how long in "
        "commit time a delete is remembered so that an older change arriving late cannot "
        "bring its row back (default 86400: TiCDC's default gc-ttl)",
    )
    parser.add_argument(
        "--max-guards",
        type=int,
        default=None,
        metavar="N",
        help="deletes remembered against late older changes at most; past it the job stops "
        "(default 2000000)",
    )


def _run_replicate(args: argparse.Namespace) -> int:
    """apply TiCDC topics to Delta Lake or Iceberg tables, exactly once

    Read TiCDC messages from Kafka or a capture directory, decode them, and apply them to one
    lakehouse table per upstream table. Offsets and consumer state live in the checkpoint:
    stop it any time, run it again, it resumes exactly. Everything given is checked before
    Spark starts; exit status 2 on bad arguments or input (a run whose every record became a
    dead letter included), 1 on other failures.
    """
    from ticdc_spark.cli.progress import Totals
    from ticdc_spark.io.kafka import check_reachable, is_kafka_uri
    from ticdc_spark.spark.console import console_settings
    from ticdc_spark.spark.pipeline import run, take_lease
    from ticdc_spark.spark.preflight import preflight

    config, note = _replicate_config(args)
    preflight(config)  # (before Spark starts, and before anything is written)
    if is_kafka_uri(config.source):  # (an unreachable broker: one line, before Spark starts)
        check_reachable(config.source, config.source_options)
    if note:
        print(f"ticdc-spark replicate: {note}", file=sys.stderr)
    settings = console_settings(parse_key_values(args.spark_conf, "--spark-conf"))
    lease = take_lease(config.checkpoint, config.storage)  # (another job's: before Spark starts)
    try:
        spark = _session(config, settings, args.verbose)
    except BaseException:
        lease.release()
        raise
    totals = Totals()
    run(spark, config, on_batch=lambda r: totals.add(r, quiet=args.quiet), lease=lease)
    return totals.finish(config)


def _session(config: Any, settings: dict[str, str], verbose: bool) -> Any:
    """The run's session: the libraries and S3A settings its target and checkpoint need
    (``pipeline_session``), ``--spark-conf`` over them."""
    from ticdc_spark.spark.console import quiet, startup_hidden
    from ticdc_spark.spark.pipeline import pipeline_session

    with startup_hidden(verbose):  # (Ivy's report of the jars, the JVM's notes)
        spark = pipeline_session(config, settings, "ticdc-spark replicate")
    quiet(spark, verbose)
    return spark


def _replicate_config(args: argparse.Namespace) -> tuple[Any, str]:
    """The pipeline's configuration from the arguments, and what to say of the mode chosen
    when none is given and it is eventual."""
    from ticdc_spark.pipeline.capabilities import Capabilities
    from ticdc_spark.spark.pipeline import PipelineConfig

    options = codec_options(args)
    capabilities = Capabilities.of(args.protocol, options)
    mode = args.mode or capabilities.default_mode()
    why = "" if args.mode else capabilities.why_eventual()
    config = PipelineConfig(
        source=args.source,
        protocol=args.protocol,
        target=args.target,
        checkpoint=args.checkpoint,
        mode=mode,
        trigger=args.trigger,
        options=options,
        source_options=parse_key_values(args.source_option, "--source-option"),
        on_error=args.on_error,
        dead_letters=args.dead_letters,
        overlap=not args.serial_apply,
        table_filter=tuple(args.filter),
        kafka_source=args.kafka_source,
        storage=_storage(args),
        changelog_tables=args.changelog_tables,
    )
    if args.max_held_rows is not None:
        config.max_held_rows = args.max_held_rows
    if args.guard_retention is not None:
        config.guard_retention = args.guard_retention
    if args.max_guards is not None:
        config.max_guards = args.max_guards
    config.engine, config.apply_threads = args.engine, args.apply_threads
    config.planner = args.planner
    config.master = args.master
    return config, f"eventual mode: {why}" if why else ""


def add_verify(commands: Any) -> None:
    parser = subcommand(commands, "verify", _run_verify)
    parser.add_argument(
        "--target", required=True, metavar="delta:PATH|iceberg:CATALOG_URI#WAREHOUSE"
    )
    parser.add_argument("--expected", required=True, metavar="DIR")
    parser.add_argument(
        "--engine",
        choices=("spark", "embedded"),
        help="read the tables as this engine wrote them: spark (Spark SQL; the only reader "
        "of Delta tables with deletion vectors among the two) or embedded (delta-rs / "
        "pyiceberg, no JVM). Default: spark",
    )
    _storage_argument(parser)


def _run_verify(args: argparse.Namespace) -> int:
    """compare target tables with an expected state

    Compare every table of an expected state (written by produce) with the live rows of the
    target tables; exit 1 if any differs.
    """
    from ticdc_spark.spark.console import startup_hidden
    from ticdc_spark.testing.verify import target_sink, verify_sink

    with startup_hidden(getattr(args, "verbose", False)):  # (a Spark session, for spark tables)
        sink = target_sink(args.target, args.engine, _storage(args))
    reports = verify_sink(sink, args.expected)
    for report in reports:
        print(report.summary())
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILURE
