"""Server settings: `kdb.conf`, then `KDB_<KEY>` environment variables, then flags.

Each later source overrides the earlier ones, key by key. A key nobody knows, or a value of
the wrong kind, stops the start with a ConfigError that names it and where it came from:
a typo in a config file should never be silently ignored.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from refimpl.engine.event_streams import StreamOptions
from refimpl.engine.options import EngineOptions
from refimpl.errors import ConfigError

MB = 1024 * 1024
CONFIG_NAME = "kdb.conf"
ENV_PREFIX = "KDB_"


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings of one server process.

    | key                  | default      | meaning                                              |
    |----------------------|--------------|------------------------------------------------------|
    | data                 | ./kdb-data   | the data folder                                      |
    | host                 | 127.0.0.1    | address to listen on                                 |
    | port                 | 9000         | TCP port; 0 takes a free one                         |
    | threads              | 16           | worker threads answering requests                    |
    | wal_archive_mb       | 1024         | log kept for change readers, per database            |
    | max_body_mb          | 64           | largest request body accepted (413 above)            |
    | statement_timeout_ms | 30000        | a statement running longer is stopped                |
    | lock_timeout_ms      | 0            | a writer waiting longer for the database fails; 0: off |
    | idle_in_transaction_session_timeout_ms | 60000 | idle in BEGIN longer: ended; 0: off |
    | checkpoint_mb        | 8            | log written since the last checkpoint that makes one |
    | segment_mb           | 64           | size of one log file; at most wal_archive_mb / 4     |
    | fsync_delay_ms       | 0            | extra wait per fsync (benchmarks only)               |
    | dev                  | false        | no authentication, every request is admin            |
    | static               | (none)       | a folder served at /static/                          |
    | max_sql_bytes        | 1048576      | longest SQL text of one request (400 above)          |
    | max_connections      | 10000        | open connections at once (503 above)                 |
    | max_connections_per_address | 4096  | open connections from one client address (503 above) |
    | subscriptions_per_user | 2000       | live-query subscriptions one user keeps at once      |
    | copy_page_rows       | 10000        | rows of one initial-copy page of /api/changes (400)  |
    | sessions_per_user    | 100          | browser sessions one user keeps open at once         |
    | allowed_hosts        | (see below)  | Host names served, comma-separated; * for any        |
    | behind_tls           | false        | a TLS proxy serves us: the session cookie is Secure  |
    | stream_heartbeat_s   | 25           | seconds between an event stream's heartbeats         |
    | stream_max_age_s     | 1800         | an event stream ends after this many seconds         |
    | stream_replay_s      | 300          | a resume gets missed events this recent, else reset  |
    | stream_ticket_ttl_s  | 60           | a ticket of POST /stream/tickets expires after this  |
    | streams_per_token    | 3            | open event streams of one token (429 above)          |
    | streams_per_user     | 10           | open event streams of one user (429 above)           |
    | stream_capacity      | 1000         | open event streams on the server (503 above)         |
    | stream_buffer_kb     | 256          | events a stream holds for a slow reader at most      |
    | stream_compression   | off          | off, or deflate: streams sent compressed to clients  |
    | log_format           | text         | log lines on stderr: text, or json (one object each) |
    | pg_port              | (off)        | PostgreSQL protocol port; 0 takes a free one         |
    | pg_max_connections   | 100          | open PostgreSQL connections at once (53300 above)    |
    | pg_tls_cert          | (none)       | PEM certificate: the PostgreSQL port serves TLS      |
    | pg_tls_key           | (none)       | its PEM private key (none: in pg_tls_cert's file)    |
    | pg_login_timeout_s   | 10           | a PostgreSQL connection not logged in by then closes |
    | pg_max_unauthenticated_per_address | 16 | ones not yet logged in, from one address       |
    | pg_admin_reserved_connections | 3   | of pg_max_connections, kept for admins' logins       |
    | pg_max_replication_slots | 10       | logical replication slots of the data folder (53400) |
    | pg_max_wal_senders   | 10           | replication connections at once (53300 above)        |
    | import_folder        | import       | folder of the data folder COPY FROM 'file' reads     |
    | backup_folder        | backup       | folder of the data folder BACKUP DATABASE writes to  |
    | memory_mb            | 0            | limit on table data of all databases; 0: none        |
    | progress_after_s     | 1            | a start's recovery logs how far it is after this     |

    Unset, `allowed_hosts` is the listen host and the loopback names (localhost, 127.0.0.1,
    [::1]): a page of another site cannot reach the server through DNS rebinding.
    """

    data: Path = Path("kdb-data")
    host: str = "127.0.0.1"
    port: int = 9000
    threads: int = 16
    wal_archive_mb: int = 1024
    max_body_mb: int = 64
    statement_timeout_ms: int = 30000
    lock_timeout_ms: int = 0
    idle_in_transaction_session_timeout_ms: int = 60000
    checkpoint_mb: int = 8
    segment_mb: int = 64
    fsync_delay_ms: float = 0.0
    dev: bool = False
    static: Path | None = None
    max_sql_bytes: int = 1024 * 1024
    max_connections: int = 10_000
    max_connections_per_address: int = 4096
    subscriptions_per_user: int = 2000
    copy_page_rows: int = 10000
    sessions_per_user: int = 100
    allowed_hosts: tuple[str, ...] = ()  # empty: the listen host and the loopback names
    behind_tls: bool = False
    log_format: str = "text"
    pg_port: int | None = None  # None: the PostgreSQL protocol is not served
    pg_max_connections: int = 100
    pg_tls_cert: Path | None = None  # None: an SSLRequest is answered 'N'
    pg_tls_key: Path | None = None
    pg_login_timeout_s: float = 10.0
    pg_max_unauthenticated_per_address: int = 16
    pg_admin_reserved_connections: int = 3
    pg_max_replication_slots: int = 10
    pg_max_wal_senders: int = 10
    stream_heartbeat_s: float = 25.0
    stream_max_age_s: float = 1800.0
    stream_replay_s: float = 300.0
    stream_ticket_ttl_s: float = 60.0
    streams_per_token: int = 3
    streams_per_user: int = 10
    stream_capacity: int = 1000
    stream_buffer_kb: int = 256
    stream_compression: str = "off"
    import_folder: str = "import"
    backup_folder: str = "backup"
    memory_mb: int = 0
    progress_after_s: float = 1.0

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * MB


def _int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise ValueError("a whole number") from None
        if not low <= value <= high:
            raise ValueError(f"a whole number from {low} to {high}")
        return value

    return parse


def _float(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise ValueError("a number") from None
        if not low <= value <= high:  # also refuses nan
            raise ValueError(f"a number from {low} to {high}")
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("true or false")


def _text(text: str) -> str:
    if not text.strip():
        raise ValueError("not empty")
    return text.strip()


def _names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip().lower() for name in text.split(",") if name.strip())
    if not names:
        raise ValueError("one or more names, comma-separated (or *)")
    return names


def _log_format(text: str) -> str:
    lowered = text.strip().lower()
    if lowered not in ("text", "json"):
        raise ValueError("text or json")
    return lowered


def _stream_compression(text: str) -> str:
    lowered = text.strip().lower()
    if lowered not in ("off", "deflate"):
        raise ValueError("off or deflate")
    return lowered


def _folder_name(text: str) -> str:
    name = _text(text)
    if not name or name in (".", "..") or "/" in name or "\\" in name:
        raise ValueError("the name of one folder inside the data folder (no / or ..)")
    return name


def _path(text: str) -> Path:
    return Path(_text(text)).expanduser()


# How each key's text becomes its value: what the config file and the environment give.
_PARSERS: dict[str, Callable[[str], object]] = {
    "data": _path,
    "host": _text,
    "port": _int(0, 65535),
    "threads": _int(1, 1024),
    "wal_archive_mb": _int(4, 1 << 30),
    "max_body_mb": _int(1, 1 << 20),
    "statement_timeout_ms": _int(1, 24 * 3600 * 1000),
    "lock_timeout_ms": _int(0, 24 * 3600 * 1000),
    "idle_in_transaction_session_timeout_ms": _int(0, 24 * 3600 * 1000),
    "checkpoint_mb": _int(1, 1 << 30),
    "segment_mb": _int(1, 1 << 30),
    "fsync_delay_ms": _float(0.0, 10_000.0),
    "dev": _bool,
    "static": _path,
    "max_sql_bytes": _int(1024, 1 << 30),
    "max_connections": _int(1, 1_000_000),
    "max_connections_per_address": _int(1, 1_000_000),
    "subscriptions_per_user": _int(1, 1_000_000),
    "copy_page_rows": _int(1, 1_000_000),
    "sessions_per_user": _int(1, 1_000_000),
    "allowed_hosts": _names,
    "behind_tls": _bool,
    "log_format": _log_format,
    "pg_port": _int(0, 65535),
    "pg_max_connections": _int(1, 1_000_000),
    "pg_tls_cert": _path,
    "pg_tls_key": _path,
    "pg_login_timeout_s": _float(0.1, 3600.0),
    "pg_max_unauthenticated_per_address": _int(1, 1_000_000),
    "pg_admin_reserved_connections": _int(0, 1_000_000),
    "pg_max_replication_slots": _int(0, 1_000_000),
    "pg_max_wal_senders": _int(0, 1_000_000),
    "stream_heartbeat_s": _float(0.05, 3600.0),
    "stream_max_age_s": _float(0.5, 7 * 86400.0),
    "stream_replay_s": _float(0.0, 7 * 86400.0),
    "stream_ticket_ttl_s": _float(1.0, 3600.0),
    "streams_per_token": _int(1, 1_000_000),
    "streams_per_user": _int(1, 1_000_000),
    "stream_capacity": _int(1, 1_000_000),
    # A part of a stream is at most this, and the server drops a stream that leaves 1 MB
    # unsent: the buffer stays well under it.
    "stream_buffer_kb": _int(16, 512),
    "stream_compression": _stream_compression,
    "import_folder": _folder_name,
    "backup_folder": _folder_name,
    "memory_mb": _int(0, 1 << 30),
    "progress_after_s": _float(0.0, 3600.0),
}
KEYS = tuple(f.name for f in fields(Settings))
DEFAULTS = Settings()
assert set(KEYS) == set(_PARSERS)


def parse_config(text: str, source: str = CONFIG_NAME) -> dict[str, str]:
    """`key = value` lines; `#` starts a comment; blank lines are skipped."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        key = key.strip().lower()
        if not sep or not key:
            raise ConfigError(f"{source} line {number}: write `key = value`, not {raw.strip()!r}")
        if key not in _PARSERS:
            raise ConfigError(f"{source} line {number}: unknown setting '{key}'{_hint(key)}")
        values[key] = value.strip()
    return values


def _hint(key: str) -> str:
    """ "; did you mean 'x'?" for the known key closest to `key`, or a pointer to the list."""
    close = difflib.get_close_matches(key, KEYS, n=1)
    if close:
        return f"; did you mean '{close[0]}'?"
    return " (`refimpl settings` lists them all)"


def _convert(key: str, text: str, source: str) -> object:
    try:
        return _PARSERS[key](text)
    except ValueError as exc:
        raise ConfigError(f"setting '{key}' from {source} must be {exc}, not {text!r}") from None


def _from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, text in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in _PARSERS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"; did you mean {ENV_PREFIX}{close[0].upper()}?" if close else ""
            raise ConfigError(
                f"unknown environment setting {name}{hint} (`refimpl settings` lists them all)"
            )
        values[key] = text
    return values


def load_settings(
    flags: Mapping[str, object | None] | None = None,
    environ: Mapping[str, str] | None = None,
    config: Path | None = None,
) -> Settings:
    """Settings from the config file, the environment and `flags` (None means "not given").

    The config file is `config` when given (it must then exist), else `<data>/kdb.conf` when
    that exists, where data is what the environment or flags say, else the default.
    """
    return load_settings_and_sources(flags, environ, config)[0]


def load_settings_and_sources(
    flags: Mapping[str, object | None] | None = None,
    environ: Mapping[str, str] | None = None,
    config: Path | None = None,
) -> tuple[Settings, dict[str, str]]:
    """What `load_settings` gives, and where each key's value came from: `default`, the
    config file's path, the environment variable (`KDB_PORT`) or the flag (`--port`)."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    for key in flags:
        if key not in _PARSERS:
            raise ConfigError(f"unknown setting '{key}'{_hint(key)}")
    env = _from_environment(os.environ if environ is None else environ)

    merged: dict[str, object] = {}
    sources = dict.fromkeys(KEYS, "default")
    if config is None:
        data = flags.get("data")
        if data is None:
            data = _convert("data", env["data"], "KDB_DATA") if "data" in env else DEFAULTS.data
        candidate = Path(str(data)) / CONFIG_NAME
        config_text = _read(candidate) if candidate.is_file() else None
        config_source = str(candidate)
    else:
        config_text = _read(Path(config))
        config_source = str(config)
    if config_text is not None:
        for key, text in parse_config(config_text, config_source).items():
            merged[key] = _convert(key, text, config_source)
            sources[key] = config_source
    for key, text in env.items():
        merged[key] = _convert(key, text, ENV_PREFIX + key.upper())
        sources[key] = ENV_PREFIX + key.upper()
    for key, value in flags.items():
        # Flags arrive typed from argparse, or as text from callers that build them by hand.
        merged[key] = _convert(key, value, f"--{key}") if isinstance(value, str) else value
        sources[key] = "--" + key.replace("_", "-")
    if "segment_mb" not in merged:
        # Unset, the segment size follows a small archive down instead of refusing to start.
        archive = merged.get("wal_archive_mb", DEFAULTS.wal_archive_mb)
        assert isinstance(archive, int)
        merged["segment_mb"] = max(1, min(DEFAULTS.segment_mb, archive // 4))
        if "wal_archive_mb" in merged:
            sources["segment_mb"] = "default (at most wal_archive_mb / 4)"
    # Each value came through its field's parser (`_convert`) or is a default of its field.
    return _validated(Settings(**merged)), sources  # type: ignore[arg-type]


def _read(path: Path) -> str:
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc}") from None


def _validated(settings: Settings) -> Settings:
    for key in ("port", "threads", "max_body_mb", "segment_mb", "wal_archive_mb"):
        value = getattr(settings, key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"setting '{key}' must be a whole number, not {value!r}")
    # The archive is counted in whole segments; fewer than four would keep almost nothing.
    if settings.segment_mb * 4 > settings.wal_archive_mb:
        raise ConfigError(
            f"setting 'segment_mb' ({settings.segment_mb}) must be at most wal_archive_mb / 4"
            f" ({settings.wal_archive_mb // 4}); lower segment_mb or raise wal_archive_mb"
        )
    return settings


def engine_options(settings: Settings) -> EngineOptions:
    """What the engine takes of the settings, in its own units (bytes and seconds)."""
    return EngineOptions(
        wal_archive_bytes=settings.wal_archive_mb * MB,
        segment_bytes=settings.segment_mb * MB,
        checkpoint_bytes=settings.checkpoint_mb * MB,
        statement_timeout=settings.statement_timeout_ms / 1000,
        lock_timeout=settings.lock_timeout_ms / 1000,
        fsync_delay=settings.fsync_delay_ms / 1000,
        max_sql_bytes=settings.max_sql_bytes,
        subscriptions_per_user=settings.subscriptions_per_user,
        copy_page_rows=settings.copy_page_rows,
        sessions_per_user=settings.sessions_per_user,
        import_folder=settings.import_folder,
        backup_folder=settings.backup_folder,
        memory_bytes=settings.memory_mb * MB,
    )


def stream_options(settings: Settings) -> StreamOptions:
    """What the event streams take of the settings."""
    return StreamOptions(
        heartbeat_s=settings.stream_heartbeat_s,
        max_age_s=settings.stream_max_age_s,
        replay_s=settings.stream_replay_s,
        ticket_ttl_s=settings.stream_ticket_ttl_s,
        per_token=settings.streams_per_token,
        per_user=settings.streams_per_user,
        capacity=settings.stream_capacity,
        buffer_kb=settings.stream_buffer_kb,
        compression=settings.stream_compression,
    )
