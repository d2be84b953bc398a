"""ticdc-spark: TiCDC's Kafka message protocols for Python, and a PySpark pipeline that applies
them to Delta Lake and Apache Iceberg tables, exactly once.

The library's entry points, importable from here::

    from ticdc_spark import Message, make_decoder, make_encoder

    decoder = make_decoder("canal-json", {"enable-tidb-extension": "true"})
    events = decoder.decode(Message(key=None, value=payload, topic="t", partition=0, offset=1))

Decoders yield the events of :mod:`ticdc_spark.model` (:class:`RowChange`,
:class:`DDLEvent`, :class:`Watermark`, :class:`Bootstrap`) with canonical values per MySQL
type (:mod:`ticdc_spark.types`), and raise only :class:`DecodeError`.  Importing this package
imports neither pyarrow nor pyspark: the Spark pipeline (:mod:`ticdc_spark.spark`, the
``spark`` extra) is imported where it is used.

The layers, each importing only those above it: ``types`` <- ``model`` <- ``sql`` (DDL
text) and ``codec`` (the protocols) <- ``dispatch``/``io`` (placing and carrying messages)
<- the pipeline (``changelog``, planning, ``apply``, ``sinks``, ``spark``) <- ``cli``.
``testing`` is the test bench: shipped, but nothing in the product imports it.
"""

from __future__ import annotations

from ticdc_spark.codec import Message, make_decoder, make_encoder, protocols
from ticdc_spark.errors import (
    CaptureError,
    ConfigError,
    DDLParseError,
    DecodeError,
    EncodeError,
    RegistryError,
    TiCDCSparkError,
    UnknownProtocolError,
)
from ticdc_spark.model import (
    Bootstrap,
    Column,
    DDLEvent,
    DDLType,
    Event,
    Index,
    RowChange,
    RowKind,
    TableSchema,
    Watermark,
)
from ticdc_spark.types import ColumnType, Family, ZeroDate

__all__ = [
    "Bootstrap",
    "CaptureError",
    "Column",
    "ColumnType",
    "ConfigError",
    "DDLEvent",
    "DDLParseError",
    "DDLType",
    "DecodeError",
    "EncodeError",
    "Event",
    "Family",
    "Index",
    "Message",
    "RegistryError",
    "RowChange",
    "RowKind",
    "TableSchema",
    "TiCDCSparkError",
    "UnknownProtocolError",
    "Watermark",
    "ZeroDate",
    "__version__",
    "make_decoder",
    "make_encoder",
    "protocols",
]

__version__: str


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed package's metadata when first asked for
    (importlib.metadata costs about 45 ms here: more than the rest of this import)."""
    if name != "__version__":
        raise AttributeError(f"module 'ticdc_spark' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("ticdc-spark")
    except PackageNotFoundError:  # (run from a source tree that was never installed)
        found = "0+unknown"
    globals()["__version__"] = found
    return found
