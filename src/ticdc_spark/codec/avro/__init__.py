"""TiCDC's Avro protocol (``avro``) with a Confluent Schema Registry.

Key and value are Avro records in the Confluent wire format (magic byte 0, a big-endian
int32 schema id, the Avro binary); DELETE is a tombstone (key, null value).  See
``shared/spec/avro-protocol.ja.md`` and REFERENCE.md.

The package: :mod:`.options`, :mod:`.schema` (record schemas written and read back),
:mod:`.dialect` (the values), :mod:`.wire` (framing), :mod:`.registry` (the registry
client and its caches), :mod:`.encoder`, :mod:`.decoder`.
"""

from __future__ import annotations

from ticdc_spark.codec.avro.decoder import AvroDecoder
from ticdc_spark.codec.avro.encoder import AvroEncoder
from ticdc_spark.codec.avro.options import PROTOCOL, AvroOptions
from ticdc_spark.codec.catalog import CodecSpec, register

__all__ = ["AvroDecoder", "AvroEncoder", "AvroOptions"]

register(
    CodecSpec(
        PROTOCOL,
        AvroOptions,
        AvroEncoder,
        AvroDecoder,
        watermarks=False,
        ddl=False,
        commit_ts=False,
    )
)
