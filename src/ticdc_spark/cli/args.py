"""What the command groups share: exit statuses, the subcommand from its run function's
docstring, and the arguments several commands take (codec, registry, KEY=VALUE options,
table filter, routing)."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ticdc_spark.codec import get_codec, protocols
from ticdc_spark.errors import ConfigError
from ticdc_spark.filter import TableFilter

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILURE",
    "EXIT_OK",
    "BadInput",
    "codec_arguments",
    "codec_options",
    "filter_argument",
    "key_values_argument",
    "parse_key_values",
    "registry_argument",
    "routing_arguments",
    "subcommand",
    "table_filter",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Raised inside a command to stop with exit status 2."""


def subcommand(commands: Any, name: str, run: Callable[[argparse.Namespace], int]) -> Any:
    """Add the subcommand ``name`` that ``run`` carries out. The first paragraph of
    ``run``'s docstring is the command's one-line help, the rest its description.  Every
    command takes ``--verbose``, and its help shows each option's default."""
    summary, _, description = inspect.cleandoc(run.__doc__ or "").partition("\n\n")
    parser = commands.add_parser(
        name, help=summary, description=description, formatter_class=_DefaultsShown
    )
    parser.set_defaults(run=run)
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="on an error, its whole trace (Python's and Spark's), not one line",
    )
    return parser


class _DefaultsShown(argparse.HelpFormatter):
    """Each option's default after its help, where it has one worth showing (not None,
    false or empty) and the help does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            not action.option_strings
            or "(default" in text
            or "default:" in text
            or action.default in (None, False, [], argparse.SUPPRESS)
        ):
            return text
        return f"{text} (default: %(default)s)"


def codec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocol",
        "-p",
        required=True,
        help=f"TiCDC protocol name: {', '.join(protocols())}",
    )
    key_values_argument(
        parser,
        "--option",
        "-o",
        help="a TiCDC codec option such as enable-tidb-extension=true (repeatable)",
    )
    registry_argument(parser)


def registry_argument(
    parser: argparse.ArgumentParser, when_absent: str = "required with it"
) -> None:
    """TiCDC's --schema-registry (the avro protocol's codec option schema-registry)."""
    parser.add_argument(
        "--schema-registry",
        metavar="URL",
        help=f"Confluent Schema Registry for the avro protocol ({when_absent}): "
        "http(s)://[user:password@]host:port (URL-encoded)",
    )


def codec_options(args: argparse.Namespace, registry_required: bool = True) -> dict[str, str]:
    """The --option pairs, with --schema-registry as the option schema-registry; refused
    when the protocol or an option is unknown or malformed, or the protocol needs a
    registry and has none that other processes can reach (see check_shared_registry;
    ``registry_required`` False: none is needed, the input may carry the schemas)."""
    options = parse_key_values(args.option)
    if getattr(args, "schema_registry", None):
        options["schema-registry"] = args.schema_registry
    spec = get_codec(args.protocol)
    from ticdc_spark.codec.avro.registry import check_shared_registry  # (the avro codec: late)

    check_shared_registry(spec.parse_options(options), spec.name, registry_required)
    return options


def key_values_argument(parser: argparse.ArgumentParser, *flags: str, help: str) -> None:
    """A repeatable KEY=VALUE flag; read its list with parse_key_values."""
    parser.add_argument(*flags, action="append", default=[], metavar="KEY=VALUE", help=help)


def filter_argument(parser: argparse.ArgumentParser) -> None:
    """The repeatable --filter RULE flag; read it with table_filter."""
    parser.add_argument(
        "--filter",
        "-f",
        action="append",
        default=[],
        metavar="RULE",
        help="a TiCDC table-filter rule such as 'db.*' or '!db.tmp_*' (repeatable; the last "
        "rule a table matches decides; names are case-insensitive; default: every table)",
    )


def table_filter(args: argparse.Namespace) -> TableFilter | None:
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


def routing_arguments(
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
