"""``replicate``'s progress: one line per micro-batch, and a closing summary whose exit
status tells a run that did its job from one whose every record became a dead letter."""

from __future__ import annotations

import sys
from typing import Any

from ticdc_spark.cli.args import EXIT_BAD_INPUT, EXIT_OK
from ticdc_spark.pipeline.dead_letters import DeadLetterWriter
from ticdc_spark.storage import join

__all__ = ["Totals"]


class Totals:
    """What the micro-batches of a run did, added up as they are reported."""

    def __init__(self) -> None:
        self.batches = self.rows_in = self.rows = self.dead = self.ddl = self.skipped = 0
        self.held = 0  # rows held back after the last micro-batch
        self.first_dead: int | None = None  # the first micro-batch with dead letters
        self.seconds = 0.0

    def add(self, report: Any, quiet: bool = False) -> None:
        self.batches += 1
        self.rows_in += report.rows_in
        self.rows += report.rows_applied
        self.dead += report.dead_letters
        self.ddl += report.ddl
        self.skipped += report.skipped
        self.held = report.held
        self.seconds += report.seconds
        if report.dead_letters and self.first_dead is None:
            self.first_dead = report.batch
        if not quiet:
            print(report.line(), file=sys.stderr, flush=True)

    def summary(self) -> str:
        if not self.batches:
            return "0 batches: nothing new in the source since the checkpoint's last run"
        text = (
            f"{self.batches} batches, {self.rows} rows applied, {self.ddl} DDL, "
            f"{self.dead} dead letters"
        )
        if self.skipped:
            text += f", {self.skipped} bad capture lines skipped (onBadRecord=skip)"
        if self.held:
            text += f"; {self.held} rows held back for a later micro-batch"
        return text

    @property
    def all_dead(self) -> bool:
        """Whether every record of the run became a dead letter (nothing decoded at all):
        the wrong protocol, options or registry, not a few bad records."""
        return bool(self.dead) and not self.rows_in and not self.ddl

    def finish(self, config: Any) -> int:
        """Print the summary (and where the dead letters are, with the first one's reason);
        the run's exit status."""
        print(f"ticdc-spark replicate: {self.summary()}", file=sys.stderr)
        if not self.dead or self.first_dead is None:
            return EXIT_OK
        directory = config.dead_letters or join(str(config.checkpoint), "dead-letters")
        first = DeadLetterWriter(directory, config.storage).first(self.first_dead) or {}
        where = f"{first.get('topic')}/{first.get('partition')}@{first.get('offset')}"
        if self.all_dead:
            print(
                f"ticdc-spark replicate: every record of this run became a dead letter "
                f"({self.dead}, in {directory}); the first, at {where}: {first.get('error')}",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        print(
            f"ticdc-spark replicate: dead letters in {directory}; the first, at {where}: "
            f"{first.get('error')}",
            file=sys.stderr,
        )
        return EXIT_OK
