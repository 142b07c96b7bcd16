"""The `refimpl` command: serve, sql, check, conform."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refimpl.errors import ConfigError, KdbError
from refimpl.settings import engine_options, load_settings

ADMIN_TOKEN_FILE = "admin.token"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "conform":
        # The suite runner owns its own options; hand them over untouched.
        from conformance.cli import main as conform_main

        return int(conform_main(args[1:]) or 0)
    parser = _parser()
    options = parser.parse_args(args)
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

    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--data", type=Path, help="data folder (default ./kdb-data)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="TCP port, 0 for a free one (default 9000)")
    serve.add_argument("--threads", type=int, help="worker threads (default 16)")
    serve.add_argument("--config", type=Path, help="config file (default DATA/kdb.conf)")
    serve.add_argument(
        "--dev",
        action="store_true",
        default=None,
        help="no authentication, every request acts as admin (loopback hosts only)",
    )
    serve.add_argument("--static", type=Path, help="a folder to serve at /static/")
    serve.add_argument(
        "--sample",
        action="store_true",
        help="create the database 'sample' (minute candles in ochl_minutes) if missing",
    )
    serve.set_defaults(run=_serve)

    sql = commands.add_parser("sql", help="an SQL shell on the embedded engine")
    sql.add_argument("--data", type=Path, default=Path("kdb-data"), help="data folder")
    sql.add_argument("--db", default="demo", help="database (default demo)")
    sql.add_argument("-c", "--command", dest="sql", help="run this SQL and exit")
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

    commands.add_parser("conform", help="run the conformance suite (see `conform --help`)")
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
    from refimpl.engine.instance import Instance
    from refimpl.http.app import App, AppOptions
    from refimpl.http.serving.server import ConnectionLimits, serve
    from refimpl.sql.parser import warm_up

    flags = {
        "data": options.data,
        "host": options.host,
        "port": options.port,
        "threads": options.threads,
        "dev": options.dev,
        "static": options.static,
    }
    settings = load_settings(flags, config=options.config)
    if settings.dev and not _is_loopback(settings.host):
        raise ConfigError(
            f"--dev turns authentication off and may only listen on a loopback address,"
            f" not {settings.host}"
        )
    if settings.static is not None and not settings.static.is_dir():
        raise ConfigError(f"static folder {settings.static} does not exist")
    if settings.static is not None:
        _refuse_static_near_data(settings.static, settings.data)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    settings.data.mkdir(parents=True, exist_ok=True)
    # Threads switch every 0.5 ms instead of 5: a bulk import must not keep /api/rev or a
    # point SELECT waiting for the GIL for milliseconds.
    sys.setswitchinterval(0.0005)
    warm_up()
    instance = Instance.open(settings.data, engine_options(settings))
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

    def listening(host: str, port: int) -> None:
        print(f"listening on http://{host}:{port}", flush=True)

    def stopped() -> None:
        instance.close()
        print("stopped; everything acknowledged is on disk", flush=True)

    # At the signal, before running requests are awaited: the engine answers waiting readers
    # with what they have and ends open streams (which would otherwise hold their workers).
    limits = ConnectionLimits(settings.max_connections, settings.max_connections_per_address)
    return serve(
        app, settings.host, settings.port, settings.threads, listening, stopped,
        app.begin_shutdown, limits, settings.max_body_bytes,
    )


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


def _served_names(host: str) -> tuple[str, ...]:
    """The Host names a server answers by default: where it listens, and loopback."""
    return tuple(dict.fromkeys([host.lower(), "localhost", "127.0.0.1", "[::1]", "::1"]))


# --- sql, check -----------------------------------------------------------------------------


def _sql(options: argparse.Namespace) -> int:
    from refimpl.engine.access import ADMIN
    from refimpl.engine.instance import Instance
    from refimpl.engine.options import EngineOptions

    instance = Instance.open(options.data, EngineOptions())
    try:
        session = instance.session(database=options.db, principal=ADMIN)
        try:
            if options.sql is not None:
                return 0 if _run_sql(session, options.sql) else 1
            return _interactive(session, options.db)
        finally:
            session.close()
    finally:
        instance.close()


def _run_sql(session: Any, text: str) -> bool:
    """Run a text, print its answer like psql; False when it failed."""
    try:
        result = session.execute(text, ())
    except KdbError as exc:
        where = ""
        line = getattr(exc, "line", None)
        if line is not None and f"line {line}" not in exc.message:
            where = f" (line {line}, column {getattr(exc, 'column', '?')})"
        print(f"ERROR: {exc.message}{where}", file=sys.stderr)
        return False
    print(format_result(result))
    return True


def _interactive(session: Any, database: str) -> int:
    try:
        import readline  # noqa: F401  - line editing and history for input()
    except ImportError:
        pass
    print(f"refimpl SQL shell on database '{database}'. End statements with ;  \\q quits.")
    lines: list[str] = []
    while True:
        try:
            line = input(f"{database}=> " if not lines else f"{database}-> ")
        except EOFError:
            print()
            return 0
        except KeyboardInterrupt:
            print()
            lines = []  # as psql: Ctrl-C drops the statement being typed
            continue
        if not lines and line.strip() in ("\\q", "quit", "exit"):
            return 0
        lines.append(line)
        text = "\n".join(lines)
        if text.rstrip().endswith(";"):
            lines = []
            if text.strip(" ;\n"):
                _run_sql(session, text)


def format_result(result: Any) -> str:
    """A psql-like table for a query, the message for anything else."""
    from refimpl.engine.storage import values

    if result.columns is None:
        return result.message or ""
    names = [c.name for c in result.columns]
    types = [c.type for c in result.columns]
    cells = [[values.to_text(v, t) for v, t in zip(row, types, strict=True)] for row in result.rows]
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    right = [t in ("INT", "BIGINT", "DOUBLE") for t in types]
    out = [(" " + " | ".join(n.center(w) for n, w in zip(names, widths, strict=True))).rstrip()]
    out.append("-" + "-+-".join("-" * w for w in widths) + "-")
    for row in cells:
        out.append(
            " "
            + " | ".join(
                c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
            ).rstrip()
        )
    count = len(result.rows)
    out.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(out)


def _check(options: argparse.Namespace) -> int:
    from refimpl.engine.instance import check_data, cut_damaged_logs

    if options.cut_damaged_log:
        report, ok = cut_damaged_logs(options.data)
        print(report)
        if not ok:
            return 1
    report, ok = check_data(options.data)
    print(report)
    return 0 if ok else 1
