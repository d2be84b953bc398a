"""What a command's local Spark prints on the terminal: nothing but what goes wrong.

Left to its defaults, a local session prints a banner of four lines as it starts, a warning
about Hadoop's native library, and for a failed task or query the whole JVM stack as log
lines, before the command can say in one line what happened (a bad capture line made 307
lines).  The commands start Spark with :func:`console_settings` (the JVM's log4j
configuration beside this module: errors only, no banner) and, once it runs, set Spark's log
level with :func:`quiet` (off: every failure reaches the command as an exception, which it
reports).  ``--verbose`` keeps Spark's errors on, as before.

What the JVM prints before log4j is set up goes around it: Ivy's report of the jars it
resolves for the session's features (``spark.jars.packages``: about 60 lines, printed by
spark-submit itself) and the JVM's own notes.  :func:`startup_hidden` keeps them off the
terminal while the session starts, and shows them if the start fails.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["LOG4J2_CONSOLE", "console_settings", "quiet", "startup_hidden"]

LOG4J2_CONSOLE = Path(__file__).with_name("log4j2-console.properties")
_OPTIONS = "spark.driver.extraJavaOptions"


def console_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The session settings ``settings`` with the quiet log4j configuration added to the
    driver's Java options (unless they name a log4j configuration of their own)."""
    out = dict(settings)
    given = out.get(_OPTIONS, "")
    if "log4j" not in given:
        ours = f"-Dlog4j2.configurationFile={LOG4J2_CONSOLE.as_uri()}"
        out[_OPTIONS] = f"{given} {ours}".strip()
    return out


def quiet(spark: Any, verbose: bool = False) -> None:
    """Spark's log level for a command: off, or with ``verbose`` errors."""
    spark.sparkContext.setLogLevel("ERROR" if verbose else "OFF")


@contextlib.contextmanager
def startup_hidden(verbose: bool = False) -> Iterator[None]:
    """While the block starts a session, the process's stderr (file descriptor 2, which the
    JVM inherits) is a pipe: what arrives is kept, and written out only if the block fails;
    once it has started, what the JVM writes later is passed through as it comes.  With
    ``verbose``, nothing is hidden."""
    if verbose:
        yield
        return
    sys.stderr.flush()
    terminal = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)
    relay = _Relay(read, terminal)
    relay.start()
    try:
        yield
    except BaseException:
        relay.release(show_kept=True)
        raise
    else:
        relay.release(show_kept=False)
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)  # (the JVM keeps the pipe; the relay passes its lines on)


class _Relay(threading.Thread):
    """Reads the JVM's stderr pipe: keeps it while the session starts, then passes it on
    to the terminal (until the JVM exits and the pipe closes)."""

    def __init__(self, read: int, terminal: int) -> None:
        super().__init__(name="ticdc-spark-stderr", daemon=True)
        self.read, self.terminal = read, terminal
        self.kept: list[bytes] = []
        self.starting = True
        self.lock = threading.Lock()

    def run(self) -> None:
        with os.fdopen(self.read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                with self.lock:
                    if self.starting:
                        self.kept.append(chunk)
                        continue
                os.write(self.terminal, chunk)

    def release(self, show_kept: bool) -> None:
        with self.lock:
            self.starting = False
            kept, self.kept = self.kept, []
        if show_kept:
            os.write(self.terminal, b"".join(kept))
