"""Capture files: Kafka records as JSON Lines, one record per line.

    {"topic": "t", "partition": 0, "offset": 42, "timestamp": 1700000000000,
     "key": "<base64>" | null, "value": "<base64>" | null}

Keys and values are base64 because most protocols are binary or may be.  ``timestamp`` is
the Kafka record time in milliseconds (null when unknown).  A file of raw message values,
one per line (for the JSON protocols), is read with :func:`read_values` instead.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from typing import IO, Any

import orjson

from ticdc_spark.codec.base import Message
from ticdc_spark.errors import CaptureError

__all__ = [
    "BAD_LINE_PARTITION",
    "bad_line_message",
    "message_to_record",
    "read_capture",
    "read_json_lines",
    "read_values",
    "record_to_message",
    "write_capture",
]


# A capture line that is not a Kafka record, passed on as a record of this partition (by the
# capture source with onBadRecord dead-letter or skip, for the pipeline to count it): no
# record has it (Kafka numbers partitions from 0, and capture records with a negative one are
# refused), so it cannot be mistaken for one.  See bad_line_message.
BAD_LINE_PARTITION = -1


def bad_line_message(error: CaptureError, line: bytes | str) -> Message:
    """The record standing for a bad capture ``line``: partition :data:`BAD_LINE_PARTITION`,
    its file as topic, its line number as offset, the reason as key, the line as value."""
    raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
    return Message(
        key=str(error).encode("utf-8"),
        value=raw.rstrip(b"\r\n"),
        topic=error.source,
        partition=BAD_LINE_PARTITION,
        offset=error.line,
    )


def read_capture(
    lines: Iterable[bytes | str], source: str = "", first_line: int = 1
) -> Iterator[Message]:
    """Yield the records of a capture file; raises CaptureError naming the line when bad
    (``first_line``: the number of the first line given, when reading from inside a file)."""
    for number, obj in read_json_lines(lines, source, first_line):
        yield record_to_message(obj, line=number, source=source)


def read_json_lines(
    lines: Iterable[bytes | str], source: str = "", first_line: int = 1
) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed JSON) for each non-blank line of a JSON Lines input;
    raises CaptureError naming the line when one is not JSON."""
    for number, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise CaptureError(f"not JSON ({exc})", line=number, source=source) from None
        yield number, obj


def record_to_message(obj: Any, *, line: int | None = None, source: str = "") -> Message:
    """One capture record (a parsed JSON object) as a Message."""
    if not isinstance(obj, dict):
        raise CaptureError("a capture record must be a JSON object", line=line, source=source)
    try:
        return Message(
            key=_b64(obj.get("key")),
            value=_b64(obj.get("value")),
            topic=str(obj.get("topic") or ""),
            partition=_position_or_none(obj.get("partition"), "partition"),
            offset=_position_or_none(obj.get("offset"), "offset"),
            timestamp=_int_or_none(obj.get("timestamp")),
            line=line,
        )
    except (ValueError, TypeError, binascii.Error) as exc:
        raise CaptureError(str(exc), line=line, source=source) from None


def _b64(text: Any) -> bytes | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError("key and value must be base64 strings or null")
    return base64.b64decode(text, validate=True)


def _int_or_none(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def _position_or_none(value: Any, name: str) -> int | None:
    """A partition or offset: Kafka's are never negative."""
    number = _int_or_none(value)
    if number is not None and number < 0:
        raise ValueError(f"{name} must not be negative, got {number}")
    return number


def read_values(lines: Iterable[bytes | str], source: str = "") -> Iterator[Message]:
    """Yield one message per non-empty line, the line being the message value (no key).

    The message carries its line number, so errors and dead letters can name it.
    """
    for number, line in enumerate(lines, 1):
        raw = line.encode("utf-8") if isinstance(line, str) else line
        raw = raw.rstrip(b"\r\n")
        if raw.strip():
            yield Message(key=None, value=raw, topic=source, line=number)


def message_to_record(message: Message) -> dict[str, Any]:
    return {
        "topic": message.topic,
        "partition": message.partition,
        "offset": message.offset,
        "timestamp": message.timestamp,
        "key": None if message.key is None else base64.b64encode(message.key).decode("ascii"),
        "value": None if message.value is None else base64.b64encode(message.value).decode(),
    }


def write_capture(messages: Iterable[Message], out: IO[bytes]) -> int:
    """Write messages as capture lines; returns how many were written."""
    count = 0
    for message in messages:
        out.write(orjson.dumps(message_to_record(message)) + b"\n")
        count += 1
    return count
