"""Canal-JSON's options (TiCDC's names) and the protocol's fixed names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ticdc_spark.codec.options import CommonOptions
from ticdc_spark.errors import ConfigError

__all__ = ["PROTOCOL", "WATERMARK_TYPE", "CanalJSONOptions"]

PROTOCOL = "canal-json"
WATERMARK_TYPE = "TIDB_WATERMARK"  # the "type" of a watermark message (TiDB extension)


@dataclass(frozen=True, slots=True)
class CanalJSONOptions(CommonOptions):
    """Canal-JSON options (TiCDC names).  ``content-compatible`` implies only-updated ``old``."""

    PROTOCOL: ClassVar[str] = PROTOCOL

    content_compatible: bool = False
    only_output_updated_columns: bool = False

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.large_message_handle_option != "none" and not self.enable_tidb_extension:
            raise ConfigError(
                "canal-json supports large-message-handle-option only with "
                "enable-tidb-extension=true"
            )

    @property
    def updated_old_only(self) -> bool:
        return self.only_output_updated_columns or self.content_compatible
