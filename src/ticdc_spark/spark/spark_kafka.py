"""Spark's own Kafka source (``spark-sql-kafka-0-10``) as the pipeline's Kafka source:
``replicate --kafka-source spark``.

The source's jars come from Maven Central (:mod:`ticdc_spark.spark.jars`, feature ``kafka``:
resolved on a session's first start, cached per machine).  It gives the columns and options
``ticdc-kafka`` copies, so the pipeline takes either (docs/kafka-source.md compares them,
measured).  What differs is the client: Spark's is Kafka's Java client, ours is librdkafka, so
the settings a user gives the librdkafka way (a ``kafka://user:password@`` URI,
``kafka.sasl.username``/``kafka.sasl.password``, ``kafka.ssl.ca.location`` PEM files) are
translated here to the Java client's (``sasl.jaas.config``, a PEM trust store), and what has
no translation is refused rather than passed on to be ignored with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ticdc_spark.errors import ConfigError

__all__ = ["KAFKA_SOURCES", "java_client_options", "read_spark_kafka"]

# The values of ``--kafka-source``: our Python source, or Spark's.
KAFKA_SOURCES = ("ticdc", "spark")

# Options of ticdc-kafka that Spark's source does not have (it keeps the initial offsets in
# the query's checkpoint, and runs Trigger.AvailableNow itself).
_OURS_ONLY = ("initialoffsetspath", "availablenow")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka settings with no Java client equivalent given as a file path: refused.
_NO_TRANSLATION = ("kafka.ssl.certificate.location", "kafka.ssl.key.location")


def read_spark_kafka(spark: Any, options: Mapping[str, str], kafka_source: str = "spark") -> Any:
    """A streaming DataFrame of Spark's Kafka source with ``options`` (ticdc-kafka's)."""
    if kafka_source not in KAFKA_SOURCES:
        raise ConfigError(
            f"the Kafka source is one of {', '.join(KAFKA_SOURCES)}, not {kafka_source!r}"
        )
    reader = spark.readStream.format("kafka")
    for key, value in java_client_options(options).items():
        reader = reader.option(key, value)
    return reader.load()


def java_client_options(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` for Spark's Kafka source: librdkafka-style client settings translated."""
    out = {k: v for k, v in options.items() if k.lower() not in _OURS_ONLY}
    for key in _NO_TRANSLATION:
        if key in out:
            raise ConfigError(
                f"{key} is a librdkafka setting; Spark's Kafka source (Kafka's Java client) "
                "takes a client certificate as kafka.ssl.keystore.type=PEM with "
                "kafka.ssl.keystore.location (one PEM file: key and certificate)"
            )
    user, password = out.pop("kafka.sasl.username", None), out.pop("kafka.sasl.password", None)
    if user is not None or password is not None:
        mechanism = out.get("kafka.sasl.mechanism", "PLAIN").upper()
        module = _LOGIN_MODULES.get(mechanism)
        if module is None or user is None or password is None:
            raise ConfigError(
                "SASL with a user name and password needs both, and a mechanism of "
                f"{sorted(_LOGIN_MODULES)}"
            )
        out.setdefault(
            "kafka.sasl.jaas.config",
            f'{module} required username="{_quoted(user)}" password="{_quoted(password)}";',
        )
    ca = out.pop("kafka.ssl.ca.location", None)
    if ca is not None:
        out.setdefault("kafka.ssl.truststore.type", "PEM")
        out.setdefault("kafka.ssl.truststore.location", ca)
    return out


def _quoted(text: str) -> str:
    """A value inside a JAAS string literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
