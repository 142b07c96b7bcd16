"""`AccessControl.allowed` keeps its verdicts while the records stand: after any sequence of
grants, revokes and drops, with checks between them, each verdict is the one a control that
never checked before (the records read afresh from the file) gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.access import ADMIN, ANONYMOUS, AccessControl, Right
from refimpl.sql import ast

GRANTEES = ("bob", "eve", ast.PUBLIC)
TABLES = ("t", "secret")
DATABASES = ("demo", "other")

CHANGES = st.one_of(
    st.builds(
        ast.GrantRole,
        st.sampled_from(("READ", "WRITE", "ADMIN")),
        st.sampled_from(DATABASES),
        st.sampled_from(GRANTEES),
    ),
    st.builds(
        ast.RevokeRole,
        st.sampled_from(("READ", "WRITE", "ADMIN")),
        st.sampled_from(DATABASES),
        st.sampled_from(GRANTEES),
    ),
    st.builds(ast.GrantSelect, st.sampled_from(TABLES), st.sampled_from(GRANTEES)),
    st.builds(ast.RevokeSelect, st.sampled_from(TABLES), st.sampled_from(GRANTEES)),
    st.tuples(st.sampled_from(DATABASES), st.sampled_from(TABLES)),  # a table dropped
)


def _verdicts(control: AccessControl, principals: list) -> list[bool]:
    return [
        control.allowed(principal, database, right, table)
        for principal in principals
        for database in DATABASES
        for right in Right
        for table in (None, *TABLES)
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(CHANGES, max_size=8))
def test_kept_verdicts_follow_every_change(tmp_path_factory, changes):
    folder = tmp_path_factory.mktemp("verdicts")
    control = AccessControl(folder)
    control.ensure_admin()
    for name in ("bob", "eve"):
        control.execute(ast.CreateUser(name), ADMIN, "demo")
    principals = [control.authenticate(control.create_token(name)) for name in ("bob", "eve")] + [
        ANONYMOUS
    ]
    _verdicts(control, principals)  # kept, to be found stale after each change
    for change in changes:
        if isinstance(change, tuple):
            control.forget_table(*change)
        else:
            database = "other" if isinstance(change, ast.GrantSelect) else "demo"
            control.execute(change, ADMIN, database)
        assert _verdicts(control, principals) == _verdicts(AccessControl(folder), principals)
