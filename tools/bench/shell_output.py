"""How long `refimpl sql` takes to print a large answer: 60,000 rows (the issue's figure was
20.6 s; the target is under 2 s to a file or to a pager).

A table of --rows rows (id INT, ts TIMESTAMP, symbol STRING, price DOUBLE, note STRING), then
`SELECT * FROM quotes ORDER BY id` printed by the shell:

- to a file (`-c`, stdout redirected), on the data folder and on a server (`--url`), as a
  table, CSV and JSON: wall-clock seconds less those of `-c 'SELECT 1'` (the start of the
  process, the same in every run), the median of --repeat runs;
- typed into the shell in a pseudo-terminal whose pager is `wc -l` (the answer is taller
  than the terminal): seconds from Enter to the pager's count, on the server;
- the shell's formatting alone (the answer already in memory), in this process.

    python tools/bench/shell_output.py               # 60,000 rows, 3 runs each
    python tools/bench/shell_output.py --quick       # 20,000 rows, 1 run each
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness  # noqa: F401  (first: this folder's http.py shadows the standard library's)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pexpect  # noqa: E402

import refimpl  # noqa: E402
from refimpl.shell.render import answer_text  # noqa: E402
from refimpl.shell.statements import Answer  # noqa: E402

QUERY = "SELECT * FROM quotes ORDER BY id"
TARGET_SECONDS = 2.0
BATCH = 2_000


def make_table(data: Path, rows: int) -> None:
    with refimpl.connect(data) as connection:
        connection.execute(
            "CREATE TABLE quotes (id INT PRIMARY KEY, ts TIMESTAMP, symbol STRING,"
            " price DOUBLE, note STRING)"
        )
        for start in range(0, rows, BATCH):
            values = ", ".join(
                f"({i}, {1_700_000_000_000_000 + i * 1_000_000}, 'SYM{i % 50}',"
                f" {100 + (i % 997) / 7:.4f}, 'quote number {i}')"
                for i in range(start, min(rows, start + BATCH))
            )
            connection.execute(f"INSERT INTO quotes VALUES {values}")


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KDB_", "REFIMPL_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def seconds_to_file(args: list[str], sql: str, output_format: str, out: Path) -> float:
    command = [sys.executable, "-m", "refimpl", "sql", *args, "--format", output_format]
    started = time.perf_counter()
    with out.open("wb") as sink:
        # Not from this folder: `python -m` puts the working folder first on sys.path, and
        # this folder's copy.py and http.py would shadow the standard library's.
        subprocess.run(
            [*command, "-c", sql], stdout=sink, env=environment(), check=True, cwd=out.parent
        )
    return time.perf_counter() - started


def to_file(args: list[str], output_format: str, out: Path, repeat: int) -> float:
    """Seconds to print the answer to a file, less the process's start."""
    spent = statistics.median(
        seconds_to_file(args, QUERY, output_format, out) for _ in range(repeat)
    )
    start = statistics.median(
        seconds_to_file(args, "SELECT 1", output_format, out) for _ in range(repeat)
    )
    return spent - start


def to_pager(args: list[str], home: Path, rows: int, repeat: int) -> float:
    """Seconds from Enter to the next prompt, the answer going to the pager."""
    # The pager counts the lines it is given: its count shows that the answer went there.
    env = {**environment(), "HOME": str(home), "PAGER": "wc -l", "TERM": "xterm"}
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "refimpl", "sql", *args],
        env=env,
        encoding="utf-8",
        timeout=600,
        dimensions=(50, 200),
        cwd=str(home),
    )
    child.expect("demo=>")
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        child.send(QUERY + ";\r")
        child.expect(rf"(?<!\d){rows + 3}\r\n")  # header, rule, rows, (n rows)
        child.expect("demo=>")
        times.append(time.perf_counter() - started)
    child.send("\\q\r")
    child.expect(pexpect.EOF)
    return statistics.median(times)


def formatting_alone(data: Path) -> float:
    with refimpl.connect(data) as connection:
        result = connection.execute(QUERY)
    answer = Answer(
        tuple((c.name, c.type) for c in result.columns or ()),
        tuple(tuple(row) for row in result.rows),
        "",
        len(result.rows),
    )
    started = time.perf_counter()
    answer_text(answer, "table")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20,000 rows, 1 run each")
    options = parser.parse_args()
    rows, repeat = (20_000, 1) if options.quick else (options.rows, options.repeat)
    with tempfile.TemporaryDirectory(prefix="kdb-shell-bench-") as folder:
        work = Path(folder)
        data = work / "data"
        make_table(data, rows)
        out = work / "out.txt"
        print(f"refimpl sql printing {rows:,} rows of 5 columns ({QUERY})")
        target = f"< {TARGET_SECONDS} s"
        show(harness.Check("formatting a table alone, s", formatting_alone(data)))
        for output_format in ("table", "csv", "json"):
            value = to_file(["--data", str(data)], output_format, out, repeat)
            label = f"--data, {output_format} to a file, s"
            show(harness.Check(label, value, target, value < TARGET_SECONDS))
        with harness.RefimplServer(data=data) as server:
            url = ["--url", server.url, "--token", server.token]
            for output_format in ("table", "csv", "json"):
                value = to_file(url, output_format, out, repeat)
                label = f"--url, {output_format} to a file, s"
                show(harness.Check(label, value, target, value < TARGET_SECONDS))
            value = to_pager(url, work, rows, repeat)
            label = "--url, table to the pager (typed), s"
            show(harness.Check(label, value, target, value < TARGET_SECONDS))


def show(check: harness.Check) -> None:
    """One figure, printed as soon as it is measured."""
    line = f"{check.label:58} {check.value:10.2f}"
    if check.target:
        line += f"   target {check.target:14} {'MET' if check.met else 'MISSED'}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
