"""MySQL/TiDB statement text as tokens: the one lexer of the package.

Tokens are ``("id", word)`` for keywords and bare names, ``("qid", name)`` for `quoted`
names, ``("str", text)`` for strings (quotes removed, escapes and doubled quotes undone),
``("num", text)`` and ``("op", ch)``.  Whitespace and comments (``/* */``, ``-- ``, ``#``) are
skipped, in the same pass as the quotes: a comment marker inside a string or a quoted name is
text, and a string is ended only by its own quote (a doubled quote, or one after a backslash,
is part of it).  The DDL classifier (:mod:`.classification`) reads :func:`normalize`'s text of
the same tokens; the statement readers read a :class:`TokenStream`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ticdc_spark.errors import DDLParseError

__all__ = ["Token", "TokenStream", "normalize", "split_commas", "tokens", "tokens_text", "unquote"]

TOKEN_RE = re.compile(
    r"""\s+|/\*.*?\*/|--[^\n]*|\#[^\n]*
    |(?P<bq>`(?:[^`]|``)*`)
    |(?P<sq>'(?:[^'\\]|\\.|'')*')
    |(?P<dq>"(?:[^"\\]|\\.|"")*")
    |(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)
    |(?P<word>[A-Za-z_$\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*)
    |(?P<op>[(),.;=@:+\-*/<>!~%&|^])
    """,
    re.S | re.X,
)
Token = tuple[str, str]


def tokens(sql: str) -> list[Token]:
    """The statement's tokens; raises :class:`DDLParseError` naming a character the lexer does
    not know (an unterminated quote among them)."""
    out: list[Token] = []
    pos = 0
    while pos < len(sql):
        match = TOKEN_RE.match(sql, pos)
        if match is None:
            raise DDLParseError(f"unexpected character {sql[pos]!r}", sql)
        pos = match.end()
        kind = match.lastgroup
        if kind is None:
            continue  # whitespace or a comment
        text = match.group(kind)
        if kind == "bq":
            out.append(("qid", text[1:-1].replace("``", "`")))
        elif kind in ("sq", "dq"):
            out.append(("str", unquote(text)))
        elif kind == "word":
            out.append(("id", text))
        else:
            out.append((kind, text))
    return out


def unquote(text: str) -> str:
    """A quoted string's text: its quotes removed, doubled quotes and backslash escapes
    undone."""
    quote, body = text[0], text[1:-1]
    body = body.replace(quote * 2, quote)
    return re.sub(
        r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(m[1], m[1]), body
    )


def normalize(sql: str) -> str:
    """The statement for keyword matching: comments dropped, quoted names and strings replaced
    by ``?``, single spaces, upper case, no final ``;``.  Never raises: a character the lexer
    does not know (an unterminated quote among them) is kept as it is."""
    text = TOKEN_RE.sub(_normalized_token, sql)
    return " ".join(text.split()).upper().rstrip("; ")


def _normalized_token(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind is None:
        return " "  # whitespace or a comment
    return "?" if kind in ("bq", "sq", "dq") else match[0]


class TokenStream:
    """A cursor over tokens with keyword matching (case-insensitive)."""

    def __init__(self, tokens: list[Token], sql: str) -> None:
        self.tokens = tokens
        self.pos = 0
        self.sql = sql

    def peek(self, ahead: int = 0) -> Token | None:
        index = self.pos + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def next(self) -> Token:
        token = self.peek()
        if token is None:
            raise DDLParseError("statement ends too early", self.sql)
        self.pos += 1
        return token

    def is_word(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token is not None and token[0] == "id" and token[1].upper() in words

    def accept(self, *words: str) -> bool:
        """Consume the keywords if they come next, in order."""
        if all(self.is_word(w, ahead=i) for i, w in enumerate(words)):
            self.pos += len(words)
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise DDLParseError(f"expected {' '.join(words)}", self.sql)

    def is_op(self, op: str) -> bool:
        token = self.peek()
        return token is not None and token == ("op", op)

    def accept_op(self, op: str) -> bool:
        if self.is_op(op):
            self.pos += 1
            return True
        return False

    def name(self) -> str:
        kind, text = self.next()
        if kind not in ("id", "qid", "str"):
            raise DDLParseError(f"expected a name, found {text!r}", self.sql)
        return text

    def qualified_name(self, default_database: str) -> tuple[str, str]:
        first = self.name()
        if self.accept_op("."):
            return first, self.name()
        return default_database, first

    def group(self) -> list[Token]:
        """The tokens inside the parentheses that come next (consumed)."""
        if not self.accept_op("("):
            raise DDLParseError("expected '('", self.sql)
        depth, start = 1, self.pos
        while depth:
            kind, text = self.next()
            if kind == "op" and text in "()":
                depth += 1 if text == "(" else -1
        return self.tokens[start : self.pos - 1]

    def skip_to_comma(self) -> None:
        depth = 0
        while not self.at_end():
            token = self.peek()
            if token == ("op", ",") and depth == 0:
                return
            if token == ("op", "("):
                depth += 1
            elif token == ("op", ")"):
                depth -= 1
            self.pos += 1


def split_commas(tokens: list[Token]) -> Iterator[list[Token]]:
    depth, start = 0, 0
    for i, token in enumerate(tokens):
        if token == ("op", "("):
            depth += 1
        elif token == ("op", ")"):
            depth -= 1
        elif token == ("op", ",") and depth == 0:
            yield tokens[start:i]
            start = i + 1
    if tokens[start:]:
        yield tokens[start:]


def tokens_text(tokens: list[Token]) -> str:
    """Tokens back to SQL text (for type parameters and defaults)."""
    parts = []
    for kind, text in tokens:
        parts.append("'" + text.replace("'", "''") + "'" if kind == "str" else text)
    return "".join(parts) if all(k != "id" for k, _ in tokens) else " ".join(parts)
