"""The exceptions of ticdc-spark: one base class and a few precise kinds.

Every error a decoder raises on bad input is a :class:`DecodeError` naming the record (topic,
partition and offset, or the line of a file) and the reason, so a pipeline can route it to a
dead-letter output and a person can find the message.  Nothing else may escape a decoder.
"""

from __future__ import annotations

__all__ = [
    "CHECKPOINT_WAY_OUT",
    "CaptureError",
    "CheckpointError",
    "ClusterUnreachable",
    "ConfigError",
    "DDLParseError",
    "DamagedState",
    "DecodeError",
    "EncodeError",
    "HeldRowsExceeded",
    "ObjectNotFound",
    "RegistryError",
    "SinkError",
    "StorageError",
    "TiCDCSparkError",
    "UnknownProtocolError",
]

_PAYLOAD_EXCERPT = 120


class TiCDCSparkError(Exception):
    """Base class of every error ticdc-spark raises on purpose."""


class ConfigError(TiCDCSparkError, ValueError):
    """An option or setting is unknown, malformed or conflicts with another one."""


class UnknownProtocolError(ConfigError):
    """A protocol name that no codec is registered under."""


class EncodeError(TiCDCSparkError):
    """An event cannot be written in the chosen protocol (e.g. a message over max-message-bytes)."""


class StorageError(TiCDCSparkError):
    """A storage operation failed: the message names the store's object and the reason,
    never a credential."""

    def __init__(self, message: str, location: str = "") -> None:
        self.location = location
        super().__init__(message)


class ObjectNotFound(StorageError):
    """The object (or file) read does not exist."""


class DDLParseError(TiCDCSparkError):
    """A DDL statement whose effect on a table schema cannot be worked out."""

    def __init__(self, reason: str, sql: str = "") -> None:
        self.reason = reason
        self.sql = sql
        excerpt = " ".join(sql.split())[:160]
        super().__init__(f"cannot apply DDL ({reason}): {excerpt}")


class CaptureError(TiCDCSparkError):
    """A line of a capture file (or of another JSON Lines input, such as the events that
    ``encode`` reads) is not a valid record."""

    def __init__(self, reason: str, *, line: int | None = None, source: str = "") -> None:
        self.reason = reason
        self.line = line
        self.source = source
        where = f"{source or 'input'} line {line}" if line is not None else (source or "input")
        super().__init__(f"{where}: {reason}")


class DecodeError(TiCDCSparkError):
    """A message could not be decoded.

    Attributes:
        protocol: the protocol name (``canal-json``, ...).
        position: where the record came from: ``topic/partition@offset`` or ``line N``.
        reason: what is wrong, in words.
        payload: a short excerpt of the offending bytes (never the whole message).
    """

    def __init__(
        self,
        reason: str,
        *,
        protocol: str = "",
        position: str = "",
        payload: bytes | str | None = None,
    ) -> None:
        self.reason = reason
        self.protocol = protocol
        self.position = position
        self.payload = _excerpt(payload)
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.protocol} message" if self.protocol else "message"
        where = f" at {self.position}" if self.position else ""
        tail = f" (payload starts {self.payload!r})" if self.payload else ""
        return f"cannot decode {head}{where}: {self.reason}{tail}"

    def at(self, position: str, protocol: str | None = None) -> DecodeError:
        """Return this error with the record position (and protocol) filled in."""
        if not self.position:
            self.position = position
        if protocol and not self.protocol:
            self.protocol = protocol
        self.args = (self._render(),)
        return self


def _excerpt(payload: bytes | str | None) -> bytes | None:
    if payload is None:
        return None
    raw = payload.encode("utf-8", "replace") if isinstance(payload, str) else bytes(payload)
    return raw[:_PAYLOAD_EXCERPT]


class RegistryError(TiCDCSparkError):
    """A schema registry refused a call or could not be reached (after retries).  Its message
    names the registry by its URL with any password removed, and never the password."""


class SinkError(TiCDCSparkError):
    """A target table cannot be read or written: names the table (and the file, where the
    table format's library says which)."""


class HeldRowsExceeded(ConfigError):
    """More rows held back for a later micro-batch than the pipeline's bound
    (``--max-held-rows``): its message names the partitions furthest behind."""


class GuardsExceeded(ConfigError):
    """More guards kept (deletes remembered against late older changes) than the pipeline's
    bound (``--max-guards``): its message names why they are kept."""


CHECKPOINT_WAY_OUT = (
    "Restore the file(s) from a backup of the checkpoint directory, or replicate again from "
    "the start: a new checkpoint directory and an empty target (the tables hold step versions "
    "of this checkpoint). See 'The checkpoint' in docs/pipeline.md."
)


class CheckpointError(TiCDCSparkError):
    """The checkpoint cannot be resumed exactly: names the file(s) and the way out."""


class DamagedState(CheckpointError):
    """A consumer-state file that is missing or does not read whole, at ``location`` (a path,
    or a URI on an object store)."""

    def __init__(self, location: str, problem: str) -> None:
        self.location, self.problem = location, problem
        super().__init__(
            f"consumer state {location} {problem}. A restart rebuilds it from the logged "
            f"micro-batches when they reach back far enough; otherwise: {CHECKPOINT_WAY_OUT}"
        )

    @property
    def short(self) -> str:
        return f"{self.location} {self.problem}"


class ClusterUnreachable(TiCDCSparkError):
    """A Spark cluster's master did not answer, or granted no executors that run this
    ticdc-spark: the job cannot start there."""


class KafkaUnreachable(TiCDCSparkError):
    """No broker of a Kafka source answered in time (down, wrong address, refused the
    credentials): the input may be fine, the service is not there."""
