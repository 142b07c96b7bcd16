"""The shell's loop: statements and backslash commands, typed, piped or given with `-c`.

Typed (a terminal): prompt-toolkit edits the statement, which may run over several lines and
ends at a `;` (Enter before that starts a new line); history is kept in a file across runs
(Up recalls whole statements); Tab completes keywords, tables and columns. Piped: the whole
input runs as one script. Each statement of a text runs in turn and shows its answer; the
first error stops the text. A transaction stays open from BEGIN to COMMIT or ROLLBACK
across lines (the prompt is then `db=*>`). Backslash commands need no `;`:

| command | does |
|---|---|
| `\\d` | lists the tables |
| `\\d t` | describes table t (its columns, types and keys) |
| `\\timing [on|off]` | shows how long each statement took |
| `\\format table|csv|json` | how answers are shown |
| `\\q` | quits (so do `quit`, `exit` and Ctrl-D) |
| `\\?` | lists these commands |
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from rich.console import Console
from rich.text import Text

from refimpl.shell.backends import Backend, column_names, table_names
from refimpl.shell.completion import Catalog, SqlCompleter
from refimpl.shell.render import FORMATS, show, show_error
from refimpl.shell.statements import ShellError, split

HISTORY_FILE = ".refimpl_sql_history"  # in the user's home folder
QUIT_WORDS = frozenset({"\\q", "quit", "exit"})
ROLLED_BACK = "The transaction is rolled back: nothing of it was committed."
HELP = """\\d             list the tables
\\d TABLE       describe a table
\\timing [on|off] show how long each statement took
\\format FORMAT answers as table, csv or json
\\q             quit (also quit, exit, Ctrl-D)
End a statement with ; to run it; Ctrl-C drops the statement being typed."""


def default_history() -> Path:
    return Path.home() / HISTORY_FILE


def statement_complete(text: str) -> bool:
    """Whether Enter runs `text`: a statement ending at `;`, a command, or nothing."""
    stripped = text.strip()
    return (
        not stripped
        or stripped.endswith(";")
        or stripped.startswith("\\")
        or (stripped.lower() in QUIT_WORDS)
    )


@dataclass(slots=True)
class ShellOptions:
    output_format: str = "table"
    timing: bool = False
    history: Path | None = None  # None: the default file in the home folder


class Shell:
    """One shell on one backend; `run` one text, or `interactive` until quit."""

    def __init__(
        self,
        backend: Backend,
        console: Console,
        options: ShellOptions,
        errors: Console | None = None,
    ) -> None:
        self.backend = backend
        self.console = console
        self.errors = errors or console  # where errors go (stderr outside a terminal)
        self.options = options
        self.catalog = Catalog(
            lambda: table_names(backend), lambda table: column_names(backend, table)
        )
        self.quit = False

    def run(self, text: str) -> bool:
        """Run a statement (or script) or a backslash command; False when it failed."""
        stripped = text.strip()
        if stripped.lower() in QUIT_WORDS:
            self.quit = True
            return True
        if stripped.startswith("\\"):
            return self._command(stripped)
        if not stripped.strip(";").strip():
            return True
        return self._sql(text)

    def _sql(self, text: str) -> bool:
        """Run each statement of `text` in turn, showing each one's answer; stop at the
        first error (the engine has then rolled back an open transaction, so what follows
        would commit on its own)."""
        try:
            pieces = split(text)
        except ShellError as error:
            show_error(self.errors, error, text)  # a text that does not parse runs nothing
            return False
        for piece in pieces:
            started = time.perf_counter()
            was_open = self.backend.in_transaction
            try:
                answer = self.backend.statement(piece)
            except ShellError as error:
                show_error(self.errors, error, text)
                if was_open and not self.backend.in_transaction:
                    self.errors.print(Text(ROLLED_BACK, style="red"))
                return False
            finally:
                elapsed = time.perf_counter() - started
            if answer.columns is None:
                self.catalog.forget()  # a CREATE, DROP or ALTER changes what completes
            show(self.console, answer, self.options.output_format)
            if self.options.timing:
                self.console.print(Text(f"Time: {elapsed * 1000:.3f} ms"))
        return True

    def _lookup(self, text: str) -> bool:
        """A backslash command's own query, run as one text outside a held transaction."""
        try:
            answer = self.backend.run(text)
        except ShellError as error:
            show_error(self.errors, error, text)
            return False
        show(self.console, answer, self.options.output_format)
        return True

    def _command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        argument = argument.strip().rstrip(";").strip()
        if name == "\\d":
            query = f"SHOW COLUMNS FROM {argument}" if argument else "SHOW TABLES"
            return self._lookup(query)
        if name == "\\timing":
            if argument not in ("", "on", "off"):
                return self._refuse(f"\\timing takes on or off, not '{argument}'")
            self.options.timing = (not self.options.timing) if not argument else argument == "on"
            self.console.print(Text(f"Timing is {'on' if self.options.timing else 'off'}."))
            return True
        if name == "\\format":
            if argument not in FORMATS:
                return self._refuse(f"\\format takes one of {', '.join(FORMATS)}")
            self.options.output_format = argument
            self.console.print(Text(f"Output format is {argument}."))
            return True
        if name == "\\?":
            self.console.print(Text(HELP))
            return True
        return self._refuse(f"unknown command {name}; \\? lists the commands")

    def _refuse(self, message: str) -> bool:
        self.errors.print(Text(message, style="red"))
        return False

    def interactive(self) -> int:
        """Read statements from the terminal until quit; 0."""
        history = self.options.history or default_history()
        _keep_private(history)
        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=SqlCompleter(self.catalog),
            multiline=True,
            key_bindings=_enter_runs_complete_statements(),
            prompt_continuation=lambda width, line, wrapped: f"{self.backend.database}-> ",
            complete_while_typing=False,
        )
        self.console.print(
            Text(
                f"refimpl SQL shell on database '{self.backend.database}' at {self.backend.where}."
                " End statements with ;  \\? for help, \\q quits."
            )
        )
        if self.backend.note:
            self.console.print(Text(self.backend.note))
        while not self.quit:
            # As psql: `db=*>` while a transaction is open.
            mark = "*" if self.backend.in_transaction else ""
            try:
                text = session.prompt(f"{self.backend.database}={mark}> ")
            except KeyboardInterrupt:
                continue  # as psql: Ctrl-C drops the statement being typed
            except EOFError:
                break
            self.run(text)
        return 0


def _keep_private(history: Path) -> None:
    """The history holds what was typed (passwords of users, say): readable by its owner
    alone, as psql and bash keep theirs."""
    try:
        os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        os.chmod(history, 0o600)
    except OSError:
        pass  # a read-only home: prompt-toolkit then keeps no history either


def _enter_runs_complete_statements() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if statement_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    return bindings


def run_shell(backend: Backend, sql: str | None, options: ShellOptions) -> int:
    """`refimpl sql`: run `sql` (-c), or a piped script, or the interactive loop; the exit
    status (1 when a statement failed, outside the interactive loop)."""
    interactive = sql is None and sys.stdin.isatty()
    # Outside a terminal, tables keep their natural width instead of folding at 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=100_000, no_color=True)
    errors = console if interactive else Console(stderr=True, width=100_000, no_color=True)
    shell = Shell(backend, console, options, errors)
    if interactive:
        return shell.interactive()
    text = sys.stdin.read() if sql is None else sql
    return 0 if shell.run(text) else 1
