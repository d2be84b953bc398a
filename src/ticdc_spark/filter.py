"""Table filters, as TiCDC writes them: ``--filter 'db.*' --filter '!db.tmp_*'``.

The syntax is TiDB's table-filter (``pkg/util/table-filter``), which TiCDC's changefeed
``filter.rules`` use:

- a rule is ``SCHEMA.TABLE``, each side a pattern: a wildcard (``*`` any text, ``?`` one
  character, ``[a-z]`` a class, ``[!a-z]`` its complement, ``\\.`` an escaped character),
  a quoted name (```a.b``` or ``"a.b"``, the quote doubled inside) or a regular expression
  between slashes (``/^sbtest\\d+$/``; Python's ``re``, which accepts a few constructs Go's
  RE2 refuses, such as look-ahead);
- ``!`` before a rule excludes what it matches; blank lines and ``#`` comments are ignored;
  ``@FILE`` reads one rule per line from a file;
- the **last** rule a table matches decides; a table no rule matches is filtered out;
- names match case-insensitively (TiCDC's default, ``case-sensitive = false``).

With no rules at all, every table is kept (TiCDC's default ``*.*``).

>>> f = TableFilter(["db.*", "!db.tmp_*"])
>>> f.matches("db", "orders"), f.matches("DB", "TMP_1"), f.matches("other", "t")
(True, False, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ticdc_spark.errors import ConfigError

__all__ = ["TableFilter"]

# One side of a rule: a literal name (compared lowered) or a compiled pattern.
_Matcher = str | re.Pattern[str]

_REGEXP = re.compile(r"/(?:\\.|[^/])+/")
_DOUBLE_QUOTED = re.compile(r'"(?:""|[^"])+"')
_BACKQUOTED = re.compile(r"`(?:``|[^`])+`")
_CLASS = re.compile(r"\[!?(?:\\[^0-9a-zA-Z]|[^\\\]])+\]")


class _RuleError(Exception):
    """A rule's syntax error (the caller names the rule)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    schema: _Matcher
    table: _Matcher
    positive: bool


def _match(matcher: _Matcher, name: str) -> bool:
    if type(matcher) is str:
        return matcher == name
    return matcher.search(name) is not None  # type: ignore[union-attr]


def _matches_all(matcher: _Matcher) -> bool:
    return not isinstance(matcher, str) and matcher.pattern == "^.*\\Z"


class TableFilter:
    """TiCDC's table filter over ``rules`` (see the module); a bad rule raises
    :class:`~ticdc_spark.errors.ConfigError` naming it."""

    def __init__(self, rules: Iterable[str] = ()) -> None:
        self.rules = tuple(rules)
        self.everything = not self.rules  # no rules: TiCDC's default, every table
        parsed: list[_Rule] = []
        for rule in self.rules:
            parsed += _parse_line(rule, allow_import=True)
        self._rules = tuple(reversed(parsed))  # the last rule that matches decides
        self._seen: dict[tuple[str, str], bool] = {}

    def __repr__(self) -> str:
        return f"TableFilter({list(self.rules)!r})"

    def __reduce__(self) -> tuple[type[TableFilter], tuple[tuple[str, ...]]]:
        return TableFilter, (self.rules,)

    def matches(self, database: str, table: str) -> bool:
        """Whether the table ``database.table`` passes the filter."""
        if self.everything:
            return True
        key = (database, table)
        seen = self._seen.get(key)
        if seen is None:
            seen = self._decide(database.lower(), table.lower())
            if len(self._seen) > 65536:
                self._seen.clear()
            self._seen[key] = seen
        return seen

    def matches_schema(self, database: str) -> bool:
        """Whether a schema-level event (``CREATE DATABASE``) of ``database`` passes: as
        TiDB's filter decides it, by the last rule whose schema pattern matches and that
        keeps some of its tables or drops all of them."""
        if self.everything:
            return True
        name = database.lower()
        for rule in self._rules:
            if _match(rule.schema, name) and (rule.positive or _matches_all(rule.table)):
                return rule.positive
        return False

    def _decide(self, database: str, table: str) -> bool:
        for rule in self._rules:
            if _match(rule.schema, database) and _match(rule.table, table):
                return rule.positive
        return False


def _parse_line(line: str, *, allow_import: bool, where: str = "") -> list[_Rule]:
    text = line.strip(" \t")
    try:
        if not text or text[0] == "#":
            return []
        if text[0] == "@":
            if not allow_import:
                raise _RuleError("importing filter files recursively is not allowed")
            return _import(text[1:])
        positive = text[0] != "!"
        if not positive:
            text = text[1:]
        schema, rest = _pattern(text)
        if not rest:
            raise _RuleError("missing table pattern")
        if rest[0] != ".":
            raise _RuleError("syntax error: missing '.' between schema and table patterns")
        table, rest = _pattern(rest[1:])
        if rest:
            raise _RuleError("syntax error: stray characters after table pattern")
        return [_Rule(schema, table, positive)]
    except _RuleError as exc:
        raise ConfigError(f"table filter rule {line!r}{where}: {exc}") from None


def _import(path: str) -> list[_Rule]:
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise _RuleError(f"cannot open filter file {path!r}: {exc.strerror}") from None
    rules: list[_Rule] = []
    for number, line in enumerate(lines, 1):
        rules += _parse_line(line, allow_import=False, where=f" ({path} line {number})")
    return rules


def _pattern(text: str) -> tuple[_Matcher, str]:
    """One side of a rule, lowered (names are compared lowered), and the text after it."""
    if not text:
        raise _RuleError("syntax error: missing pattern")
    first = text[0]
    if first == "/":
        found = _REGEXP.match(text)
        if found is None:
            raise _RuleError("syntax error: incomplete regexp")
        return _compile(text[1 : found.end() - 1]), text[found.end() :]
    if first in '"`':
        found = (_DOUBLE_QUOTED if first == '"' else _BACKQUOTED).match(text)
        if found is None:
            raise _RuleError("syntax error: incomplete quoted identifier")
        name = text[1 : found.end() - 1].replace(first * 2, first)
        return name.lower(), text[found.end() :]
    return _wildcard(text)


def _wildcard(text: str) -> tuple[_Matcher, str]:
    """A wildcard pattern up to the schema/table separator (a literal name when it has no
    wildcard), and the text after it."""
    literal: list[str] = []
    regex: list[str] = []
    is_literal = True
    i = 0
    while i < len(text) and text[i] != ".":  # (the schema/table separator)
        piece, character, i = _wildcard_element(text, i)
        regex.append(piece)
        if character is None:
            is_literal = False
        else:
            literal.append(character)
    rest = text[i:]
    if is_literal:
        return "".join(literal).lower(), rest
    return _compile("^" + "".join(regex) + "\\Z"), rest


def _wildcard_element(text: str, i: int) -> tuple[str, str | None, int]:
    """The element of a wildcard at ``text[i]``: its regex, the character it stands for
    (None: a wildcard), and where the next element starts."""
    c = text[i]
    if c == "\\":
        if i == len(text) - 1:
            raise _RuleError("syntax error: cannot place \\ at end of line")
        escaped = text[i + 1]
        if escaped.isascii() and escaped.isalnum():
            raise _RuleError(
                f"cannot escape a letter or number (\\{escaped}), "
                "it is reserved for future extension"
            )
        return re.escape(escaped), escaped, i + 2
    if c == "*":
        return ".*", None, i + 1
    if c == "?":
        return ".", None, i + 1
    if c == "[":
        return _character_class(text, i)
    if c in "$_" or (c.isascii() and c.isalnum()) or ord(c) >= 0x80:
        return re.escape(c), c, i + 1
    raise _RuleError(f"unexpected special character {c!r}")


def _character_class(text: str, i: int) -> tuple[str, None, int]:
    """A ``[...]`` class at ``text[i]`` as a regex class (``[!a]``: its complement)."""
    found = _CLASS.match(text, i)
    if found is None:
        raise _RuleError("syntax error: failed to parse character class")
    body = text[i + 1 : found.end()]
    if body[0] == "!":
        return "[^" + body[1:], None, found.end()
    if body[0] == "^":  # (not special in a glob)
        return "[\\^" + body[1:], None, found.end()
    return "[" + body, None, found.end()


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.IGNORECASE | re.DOTALL)
    except re.error as exc:
        raise _RuleError(f"invalid pattern: {exc}") from None
