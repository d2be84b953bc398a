"""What a protocol's messages carry, which decides how the pipeline orders and follows them.

Built once per pipeline from the codec catalog (:meth:`Capabilities.of`) and handed to the
planner and the applier as one value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from ticdc_spark.codec.catalog import get_codec, make_finisher
from ticdc_spark.errors import ConfigError
from ticdc_spark.model import TableSchema
from ticdc_spark.pipeline.changelog import ChangelogBuilder
from ticdc_spark.pipeline.policy import Mode
from ticdc_spark.pipeline.state import SchemaVersion

__all__ = ["Capabilities", "RowFinisher"]


class RowFinisher(Protocol):
    """The consumer's half of a protocol whose rows name a schema version that other
    messages bring (Simple: :class:`ticdc_spark.codec.simple.pipeline.RowFinisher`)."""

    def schema(self, text: str) -> TableSchema:
        """A schema as ``versions`` keeps it, read."""

    def learn(self, messages: list[bytes], versions: dict[SchemaVersion, str]) -> None:
        """Add the schemas BOOTSTRAP and DDL ``messages`` bring to ``versions``."""

    def finish(
        self,
        records: list[tuple[bytes, str, int, int]],
        versions: dict[SchemaVersion, str],
        builder: ChangelogBuilder,
    ) -> tuple[pa.RecordBatch, list[bool]]:
        """Changelog rows (a RecordBatch from ``builder``) of the wire ``records`` whose
        schema ``versions`` holds, and for each record whether it gave one."""


@dataclass(frozen=True)
class Capabilities:
    """What a protocol carries.  The defaults are a protocol that carries everything
    (Canal-JSON, Open Protocol)."""

    protocol: str = ""
    # resolved ts (watermarks): consistent mode needs them
    watermarks: bool = True
    # DDL messages: without them (Avro) a table follows the schemas its rows carry
    ddl: bool = True
    # a commit ts on every row: without it (Avro tombstones, genuine Debezium) rows are
    # placed by their partition position
    commit_ts: bool = True
    # rows that wait for schemas other messages bring (Simple): the codec's finisher
    finisher: RowFinisher | None = None

    @classmethod
    def of(cls, protocol: str, options: Mapping[str, Any] | None = None) -> Capabilities:
        """A protocol's capabilities, from its codec's catalog entry."""
        spec = get_codec(protocol)
        return cls(
            spec.name,
            watermarks=spec.watermarks,
            ddl=spec.ddl,
            commit_ts=spec.commit_ts,
            finisher=make_finisher(protocol, options),
        )

    @property
    def rows_define_schema(self) -> bool:
        """Whether a table follows the schemas its rows carry: no DDL (Avro), or table
        schemas by version (Simple)."""
        return not self.ddl or self.finisher is not None

    @property
    def place_by_position(self) -> bool:
        """Whether rows are placed by their partition position (rows without a commit ts)."""
        return not self.commit_ts

    def default_mode(self) -> Mode:
        """Consistent, or eventual for a protocol that carries no watermarks."""
        return Mode.CONSISTENT if self.watermarks else Mode.EVENTUAL

    def check_mode(self, mode: str) -> None:
        """Refuse consistent mode for a protocol without watermarks, saying why."""
        if Mode.parse(mode) == Mode.CONSISTENT and not self.watermarks:
            raise ConfigError(
                f"the {self.protocol} protocol carries no watermarks (resolved ts), so no "
                "applied state can be known to be a transaction-consistent snapshot of "
                "upstream: replicate it with --mode eventual (rows are ordered by commit ts "
                "and by their partition position, see docs/pipeline.md)"
            )
