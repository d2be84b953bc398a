"""A :class:`~ticdc_spark.storage.store.Store` over an object store, through obstore.

Requests that fail on the way (refused or dropped connections, 5xx answers) are retried by
object_store with exponential backoff, ``MAX_RETRIES`` times within ``RETRY_TIMEOUT`` seconds
(``--storage-option``; 10 times within 3 minutes by default); past that the operation fails
with one line naming the object and the reason.

A conditional PUT whose answer is lost and that object_store sends again finds its own first
attempt and is refused (412): callers of :meth:`create` and :meth:`replace` that must tell
"someone else wrote it" from "I wrote it" put a token of their own in the object and read it
back (the lease does).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

from ticdc_spark.errors import ObjectNotFound, StorageError
from ticdc_spark.storage.options import StorageOptions
from ticdc_spark.storage.store import Store

__all__ = ["ObjectStore", "io_errors", "summarize"]

_S3_CODE = re.compile(r"<Code>([A-Za-z]+)</Code>")
_STATUS = re.compile(r"status code: (\d{3} [A-Za-z ]+?):")
_OS_ERROR = re.compile(r'message: "([^"]+)"|([A-Z][a-z]+(?: [a-z]+)*) \(os error \d+\)')
_RETRIES = re.compile(r"after (\d+) retries")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def summarize(text: str, denied: bool = False) -> str:
    """A short, credential-free account of an object_store error message (obstore's or
    delta-rs's): the HTTP status and the store's error code, or the network error and the
    retries made.  Only these pieces are kept: nothing else of the text is repeated."""
    text = _ANSI.sub("", text)
    status, code = _STATUS.search(text), _S3_CODE.search(text)
    answer = " ".join(m[1] for m in (status, code) if m)
    if denied or (status and status[1][:3] in ("401", "403")):
        return (
            f"access denied ({answer or 'unauthenticated'}): check the credentials "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or --storage-option)"
        )
    if answer:
        return f"the store answered {answer}"
    cause, retries = _OS_ERROR.search(text), _RETRIES.search(text)
    tried = f" (after {retries[1]} retries)" if retries else ""
    if cause:
        return f"the store did not answer: {(cause[1] or cause[2]).lower()}{tried}"
    return "the store failed: " + " ".join(text.split())[:160]


def _reason(exc: Exception) -> str:
    import obstore.exceptions as oe

    denied = isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError)
    return summarize(str(exc), denied)


@contextlib.contextmanager
def io_errors(action: str, where: str, secrets: Iterable[str] = ()) -> Iterator[None]:
    """An I/O error of a table library (delta-rs, pyiceberg) as one line naming ``where``."""
    try:
        yield
    except StorageError:
        raise
    except OSError as exc:
        message = f"cannot {action} {where}: {summarize(str(exc))}"
        raise StorageError(_scrub(message, secrets), where) from None


def _scrub(message: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        message = message.replace(secret, "***")
    return message


class ObjectStore(Store):
    """Objects under ``scheme://bucket/prefix``."""

    def __init__(self, uri: str, options: StorageOptions) -> None:
        import obstore.store

        parts = urlsplit(uri)
        if parts.username or parts.password or parts.query:
            raise StorageError(
                f"put no credentials or query in a storage URI ({parts.scheme}://"
                f"{parts.hostname}{parts.path}): use the environment or --storage-option"
            )
        self.uri = uri.rstrip("/")
        self.scheme = parts.scheme.lower()
        config, client, retry = options.obstore(self.scheme)
        self._secrets = options.secrets()
        url = self.uri if self.scheme != "s3a" else "s3" + self.uri[3:]
        with self._errors("open", ""):
            self._store: Any = cast(Any, obstore.store).from_url(
                url, config=config, client_options=client, retry_config=retry or None
            )

    @contextlib.contextmanager
    def _errors(self, action: str, key: str) -> Iterator[None]:
        """obstore's errors as one line naming the object (never a credential)."""
        import obstore.exceptions as oe

        where = self.describe(key)
        try:
            yield
        except (oe.NotFoundError, FileNotFoundError):  # (obstore raises either)
            raise ObjectNotFound(f"{where} does not exist", where) from None
        except (oe.BaseError, ValueError, OSError, RuntimeError) as exc:
            message = f"cannot {action} {where}: {_reason(exc)}"
            raise StorageError(_scrub(message, self._secrets), where) from None

    def read(self, key: str) -> bytes:
        import obstore

        with self._errors("read", key):
            return bytes(obstore.get(self._store, key).bytes())

    def read_versioned(self, key: str) -> tuple[bytes, str]:
        import obstore

        with self._errors("read", key):
            result = obstore.get(self._store, key)
            return bytes(result.bytes()), str(result.meta["e_tag"])

    def exists(self, key: str) -> bool:
        import obstore

        with contextlib.suppress(ObjectNotFound), self._errors("look up", key):
            obstore.head(self._store, key)
            return True
        return False

    def size(self, key: str) -> int:
        import obstore

        with self._errors("look up", key):
            return int(obstore.head(self._store, key)["size"])

    def write(self, key: str, data: bytes) -> None:
        import obstore

        with self._errors("write", key):
            obstore.put(self._store, key, data)

    def create(self, key: str, data: bytes) -> bool:
        import obstore
        import obstore.exceptions as oe

        with self._errors("create", key):
            try:
                obstore.put(self._store, key, data, mode="create")
            except (oe.AlreadyExistsError, oe.PreconditionError):
                return False
            return True

    def replace(self, key: str, data: bytes, version: str) -> bool:
        import obstore
        import obstore.exceptions as oe

        with self._errors("replace", key):
            try:
                obstore.put(self._store, key, data, mode={"e_tag": version})
            except (oe.PreconditionError, oe.NotFoundError, FileNotFoundError):
                return False
            return True

    def list_keys(self, prefix: str = "") -> list[str]:
        import obstore

        with self._errors("list", prefix):
            # (object_store lists whole path segments: "a/b" lists a/b/..., not a/bc)
            batches = obstore.list(self._store, prefix.rpartition("/")[0] or None)
            found = [o["path"] for batch in batches for o in batch]
        return sorted(k for k in found if k.startswith(prefix))

    def children(self, prefix: str = "") -> list[str]:
        import obstore

        base = prefix.strip("/")
        with self._errors("list", prefix):
            listed = obstore.list_with_delimiter(self._store, base or None)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"])

    def delete(self, keys: str | Iterable[str]) -> None:
        import obstore

        batch = [keys] if isinstance(keys, str) else list(keys)
        for start in range(0, len(batch), 1000):  # (S3's bulk delete takes 1,000 at most)
            chunk = batch[start : start + 1000]
            with self._errors("delete", chunk[0]):
                obstore.delete(self._store, chunk)

    def copy(self, source: str, target: str) -> None:
        import obstore

        with self._errors(f"copy {self.describe(source)} to", target):
            obstore.copy(self._store, source, target)
