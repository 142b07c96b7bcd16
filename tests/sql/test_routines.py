"""The statements of triggers and procedures: parsed as written, printed canonically
(`parse(to_sql(x)) == x`), their bodies' `;` kept apart from the script's."""

from __future__ import annotations

import pytest

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.parser import parse
from refimpl.sql.printer import to_sql
from tests.parsed import statement as parsed

TEXTS = [
    "CREATE TRIGGER t1r1 UPDATE ON t1 BEGIN SELECT 1; END",
    "CREATE TRIGGER IF NOT EXISTS a AFTER UPDATE OF x, y ON t FOR EACH ROW WHEN NEW.x > OLD.x"
    " BEGIN INSERT INTO log VALUES (NEW.x, OLD.x); UPDATE u SET a = 1 WHERE b = NEW.y; END",
    "CREATE DEFINER = bob TRIGGER d BEFORE DELETE ON t BEGIN DELETE FROM u WHERE id = OLD.id;"
    " CALL p(OLD.id); END",
    "DROP TRIGGER IF EXISTS x",
    "SHOW TRIGGERS",
    "CREATE OR REPLACE PROCEDURE p(a INTEGER, b TEXT) LANGUAGE SQL BEGIN ATOMIC"
    " INSERT INTO t VALUES (a, b); CALL q(a + 1); END",
    "CREATE PROCEDURE p() BEGIN ATOMIC SELECT 1; END",
    "DROP PROCEDURE IF EXISTS p",
    "CALL p(1, 'a', NULL, -2.5)",
    "SHOW PROCEDURES",
]


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(text: str) -> None:
    statement = parse(text).statements[0]
    assert parse(to_sql(statement)).statements == (statement,)


def test_a_body_keeps_its_semicolons_and_the_script_its_own() -> None:
    script = parse("CREATE TRIGGER a INSERT ON t BEGIN SELECT 1; SELECT 2; END; SELECT 3")
    trigger, select = script.statements
    assert isinstance(trigger, ast.CreateTrigger) and len(trigger.body) == 2
    assert trigger.timing == "BEFORE" and isinstance(select, ast.Select)
    assert script.sources[1] == "SELECT 3"


def test_a_dollar_body_is_kept_as_text_with_its_place() -> None:
    statement = parse(
        "SELECT 1;\nCREATE PROCEDURE p(n INT) LANGUAGE SQL AS $$\n"
        "  INSERT INTO t VALUES (n); SELECT 'a;b' $$"
    ).statements[1]
    assert isinstance(statement, ast.CreateProcedure) and statement.body is None
    assert statement.source == "\n  INSERT INTO t VALUES (n); SELECT 'a;b' "
    assert statement.source_at == (2, 45)
    assert (
        parsed("CREATE PROCEDURE p() AS $$ SELECT 1 $$ LANGUAGE sql", ast.CreateProcedure).source
        == " SELECT 1 "
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "CREATE PROCEDURE p() LANGUAGE plpgsql AS $$ x $$",
            "line 1, column 22: LANGUAGE plpgsql is not supported",
        ),
        (
            "CREATE TRIGGER x INSTEAD OF INSERT ON v BEGIN SELECT 1; END",
            "line 1, column 18: expected AFTER, BEFORE, DELETE, INSERT or UPDATE",
        ),
        ("CREATE TRIGGER x AFTER INSERT ON t BEGIN SELECT 1 END", "line 1, column 51: "),
    ],
)
def test_errors_point_at_their_place(text: str, message: str) -> None:
    with pytest.raises(SqlSyntaxError) as caught:
        parse(text)
    assert caught.value.message.startswith(message)


def test_new_words_stay_names() -> None:
    sql = "CREATE TABLE after (before INT, each INT, row INT, of INT, call INT)"
    assert [c.name for c in parsed(sql, ast.CreateTable).columns] == [
        "before",
        "each",
        "row",
        "of",
        "call",
    ]
