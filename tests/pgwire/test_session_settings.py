"""A connection's settings (`SessionSettings`): the timeouts read as PostgreSQL reads them
and shown as it shows them, the server's defaults, and SET inside a transaction kept or
undone as it ends."""

from __future__ import annotations

import pytest

from refimpl.errors import BadRequest
from refimpl.pgwire.session_settings import SessionSettings, recognise


def settings(**server: str) -> SessionSettings:
    return SessionSettings({}, "admin", True, server)


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0", "0"), ("200", "200ms"), ("'1.5s'", "1500ms"), ("120000", "2min"), ("90 s", "90s"),
     ("'3600000'", "1h"), ("2d", "2d"), ("default", "1min")],
)  # fmt: skip
def test_a_timeout_is_read_and_shown_as_postgresql_does(value: str, shown: str) -> None:
    mine = settings(idle_in_transaction_session_timeout="60000")
    command = recognise(f"SET idle_in_transaction_session_timeout = {value}")
    assert command is not None and command.value is not None
    mine.set("idle_in_transaction_session_timeout", command.value)
    assert mine.show("idle_in_transaction_session_timeout") == shown


@pytest.mark.parametrize("value", ["-1", "soon", "1e3", "3 weeks", "2147483648"])
def test_a_value_that_is_no_timeout_is_refused(value: str) -> None:
    with pytest.raises(BadRequest, match='invalid value for parameter "lock_timeout"'):
        settings().set("lock_timeout", value)


def test_the_server_gives_the_defaults_reset_goes_back_to() -> None:
    mine = settings(lock_timeout="250", idle_in_transaction_session_timeout="0")
    assert mine.seconds("lock_timeout") == 0.25
    assert mine.show("idle_in_transaction_session_timeout") == "0"
    mine.set("lock_timeout", "1s")
    mine.reset("all")
    assert mine.show("lock_timeout") == "250ms"


def test_set_local_is_recognised() -> None:
    assert recognise("SET LOCAL lock_timeout = 5").local  # type: ignore[union-attr]
    assert not recognise("SET SESSION lock_timeout = 5").local  # type: ignore[union-attr]


def test_a_transaction_keeps_or_undoes_what_set_changed() -> None:
    mine = settings()
    assert mine.begin_transaction() and not mine.begin_transaction()  # once a transaction
    mine.set("application_name", "kept")
    mine.set("lock_timeout", "5", local=True)
    assert mine.show("lock_timeout") == "5ms"
    mine.end_transaction(committed=True)
    assert (mine.show("application_name"), mine.show("lock_timeout")) == ("kept", "0")
    assert mine.unreported == []  # application_name was told as SET changed it
    mine.begin_transaction()
    mine.set("application_name", "undone")
    mine.end_transaction(committed=False)
    assert mine.show("application_name") == "kept"
    assert mine.unreported == ["application_name"]
