"""``ticdc-spark``'s entry point: the parser of every command, and errors as exit statuses."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

from ticdc_spark.cli import bench, codec, pipeline
from ticdc_spark.cli.args import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInput
from ticdc_spark.errors import (
    CaptureError,
    ClusterUnreachable,
    ConfigError,
    DecodeError,
    EncodeError,
    KafkaUnreachable,
    RegistryError,
    StorageError,
)

__all__ = ["main"]


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
    except (
        RegistryError,
        KafkaUnreachable,
        ClusterUnreachable,
        StorageError,
    ) as exc:  # (a service)
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
    codec.add_decode(commands)
    codec.add_encode(commands)
    codec.add_sample(commands)
    bench.add_produce(commands)
    pipeline.add_replicate(commands)
    pipeline.add_verify(commands)
    bench.add_demo(commands)
    return parser
