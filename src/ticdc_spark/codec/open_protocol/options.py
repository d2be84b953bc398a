"""Open Protocol's codec options (TiCDC's names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ticdc_spark.codec.open_protocol.wire import PROTOCOL
from ticdc_spark.codec.options import CommonOptions, alias
from ticdc_spark.errors import ConfigError

__all__ = ["OpenProtocolOptions"]


@dataclass(frozen=True, slots=True)
class OpenProtocolOptions(CommonOptions):
    """Open Protocol options (TiCDC names)."""

    PROTOCOL: ClassVar[str] = PROTOCOL

    max_batch_size: int = 16
    output_old_value: bool = alias(True, "enable-old-value")
    only_output_updated_columns: bool = False

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.max_batch_size < 1:
            raise ConfigError("max-batch-size must be at least 1")
