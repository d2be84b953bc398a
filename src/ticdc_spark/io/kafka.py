"""Kafka through confluent-kafka (librdkafka): configuration, URIs, producing.

Spark jobs configure Kafka with the Java client's names (``kafka.bootstrap.servers``,
``kafka.sasl.jaas.config``); librdkafka takes the same names without the ``kafka.`` prefix
for almost everything.  :func:`client_config` translates the few that differ.  Credentials
never appear in messages: :func:`redact` masks them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ticdc_spark.codec.base import Message
from ticdc_spark.errors import ConfigError, KafkaUnreachable, TiCDCSparkError

__all__ = [
    "KafkaProducerSink",
    "check_reachable",
    "client_config",
    "is_kafka_uri",
    "parse_kafka_uri",
    "redact",
]

# Option names whose values are secrets (also given to Spark, to mask them in query plans).
SECRET_KEY_PATTERN = (
    r"password|secret|jaas|token|credential|key\.pem|private|access[-_.]?key|sasl\.username"
    r"|oauthbearer"
)
_SECRET_KEY_RE = re.compile(SECRET_KEY_PATTERN, re.I)
# A URL's user info, up to the *last* "@" of the token: a password may hold "@" or "/".
_URL_CREDENTIALS_RE = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^\s'\"]*@", re.I)
# A query parameter whose name says it holds a secret: ?sasl.password=..., &access-key=...
_QUERY_SECRET_RE = re.compile(r"(?P<name>[?&][^=&#\s'\"]+=)(?P<value>[^&#\s'\"]*)")
_JAAS_RE = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def redact(value: Any) -> Any:
    """A copy of a config mapping (or a string) with secrets masked."""
    if isinstance(value, Mapping):
        return {k: "***" if _SECRET_KEY_RE.search(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, str):
        value = _URL_CREDENTIALS_RE.sub(lambda m: m["scheme"] + "***@", value)
        return _QUERY_SECRET_RE.sub(
            lambda m: m["name"] + "***" if _SECRET_KEY_RE.search(m["name"]) else m[0], value
        )
    return value


def is_kafka_uri(text: str) -> bool:
    """Whether a source or destination names Kafka (``kafka://``, in any case)."""
    return text[:8].lower() == "kafka://"


def client_config(options: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka configuration from Spark-style ``kafka.*`` options."""
    config: dict[str, Any] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name == "sasl.jaas.config":
            config.update(_from_jaas(value))
        elif name in ("ssl.truststore.location", "ssl.keystore.location"):
            raise ConfigError(
                f"{key} (a Java keystore) is not readable by librdkafka; use "
                "kafka.ssl.ca.location / kafka.ssl.certificate.location with PEM files"
            )
        else:
            config[name] = value
    return config


def _from_jaas(jaas: str) -> dict[str, str]:
    """username/password from a Java JAAS line (PlainLoginModule, ScramLoginModule)."""
    fields = dict(_JAAS_RE.findall(jaas))
    if "username" not in fields or "password" not in fields:
        raise ConfigError('kafka.sasl.jaas.config needs username="..." and password="..."')
    out = {"sasl.username": fields["username"], "sasl.password": fields["password"]}
    if "ScramLoginModule" in jaas:
        out.setdefault("sasl.mechanism", "SCRAM-SHA-512")
    return out


def parse_kafka_uri(uri: str) -> tuple[str, list[str], dict[str, str]]:
    """``kafka://[user:pass@]host:port[,host:port]/topic1,topic2?k=v`` ->
    (bootstrap servers, topics, extra ``kafka.*`` options)."""
    parts = urlsplit(uri)
    if parts.scheme != "kafka" or not parts.netloc:
        raise ConfigError(f"not a kafka:// URI: {redact(uri)!r}")
    query_keys = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    if "@" not in parts.netloc and any("@" in p for p in (parts.path, parts.fragment, *query_keys)):
        # user:pa/ss@host: the "/" ended the host part, so the password's tail became the
        # topic and its head the broker; refuse rather than connect somewhere odd
        raise ConfigError(
            "the kafka:// URI's credentials hold a '/', '?' or '#': percent-encode them "
            "(%2F, %3F, %23)"
        )
    for address in parts.netloc.rsplit("@", 1)[-1].split(","):
        _, colon, port = address.rpartition(":")
        if colon and not port.isdigit() and not address.endswith("]"):  # ([::1] has no port)
            raise ConfigError(
                f"a broker address in the kafka:// URI has a port that is not a number; "
                f"percent-encode any '/', '?', '#' in its credentials: {redact(uri)!r}"
            )
    extra = {
        f"kafka.{k}" if not k.startswith("kafka.") else k: v for k, v in parse_qsl(parts.query)
    }
    netloc = parts.netloc
    if "@" in netloc:
        credentials, netloc = netloc.rsplit("@", 1)
        user, _, password = credentials.partition(":")
        extra.setdefault("kafka.security.protocol", "SASL_PLAINTEXT")
        extra.setdefault("kafka.sasl.mechanism", "PLAIN")
        extra["kafka.sasl.username"] = unquote(user)
        extra["kafka.sasl.password"] = unquote(password)
    topics = [t for t in unquote(parts.path.lstrip("/")).split(",") if t]
    return netloc, topics, extra


class KafkaProducerSink:
    """Produces placed messages (topic and partition set) and checks every delivery."""

    def __init__(
        self,
        bootstrap: str,
        options: Mapping[str, str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.config = {
            "bootstrap.servers": bootstrap,
            **client_config(options or {}),
            **dict(config or {}),
        }
        self.producer = Producer(self.config)
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.delivered = 0

    def create_topics(self, topics: Iterable[str], partitions: int) -> None:
        """Create missing topics with ``partitions`` partitions."""
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(
            {k: v for k, v in self.config.items() if k not in ("batch.num.messages", "linger.ms")}
        )
        existing = set(admin.list_topics(timeout=10).topics)
        wanted = [
            NewTopic(t, num_partitions=partitions, replication_factor=1)
            for t in topics
            if t not in existing
        ]
        for topic, future in admin.create_topics(wanted).items() if wanted else []:
            try:
                future.result(30)
            except Exception as exc:
                if "already exists" not in str(exc).lower():
                    raise TiCDCSparkError(f"cannot create topic {topic}: {exc}") from None

    def write(self, messages: list[Message]) -> None:
        from confluent_kafka import KafkaException

        for message in messages:
            while True:
                try:
                    self.producer.produce(
                        message.topic,
                        message.value,
                        message.key,
                        partition=message.partition or 0,
                        on_delivery=self._delivered,
                    )
                    break
                except BufferError:  # the local queue is full: let it drain
                    self.producer.poll(0.1)
                except KafkaException as exc:
                    raise TiCDCSparkError(
                        f"cannot produce to {message.topic}/{message.partition}: "
                        f"{exc.args[0].str() if exc.args else exc}"
                    ) from None
            self.producer.poll(0)
        self._raise_errors()

    def _delivered(self, error: Any, message: Any) -> None:
        with self._lock:
            if error is not None:
                self.errors.append(f"{message.topic()}/{message.partition()}: {error}")
            else:
                self.delivered += 1

    def _raise_errors(self) -> None:
        if self.errors:
            raise TiCDCSparkError(
                f"Kafka delivery failed: {self.errors[0]} "
                f"({len(self.errors)} failures; config {redact(self.config)})"
            )

    def close(self, timeout: float = 60) -> None:
        remaining = self.producer.flush(timeout)
        self._raise_errors()
        if remaining:
            raise TiCDCSparkError(f"{remaining} Kafka messages were not delivered in {timeout}s")


# How long a broker has to answer before ``replicate`` says it cannot be reached (librdkafka
# itself retries for ever, printing a line per attempt: over 6 minutes and ~1,000 lines a
# minute were seen for a port nothing listens on, before a traceback).
REACH_TIMEOUT_S = 15.0


def check_reachable(
    source: str, options: Mapping[str, str], timeout_s: float = REACH_TIMEOUT_S
) -> None:
    """Raise :class:`~ticdc_spark.errors.KafkaUnreachable` naming the brokers of a
    ``kafka://`` source (and librdkafka's last complaint) unless one answers a metadata
    request within ``timeout_s`` with the source's client settings (TLS, SASL)."""
    import logging

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    servers, _topics, extra = parse_kafka_uri(source)
    complaints: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            complaints.append(record.getMessage())

    quiet = logging.getLogger(f"{__name__}.reach")
    quiet.propagate = False
    quiet.handlers[:] = [_Keep()]
    config = client_config(
        {**extra, **{k: v for k, v in options.items() if k.startswith("kafka.")}}
    )
    settings: dict[str, Any] = {
        **config,
        "bootstrap.servers": servers,
        "logger": quiet,
        "error_cb": lambda error: complaints.append(error.str()),
    }
    admin = AdminClient(settings)
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0.2)  # (serves the logger and error_cb with what librdkafka saw)
        found = [c for c in complaints if "failed" in c.lower()] or complaints
        reason = redact(found[-1] if found else str(exc.args[0].str()))
        raise KafkaUnreachable(
            f"cannot reach the Kafka broker {servers} (no answer within {timeout_s:g} s): {reason}"
        ) from None
