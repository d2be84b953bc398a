"""The Avro protocol's codec options (TiCDC's names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ticdc_spark.codec.options import CommonOptions, choice
from ticdc_spark.errors import ConfigError

__all__ = ["PROTOCOL", "AvroOptions"]

PROTOCOL = "avro"


@dataclass(frozen=True, slots=True)
class AvroOptions(CommonOptions):
    """``schema-registry`` is TiCDC's ``--schema-registry``: a Confluent Schema Registry URL
    (``http(s)://[user:password@]host:port``, the user and password URL-encoded) or
    ``mock://NAME``, confluent-kafka's in-process registry (one per process and name).
    Without one, codecs can be built, and their first registry call fails saying so."""

    PROTOCOL: ClassVar[str] = PROTOCOL

    avro_decimal_handling_mode: str = choice("precise", "precise", "string")
    avro_bigint_unsigned_handling_mode: str = choice("long", "long", "string")
    schema_registry: str = ""

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.large_message_handle_option != "none":
            raise ConfigError("the avro protocol supports large-message-handle-option=none only")
