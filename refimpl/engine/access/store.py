"""The persisted users, tokens, grants and browser sessions of one data folder.

State lives in one JSON file (`access.json` in the data folder), rewritten atomically on every
change: a temporary file is written and fsync'd, renamed over the old one, and the folder is
fsync'd so that the rename itself survives a crash. Tokens are shown once, when created; the
file keeps only their SHA-256 hash and a short id (the token's first 12 characters) that finds
the record, so that the secret part is compared in constant time (`hmac.compare_digest`).
Tokens are never logged.

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
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine.rights import Principal
from refimpl.errors import InvalidValue, StorageError, UserError
from refimpl.sql import ast

TOKEN_PREFIX = "kdb_"
TOKEN_ID_LENGTH = 12  # prefix + 8 characters: enough to find a record, useless as a secret
STATE_FILE = "access.json"
_FORMAT = 1

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


class AccessStore:
    """The records, the lock that guards them, and the file they are saved to.

    Callers hold `lock` around every change and call `save()` after it.
    """

    def __init__(self, file: Path, clock: Callable[[], float]) -> None:
        self.file = file
        self.clock = clock
        self.lock = threading.RLock()
        # users: key -> {"name", "admin"}; tokens: id -> {"id", "user", "hash", "expires_at"};
        # roles: [grantee_key, database_key, role]; tables: [grantee_key, db_key, table_key,
        # "SELECT"|"DENY"] with display names kept alongside.
        self.users: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.roles: list[dict] = []
        self.tables: list[dict] = []
        self.sessions: dict[str, BrowserSession] = {}
        self._load()

    # -- the file --------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            data = json.loads(self.file.read_text("utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            raise StorageError(f"the access file {self.file} cannot be read: {exc}") from exc
        self.users = {name_key(u["name"]): u for u in data.get("users", [])}
        self.tokens = {t["id"]: t for t in data.get("tokens", [])}
        self.roles = list(data.get("roles", []))
        self.tables = list(data.get("tables", []))
        # Browser sessions are kept too: an EventSource reconnecting after a restart of the
        # server must still be let in by its cookie.
        self.sessions = {
            entry["id_hash"]: BrowserSession(
                entry["token_hash"], entry["user"], entry["expires_at"]
            )
            for entry in data.get("sessions", [])
        }

    def save(self) -> None:
        data = {
            "format": _FORMAT,
            "users": list(self.users.values()),
            "tokens": list(self.tokens.values()),
            "roles": self.roles,
            "tables": self.tables,
            "sessions": [
                {
                    "id_hash": id_hash,
                    "token_hash": session.token_hash,
                    "user": session.user_key,
                    "expires_at": session.expires_at,
                }
                for id_hash, session in self.sessions.items()
            ],
        }
        text = json.dumps(data, indent=1, sort_keys=True)
        folder = self.file.parent
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".access-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o600)  # hashes only, but nobody else needs to read them
            os.replace(tmp, self.file)
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

    # -- users -----------------------------------------------------------------------------

    def user(self, name: str) -> dict:
        record = self.users.get(name_key(name))
        if record is None:
            raise UserError(f"user '{name}' does not exist")
        return record

    def principal(self, user: str) -> Principal:
        record = self.users[name_key(user)]
        return Principal(record["name"], bool(record.get("admin")))

    def add_user(self, name: str, admin: bool = False) -> None:
        if name_key(name) == PUBLIC_KEY:
            raise UserError("PUBLIC names every principal and cannot be a user's name")
        if name_key(name) in self.users:
            raise UserError(f"user '{name}' already exists; use CREATE USER IF NOT EXISTS")
        self.users[name_key(name)] = {"name": name, "admin": admin}

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
        for sid in [s for s, v in self.sessions.items() if v.token_hash in hashes]:
            del self.sessions[sid]
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
