"""The Confluent Schema Registry, through confluent-kafka's ``SchemaRegistryClient`` only
(so any real registry works, and ``mock://NAME`` is its in-process double).

* One client per registry URL per process (:func:`registry`): a Spark Python worker keeps it,
  and its caches, for every batch it decodes.  ``mock://`` registries are per process.
* Subjects follow TopicNameStrategy: ``{topic}-key`` and ``{topic}-value``.  A schema is
  registered once per (subject, schema text) and the id kept; a registration the registry
  refuses as incompatible (409) is an error naming the subject and the registry's reason.
* Lookups by id are cached (ids are immutable in a registry): no call per message.
* Retries: the client retries 408/429/5xx answers and connection errors with exponential
  backoff and jitter (:data:`RETRIES`); when the registry stays down the call fails with a
  :class:`~ticdc_spark.errors.RegistryError` (never a dead letter: the data is still in Kafka).
  Any other 4xx fails at once with the registry's message.
* ``https://user:password@host`` (URL-encoded) becomes basic auth; the password is kept out of
  the client's URL, and errors name the registry by its URL without the user info.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from ticdc_spark.codec.common import LRUCache
from ticdc_spark.errors import ConfigError, RegistryError

__all__ = [
    "RETRIES",
    "Retries",
    "SchemaRegistry",
    "UnknownSchemaId",
    "check_shared_registry",
    "registry",
]


def check_shared_registry(options: Any, protocol: str, required: bool = True) -> None:
    """Refuse a protocol's options (parsed) that name no registry (unless not ``required``:
    ``decode`` reads a capture that may carry its schemas as a registry's ``_schemas``
    records), or one only this process can see (``mock://``: confluent-kafka's in-process
    registry), where other processes must share it: Spark's Python workers decode apart
    from the driver, and what ``produce`` or ``encode`` writes is read by a later command.
    (In one process, as the library's tests use it, ``mock://`` works.)  Protocols without a
    registry pass."""
    url = getattr(options, "schema_registry", None)
    if url is None or (not url and not required):
        return
    if not url:
        raise ConfigError(
            f"the {protocol} protocol needs a Confluent Schema Registry: "
            "--schema-registry http(s)://HOST:PORT"
        )
    if url.lower().startswith("mock://"):
        raise ConfigError(
            f"the schema registry {url} exists only inside one process, so Spark's workers "
            "and later commands would find none of its schemas (every message a dead letter): "
            "use a Confluent Schema Registry, --schema-registry http(s)://HOST:PORT "
            "(ticdc-spark demo -p avro serves one for its run)"
        )


class UnknownSchemaId(RegistryError):
    """The registry has no schema with this id (a message's, so a dead letter)."""


@dataclass(frozen=True, slots=True)
class Retries:
    """The client's retry policy (its ``max.retries``, ``retries.wait.ms`` and
    ``retries.max.wait.ms``): about 20 s of exponential backoff by default."""

    max_retries: int = 8
    wait_ms: int = 100
    max_wait_ms: int = 5000


RETRIES = Retries()
_NOT_FOUND = 404
_CONFLICT = 409
_CLIENTS: dict[str, SchemaRegistry] = {}
_LOCK = threading.Lock()


class _NoRegistry:
    """What codecs built without a registry URL hold: every call fails, saying why."""

    url = ""

    def register(self, subject: str, schema_text: str) -> int:
        raise self._missing()

    def schema_text(self, schema_id: int) -> str:
        raise self._missing()

    @staticmethod
    def _missing() -> RegistryError:
        return RegistryError(
            "the avro protocol needs a schema registry: --schema-registry URL "
            "(http(s)://host:port, or mock://NAME for confluent-kafka's in-process one)"
        )


def registry(url: str) -> SchemaRegistry:
    """The process's one client of the registry at ``url`` (none: one that says so)."""
    if not url:
        return _NoRegistry()  # type: ignore[return-value]
    with _LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            client = _CLIENTS[url] = SchemaRegistry(url)
        return client


def split_credentials(url: str) -> tuple[str, str | None]:
    """(the URL without user info, ``user:password`` decoded) of a registry URL.

    The user info runs to the *last* "@" of the URL, so a password that holds a "/", "?",
    "#" or "@" left unencoded (a base64 one) is still taken as the password, never as the
    host or path that errors name the registry by.
    """
    scheme, sep, rest = url.partition("://")
    if scheme.lower() not in ("http", "https", "mock") or not sep:
        raise ConfigError(
            f"schema registry URL must be http://, https:// or mock://, got {scheme[:16]!r}"
        )
    user_info, at, address = rest.rpartition("@")
    bare = f"{scheme}://{address}"
    try:
        urlsplit(bare).port  # noqa: B018 (a port that is no number is refused here)
    except ValueError as exc:
        raise ConfigError(f"schema registry URL {bare}: {exc}") from None
    if not at:
        return url, None
    user, _, password = user_info.partition(":")
    return bare, f"{unquote(user)}:{unquote(password)}"


class SchemaRegistry:
    """A registry client with TiCDC's subject rules and id caches (see the module doc)."""

    def __init__(self, url: str, retries: Retries | None = None) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url, user_info = split_credentials(url)
        self._secret = user_info.partition(":")[2] if user_info else ""
        policy = self.retries = retries or RETRIES
        conf: dict[str, Any] = {
            "url": self.url,
            "max.retries": policy.max_retries,
            "retries.wait.ms": policy.wait_ms,
            "retries.max.wait.ms": policy.max_wait_ms,
        }
        if user_info:
            conf["basic.auth.user.info"] = user_info
        self._client = SchemaRegistryClient.new_client(conf)
        self._ids: LRUCache[tuple[str, str], int] = LRUCache(4096)
        self._texts: LRUCache[int, str] = LRUCache(4096)
        self.calls = 0  # registry round trips made (cache misses), for tests and metrics

    def register(self, subject: str, schema_text: str) -> int:
        """The id of ``schema_text`` under ``subject``, registering it the first time."""
        key = (subject, schema_text)
        found = self._ids.get(key)
        if found is not None:
            return found
        from confluent_kafka.schema_registry import Schema

        schema_id = self._call(
            f"registering a schema under subject {subject!r}",
            lambda: self._client.register_schema(subject, Schema(schema_text, "AVRO")),
            subject=subject,
        )
        self._texts.put(schema_id, schema_text)
        return self._ids.put(key, schema_id)

    def schema_text(self, schema_id: int) -> str:
        """The schema registered under ``schema_id`` (cached: ids never change)."""
        found = self._texts.get(schema_id)
        if found is not None:
            return found
        schema = self._call(
            f"looking up schema id {schema_id}", lambda: self._client.get_schema(schema_id)
        )
        return self._texts.put(schema_id, schema.schema_str)

    def _call(self, what: str, call: Any, subject: str | None = None) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        self.calls += 1
        try:
            return call()
        except SchemaRegistryError as exc:
            raise self._refused(what, exc, subject) from None
        except Exception as exc:  # connection errors, after the client's retries
            reason = self._hide(f"{type(exc).__name__}: {exc}")
            raise RegistryError(
                f"schema registry {self.url} unreachable while {what} (after "
                f"{self.retries.max_retries} retries): {reason}"
            ) from None

    def _refused(self, what: str, exc: Any, subject: str | None) -> RegistryError:
        status, message = exc.http_status_code, self._hide(str(exc.error_message))
        if status == _CONFLICT and subject is not None:
            return RegistryError(
                f"schema registry {self.url} refused the new schema of subject {subject!r} as "
                f"incompatible with its registered versions: {message}.  TiCDC stops here too: "
                "change the subject's compatibility level or the table, then restart"
            )
        if status == _NOT_FOUND and subject is None:
            return UnknownSchemaId(
                f"schema registry {self.url} has no {what.removeprefix('looking up ')}: {message}"
            )
        kind = "unavailable" if status >= 500 else "refused"
        return RegistryError(f"schema registry {self.url} {kind} {what}: HTTP {status} {message}")

    def _hide(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text
