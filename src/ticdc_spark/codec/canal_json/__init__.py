"""Canal-JSON (``canal-json``): Alibaba Canal's flat message format, as TiCDC writes it.

One JSON object per message, no Kafka key.  Every value is a string (or null) in MySQL's text
form (:mod:`.dialect`); ``sqlType`` holds Java SQL type codes, ``mysqlType`` the column types
(:mod:`.sqltypes`).  The encoder (:mod:`.encoder`) writes TiCDC's bytes; the decoder
(:mod:`.decoder`) reads TiCDC's and Alibaba Canal's, one message at a time or, for the Spark
decode stage, a batch of values (:mod:`.batch`) or an Arrow batch through the compiled scanner
(:mod:`.arrow`; :func:`native_scanner` says whether it is built: :mod:`.native`).
"""

from ticdc_spark.codec.canal_json.decoder import CanalJSONDecoder
from ticdc_spark.codec.canal_json.encoder import CanalJSONEncoder
from ticdc_spark.codec.canal_json.native import native_scanner
from ticdc_spark.codec.canal_json.options import PROTOCOL, CanalJSONOptions
from ticdc_spark.codec.canal_json.sqltypes import java_sql_type
from ticdc_spark.codec.catalog import CodecSpec, register

__all__ = [
    "CanalJSONDecoder",
    "CanalJSONEncoder",
    "CanalJSONOptions",
    "java_sql_type",
    "native_scanner",
]

register(
    CodecSpec(
        PROTOCOL, CanalJSONOptions, CanalJSONEncoder, CanalJSONDecoder, aliases=("canal_json",)
    )
)
