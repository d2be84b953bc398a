"""Applying DDL statements to table schemas.

A consumer of Canal-JSON or Open Protocol learns a table's full types (DECIMAL precision,
ENUM members, fractional seconds) only from its CREATE TABLE statement, and keeps them in step
through ALTER TABLE, RENAME and index statements.  This module reads the MySQL/TiDB DDL a
CDC stream carries: a tokenizer that respects quoting, comments and parentheses, and a
handler per statement.  It is not a full SQL parser: clauses that do not change columns or
keys (table options, partitioning, TTL, ...) are accepted and ignored, and a statement it
cannot read raises :class:`~ticdc_spark.errors.DDLParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import replace

from ticdc_spark.errors import DDLParseError
from ticdc_spark.model import Column, ColumnFlag, DefaultExpression, Index, TableSchema
from ticdc_spark.types import ColumnType, parse_column_type

__all__ = [
    "alter_table",
    "apply_alter_table",
    "apply_index_ddl",
    "ddl_target",
    "dropped_tables",
    "parse_create_table",
    "parse_rename_tables",
]

# --------------------------------------------------------------------------------------------
# Tokens: ("id", word) for keywords and bare names, ("qid", name) for `quoted` names,
# ("str", text), ("num", text), ("op", ch).

_TOKEN_RE = re.compile(
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


def _tokens(sql: str) -> list[Token]:
    out: list[Token] = []
    pos = 0
    while pos < len(sql):
        match = _TOKEN_RE.match(sql, pos)
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
            out.append(("str", _unquote(text)))
        elif kind == "word":
            out.append(("id", text))
        else:
            out.append((kind, text))
    return out


def _unquote(text: str) -> str:
    quote, body = text[0], text[1:-1]
    body = body.replace(quote * 2, quote)
    return re.sub(
        r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}.get(m[1], m[1]), body
    )


class _Stream:
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


def _split_commas(tokens: list[Token]) -> Iterator[list[Token]]:
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


def _text(tokens: list[Token]) -> str:
    """Tokens back to SQL text (for type parameters and defaults)."""
    parts = []
    for kind, text in tokens:
        parts.append("'" + text.replace("'", "''") + "'" if kind == "str" else text)
    return "".join(parts) if all(k != "id" for k, _ in tokens) else " ".join(parts)


# --------------------------------------------------------------------------------------------
# Column definitions.

_CONSTRAINT_WORDS = (
    "PRIMARY",
    "UNIQUE",
    "KEY",
    "INDEX",
    "FULLTEXT",
    "SPATIAL",
    "CONSTRAINT",
    "FOREIGN",
    "CHECK",
)
_TYPE_SUFFIXES = ("UNSIGNED", "SIGNED", "ZEROFILL")
_MULTIWORD_TYPES = {
    ("DOUBLE", "PRECISION"),
    ("CHARACTER", "VARYING"),
    ("LONG", "VARCHAR"),
    ("LONG", "VARBINARY"),
    ("NATIONAL", "CHAR"),
    ("NATIONAL", "VARCHAR"),
    ("NCHAR", "VARCHAR"),
}


class _ColumnDef:
    """What a column definition says: the column, and keys declared on it."""

    def __init__(self, column: Column, primary: bool, unique: bool, virtual: bool) -> None:
        self.column = column
        self.primary = primary
        self.unique = unique
        self.virtual = virtual  # a VIRTUAL generated column: TiCDC never sends it

    def index(self) -> Index | None:
        """The key declared on the column (PRIMARY KEY or UNIQUE), if any."""
        name = self.column.name
        if self.primary:
            return Index("PRIMARY", (name,), primary=True, unique=True)
        if self.unique:
            return Index(name, (name,), unique=True)
        return None


def _column_def(stream: _Stream) -> _ColumnDef:
    name = stream.name()
    ctype = _column_type(stream)
    nullable, default, generated, primary, unique = True, None, False, False, False
    stored = False
    while not stream.at_end() and not stream.is_op(","):
        if stream.accept("NOT", "NULL"):
            nullable = False
        elif stream.accept("NULL"):
            nullable = True
        elif stream.accept("DEFAULT"):
            default = _default(stream)
        elif stream.accept("PRIMARY", "KEY") or stream.accept("KEY"):
            primary, nullable = True, False
        elif stream.accept("UNIQUE"):
            stream.accept("KEY") or stream.accept("INDEX")
            unique = True
        elif stream.accept("CHARACTER", "SET") or stream.accept("CHARSET"):
            ctype = replace(ctype, charset=stream.name())
        elif stream.accept("COLLATE"):
            ctype = replace(ctype, collation=stream.name())
        elif stream.accept("GENERATED", "ALWAYS", "AS") or stream.accept("AS"):
            stream.group()
            generated = True
        elif stream.accept("STORED"):
            stored = True
        elif stream.accept("COMMENT") or stream.accept("ON", "UPDATE"):
            _default(stream)
        elif stream.is_op("("):
            stream.group()
        else:
            stream.next()  # AUTO_INCREMENT, VIRTUAL, STORED, REFERENCES ..., and the like
    column = Column(name, ctype, nullable, default, generated)
    return _ColumnDef(column, primary, unique, virtual=generated and not stored)


def _column_type(stream: _Stream) -> ColumnType:
    kind, word = stream.next()
    if kind != "id":
        raise DDLParseError(f"expected a column type, found {word!r}", stream.sql)
    words = [word]
    following = stream.peek()
    if following is not None and (word.upper(), following[1].upper()) in _MULTIWORD_TYPES:
        words.append(stream.next()[1])
    text = " ".join(words)
    if stream.is_op("("):
        text += "(" + _text(stream.group()) + ")"
    while any(stream.is_word(s) for s in _TYPE_SUFFIXES):
        text += " " + stream.next()[1]
    if stream.accept("BINARY") and words[0].upper() in ("CHAR", "VARCHAR"):
        pass  # CHAR(n) BINARY: a binary collation, still a character type
    try:
        return parse_column_type(text)
    except ValueError as exc:
        raise DDLParseError(str(exc), stream.sql) from None


def _default(stream: _Stream) -> str | None:
    """A DEFAULT (or COMMENT/ON UPDATE) value, as text; None for NULL.  Anything but a
    string or number (or TRUE/FALSE) is a :class:`DefaultExpression`."""
    if stream.is_op("("):
        return DefaultExpression(_text(stream.group()))
    negative = stream.accept_op("-")
    stream.accept_op("+")
    kind, text = stream.next()
    if kind == "id" and text.upper() == "NULL":
        return None
    if kind == "id" and text.upper() in ("TRUE", "FALSE"):
        return "1" if text.upper() == "TRUE" else "0"
    if kind == "id" and stream.is_op("("):  # CURRENT_TIMESTAMP(3), NOW()
        text += "(" + _text(stream.group()) + ")"
    elif kind == "id" and text.lower() in ("b", "x") and (stream.peek() or ("",))[0] == "str":
        text += "'" + stream.next()[1] + "'"
    text = ("-" if negative else "") + text
    return text if kind in ("str", "num") else DefaultExpression(text)


# TiDB keeps each expression of an expression index as a hidden VIRTUAL generated column named
# ``_V$_<index>_<part>``: TiCDC never sends it, and a unique index over it never identifies rows.
_HIDDEN_PREFIX = "_V$_"


def _index_columns(tokens: list[Token], sql: str, name: str | None) -> tuple[str, ...]:
    names = []
    for part, element in enumerate(_split_commas(tokens)):
        stream = _Stream(element, sql)
        if stream.is_op("("):  # an expression: TiDB's hidden virtual column
            names.append(f"{_HIDDEN_PREFIX}{name or 'expression_index'}_{part}")
        else:
            names.append(stream.name())
    return tuple(names)


def _constraint(stream: _Stream) -> Index | None:
    """A table constraint (PRIMARY KEY, UNIQUE, KEY ...); None for those without keys."""
    if stream.accept("CONSTRAINT") and not stream.is_word(*_CONSTRAINT_WORDS):
        stream.name()
    if stream.accept("PRIMARY", "KEY"):
        return _index_rest(stream, "PRIMARY", primary=True)
    if stream.accept("UNIQUE"):
        stream.accept("KEY") or stream.accept("INDEX")
        return _index_rest(stream, None, unique=True)
    if stream.accept("FULLTEXT") or stream.accept("SPATIAL") or stream.is_word("KEY", "INDEX"):
        stream.accept("KEY") or stream.accept("INDEX")
        return _index_rest(stream, None)
    stream.skip_to_comma()  # FOREIGN KEY, CHECK
    return None


def _index_rest(
    stream: _Stream, name: str | None, *, primary: bool = False, unique: bool = False
) -> Index:
    if name is None and not stream.is_op("("):
        name = stream.name()
    if stream.accept("USING"):
        stream.next()
    columns = _index_columns(stream.group(), stream.sql, name)
    stream.skip_to_comma()
    if name is None:  # TiDB names an index after its first column
        first = columns[0] if columns else ""
        name = "expression_index" if first.startswith(_HIDDEN_PREFIX) else first
    return Index(name, columns, primary=primary, unique=unique or primary)


# --------------------------------------------------------------------------------------------
# Statements.


def parse_create_table(sql: str, default_database: str = "") -> TableSchema | None:
    """The schema a CREATE TABLE statement creates.

    Returns None for ``CREATE TABLE ... LIKE other`` and ``CREATE TABLE ... AS SELECT``
    without column definitions: their columns come from elsewhere, so the caller must learn
    the schema from the rows.
    """
    stream = _Stream(_tokens(sql), sql)
    stream.expect("CREATE")
    while stream.accept("GLOBAL") or stream.accept("LOCAL") or stream.accept("TEMPORARY"):
        pass
    stream.expect("TABLE")
    stream.accept("IF", "NOT", "EXISTS")
    database, table = stream.qualified_name(default_database)
    if not stream.is_op("("):
        return None
    body = stream.group()
    if body and body[0][0] == "id" and body[0][1].upper() == "LIKE":
        return None
    columns: list[Column] = []
    indexes: list[Index] = []
    virtual: list[str] = []
    for element in _split_commas(body):
        _add_element(_Stream(element, sql), columns, indexes, virtual)
    return _schema(database, table, columns, indexes, virtual=virtual)


def _add_element(
    stream: _Stream, columns: list[Column], indexes: list[Index], virtual: list[str]
) -> None:
    if stream.is_word(*_CONSTRAINT_WORDS):  # a bare keyword: quoted names are "qid"
        index = _constraint(stream)
        if index is not None:
            indexes.append(index)
        return
    definition = _column_def(stream)
    if definition.virtual:
        virtual.append(definition.column.name)
    else:
        columns.append(definition.column)
    index = definition.index()
    if index is not None:
        indexes.append(index)


def _schema(
    database: str,
    table: str,
    columns: list[Column],
    indexes: list[Index],
    template: TableSchema | None = None,
    virtual: list[str] | None = None,
) -> TableSchema:
    primary = {n for i in indexes if i.primary for n in i.columns}
    columns = [replace(c, nullable=False) if c.name in primary else c for c in columns]
    table_id = template.table_id if template else 0
    version = template.version if template else 0
    if virtual is None:
        virtual = list(template.virtual_columns) if template else []
    hidden = [n for i in indexes for n in i.columns if n.startswith(_HIDDEN_PREFIX)]
    virtual = [n for n in virtual if not n.startswith(_HIDDEN_PREFIX)] + hidden
    return TableSchema(
        database, table, tuple(columns), tuple(indexes), table_id, version, tuple(virtual)
    ).with_derived_flags()


def apply_alter_table(schema: TableSchema, sql: str) -> TableSchema:
    """The schema after an ALTER TABLE statement (every clause, in order)."""
    return alter_table(schema, sql)[0]


def alter_table(schema: TableSchema, sql: str) -> tuple[TableSchema, dict[str, str]]:
    """The schema after an ALTER TABLE statement, and the columns it renamed (new name ->
    name before the statement), which a table rewrite must carry over."""
    stream = _Stream(_tokens(sql), sql)
    stream.expect("ALTER")
    while stream.accept("ONLINE") or stream.accept("OFFLINE") or stream.accept("IGNORE"):
        pass
    stream.expect("TABLE")
    stream.qualified_name(schema.database)
    state = _Alter(schema)
    for clause in _split_commas(stream.tokens[stream.pos :]):
        state.apply(_Stream(clause, sql))
    return state.result(), state.renamed


class _Alter:
    """Columns, indexes and name of a table while ALTER clauses are applied."""

    def __init__(self, schema: TableSchema) -> None:
        self.template = schema
        self.database, self.table = schema.database, schema.table
        self.columns = list(schema.columns)
        self.indexes = list(schema.indexes)
        self.virtual = list(schema.virtual_columns)  # VIRTUAL generated columns' names
        self.renamed: dict[str, str] = {}  # new column name -> its name before the statement

    def result(self) -> TableSchema:
        return _schema(
            self.database, self.table, self.columns, self.indexes, self.template, self.virtual
        )

    def apply(self, clause: _Stream) -> None:
        if clause.accept("ADD"):
            self._add(clause)
        elif clause.accept("DROP"):
            self._drop(clause)
        elif clause.accept("MODIFY"):
            clause.accept("COLUMN")
            self._replace(None, clause)
        elif clause.accept("CHANGE"):
            clause.accept("COLUMN")
            self._replace(clause.name(), clause)
        elif clause.accept("RENAME", "COLUMN"):
            self._rename_column(clause)
        elif clause.accept("RENAME", "INDEX") or clause.accept("RENAME", "KEY"):
            old = clause.name()
            clause.expect("TO")
            new = clause.name()
            self.indexes = [replace(i, name=new) if i.name == old else i for i in self.indexes]
        elif clause.accept("RENAME"):
            clause.accept("TO") or clause.accept("AS")
            self.database, self.table = clause.qualified_name(self.database)
        elif clause.accept("ALTER"):
            self._alter_column(clause)
        # anything else (table options, partitioning, TTL, ...) leaves columns and keys

    def _add(self, clause: _Stream) -> None:
        if clause.is_word(*_CONSTRAINT_WORDS):
            index = _constraint(clause)
            if index is not None:
                self._add_index(index)
            return
        if clause.accept("PARTITION"):
            return
        clause.accept("COLUMN")
        if clause.is_op("("):
            for part in _split_commas(clause.group()):
                self._insert(_column_def(_Stream(part, clause.sql)), None)
            return
        definition = _column_def(clause)
        self._insert(definition, _position(clause))

    def _insert(self, definition: _ColumnDef, position: tuple[str, str] | None) -> None:
        column = definition.column
        if definition.virtual:
            self.virtual.append(column.name)
        else:
            self.columns = [c for c in self.columns if c.name != column.name]
            self.columns.insert(self._slot(position), column)
        index = definition.index()
        if index is not None:
            self._add_index(index)

    def _slot(self, position: tuple[str, str] | None) -> int:
        if position is None:
            return len(self.columns)
        where, after = position
        if where == "FIRST":
            return 0
        for i, column in enumerate(self.columns):
            if column.name.lower() == after.lower():
                return i + 1
        return len(self.columns)

    def _add_index(self, index: Index) -> None:
        if index.primary:
            self.indexes = [i for i in self.indexes if not i.primary]
            self._forget_keys([c.name for c in self.columns])  # the new key is the handle
        self.indexes.append(index)

    def _forget_keys(self, names: Iterable[str]) -> None:
        """Clear the key flags of these columns, so the schema's handle key is derived from
        its indexes again (flags a protocol carried would otherwise keep an old key)."""
        lowered = {n.lower() for n in names}
        self.columns = [
            replace(c, flags=c.flags & ~_KEY_FLAGS) if c.name.lower() in lowered else c
            for c in self.columns
        ]

    def _drop(self, clause: _Stream) -> None:
        if clause.accept("PRIMARY", "KEY"):
            self._forget_keys(n for i in self.indexes if i.primary for n in i.columns)
            self.indexes = [i for i in self.indexes if not i.primary]
        elif clause.accept("INDEX") or clause.accept("KEY"):
            name = clause.name()
            self._forget_keys(
                n for i in self.indexes if i.name.lower() == name.lower() for n in i.columns
            )
            self.indexes = [i for i in self.indexes if i.name.lower() != name.lower()]
        elif clause.is_word("FOREIGN", "CHECK", "CONSTRAINT", "PARTITION"):
            return
        else:
            clause.accept("COLUMN")
            name = clause.name().lower()
            self.columns = [c for c in self.columns if c.name.lower() != name]
            self.virtual = [n for n in self.virtual if n.lower() != name]
            self.indexes = [
                replace(i, columns=tuple(n for n in i.columns if n.lower() != name))
                for i in self.indexes
            ]
            self.indexes = [i for i in self.indexes if i.columns]

    def _replace(self, old: str | None, clause: _Stream) -> None:
        """MODIFY / CHANGE COLUMN: the new definition takes the old column's place.  A column
        the definition makes VIRTUAL leaves the replicated columns (TiCDC stops sending it),
        and a virtual column made stored joins them (at the end unless placed: TiDB and
        MySQL refuse both changes today, but the statement says what the table becomes)."""
        definition = _column_def(clause)
        old = old or definition.column.name
        position = _position(clause)
        new = definition.column
        named, slot = self._remove(old, clause)
        if definition.virtual:
            self.virtual.append(new.name)
        elif position is not None or slot is None:
            self.columns.insert(self._slot(position), new)
        else:
            self.columns.insert(slot, new)
        self._rename_in_indexes(old, new.name)
        self._note_rename(named, new.name)
        if definition.primary:
            self._add_index(Index("PRIMARY", (new.name,), primary=True, unique=True))

    def _remove(self, name: str, clause: _Stream) -> tuple[str, int | None]:
        """Take a column out (replicated or virtual): its spelling, and its place among the
        replicated columns (None for a virtual one)."""
        lowered = name.lower()
        for slot, column in enumerate(self.columns):
            if column.name.lower() == lowered:
                del self.columns[slot]
                return column.name, slot
        for named in self.virtual:
            if named.lower() == lowered:
                self.virtual.remove(named)
                return named, None
        raise DDLParseError(f"column {name!r} does not exist", clause.sql)

    def _rename_column(self, clause: _Stream) -> None:
        old = clause.name()
        clause.expect("TO")
        new = clause.name()
        named = next(
            (
                n
                for n in [*(c.name for c in self.columns), *self.virtual]
                if n.lower() == old.lower()
            ),
            old,
        )
        self.columns = [
            replace(c, name=new) if c.name.lower() == old.lower() else c for c in self.columns
        ]
        self.virtual = [new if n.lower() == old.lower() else n for n in self.virtual]
        self._rename_in_indexes(old, new)
        self._note_rename(named, new)

    def _note_rename(self, old: str, new: str) -> None:
        if old == new:
            return
        original = self.renamed.pop(old, old)  # (renamed twice in one statement)
        if original != new:
            self.renamed[new] = original

    def _rename_in_indexes(self, old: str, new: str) -> None:
        self.indexes = [
            replace(i, columns=tuple(new if n.lower() == old.lower() else n for n in i.columns))
            for i in self.indexes
        ]

    def _alter_column(self, clause: _Stream) -> None:
        if clause.is_word("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return
        clause.accept("COLUMN")
        name = clause.name().lower()
        default: str | None = None
        if clause.accept("SET", "DEFAULT"):
            default = _default(clause)
        elif not clause.accept("DROP", "DEFAULT"):
            return  # SET VISIBLE / INVISIBLE
        self.columns = [
            replace(c, default=default) if c.name.lower() == name else c for c in self.columns
        ]


_KEY_FLAGS = (
    ColumnFlag.HANDLE_KEY | ColumnFlag.PRIMARY_KEY | ColumnFlag.UNIQUE_KEY | ColumnFlag.MULTIPLE_KEY
)


def _position(clause: _Stream) -> tuple[str, str] | None:
    """FIRST or AFTER col at the end of a column clause (None: at the end of the table)."""
    tokens = clause.tokens
    if len(tokens) >= 1 and tokens[-1][0] == "id" and tokens[-1][1].upper() == "FIRST":
        return ("FIRST", "")
    if len(tokens) >= 2 and tokens[-2][0] == "id" and tokens[-2][1].upper() == "AFTER":
        return ("AFTER", tokens[-1][1])
    return None


def apply_index_ddl(schema: TableSchema, sql: str) -> TableSchema:
    """``CREATE [UNIQUE] INDEX name ON t (cols)`` or ``DROP INDEX name ON t``."""
    stream = _Stream(_tokens(sql), sql)
    if stream.accept("DROP", "INDEX"):
        name = stream.name().lower()
        indexes = [i for i in schema.indexes if i.name.lower() != name]
        return _schema(schema.database, schema.table, list(schema.columns), indexes, schema)
    stream.expect("CREATE")
    unique = stream.accept("UNIQUE")
    stream.accept("FULLTEXT") or stream.accept("SPATIAL")
    stream.expect("INDEX")
    name = stream.name()
    stream.expect("ON")
    stream.qualified_name(schema.database)
    columns = _index_columns(stream.group(), sql, name)
    indexes = [*schema.indexes, Index(name, columns, unique=unique)]
    return _schema(schema.database, schema.table, list(schema.columns), indexes, schema)


def parse_rename_tables(sql: str) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """``RENAME TABLE a TO b, c.d TO e.f`` -> [((db, a), (db, b)), ...]; db "" if not given."""
    stream = _Stream(_tokens(sql), sql)
    stream.expect("RENAME")
    if not stream.accept("TABLES"):
        stream.expect("TABLE")
    pairs = []
    for part in _split_commas(stream.tokens[stream.pos :]):
        item = _Stream(part, sql)
        old = item.qualified_name("")
        item.expect("TO")
        pairs.append((old, item.qualified_name("")))
    return pairs


def ddl_target(sql: str, default_database: str = "") -> tuple[str, str]:
    """The (database, table) a DDL statement is about; table is "" for database DDL."""
    stream = _Stream(_tokens(sql), sql)
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


def _skip_to(stream: _Stream, word: str) -> bool:
    start = stream.pos
    while not stream.at_end():
        if stream.accept(word):
            return True
        stream.next()
    stream.pos = start
    return False


def dropped_tables(sql: str, default_database: str = "") -> list[tuple[str, str]]:
    """The tables ``DROP TABLE [IF EXISTS] a, b.c`` drops."""
    stream = _Stream(_tokens(sql), sql)
    stream.expect("DROP")
    stream.accept("TEMPORARY")
    if not stream.accept("TABLES"):
        stream.expect("TABLE")
    stream.accept("IF", "EXISTS")
    return [
        _Stream(part, sql).qualified_name(default_database)
        for part in _split_commas(stream.tokens[stream.pos :])
        if not _Stream(part, sql).is_word("RESTRICT", "CASCADE")
    ]
