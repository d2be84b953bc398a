"""The Simple protocol's codec options (TiCDC's names, plus the consumer's holding bounds)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ticdc_spark.codec.options import CommonOptions, choice
from ticdc_spark.errors import ConfigError

__all__ = ["PROTOCOL", "SimpleOptions"]

PROTOCOL = "simple"


@dataclass(frozen=True, slots=True)
class SimpleOptions(CommonOptions):
    """Simple protocol options.

    ``encoding-format``, ``send-bootstrap-*`` and ``time-zone`` (the changefeed's, written as
    each TIMESTAMP value's ``location``) are TiCDC's.  ``max-held-rows`` and
    ``max-held-bytes`` are the consumer's: how many rows (and raw bytes) whose schema has not
    arrived yet a decoder holds before it stops with an error saying which table and schema
    version it waits for.  ``enable-row-checksum`` makes a row marked corrupted an error.
    """

    PROTOCOL: ClassVar[str] = PROTOCOL

    encoding_format: str = choice("json", "json", "avro")
    send_bootstrap_interval_in_sec: int = 120
    send_bootstrap_in_msg_count: int = 10000
    send_bootstrap_to_all_partition: bool = True
    time_zone: str = "UTC"
    enable_row_checksum: bool = False
    max_held_rows: int = 100_000
    max_held_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.send_bootstrap_interval_in_sec < 0 or self.send_bootstrap_in_msg_count < 0:
            raise ConfigError(
                "send-bootstrap-interval-in-sec and send-bootstrap-in-msg-count must not be "
                "negative (set both to 0 to send no bootstrap messages)"
            )
        if self.delete_only_output_handle_key_columns:
            raise ConfigError(
                "delete-only-output-handle-key-columns is not a Simple protocol option "
                "(TiCDC's simple encoder always sends the whole old row of a DELETE)"
            )
        if self.max_held_rows < 0 or self.max_held_bytes < 0:
            raise ConfigError("max-held-rows and max-held-bytes must not be negative")

    @property
    def sends_bootstraps(self) -> bool:
        """TiCDC sends bootstrap messages only when both intervals are positive."""
        return self.send_bootstrap_interval_in_sec > 0 and self.send_bootstrap_in_msg_count > 0
