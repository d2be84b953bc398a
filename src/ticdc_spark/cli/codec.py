"""The codec commands: ``decode`` (Kafka messages to normalized JSON events), ``encode``
(events to a capture file, placed as TiCDC places them) and ``sample`` (a bundled capture)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from importlib import resources
from typing import IO, Any

import orjson

from ticdc_spark.cli.args import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    BadInput,
    codec_arguments,
    codec_options,
    filter_argument,
    routing_arguments,
    subcommand,
    table_filter,
)
from ticdc_spark.codec import Message, make_decoder, make_encoder
from ticdc_spark.codec.simple.memo import describe_waiting
from ticdc_spark.dispatch import TopicRouter, make_dispatcher
from ticdc_spark.errors import CaptureError, ConfigError, DecodeError
from ticdc_spark.io.capture import read_capture, read_json_lines, read_values
from ticdc_spark.io.producer import CaptureStreamOutput, Producer
from ticdc_spark.normalized import event_from_json, event_to_json

__all__ = ["add_decode", "add_encode", "add_sample"]


def add_decode(commands: Any) -> None:
    parser = subcommand(commands, "decode", _run_decode)
    codec_arguments(parser)
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
    filter_argument(parser)


def _run_decode(args: argparse.Namespace) -> int:
    """decode Kafka messages (a capture file) into normalized JSON events

    Decode a capture file (JSON Lines of Kafka records) or, with --values, a file of message
    values one per line; print one normalized JSON event per line.
    """
    # (no registry needed: a capture may start with its schemas, as a registry's records)
    options = codec_options(args, registry_required=False)
    decoder = make_decoder(args.protocol, options, table_filter=table_filter(args))
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


def add_encode(commands: Any) -> None:
    parser = subcommand(commands, "encode", _run_encode)
    codec_arguments(parser)
    parser.add_argument("input", nargs="?", default="-", help="events file, or - for stdin")
    routing_arguments(parser, topic="ticdc", partitions=1, dispatcher="default")
    parser.add_argument("--output", default="-", help="capture file to write (default stdout)")
    filter_argument(parser)


def _run_encode(args: argparse.Namespace) -> int:
    """encode normalized JSON events into a capture file

    Read normalized JSON events (the output of decode), encode them with a protocol and
    TiCDC's dispatch rules, and write a capture file.
    """
    if args.partitions < 1:
        raise ConfigError("--partitions must be at least 1")
    encoder = make_encoder(args.protocol, codec_options(args))
    with _open_in(args.input) as source, _open_out(args.output) as out:
        producer = Producer(
            encoder,
            CaptureStreamOutput(out),
            router=TopicRouter(args.topic),
            dispatcher=make_dispatcher(args.dispatcher),
            partitions=args.partitions,
            table_filter=table_filter(args),
        )
        name = "stdin" if args.input == "-" else args.input
        for number, obj in read_json_lines(source, name):
            producer.send(event_from_json(obj, f"{name} line {number}"))
        producer.close()
    return EXIT_OK


def add_sample(commands: Any) -> None:
    parser = subcommand(commands, "sample", _run_sample)
    parser.add_argument(
        "--protocol",
        "-p",
        required=True,
        help="open-protocol, canal-json, debezium, simple or avro",
    )


def _run_sample(args: argparse.Namespace) -> int:
    """print a bundled sample capture of a protocol

    Write a small bundled capture (TiCDC output of a sysbench-like and an all-types table;
    Avro's starts with its schemas, as a registry's _schemas records) to stdout, to try
    decode on, for any protocol:
    ticdc-spark sample -p avro | ticdc-spark decode -p avro
    """
    name = f"{args.protocol}.capture.jsonl"
    sample = resources.files("ticdc_spark").joinpath("samples").joinpath(name)
    if not sample.is_file():
        raise ConfigError(f"no bundled sample for protocol {args.protocol!r}")
    sys.stdout.buffer.write(sample.read_bytes())
    return EXIT_OK


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
