"""How a command ends on the terminal: its error as one line and an exit status, and the
package's warnings as lines of their own.

An error of ours (``ticdc_spark.errors``) is one line, ``ticdc-spark COMMAND: message``,
wherever it was raised: one Spark wrapped (a decode stage task, the capture source,
``foreachBatch``) is recovered first (:func:`~ticdc_spark.spark.failures.ours`).  The full
trace only with ``--verbose``.  Anything else is a crash (a bug, or Spark's own failure): its
whole trace is printed, as Python would, never shortened into a line that could hide it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator

from ticdc_spark.cli.args import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, BadInput
from ticdc_spark.errors import (
    CaptureError,
    ConfigError,
    DDLParseError,
    DecodeError,
    EncodeError,
)
from ticdc_spark.spark.failures import ours

__all__ = ["failed", "warnings_shown"]

# Exit status 2: what the user gave (arguments, options, input records) is wrong.  Other
# errors of ours (a registry down, a checkpoint that cannot resume, a table that cannot be
# read) exit 1, as crashes do.
BAD_INPUT = (BadInput, ConfigError, CaptureError, DecodeError, EncodeError, DDLParseError)
EXIT_INTERRUPTED = 130


def failed(command: str, exc: BaseException, verbose: bool = False) -> int:
    """Report a command's failure on stderr; its exit status."""
    if isinstance(exc, BrokenPipeError):  # e.g. piped into `head`
        with contextlib.suppress(Exception):
            sys.stdout = None
        return EXIT_OK
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    error = exc if isinstance(exc, BadInput) else ours(exc)
    if error is None:
        traceback.print_exception(exc)
        print(f"ticdc-spark {command}: crashed (the trace above)", file=sys.stderr)
        return EXIT_FAILURE
    if verbose:
        traceback.print_exception(exc)
    print(f"ticdc-spark {command}: {error}", file=sys.stderr)
    return EXIT_BAD_INPUT if isinstance(error, BAD_INPUT) else EXIT_FAILURE


class _OneLine(logging.Formatter):
    """``ticdc-spark COMMAND: warning: message``; an exception's trace only when verbose."""

    def __init__(self, command: str, verbose: bool) -> None:
        super().__init__()
        self.command, self.verbose = command, verbose

    def format(self, record: logging.LogRecord) -> str:
        line = f"ticdc-spark {self.command}: {record.levelname.lower()}: {record.getMessage()}"
        if self.verbose and record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


@contextlib.contextmanager
def warnings_shown(command: str, verbose: bool = False) -> Iterator[None]:
    """Show the package's warnings (a checkpoint file rebuilt, bad lines skipped) on stderr
    while a command runs, each as one line."""
    logger = logging.getLogger("ticdc_spark")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine(command, verbose))
    handler.setLevel(logging.INFO if verbose else logging.WARNING)
    logger.addHandler(handler)
    level = logger.level
    if logger.getEffectiveLevel() > handler.level:
        logger.setLevel(handler.level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
