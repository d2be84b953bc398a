"""The protocol catalog: TiCDC's protocol names mapped to their codecs and options.

(Named a catalog so that "registry" means the Avro protocol's schema registry only.)

>>> from ticdc_spark.codec import make_decoder
>>> decoder = make_decoder("canal-json", {"enable-tidb-extension": "true"})
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ticdc_spark.codec.base import Decoder, Encoder
from ticdc_spark.codec.options import CommonOptions, parse_options
from ticdc_spark.errors import UnknownProtocolError
from ticdc_spark.filter import TableFilter

if TYPE_CHECKING:
    from ticdc_spark.storage import StorageOptions

__all__ = [
    "CodecSpec",
    "get_codec",
    "make_decoder",
    "make_encoder",
    "make_finisher",
    "protocols",
    "register",
]


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """What a protocol module registers: its options class and how to build its codecs."""

    name: str
    options: type[Any]
    encoder: Callable[[Any], Encoder]
    decoder: Callable[[Any], Decoder]
    aliases: tuple[str, ...] = ()
    # per column type, the canonical value a decoder gets back for a sent one, for protocols
    # that carry some values lossily (Debezium's DECIMAL as a double); None: every value
    carried: Callable[[Any], Callable[[Any], Any]] | None = None
    # whether the protocol can carry watermarks (consistent mode needs them) and DDL (when
    # not, a table follows the schemas its rows carry)
    watermarks: bool = True
    ddl: bool = True
    # the boolean codec option without which the protocol carries no watermarks (Canal-JSON:
    # enable-tidb-extension, TiCDC's TIDB_WATERMARK messages); "": none is needed
    watermarks_option: str = ""
    # whether every row carries its commit ts; when not (Avro tombstones, genuine Debezium),
    # the consumer places rows by their partition position (consume.Planner.place_by_position)
    commit_ts: bool = True
    # for protocols whose rows name a schema version that other messages bring (Simple):
    # the decoder of the Spark decode stage, which leaves rows it cannot finish in their
    # message, and the consumer's finisher of those rows (see codec.simple.pipeline)
    stage_decoder: Callable[..., Decoder] | None = None
    finisher: Callable[[Any], Any] | None = None

    def parse_options(self, values: Mapping[str, Any] | None) -> Any:
        return parse_options(self.options, values)


_CATALOG: dict[str, CodecSpec] = {}
# Protocol modules register themselves on import; these are imported on first lookup.
_BUILTIN_MODULES = (
    "ticdc_spark.codec.open_protocol",
    "ticdc_spark.codec.canal_json",
    "ticdc_spark.codec.debezium",
    "ticdc_spark.codec.simple",
    "ticdc_spark.codec.avro",
)


def register(spec: CodecSpec) -> CodecSpec:
    for name in (spec.name, *spec.aliases):
        _CATALOG[name] = spec
    return spec


def _load_builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def protocols() -> list[str]:
    """The registered protocol names (not aliases)."""
    _load_builtins()
    return sorted({spec.name for spec in _CATALOG.values()})


def get_codec(name: str) -> CodecSpec:
    """The codec registered under a TiCDC protocol name such as ``canal-json``."""
    _load_builtins()
    spec = _CATALOG.get(name.strip().lower())
    if spec is None:
        raise UnknownProtocolError(
            f"unknown protocol {name!r}; valid protocols: {', '.join(protocols())}"
        )
    return spec


def make_encoder(name: str, options: Mapping[str, Any] | None = None) -> Encoder:
    spec = get_codec(name)
    return spec.encoder(spec.parse_options(options))


def make_decoder(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    table_filter: TableFilter | None = None,
    stage: bool = False,
    storage: StorageOptions | None = None,
) -> Decoder:
    """A decoder of protocol ``name``; with ``table_filter``, the messages of tables it filters
    out are dropped before their rows are decoded (watermarks are always kept).  ``stage``:
    the decoder for the Spark decode stage (``CodecSpec.stage_decoder`` where there is one).
    ``storage``: where claim-check files are read besides the environment's settings."""
    spec = get_codec(name)
    build = (spec.stage_decoder if stage else None) or spec.decoder
    parsed = _parsed(spec, options, storage)
    if table_filter is None or table_filter.everything:
        return build(parsed)
    return build(parsed, table_filter=table_filter)  # type: ignore[call-arg]


def make_finisher(
    name: str, options: Mapping[str, Any] | None = None, storage: StorageOptions | None = None
) -> Any:
    """The consumer's finisher of wire rows for protocol ``name``, or None (most protocols:
    the decode stage finishes every row)."""
    spec = get_codec(name)
    return None if spec.finisher is None else spec.finisher(_parsed(spec, options, storage))


def _parsed(
    spec: CodecSpec, options: Mapping[str, Any] | None, storage: StorageOptions | None
) -> Any:
    """The codec's options, with the storage settings of its claim-check files."""
    parsed = spec.parse_options(options)
    if storage is not None and isinstance(parsed, CommonOptions):
        parsed = dataclasses.replace(parsed, storage=storage)
    return parsed
