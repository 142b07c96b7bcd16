"""`refimpl conform --pg HOST:PORT`: the SQL examples run over the protocol too, with the
same results as over /exec (an example that fails over /exec, while its feature is being
built, may fail over the protocol too; none may fail over the protocol alone)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.http.conftest import ROOT


def test_sql_examples_answer_the_same_over_the_protocol(pg):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "refimpl",
            "conform",
            "--url",
            pg.http.url,
            "--token",
            pg.token,
            "--pg",
            f"{pg.host}:{pg.port}",
            "--jobs",
            "2",
            "--only",
            "sql-*",
            "--only",
            "types-*",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert "over the PostgreSQL protocol" in done.stdout, done.stdout[-2000:] + done.stderr
    failed = set(re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE))
    over_pg_alone = {i for i in failed if i.endswith("@pg") and i.removesuffix("@pg") not in failed}
    assert not over_pg_alone, done.stdout[-4000:]
    passed = re.search(r"(\d+) passed", done.stdout.splitlines()[-1])
    assert passed is not None and int(passed.group(1)) > 100, done.stdout[-2000:]
