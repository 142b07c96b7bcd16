"""Triggers in the engine: every write path fires them, in the writing transaction; they are
schema (restart, checkpoint, DROP TABLE); a failing or runaway trigger changes nothing; they
run with their definer's rights. A property: triggers that mirror a table keep the mirror
equal to it through any mix of statements."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine import copying
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.errors import (
    DuplicateKey,
    Forbidden,
    RoutineDepth,
    SqlError,
    UnknownColumn,
    UserError,
)
from tests.hypothesis_settings import OVER_FIXTURE

MIRROR = (
    "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE mirror (id INT PRIMARY KEY, v INT)",
    "CREATE TRIGGER m_ins AFTER INSERT ON t BEGIN INSERT INTO mirror VALUES (NEW.id, NEW.v); END",
    "CREATE TRIGGER m_upd AFTER UPDATE ON t BEGIN DELETE FROM mirror WHERE id = OLD.id;"
    " INSERT INTO mirror VALUES (NEW.id, NEW.v); END",
    "CREATE TRIGGER m_del AFTER DELETE ON t BEGIN DELETE FROM mirror WHERE id = OLD.id; END",
)


def rows(session: Session, sql: str) -> list[tuple]:
    return session.execute(sql).rows


def test_every_write_path_fires_in_the_same_commit(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TABLE log (id INT)")
    session.execute("CREATE TRIGGER l AFTER INSERT ON t BEGIN INSERT INTO log VALUES (NEW.id); END")
    session.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
    session.insert_rows("t", ["id", "v"], [(3, 3)])  # the path of /imp and /write
    copying.copy_in(session, "COPY t FROM STDIN (FORMAT csv)", io.BytesIO(b"4,4\n"))
    session.execute("INSERT INTO t SELECT id + 10, v FROM t")
    assert sorted(rows(session, "SELECT id FROM log")) == [
        (1,),
        (2,),
        (3,),
        (4,),
        (11,),
        (12,),
        (13,),
        (14,),
    ]
    by_lsn = rows(
        session,
        "SELECT lsn, count(*) FROM changes('log') WHERE op = 'upsert' GROUP BY lsn ORDER BY lsn",
    )
    cause = rows(
        session,
        "SELECT lsn, count(*) FROM changes('t') WHERE op = 'upsert' GROUP BY lsn ORDER BY lsn",
    )
    assert by_lsn == cause
    assert [count for _, count in by_lsn] == [2, 1, 1, 4]


def test_before_triggers_see_the_table_before_the_rows_after_after(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT PRIMARY KEY); CREATE TABLE seen (at STRING, n BIGINT)")
    session.execute(
        "CREATE TRIGGER b BEFORE INSERT ON t BEGIN INSERT INTO seen SELECT 'before',"
        " count(*) FROM t; END"
    )
    session.execute(
        "CREATE TRIGGER a AFTER INSERT ON t BEGIN INSERT INTO seen SELECT 'after',"
        " count(*) FROM t; END"
    )
    session.execute("INSERT INTO t VALUES (1), (2)")
    assert rows(session, "SELECT at, n FROM seen") == [
        ("before", 0),
        ("before", 0),
        ("after", 2),
        ("after", 2),
    ]


def test_keys_are_checked_after_the_before_triggers(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    session.execute(
        "CREATE TRIGGER b BEFORE INSERT ON t WHEN NEW.id = 4 BEGIN INSERT INTO t VALUES (5); END"
    )
    with pytest.raises(DuplicateKey):
        session.execute("INSERT INTO t VALUES (4), (5)")
    assert rows(session, "SELECT count(*) FROM t") == [(0,)]


def test_a_failing_trigger_rolls_back_the_open_transaction(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT PRIMARY KEY); CREATE TABLE once (id INT PRIMARY KEY)")
    session.execute("CREATE TRIGGER o AFTER INSERT ON t BEGIN INSERT INTO once VALUES (1); END")
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(DuplicateKey, match="^trigger 'o' on table 't': duplicate primary key"):
        session.execute("INSERT INTO t VALUES (2)")
    assert session.transaction is None
    assert (
        rows(session, "SELECT count(*) FROM t")
        == rows(session, "SELECT count(*) FROM once")
        == [(0,)]
    )


def test_runaway_recursion_stops_with_a_clear_error(session: Session) -> None:
    session.execute("CREATE TABLE t (i INT PRIMARY KEY)")
    session.execute(
        "CREATE TRIGGER r AFTER INSERT ON t BEGIN INSERT INTO t VALUES (NEW.i + 1); END"
    )
    with pytest.raises(RoutineDepth, match="would nest 33 triggers and CALLs deep"):
        session.execute("INSERT INTO t VALUES (0)")
    assert rows(session, "SELECT count(*) FROM t") == [(0,)]


def test_triggers_survive_restart_and_checkpoint_and_go_with_their_table(tmp_path: Path) -> None:
    path = tmp_path / "data"
    instance = Instance.open(path)
    session = instance.session()
    for sql in MIRROR:
        session.execute(sql)
    session.execute("CHECKPOINT")
    session.execute("CREATE TRIGGER late BEFORE DELETE ON mirror BEGIN SELECT 1; END")
    instance.close()
    for _ in range(2):
        instance = Instance.open(path)
        session = instance.session()
        names = [row[0] for row in rows(session, "SHOW TRIGGERS")]
        assert names == ["late", "m_del", "m_ins", "m_upd"]
        session.execute("INSERT INTO t VALUES (1, 1)")
        assert rows(session, "SELECT * FROM mirror") == [(1, 1)]
        session.execute("DELETE FROM t; CHECKPOINT")
        instance.close()
    instance = Instance.open(path)
    session = instance.session()
    session.execute("DROP TABLE mirror")
    assert [row[0] for row in rows(session, "SHOW TRIGGERS")] == ["m_del", "m_ins", "m_upd"]
    session.execute("DROP TABLE t")
    instance.close()
    instance = Instance.open(path)
    assert rows(instance.session(), "SHOW TRIGGERS") == []
    instance.close()


def test_a_trigger_runs_with_its_definers_rights(instance: Instance, session: Session) -> None:
    session.execute("CREATE TABLE t (id INT); CREATE TABLE secret (n BIGINT)")
    session.execute(
        "CREATE USER w; GRANT WRITE ON DATABASE demo TO w; REVOKE SELECT ON secret FROM w"
    )
    session.execute("CREATE USER boss; GRANT ADMIN ON DATABASE demo TO boss")
    boss = instance.session(principal=Principal("boss"))
    boss.execute(
        "CREATE TRIGGER c AFTER INSERT ON t BEGIN INSERT INTO secret SELECT count(*)"
        " FROM secret; END"
    )
    assert rows(session, "SHOW TRIGGERS")[0][4] == "boss"
    writer = instance.session(principal=Principal("w"))
    with pytest.raises(Forbidden):
        writer.execute("CREATE TRIGGER mine AFTER INSERT ON t BEGIN SELECT 1; END")
    writer.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(Forbidden):
        writer.execute("SELECT count(*) FROM secret")
    session.execute("REVOKE ADMIN ON DATABASE demo FROM boss")
    with pytest.raises(Forbidden, match="^trigger 'c' on table 't'"):
        writer.execute("INSERT INTO t VALUES (2)")
    assert rows(session, "SELECT count(*) FROM t") == [(1,)]


def test_only_the_admin_names_another_definer(instance: Instance, session: Session) -> None:
    session.execute(
        "CREATE TABLE t (id INT); CREATE USER boss; GRANT ADMIN ON DATABASE demo TO boss"
    )
    boss = instance.session(principal=Principal("boss"))
    with pytest.raises(Forbidden, match="another user"):
        boss.execute("CREATE DEFINER = admin TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END")
    session.execute("CREATE DEFINER = boss TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END")
    assert rows(session, "SHOW TRIGGERS")[0][4] == "boss"


def _drop_and_make_again(session: Session, user: str) -> None:
    """The user dropped, and another made under the same name with the same rights."""
    session.execute(f"DROP USER {user}; CREATE USER {user}")
    session.execute(f"GRANT ADMIN ON DATABASE demo TO {user}")


def test_a_user_made_again_does_not_inherit_a_dropped_users_triggers(tmp_path: Path) -> None:
    """A trigger is bound to the user who made it, not to the name: after DROP USER u and
    CREATE USER u, u's old trigger does not run (as the new u); it fails the writes that fire
    it, which change nothing, until it is made again. Across a restart too."""
    path = tmp_path / "data"
    instance = Instance.open(path)
    session = instance.session()
    session.execute("CREATE TABLE t (id INT); CREATE TABLE audit (id INT)")
    session.execute("CREATE USER u; GRANT ADMIN ON DATABASE demo TO u")
    session.execute("CREATE USER w; GRANT WRITE ON DATABASE demo TO w")
    made_by_u = "CREATE TRIGGER a AFTER INSERT ON t BEGIN INSERT INTO audit VALUES (NEW.id); END"
    instance.session(principal=Principal("u")).execute(made_by_u)
    writer = instance.session(principal=Principal("w"))
    writer.execute("INSERT INTO t VALUES (1)")
    _drop_and_make_again(session, "u")
    for attempt in range(2):
        with pytest.raises(Forbidden, match="^trigger 'a' on table 't' runs as user 'u', who"):
            writer.execute("INSERT INTO t VALUES (2)")
        assert rows(session, "SELECT id FROM t") == [(1,)]
        assert rows(session, "SELECT id FROM audit") == [(1,)]
        assert rows(session, "SHOW TRIGGERS")[0][4] == "u"
        if attempt == 0:
            instance.close()
            instance = Instance.open(path)
            session = instance.session()
            writer = instance.session(principal=Principal("w"))
    session.execute("DROP TRIGGER a")
    instance.session(principal=Principal("u")).execute(made_by_u)  # the new u's own
    writer.execute("INSERT INTO t VALUES (3)")
    assert rows(session, "SELECT id FROM audit ORDER BY id") == [(1,), (3,)]
    instance.close()


def test_old_data_folders_keep_their_triggers_and_users(tmp_path: Path) -> None:
    """Users made before users had ids (no `id` in access.json) keep running the triggers
    they made (whose text names them without an id); such a user dropped and made again
    does not."""
    path = tmp_path / "data"
    instance = Instance.open(path)
    session = instance.session()
    session.execute("CREATE TABLE t (id INT); CREATE TABLE audit (id INT)")
    session.execute("CREATE USER old; GRANT ADMIN ON DATABASE demo TO old")
    instance.close()
    access = path / "access.json"
    data = json.loads(access.read_text())
    for user in data["users"]:
        user.pop("id", None)  # as an older version wrote it
    access.write_text(json.dumps(data))
    instance = Instance.open(path)
    session = instance.session()
    old = instance.session(principal=Principal("old"))
    old.execute("CREATE TRIGGER a AFTER INSERT ON t BEGIN INSERT INTO audit VALUES (NEW.id); END")
    assert "DEFINER = old TRIGGER" in json.dumps(session.database.settings["triggers"])
    session.execute("INSERT INTO t VALUES (1)")
    instance.close()
    instance = Instance.open(path)
    session = instance.session()
    session.execute("INSERT INTO t VALUES (2)")
    assert rows(session, "SELECT id FROM audit ORDER BY id") == [(1,), (2,)]
    _drop_and_make_again(session, "old")
    with pytest.raises(Forbidden, match="runs as user 'old', who made it and has been dropped"):
        session.execute("INSERT INTO t VALUES (3)")
    instance.close()


def test_a_definer_must_be_a_user(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT)")
    with pytest.raises(UserError, match="user 'ghost' does not exist"):
        session.execute("CREATE DEFINER = ghost TRIGGER x AFTER INSERT ON t BEGIN SELECT 1; END")
    with pytest.raises(UserError, match="does not exist"):
        session.execute(
            'CREATE DEFINER = "ghost#0123456789abcdef" TRIGGER x AFTER INSERT ON t'
            " BEGIN SELECT 1; END"
        )
    assert rows(session, "SHOW TRIGGERS") == []


def test_refusals_at_creation(session: Session) -> None:
    session.execute("CREATE TABLE t (id INT); CREATE VIEW v AS SELECT id FROM t")
    with pytest.raises(SqlError, match="is a view"):
        session.execute("CREATE TRIGGER x AFTER INSERT ON v BEGIN SELECT 1; END")
    with pytest.raises(SqlError, match="DELETE trigger has no NEW row"):
        session.execute("CREATE TRIGGER x AFTER DELETE ON t BEGIN SELECT NEW.id; END")
    with pytest.raises(UnknownColumn):
        session.execute("CREATE TRIGGER x AFTER UPDATE OF nope ON t BEGIN SELECT 1; END")
    with pytest.raises(SqlError, match="no \\? parameters"):
        session.execute("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT ?; END", (1,))
    assert rows(session, "SHOW TRIGGERS") == []


def test_timestamps_and_symbols_pass_as_their_types(session: Session) -> None:
    session.execute("CREATE TABLE t (ts TIMESTAMP, s SYMBOL) TIMESERIES(ts)")
    session.execute("CREATE TABLE c (ts TIMESTAMP, s SYMBOL, later BOOLEAN)")
    session.execute(
        "CREATE TRIGGER x AFTER INSERT ON t BEGIN INSERT INTO c VALUES (NEW.ts, NEW.s,"
        " NEW.ts > '2026-01-01'); END"
    )
    session.execute("INSERT INTO t VALUES ('2026-05-01T10:00:00Z', 'A')")
    assert rows(session, "SELECT * FROM c") == rows(session, "SELECT ts, s, true FROM t")


IMPORT = "an import of rows 100 and 101 (the path of /imp and /write)"
statements = st.lists(
    st.one_of(
        st.builds(
            lambda i, v: f"INSERT INTO t VALUES ({i}, {v})", st.integers(0, 6), st.integers(0, 3)
        ),
        st.builds(
            lambda i, v: f"UPDATE t SET v = {v} WHERE id = {i}",
            st.integers(0, 6),
            st.integers(0, 3),
        ),
        st.builds(lambda i: f"UPDATE t SET id = id + 1 WHERE id = {i}", st.integers(0, 6)),
        st.builds(lambda v: f"DELETE FROM t WHERE v = {v}", st.integers(0, 3)),
        st.just(IMPORT),
    ),
    max_size=12,
)


@settings(OVER_FIXTURE, max_examples=15)
@given(script=statements)
def test_mirroring_triggers_keep_the_mirror_equal(tmp_path: Path, script: list[str]) -> None:
    instance = Instance.open(tmp_path / f"data-{abs(hash(tuple(script)))}")
    try:
        session = instance.session()
        for sql in MIRROR:
            session.execute(sql)
        for sql in script:
            try:
                if sql is IMPORT:
                    session.insert_rows("t", ["id", "v"], [(100, 1), (101, 2)])
                else:
                    session.execute(sql)
            except DuplicateKey:
                pass  # refused as a whole: the mirror must not have moved either
            assert rows(session, "SELECT * FROM t ORDER BY id") == rows(
                session, "SELECT * FROM mirror ORDER BY id"
            )
    finally:
        instance.close()
