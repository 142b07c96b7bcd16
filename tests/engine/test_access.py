"""Users, tokens, sessions and rights (refimpl.engine.access), without a server."""

from __future__ import annotations

import json
import os
import stat

import pytest

import refimpl
from refimpl.engine.access import (
    ADMIN,
    ANONYMOUS,
    AccessControl,
    Principal,
    Right,
    parse_duration,
)
from refimpl.errors import (
    Forbidden,
    InvalidValue,
    NotAllowed,
    Unauthorized,
    UnknownTable,
    UserError,
)
from refimpl.sql import ast


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def access(tmp_path, clock) -> AccessControl:
    control = AccessControl(tmp_path, clock=clock)
    assert control.ensure_admin() is not None
    return control


def run(access: AccessControl, statement, principal=ADMIN, database="demo"):
    return access.execute(statement, principal, database)


def user(access: AccessControl, name: str) -> tuple[Principal, str]:
    run(access, ast.CreateUser(name))
    token = run(access, ast.CreateToken(name)).rows[0][0]
    return access.authenticate(token), token


def test_first_start_creates_admin_once(tmp_path):
    control = AccessControl(tmp_path)
    token = control.ensure_admin()
    assert token is not None and token.startswith("kdb_")
    assert control.authenticate(token) == ADMIN
    assert control.ensure_admin() is None
    assert AccessControl(tmp_path).ensure_admin() is None  # persisted


def test_only_a_hash_is_stored_and_the_file_is_private(tmp_path):
    control = AccessControl(tmp_path)
    token = control.ensure_admin()
    text = control.file.read_text()
    assert token is not None and token not in text
    assert json.loads(text)["tokens"][0]["hash"]
    assert stat.S_IMODE(os.stat(control.file).st_mode) == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_state_survives_reopening(tmp_path, access):
    bob, token = user(access, "bob")
    run(access, ast.GrantRole("READ", "demo", "bob"))
    again = AccessControl(tmp_path)
    assert again.authenticate(token) == bob
    assert again.allowed(bob, "demo", Right.READ)


@pytest.mark.parametrize("token", ["", "kdb_nope", "x" * 200, "kdb_" + "A" * 43])
def test_wrong_tokens_are_unauthorized(access, token):
    with pytest.raises(Unauthorized, match="wrong, expired or revoked"):
        access.authenticate(token)


def test_a_token_that_differs_after_its_id_is_refused(access):
    _, token = user(access, "bob")
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    with pytest.raises(Unauthorized):
        access.authenticate(forged)


def test_tokens_expire(access, clock):
    run(access, ast.CreateUser("bob"))
    token = run(access, ast.CreateToken("bob", "30m")).rows[0][0]
    clock.now += 29 * 60
    assert access.authenticate(token).name == "bob"
    clock.now += 61
    with pytest.raises(Unauthorized):
        access.authenticate(token)
    assert run(access, ast.ShowUsers()).rows == [("admin", True, 1), ("bob", False, 0)]


@pytest.mark.parametrize(("text", "seconds"), [("30d", 2592000), ("1s", 1), (" 2 H ", 7200)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0d", "3w", "-1d", "1.5h", "d", "10"])
def test_bad_durations(text):
    with pytest.raises(InvalidValue):
        parse_duration(text)


def test_drop_token_by_token_by_id_and_for_user(access):
    run(access, ast.CreateUser("bob"))
    tokens = [run(access, ast.CreateToken("bob")).rows[0][0] for _ in range(3)]
    assert run(access, ast.DropToken(token=tokens[0])).message == "1 token(s) dropped"
    assert run(access, ast.DropToken(token=tokens[1][:12])).count == 1
    assert run(access, ast.DropToken(token="kdb_unknown")).count == 0
    assert run(access, ast.DropToken(user="bob")).message == "1 token(s) dropped"
    for token in tokens:
        with pytest.raises(Unauthorized):
            access.authenticate(token)


def test_sessions(access, clock):
    bob, token = user(access, "bob")
    session_id, expires = access.open_session(token)
    assert expires == clock.now + 12 * 3600
    assert access.principal_for_session(session_id) == bob
    access.close_session(session_id)
    with pytest.raises(Unauthorized):
        access.principal_for_session(session_id)
    session_id, _ = access.open_session(token)
    clock.now += 12 * 3600
    with pytest.raises(Unauthorized):
        access.principal_for_session(session_id)


def test_a_session_ends_with_its_token(access):
    _, token = user(access, "bob")
    session_id, _ = access.open_session(token)
    run(access, ast.DropToken(user="bob"))
    with pytest.raises(Unauthorized):
        access.principal_for_session(session_id)


def test_a_session_never_outlives_its_token(access, clock):
    run(access, ast.CreateUser("bob"))
    token = run(access, ast.CreateToken("bob", "1h")).rows[0][0]
    _, expires = access.open_session(token)
    assert expires == clock.now + 3600
    with pytest.raises(Unauthorized):
        access.open_session("kdb_wrong")


def test_admin_is_admin_everywhere(access):
    for right in Right:
        access.check(ADMIN, "anything", right, table="t")


def test_roles_imply_lower_roles(access):
    bob, _ = user(access, "bob")
    with pytest.raises(Forbidden, match="user 'bob' lacks READ on database 'demo'"):
        access.check(bob, "demo", Right.READ)
    run(access, ast.GrantRole("WRITE", "demo", "bob"))
    access.check(bob, "demo", Right.READ, table="t")
    access.check(bob, "demo", Right.WRITE)
    with pytest.raises(Forbidden, match="lacks ADMIN"):
        access.check(bob, "demo", Right.ADMIN)
    with pytest.raises(Forbidden):
        access.check(bob, "other", Right.READ)
    assert run(access, ast.RevokeRole("WRITE", "demo", "bob")).message == (
        "revoked WRITE on database 'demo' from 'bob'"
    )
    assert not access.allowed(bob, "demo", Right.READ)


def test_table_revoke_beats_database_read(access):
    bob, _ = user(access, "bob")
    run(access, ast.GrantRole("READ", "demo", "bob"))
    message = run(access, ast.RevokeSelect("secret", "bob")).message
    assert message == "revoked SELECT on table 'secret' from 'bob'"
    assert access.allowed(bob, "demo", Right.READ, "public_table")
    assert not access.allowed(bob, "demo", Right.READ, "secret")
    assert not access.allowed(bob, "demo", Right.READ, "SECRET")  # names ignore case
    with pytest.raises(Forbidden, match="lacks READ on table 'secret' in database 'demo'"):
        access.check(bob, "demo", Right.READ, "secret")
    run(access, ast.GrantSelect("secret", "bob"))
    assert access.allowed(bob, "demo", Right.READ, "secret")


def test_grant_select_reads_that_table_alone(access):
    bob, _ = user(access, "bob")
    assert (
        run(access, ast.GrantSelect("t", "bob")).message == "granted SELECT on table 't' to 'bob'"
    )
    assert access.allowed(bob, "demo", Right.READ, "t")
    assert not access.allowed(bob, "demo", Right.READ, "u")
    assert not access.allowed(bob, "demo", Right.READ)
    assert not access.allowed(bob, "other", Right.READ, "t")


def test_public_grants_reach_everyone(access):
    bob, _ = user(access, "bob")
    with pytest.raises(Unauthorized, match="anonymous requests lack READ"):
        access.check(ANONYMOUS, "demo", Right.READ)
    assert run(access, ast.GrantRole("READ", "demo", ast.PUBLIC)).message == (
        "granted READ on database 'demo' to 'PUBLIC'"
    )
    access.check(ANONYMOUS, "demo", Right.READ, "t")
    access.check(bob, "demo", Right.READ, "t")
    with pytest.raises(Unauthorized):
        access.check(ANONYMOUS, "demo", Right.WRITE)
    # A revoke for PUBLIC narrows what PUBLIC gives, not a user's own grants.
    run(access, ast.GrantRole("READ", "demo", "bob"))
    run(access, ast.RevokeSelect("t", ast.PUBLIC))
    assert not access.allowed(ANONYMOUS, "demo", Right.READ, "t")
    assert access.allowed(bob, "demo", Right.READ, "t")


def test_who_may_manage_users(access):
    bob, _ = user(access, "bob")
    with pytest.raises(Forbidden):
        run(access, ast.CreateUser("carol"), principal=bob)
    run(access, ast.GrantRole("ADMIN", "demo", "bob"))
    assert run(access, ast.CreateUser("carol"), principal=bob).message == "user 'carol' created"
    run(access, ast.GrantRole("READ", "demo", "carol"), principal=bob)
    run(access, ast.CreateToken("carol"), principal=bob)
    # A database admin cannot grant on another database, nor act for users who have rights
    # there, nor for the admin user.
    with pytest.raises(Forbidden, match="lacks ADMIN on database 'other'"):
        run(access, ast.GrantRole("READ", "other", "carol"), principal=bob)
    run(access, ast.GrantRole("ADMIN", "other", "carol"))
    with pytest.raises(Forbidden, match="where user 'carol' has rights"):
        run(access, ast.CreateToken("carol"), principal=bob)
    with pytest.raises(Forbidden):
        run(access, ast.CreateToken("admin"), principal=bob)
    with pytest.raises(Forbidden):
        run(access, ast.DropUser("carol"), principal=bob)


def test_user_errors(access):
    run(access, ast.CreateUser("bob"))
    with pytest.raises(UserError, match="already exists"):
        run(access, ast.CreateUser("BOB"))
    assert run(access, ast.CreateUser("bob", if_not_exists=True)).message == (
        "user 'bob' already exists"
    )
    with pytest.raises(UserError, match="user 'nobody' does not exist"):
        run(access, ast.CreateToken("nobody"))
    with pytest.raises(UserError):
        run(access, ast.GrantRole("READ", "demo", "nobody"))
    with pytest.raises(UserError):
        run(access, ast.CreateUser("public"))
    with pytest.raises(NotAllowed):
        run(access, ast.DropUser("admin"))
    assert run(access, ast.DropUser("nobody", if_exists=True)).message == (
        "user 'nobody' does not exist"
    )


def test_drop_user_removes_tokens_and_grants(access):
    bob, token = user(access, "bob")
    run(access, ast.GrantRole("READ", "demo", "bob"))
    assert run(access, ast.DropUser("bob")).message == "user 'bob' dropped"
    with pytest.raises(Unauthorized):
        access.authenticate(token)
    run(access, ast.CreateUser("bob"))
    assert not access.allowed(bob, "demo", Right.READ)


def test_show_users_and_grants(access):
    bob, _ = user(access, "bob")
    run(access, ast.GrantRole("WRITE", "demo", "bob"))
    run(access, ast.RevokeSelect("secret", "bob"))
    users = run(access, ast.ShowUsers())
    assert [c.name for c in users.columns] == ["user", "admin", "tokens"]
    assert users.rows == [("admin", True, 1), ("bob", False, 1)]
    grants = run(access, ast.ShowGrants("bob"))
    assert [c.name for c in grants.columns] == ["grantee", "right", "database", "table"]
    assert grants.rows == [
        ("bob", "WRITE", "demo", None),
        ("bob", "REVOKED SELECT", "demo", "secret"),
    ]
    assert run(access, ast.ShowGrants("bob"), principal=bob).rows == grants.rows  # own grants
    with pytest.raises(Forbidden):
        run(access, ast.ShowGrants("admin"), principal=bob)


def test_unknown_database_refused_when_the_caller_can_tell(access):
    run(access, ast.CreateUser("bob"))
    with pytest.raises(Exception, match="database 'nope' does not exist"):
        access.execute(
            ast.GrantRole("READ", "nope", "bob"), ADMIN, "demo", database_exists=lambda n: False
        )


def test_forget_database(access):
    bob, _ = user(access, "bob")
    run(access, ast.GrantRole("READ", "old", "bob"))
    run(access, ast.GrantSelect("t", "bob"), database="old")
    access.forget_database("OLD")
    assert not access.allowed(bob, "old", Right.READ, "t")
    assert run(access, ast.ShowGrants("bob")).rows == []


# -- DROP TABLE forgets the table's grants -------------------------------------------------


def _drop_and_create_again(tmp_path, *grants: str, drop: str = "DROP TABLE t"):
    """Give user u `grants`, run `drop` of table t, create t again; u's rights and grants."""
    connection = refimpl.connect(tmp_path / "data")
    connection.execute("CREATE TABLE t (x INT)")
    connection.execute("CREATE USER u")
    for grant in grants:
        connection.execute(grant)
    connection.execute(drop)
    connection.execute("CREATE TABLE t (x INT)")
    instance = connection.instance
    u = Principal("u")
    rights = (
        instance.access.allowed(u, "demo", Right.READ, "t"),
        instance.access.allowed(u, "demo", Right.READ, "never_seen"),
    )
    shown = connection.execute("SHOW GRANTS FOR u").rows
    connection.close()
    return rights, shown


def test_drop_table_forgets_a_table_grant(tmp_path):
    (on_new_t, on_never_seen), grants = _drop_and_create_again(tmp_path, "GRANT SELECT ON t TO u")
    assert on_new_t is on_never_seen is False
    assert grants == []


def test_drop_table_forgets_a_table_revoke(tmp_path):
    (on_new_t, on_never_seen), grants = _drop_and_create_again(
        tmp_path, "GRANT READ ON DATABASE demo TO u", "REVOKE SELECT ON t FROM u"
    )
    assert on_new_t is on_never_seen is True
    assert [row[1] for row in grants] == ["READ"]  # the database role stays


def test_drop_table_in_a_transaction_forgets_only_when_committed(tmp_path):
    (on_new_t, _), grants = _drop_and_create_again(
        tmp_path, "GRANT SELECT ON t TO u", drop="BEGIN; DROP TABLE t; COMMIT"
    )
    assert on_new_t is False
    assert grants == []
    connection = refimpl.connect(tmp_path / "again")
    connection.execute("CREATE TABLE t (x INT)")
    connection.execute("CREATE USER u")
    connection.execute("GRANT SELECT ON t TO u")
    connection.execute("BEGIN; DROP TABLE t; ROLLBACK")
    assert connection.instance.access.allowed(Principal("u"), "demo", Right.READ, "t")
    assert [row[3] for row in connection.execute("SHOW GRANTS FOR u").rows] == ["t"]
    connection.close()


def test_a_view_takes_table_level_grants_and_drop_view_forgets_them(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    connection.execute("CREATE TABLE t (x INT); INSERT INTO t VALUES (1)")
    connection.execute("CREATE VIEW v AS SELECT x FROM t")
    connection.execute("CREATE USER u")
    connection.execute("GRANT SELECT ON v TO u")
    connection.execute("GRANT SELECT ON t TO u")
    u = Principal("u")
    access = connection.instance.access
    assert access.allowed(u, "demo", Right.READ, "v")
    reader = connection.instance.session("demo", u)
    assert reader.execute("SELECT x FROM v").rows == [(1,)]
    connection.execute("REVOKE SELECT ON v FROM u")
    with pytest.raises(Forbidden):
        reader.execute("SELECT x FROM v")
    connection.execute("GRANT SELECT ON v TO u")
    connection.execute("DROP VIEW v")
    connection.execute("CREATE VIEW v AS SELECT x FROM t")  # a new view: no old grant
    assert not access.allowed(u, "demo", Right.READ, "v")
    assert [row[3] for row in connection.execute("SHOW GRANTS FOR u").rows] == ["t"]
    with pytest.raises(UnknownTable):
        connection.execute("GRANT SELECT ON nothing TO u")  # neither a table nor a view
    connection.close()


# -- rights at every moment; tokens of a database's admin (issue 13) -------------------------


def test_a_token_a_database_admin_mints_works_in_that_database_only(tmp_path, access):
    run(access, ast.CreateUser("dba"))
    run(access, ast.GrantRole("ADMIN", "demo", "dba"))
    dba = access.authenticate(run(access, ast.CreateToken("dba")).rows[0][0])
    run(access, ast.CreateUser("ron"))
    minted = run(access, ast.CreateToken("ron"), principal=dba).rows[0][0]
    ron = access.authenticate(minted)
    assert ron.name == "ron" and ron.only_database == "demo"
    # Granted elsewhere later: the minted token still holds only PUBLIC's there.
    run(access, ast.GrantRole("ADMIN", "other", "ron"))
    assert not access.allowed(ron, "other", Right.READ)
    with pytest.raises(Forbidden, match="minted in database 'demo'"):
        access.check(ron, "other", Right.READ)
    with pytest.raises(Forbidden):
        access.check_any(ron, "other")
    with pytest.raises(Forbidden):
        run(access, ast.GrantRole("READ", "other", "ron"), principal=ron, database="other")
    run(access, ast.GrantRole("READ", "other", "PUBLIC"))
    assert access.allowed(ron, "other", Right.READ)  # what everyone has
    assert not access.allowed(ron, "other", Right.WRITE)
    # In its own database it acts with its user's rights as they are now.
    assert not access.allowed(ron, "demo", Right.READ)
    run(access, ast.GrantRole("READ", "demo", "ron"))
    assert access.allowed(ron, "demo", Right.READ)
    run(access, ast.RevokeRole("READ", "demo", "ron"))
    assert not access.allowed(ron, "demo", Right.READ)
    # The limit is kept with the token, and holds for a session opened with it.
    again = AccessControl(tmp_path)
    assert again.authenticate(minted).only_database == "demo"
    session_id, _ = again.open_session(minted)
    assert again.principal_for_session(session_id).only_database == "demo"
    # A token the admin user mints has no such limit.
    unlimited = access.authenticate(run(access, ast.CreateToken("ron")).rows[0][0])
    assert unlimited.only_database is None and access.allowed(unlimited, "other", Right.ADMIN)


def test_any_right_in_a_database(access):
    bob, _ = user(access, "bob")
    assert not access.allowed(ANONYMOUS, "demo", Right.READ)
    for principal, error in ((bob, Forbidden), (ANONYMOUS, Unauthorized)):
        with pytest.raises(error, match="READ on database 'demo'"):
            access.check_any(principal, "demo")
    run(access, ast.GrantSelect("t", "bob"))
    access.check_any(bob, "demo")  # a table's SELECT is a right in the database
    with pytest.raises(Unauthorized):
        access.check_any(ANONYMOUS, "demo")
    run(access, ast.RevokeSelect("t", "PUBLIC"))
    with pytest.raises(Unauthorized):
        access.check_any(ANONYMOUS, "demo")  # a revoke gives nothing
    run(access, ast.GrantRole("READ", "demo", "PUBLIC"))
    access.check_any(ANONYMOUS, "demo")
    access.check_any(ADMIN, "nope")


def test_a_grant_on_a_database_checks_the_right_before_existence(access):
    bob, _ = user(access, "bob")
    run(access, ast.GrantRole("ADMIN", "demo", "bob"))
    with pytest.raises(Forbidden, match="ADMIN on database 'nope'"):
        access.execute(
            ast.GrantRole("READ", "nope", "bob"), bob, "demo", database_exists=lambda n: False
        )
