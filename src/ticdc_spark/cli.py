"""The ``ticdc-spark`` command line.

    ticdc-spark decode --protocol canal-json --values messages.jsonl
    ticdc-spark decode --protocol open-protocol capture.jsonl
    ticdc-spark encode --protocol canal-json --option enable-tidb-extension=true events.jsonl

Exit status: 0 on success, 2 on bad input or bad usage (the message names the line and the
reason), 1 on any other failure.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

import orjson

from ticdc_spark.codec import Message, make_decoder, make_encoder, protocols
from ticdc_spark.dispatch import TopicRouter, make_dispatcher, place
from ticdc_spark.errors import CaptureError, ConfigError, DecodeError, EncodeError
from ticdc_spark.io.capture import read_capture, read_values, write_capture
from ticdc_spark.model import Event, RowChange, physical_ms
from ticdc_spark.normalized import event_from_json, event_to_json

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
    return parser


def _codec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocol",
        "-p",
        required=True,
        help=f"TiCDC protocol name: {', '.join(protocols())}",
    )
    parser.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a TiCDC codec option such as enable-tidb-extension=true (repeatable)",
    )


def parse_key_values(pairs: Iterable[str]) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; raises ConfigError on a missing '='."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"option {pair!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


# --------------------------------------------------------------------------------------------
# decode


def _add_decode(commands: Any) -> None:
    parser = commands.add_parser(
        "decode",
        help="decode Kafka messages (a capture file) into normalized JSON events",
        description="Decode a capture file (JSON Lines of Kafka records) or, with --values, a "
        "file of message values one per line; print one normalized JSON event per line.",
    )
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
    parser.set_defaults(run=_run_decode)


def _run_decode(args: argparse.Namespace) -> int:
    decoder = make_decoder(args.protocol, parse_key_values(args.option))
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
                continue
            for event in events:
                out.write(orjson.dumps(event_to_json(event)) + b"\n")
    if skipped:
        print(f"ticdc-spark decode: {skipped} bad record(s) skipped", file=sys.stderr)
    return EXIT_OK


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
    parser = commands.add_parser(
        "encode",
        help="encode normalized JSON events into a capture file",
        description="Read normalized JSON events (the output of decode), encode them with a "
        "protocol and TiCDC's dispatch rules, and write a capture file.",
    )
    _codec_arguments(parser)
    parser.add_argument("input", nargs="?", default="-", help="events file, or - for stdin")
    parser.add_argument("--topic", default="ticdc", help="topic expression, e.g. cdc_{schema}")
    parser.add_argument("--partitions", type=int, default=1, help="partitions per topic")
    parser.add_argument(
        "--dispatcher",
        default="default",
        help="partition dispatcher: default, table, index-value, ts, or columns:a,b",
    )
    parser.add_argument("--output", default="-", help="capture file to write (default stdout)")
    parser.set_defaults(run=_run_encode)


def _run_encode(args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise ConfigError("--partitions must be at least 1")
    encoder = make_encoder(args.protocol, parse_key_values(args.option))
    producer = _CaptureProducer(
        encoder, TopicRouter(args.topic), make_dispatcher(args.dispatcher), args.partitions
    )
    with _open_in(args.input) as source, _open_out(args.output) as out:
        name = "stdin" if args.input == "-" else args.input
        for number, line in enumerate(source, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise BadInput(f"{name} line {number}: not JSON ({exc})") from None
            event = event_from_json(obj, f"{name} line {number}")
            write_capture(producer.send(event), out)
        write_capture(producer.flush(), out)
    return EXIT_OK


class _CaptureProducer:
    """Encodes events in order, batching rows per partition, numbering offsets per partition.

    Rows wait in per-partition batches until a non-row event (or the end) flushes them, the
    way TiCDC sends every row before a DDL or watermark that follows it.
    """

    def __init__(self, encoder: Any, router: TopicRouter, dispatcher: Any, partitions: int):
        self.encoder = encoder
        self.router = router
        self.dispatcher = dispatcher
        self.partitions = partitions
        self.pending: dict[tuple[str, int], list[Event]] = {}
        self.offsets: dict[tuple[str, int], int] = {}
        self.topics: list[str] = []

    def send(self, event: Event) -> list[Message]:
        if isinstance(event, RowChange):
            topic = self._topic(event.database, event.table)
            partition = self.dispatcher.partition(event, self.partitions)
            self.pending.setdefault((topic, partition), []).append(event)
            return []
        out = self.flush()
        for message in self.encoder.encode([event]):
            out.extend(self._place(message, None, _event_ms(event)))
        return out

    def flush(self) -> list[Message]:
        out: list[Message] = []
        for (_topic, partition), rows in self.pending.items():
            for message in self.encoder.encode(rows):
                out.extend(self._place(message, partition, _event_ms(rows[0])))
        self.pending.clear()
        return out

    def _topic(self, database: str, table: str) -> str:
        topic = self.router.topic(database, table)
        if topic not in self.topics:
            self.topics.append(topic)
        return topic

    def _place(self, message: Message, partition: int | None, ms: int) -> list[Message]:
        if message.route.value == "all-topics":
            topics = self.topics or [self._topic("", "")]
        else:
            topics = [self._topic(message.database, message.table)]
        placed = []
        for topic in topics:
            for m in place([message], topic, self.partitions, partition):
                slot = (topic, m.partition or 0)
                offset = self.offsets.get(slot, 0)
                self.offsets[slot] = offset + 1
                placed.append(_with(m, offset=offset, timestamp=ms))
        return placed


def _with(message: Message, **changes: Any) -> Message:
    from dataclasses import replace

    return replace(message, **changes)


def _event_ms(event: Event) -> int:
    ts = getattr(event, "commit_ts", None)
    if ts is None:
        ts = getattr(event, "ts", 0)
    return physical_ms(int(ts or 0))


# --------------------------------------------------------------------------------------------
# sample


def _add_sample(commands: Any) -> None:
    parser = commands.add_parser(
        "sample",
        help="print a bundled sample capture of a protocol",
        description="Write a small bundled capture (TiCDC output of a sysbench-like and an "
        "all-types table) to stdout, to try decode on: "
        "ticdc-spark sample -p canal-json | ticdc-spark decode -p canal-json",
    )
    parser.add_argument("--protocol", "-p", required=True, help="open-protocol or canal-json")
    parser.set_defaults(run=_run_sample)


def _run_sample(args: argparse.Namespace) -> int:
    from importlib import resources

    name = f"{args.protocol}.capture.jsonl"
    sample = resources.files("ticdc_spark").joinpath("samples").joinpath(name)
    if not sample.is_file():
        raise ConfigError(f"no bundled sample for protocol {args.protocol!r}")
    sys.stdout.buffer.write(sample.read_bytes())
    return EXIT_OK


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
