"""Applying a micro-batch while Spark reads the next one (the pipeline's ``overlap``).

``foreachBatch`` hands the batch to a :class:`Background` apply and returns, so that Spark
reads and decodes the next batch meanwhile; applying stays serial and in order (each batch
waits for the previous one's apply).  :class:`RunningPipeline` makes the query's
``awaitTermination`` and ``stop`` wait for the last apply too, and report its failure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Background", "RunningPipeline"]

log = logging.getLogger(__name__)


class Background:
    """At most one apply running beside Spark; its error is raised by the next ``wait``."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def failed(self) -> bool:
        """The last apply ended with an error not yet raised."""
        return self._error is not None and not (self._thread and self._thread.is_alive())

    def run(self, func: Callable[..., None], *args: Any) -> None:
        def target() -> None:
            try:
                func(*args)
            except BaseException as exc:  # handed to the caller of wait()
                self._error = exc

        self._thread = threading.Thread(target=target, name="ticdc-apply", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error


class RunningPipeline:
    """The streaming query, plus the apply that may still run after Spark's last batch.

    ``awaitTermination`` and ``stop`` return once that apply has finished too; anything else
    is the underlying ``StreamingQuery``'s.
    """

    def __init__(self, query: Any, background: Background) -> None:
        self.query = query
        self._background = background

    def awaitTermination(self, timeout: float | None = None) -> bool | None:
        """Wait for the query to end (or ``timeout`` seconds), and for its last apply.

        A failed apply stops the query at once, even when no further micro-batch comes
        (with a processing-time trigger and no new data, ``foreachBatch`` would not run again
        to report it).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:  # (Spark refuses a timeout that is not > 0)
                return False
            try:
                done = bool(self.query.awaitTermination(1.0 if left is None else min(1.0, left)))
            except BaseException:
                self._settle()
                raise
            if done:
                self._background.wait()
                return True if timeout is not None else None
            if self._background.failed:
                self.query.stop()
                self._background.wait()  # raises the apply's error

    def stop(self) -> None:
        try:
            self.query.stop()
        finally:
            self._background.wait()

    def _settle(self) -> None:
        """Wait for the apply while the query's own error is on its way (which wins)."""
        try:
            self._background.wait()
        except BaseException:
            log.exception("the last micro-batch's apply failed too")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)
