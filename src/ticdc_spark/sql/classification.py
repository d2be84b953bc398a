"""DDL classification: which TiDB action a statement is.

Canal-JSON and Open Protocol carry a DDL as its SQL text (Canal-JSON only with a coarse
``type``), so consumers classify the statement themselves.  This is a small keyword
classifier over the statement's tokens (:func:`~ticdc_spark.sql.lexer.normalize`), not a SQL
parser; statements it does not recognise are ``DDLType.NONE``.
"""

from __future__ import annotations

import re

from ticdc_spark.model import DDLType
from ticdc_spark.sql.lexer import normalize

__all__ = ["classify", "split_top_level"]


_SIMPLE = (
    (r"^CREATE (?:DATABASE|SCHEMA)\b", DDLType.CREATE_SCHEMA),
    (r"^DROP (?:DATABASE|SCHEMA)\b", DDLType.DROP_SCHEMA),
    (r"^ALTER (?:DATABASE|SCHEMA)\b", DDLType.MODIFY_SCHEMA_CHARSET_AND_COLLATE),
    (
        r"^CREATE (?:OR REPLACE )?(?:ALGORITHM ?= ?\w+ )?(?:DEFINER ?= ?\S+ )?"
        r"(?:SQL SECURITY \w+ )?VIEW\b",
        DDLType.CREATE_VIEW,
    ),
    (r"^CREATE (?:GLOBAL |LOCAL )?(?:TEMPORARY )?TABLE\b", DDLType.CREATE_TABLE),
    (r"^DROP VIEW\b", DDLType.DROP_VIEW),
    (r"^DROP (?:TEMPORARY )?TABLES?\b", DDLType.DROP_TABLE),
    (r"^TRUNCATE\b", DDLType.TRUNCATE_TABLE),
    (r"^RENAME TABLES?\b", DDLType.RENAME_TABLE),
    (r"^CREATE (?:UNIQUE |FULLTEXT |SPATIAL )?INDEX\b", DDLType.ADD_INDEX),
    (r"^DROP INDEX\b", DDLType.DROP_INDEX),
    (r"^CREATE SEQUENCE\b", DDLType.CREATE_SEQUENCE),
    (r"^ALTER SEQUENCE\b", DDLType.ALTER_SEQUENCE),
    (r"^DROP SEQUENCE\b", DDLType.DROP_SEQUENCE),
    (r"^RECOVER TABLE\b|^FLASHBACK TABLE\b", DDLType.RECOVER_TABLE),
)
_SIMPLE_RE = tuple((re.compile(p), t) for p, t in _SIMPLE)

# One ALTER TABLE clause -> action, tried in order.
_CLAUSES = (
    (r"^ADD (?:CONSTRAINT (?:\S+ )?)?PRIMARY KEY\b", DDLType.ADD_PRIMARY_KEY),
    (r"^ADD (?:CONSTRAINT (?:\S+ )?)?FOREIGN KEY\b", DDLType.ADD_FOREIGN_KEY),
    (r"^ADD (?:CONSTRAINT (?:\S+ )?)?(?:UNIQUE|INDEX|KEY|FULLTEXT|SPATIAL)\b", DDLType.ADD_INDEX),
    (r"^ADD (?:CONSTRAINT (?:\S+ )?)?CHECK\b", DDLType.ADD_CHECK_CONSTRAINT),
    (r"^ADD PARTITION\b", DDLType.ADD_TABLE_PARTITION),
    (r"^ADD\b", DDLType.ADD_COLUMN),
    (r"^DROP PRIMARY KEY\b", DDLType.DROP_PRIMARY_KEY),
    (r"^DROP FOREIGN KEY\b", DDLType.DROP_FOREIGN_KEY),
    (r"^DROP (?:INDEX|KEY)\b", DDLType.DROP_INDEX),
    (r"^DROP (?:CHECK|CONSTRAINT)\b", DDLType.DROP_CHECK_CONSTRAINT),
    (r"^DROP PARTITION\b", DDLType.DROP_TABLE_PARTITION),
    (r"^DROP\b", DDLType.DROP_COLUMN),
    (r"^(?:MODIFY|CHANGE)\b", DDLType.MODIFY_COLUMN),
    (r"^ALTER (?:COLUMN )?\S+ (?:SET DEFAULT|DROP DEFAULT)\b", DDLType.SET_DEFAULT_VALUE),
    (r"^ALTER (?:INDEX|KEY) \S+ (?:IN)?VISIBLE\b", DDLType.ALTER_INDEX_VISIBILITY),
    (r"^RENAME (?:INDEX|KEY)\b", DDLType.RENAME_INDEX),
    (r"^RENAME COLUMN\b", DDLType.MODIFY_COLUMN),
    (r"^RENAME\b", DDLType.RENAME_TABLE),
    (r"^TRUNCATE PARTITION\b", DDLType.TRUNCATE_TABLE_PARTITION),
    (r"^EXCHANGE PARTITION\b", DDLType.EXCHANGE_TABLE_PARTITION),
    (r"^REORGANIZE PARTITION\b", DDLType.REORGANIZE_PARTITION),
    (r"^REMOVE PARTITIONING\b", DDLType.REMOVE_PARTITIONING),
    (r"^PARTITION BY\b", DDLType.ALTER_TABLE_PARTITIONING),
    (r"^COMMENT\b", DDLType.MODIFY_TABLE_COMMENT),
    (
        r"^(?:DEFAULT )?(?:CHARACTER SET|CHARSET|COLLATE|CONVERT TO)\b",
        DDLType.MODIFY_TABLE_CHARSET_AND_COLLATE,
    ),
    (r"^AUTO_INCREMENT\b", DDLType.REBASE_AUTO_ID),
    (r"^AUTO_RANDOM_BASE\b", DDLType.REBASE_AUTO_RANDOM_BASE),
    (r"^SHARD_ROW_ID_BITS\b", DDLType.SHARD_ROW_ID),
    (r"^SET TIFLASH REPLICA\b", DDLType.SET_TIFLASH_REPLICA),
    (r"^(?:NO_)?TTL\b", DDLType.ALTER_TTL_INFO),
    (r"^CACHE\b", DDLType.ALTER_CACHE_TABLE),
    (r"^NOCACHE\b", DDLType.ALTER_NO_CACHE_TABLE),
)
_CLAUSE_RE = tuple((re.compile(p), t) for p, t in _CLAUSES)
_ALTER_TABLE_RE = re.compile(r"^ALTER (?:ONLINE |OFFLINE |IGNORE )*TABLE (\S+) ?(.*)$", re.S)


def split_top_level(text: str) -> list[str]:
    """Split at commas outside parentheses (the clauses of an ALTER TABLE)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def classify(sql: str) -> DDLType:
    """The TiDB action a DDL statement performs (NONE when not recognised)."""
    text = normalize(sql)
    for pattern, action in _SIMPLE_RE:
        if pattern.search(text):
            return action
    match = _ALTER_TABLE_RE.match(text)
    if match is None:
        return DDLType.NONE
    actions = {_clause_action(clause) for clause in split_top_level(match[2])}
    actions.discard(DDLType.NONE)
    if len(actions) > 1:
        return DDLType.ACTION_MULTI_SCHEMA_CHANGE
    return actions.pop() if actions else DDLType.NONE


def _clause_action(clause: str) -> DDLType:
    for pattern, action in _CLAUSE_RE:
        if pattern.search(clause):
            return action
    return DDLType.NONE
