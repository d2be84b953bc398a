"""The ``ticdc-spark`` command line.

    ticdc-spark decode --protocol canal-json --values messages.jsonl
    ticdc-spark decode --protocol open-protocol capture.jsonl
    ticdc-spark encode --protocol canal-json --option enable-tidb-extension=true events.jsonl
    ticdc-spark decode -p canal-json --filter 'shop.*' --filter '!shop.tmp_*' capture.jsonl

Exit status: 0 on success, 2 on bad input or bad usage (the message names the line and the
reason), 1 on any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import orjson

from ticdc_spark.codec import Message, make_decoder, make_encoder, protocols
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.errors import (
    CaptureError,
    ConfigError,
    DecodeError,
    EncodeError,
    RegistryError,
    StorageError,
)
from ticdc_spark.filter import TableFilter
from ticdc_spark.io.capture import read_capture, read_json_lines, read_values
from ticdc_spark.normalized import event_from_json, event_to_json
from ticdc_spark.produce import CaptureStreamOutput, Producer

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Raised inside a command to stop with exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return int(args.run(args))
    except (BadInput, ConfigError, CaptureError, DecodeError, EncodeError) as exc:
        print(f"ticdc-spark {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (RegistryError, StorageError) as exc:  # (the input may be fine: a store is down)
        print(f"ticdc-spark {args.command}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:  # e.g. piped into `head`
        with contextlib.suppress(Exception):
            sys.stdout = None
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ticdc-spark",
        description="TiCDC's Kafka protocols for Python and Spark.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_decode(commands)
    _add_encode(commands)
    _add_sample(commands)
    _add_produce(commands)
    _add_replicate(commands)
    _add_verify(commands)
    _add_demo(commands)
    return parser


def _subcommand(commands: Any, name: str, run: Callable[[argparse.Namespace], int]) -> Any:
    """Add the subcommand ``name`` that ``run`` carries out. The first paragraph of
    ``run``'s docstring is the command's one-line help, the rest its description."""
    summary, _, description = inspect.cleandoc(run.__doc__ or "").partition("\n\n")
    parser = commands.add_parser(name, help=summary, description=description)
    parser.set_defaults(run=run)
    return parser


def _codec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocol",
        "-p",
        required=True,
        help=f"TiCDC protocol name: {', '.join(protocols())}",
    )
    _key_values_argument(
        parser,
        "--option",
        "-o",
        help="a TiCDC codec option such as enable-tidb-extension=true (repeatable)",
    )
    _registry_argument(parser)


def _registry_argument(parser: argparse.ArgumentParser) -> None:
    """TiCDC's --schema-registry (the avro protocol's codec option schema-registry)."""
    parser.add_argument(
        "--schema-registry",
        metavar="URL",
        help="Confluent Schema Registry for the avro protocol: http(s)://[user:password@]"
        "host:port (URL-encoded), or mock://NAME (confluent-kafka's in-process registry)",
    )


def _codec_options(args: argparse.Namespace) -> dict[str, str]:
    """The --option pairs, with --schema-registry as the option schema-registry."""
    options = parse_key_values(args.option)
    if getattr(args, "schema_registry", None):
        options["schema-registry"] = args.schema_registry
    return options


def _key_values_argument(parser: argparse.ArgumentParser, *flags: str, help: str) -> None:
    """A repeatable KEY=VALUE flag; read its list with parse_key_values."""
    parser.add_argument(*flags, action="append", default=[], metavar="KEY=VALUE", help=help)


def _filter_argument(parser: argparse.ArgumentParser) -> None:
    """The repeatable --filter RULE flag; read it with _table_filter."""
    parser.add_argument(
        "--filter",
        "-f",
        action="append",
        default=[],
        metavar="RULE",
        help="a TiCDC table-filter rule such as 'db.*' or '!db.tmp_*' (repeatable; the last "
        "rule a table matches decides; names are case-insensitive; default: every table)",
    )


def _table_filter(args: argparse.Namespace) -> TableFilter | None:
    """The --filter rules as a TableFilter (None: no rules, every table)."""
    return TableFilter(args.filter) if args.filter else None


def parse_key_values(pairs: Iterable[str], flag: str = "--option") -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; raises ConfigError on a missing '='.

    The error shows at most the text's first word: a malformed pair may hold a secret
    (``kafka.sasl.password secret``)."""
    out: dict[str, str] = {}
    for number, pair in enumerate(pairs, 1):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            words = pair.split()  # "KEY VALUE": the key is safe to show, a lone word may not be
            shown = f" ({words[0]!r} ...)" if len(words) > 1 and "=" not in words[0] else ""
            raise ConfigError(f"{flag} number {number}{shown} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


# --------------------------------------------------------------------------------------------
# decode


def _add_decode(commands: Any) -> None:
    parser = _subcommand(commands, "decode", _run_decode)
    _codec_arguments(parser)
    parser.add_argument("input", nargs="?", default="-", help="capture file, or - for stdin")
    parser.add_argument(
        "--values",
        action="store_true",
        help="the input holds raw message values, one per line (JSON protocols)",
    )
    parser.add_argument(
        "--on-error",
        choices=("stop", "skip"),
        default="stop",
        help="stop at the first bad record (exit 2), or report it and go on",
    )
    parser.add_argument("--output", default="-", help="where to write events (default stdout)")
    _filter_argument(parser)


def _run_decode(args: argparse.Namespace) -> int:
    """decode Kafka messages (a capture file) into normalized JSON events

    Decode a capture file (JSON Lines of Kafka records) or, with --values, a file of message
    values one per line; print one normalized JSON event per line.
    """
    decoder = make_decoder(args.protocol, _codec_options(args), table_filter=_table_filter(args))
    skipped = 0
    with _open_in(args.input) as source, _open_out(args.output) as out:
        name = "stdin" if args.input == "-" else args.input
        reader = read_values(source, name) if args.values else read_capture(source, name)
        for message in _guard_capture(reader, args.on_error):
            try:
                events = decoder.decode(message)
            except DecodeError as exc:
                if args.on_error == "stop":
                    raise
                skipped += 1
                print(f"ticdc-spark decode: skipped: {exc}", file=sys.stderr)
                # (a row held for its schema that does not fit it: the message that released
                # it decoded to good events too, which must not go with it)
                events = getattr(exc, "events", [])
            for event in events:
                out.write(orjson.dumps(event_to_json(event)) + b"\n")
    if skipped:
        print(f"ticdc-spark decode: {skipped} bad record(s) skipped", file=sys.stderr)
    return _report_waiting(decoder)


def _report_waiting(decoder: Any) -> int:
    """Rows a decoder still holds at the end of the input (Simple: their schema never came)
    are reported, and the exit code says so: they were not lost silently."""
    waiting = getattr(decoder, "waiting", None)
    held = waiting() if waiting is not None else []
    if not held:
        return EXIT_OK
    from ticdc_spark.codec.simple.memo import describe_waiting

    print(f"ticdc-spark decode: not decoded, no schema: {describe_waiting(held)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _guard_capture(reader: Iterator[Message], on_error: str) -> Iterator[Message]:
    """Pass records through; with --on-error skip, report bad capture lines and go on."""
    while True:
        try:
            yield next(reader)
        except StopIteration:
            return
        except CaptureError as exc:
            if on_error == "stop":
                raise
            print(f"ticdc-spark decode: skipped: {exc}", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# encode


def _add_encode(commands: Any) -> None:
    parser = _subcommand(commands, "encode", _run_encode)
    _codec_arguments(parser)
    parser.add_argument("input", nargs="?", default="-", help="events file, or - for stdin")
    _routing_arguments(parser, topic="ticdc", partitions=1, dispatcher="default")
    parser.add_argument("--output", default="-", help="capture file to write (default stdout)")
    _filter_argument(parser)


def _run_encode(args: argparse.Namespace) -> int:
    """encode normalized JSON events into a capture file

    Read normalized JSON events (the output of decode), encode them with a protocol and
    TiCDC's dispatch rules, and write a capture file.
    """
    if args.partitions < 1:
        raise ConfigError("--partitions must be at least 1")
    encoder = make_encoder(args.protocol, _codec_options(args))
    with _open_in(args.input) as source, _open_out(args.output) as out:
        producer = Producer(
            encoder,
            CaptureStreamOutput(out),
            router=TopicRouter(args.topic),
            dispatcher=make_dispatcher(args.dispatcher),
            partitions=args.partitions,
            table_filter=_table_filter(args),
        )
        name = "stdin" if args.input == "-" else args.input
        for number, obj in read_json_lines(source, name):
            producer.send(event_from_json(obj, f"{name} line {number}"))
        producer.close()
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# sample


def _add_sample(commands: Any) -> None:
    parser = _subcommand(commands, "sample", _run_sample)
    parser.add_argument("--protocol", "-p", required=True, help="open-protocol or canal-json")


def _run_sample(args: argparse.Namespace) -> int:
    """print a bundled sample capture of a protocol

    Write a small bundled capture (TiCDC output of a sysbench-like and an all-types table)
    to stdout, to try decode on:
    ticdc-spark sample -p canal-json | ticdc-spark decode -p canal-json
    """
    from importlib import resources

    name = f"{args.protocol}.capture.jsonl"
    sample = resources.files("ticdc_spark").joinpath("samples").joinpath(name)
    if not sample.is_file():
        raise ConfigError(f"no bundled sample for protocol {args.protocol!r}")
    sys.stdout.buffer.write(sample.read_bytes())
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# produce


def _add_produce(commands: Any) -> None:
    parser = _subcommand(commands, "produce", _run_produce)
    _codec_arguments(parser)
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
    _routing_arguments(parser, topic="ticdc_{schema}", partitions=3, dispatcher="index-value")
    _filter_argument(parser)


def _routing_arguments(
    parser: argparse.ArgumentParser, *, topic: str, partitions: int, dispatcher: str
) -> None:
    """Where events go: TiCDC's topic expression, partition count and dispatcher."""
    parser.add_argument("--topic", default=topic, help="topic expression, e.g. cdc_{schema}")
    parser.add_argument("--partitions", type=int, default=partitions, help="partitions per topic")
    parser.add_argument(
        "--dispatcher",
        default=dispatcher,
        help="partition dispatcher: default, table, index-value, ts, or columns:a,b",
    )


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


def _workload(args: argparse.Namespace) -> Any:
    import time

    from ticdc_spark.workload import Workload

    # Commit timestamps start now (the data depends only on the seed), so watermark lag
    # and commit-to-apply latency mean something.
    return Workload(
        seed=args.seed,
        rows=args.rows,
        tables=args.tables,
        ddl_every=args.ddl_every,
        start_ms=int(time.time() * 1000),
    )


def _run_produce(args: argparse.Namespace) -> int:
    """generate a workload and send it as TiCDC messages

    Generate a deterministic workload (sysbench-like and all-types tables: inserts, updates
    including key changes, deletes, DDL) and send it encoded with a protocol and TiCDC's
    dispatch rules to Kafka or a capture directory; write the expected final table states
    for `verify`.
    """
    from ticdc_spark.produce import produce_workload

    result = produce_workload(
        _workload(args),
        args.protocol,
        _codec_options(args),
        args.to,
        expected=args.expected,
        topic=args.topic,
        partitions=args.partitions,
        dispatcher=args.dispatcher,
        table_filter=_table_filter(args),
    )
    print(
        f"produced {result.messages} messages ({result.rows} row changes, {result.ddl} DDL) "
        f"to {result.destination}; expected state in {args.expected}",
        file=sys.stderr,
    )
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# replicate


def _add_replicate(commands: Any) -> None:
    parser = _subcommand(commands, "replicate", _run_replicate)
    parser.add_argument("--source", required=True, metavar="kafka://HOST:PORT/TOPIC[,TOPIC]|DIR")
    parser.add_argument("--protocol", "-p", required=True)
    parser.add_argument(
        "--target", required=True, metavar="delta:PATH|iceberg:CATALOG_URI#WAREHOUSE"
    )
    parser.add_argument("--checkpoint", required=True, metavar="DIR")
    parser.add_argument(
        "--mode",
        choices=("consistent", "eventual"),
        default=None,
        help="consistent: apply only up to the global watermark (snapshots of "
        "upstream); eventual: apply at once (streams without watermarks). Default: "
        "consistent, or eventual for protocols without watermarks (avro)",
    )
    parser.add_argument(
        "--trigger",
        default="once",
        metavar="SECONDS|once",
        help="micro-batch interval, or once: apply what is there and stop",
    )
    _key_values_argument(parser, "--option", "-o", help="a codec option (TiCDC name), repeatable")
    _registry_argument(parser)
    _key_values_argument(
        parser,
        "--source-option",
        help="a source option, e.g. maxOffsetsPerTrigger=10000 or "
        "kafka.security.protocol=SASL_SSL (repeatable)",
    )
    parser.add_argument(
        "--on-error",
        choices=("dead-letter", "stop"),
        default="dead-letter",
        help="route bad messages to the dead-letter directory, or stop",
    )
    parser.add_argument(
        "--dead-letters",
        metavar="DIR",
        help="dead-letter directory (default CHECKPOINT/dead-letters)",
    )
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
    _key_values_argument(
        parser,
        "--spark-conf",
        help="a Spark setting for the local session, e.g. spark.driver.memory=8g (repeatable)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-batch progress lines")
    _filter_argument(parser)
    _storage_argument(parser)


def _refuse_remote_checkpoint(args: argparse.Namespace) -> None:
    """The checkpoint and the dead letters are local directories for now (a URI would be
    taken as a relative path named ``s3:``)."""
    from ticdc_spark.storage import is_local

    for flag, value in (("--checkpoint", args.checkpoint), ("--dead-letters", args.dead_letters)):
        if value and not is_local(value):
            raise ConfigError(f"{flag} must be a local directory for now, not {value!r}")


def _storage_argument(parser: argparse.ArgumentParser) -> None:
    _key_values_argument(
        parser,
        "--storage-option",
        help="an object-store setting over the environment's, e.g. AWS_ENDPOINT_URL=http://"
        "127.0.0.1:9000 or AWS_REGION=eu-west-1 (repeatable; see docs/pipeline.md)",
    )


def _storage(args: argparse.Namespace) -> Any:
    from ticdc_spark.storage import StorageOptions, parse_storage_options

    return StorageOptions.from_environment(parse_storage_options(args.storage_option))


def _run_replicate(args: argparse.Namespace) -> int:
    """apply TiCDC topics to Delta Lake or Iceberg tables, exactly once

    Read TiCDC messages from Kafka or a capture directory, decode them, and apply them to one
    lakehouse table per upstream table. Offsets and consumer state live in the checkpoint:
    stop it any time, run it again, it resumes exactly.
    """
    from ticdc_spark.spark.pipeline import PipelineConfig, check_mode, default_mode, run
    from ticdc_spark.spark.session import local_session

    config = PipelineConfig(
        source=args.source,
        protocol=args.protocol,
        target=args.target,
        checkpoint=args.checkpoint,
        mode=args.mode or default_mode(args.protocol),
        trigger=args.trigger,
        options=_codec_options(args),
        source_options=parse_key_values(args.source_option, "--source-option"),
        on_error=args.on_error,
        dead_letters=args.dead_letters,
        overlap=not args.serial_apply,
        table_filter=tuple(args.filter),
        storage=_storage(args),
    )
    if args.max_held_rows is not None:
        config.max_held_rows = args.max_held_rows
    TableFilter(config.table_filter)  # (a bad rule: exit 2 before Spark starts)
    _refuse_remote_checkpoint(args)
    check_mode(config.protocol, config.mode)
    settings = parse_key_values(args.spark_conf, "--spark-conf")
    spark = local_session("ticdc-spark replicate", settings=settings)
    spark.sparkContext.setLogLevel("ERROR")
    totals = _Totals()
    run(spark, config, on_batch=lambda r: totals.add(r, quiet=args.quiet))
    print(totals.summary(), file=sys.stderr)
    return EXIT_OK


class _Totals:
    """Progress: one line per micro-batch, and a summary at the end."""

    def __init__(self) -> None:
        self.batches = self.rows = self.dead = self.ddl = 0
        self.seconds = 0.0

    def add(self, report: Any, quiet: bool = False) -> None:
        self.batches += 1
        self.rows += report.rows_applied
        self.dead += report.dead_letters
        self.ddl += report.ddl
        self.seconds += report.seconds
        if not quiet:
            print(report.line(), file=sys.stderr, flush=True)

    def summary(self) -> str:
        return (
            f"{self.batches} batches, {self.rows} rows applied, {self.ddl} DDL, "
            f"{self.dead} dead letters"
        )


# --------------------------------------------------------------------------------------------
# verify


def _add_verify(commands: Any) -> None:
    parser = _subcommand(commands, "verify", _run_verify)
    parser.add_argument(
        "--target", required=True, metavar="delta:PATH|iceberg:CATALOG_URI#WAREHOUSE"
    )
    parser.add_argument("--expected", required=True, metavar="DIR")
    _storage_argument(parser)


def _run_verify(args: argparse.Namespace) -> int:
    """compare target tables with an expected state

    Compare every table of an expected state (written by produce) with the live rows of the
    target tables; exit 1 if any differs.
    """
    from ticdc_spark.spark.pipeline import make_sink
    from ticdc_spark.verify import verify_sink

    reports = verify_sink(make_sink(args.target, storage=_storage(args)), args.expected)
    for report in reports:
        print(report.summary())
    return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILURE


# --------------------------------------------------------------------------------------------
# demo


def _add_demo(commands: Any) -> None:
    parser = _subcommand(commands, "demo", _run_demo)
    parser.add_argument("--protocol", "-p", default="canal-json")
    _key_values_argument(
        parser,
        "--option",
        "-o",
        help="a codec option (TiCDC name) on top of the demo's own, e.g. "
        "encoding-format=avro for simple (repeatable)",
    )
    _registry_argument(parser)
    parser.add_argument(
        "--workdir",
        help="where to put captures, tables and checkpoints (default: a new temporary directory)",
    )
    _workload_arguments(parser)
    parser.set_defaults(rows=20000, tables=4, ddl_every=40)


def _run_demo(args: argparse.Namespace) -> int:
    """run the whole pipeline on a laptop and check the result

    Generate a workload, encode it as TiCDC would (capture files, no broker needed),
    replicate it with Spark into Delta tables, and verify the tables equal the generated
    state.
    """
    from ticdc_spark.demo import run_demo

    options = parse_key_values(args.option)
    ok = run_demo(
        args.protocol,
        _workload(args),
        args.workdir,
        registry=args.schema_registry,
        options=options,
    )
    return EXIT_OK if ok else EXIT_FAILURE


# --------------------------------------------------------------------------------------------
# files


@contextlib.contextmanager
def _open_in(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        yield handle


@contextlib.contextmanager
def _open_out(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with open(path, "wb") as handle:
        yield handle


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
