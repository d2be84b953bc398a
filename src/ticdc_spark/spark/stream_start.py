"""Where a Python streaming source's next micro-batch starts, on Spark 4.1.

Spark 4.1 asks a Python source's reader for ``latestOffset()`` with no argument: neither
where the next micro-batch starts nor a read limit (PySpark's admission control for Python
sources, ``latestOffset(start, limit)``, comes in Spark 4.2).  A source that bounds its
micro-batches (``maxOffsetsPerTrigger`` and the like) must know the start to bound the end,
so its reader tracks it from what Spark 4.1 does tell it (``PythonMicroBatchStream``,
``MicroBatchExecution``):

- a new query: Spark asks ``latestOffset()`` first and ``initialOffset()`` only when it plans
  batch 0, so the start is the initial offset until then;
- every micro-batch is planned with ``partitions(start, end)``: the next one starts at ``end``;
- a restarted query: before anything else Spark calls ``partitions(latest, latest)`` with the
  last offsets of its log (``AcceptsLatestSeenOffset``), which the reader takes as its start
  as any other plan.

One order of calls defeats this: under ``Trigger.AvailableNow`` Spark asks a Python source for
``latestOffset()`` once, when the query starts, *before* it tells a restarted source where the
query is; a bounded reader has then bounded its end from the initial offset.  That end would
skip or repeat records, so the plan that reveals it is refused (:meth:`StreamStart.planned`).
``replicate --trigger once`` runs no such trigger (see :mod:`ticdc_spark.spark.trigger`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ticdc_spark.errors import ConfigError

__all__ = ["StreamStart"]


class StreamStart:
    """The start of a reader's next micro-batch (an offset of the reader's own form)."""

    def __init__(self, source: str, bounded: bool) -> None:
        self.source = source
        self.bounded = bounded  # whether the reader's ends depend on the start
        self.offset: Any = None
        self.assumed: Any = None  # the initial offset, taken as the start before Spark said

    def get(self, initial: Callable[[], Any]) -> Any:
        """The start: where the last plan ended, else the initial offset."""
        if self.offset is None:
            self.offset = self.assumed = initial()
        return self.offset

    def planned(self, start: Any, end: Any) -> None:
        """Called before a plan from ``start`` to ``end`` is made: refuse one whose end was
        bounded from a start other than Spark's (see the module's docstring)."""
        if self.bounded and self.assumed is not None and start != self.assumed:
            raise ConfigError(
                f"the {self.source} source bounds its micro-batches itself on Spark 4.1, which "
                "Trigger.AvailableNow does not let it do on a restarted query (Spark asks a "
                "Python source for its end before it says where the query is). Run it with a "
                "processing-time trigger and the source option availableNow=true (what "
                "`ticdc-spark replicate --trigger once` does), or without a bound"
            )

    def moved(self, end: Any) -> None:
        """A plan ending at ``end`` was made: the next micro-batch starts there."""
        self.offset, self.assumed = end, None
