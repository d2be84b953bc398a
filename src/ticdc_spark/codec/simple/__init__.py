"""TiCDC's Simple protocol (``simple``): one message per event, JSON or raw Avro.

Messages (see ``shared/spec/simple-protocol.ja.txt`` and REFERENCE.md): DML (INSERT,
UPDATE, DELETE) naming their table's ``schemaVersion`` but carrying no schema; DDL (CREATE,
RENAME, CINDEX, DINDEX, ERASE, TRUNCATE, ALTER, QUERY) with the table's schema after
(``tableSchema``) and before (``preTableSchema``); WATERMARK; and BOOTSTRAP, a table's
schema sent periodically so consumers that join mid-stream can decode its rows.

The package: :mod:`.options`, :mod:`.wire` (message and table schema layout), :mod:`.dialect`
(values in JSON and Avro), :mod:`.avro` (the Avro encoding over TiCDC's schema),
:mod:`.memo` (schemas by version, rows held for theirs), :mod:`.encoder` (with the bootstrap
cadence), :mod:`.decoder`.
"""

from __future__ import annotations

from ticdc_spark.codec.catalog import CodecSpec, register
from ticdc_spark.codec.simple.decoder import SimpleDecoder
from ticdc_spark.codec.simple.encoder import SimpleEncoder
from ticdc_spark.codec.simple.options import PROTOCOL, SimpleOptions

__all__ = ["SimpleDecoder", "SimpleEncoder", "SimpleOptions"]

register(CodecSpec(PROTOCOL, SimpleOptions, SimpleEncoder, SimpleDecoder))
