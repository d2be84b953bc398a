"""TiCDC Open Protocol (``open-protocol``): binary batches of JSON events.

Layout (see ``shared/spec/open-protocol.ja.txt`` and REFERENCE.md)::

    key   = u64be(1) { u64be(len) keyJSON }*
    value =          { u64be(len) valueJSON }*      (the i-th value belongs to the i-th key)

Key JSON ``{"ts","scm","tbl","ptn","t","ohk","ccl"}`` (t: 1 row, 2 DDL, 3 resolved).  Row
values ``{"u":{..},"p":{..}}`` / ``{"d":{..}}`` map column names to
``{"t":type,"h":true,"f":flags,"v":value}``.

The package: :mod:`.wire` (framing, keys, type codes), :mod:`.dialect` (the values, current
and legacy, as conversion tables), :mod:`.options`, :mod:`.encoder`, :mod:`.decoder`.
"""

from __future__ import annotations

from ticdc_spark.codec.catalog import CodecSpec, register
from ticdc_spark.codec.open_protocol.decoder import OpenProtocolDecoder
from ticdc_spark.codec.open_protocol.encoder import OpenProtocolEncoder
from ticdc_spark.codec.open_protocol.options import OpenProtocolOptions
from ticdc_spark.codec.open_protocol.wire import PROTOCOL

__all__ = ["OpenProtocolDecoder", "OpenProtocolEncoder", "OpenProtocolOptions"]

register(
    CodecSpec(
        PROTOCOL,
        OpenProtocolOptions,
        OpenProtocolEncoder,
        OpenProtocolDecoder,
        aliases=("open", "default"),
    )
)
