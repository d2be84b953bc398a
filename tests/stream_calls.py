"""Spark 4.1's calls to a Python streaming source's reader, for tests that drive a reader
without Spark (``PythonMicroBatchStream``, ``MicroBatchExecution``)."""

from __future__ import annotations

from typing import Any


def resumed_at(reader: Any, offset: Any) -> Any:
    """What a restart at ``offset`` asks: ``partitions(offset, offset)`` (Spark hands a
    source the last offsets of its log first), then ``latestOffset()``."""
    assert reader.partitions(offset, offset) == []
    return reader.latestOffset()


def micro_batches(reader: Any) -> list[tuple[Any, Any]]:
    """The (start, end) of each micro-batch a new query plans until one finds nothing new
    (``latestOffset()`` equal to its start), planning each with ``partitions``."""
    start, out = reader.initialOffset(), []
    while True:
        end = reader.latestOffset()
        if end == start:
            return out
        reader.partitions(start, end)
        out.append((start, end))
        start = end
