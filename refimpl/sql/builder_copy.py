"""Reductions of COPY, and of LISTEN, UNLISTEN and NOTIFY (`CopyBuilder` is a part of
`refimpl.sql.builder.Builder`)."""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args

from refimpl.sql import ast
from refimpl.sql.ast_copy import BackupDatabase, Listen, Notify, Unlisten

_STDIN = object()  # the source STDIN, apart from a file named by a string


def _text(token: Token) -> str:
    return token[1:-1].replace("''", "'")


@v_args(inline=True)
class CopyBuilder(Transformer):
    def copy_from(
        self,
        table: str,
        columns: tuple[str, ...] | None,
        source: Any,
        options: tuple[ast.CopyOption, ...] | None,
    ) -> ast.CopyFrom:
        file = None if source is _STDIN else source
        return ast.CopyFrom(table, columns, file, options or ())

    def copy_to(
        self,
        target: ast.CopyTo,
        options: tuple[ast.CopyOption, ...] | None,
    ) -> ast.CopyTo:
        return ast.CopyTo(target.table, target.columns, target.query, options or ())

    def backup_database(self, database: str, target: Token) -> BackupDatabase:
        return BackupDatabase(str(database), _text(target))

    def copy_stdin(self) -> object:
        return _STDIN

    def copy_file(self, token: Token) -> str:
        return _text(token)

    def copy_table(self, table: str, columns: tuple[str, ...] | None) -> ast.CopyTo:
        return ast.CopyTo(table, columns, None)

    def copy_query(self, query: ast.Query) -> ast.CopyTo:
        return ast.CopyTo(None, None, query)

    def copy_options(self, *options: ast.CopyOption) -> tuple[ast.CopyOption, ...]:
        return options

    def copy_option(self, name: str, value: ast.CopyValue) -> ast.CopyOption:
        return ast.CopyOption(name, value)

    def copy_option_name(self, name: str) -> str:
        return str(name).lower()

    def copy_text(self, token: Token) -> str:
        return _text(token)

    def copy_word(self, word: str) -> str:
        return word.lower()

    def copy_binary(self) -> str:
        return "binary"  # FORMAT binary: BINARY is a keyword (DECLARE ... BINARY CURSOR)

    def copy_true(self) -> bool:
        return True

    def copy_false(self) -> bool:
        return False

    def listen(self, channel: str) -> Listen:
        return Listen(channel)

    def unlisten(self, channel: str) -> Unlisten:
        return Unlisten(channel)

    def unlisten_all(self) -> Unlisten:
        return Unlisten(None)

    def notify(self, channel: str, payload: Token | None) -> Notify:
        return Notify(channel, "" if payload is None else _text(payload))

    def channel_name(self, *parts: str) -> str:
        return ".".join(parts)

    def channel_part(self, token: Token) -> str:
        # Folded to lower case unless quoted, as PostgreSQL folds a channel's name.
        if token.type == "QUOTED_IDENT":
            return token[1:-1].replace('""', '"')
        return token.lower()
