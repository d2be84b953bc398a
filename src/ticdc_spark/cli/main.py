"""``ticdc-spark``'s entry point: the parser of every command; how a command ends (its
error as one line and an exit status) is :mod:`ticdc_spark.cli.report`'s."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ticdc_spark.cli import bench, codec, pipeline
from ticdc_spark.cli.args import EXIT_BAD_INPUT
from ticdc_spark.cli.report import failed, warnings_shown

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    verbose = bool(getattr(args, "verbose", False))
    with warnings_shown(args.command, verbose):
        try:
            return int(args.run(args))
        except (Exception, KeyboardInterrupt) as exc:
            return failed(args.command, exc, verbose)


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ticdc-spark",
        description="TiCDC's Kafka protocols for Python and Spark.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    codec.add_decode(commands)
    codec.add_encode(commands)
    codec.add_sample(commands)
    bench.add_produce(commands)
    pipeline.add_replicate(commands)
    pipeline.add_verify(commands)
    bench.add_demo(commands)
    return parser
