"""ALTER TABLE and the index statements: a known schema changed by a statement."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ticdc_spark.errors import DDLParseError
from ticdc_spark.model import ColumnFlag, Index, TableSchema
from ticdc_spark.sql.definitions import (
    CONSTRAINT_WORDS,
    ColumnDef,
    build_schema,
    column_def,
    constraint,
    default_value,
    index_columns,
)
from ticdc_spark.sql.lexer import TokenStream, split_commas, tokens

__all__ = ["alter_table", "apply_alter_table", "apply_index_ddl"]


def apply_alter_table(schema: TableSchema, sql: str) -> TableSchema:
    """The schema after an ALTER TABLE statement (every clause, in order)."""
    return alter_table(schema, sql)[0]


def alter_table(schema: TableSchema, sql: str) -> tuple[TableSchema, dict[str, str]]:
    """The schema after an ALTER TABLE statement, and the columns it renamed (new name ->
    name before the statement), which a table rewrite must carry over."""
    stream = TokenStream(tokens(sql), sql)
    stream.expect("ALTER")
    while stream.accept("ONLINE") or stream.accept("OFFLINE") or stream.accept("IGNORE"):
        pass
    stream.expect("TABLE")
    stream.qualified_name(schema.database)
    state = _Alter(schema)
    for clause in split_commas(stream.tokens[stream.pos :]):
        state.apply(TokenStream(clause, sql))
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
        return build_schema(
            self.database, self.table, self.columns, self.indexes, self.template, self.virtual
        )

    def apply(self, clause: TokenStream) -> None:
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

    def _add(self, clause: TokenStream) -> None:
        if clause.is_word(*CONSTRAINT_WORDS):
            index = constraint(clause)
            if index is not None:
                self._add_index(index)
            return
        if clause.accept("PARTITION"):
            return
        clause.accept("COLUMN")
        if clause.is_op("("):
            for part in split_commas(clause.group()):
                self._insert(column_def(TokenStream(part, clause.sql)), None)
            return
        definition = column_def(clause)
        self._insert(definition, _position(clause))

    def _insert(self, definition: ColumnDef, position: tuple[str, str] | None) -> None:
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

    def _drop(self, clause: TokenStream) -> None:
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

    def _replace(self, old: str | None, clause: TokenStream) -> None:
        """MODIFY / CHANGE COLUMN: the new definition takes the old column's place.  A column
        the definition makes VIRTUAL leaves the replicated columns (TiCDC stops sending it),
        and a virtual column made stored joins them (at the end unless placed: TiDB and
        MySQL refuse both changes today, but the statement says what the table becomes)."""
        definition = column_def(clause)
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

    def _remove(self, name: str, clause: TokenStream) -> tuple[str, int | None]:
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

    def _rename_column(self, clause: TokenStream) -> None:
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

    def _alter_column(self, clause: TokenStream) -> None:
        if clause.is_word("INDEX", "KEY", "CHECK", "CONSTRAINT"):
            return
        clause.accept("COLUMN")
        name = clause.name().lower()
        default: str | None = None
        if clause.accept("SET", "DEFAULT"):
            default = default_value(clause)
        elif not clause.accept("DROP", "DEFAULT"):
            return  # SET VISIBLE / INVISIBLE
        self.columns = [
            replace(c, default=default) if c.name.lower() == name else c for c in self.columns
        ]


_KEY_FLAGS = (
    ColumnFlag.HANDLE_KEY | ColumnFlag.PRIMARY_KEY | ColumnFlag.UNIQUE_KEY | ColumnFlag.MULTIPLE_KEY
)


def _position(clause: TokenStream) -> tuple[str, str] | None:
    """FIRST or AFTER col at the end of a column clause (None: at the end of the table)."""
    tokens = clause.tokens
    if len(tokens) >= 1 and tokens[-1][0] == "id" and tokens[-1][1].upper() == "FIRST":
        return ("FIRST", "")
    if len(tokens) >= 2 and tokens[-2][0] == "id" and tokens[-2][1].upper() == "AFTER":
        return ("AFTER", tokens[-1][1])
    return None


def apply_index_ddl(schema: TableSchema, sql: str) -> TableSchema:
    """``CREATE [UNIQUE] INDEX name ON t (cols)`` or ``DROP INDEX name ON t``."""
    stream = TokenStream(tokens(sql), sql)
    if stream.accept("DROP", "INDEX"):
        name = stream.name().lower()
        indexes = [i for i in schema.indexes if i.name.lower() != name]
        return build_schema(schema.database, schema.table, list(schema.columns), indexes, schema)
    stream.expect("CREATE")
    unique = stream.accept("UNIQUE")
    stream.accept("FULLTEXT") or stream.accept("SPATIAL")
    stream.expect("INDEX")
    name = stream.name()
    stream.expect("ON")
    stream.qualified_name(schema.database)
    columns = index_columns(stream.group(), sql, name)
    indexes = [*schema.indexes, Index(name, columns, unique=unique)]
    return build_schema(schema.database, schema.table, list(schema.columns), indexes, schema)
