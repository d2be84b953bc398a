"""The Debezium protocol's options (TiCDC's names) and its fixed names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ticdc_spark.codec.options import CommonOptions, alias
from ticdc_spark.errors import ConfigError

__all__ = ["CHECKPOINT_OP", "CONNECTOR", "PROTOCOL", "VERSION", "DebeziumOptions"]

PROTOCOL = "debezium"
VERSION = "2.4.0.Final"  # the Debezium version TiCDC claims in source.version
CONNECTOR = "TiCDC"  # TiCDC's source.connector (genuine Debezium: "mysql")
CHECKPOINT_OP = "m"  # the op of TiCDC's checkpoint (watermark) messages


@dataclass(frozen=True, slots=True)
class DebeziumOptions(CommonOptions):
    """Debezium options (TiCDC names).

    ``debezium-disable-schema`` leaves the Connect ``schema`` out of keys and values;
    ``enable-tidb-extension`` adds each column's ``tidb_type`` to the schema (and
    ``commit_ts``/``cluster_id`` to the source block's schema; the payload always has them);
    ``debezium-output-old-value`` false sends UPDATEs without ``before``.  ``cluster-id`` is
    the TiCDC cluster's ID (its server configuration), the ``name`` in ``source`` and in the
    schema names (``<cluster>.<db>.<table>.Key``).
    """

    PROTOCOL: ClassVar[str] = PROTOCOL

    debezium_disable_schema: bool = False
    debezium_output_old_value: bool = alias(True, "output-old-value")
    cluster_id: str = "default"

    def __post_init__(self) -> None:
        CommonOptions.__post_init__(self)
        if self.large_message_handle_option != "none":
            raise ConfigError(
                "debezium supports large-message-handle-option=none only (TiCDC's Debezium "
                "encoder has no handle-key-only or claim-check message); raise "
                "max-message-bytes instead"
            )
