"""CREATE TABLE: the schema a statement creates."""

from __future__ import annotations

from ticdc_spark.model import Column, Index, TableSchema
from ticdc_spark.sql.definitions import (
    CONSTRAINT_WORDS,
    build_schema,
    column_def,
    constraint,
)
from ticdc_spark.sql.lexer import TokenStream, split_commas, tokens

__all__ = ["parse_create_table"]


def parse_create_table(sql: str, default_database: str = "") -> TableSchema | None:
    """The schema a CREATE TABLE statement creates.

    Returns None for ``CREATE TABLE ... LIKE other`` and ``CREATE TABLE ... AS SELECT``
    without column definitions: their columns come from elsewhere, so the caller must learn
    the schema from the rows.
    """
    stream = TokenStream(tokens(sql), sql)
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
    for element in split_commas(body):
        _add_element(TokenStream(element, sql), columns, indexes, virtual)
    return build_schema(database, table, columns, indexes, virtual=virtual)


def _add_element(
    stream: TokenStream, columns: list[Column], indexes: list[Index], virtual: list[str]
) -> None:
    if stream.is_word(*CONSTRAINT_WORDS):  # a bare keyword: quoted names are "qid"
        index = constraint(stream)
        if index is not None:
            indexes.append(index)
        return
    definition = column_def(stream)
    if definition.virtual:
        virtual.append(definition.column.name)
    else:
        columns.append(definition.column)
    index = definition.index()
    if index is not None:
        indexes.append(index)
