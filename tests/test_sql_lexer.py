"""The one SQL lexer: the DDL classifier and the statement readers see the same tokens.

Before issue 25 the classifier had a lexer of its own: it dropped comments before it knew
where strings were (a ``#``, ``--`` or ``/*`` inside a string or a quoted name cut the
statement short) and lacked the doubled-quote rule of double-quoted strings.  The tests
marked below fail on it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ticdc_spark.errors import DDLParseError
from ticdc_spark.model import DDLType
from ticdc_spark.sql import classify, parse_create_table
from ticdc_spark.sql.lexer import normalize, tokens

QUOTED = {
    '"a""b"': ("str", 'a"b'),  # (the rule the classifier's own lexer lacked)
    "'a''b'": ("str", "a'b"),
    "'a\\'b'": ("str", "a'b"),
    '"a\\"b"': ("str", 'a"b'),
    "`a``b`": ("qid", "a`b"),
    "'a -- b # c /* d'": ("str", "a -- b # c /* d"),
    "`x#y`": ("qid", "x#y"),
}


@pytest.mark.parametrize(("text", "token"), QUOTED.items())
def test_a_quoted_text_is_one_token(text: str, token: tuple[str, str]) -> None:
    assert tokens(f"COMMENT {text}") == [("id", "COMMENT"), token]


@pytest.mark.parametrize("text", QUOTED)
def test_the_classifier_sees_one_string_where_the_readers_do(text: str) -> None:
    """(fails on the classifier's old lexer: ``"a""b"`` was two strings to it, and the
    comment markers cut the statement)"""
    assert normalize(f"ALTER TABLE t COMMENT {text}") == "ALTER TABLE T COMMENT ?"


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t ADD COLUMN c INT COMMENT 'a#b', DROP COLUMN d",
        "ALTER TABLE t ADD COLUMN c INT DEFAULT '/*', DROP COLUMN d, ADD INDEX i (c) COMMENT '*/'",
        'ALTER TABLE t COMMENT "x -- y", ADD COLUMN c INT',
        "ALTER TABLE `a#b` ADD COLUMN c INT, DROP COLUMN d",
        'ALTER TABLE t COMMENT "it""s # here", DROP COLUMN d',
    ],
)
def test_comment_markers_inside_quotes_do_not_cut_the_statement(sql: str) -> None:
    """(fails on the classifier's old lexer: ADD_COLUMN, MODIFY_TABLE_COMMENT or NONE)"""
    assert classify(sql) is DDLType.ACTION_MULTI_SCHEMA_CHANGE


def test_real_comments_are_still_dropped() -> None:
    sql = "ALTER TABLE t /* , DROP COLUMN x */ ADD COLUMN c INT -- , DROP COLUMN y\n# , DROP z"
    assert classify(sql) is DDLType.ADD_COLUMN
    assert tokens(sql)[-3:] == [("id", "COLUMN"), ("id", "c"), ("id", "INT")]


def test_a_column_default_keeps_its_doubled_quotes() -> None:
    schema = parse_create_table('CREATE TABLE t (a varchar(8) DEFAULT "x""y # z")', "db")
    assert schema is not None and schema.columns[0].default == 'x"y # z'


def test_the_classifier_never_raises_where_the_readers_do() -> None:
    """An unterminated quote: the readers name the character, the classifier says NONE."""
    with pytest.raises(DDLParseError, match="unexpected character"):
        tokens("ALTER TABLE t COMMENT 'open")
    assert classify("ALTER TABLE t COMMENT 'open") is DDLType.MODIFY_TABLE_COMMENT
    assert classify("?? [not sql]") is DDLType.NONE


@given(st.lists(st.sampled_from([*QUOTED, "a", "1.5", ",", "(", ")", " ", "=", "/* c */"])))
def test_every_quoted_token_is_one_mark_in_the_classifier_text(parts: list[str]) -> None:
    sql = " ".join(["ALTER", "TABLE", "t", *parts])
    quoted = sum(kind in ("str", "qid") for kind, _ in tokens(sql))
    assert normalize(sql).count("?") == quoted
