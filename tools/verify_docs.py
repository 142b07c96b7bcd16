"""Run every example of the spec against a refimpl server; optionally write results back.

    python tools/verify_docs.py                 # start a server, run all examples
    python tools/verify_docs.py --only sql-     # a part of them
    python tools/verify_docs.py --url URL --token T   # against a server already running
    python tools/verify_docs.py --update        # write actual results into the markdown

Examples are read from the markdown itself (spec/*.md), so an edit is verified before it
is extracted. Without --url, a server is started as a subprocess
(`python -m refimpl serve --port 0 --data <temporary folder>`); its admin token is read from
its line `admin token: <t>` and the runner waits for `listening on http://HOST:PORT`.

With --update, each record or step that did not match is rewritten with what the server
answered (matchers that matched are kept), like sqllogictest's --override; then the
examples are extracted again. Review the diff before committing it: the spec is the source
of truth, and a difference may be a server bug rather than a wrong example.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.cases import (  # noqa: E402
    CaseError,
    example_from_json,
    extract_chapter,
    render_sql_record,
)
from conformance.expectations import id_matches  # noqa: E402
from conformance.report import Progress, counts, print_report  # noqa: E402
from conformance.results import ExampleResult  # noqa: E402
from conformance.runner import Runner, RunOptions  # noqa: E402

SKIPPED_FILES = {"README.md"}
_LISTENING_RE = re.compile(r"listening on (http://\S+)")
_TOKEN_RE = re.compile(r"admin token: (\S+)")


class Server:
    """A refimpl server in a subprocess, on a free port, with a temporary data folder."""

    def __init__(self, startup_timeout: float = 30.0) -> None:
        self.data = Path(tempfile.mkdtemp(prefix="verify-docs-"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "refimpl", "serve", "--port", "0", "--data", str(self.data)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.url, self.token = self._wait(startup_timeout)

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            self.lines.put(line)
        self.lines.put("")

    def _wait(self, timeout: float) -> tuple[str, str | None]:
        deadline = time.monotonic() + timeout
        token: str | None = None
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line == "" and self.process.poll() is not None:
                break
            if m := _TOKEN_RE.search(line):
                token = m.group(1)
            if m := _LISTENING_RE.search(line):
                if token is None:
                    saved = self.data / "admin.token"
                    token = saved.read_text().strip() if saved.exists() else None
                return m.group(1), token
        self.stop()
        raise RuntimeError("the server did not start:\n" + "".join(self.output[-40:]))

    def stop(self) -> None:
        """SIGTERM the server (this process's own child), wait, remove the data folder."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data, ignore_errors=True)


def load_spec(spec_dir: Path) -> tuple[list[Any], dict[str, Path]]:
    """Examples straight from the markdown chapters, and {source: file path}."""
    examples: list[Any] = []
    files: dict[str, Path] = {}
    for path in sorted(spec_dir.glob("*.md")):
        if path.name in SKIPPED_FILES:
            continue
        source = path.resolve().relative_to(REPO).as_posix()
        files[source] = path
        document = extract_chapter(
            path.read_text(encoding="utf-8"), source, (spec_dir / "VERSION").read_text().strip()
        )
        examples.extend(example_from_json(e) for e in document["examples"])
    return examples, files


def apply_updates(results: list[ExampleResult], files: dict[str, Path]) -> int:
    """Rewrite the markdown of every example with updates; return how many were changed."""
    edits: dict[str, list[tuple[int, int, list[str]]]] = {}
    changed = 0
    for result in results:
        if not result.updates:
            continue
        example = result.example
        path = files.get(example.source)
        if path is None:
            continue
        changed += 1
        if example.kind == "sql":
            for update in result.updates:
                record = update["record"]
                text = render_sql_record(record)
                edits.setdefault(example.source, []).append(
                    (record["line"], record["end_line"], text.split("\n"))
                )
        else:
            lines = path.read_text(encoding="utf-8").split("\n")
            first, last = example.lines
            raw = json.loads("\n".join(lines[first - 1 : last]))
            for update in result.updates:
                if "steps" in raw:
                    raw["steps"][update["index"]]["expect"] = update["expect"]
                else:
                    raw["expect"] = update["expect"]
            text = json.dumps(raw, indent=2, ensure_ascii=False)
            edits.setdefault(example.source, []).append((first, last, text.split("\n")))
    for source, items in edits.items():
        path = files[source]
        lines = path.read_text(encoding="utf-8").split("\n")
        for first, last, new in sorted(items, key=lambda e: e[0], reverse=True):
            lines[first - 1 : last] = new
        path.write_text("\n".join(lines), encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    """Verify the docs; return 0 when every example passed (or was skipped)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--token", default=os.environ.get("CONFORM_TOKEN"), help="its admin token")
    parser.add_argument("--only", action="append", default=[], metavar="PATTERN")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--update", action="store_true", help="write actual results back")
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--spec", type=Path, default=REPO / "spec")
    args = parser.parse_args(argv)
    try:
        examples, files = load_spec(args.spec)
    except CaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.only:
        examples = [e for e in examples if any(id_matches(p, e.id) for p in args.only)]
    server: Server | None = None
    url, token = args.url, args.token
    # A SIGTERM (a CI timeout, say) must still stop the server this run started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if url is None:
        server = Server()
        url, token = server.url, server.token
    try:
        runner = Runner(RunOptions(base_url=url, token=token, timeout=args.timeout))
        print(f"verifying {len(examples)} example(s) against {url}")
        progress = Progress(len(examples), verbose=args.verbose)
        results = runner.run_all(examples, jobs=args.jobs, on_result=progress)
    finally:
        if server is not None:
            server.stop()
    print_report(results)
    if args.update:
        changed = apply_updates(results, files)
        print(f"rewrote {changed} example(s); review the diff of spec/*.md")
        from tools.extract_examples import main as extract_main

        extract_main(["--spec", str(args.spec)])
    return 0 if counts(results)["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
