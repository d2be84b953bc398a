"""Large messages: value compression and claim-check storage, shared by the protocols.

TiCDC options:

* ``large-message-handle-compression`` = ``none`` | ``snappy`` | ``lz4``: every value is
  compressed (snappy block format, LZ4 frame format) with no marker in the message, so the
  consumer must be configured the same way.
* ``large-message-handle-option`` = ``none`` | ``handle-key-only`` | ``claim-check``: what to do
  with a row over ``max-message-bytes``: fail, send only its handle-key columns with a marker,
  or write the full message to external storage (``claim-check-storage-uri``) and send a
  pointer plus the handle-key columns.

Decompression is bounded: a message cannot make us allocate more than ``max_output`` bytes.
cramjam and lz4 are imported when a value is (de)compressed: about 10 ms of import that
most changefeeds, which compress nothing, never pay.

:class:`LargeMessages` is the engine every codec runs its own bytes through: encoders ask it
to compress values and to handle a row over the limit (the error naming the row, or the
handle-key-only message with the claim-check location); decoders ask it to decompress and to
fetch the message a claim-check pointer names.  The protocols differ only in where the
marker and the location go, which each supplies as a callback.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlsplit

import orjson

from ticdc_spark.errors import ConfigError, DecodeError, EncodeError, ObjectNotFound
from ticdc_spark.storage import StorageOptions, Store, open_store

if TYPE_CHECKING:
    from ticdc_spark.codec.options import CommonOptions
    from ticdc_spark.model import RowChange

__all__ = ["ClaimCheckStorage", "LargeMessages", "compress", "decompress"]

# Sarama's per-record overhead estimate that TiCDC adds when it sizes a message.
RECORD_OVERHEAD = 36
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024


def compress(data: bytes, method: str) -> bytes:
    if method == "none":
        return data
    if method == "snappy":
        import cramjam

        return bytes(cramjam.snappy.compress_raw(data))
    if method == "lz4":
        import lz4.frame

        return bytes(lz4.frame.compress(data))
    raise ConfigError(f"unknown compression {method!r}; valid: none, snappy, lz4")


def decompress(data: bytes, method: str, max_output: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Undo :func:`compress`; raises DecodeError on corrupt input or output over the bound."""
    if method == "none":
        return data
    try:
        if method == "snappy":
            return _snappy(data, max_output)
        if method == "lz4":
            return _lz4(data, max_output)
    except DecodeError:
        raise
    except Exception as exc:  # the libraries raise their own error types
        raise DecodeError(f"cannot {method}-decompress the value: {exc}") from None
    raise ConfigError(f"unknown compression {method!r}; valid: none, snappy, lz4")


def _snappy(data: bytes, max_output: int) -> bytes:
    import cramjam

    claimed = cramjam.snappy.decompress_raw_len(data)
    if claimed > max_output:
        raise DecodeError(f"snappy value claims {claimed} bytes, over the {max_output} limit")
    return bytes(cramjam.snappy.decompress_raw(data))


def _lz4(data: bytes, max_output: int) -> bytes:
    """Decompress an LZ4 frame in growing chunks, so the output bound is never preallocated."""
    import lz4.frame

    decompressor = lz4.frame.LZ4FrameDecompressor()
    chunk = 4 * len(data) + 65536
    chunks = [decompressor.decompress(data, max_length=chunk)]
    total = len(chunks[0])
    while not decompressor.eof:
        if decompressor.needs_input:
            raise DecodeError("lz4 value is truncated")
        chunk = min(chunk * 2, max_output - total + 1)
        chunks.append(decompressor.decompress(b"", max_length=chunk))
        total += len(chunks[-1])
        if total > max_output:
            raise DecodeError(f"lz4 value decompresses to more than {max_output} bytes")
    return b"".join(chunks)


# TiCDC's S3 URI parameters (``s3://bucket/prefix?endpoint=...``) as storage options; the
# environment and these configure the store (credentials are better kept in the environment).
_TICDC_QUERY = {
    "endpoint": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access-key": "AWS_ACCESS_KEY_ID",
    "secret-access-key": "AWS_SECRET_ACCESS_KEY",
    "session-token": "AWS_SESSION_TOKEN",
}
_SCHEMES = {"s3": "s3", "gs": "gs", "gcs": "gs", "azure": "az", "azblob": "az", "az": "az"}


@dataclass(frozen=True)
class ClaimCheckStorage:
    """External storage for claim-check messages: a local directory or an object store.

    TiCDC writes ``<uri>/<uuid>.json`` holding ``{"key": <base64|null>, "value": <base64>}``
    and puts that location in the Kafka message.  ``file://`` URIs and plain paths, ``s3://``,
    ``gcs://`` (``gs://``) and ``azure://`` (``azblob://``) are read through
    :mod:`ticdc_spark.storage`, configured by the standard environment (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ...) and TiCDC's S3 URI parameters (``endpoint``, ``region``, ...).
    """

    uri: str

    @cached_property
    def store(self) -> Store:
        parts = urlsplit(self.uri)
        scheme = parts.scheme.lower()
        if scheme in ("", "file"):
            return open_store(unquote(parts.path if scheme else self.uri))
        if scheme not in _SCHEMES:
            raise ConfigError(
                f"claim-check storage scheme {parts.scheme!r} is not supported; use file://, "
                f"{', '.join(s + '://' for s in _SCHEMES)}"
            )
        query = dict(parse_qsl(parts.query))
        given = {_TICDC_QUERY[k]: v for k, v in query.items() if k in _TICDC_QUERY}
        if query.get("force-path-style", "").lower() == "false":
            given["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true"
        bucket = parts.netloc.rpartition("@")[2]
        options = StorageOptions.from_environment(given)
        return open_store(f"{_SCHEMES[scheme]}://{bucket}{parts.path}", options)

    def location(self, name: str) -> str:
        """Where a pointer message says the file is: the URI's scheme, host and path, never
        its user info or query (which may hold credentials; readers find the file by its
        name under their own storage URI)."""
        parts = urlsplit(self.uri)
        if not parts.scheme:
            return self.uri.rstrip("/") + "/" + name
        host = parts.hostname or ""
        if parts.port is not None:
            host += f":{parts.port}"
        return f"{parts.scheme}://{host}{parts.path.rstrip('/')}/{name}"

    def write(self, key: bytes | None, value: bytes) -> str:
        """Store one message (one atomic write); returns the location for the pointer."""
        name = f"{uuid.uuid4()}.json"
        body = {
            "key": None if key is None else base64.b64encode(key).decode("ascii"),
            "value": base64.b64encode(value).decode("ascii"),
        }
        self.store.write(name, orjson.dumps(body))
        return self.location(name)

    def read(
        self, location: str, max_bytes: int = DEFAULT_MAX_DECOMPRESSED
    ) -> tuple[bytes | None, bytes]:
        """Fetch the message a pointer names (by the last path element, as TiCDC does).

        A missing or damaged file is a DecodeError (the record goes to the dead letters);
        a store that cannot be read is a StorageError naming it, which stops the job: the
        file may well be there."""
        name = location.rstrip("/").rsplit("/", 1)[-1]
        if not name or name in (".", "..") or "\\" in name:
            raise DecodeError(f"bad claim-check location {location!r}")
        try:
            if self.store.size(name) > max_bytes:
                raise DecodeError(f"claim-check file {name} is over {max_bytes} bytes")
            body = orjson.loads(self.store.read(name))
            key = body.get("key")
            return (
                None if key is None else base64.b64decode(key, validate=True),
                base64.b64decode(body["value"], validate=True),
            )
        except DecodeError:
            raise
        except ObjectNotFound as exc:
            raise DecodeError(f"cannot read claim-check file {name}: {exc}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DecodeError(f"cannot read claim-check file {name}: {exc}") from None


# A smaller message for a row: given the claim-check location (None: handle-key-only), its
# key, value, and size as the protocol counts it against max-message-bytes.
SmallMessage = Callable[[str | None], tuple[bytes | None, bytes, int]]


class LargeMessages:
    """Compression, the size limit and claim-check storage for one codec's messages.

    ``hint`` ends the error for a row over the limit with what else the protocol needs to
    handle large messages (Canal-JSON: the TiDB extension).
    """

    def __init__(self, protocol: str, options: CommonOptions, hint: str = "") -> None:
        self.protocol = protocol
        self.limit = options.max_message_bytes
        self.option = options.large_message_handle_option
        self.compression = options.large_message_handle_compression
        self.hint = hint
        uri = options.claim_check_storage_uri
        self.storage = ClaimCheckStorage(uri) if uri else None

    # encoding -----------------------------------------------------------------------------

    def compress(self, value: bytes) -> bytes:
        return compress(value, self.compression)

    def fits(self, size: int) -> bool:
        """Whether a message of ``size`` bytes (as the protocol counts them) may be sent."""
        return size + RECORD_OVERHEAD <= self.limit

    def shrink(
        self,
        row: RowChange,
        size: int,
        full: Callable[[], tuple[bytes | None, bytes]],
        small: SmallMessage,
    ) -> tuple[bytes | None, bytes]:
        """The message to send for ``row``, whose ``size`` is over the limit: an error with
        ``large-message-handle-option=none``; else ``small`` with the location where the
        ``full()`` message was stored (claim-check) or None (handle-key-only)."""
        if self.option == "none":
            raise EncodeError(
                f"{self.protocol}: row of {row.schema.qualified_name} at commit ts "
                f"{row.commit_ts} is {size} bytes, over max-message-bytes={self.limit}; raise "
                f"it or set large-message-handle-option{self.hint}"
            )
        location = None
        if self.option == "claim-check" and self.storage is not None:
            location = self.storage.write(*full())
        key, value, small_size = small(location)
        if not self.fits(small_size):
            raise EncodeError(
                f"{self.protocol}: row of {row.schema.qualified_name} at commit ts "
                f"{row.commit_ts} is over max-message-bytes={self.limit} even with only its "
                "handle-key columns"
            )
        return key, value

    # decoding -----------------------------------------------------------------------------

    def decompress(self, value: bytes) -> bytes:
        return decompress(value, self.compression)

    def fetch(self, location: str) -> tuple[bytes | None, bytes]:
        """The full message a claim-check pointer names (key, value as stored)."""
        if self.storage is None:
            raise DecodeError(
                "message points to claim-check storage; set claim-check-storage-uri to read it"
            )
        return self.storage.read(location)
