"""The parts of a table definition: column definitions, key constraints, and the schema
they make (:func:`build_schema`), shared by the CREATE TABLE and ALTER TABLE readers."""

from __future__ import annotations

from dataclasses import replace

from ticdc_spark.errors import DDLParseError
from ticdc_spark.model import Column, DefaultExpression, Index, TableSchema
from ticdc_spark.sql.lexer import Token, TokenStream, split_commas, tokens_text
from ticdc_spark.types import ColumnType, parse_column_type

__all__ = [
    "CONSTRAINT_WORDS",
    "HIDDEN_PREFIX",
    "ColumnDef",
    "build_schema",
    "column_def",
    "constraint",
    "default_value",
    "index_columns",
]

CONSTRAINT_WORDS = (
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


class ColumnDef:
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


def column_def(stream: TokenStream) -> ColumnDef:
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
            default = default_value(stream)
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
            default_value(stream)
        elif stream.is_op("("):
            stream.group()
        else:
            stream.next()  # AUTO_INCREMENT, VIRTUAL, STORED, REFERENCES ..., and the like
    column = Column(name, ctype, nullable, default, generated)
    return ColumnDef(column, primary, unique, virtual=generated and not stored)


def _column_type(stream: TokenStream) -> ColumnType:
    kind, word = stream.next()
    if kind != "id":
        raise DDLParseError(f"expected a column type, found {word!r}", stream.sql)
    words = [word]
    following = stream.peek()
    if following is not None and (word.upper(), following[1].upper()) in _MULTIWORD_TYPES:
        words.append(stream.next()[1])
    text = " ".join(words)
    if stream.is_op("("):
        text += "(" + tokens_text(stream.group()) + ")"
    while any(stream.is_word(s) for s in _TYPE_SUFFIXES):
        text += " " + stream.next()[1]
    if stream.accept("BINARY") and words[0].upper() in ("CHAR", "VARCHAR"):
        pass  # CHAR(n) BINARY: a binary collation, still a character type
    try:
        return parse_column_type(text)
    except ValueError as exc:
        raise DDLParseError(str(exc), stream.sql) from None


def default_value(stream: TokenStream) -> str | None:
    """A DEFAULT (or COMMENT/ON UPDATE) value, as text; None for NULL.  Anything but a
    string or number (or TRUE/FALSE) is a :class:`DefaultExpression`."""
    if stream.is_op("("):
        return DefaultExpression(tokens_text(stream.group()))
    negative = stream.accept_op("-")
    stream.accept_op("+")
    kind, text = stream.next()
    if kind == "id" and text.upper() == "NULL":
        return None
    if kind == "id" and text.upper() in ("TRUE", "FALSE"):
        return "1" if text.upper() == "TRUE" else "0"
    if kind == "id" and stream.is_op("("):  # CURRENT_TIMESTAMP(3), NOW()
        text += "(" + tokens_text(stream.group()) + ")"
    elif kind == "id" and text.lower() in ("b", "x") and (stream.peek() or ("",))[0] == "str":
        text += "'" + stream.next()[1] + "'"
    text = ("-" if negative else "") + text
    return text if kind in ("str", "num") else DefaultExpression(text)


# TiDB keeps each expression of an expression index as a hidden VIRTUAL generated column named
# ``_V$_<index>_<part>``: TiCDC never sends it, and a unique index over it never identifies rows.
HIDDEN_PREFIX = "_V$_"


def index_columns(tokens: list[Token], sql: str, name: str | None) -> tuple[str, ...]:
    names = []
    for part, element in enumerate(split_commas(tokens)):
        stream = TokenStream(element, sql)
        if stream.is_op("("):  # an expression: TiDB's hidden virtual column
            names.append(f"{HIDDEN_PREFIX}{name or 'expression_index'}_{part}")
        else:
            names.append(stream.name())
    return tuple(names)


def constraint(stream: TokenStream) -> Index | None:
    """A table constraint (PRIMARY KEY, UNIQUE, KEY ...); None for those without keys."""
    if stream.accept("CONSTRAINT") and not stream.is_word(*CONSTRAINT_WORDS):
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
    stream: TokenStream, name: str | None, *, primary: bool = False, unique: bool = False
) -> Index:
    if name is None and not stream.is_op("("):
        name = stream.name()
    if stream.accept("USING"):
        stream.next()
    columns = index_columns(stream.group(), stream.sql, name)
    stream.skip_to_comma()
    if name is None:  # TiDB names an index after its first column
        first = columns[0] if columns else ""
        name = "expression_index" if first.startswith(HIDDEN_PREFIX) else first
    return Index(name, columns, primary=primary, unique=unique or primary)


def build_schema(
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
    hidden = [n for i in indexes for n in i.columns if n.startswith(HIDDEN_PREFIX)]
    virtual = [n for n in virtual if not n.startswith(HIDDEN_PREFIX)] + hidden
    return TableSchema(
        database, table, tuple(columns), tuple(indexes), table_id, version, tuple(virtual)
    ).with_derived_flags()
