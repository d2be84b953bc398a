"""Codec options: one frozen dataclass per protocol, fields named after TiCDC's option keys.

A field ``max_batch_size`` is the option ``max-batch-size``.  :func:`parse_options` reads a
mapping of strings (from ``--option k=v`` or a sink URI's query) into such a dataclass,
rejecting unknown keys with the list of valid ones, and checking choices and conflicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar, get_type_hints

from ticdc_spark.errors import ConfigError
from ticdc_spark.storage.options import StorageOptions  # (get_type_hints needs it at run time)

__all__ = ["CommonOptions", "choice", "option_names", "parse_options"]

T = TypeVar("T")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def choice(default: str, *choices: str, aliases: tuple[str, ...] = ()) -> Any:
    """A string option restricted to ``choices``."""
    return dataclasses.field(default=default, metadata={"choices": choices, "aliases": aliases})


def alias(default: Any, *aliases: str) -> Any:
    """An option also accepted under other (older) TiCDC names."""
    return dataclasses.field(default=default, metadata={"aliases": aliases})


@dataclasses.dataclass(frozen=True, slots=True)
class CommonOptions:
    """Options every protocol accepts (TiCDC's sink and codec settings)."""

    max_message_bytes: int = 10 * 1024 * 1024
    enable_tidb_extension: bool = False
    large_message_handle_option: str = choice("none", "none", "handle-key-only", "claim-check")
    large_message_handle_compression: str = choice("none", "none", "snappy", "lz4")
    claim_check_storage_uri: str = ""
    delete_only_output_handle_key_columns: bool = False
    # Where claim-check files are read and written besides the environment (replicate's
    # --storage-option): given by the pipeline (make_decoder's ``storage``), never an option.
    storage: StorageOptions | None = dataclasses.field(
        default=None, repr=False, compare=False, metadata={"internal": True}
    )

    def __post_init__(self) -> None:
        if self.max_message_bytes <= 0:
            raise ConfigError("max-message-bytes must be positive")
        if self.large_message_handle_option == "claim-check" and not self.claim_check_storage_uri:
            raise ConfigError(
                "large-message-handle-option=claim-check needs claim-check-storage-uri "
                "(for example file:///var/lib/claim-check)"
            )


def option_names(cls: type[Any]) -> list[str]:
    """The TiCDC option keys a dataclass accepts, kebab-case."""
    return sorted(_kebab(f.name) for f in _options(cls))


def _options(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are options (not the pipeline's own settings)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def parse_options(cls: type[T], values: Mapping[str, Any] | None = None) -> T:
    """Build options dataclass ``cls`` from TiCDC-style keys (``enable-tidb-extension``)."""
    fields = {f.name: f for f in _options(cls)}
    lookup = {_kebab(name): name for name in fields}
    for name, f in fields.items():
        for other in f.metadata.get("aliases", ()):
            lookup[other] = name
    hints = get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for key, raw in (values or {}).items():
        found = lookup.get(key.strip().lower().replace("_", "-"))
        if found is None:
            valid = ", ".join(option_names(cls))
            raise ConfigError(f"unknown option {key!r} for {_protocol_of(cls)}; valid: {valid}")
        kwargs[found] = _convert(key, raw, hints[found], fields[found])
    try:
        return cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - guarded by the lookup above
        raise ConfigError(str(exc)) from None


def _convert(key: str, raw: Any, hint: Any, f: dataclasses.Field[Any]) -> Any:
    if hint is bool:
        return _to_bool(key, raw)
    if hint is int:
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"option {key} wants an integer, got {raw!r}") from None
    text = str(raw)
    choices = f.metadata.get("choices")
    if choices and text not in choices:
        raise ConfigError(f"option {key} must be one of {', '.join(choices)}; got {text!r}")
    return text


def _to_bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"option {key} wants true or false, got {raw!r}")


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def _protocol_of(cls: type[Any]) -> str:
    return str(getattr(cls, "PROTOCOL", cls.__name__))
