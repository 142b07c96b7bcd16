"""Users, tokens, grants and rights checks: who may do what, with no HTTP in sight.

State lives in one JSON file (`access.json` in the data folder), rewritten atomically on every
change: a temporary file is written and fsync'd, renamed over the old one, and the folder is
fsync'd so that the rename itself survives a crash. Tokens are shown once, when created; the
file keeps only their SHA-256 hash and a short id (the token's first 12 characters) that finds
the record, so that the secret part is compared in constant time (`hmac.compare_digest`).
Tokens are never logged.

The rights model, in full:

- The user `admin` is ADMIN everywhere and cannot be dropped.
- Database roles: ADMIN implies WRITE implies READ.
- READ on a database reads every table of it, except a table that a `REVOKE SELECT ON t`
  names for that grantee: a table-level revoke beats a READ or WRITE role (not ADMIN: a
  database's administrator could grant the table back to themselves anyway).
- `GRANT SELECT ON t` reads table t alone (and lifts an earlier table-level revoke).
- Every principal, anonymous included, also has what was granted TO PUBLIC (nothing by
  default). A revoke for PUBLIC narrows only what PUBLIC gives, never a user's own grants.
- A request without credentials that lacks a right gets Unauthorized (send a token), not
  Forbidden: a token might have the right.

Names of users, databases and tables are compared case-insensitively (as the catalog does)
and kept as first written for display.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from refimpl.engine.result import Column, Result, message_result, query_result
from refimpl.errors import (
    Forbidden,
    InvalidValue,
    NotAllowed,
    SqlError,
    StorageError,
    Unauthorized,
    UserError,
)
from refimpl.sql import ast


class Right(StrEnum):
    """What an operation needs on a database (or, for READ, on a table)."""

    READ = "READ"
    WRITE = "WRITE"
    ADMIN = "ADMIN"


READ = Right.READ
WRITE = Right.WRITE
_RANK = {Right.READ: 1, Right.WRITE: 2, Right.ADMIN: 3}

ADMIN_USER = "admin"
TOKEN_PREFIX = "kdb_"
TOKEN_ID_LENGTH = 12  # prefix + 8 characters: enough to find a record, useless as a secret
SESSION_SECONDS = 12 * 3600
STATE_FILE = "access.json"
_FORMAT = 1

_DURATION = re.compile(r"^\s*([0-9]{1,9})\s*([smhd])\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request or an embedded session acts as. `name` None is anonymous."""

    name: str | None
    is_admin: bool = False

    def describe(self) -> str:
        return "anonymous requests" if self.name is None else f"user '{self.name}'"


ANONYMOUS = Principal(None, False)
ADMIN = Principal(ADMIN_USER, True)  # the principal; the right of that name is Right.ADMIN


def parse_duration(text: str) -> int:
    """'30d' -> seconds. Units s, m, h, d; a positive whole number before them."""
    match = _DURATION.match(text)
    if not match or int(match.group(1)) <= 0:
        raise InvalidValue(
            f"bad token lifetime '{text}'; write a positive whole number and a unit s, m, h"
            " or d, as in '30d'"
        )
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _key(name: str) -> str:
    return name.casefold()


@dataclass(slots=True)
class _Session:
    token_hash: str
    user_key: str
    expires_at: float


class AccessControl:
    """The users, tokens and grants of one data folder. Thread-safe.

    `clock` returns seconds since the epoch; tests pass their own.
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        # The data folder, or the file itself when the name ends in .json.
        path = Path(path)
        self._file = path if path.suffix == ".json" else path / STATE_FILE
        self._clock = clock
        self._lock = threading.RLock()
        self._sessions: dict[str, _Session] = {}
        # users: key -> {"name", "admin"}; tokens: id -> {"id", "user", "hash", "expires_at"};
        # roles: [grantee_key, database_key, role]; tables: [grantee_key, db_key, table_key,
        # "SELECT"|"DENY"] with display names kept alongside.
        self._users: dict[str, dict] = {}
        self._tokens: dict[str, dict] = {}
        self._roles: list[dict] = []
        self._tables: list[dict] = []
        self._load()

    # -- persistence -----------------------------------------------------------------------

    @property
    def file(self) -> Path:
        return self._file

    def _load(self) -> None:
        try:
            data = json.loads(self._file.read_text("utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise StorageError(f"the access file {self._file} cannot be read: {exc}") from exc
        self._users = {_key(u["name"]): u for u in data.get("users", [])}
        self._tokens = {t["id"]: t for t in data.get("tokens", [])}
        self._roles = list(data.get("roles", []))
        self._tables = list(data.get("tables", []))
        # Browser sessions are kept too: an EventSource reconnecting after a restart of the
        # server must still be let in by its cookie.
        self._sessions = {
            entry["id_hash"]: _Session(entry["token_hash"], entry["user"], entry["expires_at"])
            for entry in data.get("sessions", [])
        }

    def _save(self) -> None:
        data = {
            "format": _FORMAT,
            "users": list(self._users.values()),
            "tokens": list(self._tokens.values()),
            "roles": self._roles,
            "tables": self._tables,
            "sessions": [
                {
                    "id_hash": id_hash,
                    "token_hash": session.token_hash,
                    "user": session.user_key,
                    "expires_at": session.expires_at,
                }
                for id_hash, session in self._sessions.items()
            ],
        }
        text = json.dumps(data, indent=1, sort_keys=True)
        folder = self._file.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".access-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)  # hashes only, but nobody else needs to read them
            os.replace(tmp, self._file)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        # The rename is durable only once the folder entry is on disk.
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- users and tokens ------------------------------------------------------------------

    def ensure_admin(self) -> str | None:
        """On the first start: create user `admin` and a token for it, and return the token."""
        with self._lock:
            if _key(ADMIN_USER) in self._users:
                return None
            self._users[_key(ADMIN_USER)] = {"name": ADMIN_USER, "admin": True}
            token = self._new_token(ADMIN_USER, None)
            self._save()
            return token

    def user_names(self) -> list[str]:
        with self._lock:
            return sorted(u["name"] for u in self._users.values())

    def create_user(self, name: str) -> None:
        with self._lock:
            self._require_new_user(name)
            self._users[_key(name)] = {"name": name, "admin": False}
            self._save()

    def create_token(self, user: str, expires_in: str | None = None) -> str:
        with self._lock:
            record = self._user(user)
            lifetime = parse_duration(expires_in) if expires_in is not None else None
            token = self._new_token(record["name"], lifetime)
            self._save()
            return token

    def _new_token(self, user: str, lifetime: int | None) -> str:
        while True:
            token = TOKEN_PREFIX + secrets.token_urlsafe(32)
            token_id = token[:TOKEN_ID_LENGTH]
            if token_id not in self._tokens:
                break
        self._tokens[token_id] = {
            "id": token_id,
            "user": user,
            "hash": _hash(token),
            "created_at": round(self._clock(), 3),
            "expires_at": None if lifetime is None else round(self._clock() + lifetime, 3),
        }
        return token

    def _find_token(self, token: str) -> dict | None:
        record = self._tokens.get(token[:TOKEN_ID_LENGTH])
        if record is None or not hmac.compare_digest(record["hash"], _hash(token)):
            return None
        return record

    def _expired(self, record: dict) -> bool:
        expires = record.get("expires_at")
        return expires is not None and expires <= self._clock()

    def authenticate(self, token: str) -> Principal:
        """The principal a token stands for; Unauthorized when it is wrong, expired or revoked.

        Lock-free: every request calls it, and single dict reads are atomic; a token or user
        dropped at the same moment reads as not found.
        """
        record = self._find_token(token) if token else None
        if record is not None and not self._expired(record):
            user = self._users.get(_key(record["user"]))
            if user is not None:
                return Principal(user["name"], bool(user.get("admin")))
        raise Unauthorized(
            "the token is wrong, expired or revoked; ask an administrator for a new one"
        )

    def _principal(self, user: str) -> Principal:
        record = self._users[_key(user)]
        return Principal(record["name"], bool(record.get("admin")))

    def _drop_tokens(self, records: list[dict]) -> int:
        hashes = {r["hash"] for r in records}
        for record in records:
            del self._tokens[record["id"]]
        for sid in [s for s, v in self._sessions.items() if v.token_hash in hashes]:
            del self._sessions[sid]
        return len(records)

    # -- browser sessions ------------------------------------------------------------------

    def open_session(self, token: str) -> tuple[str, float]:
        """A session id standing for `token`, and when it ends (seconds since the epoch)."""
        with self._lock:
            self.authenticate(token)
            record = self._find_token(token)
            assert record is not None
            self._sweep_sessions()
            expires = self._clock() + SESSION_SECONDS
            if record.get("expires_at") is not None:
                expires = min(expires, record["expires_at"])
            session_id = secrets.token_urlsafe(32)
            session = _Session(record["hash"], _key(record["user"]), expires)
            self._sessions[_hash(session_id)] = session  # only a hash is kept, as for tokens
            self._save()
            return session_id, expires

    def principal_for_session(self, session_id: str) -> Principal:
        with self._lock:
            session = self._sessions.get(_hash(session_id))
            if session is None or session.expires_at <= self._clock():
                raise Unauthorized(
                    "the session has ended or is unknown; sign in again with a token"
                )
            return self._principal(session.user_key)

    def close_session(self, session_id: str) -> None:
        with self._lock:
            if self._sessions.pop(_hash(session_id), None) is not None:
                self._save()

    def _sweep_sessions(self) -> None:
        # Called when a session opens, so that abandoned sessions cost bounded memory.
        now = self._clock()
        for sid in [s for s, v in self._sessions.items() if v.expires_at <= now]:
            del self._sessions[sid]

    # -- rights ----------------------------------------------------------------------------

    def _grantees(self, principal: Principal) -> list[str]:
        keys = [_key(ast.PUBLIC)]
        if principal.name is not None:
            keys.insert(0, _key(principal.name))
        return keys

    def _role_rank(self, grantee: str, database: str) -> int:
        db = _key(database)
        ranks = [_RANK[r["role"]] for r in self._roles if r["grantee"] == grantee and r["db"] == db]
        return max(ranks, default=0)

    def _table_entry(self, grantee: str, database: str, table: str) -> str | None:
        db, tb = _key(database), _key(table)
        for entry in self._tables:
            if entry["grantee"] == grantee and entry["db"] == db and entry["table"] == tb:
                return entry["kind"]
        return None

    def _has(self, grantee: str, database: str, right: Right, table: str | None) -> bool:
        rank = self._role_rank(grantee, database)
        if right != Right.READ or table is None:
            return rank >= _RANK[right]
        if rank >= _RANK[Right.ADMIN]:
            return True
        entry = self._table_entry(grantee, database, table)
        if entry == "SELECT":
            return True
        return rank >= _RANK[Right.READ] and entry != "DENY"

    def allowed(
        self, principal: Principal, database: str, right: Right | str, table: str | None = None
    ) -> bool:
        right = Right(right)  # a ValueError for anything but READ, WRITE, ADMIN: a bug
        if principal.is_admin:
            return True
        with self._lock:
            return any(self._has(g, database, right, table) for g in self._grantees(principal))

    def check(
        self, principal: Principal, database: str, right: Right | str, table: str | None = None
    ) -> None:
        """Raise Forbidden (Unauthorized for anonymous) unless `principal` has `right`."""
        if self.allowed(principal, database, right, table):
            return
        right = Right(right)
        what = f"table '{table}' in database '{database}'" if table else f"database '{database}'"
        if principal.name is None:
            raise Unauthorized(f"anonymous requests lack {right} on {what}; send a token")
        raise Forbidden(f"{principal.describe()} lacks {right} on {what}")

    # -- user and grant statements -----------------------------------------------------------

    def execute(
        self,
        statement: ast.Statement,
        principal: Principal,
        database: str,
        *,
        database_exists: Callable[[str], bool] | None = None,
        table_exists: Callable[[str], bool] | None = None,
        query: str = "",
    ) -> Result:
        """Run a user or grant statement as `principal` in `database`.

        `database_exists` and `table_exists` (in the current database) let the caller have
        grants on unknown objects refused; without them any name is accepted.
        """
        query = ""
        with self._lock:
            match statement:
                case ast.CreateUser(name=name, if_not_exists=ine):
                    self.check(principal, database, Right.ADMIN)
                    if ine and _key(name) in self._users:
                        return message_result(query, f"user '{name}' already exists")
                    self._require_new_user(name)
                    self._users[_key(name)] = {"name": name, "admin": False}
                    self._save()
                    return message_result(query, f"user '{name}' created")
                case ast.DropUser(name=name, if_exists=ie):
                    self.check(principal, database, Right.ADMIN)
                    if _key(name) not in self._users and ie:
                        return message_result(query, f"user '{name}' does not exist")
                    record = self._user(name)
                    if record.get("admin"):
                        raise NotAllowed(f"user '{record['name']}' cannot be dropped")
                    self._require_manager(principal, record["name"])
                    self._drop_user(record["name"])
                    self._save()
                    return message_result(query, f"user '{record['name']}' dropped")
                case ast.CreateToken(user=user, expires_in=expires_in):
                    self.check(principal, database, Right.ADMIN)
                    record = self._user(user)
                    self._require_manager(principal, record["name"])
                    lifetime = parse_duration(expires_in) if expires_in is not None else None
                    token = self._new_token(record["name"], lifetime)
                    self._save()
                    return query_result(query, [Column("token", "STRING")], [(token,)])
                case ast.DropToken(token=token, user=user):
                    self.check(principal, database, Right.ADMIN)
                    if user is not None:
                        name = self._user(user)["name"]
                        records = [
                            t for t in self._tokens.values() if _key(t["user"]) == _key(name)
                        ]
                    else:
                        records = self._tokens_matching(token or "")
                    for record in records:
                        self._require_manager(principal, record["user"])
                    count = self._drop_tokens(records)
                    if count:
                        self._save()
                    return message_result(query, f"{count} token(s) dropped", count)
                case ast.GrantRole(role=role, database=db, grantee=grantee):
                    self._check_grant(principal, db, grantee, role, database_exists)
                    self._set_role(grantee, db, role, present=True)
                    self._save()
                    return message_result(
                        query, f"granted {role.upper()} on database '{db}' to '{grantee}'"
                    )
                case ast.RevokeRole(role=role, database=db, grantee=grantee):
                    self._check_grant(principal, db, grantee, role, database_exists)
                    self._set_role(grantee, db, role, present=False)
                    self._save()
                    return message_result(
                        query, f"revoked {role.upper()} on database '{db}' from '{grantee}'"
                    )
                case ast.GrantSelect(table=table, grantee=grantee):
                    self._check_table_grant(principal, database, table, grantee, table_exists)
                    self._set_table(grantee, database, table, "SELECT")
                    self._save()
                    return message_result(
                        query, f"granted SELECT on table '{table}' to '{grantee}'"
                    )
                case ast.RevokeSelect(table=table, grantee=grantee):
                    self._check_table_grant(principal, database, table, grantee, table_exists)
                    self._set_table(grantee, database, table, "DENY")
                    self._save()
                    return message_result(
                        query, f"revoked SELECT on table '{table}' from '{grantee}'"
                    )
                case ast.ShowUsers():
                    self.check(principal, database, Right.ADMIN)
                    rows = [
                        (u["name"], bool(u.get("admin")), self._live_tokens(u["name"]))
                        for u in sorted(self._users.values(), key=lambda u: _key(u["name"]))
                    ]
                    columns = [
                        Column("user", "STRING"),
                        Column("admin", "BOOLEAN"),
                        Column("tokens", "INT"),
                    ]
                    return query_result(query, columns, rows)
                case ast.ShowGrants(user=user):
                    return self._show_grants(principal, database, user, query)
        raise TypeError(f"not a user or grant statement: {type(statement).__name__}")

    def forget_database(self, name: str) -> None:
        """Drop every grant on a database that no longer exists."""
        db = _key(name)
        with self._lock:
            roles = [r for r in self._roles if r["db"] != db]
            tables = [t for t in self._tables if t["db"] != db]
            if len(roles) != len(self._roles) or len(tables) != len(self._tables):
                self._roles, self._tables = roles, tables
                self._save()

    def forget_table(self, database: str, table: str) -> None:
        """Drop table-level grants of a dropped table (so a new table of that name starts clean)."""
        db, tb = _key(database), _key(table)
        with self._lock:
            tables = [t for t in self._tables if not (t["db"] == db and t["table"] == tb)]
            if len(tables) != len(self._tables):
                self._tables = tables
                self._save()

    # -- helpers -----------------------------------------------------------------------------

    def _user(self, name: str) -> dict:
        record = self._users.get(_key(name))
        if record is None:
            raise UserError(f"user '{name}' does not exist")
        return record

    def _require_new_user(self, name: str) -> None:
        if _key(name) == _key(ast.PUBLIC):
            raise UserError("PUBLIC names every principal and cannot be a user's name")
        if _key(name) in self._users:
            raise UserError(f"user '{name}' already exists; use CREATE USER IF NOT EXISTS")

    def _require_grantee(self, grantee: str) -> None:
        if _key(grantee) != _key(ast.PUBLIC):
            self._user(grantee)

    def _require_manager(self, principal: Principal, user: str) -> None:
        """Acting for a user (tokens, dropping) needs ADMIN wherever that user has rights.

        Without this, an administrator of one database could mint a token for a user who
        administers another, and so gain rights they were never given.
        """
        if principal.is_admin:
            return
        if self._users[_key(user)].get("admin"):
            raise Forbidden(f"only user '{ADMIN_USER}' may manage user '{user}'")
        uk = _key(user)
        dbs = {r["db"] for r in self._roles if r["grantee"] == uk}
        dbs |= {t["db"] for t in self._tables if t["grantee"] == uk}
        for db in sorted(dbs):
            if not self.allowed(principal, db, Right.ADMIN):
                raise Forbidden(
                    f"{principal.describe()} lacks ADMIN on database '{db}', where user"
                    f" '{user}' has rights"
                )

    def _check_grant(
        self,
        principal: Principal,
        db: str,
        grantee: str,
        role: str,
        database_exists: Callable[[str], bool] | None,
    ) -> None:
        if role.upper() not in Right.__members__:
            raise SqlError(f"unknown right '{role}'; use READ, WRITE or ADMIN")
        if database_exists is not None and not database_exists(db):
            raise SqlError(f"database '{db}' does not exist")
        self.check(principal, db, Right.ADMIN)
        self._require_grantee(grantee)

    def _check_table_grant(
        self,
        principal: Principal,
        database: str,
        table: str,
        grantee: str,
        table_exists: Callable[[str], bool] | None,
    ) -> None:
        self.check(principal, database, Right.ADMIN)
        if table_exists is not None and not table_exists(table):
            raise SqlError(f"table '{table}' does not exist")
        self._require_grantee(grantee)

    def _display_grantee(self, grantee: str) -> str:
        if _key(grantee) == _key(ast.PUBLIC):
            return ast.PUBLIC
        return self._user(grantee)["name"]

    def _set_role(self, grantee: str, db: str, role: str, present: bool) -> None:
        gk, dk, role = _key(grantee), _key(db), role.upper()
        self._roles = [
            r
            for r in self._roles
            if not (r["grantee"] == gk and r["db"] == dk and r["role"] == role)
        ]
        if present:
            self._roles.append(
                {
                    "grantee": gk,
                    "grantee_name": self._display_grantee(grantee),
                    "db": dk,
                    "db_name": db,
                    "role": role,
                }
            )

    def _set_table(self, grantee: str, db: str, table: str, kind: str) -> None:
        gk, dk, tk = _key(grantee), _key(db), _key(table)
        self._tables = [
            t
            for t in self._tables
            if not (t["grantee"] == gk and t["db"] == dk and t["table"] == tk)
        ]
        self._tables.append(
            {
                "grantee": gk,
                "grantee_name": self._display_grantee(grantee),
                "db": dk,
                "db_name": db,
                "table": tk,
                "table_name": table,
                "kind": kind,
            }
        )

    def _drop_user(self, name: str) -> None:
        uk = _key(name)
        self._drop_tokens([t for t in self._tokens.values() if _key(t["user"]) == uk])
        self._roles = [r for r in self._roles if r["grantee"] != uk]
        self._tables = [t for t in self._tables if t["grantee"] != uk]
        del self._users[uk]

    def _tokens_matching(self, text: str) -> list[dict]:
        """A whole token, or a token's id (its first 12 characters)."""
        record = self._find_token(text)
        if record is not None:
            return [record]
        if len(text) == TOKEN_ID_LENGTH and text in self._tokens:
            return [self._tokens[text]]
        return []

    def _live_tokens(self, user: str) -> int:
        uk = _key(user)
        return sum(
            1 for t in self._tokens.values() if _key(t["user"]) == uk and not self._expired(t)
        )

    def _show_grants(self, principal: Principal, database: str, user: str, query: str) -> Result:
        is_self = principal.name is not None and _key(principal.name) == _key(user)
        if not is_self:
            self.check(principal, database, Right.ADMIN)
        gk = _key(user)
        if gk != _key(ast.PUBLIC):
            self._user(user)
        rows: list[tuple] = []
        if gk == _key(ADMIN_USER):
            rows.append((ADMIN_USER, Right.ADMIN.value, None, None))
        for r in sorted(self._roles, key=lambda r: (r["db"], _RANK[r["role"]])):
            if r["grantee"] == gk:
                rows.append((r["grantee_name"], r["role"], r["db_name"], None))
        for t in sorted(self._tables, key=lambda t: (t["db"], t["table"])):
            if t["grantee"] == gk:
                right = "SELECT" if t["kind"] == "SELECT" else "REVOKED SELECT"
                rows.append((t["grantee_name"], right, t["db_name"], t["table_name"]))
        columns = [
            Column("grantee", "STRING"),
            Column("right", "STRING"),
            Column("database", "STRING"),
            Column("table", "STRING"),
        ]
        return query_result(query, columns, rows)
