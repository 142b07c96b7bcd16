"""Statement objects of users, tokens and rights (part of `refimpl.sql.ast`, which re-exports
every name here: use them as `ast.CreateUser`)."""

from __future__ import annotations

from dataclasses import dataclass


class Statement:
    """Base of every statement node (`refimpl.sql.ast.Statement` is this class)."""

    __slots__ = ()


PUBLIC = "PUBLIC"  # the grantee every request has, authenticated or not


@dataclass(frozen=True, slots=True)
class CreateUser(Statement):
    name: str
    if_not_exists: bool = False
    replication: bool = False  # CREATE USER u REPLICATION: it may open replication connections


@dataclass(frozen=True, slots=True)
class AlterUser(Statement):
    """ALTER USER u REPLICATION | NOREPLICATION: the right to open replication connections."""

    name: str
    replication: bool


@dataclass(frozen=True, slots=True)
class DropUser(Statement):
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class CreateToken(Statement):
    """`CREATE TOKEN FOR u [EXPIRES IN '30d']`."""

    user: str
    expires_in: str | None = None


@dataclass(frozen=True, slots=True)
class DropToken(Statement):
    """`DROP TOKEN '<token or its id>'` drops one; `DROP TOKEN FOR u` drops all of u's."""

    token: str | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True)
class GrantRole(Statement):
    """`GRANT READ|WRITE|ADMIN ON DATABASE d TO u` (u may be PUBLIC)."""

    role: str  # READ, WRITE or ADMIN
    database: str
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokeRole(Statement):
    role: str
    database: str
    grantee: str


@dataclass(frozen=True, slots=True)
class GrantSelect(Statement):
    """`GRANT SELECT ON t TO u`: in the current database."""

    table: str
    grantee: str


@dataclass(frozen=True, slots=True)
class RevokeSelect(Statement):
    table: str
    grantee: str


@dataclass(frozen=True, slots=True)
class ShowUsers(Statement):
    pass


@dataclass(frozen=True, slots=True)
class ShowDatabases(Statement):
    """`SHOW DATABASES`: those the caller holds a right in."""


@dataclass(frozen=True, slots=True)
class ShowGrants(Statement):
    user: str
