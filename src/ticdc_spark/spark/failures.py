"""Our typed error behind a failed Spark query, recovered from Spark's wrapping.

An error of ours raised where Spark runs our code reaches the driver wrapped, as a py4j or
PySpark exception whose text is a page of JVM and Python frames: a decode stage task's
``DecodeError`` (``--on-error stop``), a capture line the source refuses, a
``CheckpointError`` or a sink's error inside ``foreachBatch``.  Two ways back to it, both
used:

* the driver side (``foreachBatch``, the background apply) notes the error itself before
  Spark wraps it (:class:`Failure`): the very object, attributes and all;
* an executor's error exists on the driver only as text: the Python traceback the worker
  sent.  :func:`ours` reads the exception that *ended* the last traceback in it (the
  outermost of a chain), and takes it only when it is a class of ours.  A crash (a
  ``KeyError`` in our code, even one raised while handling an error of ours; an error of
  Spark's own) is not one, and is left as it is: nothing real is hidden.
"""

from __future__ import annotations

import importlib
import re

from ticdc_spark.errors import TiCDCSparkError

__all__ = ["Failure", "ours"]

_TRACEBACK = "Traceback (most recent call last):"
# The exception line ending a traceback: "module.Class: message" (or "module.Class").
_EXCEPTION_LINE = re.compile(r"(ticdc_spark(?:\.\w+)*)\.(\w+)(?:: (.*))?")
_JVM_SUFFIX = re.compile(r"(?:\s+SQLSTATE: \w+)+\s*$")


def ours(exc: BaseException) -> TiCDCSparkError | None:
    """``exc`` if it is ours, else the error of ours Spark wrapped in it, or None (a crash
    or an error of Spark's: report it as it is)."""
    if isinstance(exc, TiCDCSparkError):
        return exc
    found = _final_exception(str(exc))
    if found is None:
        return None
    module, name, message = found
    cls = _error_class(module, name)
    if cls is None:
        return None
    error = cls.__new__(cls)  # (its own __init__ would render the message again)
    Exception.__init__(error, message)
    return error


def _final_exception(text: str) -> tuple[str, str, str] | None:
    """(module, class, message) of the exception line ending the last Python traceback in
    ``text``, when it names a class of this package."""
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    for line in text[start + len(_TRACEBACK) :].splitlines()[1:]:
        if not line.strip() or line[0].isspace():
            continue  # a frame ("  File ...") or its source line
        found = _EXCEPTION_LINE.fullmatch(line.rstrip())
        if found is None:
            return None
        return found.group(1), found.group(2), _JVM_SUFFIX.sub("", found.group(3) or "")
    return None


def _error_class(module: str, name: str) -> type[TiCDCSparkError] | None:
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    if isinstance(found, type) and issubclass(found, TiCDCSparkError):
        return found
    return None


class Failure:
    """The first error of ours the driver side of a query met, noted before Spark wraps it
    (and whatever it wraps is then raised as this)."""

    def __init__(self) -> None:
        self.error: TiCDCSparkError | None = None

    def note(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = ours(exc)

    def reraise(self, exc: BaseException) -> None:
        """Raise the error of ours behind the query's failure ``exc``, if there is one."""
        error = self.error or ours(exc)
        if error is not None and error is not exc:
            raise error from exc
