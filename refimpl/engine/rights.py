"""Who acts (a `Principal`) and what an operation needs (a `Right`).

A leaf: it imports nothing of the engine, so that every layer (statements and features
included, which must not import `access`) can name rights and principals.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Right(StrEnum):
    """What an operation needs on a database (or, for READ, on a table).

    A StrEnum, so that a right compares equal to its name ("READ") and prints as it.
    """

    READ = "READ"
    WRITE = "WRITE"
    ADMIN = "ADMIN"


# The members a per-request path names, read once here: in Python 3.11 a member read off the
# Enum class goes through its metaclass's `__getattr__` hook, about 850 instructions a read
# (`tools/bench/enum_reads.py` counts them); a module's name is one dictionary lookup.
# (`ADMIN` names the admin principal below: the right is `ADMIN_RIGHT`.)
READ = Right.READ
WRITE = Right.WRITE
ADMIN_RIGHT = Right.ADMIN

# ADMIN implies WRITE implies READ.
RANK = {Right.READ: 1, Right.WRITE: 2, Right.ADMIN: 3}

ADMIN_USER = "admin"
# A user's identity (the access store gives one to each CREATE USER): 16 hexadecimal digits;
# LEGACY_USER_ID is the admin user's and that of users made before users had ids.
USER_ID_BYTES = 8
LEGACY_USER_ID = "0"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request or an embedded session acts as. `name` None is anonymous.

    `only_database` (a database's key) is set for a token that a database's administrator
    minted: it acts as its user in that database alone, and as PUBLIC everywhere else, so
    that whoever holds it never gets more than the database its minter administered.
    """

    name: str | None
    is_admin: bool = False
    only_database: str | None = None

    def describe(self) -> str:
        return "anonymous requests" if self.name is None else f"user '{self.name}'"


ANONYMOUS = Principal(None, False)
ADMIN = Principal(ADMIN_USER, True)  # the principal; the right of that name is Right.ADMIN
