"""TiCDC's topic expressions: the topic a table's messages go to (``cdc_{schema}_{table}``).

Part of the dispatch rules (:mod:`ticdc_spark.dispatch`), kept in the codec layer because an
encoder needs it too: the Avro protocol names its schema subjects after the topic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ticdc_spark.errors import ConfigError

__all__ = ["TopicRouter"]

_NAME_CHARS = r"[A-Za-z0-9._\-]*"
_TOPIC_RE = re.compile(rf"^{_NAME_CHARS}(\{{schema\}}{_NAME_CHARS})?(\{{table\}}{_NAME_CHARS})?\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]")
_MAX_TOPIC = 249


@dataclass(frozen=True, slots=True)
class TopicRouter:
    """Turns a topic expression such as ``cdc_{schema}_{table}`` into topic names."""

    expression: str
    default_topic: str = ""

    def __post_init__(self) -> None:
        if not self.expression or not _TOPIC_RE.match(self.expression):
            raise ConfigError(
                f"invalid topic expression {self.expression!r}: use [A-Za-z0-9._-] with "
                "optional {schema} and {table}"
            )

    def topic(self, schema: str, table: str) -> str:
        if not schema and not table and "{" in self.expression:
            return self.default_topic or self.expression.split("{", 1)[0].rstrip("_-.")
        name = self.expression.replace("{schema}", _UNSAFE.sub("_", schema))
        name = name.replace("{table}", _UNSAFE.sub("_", table))
        return name[:_MAX_TOPIC]
