"""The access store's files: browser sessions in a journal of their own, capped per user.

- Opening a session appends one line to `access.sessions` and leaves `access.json` alone;
  sessions, and the ends of sessions, survive a restart.
- A user keeps at most `sessions_per_user` sessions: one more ends the user's oldest, also
  after a restart; other users' sessions are not touched.
- The journal is rewritten whole when it holds many more lines than live sessions.
- A line cut short at the journal's end (a crash mid-append) is dropped; a damaged line before
  the end stops the start with a message saying what to do.
- A session whose line cannot be saved is not opened (StorageError); a dropped token's
  sessions end, and stay ended after a restart.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from refimpl.engine.access import AccessControl
from refimpl.engine.access.store import SESSIONS_PER_USER
from refimpl.engine.files import FileOps
from refimpl.engine.options import EngineOptions
from refimpl.engine.rights import ADMIN
from refimpl.errors import StorageError, Unauthorized
from refimpl.sql.parser import parse


class FullDisk(FileOps):
    def __init__(self) -> None:
        self.full = False

    def fsync(self, fd: int) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        super().fsync(fd)


def control_with_user(folder: Path, **options: object) -> tuple[AccessControl, str]:
    control = AccessControl(folder, **options)  # type: ignore[arg-type]
    control.create_user("u")
    return control, control.create_token("u")


def test_the_default_cap_is_the_setting_default():
    assert SESSIONS_PER_USER == EngineOptions().sessions_per_user == 100


def test_opening_sessions_appends_and_leaves_the_access_file_alone(tmp_path):
    control, token = control_with_user(tmp_path)
    access_file = tmp_path / "access.json"
    before = access_file.read_bytes()
    sessions = [control.open_session(token)[0] for _ in range(50)]
    assert access_file.read_bytes() == before
    journal = (tmp_path / "access.sessions").read_bytes().splitlines()
    assert len(journal) == 50 and all(token.encode() not in line for line in journal)
    control.close_session(sessions[0])
    again = AccessControl(tmp_path)
    with pytest.raises(Unauthorized):
        again.principal_for_session(sessions[0])
    assert {again.principal_for_session(s).name for s in sessions[1:]} == {"u"}


def test_one_session_past_the_cap_ends_the_users_oldest(tmp_path):
    control, token = control_with_user(tmp_path, sessions_per_user=3)
    control.create_user("v")
    other = control.open_session(control.create_token("v"))[0]
    opened = [control.open_session(token)[0] for _ in range(5)]
    for ended in opened[:2]:
        with pytest.raises(Unauthorized):
            control.principal_for_session(ended)
    assert all(control.principal_for_session(s).name == "u" for s in opened[2:])
    assert control.principal_for_session(other).name == "v"
    again = AccessControl(tmp_path, sessions_per_user=3)
    for ended in opened[:2]:
        with pytest.raises(Unauthorized):
            again.principal_for_session(ended)
    assert all(again.principal_for_session(s).name == "u" for s in opened[2:])
    assert again.principal_for_session(other).name == "v"


def test_the_journal_is_rewritten_when_mostly_dead(tmp_path):
    control, token = control_with_user(tmp_path, sessions_per_user=2)
    kept = [control.open_session(token)[0] for _ in range(3000)][-2:]
    lines = (tmp_path / "access.sessions").read_bytes().splitlines()
    assert len(lines) <= 2 * 2 + 1024 + 2
    again = AccessControl(tmp_path, sessions_per_user=2)
    assert [again.principal_for_session(s).name for s in kept] == ["u", "u"]


def test_a_line_cut_short_at_the_end_is_dropped_and_damage_before_it_stops(tmp_path):
    control, token = control_with_user(tmp_path)
    first = control.open_session(token)[0]
    journal = tmp_path / "access.sessions"
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"open": "abc", "tok')  # a crash in the middle of an append
    again = AccessControl(tmp_path)
    assert again.principal_for_session(first).name == "u"
    assert journal.read_bytes() == whole  # rewritten without the cut line
    journal.write_bytes(b'{"open": nonsense\n' + whole)
    with pytest.raises(StorageError, match=r"damaged at line 1.*move it away"):
        AccessControl(tmp_path)


def test_a_session_that_cannot_be_saved_is_not_opened(tmp_path):
    files = FullDisk()
    control, token = control_with_user(tmp_path, files=files)
    kept = control.open_session(token)[0]
    files.full = True
    with pytest.raises(StorageError, match="no browser session was opened or ended"):
        control.open_session(token)
    with pytest.raises(StorageError):
        control.close_session(kept)
    assert control.principal_for_session(kept).name == "u"  # the failed close changed nothing
    files.full = False
    fresh = control.open_session(token)[0]  # the journal is rewritten whole, then appended to
    again = AccessControl(tmp_path)
    assert {again.principal_for_session(s).name for s in (kept, fresh)} == {"u"}


def test_a_dropped_tokens_sessions_end_for_good(tmp_path):
    control, token = control_with_user(tmp_path)
    session = control.open_session(token)[0]
    control.execute(parse(f"DROP TOKEN '{token}'").statements[0], ADMIN, "demo")
    with pytest.raises(Unauthorized):
        control.principal_for_session(session)
    with pytest.raises(Unauthorized):
        AccessControl(tmp_path).principal_for_session(session)
