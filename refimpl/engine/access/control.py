"""`AccessControl`: the users, tokens, browser sessions and rights of one data folder."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine.access.checks import (
    TOKEN_DATABASE,
    holds_any_right,
    holds_right,
    refuse,
)
from refimpl.engine.access.statements import REPLICATION, run_access_statement
from refimpl.engine.access.store import (
    SESSIONS_PER_USER,
    STATE_FILE,
    AccessStore,
    BrowserSession,
    name_key,
    parse_duration,
    secret_hash,
)
from refimpl.engine.files import REAL_FILES, FileOps
from refimpl.engine.result import Result
from refimpl.engine.rights import ADMIN_USER, Principal, Right
from refimpl.errors import Unauthorized
from refimpl.sql import ast

SESSION_SECONDS = 12 * 3600
# Rights verdicts kept (`AccessControl.allowed`); emptied when full: a few hundred KB at most.
_VERDICTS_KEPT = 4096


@dataclass(frozen=True, slots=True)
class CheckedToken:
    """A token's principal as `AccessControl.check_token` found it, and what tells whether
    that answer still stands (`AccessControl.still_valid`): the records' version it was read
    at and the token's end."""

    principal: Principal
    version: int
    expires_at: float | None


class AccessControl:
    """Who may do what, with no HTTP in sight. Thread-safe.

    `clock` returns seconds since the epoch; tests pass their own.
    """

    def __init__(
        self,
        path: Path,
        clock: Callable[[], float] = time.time,
        *,
        files: FileOps = REAL_FILES,
        sessions_per_user: int = SESSIONS_PER_USER,
    ) -> None:
        # The data folder, or the file itself when the name ends in .json.
        path = Path(path)
        self._store = AccessStore(
            path if path.suffix == ".json" else path / STATE_FILE,
            clock,
            files=files,
            sessions_per_user=sessions_per_user,
        )
        # `holds_right`'s verdicts by (principal, database, right, table), each with the
        # records' version it was read at (before reading them): one is reused only while
        # that version stands, so any change of users, tokens or grants (a GRANT, a REVOKE)
        # takes effect at the next check, as when every check read the records. A statement
        # still asks at every run; the answer costs a lookup instead of a walk over the
        # grants under the store's lock.
        self._verdicts: dict[tuple[Principal, str, Right, str | None], tuple[int, bool]] = {}

    @property
    def file(self) -> Path:
        return self._store.file

    # -- users and tokens ------------------------------------------------------------------

    def ensure_admin(self) -> str | None:
        """On the first start: create user `admin` and a token for it, and return the token."""
        store = self._store
        with store.lock:
            if name_key(ADMIN_USER) in store.users:
                return None
            store.add_user(ADMIN_USER, admin=True)
            token = store.new_token(ADMIN_USER, None)
            store.save()
            return token

    def user_names(self) -> list[str]:
        with self._store.lock:
            return sorted(u["name"] for u in self._store.users.values())

    def user_id(self, name: str) -> str | None:
        """The identity of the user named `name` now; None when there is none
        (`AccessStore.user_id`)."""
        return self._store.user_id(name)

    def create_user(self, name: str) -> None:
        with self._store.lock:
            self._store.add_user(name)
            self._store.save()

    def create_token(self, user: str, expires_in: str | None = None) -> str:
        store = self._store
        with store.lock:
            record = store.user(user)
            lifetime = parse_duration(expires_in) if expires_in is not None else None
            token = store.new_token(record["name"], lifetime)
            store.save()
            return token

    def authenticate(self, token: str) -> Principal:
        """The principal a token stands for; Unauthorized when it is wrong, expired or revoked.

        Lock-free: every request calls it, and single dict reads are atomic; a token or user
        dropped at the same moment reads as not found.
        """
        return self.check_token(token).principal

    def check_token(self, token: str) -> CheckedToken:
        """`authenticate`, with what `still_valid` needs to tell later, without hashing the
        token again, whether its answer still stands."""
        store = self._store
        # Read before the records: a change made meanwhile leaves the check stale, never
        # a stale check looking current.
        version = store.version
        record = store.find_token(token) if token else None
        if record is not None and not store.expired(record):
            principal = _principal_of(store, record)
            if principal is not None:
                return CheckedToken(principal, version, record.get("expires_at"))
        refused = Unauthorized(
            "the token is wrong, expired or revoked; ask an administrator for a new one"
        )
        if record is not None:  # the right secret, expired: the log may say whose it was
            refused.user = str(record["user"])
        raise refused

    @property
    def version(self) -> int:
        """The version of the records: moved by every change of users, tokens or grants
        (after the change, before the statement's answer), so that what was read of them at
        one version stands while it does not move."""
        return self._store.version

    def still_valid(self, checked: CheckedToken) -> bool:
        """Whether a token checked before would be answered the same now: no user, token or
        grant changed since (any DROP TOKEN, DROP USER, GRANT or REVOKE counts, whoever it
        names) and the token has not expired. Rights are not part of the answer: they are
        checked at each use."""
        store = self._store
        if checked.version != store.version:
            return False
        expires = checked.expires_at
        return expires is None or expires > store.clock()

    def token_key(self, token: str) -> str:
        """The key of a valid token (its hash: no secret), under which limits count what it
        holds open; Unauthorized as `authenticate`."""
        self.authenticate(token)
        return secret_hash(token)

    def session_token_key(self, session_id: str) -> str:
        """The key of the token a browser session was opened with; Unauthorized when the
        session has ended."""
        self.principal_for_session(session_id)
        with self._store.lock:
            session = self._store.sessions.get(secret_hash(session_id))
        if session is None:
            raise Unauthorized("the session has ended or is unknown; sign in again with a token")
        return session.token_hash

    def principal_of_token_key(self, key: str) -> Principal:
        """Who the token with this key stands for now; Unauthorized once it is dropped, has
        expired, or its user is gone (a long-lived stream asks this again and again)."""
        store = self._store
        with store.lock:
            record = next((t for t in store.tokens.values() if t["hash"] == key), None)
            principal = None
            if record is not None and not store.expired(record):
                principal = _principal_of(store, record)
        if principal is None:
            raise Unauthorized(
                "the token is wrong, expired or revoked; ask an administrator for a new one"
            )
        return principal

    # -- browser sessions ------------------------------------------------------------------

    def open_session(self, token: str) -> tuple[str, float]:
        """A session id standing for `token`, and when it ends (seconds since the epoch)."""
        store = self._store
        with store.lock:
            self.authenticate(token)
            record = store.find_token(token)
            assert record is not None
            self._sweep_sessions()
            expires = store.clock() + SESSION_SECONDS
            if record.get("expires_at") is not None:
                expires = min(expires, record["expires_at"])
            session_id = secrets.token_urlsafe(32)
            session = BrowserSession(record["hash"], name_key(record["user"]), expires)
            store.sessions[secret_hash(session_id)] = session  # only a hash, as for tokens
            store.save()
            return session_id, expires

    def principal_for_session(self, session_id: str) -> Principal:
        """The principal of the token a session was opened with, as that token is now."""
        store = self._store
        with store.lock:
            session = store.sessions.get(secret_hash(session_id))
            record = None
            if session is not None and session.expires_at > store.clock():
                record = next(
                    (t for t in store.tokens.values() if t["hash"] == session.token_hash), None
                )
            principal = _principal_of(store, record) if record is not None else None
            if principal is None:
                raise Unauthorized(
                    "the session has ended or is unknown; sign in again with a token"
                )
            return principal

    def close_session(self, session_id: str) -> None:
        with self._store.lock:
            if self._store.sessions.pop(secret_hash(session_id), None) is not None:
                self._store.save()

    def _sweep_sessions(self) -> None:
        # Called when a session opens, so that abandoned sessions cost bounded memory.
        sessions = self._store.sessions
        now = self._store.clock()
        for sid in [s for s, v in sessions.items() if v.expires_at <= now]:
            del sessions[sid]

    # -- rights ----------------------------------------------------------------------------

    def allowed(
        self, principal: Principal, database: str, right: Right, table: str | None = None
    ) -> bool:
        """Whether `principal` holds `right` (`holds_right`) by the records as they are now."""
        if principal.is_admin:
            return True
        store = self._store
        version = store.version  # read before the records: a change since makes it stale
        key = (principal, database, right, table)
        verdicts = self._verdicts
        kept = verdicts.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        held = holds_right(store, principal, database, right, table)
        if len(verdicts) >= _VERDICTS_KEPT:
            verdicts.clear()
        verdicts[key] = (version, held)
        return held

    def check(
        self, principal: Principal, database: str, right: Right, table: str | None = None
    ) -> None:
        """Raise Forbidden (Unauthorized for anonymous) unless `principal` has `right`."""
        if not self.allowed(principal, database, right, table):
            raise refuse(principal, right, database, table)

    def may_replicate(self, principal: Principal) -> bool:
        """Whether `principal` holds the REPLICATION right (the admin always does)."""
        if principal.is_admin:
            return True
        store = self._store
        with store.lock:
            record = store.users.get(name_key(principal.name or ""))
            return bool(record and record.get(REPLICATION))

    def check_any(self, principal: Principal, database: str) -> None:
        """Raise Forbidden (Unauthorized for anonymous) unless `principal` holds a right in
        `database`; whether the database exists is not looked at, so the answer tells a
        caller without rights nothing about which databases there are."""
        if not holds_any_right(self._store, principal, database):
            raise refuse(principal, Right.READ, database)

    # -- user and grant statements -----------------------------------------------------------

    def execute(
        self,
        statement: ast.Statement,
        principal: Principal,
        database: str,
        *,
        database_exists: Callable[[str], bool] | None = None,
    ) -> Result:
        """Run a user or grant statement as `principal` in `database`.

        `database_exists` lets the caller have grants on unknown databases refused; without
        it any name is accepted. That a granted table exists is the caller's to check. The
        answer's `query` is left for the caller to fill in.
        """
        store = self._store
        with store.lock:
            try:
                return run_access_statement(store, statement, principal, database, database_exists)
            finally:
                # Also for a statement that failed half-way, before its save.
                store.version += 1

    def forget_database(self, name: str) -> None:
        """Drop every grant on a database that no longer exists."""
        store = self._store
        db = name_key(name)
        with store.lock:
            roles = [r for r in store.roles if r["db"] != db]
            tables = [t for t in store.tables if t["db"] != db]
            if len(roles) != len(store.roles) or len(tables) != len(store.tables):
                store.roles, store.tables = roles, tables
                store.save()

    def forget_table(self, database: str, table: str) -> None:
        """Drop table-level grants of a dropped table (so a new table of that name starts clean)."""
        store = self._store
        db, tb = name_key(database), name_key(table)
        with store.lock:
            tables = [t for t in store.tables if not (t["db"] == db and t["table"] == tb)]
            if len(tables) != len(store.tables):
                store.tables = tables
                store.save()


def _principal_of(store: AccessStore, token: dict) -> Principal | None:
    """Who a token's holder acts as, or None when its user is gone."""
    user = store.users.get(name_key(token["user"]))
    if user is None:
        return None
    return Principal(user["name"], bool(user.get("admin")), token.get(TOKEN_DATABASE))
