"""How ``replicate --trigger`` runs the streaming query: ``once`` (everything available when
the query starts, in bounded micro-batches, then stop) or every N seconds.

Spark's ``Trigger.AvailableNow`` runs "once" for a source with admission control that
implements ``SupportsTriggerAvailableNow``, as Spark's own Kafka source does.  Spark 4.1 gives
Python data sources neither (both come in Spark 4.2): under AvailableNow it asks a Python
source for its end once and reads to it in one micro-batch, so a backlog would be read and
collected to the driver at once, or, with the source's own bound, one bounded micro-batch
would be read and the query would stop.  Our sources (``ticdc-kafka``, ``ticdc-capture``) run
"once" thus instead:

- the source fixes its end when the query starts (source option ``availableNow=true``: the
  broker's end offsets, the files in the directory) and bounds each micro-batch itself;
- the query runs on a processing-time trigger of 0 s (one micro-batch after another);
- it is stopped as soon as a trigger finds nothing left before that end:
  ``StreamingQuery.processAllAvailable`` returns then (Spark marks a trigger whose sources'
  latest offsets equal their start), and no micro-batch is running at that point.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from ticdc_spark.errors import ConfigError

__all__ = ["AVAILABLE_NOW", "UntilCaughtUp", "once_options", "start_query"]

log = logging.getLogger(__name__)

# The source option of our sources that fixes the query's end when it starts.
AVAILABLE_NOW = "availableNow"


def once_options(options: Mapping[str, str], trigger: str) -> dict[str, str]:
    """``options`` of one of our sources, with its end fixed at the start under ``once``."""
    out = dict(options)
    if trigger == "once" and not any(k.lower() == AVAILABLE_NOW.lower() for k in out):
        out[AVAILABLE_NOW] = "true"
    return out


def start_query(writer: Any, trigger: str, python_source: bool = True) -> Any:
    """Start ``writer`` (a ``DataStreamWriter``) on ``trigger``: "once" or seconds.
    ``python_source``: the query reads one of our sources (see the module's docstring),
    else a source Spark runs under ``Trigger.AvailableNow`` itself."""
    if trigger == "once":
        if not python_source:
            return writer.trigger(availableNow=True).start()
        return UntilCaughtUp(writer.trigger(processingTime="0 seconds").start())
    try:
        seconds = float(trigger)
    except ValueError:
        raise ConfigError(f"--trigger is 'once' or seconds, not {trigger!r}") from None
    return writer.trigger(processingTime=f"{seconds} seconds").start()


class UntilCaughtUp:
    """A ``StreamingQuery`` that stops itself once a trigger finds nothing left to read
    (its sources' ends fixed at its start); anything else is the query's."""

    def __init__(self, query: Any) -> None:
        self.query = query
        self._watch = threading.Thread(target=self._stop_when_caught_up, daemon=True)
        self._watch.start()

    def _stop_when_caught_up(self) -> None:
        try:
            self.query.processAllAvailable()
        except Exception as exc:  # the query failed: awaitTermination raises its error
            log.debug("the query ended before it caught up: %s", exc)
            return
        self.query.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)
