"""Codecs for TiCDC's Kafka protocols, looked up by TiCDC's protocol names."""

from ticdc_spark.codec.base import Decoder, Encoder, Message, Route
from ticdc_spark.codec.catalog import (
    CodecSpec,
    get_codec,
    make_decoder,
    make_encoder,
    make_finisher,
    protocols,
    register,
)

__all__ = [
    "CodecSpec",
    "Decoder",
    "Encoder",
    "Message",
    "Route",
    "get_codec",
    "make_decoder",
    "make_encoder",
    "make_finisher",
    "protocols",
    "register",
]
