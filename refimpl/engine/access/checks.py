"""Rights checks: whether a principal holds a right, over the records of an `AccessStore`.

The rights model, in full:

- The user `admin` is ADMIN everywhere and cannot be dropped.
- Database roles: ADMIN implies WRITE implies READ.
- READ on a database reads every table of it, except a table that a `REVOKE SELECT ON t`
  names for that grantee: a table-level revoke beats a READ or WRITE role (not ADMIN: a
  database's administrator could grant the table back to themselves anyway).
- `GRANT SELECT ON t` reads table t alone (and lifts an earlier table-level revoke).
- Every principal, anonymous included, also has what was granted TO PUBLIC (nothing by
  default). A revoke for PUBLIC narrows only what PUBLIC gives, never a user's own grants.
- A request without credentials that lacks a right gets Unauthorized (send a token), not
  Forbidden: a token might have the right.
- A token minted by a database's administrator (not the user `admin`) is limited to that
  database: elsewhere it holds only what PUBLIC holds, whatever its user is granted later.
- Rights are read from the records at every check, never kept with a token or a session:
  a REVOKE takes effect at the next request of a live token. (`AccessControl.allowed`
  keeps a verdict only while the records' version it was read at stands.)
"""

from __future__ import annotations

from refimpl.engine.access.store import PUBLIC_KEY, AccessStore, name_key
from refimpl.engine.rights import RANK, Principal, Right
from refimpl.errors import Forbidden, Unauthorized

# The field of a token's record naming the one database it works in (a database's key).
TOKEN_DATABASE = "database"


def _grantees(principal: Principal, database: str) -> list[str]:
    if principal.name is None:
        return [PUBLIC_KEY]
    limited = principal.only_database
    if limited is not None and limited != name_key(database):
        return [PUBLIC_KEY]
    return [name_key(principal.name), PUBLIC_KEY]


def _role_rank(store: AccessStore, grantee: str, database: str) -> int:
    db = name_key(database)
    ranks = [RANK[r["role"]] for r in store.roles if r["grantee"] == grantee and r["db"] == db]
    return max(ranks, default=0)


def _table_entry(store: AccessStore, grantee: str, database: str, table: str) -> str | None:
    db, tb = name_key(database), name_key(table)
    for entry in store.tables:
        if entry["grantee"] == grantee and entry["db"] == db and entry["table"] == tb:
            return entry["kind"]
    return None


def _has(
    store: AccessStore, grantee: str, database: str, right: Right, table: str | None = None
) -> bool:
    rank = _role_rank(store, grantee, database)
    if right != Right.READ or table is None:
        return rank >= RANK[right]
    if rank >= RANK[Right.ADMIN]:
        return True
    entry = _table_entry(store, grantee, database, table)
    if entry == "SELECT":
        return True
    return rank >= RANK[Right.READ] and entry != "DENY"


def holds_right(
    store: AccessStore, principal: Principal, database: str, right: Right, table: str | None = None
) -> bool:
    if principal.is_admin:
        return True
    with store.lock:
        return any(_has(store, g, database, right, table) for g in _grantees(principal, database))


def holds_any_right(store: AccessStore, principal: Principal, database: str) -> bool:
    """Whether `principal` holds any right in `database`: a role or a SELECT on a table."""
    if principal.is_admin:
        return True
    db = name_key(database)
    with store.lock:
        grantees = set(_grantees(principal, database))
        if any(r["grantee"] in grantees and r["db"] == db for r in store.roles):
            return True
        return any(
            t["grantee"] in grantees and t["db"] == db and t["kind"] == "SELECT"
            for t in store.tables
        )


def refuse(
    principal: Principal, right: Right, database: str, table: str | None = None
) -> Unauthorized | Forbidden:
    """The error for `principal` lacking `right`: Unauthorized when anonymous, else Forbidden."""
    what = f"table '{table}' in database '{database}'" if table else f"database '{database}'"
    if principal.name is None:
        return Unauthorized(f"anonymous requests lack {right} on {what}; send a token")
    limited = principal.only_database
    why = ""
    if limited is not None and limited != name_key(database):
        why = f" (its token was minted in database '{limited}' and works there only)"
    return Forbidden(f"{principal.describe()} lacks {right} on {what}{why}")


def require_right(
    store: AccessStore, principal: Principal, database: str, right: Right, table: str | None = None
) -> None:
    """Raise Forbidden (Unauthorized for anonymous) unless `principal` has `right`."""
    if holds_right(store, principal, database, right, table):
        return
    raise refuse(principal, right, database, table)
