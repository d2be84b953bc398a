"""What a command's local Spark prints on the terminal: nothing but what goes wrong.

Left to its defaults, a local session prints a banner of four lines as it starts, a warning
about Hadoop's native library, and for a failed task or query the whole JVM stack as log
lines, before the command can say in one line what happened (a bad capture line made 307
lines).  The commands start Spark with :func:`console_settings` (the JVM's log4j
configuration beside this module: errors only, no banner) and, once it runs, set Spark's log
level with :func:`quiet` (off: every failure reaches the command as an exception, which it
reports).  ``--verbose`` keeps Spark's errors on, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["LOG4J2_CONSOLE", "console_settings", "quiet"]

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
