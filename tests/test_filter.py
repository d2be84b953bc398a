"""Table filters: TiDB's table-filter syntax as TiCDC uses it (case-insensitive names).

The cases are those of TiDB's own tests (``pkg/table-filter/table_filter_test.go``), with
the answers of the case-insensitive filter TiCDC builds by default.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from ticdc_spark.errors import ConfigError
from ticdc_spark.filter import TableFilter

MATCHES = [
    (["*.*"], [("foo", "bar", True)]),
    (["foo.*"], [("foo", "bar", True), ("foo1", "bar", False), ("foo2", "bar", False)]),
    (["*.*", "!foo1.*"], [("foo", "bar", True), ("foo1", "bar", False), ("foo2", "bar", True)]),
    (["foo.bar1"], [("foo", "bar", False), ("foo", "bar1", True), ("fff", "bar1", False)]),
    (["*.*", "!foo.bar"], [("foo", "bar", False), ("foo", "bar1", True), ("fff", "bar1", True)]),
    (
        ["/^foo/.*", r"!/^foo/./^sbtest-\d/"],
        [("foo", "sbtest", True), ("foo1", "sbtest-1", False), ("fff", "bar", False)],
    ),
    (
        ["*.*", "!foo[bar].*", "!bar?.*", r"!special\\.*"],
        [
            ("foor", "a", False),
            ("foo[bar]", "b", True),
            ("ba", "c", True),
            ("bar?", "d", False),
            ("special\\", "e", False),
            ("special\\\\", "f", True),
            ("bazzz", "g", True),
            ("special\\$", "h", True),
            ("afooa", "i", True),
        ],
    ),
    (
        ["*.*", "!/^FOO/.*", "!*./FoO$/"],
        [
            ("FOO1", "a", False),
            ("foo2", "b", False),
            ("BoO3", "cFoO", False),
            ("Foo4", "dfoo", False),
            ("5", "5", True),
        ],
    ),
    (
        ["*.*", "!a?b?./f[0-9]/"],
        [("abbd", "f1", False), ("aaaa", "f2", True), ("5", "5", True), ("abbc", "fa", True)],
    ),
    (
        ["*.*", "!/t[0-8]/.a??"],
        [("t1", "a01", False), ("t9", "a02", True), ("5", "5", True), ("t8", "a001", True)],
    ),
    (["*.*", "!a*.A*"], [("aB", "Ab", False), ("AaB", "aab", False), ("acB", "Afb", False)]),
    (["BAR.*"], [("bar", "a", True), ("BAR", "a", True)]),
    (["# comment", "x.y", "   \t"], [("x", "y", True), ("y", "y", False)]),
    (
        ["p_123$.45", "中文.表名"],
        [
            ("p_123", "45", False),
            ("p_123$", "45", True),
            ("英文", "表名", False),
            ("中文", "表名", True),
        ],
    ),
    ([r"\\\..*"], [("\\.", "a", True), ("\\\\\\.", "b", False), ("\\a", "c", False)]),
    (
        ["[!a-z].[^a-z]"],
        [
            ("!", "z", True),
            ("!", "^", True),
            ("!", "9", False),
            ("a", "z", False),
            ("a", "^", False),
            ("a", "9", False),
            ("1", "z", True),
            ("1", "^", True),
            ("1", "9", False),
        ],
    ),
    (
        ['"some ""quoted""".`identifiers?`'],
        [
            ('some "quoted"', "identifiers?", True),
            ('some "quoted"', "identifiers!", False),
            ('some ""quoted""', "identifiers?", False),
            ('SOME "QUOTED"', "IDENTIFIERS?", True),
            ('some\t"quoted"', "identifiers?", False),
        ],
    ),
    (
        ["db*.*", "!*.cfg*", "*.cfgsample"],
        [
            ("irrelevant", "table", False),
            ("db1", "tbl1", True),
            ("db1", "cfg1", False),
            ("db1", "cfgsample", True),
            ("else", "cfgsample", True),
        ],
    ),
    (
        ["*.*", "!S.D[!a-d]"],
        [("S", "D1", False), ("S", "Da", True), ("S", "Db", True), ("S", "Daa", True)],
    ),
    (
        ["*.*", "!S.D[a-d]"],
        [("S", "D1", True), ("S", "Da", False), ("S", "Db", False), ("S", "Daa", True)],
    ),
    # the example: the last rule that matches decides
    (
        ["db.*", "!db.tmp_*"],
        [("db", "orders", True), ("DB", "Tmp_x", False), ("db", "tmp", True), ("x", "y", False)],
    ),
    (["!db.tmp_*", "db.*"], [("db", "tmp_x", True)]),
]


@pytest.mark.parametrize(("rules", "cases"), MATCHES, ids=[" ".join(r) for r, _ in MATCHES])
def test_matches_as_ticdc(rules: list[str], cases: list[tuple[str, str, bool]]) -> None:
    table_filter = TableFilter(rules)
    for database, table, expected in cases:
        assert table_filter.matches(database, table) is expected, (database, table)
        assert table_filter.matches(database, table) is expected  # (remembered)


def test_no_rules_keep_everything_and_only_comments_nothing() -> None:
    assert TableFilter().matches("any", "table")
    assert TableFilter([]).everything
    assert not TableFilter(["# nothing"]).matches("any", "table")


@pytest.mark.parametrize(
    ("rules", "schemas"),
    [
        (["*.*"], [("foo", True)]),
        (["foo.*"], [("foo", True), ("foo1", False)]),
        (["*.*", "!foo1.*"], [("foo", True), ("foo1", False)]),
        (["foo.bar1"], [("foo", True), ("foo1", False)]),
        (["*.*", "!foo.bar"], [("foo", True), ("foo1", True)]),
        (["*.*", "!FOO*.*", "!*.*FoO"], [("foo", False), ("FOOBAR", False), ("bar", True)]),
    ],
)
def test_matches_schema_as_ticdc(rules: list[str], schemas: list[tuple[str, bool]]) -> None:
    table_filter = TableFilter(rules)
    for database, expected in schemas:
        assert table_filter.matches_schema(database) is expected, database


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("a.b.c", "stray characters after table pattern"),
        ("a%b.c", "unexpected special character '%'"),
        (r"a\tb.c", "cannot escape a letter or number"),
        ("[].*", "failed to parse character class"),
        ("[!].*", "invalid pattern"),
        ("[.*", "failed to parse character class"),
        (r"[\d\D].*", "failed to parse character class"),
        ("db", "missing table pattern"),
        ("db.", "missing pattern"),
        ("`db`*.*", "missing '.' between schema and table patterns"),
        ("/db.*", "incomplete regexp"),
        ("`db.*", "incomplete quoted identifier"),
        ('"db.*', "incomplete quoted identifier"),
        ("db\\", "cannot place \\ at end of line"),
        ("db.tbl#not comment", "unexpected special character '#'"),
        ("/(/.*", "invalid pattern"),
    ],
)
def test_bad_rules_are_named(rule: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TableFilter(["db.*", rule])
    assert message in str(caught.value)
    assert repr(rule) in str(caught.value)


def test_rules_from_a_file(tmp_path: Path) -> None:
    root = tmp_path
    (root / "1.txt").write_text("\n  db?.tbl?\n  db02.tbl02\n")
    (root / "2.txt").write_text("db03.tbl03\n!db4.tbl4\n")
    (root / "3.txt").write_text("# comment\n\n@" + str(root / "1.txt"))
    table_filter = TableFilter([f"@{root / '1.txt'}", f"@{root / '2.txt'}", "db04.tbl04"])
    for database, table, expected in [
        ("db1", "tbl1", True),
        ("db4", "tbl4", False),
        ("db01", "tbl01", False),
        ("db02", "tbl02", True),
        ("db03", "tbl03", True),
        ("db04", "tbl04", True),
    ]:
        assert table_filter.matches(database, table) is expected
    with pytest.raises(ConfigError, match=r"line 3\): importing filter files recursively"):
        TableFilter([f"@{root / '3.txt'}"])
    with pytest.raises(ConfigError, match="cannot open filter file"):
        TableFilter([f"@{root / 'missing.txt'}"])


def test_a_filter_pickles_as_its_rules() -> None:
    table_filter = pickle.loads(pickle.dumps(TableFilter(["db.*", "!db.tmp_*"])))
    assert table_filter.rules == ("db.*", "!db.tmp_*")
    assert not table_filter.matches("db", "tmp_1")
