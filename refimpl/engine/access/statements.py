"""The user, token and grant statements (CREATE USER, GRANT, SHOW GRANTS, ...).

Each checks the right it needs with `checks`, changes the records of an `AccessStore` and
saves them. The caller holds the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable

from refimpl.engine.access.checks import TOKEN_DATABASE, holds_right, require_right
from refimpl.engine.access.store import PUBLIC_KEY, AccessStore, name_key, parse_duration
from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.engine.rights import ADMIN_USER, RANK, Principal, Right
from refimpl.errors import Forbidden, NotAllowed, SqlError
from refimpl.sql import ast
from refimpl.sql.ast_access import AlterUser

REPLICATION = "replication"  # a user record's flag: it may open replication connections


def _require_admin_for_replication(principal: Principal) -> None:
    """The REPLICATION right reads every change a user may read, server-wide: like
    PostgreSQL's superusers, only the admin user gives or takes it."""
    if not principal.is_admin:
        raise Forbidden(
            "only the admin user may give or take the REPLICATION right (CREATE USER u"
            " REPLICATION, ALTER USER u REPLICATION | NOREPLICATION)"
        )


def run_access_statement(
    store: AccessStore,
    statement: ast.Statement,
    principal: Principal,
    database: str,
    database_exists: Callable[[str], bool] | None,
) -> Result:
    """Run a user or grant statement as `principal` in `database` (its `query` left empty)."""
    match statement:
        case ast.CreateUser(name=name, if_not_exists=if_not_exists, replication=replication):
            require_right(store, principal, database, Right.ADMIN)
            if replication:
                _require_admin_for_replication(principal)
            if if_not_exists and name_key(name) in store.users:
                return message_result("", f"user '{name}' already exists")
            store.add_user(name)
            if replication:
                store.user(name)[REPLICATION] = True
            store.save()
            return message_result("", f"user '{name}' created")
        case AlterUser(name=name, replication=replication):
            _require_admin_for_replication(principal)
            record = store.user(name)
            if replication:
                record[REPLICATION] = True
            else:
                record.pop(REPLICATION, None)
            store.save()
            right = "now holds" if replication else "no longer holds"
            return message_result("", f"user '{record['name']}' {right} the REPLICATION right")
        case ast.DropUser(name=name, if_exists=if_exists):
            require_right(store, principal, database, Right.ADMIN)
            if name_key(name) not in store.users and if_exists:
                return message_result("", f"user '{name}' does not exist")
            record = store.user(name)
            if record.get("admin"):
                raise NotAllowed(f"user '{record['name']}' cannot be dropped")
            _require_manager(store, principal, record["name"])
            store.drop_user(record["name"])
            store.save()
            return message_result("", f"user '{record['name']}' dropped")
        case ast.CreateToken(user=user, expires_in=expires_in):
            require_right(store, principal, database, Right.ADMIN)
            record = store.user(user)
            _require_manager(store, principal, record["name"])
            lifetime = parse_duration(expires_in) if expires_in is not None else None
            token = store.new_token(record["name"], lifetime)
            if not principal.is_admin:
                # A database's administrator vouches for that database only: the token
                # must not carry rights its user is granted elsewhere, now or later.
                minted = store.find_token(token)
                assert minted is not None
                minted[TOKEN_DATABASE] = name_key(database)
            store.save()
            return query_result("", [Column("token", "STRING")], [(token,)])
        case ast.DropToken(token=token, user=user):
            require_right(store, principal, database, Right.ADMIN)
            if user is not None:
                records = store.tokens_of(store.user(user)["name"])
            else:
                records = store.tokens_matching(token or "")
            for record in records:
                _require_manager(store, principal, record["user"])
            count = store.drop_tokens(records)
            if count:
                store.save()
            return message_result("", f"{count} token(s) dropped", count)
        case ast.GrantRole() | ast.RevokeRole() | ast.GrantSelect() | ast.RevokeSelect():
            message = _change_grant(store, statement, principal, database, database_exists)
            store.save()
            return message_result("", message)
        case ast.ShowUsers():
            require_right(store, principal, database, Right.ADMIN)
            return _show_users(store)
        case ast.ShowGrants(user=user):
            return _show_grants(store, principal, database, user)
    raise TypeError(f"not a user or grant statement: {type(statement).__name__}")


def _change_grant(
    store: AccessStore,
    statement: ast.GrantRole | ast.RevokeRole | ast.GrantSelect | ast.RevokeSelect,
    principal: Principal,
    database: str,
    database_exists: Callable[[str], bool] | None,
) -> str:
    """GRANT or REVOKE, of a database role or of SELECT on a table; the answer's message."""
    granting = isinstance(statement, ast.GrantRole | ast.GrantSelect)
    if isinstance(statement, ast.GrantRole | ast.RevokeRole):
        role, db = statement.role, statement.database
        if role.upper() not in Right.__members__:
            raise SqlError(f"unknown right '{role}'; use READ, WRITE or ADMIN")
        # Rights first: only who may administer the name learns whether it exists.
        require_right(store, principal, db, Right.ADMIN)
        if database_exists is not None and not database_exists(db):
            raise SqlError(f"database '{db}' does not exist")
        store.require_grantee(statement.grantee)
        store.set_role(statement.grantee, db, role, present=granting)
        what = f"{role.upper()} on database '{db}'"
    else:
        table = statement.table
        require_right(store, principal, database, Right.ADMIN)
        store.require_grantee(statement.grantee)
        store.set_table(statement.grantee, database, table, "SELECT" if granting else "DENY")
        what = f"SELECT on table '{table}'"
    direction = "granted {} to" if granting else "revoked {} from"
    return f"{direction.format(what)} '{statement.grantee}'"


def _require_manager(store: AccessStore, principal: Principal, user: str) -> None:
    """Acting for a user (tokens, dropping) needs ADMIN wherever that user has rights.

    Without this, an administrator of one database could mint a token for a user who
    administers another, and so gain rights they were never given.
    """
    if principal.is_admin:
        return
    if store.users[name_key(user)].get("admin"):
        raise Forbidden(f"only user '{ADMIN_USER}' may manage user '{user}'")
    key = name_key(user)
    dbs = {r["db"] for r in store.roles if r["grantee"] == key}
    dbs |= {t["db"] for t in store.tables if t["grantee"] == key}
    for db in sorted(dbs):
        if not holds_right(store, principal, db, Right.ADMIN):
            raise Forbidden(
                f"{principal.describe()} lacks ADMIN on database '{db}', where user"
                f" '{user}' has rights"
            )


def _show_users(store: AccessStore) -> Result:
    rows = [
        (u["name"], bool(u.get("admin")), _live_tokens(store, u["name"]))
        for u in sorted(store.users.values(), key=lambda u: name_key(u["name"]))
    ]
    columns = [Column("user", "STRING"), Column("admin", "BOOLEAN"), Column("tokens", "INT")]
    return query_result("", columns, rows)


def _live_tokens(store: AccessStore, user: str) -> int:
    return sum(1 for t in store.tokens_of(user) if not store.expired(t))


def _show_grants(store: AccessStore, principal: Principal, database: str, user: str) -> Result:
    is_self = principal.name is not None and name_key(principal.name) == name_key(user)
    if not is_self:
        require_right(store, principal, database, Right.ADMIN)
    key = name_key(user)
    if key != PUBLIC_KEY:
        store.user(user)
    rows: list[tuple] = []
    if key == name_key(ADMIN_USER):
        rows.append((ADMIN_USER, Right.ADMIN.value, None, None))
    for r in sorted(store.roles, key=lambda r: (r["db"], RANK[r["role"]])):
        if r["grantee"] == key:
            rows.append((r["grantee_name"], r["role"], r["db_name"], None))
    for t in sorted(store.tables, key=lambda t: (t["db"], t["table"])):
        if t["grantee"] == key:
            right = "SELECT" if t["kind"] == "SELECT" else "REVOKED SELECT"
            rows.append((t["grantee_name"], right, t["db_name"], t["table_name"]))
    columns = [
        Column("grantee", "STRING"),
        Column("right", "STRING"),
        Column("database", "STRING"),
        Column("table", "STRING"),
    ]
    return query_result("", columns, rows)
