"""The shell's loop: statements and backslash commands, typed, piped or given with `-c`.

Typed (a terminal): prompt-toolkit edits the statement, which may run over several lines and
ends at a `;` (Enter before that starts a new line) and is coloured as SQL (Pygments);
history is kept across runs in a file for each server or data folder (Up recalls whole
statements); Tab completes keywords, tables and columns. Piped: the whole
input runs as one script. Each statement of a text runs in turn and shows its answer; the
first error stops the text. A transaction stays open from BEGIN to COMMIT or ROLLBACK
across lines (the prompt is then `db=*>`). Backslash commands need no `;`:

| command | does |
|---|---|
| `\\d` or `\\dt` | lists the tables |
| `\\d t` | describes table t (its columns, types and keys) |
| `\\du` | lists the users |
| `\\l` | lists the databases |
| `\\c db` | goes on in database db |
| `\\i file` | runs the statements and commands of a file (as `-f file` does) |
| `\\x [on|off]` | shows each row as a list of its columns (expanded), or as a table |
| `\\timing [on|off]` | shows how long each statement took |
| `\\format table|csv|json` | how answers are shown |
| `\\pset pager [on|off]` | pages answers taller or wider than the terminal (`$PAGER`) |
| `\\q` | quits (so do `quit`, `exit` and Ctrl-D) |
| `\\?` | lists these commands |

A script (`-f`, `\\i` or piped) runs its statements in turn and its backslash commands
(each on a line of its own, between statements); the first error stops it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.lexers import PygmentsLexer
from pygments.lexers.sql import SqlLexer
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from refimpl.shell.backends import Backend, column_names, table_names
from refimpl.shell.completion import Catalog, SqlCompleter
from refimpl.shell.render import FORMATS, answer_text, show_error
from refimpl.shell.statements import ShellError, StatementAnswer, split

HISTORY_FOLDER = ".refimpl/history"  # in the user's home folder: a file for each server
DATABASES = "SELECT datname AS name FROM pg_catalog.pg_database ORDER BY datname"
QUIT_WORDS = frozenset({"\\q", "quit", "exit"})
ROLLED_BACK = "The transaction is rolled back: nothing of it was committed."
HELP = """\\d [TABLE]          list the tables, or describe TABLE (\\dt: the tables)
\\du                 list the users
\\l                  list the databases
\\c DB               go on in database DB
\\i FILE             run the statements and commands of FILE
\\x [on|off]         show each row as a list of its columns
\\timing [on|off]    show how long each statement took
\\format FORMAT      answers as table, csv or json
\\pset pager [on|off] page answers taller than the terminal ($PAGER, else less)
\\q                  quit (also quit, exit, Ctrl-D)
End a statement with ; to run it; Ctrl-C drops the statement being typed, or stops
the one that runs (over --pg a cancel request; over --url the request is abandoned)."""
MAX_INCLUDE_DEPTH = 16  # \\i of a file that includes itself stops here
ON_OFF = ("", "on", "off")


def history_file(where: str) -> Path:
    """The history of the shells on `where` (a server's URL or address, a data folder): a
    file of its own, so that Up recalls what was typed there and not on another server."""
    readable = re.sub(r"[^A-Za-z0-9.-]+", "_", where).strip("_")[-60:]
    digest = hashlib.sha256(where.encode("utf-8")).hexdigest()[:12]
    return Path.home() / HISTORY_FOLDER / f"{readable}-{digest}"


def _toggle(current: bool, argument: str) -> bool:
    return (not current) if not argument else argument == "on"


def _word(on: bool) -> str:
    return "on" if on else "off"


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
    expanded: bool = False  # \\x
    pager: bool = True  # \\pset pager: in a terminal, for answers taller than it
    history: Path | None = None  # None: a file of the server's or folder's own (history_file)


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
        self.terminal = False  # typed into a terminal: long answers may go to a pager
        self._running = False  # a statement is on its way (Ctrl-C then stops it)
        self._depth = 0  # how many \\i are running, one inside the other

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
                self._running = True
                answer = self.backend.statement(piece)
                self._running = False
            except ShellError as error:
                self._running = False
                show_error(self.errors, error, text)
                if error.line is None and len(pieces) > 1:  # which one, when it does not say
                    first = piece.text.splitlines()[0]
                    self.errors.print(Text(f"(the statement at line {piece.line}: {first})"))
                if was_open and not self.backend.in_transaction:
                    self.errors.print(Text(ROLLED_BACK, style="red"))
                return False
            finally:
                elapsed = time.perf_counter() - started
            if answer.columns is None:
                self.catalog.forget()  # a CREATE, DROP or ALTER changes what completes
            self._show(answer)
            if self.options.timing:
                self.console.print(Text(f"Time: {elapsed * 1000:.3f} ms"))
        return True

    def _lookup(self, text: str) -> bool:
        """A backslash command's own query, run as one text outside a held transaction."""
        try:
            self._running = True
            answer = self.backend.run(text)
            self._running = False
        except ShellError as error:
            self._running = False
            show_error(self.errors, error, text)
            return False
        self._show(answer)
        return True

    def _show(self, answer: StatementAnswer) -> None:
        text = answer_text(answer, self.options.output_format, self.options.expanded)
        if self._pages(text) and page(text):
            return
        out = self.console.file
        out.write(text)
        out.flush()

    def _pages(self, text: str) -> bool:
        """Whether `text` goes to the pager: in the terminal, with the pager on, when it is
        taller or wider than the terminal."""
        if not (self.terminal and self.options.pager):
            return False
        size = shutil.get_terminal_size()
        lines = text.splitlines()
        return len(lines) >= size.lines or max(map(cell_len, lines), default=0) > size.columns

    def run_script(self, text: str) -> bool:
        """Run a script: its statements, and its backslash commands (a line starting with
        `\\` between statements); stop at the first error or at `\\q`."""
        buffer: list[str] = []
        for line in text.splitlines(keepends=True):
            pending = "".join(buffer)
            if line.lstrip().startswith("\\") and statement_complete(pending):
                buffer = []
                if pending.strip() and not self.run(pending):
                    return False
                if not self.run(line.strip()):
                    return False
                if self.quit:
                    return True
                continue
            buffer.append(line)
        rest = "".join(buffer)
        return self.run(rest) if rest.strip() else True

    def _command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        argument = argument.strip().rstrip(";").strip()
        lookups = {"\\dt": "SHOW TABLES", "\\du": "SHOW USERS", "\\l": DATABASES}
        if name in lookups and not argument:
            return self._lookup(lookups[name])
        if name == "\\d":
            return self._lookup(f"SHOW COLUMNS FROM {argument}" if argument else "SHOW TABLES")
        if name == "\\c":
            return self._use(argument)
        if name == "\\i":
            return self._include(argument)
        if name == "\\x":
            if argument not in ON_OFF:
                return self._refuse(f"\\x takes on or off, not '{argument}'")
            self.options.expanded = _toggle(self.options.expanded, argument)
            return self._tell(f"Expanded display is {_word(self.options.expanded)}.")
        if name == "\\timing":
            if argument not in ON_OFF:
                return self._refuse(f"\\timing takes on or off, not '{argument}'")
            self.options.timing = _toggle(self.options.timing, argument)
            return self._tell(f"Timing is {_word(self.options.timing)}.")
        if name == "\\pset":
            setting, _, value = argument.partition(" ")
            value = value.strip()
            if setting != "pager" or value not in ON_OFF:
                return self._refuse("\\pset takes pager [on|off]")
            self.options.pager = _toggle(self.options.pager, value)
            return self._tell(f"Pager usage is {_word(self.options.pager)}.")
        if name == "\\format":
            if argument not in FORMATS:
                return self._refuse(f"\\format takes one of {', '.join(FORMATS)}")
            self.options.output_format = argument
            return self._tell(f"Output format is {argument}.")
        if name == "\\?":
            return self._tell(HELP)
        return self._refuse(f"unknown command {text}; \\? lists the commands")

    def _use(self, database: str) -> bool:
        if not database:
            return self._refuse("\\c takes the name of a database (\\l lists them)")
        try:
            self.backend.use(database)
        except ShellError as error:
            return self._refuse(f"ERROR: {error.message}")
        self.catalog.forget()
        return self._tell(f'You are now connected to database "{database}".')

    def _include(self, name: str) -> bool:
        if not name:
            return self._refuse("\\i takes a file name")
        if self._depth >= MAX_INCLUDE_DEPTH:
            return self._refuse(f"\\i {name}: files include each other deeper than 16")
        try:
            text = Path(name).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return self._refuse(f"\\i {name}: {getattr(exc, 'strerror', None) or exc}")
        self._depth += 1
        try:
            return self.run_script(text)
        finally:
            self._depth -= 1

    def _tell(self, message: str) -> bool:
        self.console.print(Text(message))
        return True

    def _refuse(self, message: str) -> bool:
        self.errors.print(Text(message, style="red"))
        return False

    def interactive(self) -> int:
        """Read statements from the terminal until quit; 0."""
        self.terminal = True
        history = self.options.history or history_file(self.backend.where)
        _keep_private(history)
        session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=SqlCompleter(self.catalog),
            multiline=True,
            key_bindings=_enter_runs_complete_statements(),
            prompt_continuation=lambda width, line, wrapped: f"{self.backend.database}-> ",
            complete_while_typing=False,
            lexer=PygmentsLexer(SqlLexer),  # keywords, strings, numbers and comments in colour
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
            try:
                self.run(text)
            except KeyboardInterrupt:
                self.interrupted()
        return 0

    def interrupted(self) -> None:
        """Ctrl-C came while a statement ran or its answer was shown: one line says what
        became of it (the backend cancels or abandons it), and the prompt comes back."""
        if not self._running:
            self.errors.print(Text("Interrupted: the rest of the answer is not shown."))
            return
        self._running = False
        try:
            message = self.backend.interrupted()
        except ShellError as error:
            message = f"ERROR: {error.message}"
        self.errors.print(Text(message, style="red"))


def _keep_private(history: Path) -> None:
    """The history holds what was typed (passwords of users, say): readable by its owner
    alone, as psql and bash keep theirs."""
    try:
        history.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        os.chmod(history, 0o600)
    except OSError:
        pass  # a read-only home: prompt-toolkit then keeps no history either


def page(text: str) -> bool:
    """Show `text` through `$PAGER` (else `less`, which leaves a text that fits on the screen
    and keeps long lines whole: `LESS=FRSX` unless set); False when no pager would start."""
    command = os.environ.get("PAGER") or "less"
    environment = {**os.environ, "LESS": os.environ.get("LESS", "FRSX")}
    try:
        # Through the shell, as psql runs it: PAGER may hold a command with its options.
        pager = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=environment)
    except OSError:
        return False
    assert pager.stdin is not None
    try:
        pager.stdin.write(text.encode("utf-8", "replace"))
        pager.stdin.close()
    except BrokenPipeError:
        pass  # the reader quit the pager before the end
    while True:
        try:
            pager.wait()
            return True
        except KeyboardInterrupt:
            continue  # Ctrl-C is the pager's to handle; the shell waits for it to end


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


def run_shell(
    backend: Backend, sql: str | None, options: ShellOptions, file: Path | None = None
) -> int:
    """`refimpl sql`: run `sql` (-c), or the script of `file` (-f; `-` is standard input), or
    piped input, or the interactive loop; the exit status (1 when a statement failed or the
    file could not be read, outside the interactive loop)."""
    interactive = sql is None and file is None and sys.stdin.isatty()
    # Outside a terminal, tables keep their natural width instead of folding at 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=100_000, no_color=True)
    errors = console if interactive else Console(stderr=True, width=100_000, no_color=True)
    shell = Shell(backend, console, options, errors)
    if interactive:
        # Ctrl-C stops the running statement even when the program that started the shell
        # ignored SIGINT (an ignored signal stays ignored across exec, and Python then never
        # raises KeyboardInterrupt): as psql, the shell sets its own handling.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        return shell.interactive()
    try:
        return _run_given(shell, sql, file, errors)
    except KeyboardInterrupt:
        shell.interrupted()
        return 130  # as a shell reports a command ended by SIGINT


def _run_given(shell: Shell, sql: str | None, file: Path | None, errors: Console) -> int:
    if sql is not None:
        return 0 if shell.run(sql) else 1
    if file is None or str(file) == "-":
        text = sys.stdin.read()
    else:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            errors.print(Text(f"refimpl sql: -f {file}: {getattr(exc, 'strerror', None) or exc}"))
            return 1
    return 0 if shell.run_script(text) else 1
