"""tools/bench/exec_syscalls.py reads strace's summary table: each call's count by its name,
with or without an errors column, and not the table's total."""

from __future__ import annotations

from pathlib import Path

from tests.tools.bench_modules import load_bench

# `strace -c -f -o FILE`'s table, as strace 6 writes it.
_TABLE = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 37.00    2.776800          56     49098      8015 futex
 12.93    0.970571          64     15046           epoll_wait
  2.68    0.200791          13     15022           sendto
  0.00    0.000007           1         4           rt_sigprocmask
------ ----------- ----------- --------- --------- ----------------
100.00    4.948070          62     79170      8015 total
"""


def test_the_calls_are_read_by_name(tmp_path: Path) -> None:
    output = tmp_path / "strace.txt"
    output.write_text(_TABLE)
    calls = load_bench("exec_syscalls").counted(output)
    assert calls == {"futex": 49098, "epoll_wait": 15046, "sendto": 15022, "rt_sigprocmask": 4}
