"""COPY in the engine: formats read back what they write, bad data changes nothing, one COPY
is one commit."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine import copying
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.session import Session
from refimpl.errors import CopyError, Forbidden, SqlSyntaxError
from tests.hypothesis_settings import OVER_FIXTURE


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    instance = Instance.open(tmp_path / "data")
    session = instance.session()
    session.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, d DOUBLE, b BOOLEAN)")
    yield session
    session.close()
    instance.close()


texts = st.one_of(st.none(), st.text(st.characters(exclude_categories=["Cs"]), max_size=12))
rows = st.lists(
    st.tuples(
        texts,
        st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        st.one_of(st.none(), st.booleans()),
    ),
    max_size=20,
)
options = st.sampled_from(
    [
        "",
        "WITH (FORMAT csv)",
        "WITH (FORMAT csv, HEADER)",
        "(FORMAT text, HEADER true)",
        "WITH (FORMAT csv, DELIMITER ';', NULL 'NULL', QUOTE '''')",
        "WITH (DELIMITER '|')",
        "(FORMAT csv, DELIMITER '\t', ESCAPE '\\')",
    ]
)


@settings(OVER_FIXTURE, max_examples=60)
@given(rows=rows, how=options)
def test_what_copy_to_writes_copy_from_reads_back(session: Session, rows: list, how: str) -> None:
    session.execute("TRUNCATE t")
    for number, (s, d, b) in enumerate(rows):
        session.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (number, s, d, b))
    before = session.execute("SELECT * FROM t ORDER BY id").rows
    text = b"".join(copying.copy_out(session, f"COPY t TO STDOUT {how}").chunks())
    session.execute("TRUNCATE t")
    copying.copy_in(session, f"COPY t FROM STDIN {how}", io.BytesIO(text))
    assert session.execute("SELECT * FROM t ORDER BY id").rows == before


def test_a_bad_field_names_line_and_column_and_changes_nothing(session: Session) -> None:
    data = io.BytesIO(b"1\ta\t1.5\ttrue\n2\tb\tx\tfalse\n")
    with pytest.raises(CopyError, match=r"line 2, column 3 \(d\)"):
        copying.copy_in(session, "COPY t FROM STDIN", data)
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]


def test_bad_utf8_is_refused(session: Session) -> None:
    with pytest.raises(CopyError, match="not valid UTF-8"):
        copying.copy_in(session, "COPY t (id, s) FROM STDIN", io.BytesIO(b"1\t\xff\n"))


def test_one_copy_is_one_commit(session: Session) -> None:
    data = io.BytesIO(b"".join(b"%d\tx\t\\N\t\\N\n" % i for i in range(1000)))
    before = session.database.applied_lsn
    copying.copy_in(session, "COPY t FROM STDIN", data)
    assert session.database.applied_lsn == before + 1
    lsns = session.execute("SELECT DISTINCT lsn FROM changes('t') WHERE op = 'upsert'").rows
    assert len(lsns) == 1


def test_header_match_checks_the_names(session: Session) -> None:
    with pytest.raises(CopyError, match="HEADER MATCH"):
        copying.copy_in(
            session,
            "COPY t (id, s) FROM STDIN (FORMAT csv, HEADER match)",
            io.BytesIO(b"id,x\n1,a\n"),
        )
    copying.copy_in(
        session, "COPY t (id, s) FROM STDIN (FORMAT csv, HEADER match)", io.BytesIO(b"ID,S\n1,a\n")
    )
    assert session.execute("SELECT id, s FROM t").rows == [(1, "a")]


def test_copy_statement_recognises_only_copy(session: Session) -> None:
    assert copying.copy_statement("SELECT 1") is None
    assert copying.copy_statement("COPY t FROM 'f.csv'") is None  # runs as any statement
    assert copying.copy_statement("COPY t TO STDOUT") is not None
    with pytest.raises(SqlSyntaxError):
        copying.copy_statement("COPY t FROM")


def test_file_copies_stay_in_the_import_folder(session: Session, tmp_path: Path) -> None:
    folder = tmp_path / "data" / "import"
    folder.mkdir()
    (folder / "ok.txt").write_bytes(b"7\tseven\t\\N\t\\N\n")
    (tmp_path / "secret.txt").write_bytes(b"8\tx\t\\N\t\\N\n")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    session.execute("COPY t FROM 'ok.txt'")
    for name in ("../../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "a/../../x"):
        with pytest.raises(CopyError, match="import folder"):
            session.execute(f"COPY t FROM '{name}'")
    assert session.execute("SELECT id FROM t").rows == [(7,)]


def test_file_copies_need_the_admin(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    try:
        admin = instance.session()
        admin.execute("CREATE TABLE t (id INT); CREATE USER w; GRANT WRITE ON DATABASE demo TO w")
        writer = instance.session(principal=Principal("w"))
        with pytest.raises(Forbidden):
            writer.execute("COPY t FROM 'x.txt'")
    finally:
        instance.close()
