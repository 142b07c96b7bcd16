"""System calls a `POST /exec` request costs the server, by call, counted by strace.

A `refimpl serve` process (this checkout's, or `--tree`'s) answers `http.py`'s workload
(one-row INSERTs or point SELECTs, 16 lean keep-alive clients in their own processes) while
`strace -c -f` is attached to every thread of the server; the calls are divided by the
answers the server sent (each is one `sendto`), so the figures hold whatever the load:

    python tools/bench/exec_syscalls.py --workload insert
    python tools/bench/exec_syscalls.py --workload insert --tree ../before

strace slows every system call, and so the server: group commits then gather more commits
than untraced, and the flush's calls a request (`pwritev2`, `fdatasync`) read low. The
calls each request makes (`recvfrom`, `sendto`, `epoll_ctl`, `epoll_wait`) and the wake-ups
(`futex`) are the figures to compare.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import harness

bench_http = harness.bench_http()  # this folder's http.py


def counted(output: Path) -> dict[str, int]:
    """The calls of `strace -c`'s table in `output`, by name."""
    calls: dict[str, int] = {}
    for line in output.read_text().splitlines():
        fields = line.split()
        # "% time  seconds  usecs/call  calls  [errors]  syscall"
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("insert", "select"), default="insert")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--tree", help="the checkout whose server runs (default: this one)")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        raise SystemExit("strace is not installed")
    server = harness.RefimplServer(threads=16, code=args.tree)
    with server, tempfile.TemporaryDirectory() as folder:
        target = bench_http.prepare_refimpl(server, "lean")
        output = Path(folder) / "strace.txt"
        tracer = subprocess.Popen(
            ["strace", "-c", "-f", "-p", str(server.pid), "-o", str(output)],
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached to every thread
        try:
            harness.run_client_phase(
                bench_http._process, target, args.workload, 16, 4, args.seconds, 0
            )
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait()
        calls = counted(output)
    answers = calls.get("sendto", 0)
    if not answers:
        raise SystemExit("no answer was sent")
    tree = Path(args.tree or harness.REPO).resolve().name
    print(f"{tree} {args.workload}: {answers:,} answers; system calls a request:")
    for name, count in sorted(calls.items(), key=lambda item: -item[1]):
        if count / answers >= 0.001:
            print(f"  {count / answers:8.3f}  {name}")
    print(f"  {sum(calls.values()) / answers:8.3f}  all")


if __name__ == "__main__":
    main()
