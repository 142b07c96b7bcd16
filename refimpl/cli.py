"""The `refimpl` command: serve, settings, sql, check, import, backup, restore, conform,
sqllogictest."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from refimpl.commands.progress import ProgressView
from refimpl.commands.settings_view import (
    add_setting_flags,
    every_setting,
    flags_of,
    settings_report,
    unknown_flag_hint,
)
from refimpl.errors import ConfigError, KdbError
from refimpl.log_format import configure as configure_logging
from refimpl.settings import (
    Settings,
    engine_options,
    load_settings,
    load_settings_and_sources,
    stream_options,
)

if TYPE_CHECKING:
    import ssl

ADMIN_TOKEN_FILE = "admin.token"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "conform":
        # The suite runner owns its own options; hand them over untouched.
        from conformance.cli import main as conform_main

        return int(conform_main(args[1:]) or 0)
    if args and args[0] == "sqllogictest":
        from refimpl.sqllogictest.cli import main as sqllogictest_main

        return sqllogictest_main(args[1:])
    if args and args[0] == "supervise":
        from refimpl.commands.supervise import main as supervise_main

        return supervise_main(args[1:])
    parser = _parser()
    options, extras = parser.parse_known_args(args)
    if extras:
        hint = unknown_flag_hint(extras) if options.command in ("serve", "settings") else ""
        parser.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
    if options.command is None:
        parser.print_help()
        return 2
    try:
        return int(options.run(options))
    except ConfigError as exc:
        print(f"refimpl: {exc.message}", file=sys.stderr)
        return 2
    except KdbError as exc:
        print(f"refimpl: {exc.message}", file=sys.stderr)
        return 1


def _version() -> str:
    from conformance.cli import package_version, shipped_spec_version

    return f"refimpl {package_version()} (spec {shipped_spec_version()})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refimpl",
        description="A SQL time-series database's change features: server, shell and checks.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the HTTP server",
        description="Run the HTTP server (and the PostgreSQL protocol's, with --pg-port).",
        epilog=every_setting(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_setting_flags(serve)
    serve.add_argument(
        "--sample",
        action="store_true",
        help="create the database 'sample' (minute candles in ochl_minutes) if missing",
    )
    serve.set_defaults(run=_serve)

    shown = commands.add_parser(
        "settings",
        help="every setting's value and where it came from (flags as serve takes them)",
        description="Every setting of `refimpl serve` with the same flags, environment and"
        " kdb.conf: its value, and where it came from (default, the config file, a KDB_"
        " variable or a flag). Exit status 2 when `serve` would refuse them.",
    )
    add_setting_flags(shown)
    shown.set_defaults(run=_settings)

    from refimpl.shell.main import add_arguments as add_shell_arguments

    sql = commands.add_parser(
        "sql", help="an SQL shell on a data folder, a server or a server's PostgreSQL port"
    )
    add_shell_arguments(sql)
    sql.set_defaults(run=_sql)

    check = commands.add_parser("check", help="check a data folder for damage (read-only)")
    check.add_argument("--data", type=Path, default=Path("kdb-data"), help="data folder")
    check.add_argument(
        "--cut-damaged-log",
        action="store_true",
        help="move each damaged log end aside into <db>/damaged/ (losing the LSNs the check"
        " names) so that the server starts again; only with the server stopped",
    )
    check.set_defaults(run=_check)

    load = commands.add_parser("import", help="import a CSV file into a table (POST /imp)")
    load.add_argument("file", type=Path, help="the CSV file; its header names the columns")
    load.add_argument("--table", required=True, help="the table to import into")
    load.add_argument("--data", type=Path, help="data folder (default ./kdb-data)")
    load.add_argument("--url", help="a server's base URL instead of a data folder")
    load.add_argument("--token", help="the token for --url (none for a --dev server)")
    load.add_argument("--db", default="demo", help="database (default demo)")
    load.set_defaults(run=_import)

    backup = commands.add_parser(
        "backup", help="copy a data folder's databases at one LSN each (a server may run)"
    )
    backup.add_argument("--data", type=Path, default=Path("kdb-data"), help="data folder")
    backup.add_argument(
        "--to", type=Path, required=True, dest="dest", help="a new or empty folder for the backup"
    )
    backup.set_defaults(run=_backup)

    restore = commands.add_parser(
        "restore", help="bring a backup back into a new or empty data folder (a new timeline)"
    )
    restore.add_argument(
        "--from", type=Path, required=True, dest="source", help="the backup's folder"
    )
    restore.add_argument(
        "--data", type=Path, required=True, help="a new or empty data folder, used by no server"
    )
    restore.set_defaults(run=_restore)

    commands.add_parser("conform", help="run the conformance suite (see `conform --help`)")
    commands.add_parser(
        "sqllogictest", help="run sqllogictest scripts against a server (see its --help)"
    )
    return parser


# --- serve --------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def write_admin_token(folder: Path, token: str) -> Path:
    path = folder / ADMIN_TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
        out.flush()
        os.fsync(out.fileno())
    os.chmod(path, 0o600)  # also when the file existed with looser rights
    return path


def _serve(options: argparse.Namespace) -> int:
    from conformance.cli import shipped_spec_version
    from refimpl import native_memory
    from refimpl.engine.instance import Instance
    from refimpl.engine.replication.lag import SlotLags
    from refimpl.http.app import App, AppOptions
    from refimpl.http.serving.limits import ConnectionLimits
    from refimpl.http.serving.run import serve
    from refimpl.sql.parser import warm_up

    # Before any thread of the server exists: the arenas a thread gets are fixed then.
    native_memory.bound_arenas()
    native_memory.fix_mmap_threshold()  # large blocks freed leave the heap: short trims
    settings = load_settings(flags_of(options), config=options.config)
    pg_tls = _check_settings(settings)
    _check_ports(settings)
    configure_logging(settings.log_format)
    settings.data.mkdir(parents=True, exist_ok=True)
    # Threads switch every 0.5 ms instead of 5: a bulk import must not keep /api/rev or a
    # point SELECT waiting for the GIL for milliseconds.
    sys.setswitchinterval(0.0005)
    warm_up()
    # A long recovery says how far it has come (after a second, every second) in the log.
    recovery = ProgressView(
        line=logging.getLogger("refimpl.recovery").info, after=settings.progress_after_s
    )
    instance = Instance.open(settings.data, engine_options(settings), progress=recovery)
    instance.slots.limit = settings.pg_max_replication_slots  # SQL's slots count too
    try:
        if options.sample:
            from refimpl.sample import ensure_sample

            ensure_sample(instance)
        token = instance.access.ensure_admin()
        if token is not None:
            path = write_admin_token(settings.data, token)
            print(f"admin token: {token}", flush=True)
            print(f"(kept in {path}, readable by you alone)", flush=True)
        app = App(
            instance,
            AppOptions(
                dev=settings.dev,
                max_body_bytes=settings.max_body_bytes,
                static=settings.static,
                threads=settings.threads,
                allowed_hosts=settings.allowed_hosts or _served_names(settings.host),
                behind_tls=settings.behind_tls,
                streams=stream_options(settings),
            ),
        )
    except BaseException:
        instance.close()
        raise
    if settings.dev:
        print("warning: --dev: no authentication, every request acts as admin", flush=True)
    # What exists now (the parser's tables, the grammar, loaded tables) lives as long as the
    # server: kept out of the collector's full passes, which otherwise stop every request
    # for tens of milliseconds to look at it again.
    gc.collect()
    gc.freeze()
    # The young generation is gone over once 50,000 objects were made, not 700 (a request
    # makes hundreds: the default ran a pass every request or two), and each older one 20
    # times rarer than the one before: a full pass every 20,000,000 new objects. The
    # collector's own brake (a full pass waits until a quarter of the old objects are new)
    # counts objects, not their size, so a table's index, one dict of a million rows,
    # barely counts: with Python's defaults a bulk import of 1,000,000 rows made 22 full
    # passes of up to a second each, the interpreter lock held.
    gc.set_threshold(50_000, 20, 20)

    try:
        pg_server = _start_pg(settings, instance, pg_tls)
    except BaseException:
        instance.close()
        raise
    if pg_server is not None:
        app.metrics.read_pg(pg_server.measures)
        app.metrics.read_slots(SlotLags(instance).read)
    app.metrics.describe_build(shipped_spec_version())

    def listening(host: str, port: int) -> None:
        print(f"listening on http://{host}:{port}", flush=True)

    # Memory a finished or refused request freed goes back to the system within seconds.
    trimmer = native_memory.Trimmer()
    trimmer.start()

    def stopped() -> None:
        if pg_server is not None:
            pg_server.stop()  # its running statements finish first
        instance.close()
        trimmer.close()
        print("stopped; everything acknowledged is on disk", flush=True)

    # At the signal, before running requests are awaited: the engine answers waiting readers
    # with what they have and ends open streams (which would otherwise hold their workers).
    limits = ConnectionLimits(settings.max_connections, settings.max_connections_per_address)
    return serve(
        app,
        settings.host,
        settings.port,
        settings.threads,
        listening,
        stopped,
        app.begin_shutdown,
        limits,
        settings.max_body_bytes,
        app.request_log,
    )


def _check_settings(settings: Settings) -> ssl.SSLContext | None:
    """Refuse settings that cannot work together (before anything is created); the TLS
    context of the PostgreSQL port, loaded (None: no TLS)."""
    if settings.dev and not _is_loopback(settings.host):
        raise ConfigError(
            f"--dev turns authentication off and may only listen on a loopback address,"
            f" not {settings.host}"
        )
    if settings.static is not None and not settings.static.is_dir():
        raise ConfigError(f"static folder {settings.static} does not exist")
    if settings.static is not None:
        _refuse_static_near_data(settings.static, settings.data)
    if settings.pg_port is None:
        return None  # the TLS settings are the PostgreSQL port's
    if settings.pg_tls_cert is None:
        if settings.pg_tls_key is not None:
            raise ConfigError("pg_tls_key is given without pg_tls_cert; give the certificate too")
        return None
    from refimpl.pgwire import tls

    return tls.server_context(settings.pg_tls_cert, settings.pg_tls_key)


def _check_ports(settings: Settings) -> None:
    """A port in use stops the start before anything is created (data folder, admin token)."""
    from refimpl.http.serving.run import check_port_free

    if settings.pg_port is not None and settings.pg_port == settings.port != 0:
        raise ConfigError(
            f"port and pg_port are both {settings.port}; give the PostgreSQL protocol a port"
            " of its own"
        )
    check_port_free(settings.host, settings.port, "port")
    if settings.pg_port is not None:
        check_port_free(settings.host, settings.pg_port, "pg_port", "serve the PostgreSQL protocol")


def _settings(options: argparse.Namespace) -> int:
    settings, sources = load_settings_and_sources(flags_of(options), config=options.config)
    _check_settings(settings)  # as serve would: exit status 2 where it would refuse them
    print(settings_report(settings, sources))
    return 0


def _refuse_static_near_data(static: Path, data: Path) -> None:
    """Anyone may read the static folder: it must share nothing with the data folder, which
    holds the admin token, the access file and the log."""
    served, kept = static.resolve(), data.resolve()
    if served == kept:
        where = "is"
    elif served.is_relative_to(kept):
        where = "lies inside"
    elif kept.is_relative_to(served):
        where = "contains"
    else:
        return
    raise ConfigError(
        f"static folder {static} {where} the data folder {data}, and would serve its files"
        " (the admin token among them) to anyone; serve a folder apart from the data folder"
    )


def _start_pg(settings: Any, instance: Any, context: ssl.SSLContext | None) -> Any:
    """The PostgreSQL protocol's server when `pg_port` is set, started (serving TLS with
    `context`); else None."""
    if settings.pg_port is None:
        return None
    from refimpl.netlimits import ConnectionLimits
    from refimpl.pgwire.link import LinkOptions
    from refimpl.pgwire.serving import PgOptions, PgServer

    limit = settings.pg_max_connections
    try:
        server = PgServer(
            instance,
            PgOptions(
                settings.host,
                settings.pg_port,
                settings.threads,
                ConnectionLimits(
                    limit,
                    limit,
                    "pg_max_connections",
                    "pg_max_connections",
                    settings.pg_admin_reserved_connections,
                    "pg_admin_reserved_connections",
                ),
                LinkOptions(
                    settings.dev,
                    settings.max_body_bytes,
                    tls=context is not None,
                    max_replication_slots=settings.pg_max_replication_slots,
                    max_wal_senders=settings.pg_max_wal_senders,
                    idle_in_transaction_session_timeout_ms=(
                        settings.idle_in_transaction_session_timeout_ms
                    ),
                ),
                tls=context,
                login_timeout_s=settings.pg_login_timeout_s,
                unauthenticated_per_address=settings.pg_max_unauthenticated_per_address,
            ),
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot serve the PostgreSQL protocol on {settings.host}:{settings.pg_port}:"
            f" {exc.strerror or exc}; choose another pg_port (0 takes a free one)"
        ) from None
    server.start()
    host, port = server.address
    shown = f"[{host}]" if ":" in host else host
    print(f"postgres on {shown}:{port}", flush=True)
    return server


def _served_names(host: str) -> tuple[str, ...]:
    """The Host names a server answers by default: where it listens, and loopback."""
    return tuple(dict.fromkeys([host.lower(), "localhost", "127.0.0.1", "[::1]", "::1"]))


# --- sql, check -----------------------------------------------------------------------------


def _sql(options: argparse.Namespace) -> int:
    from refimpl.shell.main import run

    return run(options)


def _check(options: argparse.Namespace) -> int:
    from refimpl.engine.instance import check_data, cut_damaged_logs

    if options.cut_damaged_log:
        report, ok = cut_damaged_logs(options.data)
        print(report)
        if not ok:
            return 1
    with _progress_view() as view:
        report, ok = check_data(options.data, progress=view)
    print(report)
    return 0 if ok else 1


def _backup(options: argparse.Namespace) -> int:
    from refimpl.commands.backup import backup_data_folder

    print(backup_data_folder(options.data, options.dest))
    return 0


def _restore(options: argparse.Namespace) -> int:
    from refimpl.commands.backup import restore_data_folder

    print(restore_data_folder(options.source, options.data))
    return 0


def _progress_view(after: float = 1.0) -> ProgressView:
    """A bar on a terminal (stderr), lines on stderr otherwise, once `after` seconds pass."""
    if sys.stderr.isatty():
        from rich.console import Console

        return ProgressView(terminal=Console(stderr=True), after=after)
    return ProgressView(line=lambda text: print(text, file=sys.stderr, flush=True), after=after)


def _import(options: argparse.Namespace) -> int:
    from refimpl.commands.importing import import_to_folder, import_to_server

    if options.url is not None and options.data is not None:
        raise ConfigError("give --data DIR (a data folder) or --url URL (a server), not both")
    # A bar from the start on a terminal; quiet otherwise (a script reads the last line).
    view = _progress_view(after=0.0) if sys.stderr.isatty() else ProgressView()
    with view:
        if options.url is not None:
            answer = import_to_server(
                options.file, options.table, options.url, options.token, options.db, view
            )
        else:
            data = options.data or Path("kdb-data")
            answer = import_to_folder(options.file, options.table, data, options.db, view)
    print(f"{answer.get('message', '')} into table '{options.table}'")
    return 0
