"""`refimpl sql`'s arguments and start: where it runs (a data folder, a server's HTTP API or
its PostgreSQL port), the token (a flag, a file or `REFIMPL_TOKEN`, so that it need not sit
in the shell's history), and what it runs (`-c`, `-f`, piped input or the terminal).

Importing this module is cheap: the shell itself is imported only when it runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

TOKEN_VARIABLE = "REFIMPL_TOKEN"  # not KDB_*: those name the server's settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `refimpl sql`."""
    parser.add_argument("--data", type=Path, help="data folder (default ./kdb-data)")
    parser.add_argument("--url", help="a server's base URL instead of a data folder")
    parser.add_argument(
        "--pg",
        metavar="HOST:PORT",
        help="a server's PostgreSQL port instead (its transactions are the server's own;"
        " needs pip install 'refimpl[pg]')",
    )
    parser.add_argument("--user", default="admin", help="the user of --pg (default admin)")
    parser.add_argument(
        "--token",
        help=f"the token for --url or --pg (none for a --dev server); ${TOKEN_VARIABLE}"
        " or --token-file keep it out of the shell's history",
    )
    parser.add_argument("--token-file", type=Path, help="a file whose first line is the token")
    parser.add_argument("--db", default="demo", help="database (default demo)")
    parser.add_argument("-c", "--command", dest="sql", help="run this SQL and exit")
    parser.add_argument(
        "-f", "--file", type=Path, help="run the SQL of this file and exit ('-': standard input)"
    )
    parser.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="how answers are shown (default table; \\format changes it)",
    )


def token_of(options: argparse.Namespace) -> str | None:
    """--token, else the first line of --token-file, else $REFIMPL_TOKEN, else None."""
    from refimpl.shell.statements import ShellError

    if options.token:
        return str(options.token)
    if options.token_file is not None:
        try:
            lines = options.token_file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ShellError(
                f"cannot read --token-file {options.token_file}: {exc.strerror}"
            ) from None
        if not lines or not lines[0].strip():
            raise ShellError(f"--token-file {options.token_file} is empty; put the token in it")
        return lines[0].strip()
    return os.environ.get(TOKEN_VARIABLE) or None


def run(options: argparse.Namespace) -> int:
    """`refimpl sql`: the exit status (1 when a statement failed, 2 for wrong flags)."""
    from refimpl.shell.backends import Backend, LocalBackend, RemoteBackend
    from refimpl.shell.repl import ShellOptions, history_file, run_shell
    from refimpl.shell.statements import ShellError

    places = [flag for flag in ("data", "url", "pg") if getattr(options, flag) is not None]
    if len(places) > 1:
        return _refuse(f"give one of --data, --url and --pg, not {' and '.join(places)}")
    if options.sql is not None and options.file is not None:
        return _refuse("give -c SQL or -f FILE, not both")
    try:
        backend: Backend
        if options.pg is not None:
            from refimpl.shell.pg import PgBackend

            backend = PgBackend(options.pg, options.user, token_of(options), options.db)
        elif options.url is not None:
            backend = RemoteBackend(options.url, token_of(options), options.db)
        else:
            backend = LocalBackend(options.data or Path("kdb-data"), options.db)
    except ShellError as error:
        return _refuse(error.message)
    where = options.pg or options.url or str((options.data or Path("kdb-data")).resolve())
    try:
        shell_options = ShellOptions(output_format=options.format, history=history_file(where))
        return run_shell(backend, options.sql, shell_options, options.file)
    finally:
        backend.close()


def _refuse(message: str) -> int:
    print(f"refimpl sql: {message}", file=sys.stderr)
    return 2
