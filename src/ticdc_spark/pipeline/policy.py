"""The pipeline's choices, each spelled once: what a bad record does, what is released, and
which engine applies.

Both are string enums, so a value compares equal to its spelling (``Mode.EVENTUAL ==
"eventual"``) and configs written as plain strings keep working.  This module imports
nothing heavy: the command line reads it before anything else is loaded.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from ticdc_spark.errors import ConfigError

__all__ = ["Engine", "Mode", "OnError"]


class OnError(enum.StrEnum):
    """What to do with a record that cannot be decoded or applied.

    The commands offer the choices that fit them (``replicate``: dead-letter or stop;
    ``decode``: stop or skip); each one means the same everywhere.
    """

    STOP = "stop"  # fail at the first one, naming it (the decode stage's "fail")
    DEAD_LETTER = "dead-letter"  # keep it aside with its reason, and go on
    SKIP = "skip"  # count and report it, and go on (``decode``'s bad records, and a capture
    # source's bad lines with onBadRecord=skip)

    @classmethod
    def parse(cls, value: str, allowed: Iterable[OnError] = (), what: str = "on_error") -> OnError:
        """The policy ``value`` names (``fail``: an older spelling of ``stop``; any case),
        refused with the valid names when it is not one of ``allowed`` (default: any);
        ``what`` names the setting in that message."""
        choices = tuple(allowed) or tuple(cls)
        found = _ALIASES.get(value.strip().lower(), value.strip().lower())
        if found not in choices:
            names = " or ".join(str(c) for c in choices)
            raise ConfigError(f"{what} must be {names}, not {value!r}")
        return cls(found)


_ALIASES = {"fail": OnError.STOP.value}


class Mode(enum.StrEnum):
    """Which changes a micro-batch releases (see docs/pipeline.md "Consistency")."""

    # only those at or below the lowest watermark of the partitions: every applied state is
    # a transaction-consistent snapshot of upstream
    CONSISTENT = "consistent"
    # everything at once, in commit-ts order per key
    EVENTUAL = "eventual"

    @classmethod
    def parse(cls, value: str) -> Mode:
        if value not in tuple(cls):
            raise ConfigError(f"mode must be consistent or eventual, not {value!r}")
        return cls(value)


class Engine(enum.StrEnum):
    """What applies the planned steps to the tables (see docs/pipeline.md "Apply engines").

    The default is Spark's: a merge's cost follows the micro-batch, not the table, runs in
    the executors, and schema changes are metadata; the embedded engine needs no JVM
    libraries and has less fixed cost per table, for small tables on one machine.
    """

    SPARK = "spark"  # Spark SQL MERGE: Delta with deletion vectors, Iceberg merge-on-read
    EMBEDDED = "embedded"  # delta-rs and pyiceberg on the driver, copy-on-write

    @classmethod
    def parse(cls, value: str) -> Engine:
        if value not in tuple(cls):
            raise ConfigError(f"engine must be spark or embedded, not {value!r}")
        return cls(value)


class PlanningSite(enum.StrEnum):
    """Where a micro-batch is planned (see docs/pipeline.md "Planning on the executors").

    On the driver, one planner takes the micro-batch collected there: simple, and what the
    embedded engine needs; the driver's memory follows the micro-batch.  On the executors
    the planner's rules run per table group where the rows are (pipeline.parts,
    spark.planning): the driver holds the control rows and per-table results only.
    """

    DRIVER = "driver"
    EXECUTORS = "executors"

    @classmethod
    def parse(cls, value: str) -> PlanningSite:
        if value not in tuple(cls):
            raise ConfigError(f"--planner must be driver or executors, not {value!r}")
        return cls(value)
