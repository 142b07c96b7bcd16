"""The persisted users, tokens, grants and browser sessions of one data folder.

Users, tokens and grants live in one JSON file (`access.json` in the data folder), rewritten
atomically on a change: a temporary file is written and fsync'd, renamed over the old one, and
the folder is fsync'd so that the rename itself survives a crash. A change is all or nothing:
when the disk fails any of these steps, the records in memory go back to what the file holds
(an old file renamed over already is put back) and `save` raises `StorageError` (a 503), so a
revoked token is either revoked in memory and on disk, or in neither.

Browser sessions live apart, in an append-only journal (`access.sessions`, one JSON line per
session opened or ended), so that opening one costs one short append and fsync instead of a
rewrite of every record. The journal is replayed at start (sessions expired, or of a token no
longer there, are dropped) and rewritten whole, atomically, when it holds many more lines than
live sessions, or after an append failed. A user keeps at most `sessions_per_user` sessions;
opening one more ends the user's oldest.

Tokens are shown once, when created; the files keep only their SHA-256 hash and a short id (the
token's first 12 characters) that finds the record, so that the secret part is compared in
constant time (`hmac.compare_digest`). Tokens are never logged. Every change to a file goes
through a `FileOps` (tests inject failures through it).

The store keeps records and says nothing about who may change them: that is `checks` and
`statements`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine.files import REAL_FILES, FileOps, replace_whole, write_all
from refimpl.engine.rights import ADMIN_USER, LEGACY_USER_ID, USER_ID_BYTES, Principal
from refimpl.errors import InvalidValue, StorageError, UserError
from refimpl.sql import ast

TOKEN_PREFIX = "kdb_"
TOKEN_ID_LENGTH = 12  # prefix + 8 characters: enough to find a record, useless as a secret
STATE_FILE = "access.json"
SESSIONS_SUFFIX = ".sessions"
SESSIONS_PER_USER = 100
_FORMAT = 1
# The journal is rewritten when it holds this many lines more than twice the live sessions.
_JOURNAL_SLACK = 1024

_DURATION = re.compile(r"^\s*([0-9]{1,9})\s*([smhd])\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def name_key(name: str) -> str:
    """Names of users, databases and tables are compared case-insensitively."""
    return name.casefold()


PUBLIC_KEY = name_key(ast.PUBLIC)


def parse_duration(text: str) -> int:
    """'30d' -> seconds. Units s, m, h, d; a positive whole number before them."""
    match = _DURATION.match(text)
    if not match or int(match.group(1)) <= 0:
        raise InvalidValue(
            f"bad token lifetime '{text}'; write a positive whole number and a unit s, m, h"
            " or d, as in '30d'"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(slots=True)
class BrowserSession:
    token_hash: str
    user_key: str
    expires_at: float


# id hash, before, after, and whether the journal needs a line for it
_Change = tuple[str, BrowserSession | None, BrowserSession | None, bool]


class SessionBook(MutableMapping[str, BrowserSession]):
    """Browser sessions by the hash of their id; notes each change for the journal.

    Setting a session past the user's cap ends that user's oldest session (the one opened
    first). `take_changes` hands the changes since the last call to `AccessStore.save`;
    `forget` removes sessions without a journal line, for those that replay drops anyway.
    """

    def __init__(self, per_user: int) -> None:
        self.per_user = max(1, per_user)
        self._items: dict[str, BrowserSession] = {}
        self._by_user: dict[str, dict[str, None]] = {}  # user -> id hashes, oldest first
        self._changes: list[_Change] = []

    def __getitem__(self, id_hash: str) -> BrowserSession:
        return self._items[id_hash]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __setitem__(self, id_hash: str, session: BrowserSession) -> None:
        self._changes.append((id_hash, self._items.get(id_hash), session, True))
        self._put(id_hash, session)
        mine = self._by_user[session.user_key]
        while len(mine) > self.per_user:
            del self[next(iter(mine))]

    def __delitem__(self, id_hash: str) -> None:
        self._changes.append((id_hash, self._items[id_hash], None, True))
        self._drop(id_hash)

    def forget(self, id_hash: str) -> None:
        self._changes.append((id_hash, self._items[id_hash], None, False))
        self._drop(id_hash)

    def take_changes(self) -> list[_Change]:
        changes, self._changes = self._changes, []
        return changes

    def undo(self, changes: list[_Change]) -> None:
        """Puts back what `changes` changed (the journal did not take them)."""
        for id_hash, before, _after, _logged in reversed(changes):
            if id_hash in self._items:
                self._drop(id_hash)
            if before is not None:
                self._put(id_hash, before)

    def _put(self, id_hash: str, session: BrowserSession) -> None:
        if id_hash in self._items:
            self._drop(id_hash)
        self._items[id_hash] = session
        self._by_user.setdefault(session.user_key, {})[id_hash] = None

    def _drop(self, id_hash: str) -> None:
        session = self._items.pop(id_hash)
        mine = self._by_user[session.user_key]
        del mine[id_hash]
        if not mine:
            del self._by_user[session.user_key]


class AccessStore:
    """The records, the lock that guards them, and the files they are saved to.

    Callers hold `lock` around every change and call `save()` after it; when `save` raises
    `StorageError`, the records are as they were before the change.
    """

    def __init__(
        self,
        file: Path,
        clock: Callable[[], float],
        *,
        files: FileOps = REAL_FILES,
        sessions_per_user: int = SESSIONS_PER_USER,
    ) -> None:
        self.file = file
        self.sessions_file = file.with_name(file.stem + SESSIONS_SUFFIX)
        self.clock = clock
        self.files = files
        self.lock = threading.RLock()
        # users: key -> {"name", "admin", "id"}; tokens: id -> {"id", "user", "hash", "expires_at"};
        # roles: [grantee_key, database_key, role]; tables: [grantee_key, db_key, table_key,
        # "SELECT"|"DENY"] with display names kept alongside.
        self.users: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.roles: list[dict] = []
        self.tables: list[dict] = []
        self.sessions = SessionBook(sessions_per_user)
        self._saved_text: str | None = None  # what the access file holds; None: no file
        self._saved_data: dict | None = None  # the same, parsed: compared at every save
        self._failed: str | None = None  # set when the file's content is no longer known
        self._journal_lines = 0
        self._journal_broken = False
        # Counts the saves: a principal checked when it was N still stands while it is N
        # (`AccessControl.still_valid`). Every change to the records ends in a save.
        self.version = 0
        self._load()
        self._load_sessions()

    # -- the access file -------------------------------------------------------------------

    def _load(self) -> None:
        try:
            text = self.file.read_text("utf-8")
            self._apply(text)
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"the access file {self.file} cannot be read: {exc}") from exc
        self._saved_text, self._saved_data = text, json.loads(text)

    def _apply(self, text: str) -> None:
        data = json.loads(text)
        self.users = {name_key(u["name"]): u for u in data.get("users", [])}
        self.tokens = {t["id"]: t for t in data.get("tokens", [])}
        self.roles = list(data.get("roles", []))
        self.tables = list(data.get("tables", []))

    def _data(self) -> dict:
        return {
            "format": _FORMAT,
            "users": list(self.users.values()),
            "tokens": list(self.tokens.values()),
            "roles": self.roles,
            "tables": self.tables,
        }

    def save(self) -> None:
        """Makes the changes since the last save durable, or undoes them and raises.

        Raises `StorageError` when the disk fails: the records (sessions too) are then back
        as they were at the last save, which is what the files hold.
        """
        try:
            self._save()
        finally:
            # After the change, whether saved or undone: a check that read the records
            # before it was made is stale either way.
            self.version += 1

    def _save(self) -> None:
        # Comparing the records with those last saved (parsed back from the file's text) is
        # done in C and costs microseconds: a session opened rewrites no file and encodes none.
        data = self._data()
        changed = data != self._saved_data
        changes = self.sessions.take_changes()
        logged = [change for change in changes if change[3]]
        if not changed and not logged:
            return
        if self._failed is not None:
            self._undo(changes)
            raise StorageError(self._failed)
        if changed:
            text = json.dumps(data, indent=1, sort_keys=True)
            try:
                self._write_access_file(text)
            except OSError as exc:
                self._undo(changes)
                raise StorageError(
                    f"the access file {self.file} could not be saved ({exc}); nothing was"
                    " changed; free disk space or check the disk, then try again"
                ) from exc
            self._saved_text, self._saved_data = text, json.loads(text)
        if logged:
            try:
                self._append_sessions(logged)
            except OSError as exc:
                self.sessions.undo(logged)
                self._journal_broken = True  # a line may be half written: rewrite it next
                raise StorageError(
                    f"the sessions file {self.sessions_file} could not be saved ({exc}); no"
                    " browser session was opened or ended; check the disk, then try again"
                ) from exc

    def _undo(self, changes: list[_Change]) -> None:
        self.sessions.undo(changes)
        if self._saved_text is None:
            self.users, self.tokens, self.roles, self.tables = {}, {}, [], []
        else:
            self._apply(self._saved_text)

    def _write_access_file(self, text: str) -> None:
        replaced = False
        try:
            self._replace_file(self.file, text)
            replaced = True
            self.files.sync_directory(self.file.parent)  # the rename is durable only then
        except OSError as exc:
            if replaced:
                self._put_back(exc)
            raise

    def _put_back(self, exc: OSError) -> None:
        """The new file was renamed in but its rename may not be durable: restore the old."""
        try:
            if self._saved_text is None:
                self.files.unlink(self.file)
            else:
                self._replace_file(self.file, self._saved_text)
            self.files.sync_directory(self.file.parent)
        except OSError as again:
            self._failed = (
                f"the access file {self.file} could not be saved ({exc}) nor put back"
                f" ({again}); no change to users, tokens or grants is taken until the server"
                " restarts on a sound disk"
            )

    def _replace_file(self, target: Path, text: str) -> None:
        """`target` holds `text`, whole or not at all (hashes only, but readable by the owner
        alone all the same); the caller syncs the folder."""
        self.files.mkdir(target.parent)
        replace_whole(self.files, target, text.encode("utf-8"))

    # -- the sessions journal --------------------------------------------------------------

    def _load_sessions(self) -> None:
        # Sessions are kept across restarts: an EventSource reconnecting after a restart of
        # the server must still be let in by its cookie.
        try:
            lines = self.sessions_file.read_bytes().split(b"\n")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(
                f"the sessions file {self.sessions_file} cannot be read: {exc}"
            ) from exc
        sessions: dict[str, BrowserSession] = {}
        last = len(lines) - 1
        for number, line in enumerate(lines):
            if not line:
                continue
            try:
                entry = json.loads(line)
                if "close" in entry:
                    sessions.pop(entry["close"], None)
                else:
                    sessions[entry["open"]] = BrowserSession(
                        entry["token_hash"], entry["user"], float(entry["expires_at"])
                    )
            except (ValueError, KeyError, TypeError) as exc:
                if number == last:
                    self._journal_broken = True  # a line cut short by a crash: never acked
                    continue
                raise StorageError(
                    f"the sessions file {self.sessions_file} is damaged at line {number + 1}"
                    f" ({exc}); move it away (every browser then signs in again) and start"
                    " again"
                ) from exc
        now = self.clock()
        live_tokens = {t["hash"] for t in self.tokens.values()}
        for id_hash, session in sessions.items():
            if session.expires_at > now and session.token_hash in live_tokens:
                self.sessions[id_hash] = session  # in the order opened: the cap holds
        self.sessions.take_changes()
        self._journal_lines = sum(1 for line in lines if line)
        if self._journal_broken or self._journal_lines > 2 * len(self.sessions) + _JOURNAL_SLACK:
            try:
                self._rewrite_journal()
            except OSError as exc:
                raise StorageError(
                    f"the sessions file {self.sessions_file} could not be rewritten ({exc})"
                ) from exc

    def _append_sessions(self, changes: list[_Change]) -> None:
        if self._journal_broken or self._journal_lines > 2 * len(self.sessions) + _JOURNAL_SLACK:
            self._rewrite_journal()
            return
        lines = b"".join(_journal_line(id_hash, after) for id_hash, _, after, _ in changes)
        files = self.files
        created = not self.sessions_file.exists()
        fd = files.open(self.sessions_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            write_all(files, fd, lines)
            files.fsync(fd)
        finally:
            files.close(fd)
        if created:
            files.sync_directory(self.sessions_file.parent)
        self._journal_lines += len(changes)

    def _rewrite_journal(self) -> None:
        """The journal anew, one line per live session: atomic, like the access file."""
        self._journal_broken = True  # until the new one is in place
        text = b"".join(_journal_line(i, s) for i, s in self.sessions.items()).decode()
        self._replace_file(self.sessions_file, text)
        self.files.sync_directory(self.sessions_file.parent)
        self._journal_lines = len(self.sessions)
        self._journal_broken = False

    # -- users -----------------------------------------------------------------------------

    def user(self, name: str) -> dict:
        record = self.users.get(name_key(name))
        if record is None:
            raise UserError(f"user '{name}' does not exist")
        return record

    def user_id(self, name: str) -> str | None:
        """The identity of the user named `name` now (None: no such user): a new one for
        each CREATE USER, so that a user made again under a dropped user's name is not that
        user (a trigger bound to the dropped one does not run as the new one). Users made
        before users had ids, and the admin user, who cannot be dropped, are LEGACY_USER_ID.
        Lock-free, as `authenticate`: a single dict read."""
        record = self.users.get(name_key(name))
        if record is None:
            return LEGACY_USER_ID if name_key(name) == name_key(ADMIN_USER) else None
        return str(record.get("id", LEGACY_USER_ID))

    def principal(self, user: str) -> Principal:
        record = self.users[name_key(user)]
        return Principal(record["name"], bool(record.get("admin")))

    def add_user(self, name: str, admin: bool = False) -> None:
        if name_key(name) == PUBLIC_KEY:
            raise UserError("PUBLIC names every principal and cannot be a user's name")
        if name_key(name) in self.users:
            raise UserError(f"user '{name}' already exists; use CREATE USER IF NOT EXISTS")
        record: dict = {"name": name, "admin": admin}
        if not admin:
            record["id"] = secrets.token_hex(USER_ID_BYTES)
        self.users[name_key(name)] = record

    def drop_user(self, name: str) -> None:
        key = name_key(name)
        self.drop_tokens(self.tokens_of(name))
        self.roles = [r for r in self.roles if r["grantee"] != key]
        self.tables = [t for t in self.tables if t["grantee"] != key]
        del self.users[key]

    def require_grantee(self, grantee: str) -> None:
        if name_key(grantee) != PUBLIC_KEY:
            self.user(grantee)

    def display_grantee(self, grantee: str) -> str:
        if name_key(grantee) == PUBLIC_KEY:
            return ast.PUBLIC
        return self.user(grantee)["name"]

    # -- tokens ----------------------------------------------------------------------------

    def new_token(self, user: str, lifetime: int | None) -> str:
        while True:
            token = TOKEN_PREFIX + secrets.token_urlsafe(32)
            token_id = token[:TOKEN_ID_LENGTH]
            if token_id not in self.tokens:
                break
        self.tokens[token_id] = {
            "id": token_id,
            "user": user,
            "hash": secret_hash(token),
            "created_at": round(self.clock(), 3),
            "expires_at": None if lifetime is None else round(self.clock() + lifetime, 3),
        }
        return token

    def find_token(self, token: str) -> dict | None:
        record = self.tokens.get(token[:TOKEN_ID_LENGTH])
        if record is None or not hmac.compare_digest(record["hash"], secret_hash(token)):
            return None
        return record

    def expired(self, record: dict) -> bool:
        expires = record.get("expires_at")
        return expires is not None and expires <= self.clock()

    def tokens_of(self, user: str) -> list[dict]:
        key = name_key(user)
        return [t for t in self.tokens.values() if name_key(t["user"]) == key]

    def tokens_matching(self, text: str) -> list[dict]:
        """A whole token, or a token's id (its first 12 characters)."""
        record = self.find_token(text)
        if record is not None:
            return [record]
        if len(text) == TOKEN_ID_LENGTH and text in self.tokens:
            return [self.tokens[text]]
        return []

    def drop_tokens(self, records: list[dict]) -> int:
        """Drop tokens and the browser sessions opened with them."""
        hashes = {r["hash"] for r in records}
        for record in records:
            del self.tokens[record["id"]]
        # No journal line: replaying the journal drops sessions whose token is gone anyway,
        # so the access file alone makes this durable (and all or nothing).
        for sid in [s for s, v in self.sessions.items() if v.token_hash in hashes]:
            self.sessions.forget(sid)
        return len(records)

    # -- grants ----------------------------------------------------------------------------

    def set_role(self, grantee: str, db: str, role: str, present: bool) -> None:
        gk, dk, role = name_key(grantee), name_key(db), role.upper()
        self.roles = [
            r
            for r in self.roles
            if not (r["grantee"] == gk and r["db"] == dk and r["role"] == role)
        ]
        if present:
            self.roles.append(
                {
                    "grantee": gk,
                    "grantee_name": self.display_grantee(grantee),
                    "db": dk,
                    "db_name": db,
                    "role": role,
                }
            )

    def set_table(self, grantee: str, db: str, table: str, kind: str) -> None:
        """Record a table-level SELECT grant (kind "SELECT") or revoke ("DENY")."""
        gk, dk, tk = name_key(grantee), name_key(db), name_key(table)
        self.tables = [
            t
            for t in self.tables
            if not (t["grantee"] == gk and t["db"] == dk and t["table"] == tk)
        ]
        self.tables.append(
            {
                "grantee": gk,
                "grantee_name": self.display_grantee(grantee),
                "db": dk,
                "db_name": db,
                "table": tk,
                "table_name": table,
                "kind": kind,
            }
        )


def _journal_line(id_hash: str, session: BrowserSession | None) -> bytes:
    if session is None:
        entry: dict[str, object] = {"close": id_hash}
    else:
        entry = {
            "open": id_hash,
            "token_hash": session.token_hash,
            "user": session.user_key,
            "expires_at": session.expires_at,
        }
    return json.dumps(entry, sort_keys=True).encode() + b"\n"
