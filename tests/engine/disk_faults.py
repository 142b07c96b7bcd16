"""Disks that fail on purpose, through the engine's one file seam (`refimpl.engine.files`).

- `FaultyFiles` counts every file operation and fails the Nth: EIO or ENOSPC (raised before the
  operation, as a failing disk would; a failing close still releases its descriptor, as
  close(2) does), or a short write (only part of the bytes taken, no error: the caller must
  write the rest).
- `PowerLossFiles` keeps what each file held at its last fsync and which names each folder
  held at its last fsync, and calls a hook before every fsync: the moment the power may go.
  `image(folder)` writes what the disk would hold after a power loss at that moment.

And `Workload`: the fixed sequence of statements both fault tests run (creates, inserts,
updates, a checkpoint, grants, token drops, a new database), with a model of what each one
changes, and `observe`, the same state read from an instance; `run_workload` runs it on a
given disk and `check_power_loss_at_every_fsync` the power-loss check, for the fault tests and
for tools/fault_soak.py alike.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from refimpl.engine.files import FileOps
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import KdbError, Unauthorized
from refimpl.http.error_answers import status_of

KINDS = ("EIO", "ENOSPC", "short write")


class FaultyFiles(FileOps):
    """Fails operation number `fail_at` (1-based) with `kind`; None counts only."""

    def __init__(self, fail_at: int | None = None, kind: str = "EIO") -> None:
        self.fail_at = fail_at
        self.kind = kind
        self.count = 0
        self.operations: list[str] = []  # what each operation was, for a failure's message
        self.failed: str | None = None  # the operation that failed, once it did

    def _fault(self, what: str) -> bool:
        """Counts one operation; True when this one must fail (or write short)."""
        self.count += 1
        self.operations.append(what)
        if self.count != self.fail_at:
            return False
        if self.kind == "short write" and not what.startswith("write"):
            return False  # a short write is a write's fault only
        self.failed = what
        return True

    def _raise(self, what: str) -> None:
        code = errno.EIO if self.kind == "EIO" else errno.ENOSPC
        raise OSError(code, f"{os.strerror(code)} (injected at {what})")

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if self._fault(f"open {Path(path).name}"):
            self._raise(f"open {path}")
        return super().open(path, flags, mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        if self._fault(f"write {len(data)} bytes"):
            if self.kind != "short write":
                self._raise("write")
            return super().write(fd, memoryview(data)[: max(1, len(data) // 2)])
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        if self._fault("fsync"):
            self._raise("fsync")
        super().fsync(fd)

    def close(self, fd: int) -> None:
        fail = self._fault("close")
        super().close(fd)
        if fail:
            self._raise("close")

    def replace(self, source: Path, target: Path) -> None:
        if self._fault(f"rename {Path(source).name}"):
            self._raise("rename")
        super().replace(source, target)

    def unlink(self, path: Path) -> None:
        if self._fault(f"unlink {Path(path).name}"):
            self._raise("unlink")
        super().unlink(path)

    def truncate(self, path: Path, size: int) -> None:
        if self._fault(f"truncate {Path(path).name}"):
            self._raise("truncate")
        super().truncate(path, size)

    def mkdir(self, path: Path) -> bool:
        if self._fault(f"mkdir {Path(path).name}"):
            self._raise("mkdir")
        return super().mkdir(path)


class PowerLossFiles(FileOps):
    """Real file operations that remember what a power loss would leave of them.

    A file's durable bytes are those it held at its last fsync; a folder's durable names are
    those it held at its last fsync (each naming the file it named then). Anything else is
    what a power loss drops. `before_sync` runs before every fsync, files and folders alike.
    """

    def __init__(self, root: Path, before_sync: Callable[[], None]) -> None:
        self.root = Path(root)
        self.before_sync = before_sync
        self._paths: dict[int, Path] = {}  # open descriptor -> its path
        self._durable: dict[int, bytes] = {}  # file key -> bytes at its last fsync
        self._names: dict[Path, dict[str, tuple[bool, int]]] = {}  # folder -> name -> (dir, key)
        self._keys: dict[int, int] = {}  # inode -> key of the file that has it now
        self._next_key = itertools.count(1)

    def _key(self, inode: int) -> int:
        if inode not in self._keys:
            self._keys[inode] = next(self._next_key)
        return self._keys[inode]

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        existed = os.path.exists(path)
        fd = super().open(path, flags, mode)
        self._paths[fd] = Path(path)
        if not existed:
            # A new file may reuse the inode of one removed: it is another file, and names
            # still durable for the old one keep the old one's bytes.
            self._keys[os.fstat(fd).st_ino] = next(self._next_key)
        return fd

    def close(self, fd: int) -> None:
        self._paths.pop(fd, None)
        super().close(fd)

    def fsync(self, fd: int) -> None:
        self.before_sync()
        super().fsync(fd)
        path = self._paths[fd]
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            names = {}
            with os.scandir(path) as entries:
                for entry in entries:
                    names[entry.name] = (entry.is_dir(), self._key(entry.inode()))
            self._names[path] = names
        else:
            assert os.stat(path).st_ino == info.st_ino, f"{path} was renamed before its fsync"
            self._durable[self._key(info.st_ino)] = path.read_bytes()

    def image(self, target: Path) -> None:
        """Writes into the new folder `target` what the disk holds after a power loss now."""
        target.mkdir(parents=True)
        self._copy(self.root, target)

    def _copy(self, folder: Path, target: Path) -> None:
        for name, (is_dir, key) in self._names.get(folder, {}).items():
            if is_dir:
                (target / name).mkdir()
                self._copy(folder / name, target / name)
            else:
                (target / name).write_bytes(self._durable.get(key, b""))


# --- the workload and its model -------------------------------------------------------------


@dataclass
class State:
    """What a restart must show: tables' rows, users, grants, and which tokens work."""

    tables: dict[str, dict[str, dict[object, tuple]]] = field(default_factory=dict)  # by key
    users: set[str] = field(default_factory=set)
    grants: set[tuple] = field(default_factory=set)
    tokens: set[str] = field(default_factory=set)  # labels of the tokens that let one in

    def copy(self) -> State:
        tables = {db: {t: dict(rows) for t, rows in ts.items()} for db, ts in self.tables.items()}
        return State(
            tables,
            set(self.users),
            set(self.grants),
            set(self.tokens),
        )

    def key(self) -> tuple:
        tables = {
            db: sorted((t, sorted(r.values())) for t, r in ts.items())
            for db, ts in self.tables.items()
        }
        return (
            sorted(tables.items()),
            sorted(self.users),
            sorted(self.grants, key=repr),
            sorted(self.tokens),
        )


@dataclass(frozen=True)
class Step:
    """One statement of the workload and what it changes when it is acknowledged.

    `in_doubt`: whether a failure may still leave the change on disk (a commit whose log
    write went out but whose fsync failed); a user, token or grant change that fails is not
    made, and a restart must show it not made.
    """

    sql: str
    change: Callable[[State], None]
    in_doubt: bool = True
    database: str = "demo"
    token: str | None = None  # the label under which the step's answer (a token) is kept


def _table(state: State, db: str, table: str) -> dict[object, tuple] | None:
    return state.tables.get(db, {}).get(table)


def _new_table(db: str, table: str) -> Callable[[State], None]:
    def change(state: State) -> None:
        if db in state.tables:
            state.tables[db].setdefault(table, {})

    return change


def _insert(db: str, table: str, *rows: tuple) -> Callable[[State], None]:
    def change(state: State) -> None:
        found = _table(state, db, table)
        if found is not None:
            found.update((row[0], row) for row in rows)

    return change


def _update(db: str, table: str, key: object, row: tuple) -> Callable[[State], None]:
    def change(state: State) -> None:
        found = _table(state, db, table)
        if found is not None and key in found:
            found[key] = row

    return change


def _delete(db: str, table: str, key: object) -> Callable[[State], None]:
    def change(state: State) -> None:
        found = _table(state, db, table)
        if found is not None:
            found.pop(key, None)

    return change


def _add(what: str, value: object) -> Callable[[State], None]:
    def change(state: State) -> None:
        getattr(state, what).add(value)

    return change


def _remove(what: str, value: object) -> Callable[[State], None]:
    def change(state: State) -> None:
        getattr(state, what).discard(value)

    return change


def _nothing(state: State) -> None:
    pass


def _new_database(name: str) -> Callable[[State], None]:
    def change(state: State) -> None:
        state.tables.setdefault(name, {})

    return change


STEPS: tuple[Step, ...] = (
    Step("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", _new_table("demo", "t")),
    Step("INSERT INTO t VALUES (1, 'a'), (2, 'b')", _insert("demo", "t", (1, "a"), (2, "b"))),
    Step("UPDATE t SET v = 'c' WHERE id = 1", _update("demo", "t", 1, (1, "c"))),
    Step("CREATE USER u", _add("users", "u"), in_doubt=False),
    Step("CREATE TOKEN FOR u", _add("tokens", "first"), in_doubt=False, token="first"),
    Step(
        "GRANT READ ON DATABASE demo TO u", _add("grants", ("READ", "demo", None)), in_doubt=False
    ),
    Step("CHECKPOINT", _nothing, in_doubt=False),  # a failed one leaves the log writing
    Step("INSERT INTO t VALUES (3, 'd')", _insert("demo", "t", (3, "d"))),
    Step("GRANT SELECT ON t TO u", _add("grants", ("SELECT", "demo", "t")), in_doubt=False),
    Step("CREATE TOKEN FOR u", _add("tokens", "second"), in_doubt=False, token="second"),
    Step("DROP TOKEN '{first}'", _remove("tokens", "first"), in_doubt=False),
    Step(
        "REVOKE READ ON DATABASE demo FROM u",
        _remove("grants", ("READ", "demo", None)),
        in_doubt=False,
    ),
    Step("DELETE FROM t WHERE id = 2", _delete("demo", "t", 2)),
    Step("CREATE DATABASE d2", _new_database("d2"), in_doubt=False),
    Step("CREATE TABLE s (k INT PRIMARY KEY)", _new_table("d2", "s"), database="d2"),
    Step("INSERT INTO s VALUES (10)", _insert("d2", "s", (10,)), database="d2"),
)


def initial_state() -> State:
    return State(tables={"demo": {}})


class _OrNever(dict):
    def __missing__(self, key: str) -> str:
        return "kdb_never_made"


def run_step(instance: Instance, step: Step, tokens: dict[str, str]) -> None:
    """Runs one step; a token it answers is kept in `tokens` under the step's label."""
    session = instance.session(step.database)
    try:
        # A token whose creation failed is named by one that never existed (0 dropped).
        result = session.execute(step.sql.format_map(_OrNever(tokens)))
    finally:
        session.close()
    if step.token is not None:
        tokens[step.token] = result.rows[0][0]


def assert_clean_error(error: BaseException, during: str) -> None:
    """A failure may only be an error the HTTP layer answers 4xx or with the 503."""
    assert isinstance(error, KdbError), f"{during}: a bare {type(error).__name__}: {error}"
    status = status_of(error)
    assert 400 <= status < 500 or status == 503, f"{during}: {status} for {error!r}"


def observe(instance: Instance, tokens: dict[str, str]) -> State:
    """The state an instance shows, read through sessions as a client would."""
    state = State()
    for db in instance.database_names():
        session = instance.session(db)
        try:
            tables = {}
            for table, _kind in session.execute("SHOW TABLES").rows:
                rows = session.execute(f"SELECT * FROM {table}").rows
                tables[table] = {row[0]: row for row in rows}
            state.tables[db] = tables
            if db == "demo":
                state.users = {row[0] for row in session.execute("SHOW USERS").rows}
                if "u" in state.users:
                    state.grants = {
                        (right, database, table)
                        for _who, right, database, table in session.execute(
                            "SHOW GRANTS FOR u"
                        ).rows
                    }
        finally:
            session.close()
    for label, token in tokens.items():
        try:
            instance.access.authenticate(token)
        except Unauthorized:
            continue
        state.tokens.add(label)
    return state


def possible_states(done: list[tuple[Step, bool]]) -> list[State]:
    """The states a restart may show after `done` (each step and whether it was acked).

    An acknowledged step's change must be there; a failed step's change is not, unless the
    step is in doubt, and then either way. Only the first commit of a database that fails is
    in doubt: its log takes no record after a failure, so later commits there are refused.
    """
    states = [initial_state()]
    stopped: set[str] = set()
    for step, acked in done:
        if acked:
            for state in states:
                step.change(state)
        elif step.in_doubt and step.database not in stopped:
            stopped.add(step.database)
            applied = []
            for state in states:
                other = state.copy()
                step.change(other)
                applied.append(other)
            states += applied
    return states


def assert_one_of(found: State, states: list[State], context: str) -> None:
    keys = [state.key() for state in states]
    assert found.key() in keys, f"{context}: recovered {found.key()}, expected one of {keys}"


@contextmanager
def reopened(folder: Path) -> Iterator[Instance]:
    """The folder opened again on a sound disk, as a restart opens it."""
    instance = Instance.open(folder, EngineOptions())
    try:
        yield instance
    finally:
        instance.close()


def run_workload(folder: Path, files: FaultyFiles) -> tuple[list[tuple[Step, bool]], dict]:
    """The workload on `files`; each step with whether it was acknowledged, and the tokens."""
    done: list[tuple[Step, bool]] = []
    tokens: dict[str, str] = {}
    try:
        instance = Instance.open(folder, EngineOptions(), files)
    except Exception as error:  # noqa: BLE001 - what it is, is the test
        assert_clean_error(error, "opening the folder")
        return done, tokens
    try:
        for step in STEPS:
            try:
                run_step(instance, step, tokens)
            except Exception as error:  # noqa: BLE001
                assert_clean_error(error, step.sql)
                done.append((step, False))
            else:
                done.append((step, True))
    finally:
        try:
            instance.close()
        except Exception as error:  # noqa: BLE001
            assert_clean_error(error, "closing")
    return done, tokens


def count_operations(folder: Path) -> int:
    """How many file operations the workload makes on a sound disk (it must succeed there)."""
    files = FaultyFiles()
    done, _tokens = run_workload(folder, files)
    assert all(acked for _step, acked in done), "the workload fails without a fault"
    return files.count


class Moments:
    """The copies taken before each fsync, with the steps acknowledged by then."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.acked: list[Step] = []
        self.running: Step | None = None
        self.taken: list[tuple[Path, list[Step], Step | None]] = []
        self.files = PowerLossFiles(folder / "data", self.before_sync)

    def before_sync(self) -> None:
        copy = self.folder / f"lost-power-{len(self.taken) + 1}"
        self.files.image(copy)
        self.taken.append((copy, list(self.acked), self.running))


def check_power_loss_at_every_fsync(folder: Path) -> int:
    """Runs the workload on a `PowerLossFiles` in `folder`, then reopens the copy taken before
    each fsync and checks it shows what was acknowledged by then; returns how many."""
    moments = Moments(folder)
    tokens: dict[str, str] = {}
    instance = Instance.open(folder / "data", EngineOptions(), moments.files)
    try:
        for step in STEPS:
            moments.running = step
            run_step(instance, step, tokens)
            moments.acked.append(step)
            moments.running = None
    finally:
        instance.close()
    assert len(moments.taken) > 20  # every step's syncs, and the open's
    for copy, acked, running in moments.taken:
        done = [(step, True) for step in acked]
        if running is not None:
            done.append((running, False))  # a step cut by the power loss: either way
        with reopened(copy) as again:
            context = f"power lost at {copy.name}, during {running.sql if running else 'open'}"
            assert_one_of(observe(again, tokens), possible_states(done), context)
    return len(moments.taken)
