"""Which tables a statement names: its target, the tables a DROP TABLE drops, and the
pairs a RENAME TABLE renames."""

from __future__ import annotations

from ticdc_spark.sql.lexer import TokenStream, split_commas, tokens

__all__ = ["ddl_target", "dropped_tables", "parse_rename_tables"]


def parse_rename_tables(sql: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """``RENAME TABLE a TO b, c.d TO e.f`` -> [((db, a), (db, b)), ...]; db "" if not given."""
    stream = TokenStream(tokens(sql), sql)
    stream.expect("RENAME")
    if not stream.accept("TABLES"):
        stream.expect("TABLE")
    pairs = []
    for part in split_commas(stream.tokens[stream.pos :]):
        item = TokenStream(part, sql)
        old = item.qualified_name("")
        item.expect("TO")
        pairs.append((old, item.qualified_name("")))
    return pairs


def ddl_target(sql: str, default_database: str = "") -> tuple[str, str]:
    """The (database, table) a DDL statement is about; table is "" for database DDL."""
    stream = TokenStream(tokens(sql), sql)
    verb = stream.name().upper()
    if verb in ("CREATE", "DROP", "ALTER") and (
        stream.accept("DATABASE") or stream.accept("SCHEMA")
    ):
        stream.accept("IF", "NOT", "EXISTS") or stream.accept("IF", "EXISTS")
        return stream.name(), ""
    if verb in ("CREATE", "DROP") and _skip_to(stream, "INDEX"):
        if verb == "CREATE" or not stream.is_word("ON", ahead=0):
            stream.name()
        stream.expect("ON")
        return stream.qualified_name(default_database)
    if verb == "RENAME":
        pairs = parse_rename_tables(sql)
        return (pairs[0][0][0] or default_database, pairs[0][0][1])
    _skip_to(stream, "TABLE")
    stream.accept("IF", "NOT", "EXISTS") or stream.accept("IF", "EXISTS")
    return stream.qualified_name(default_database)


def _skip_to(stream: TokenStream, word: str) -> bool:
    start = stream.pos
    while not stream.at_end():
        if stream.accept(word):
            return True
        stream.next()
    stream.pos = start
    return False


def dropped_tables(sql: str, default_database: str = "") -> list[tuple[str, str]]:
    """The tables ``DROP TABLE [IF EXISTS] a, b.c`` drops."""
    stream = TokenStream(tokens(sql), sql)
    stream.expect("DROP")
    stream.accept("TEMPORARY")
    if not stream.accept("TABLES"):
        stream.expect("TABLE")
    stream.accept("IF", "EXISTS")
    return [
        TokenStream(part, sql).qualified_name(default_database)
        for part in split_commas(stream.tokens[stream.pos :])
        if not TokenStream(part, sql).is_word("RESTRICT", "CASCADE")
    ]
