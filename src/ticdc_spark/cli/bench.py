"""The test bench's commands: ``produce`` (a generated workload sent as TiCDC would, with
its expected final state) and ``demo`` (the whole pipeline on one machine).  They run
:mod:`ticdc_spark.testing`, imported when a command runs."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ticdc_spark.cli.args import (
    EXIT_FAILURE,
    EXIT_OK,
    codec_arguments,
    codec_options,
    filter_argument,
    key_values_argument,
    parse_key_values,
    registry_argument,
    routing_arguments,
    subcommand,
    table_filter,
)
from ticdc_spark.codec import protocols
from ticdc_spark.testing.workload import Workload

__all__ = ["add_demo", "add_produce"]


def add_produce(commands: Any) -> None:
    parser = subcommand(commands, "produce", _run_produce)
    codec_arguments(parser)
    parser.add_argument(
        "--to",
        required=True,
        metavar="kafka://HOST:PORT|DIR",
        help="a Kafka broker, or a directory for capture files",
    )
    parser.add_argument(
        "--expected",
        required=True,
        metavar="DIR",
        help="where to write the expected final state of every table",
    )
    _workload_arguments(parser)
    routing_arguments(parser, topic="ticdc_{schema}", partitions=3, dispatcher="index-value")
    filter_argument(parser)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def _workload_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=1, help="workload seed (same seed, same data)")
    parser.add_argument("--rows", type=int, default=10000, help="row changes to generate")
    parser.add_argument("--tables", type=int, default=2, help="tables (sbtest/alltypes alternate)")
    parser.add_argument(
        "--ddl-every",
        type=int,
        default=50,
        help="an ALTER TABLE ADD COLUMN every N transactions (0: none)",
    )
    parser.add_argument(
        "--watermark-every",
        type=_at_least_one,
        default=16,
        help="a watermark (resolved ts, sent to every partition) every N transactions of 4 "
        "changes; TiCDC sends about one a second, so at 20,000 changes/s about 1,250",
    )


def _workload(args: argparse.Namespace) -> Workload:
    # Commit timestamps start now (the data depends only on the seed), so watermark lag
    # and commit-to-apply latency mean something.
    return Workload(
        seed=args.seed,
        rows=args.rows,
        tables=args.tables,
        ddl_every=args.ddl_every,
        watermark_every=args.watermark_every,
        start_ms=int(time.time() * 1000),
    )


_DEBEZIUM_PRODUCE = (
    "produce: debezium with enable-tidb-extension=true (each column's tidb_type: without it a "
    "BIGINT UNSIGNED past 2^63-1 reads back negative); -o enable-tidb-extension=false sends "
    "TiCDC's default"
)


def _run_produce(args: argparse.Namespace) -> int:
    """generate a workload and send it as TiCDC messages

    Generate a deterministic workload (sysbench-like and all-types tables: inserts, updates
    including key changes, deletes, DDL) and send it encoded with a protocol and TiCDC's
    dispatch rules to Kafka or a capture directory; write the expected final table states
    for `verify`.
    """
    from ticdc_spark.testing.produce import produce_workload

    options = codec_options(args)
    if args.protocol == "debezium" and "enable-tidb-extension" not in options:
        options["enable-tidb-extension"] = "true"  # (docs/protocols.md, Debezium)
        print(_DEBEZIUM_PRODUCE, file=sys.stderr)
    result = produce_workload(
        _workload(args),
        args.protocol,
        options,
        args.to,
        expected=args.expected,
        topic=args.topic,
        partitions=args.partitions,
        dispatcher=args.dispatcher,
        table_filter=table_filter(args),
    )
    print(
        f"produced {result.messages} messages ({result.rows} row changes, {result.ddl} DDL) "
        f"to {result.destination}; expected state in {args.expected}",
        file=sys.stderr,
    )
    return EXIT_OK


def add_demo(commands: Any) -> None:
    parser = subcommand(commands, "demo", _run_demo)
    parser.add_argument(
        "--protocol", "-p", default="canal-json", help=f"one of {', '.join(protocols())}"
    )
    key_values_argument(
        parser,
        "--option",
        "-o",
        help="a codec option (TiCDC name) on top of the demo's own, e.g. "
        "encoding-format=avro for simple (repeatable)",
    )
    registry_argument(parser, "default: one this command serves for the run")
    parser.add_argument(
        "--workdir",
        help="where to put captures, tables and checkpoints, kept there (default: a new "
        "temporary directory, removed at the end unless --keep or the check fails)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary directory (tables, checkpoint, captures) and say where",
    )
    _workload_arguments(parser)
    parser.set_defaults(rows=20000, tables=4, ddl_every=40)


def _run_demo(args: argparse.Namespace) -> int:
    """run the whole pipeline on a laptop and check the result

    Generate a workload, encode it as TiCDC would (capture files, no broker needed),
    replicate it with Spark into Delta tables, and verify the tables equal the generated
    state.
    """
    from ticdc_spark.testing.demo import run_demo

    # (a registry given must be one Spark's workers can reach; without one, avro gets one)
    options = codec_options(args) if args.schema_registry else parse_key_values(args.option)
    ok = run_demo(
        args.protocol,
        _workload(args),
        args.workdir,
        registry=args.schema_registry,
        options=options,
        keep=args.keep,
    )
    return EXIT_OK if ok else EXIT_FAILURE
