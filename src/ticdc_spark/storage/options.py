"""Object-store settings from one place, for every engine that touches storage.

A user configures storage the way each cloud's own tools are configured: the standard
environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ...; ``GOOGLE_APPLICATION_CREDENTIALS``; ``AZURE_STORAGE_ACCOUNT_NAME``, ...),
plus ``--storage-option KEY=VALUE`` for the rest (an option wins over the environment).  The
engines each spell these differently: :class:`StorageOptions` holds them once, under the
environment variables' names, and translates them for

* our own storage layer (:mod:`ticdc_spark.storage.store`: obstore's keys),
* delta-rs (``storage_options``: the same object_store keys, upper case),
* pyiceberg (FileIO properties: ``s3.endpoint``, ``adls.account-key``, ...),
* Spark's S3A connector (``spark.hadoop.fs.s3a.*``).

Secrets (keys, tokens) never leave through ``repr`` or ``str``: only through the
translations that hand them to the engines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ticdc_spark.errors import ConfigError

__all__ = ["StorageOptions", "parse_storage_options"]


@dataclass(frozen=True, slots=True)
class _Key:
    """One setting and its name in each engine (None: that engine has no such setting)."""

    name: str  # the standard environment variable's name
    obstore: str | None = None
    iceberg: str | None = None
    s3a: str | None = None
    secret: bool = False
    client: bool = False  # an obstore client option, not a store setting
    aliases: tuple[str, ...] = ()


_KEYS = (
    _Key("AWS_ENDPOINT_URL", "endpoint", "s3.endpoint", "endpoint", aliases=("AWS_ENDPOINT",)),
    _Key("AWS_ACCESS_KEY_ID", "access_key_id", "s3.access-key-id", "access.key"),
    _Key(
        "AWS_SECRET_ACCESS_KEY",
        "secret_access_key",
        "s3.secret-access-key",
        "secret.key",
        secret=True,
    ),
    _Key("AWS_SESSION_TOKEN", "session_token", "s3.session-token", "session.token", secret=True),
    _Key("AWS_REGION", "region", "s3.region", "endpoint.region", aliases=("AWS_DEFAULT_REGION",)),
    _Key("AWS_ALLOW_HTTP", "allow_http", client=True),
    _Key("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "virtual_hosted_style_request"),
    _Key("GOOGLE_SERVICE_ACCOUNT", "service_account"),
    _Key("GOOGLE_SERVICE_ACCOUNT_KEY", "service_account_key", secret=True),
    _Key("GOOGLE_APPLICATION_CREDENTIALS", "application_credentials"),
    _Key("AZURE_STORAGE_ACCOUNT_NAME", "account_name", "adls.account-name"),
    _Key("AZURE_STORAGE_ACCOUNT_KEY", "account_key", "adls.account-key", secret=True),
    _Key("AZURE_STORAGE_SAS_TOKEN", "sas_key", "adls.sas-token", secret=True),
    _Key("AZURE_STORAGE_CLIENT_ID", "client_id", "adls.client-id"),
    _Key("AZURE_STORAGE_CLIENT_SECRET", "client_secret", "adls.client-secret", secret=True),
    _Key("AZURE_STORAGE_TENANT_ID", "tenant_id", "adls.tenant-id"),
)
_BY_NAME = {k.name: k for k in _KEYS} | {a: k for k in _KEYS for a in k.aliases}
# How often and how long a request is retried (5xx answers, refused or dropped connections):
# object_store's defaults are 10 times within 3 minutes.  Not environment variables.
RETRIES = "MAX_RETRIES"
RETRY_TIMEOUT = "RETRY_TIMEOUT"  # seconds
_RETRY_KEYS = (RETRIES, RETRY_TIMEOUT)
_SCHEMES = {"s3": "AWS_", "s3a": "AWS_", "gs": "GOOGLE_", "az": "AZURE_", "abfs": "AZURE_"}
_SCHEMES |= {"abfss": "AZURE_", "adl": "AZURE_", "azure": "AZURE_"}


def _canonical(key: str) -> str:
    """The standard name of an option given in any case or by an alias; ConfigError if
    unknown (with the valid names)."""
    upper = key.strip().upper().replace("-", "_")
    if upper in _RETRY_KEYS:
        return upper
    known = _BY_NAME.get(upper)
    if known is None:
        valid = ", ".join([*(k.name for k in _KEYS), *_RETRY_KEYS])
        raise ConfigError(f"unknown storage option {key.strip()!r}; valid: {valid}")
    return known.name


def parse_storage_options(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--storage-option``) as a mapping of standard names."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"a storage option is KEY=VALUE, got {key.strip() or pair!r}")
        parsed[_canonical(key)] = value
    return parsed


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class StorageOptions:
    """The storage settings in force: the environment's, then the given options over them."""

    values: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(
        cls, options: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
    ) -> StorageOptions:
        env = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for key in _KEYS:
            for name in (*reversed(key.aliases), key.name):
                if env.get(name):
                    values[key.name] = env[name]
        if env.get("AWS_ENDPOINT_URL_S3"):  # the S3-specific endpoint wins, as in AWS's SDKs
            values["AWS_ENDPOINT_URL"] = env["AWS_ENDPOINT_URL_S3"]
        values |= {_canonical(k): v for k, v in (options or {}).items()}
        return cls(values)

    def __repr__(self) -> str:
        shown = {k: "***" if self._secret(k) else v for k, v in sorted(self.values.items())}
        return f"StorageOptions({shown})"

    __str__ = __repr__

    def secrets(self) -> tuple[str, ...]:
        """The secret values (to scrub from any text that might repeat them)."""
        return tuple(v for k, v in self.values.items() if self._secret(k) and v)

    @staticmethod
    def _secret(name: str) -> bool:
        key = _BY_NAME.get(name)
        return key is not None and key.secret

    def for_scheme(self, scheme: str) -> dict[str, str]:
        """The settings that concern a URI scheme's store (``s3``: the ``AWS_`` ones)."""
        prefix = _SCHEMES.get(scheme.lower())
        return {k: v for k, v in self.values.items() if prefix and k.startswith(prefix)}

    def allow_http(self) -> bool:
        """Plain HTTP to the endpoint: asked for, or implied by an ``http://`` endpoint."""
        allow = self.values.get("AWS_ALLOW_HTTP")
        if allow is not None:
            return _truthy(allow)
        return self.values.get("AWS_ENDPOINT_URL", "").lower().startswith("http://")

    # -- translations -----------------------------------------------------------------------

    def obstore(self, scheme: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(store config, client options, retry config) for obstore's ``from_url``."""
        config: dict[str, Any] = {}
        client: dict[str, Any] = {}
        for name, value in self.for_scheme(scheme).items():
            key = _BY_NAME[name]
            if key.obstore is not None:
                (client if key.client else config)[key.obstore] = value
        if scheme.lower() in ("s3", "s3a"):
            client["allow_http"] = self.allow_http()
            if "AWS_ENDPOINT_URL" in self.values and "virtual_hosted_style_request" not in config:
                config["virtual_hosted_style_request"] = False  # S3-compatible servers: paths
        retry: dict[str, Any] = {}
        if RETRIES in self.values:
            retry["max_retries"] = int(self.values[RETRIES])
        if RETRY_TIMEOUT in self.values:
            retry["retry_timeout"] = timedelta(seconds=float(self.values[RETRY_TIMEOUT]))
        return config, client, retry

    def delta(self, scheme: str) -> dict[str, str]:
        """delta-rs ``storage_options`` (object_store's keys; delta-rs reads the rest of the
        environment itself).  Commits need no locking provider: delta-rs 1.x writes each
        commit file with a conditional PUT (``If-None-Match: *``), measured on SeaweedFS."""
        options = self.for_scheme(scheme)
        if scheme.lower() in ("s3", "s3a"):
            options["AWS_ALLOW_HTTP"] = str(self.allow_http()).lower()
            if "AWS_ENDPOINT_URL" in options:
                options.setdefault("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
        if RETRIES in self.values:
            options["max_retries"] = self.values[RETRIES]
        if RETRY_TIMEOUT in self.values:
            options["retry_timeout"] = f"{float(self.values[RETRY_TIMEOUT])}s"
        return options

    def iceberg(self) -> dict[str, str]:
        """pyiceberg FileIO properties (pyiceberg reads no ``AWS_ENDPOINT_URL`` itself)."""
        props = {
            key.iceberg: self.values[key.name]
            for key in _KEYS
            if key.iceberg is not None and key.name in self.values
        }
        if "AWS_ENDPOINT_URL" in self.values:
            hosted = _truthy(self.values.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false"))
            props["s3.force-virtual-addressing"] = str(hosted).lower()
        return props

    def spark_s3a(self) -> dict[str, str]:
        """Spark settings for Hadoop's S3A connector (``s3a://`` paths; the ``s3`` feature of
        :mod:`ticdc_spark.spark.jars` puts it on the class path)."""
        prefix = "spark.hadoop.fs.s3a."
        settings = {  # s3:// paths through S3A too (as EMR and Databricks take them)
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        }
        settings |= {
            prefix + key.s3a: self.values[key.name]
            for key in _KEYS
            if key.s3a is not None and key.name in self.values
        }
        if "AWS_ENDPOINT_URL" in self.values:
            hosted = _truthy(self.values.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false"))
            settings[prefix + "path.style.access"] = str(not hosted).lower()
            settings[prefix + "connection.ssl.enabled"] = str(not self.allow_http()).lower()
        if "AWS_SESSION_TOKEN" in self.values:
            settings[prefix + "aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
            )
        if RETRIES in self.values:
            settings[prefix + "retry.limit"] = self.values[RETRIES]
            settings[prefix + "attempts.maximum"] = self.values[RETRIES]
        return settings
