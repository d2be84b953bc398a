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
"""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

import orjson

from ticdc_spark.errors import ConfigError, DecodeError

__all__ = ["ClaimCheckStorage", "compress", "decompress", "record_overhead"]

# Sarama's per-record overhead estimate that TiCDC adds when it sizes a message.
RECORD_OVERHEAD = 36
DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024


def record_overhead() -> int:
    return RECORD_OVERHEAD


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


@dataclass(frozen=True, slots=True)
class ClaimCheckStorage:
    """External storage for claim-check messages: a local or mounted directory.

    TiCDC writes ``<uri>/<uuid>.json`` holding ``{"key": <base64|null>, "value": <base64>}``
    and puts that location in the Kafka message.  ``file://`` URIs and plain paths are
    supported; other schemes (s3://, gcs://) need their storage mounted as a directory.
    """

    uri: str

    @property
    def root(self) -> Path:
        parts = urlsplit(self.uri)
        if parts.scheme in ("", "file"):
            return Path(unquote(parts.path if parts.scheme else self.uri))
        raise ConfigError(
            f"claim-check storage scheme {parts.scheme!r} is not supported here; mount it and "
            "use a file:// URI"
        )

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
        """Store one message; returns the location to put in the pointer message."""
        name = f"{uuid.uuid4()}.json"
        root = self.root
        root.mkdir(parents=True, exist_ok=True)
        body = {
            "key": None if key is None else base64.b64encode(key).decode("ascii"),
            "value": base64.b64encode(value).decode("ascii"),
        }
        tmp = root / (name + ".tmp")
        tmp.write_bytes(orjson.dumps(body))
        os.replace(tmp, root / name)
        return self.location(name)

    def read(
        self, location: str, max_bytes: int = DEFAULT_MAX_DECOMPRESSED
    ) -> tuple[bytes | None, bytes]:
        """Fetch the message a pointer names (by the last path element, as TiCDC does)."""
        name = location.rstrip("/").rsplit("/", 1)[-1]
        if not name or name in (".", "..") or "\\" in name:
            raise DecodeError(f"bad claim-check location {location!r}")
        path = self.root / name
        try:
            if path.stat().st_size > max_bytes:
                raise DecodeError(f"claim-check file {name} is over {max_bytes} bytes")
            body = orjson.loads(path.read_bytes())
            key = body.get("key")
            return (
                None if key is None else base64.b64decode(key, validate=True),
                base64.b64decode(body["value"], validate=True),
            )
        except DecodeError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DecodeError(f"cannot read claim-check file {name}: {exc}") from None
