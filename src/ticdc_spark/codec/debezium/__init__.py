"""The Debezium protocol (``debezium``): TiCDC's Debezium JSON both ways, genuine Debezium on
decode.

Key ``{"payload":{handle-key columns},"schema":{Connect struct}}``; value
``{"payload":{"source":{..,"commit_ts","cluster_id"},"ts_ms","transaction","op","before",
"after"},"schema":{Connect envelope}}`` (see ``shared/spec/debezium-protocol.ja.md`` and
REFERENCE.md).  The package: :mod:`.options`, :mod:`.dialect` (the values),
:mod:`.connect` (Connect field schemas both ways), :mod:`.encoder`, :mod:`.decoder`.
"""

from __future__ import annotations

from ticdc_spark.codec.catalog import CodecSpec, register
from ticdc_spark.codec.debezium.decoder import DebeziumDecoder
from ticdc_spark.codec.debezium.dialect import carried
from ticdc_spark.codec.debezium.encoder import DebeziumEncoder
from ticdc_spark.codec.debezium.options import PROTOCOL, DebeziumOptions

__all__ = ["DebeziumDecoder", "DebeziumEncoder", "DebeziumOptions"]

# TiCDC's Debezium carries commit ts and checkpoints; genuine Debezium neither, so its rows are
# placed by partition position (eventual mode; consistent mode refuses them).
register(
    CodecSpec(
        PROTOCOL,
        DebeziumOptions,
        DebeziumEncoder,
        DebeziumDecoder,
        carried=carried,
        commit_ts=False,
    )
)
