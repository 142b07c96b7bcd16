"""Reductions of CREATE, ALTER and DROP PUBLICATION (`PublicationBuilder` is a part of
`refimpl.sql.builder.Builder`)."""

from __future__ import annotations

from lark import Transformer, v_args

from refimpl.sql.ast_publications import AlterPublication, CreatePublication, DropPublication


@v_args(inline=True)
class PublicationBuilder(Transformer):
    def create_publication(self, name: str, tables: tuple[str, ...] | None) -> CreatePublication:
        return CreatePublication(name, tables)

    def publication_all(self) -> None:
        return None

    def publication_tables(self, *tables: str) -> tuple[str, ...]:
        return tables

    def alter_publication(self, name: str, change: tuple[str, tuple[str, ...]]) -> AlterPublication:
        return AlterPublication(name, change[0], change[1])

    def publication_add(self, *tables: str) -> tuple[str, tuple[str, ...]]:
        return ("ADD", tables)

    def publication_drop(self, *tables: str) -> tuple[str, tuple[str, ...]]:
        return ("DROP", tables)

    def publication_set(self, *tables: str) -> tuple[str, tuple[str, ...]]:
        return ("SET", tables)

    def drop_publication(self, if_exists: object | None, *names: str) -> DropPublication:
        return DropPublication(names, if_exists is not None)
