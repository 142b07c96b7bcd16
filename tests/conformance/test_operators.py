"""Operator steps (`--operator-cmd`) against a scripted server and a scripted operator.

The operator command here is a small script that writes each call's words to a log and
exits with the code the test gives a verb, so that what the runner asks of it, in which
order, and what it makes of the answers can be checked; refimpl's own operator command
(`refimpl supervise operate`) runs the spec's operator examples in
tests/conformance/test_operator_live.py.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance import cli
from conformance.case_files import schema_errors
from conformance.cases import CaseError, extract_chapter
from conformance.results import FAILED, PASSED, SKIPPED
from conformance.runner import Runner, RunOptions
from tests.conformance.fake_http import ADMIN, http_example
from tests.conformance.liar_http import Behaviour

Liar = tuple[str, Behaviour]


def _operator(tmp_path: Path, codes: dict[str, int] | None = None) -> tuple[str, Path]:
    """A shell command that logs its words (a JSON list a line) and exits with codes[verb]."""
    log = tmp_path / "operator.log"
    script = tmp_path / "operator.py"
    script.write_text(
        "import json, sys\n"
        f"with open({str(log)!r}, 'a') as f:\n"
        "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"sys.exit({codes or {}!r}.get(sys.argv[1], 0))\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}", log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _run(url: str, case: dict[str, Any], command: str | None) -> Any:
    options = RunOptions(url, ADMIN, timeout=10.0, operator_cmd=command, start_timeout=10.0)
    return Runner(options).run(http_example("case", case))


BACKUP_AND_SET = {
    "steps": [
        {"operator": "backup", "args": ["b_{{uniq}}"]},
        {"operator": "set", "args": ["stream_heartbeat_s", "1 2"]},
        {"operator": "check", "args": ["b_{{uniq}}"]},
        {"request": {"path": "/health"}, "expect": {"status": 200}},
    ]
}


def test_each_step_runs_the_command_with_its_words_and_the_example_is_undone(
    liar: Liar, tmp_path: Path
) -> None:
    command, log = _operator(tmp_path)
    result = _run(liar[0], BACKUP_AND_SET, command)
    assert result.verdict == PASSED, result.message
    backup = f"b_{result.uniq}"
    assert _calls(log) == [
        ["backup", backup],
        ["set", "stream_heartbeat_s", "1 2"],  # one word, quoted for the shell
        ["check", backup],
        ["set", "stream_heartbeat_s"],  # the setting back, then the backup gone
        ["discard", backup],
    ]


def test_an_exit_code_other_than_the_expected_fails_and_still_undoes(
    liar: Liar, tmp_path: Path
) -> None:
    command, log = _operator(tmp_path, {"check": 1})
    result = _run(liar[0], BACKUP_AND_SET, command)
    assert result.verdict == FAILED
    assert (
        "the operator command check" in result.message and "exited with 1, not 0" in result.message
    )
    assert _calls(log)[-2:] == [["set", "stream_heartbeat_s"], ["discard", f"b_{result.uniq}"]]
    damaged = {"steps": [{"operator": "check", "args": ["nope"], "exit": 1}]}
    assert _run(liar[0], damaged, command).verdict == PASSED


def test_a_setting_set_back_by_the_example_is_not_set_back_again(
    liar: Liar, tmp_path: Path
) -> None:
    command, log = _operator(tmp_path)
    case = {
        "steps": [
            {"operator": "set", "args": ["streams_per_token", "1"]},
            {"operator": "set", "args": ["streams_per_token"]},
        ]
    }
    assert _run(liar[0], case, command).verdict == PASSED
    assert _calls(log) == [["set", "streams_per_token", "1"], ["set", "streams_per_token"]]


def test_the_server_must_answer_health_after_an_operator_step(liar: Liar, tmp_path: Path) -> None:
    url, behaviour = liar
    command, _ = _operator(tmp_path)
    behaviour.down_until = float("inf")  # it never comes back
    result = _run(url, {"steps": [{"operator": "restore", "args": ["b"]}]}, command)
    assert result.verdict == FAILED
    assert "after the operator step restore GET /health did not answer 200" in result.message


def test_without_the_command_operator_examples_are_skipped(liar: Liar) -> None:
    result = _run(liar[0], BACKUP_AND_SET, None)
    assert result.verdict == SKIPPED
    assert result.message == (
        "the example acts on the server as its operator (backup, set, check):"
        " run the suite with --operator-cmd CMD"
    )


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"operator": "snapshot", "args": ["x"]}, "'operator' is one of restart, crash"),
        ({"operator": "backup"}, "'backup' takes 1 argument(s)"),
        ({"operator": "set", "args": ["a", "b", "c"]}, "'set' takes 1 or 2 argument(s)"),
        ({"operator": "restart", "args": ["now"]}, "'restart' takes 0 argument(s)"),
        ({"operator": "check", "args": ["x"], "exit": "1"}, "'exit' is the exit code"),
        ({"operator": "check", "args": ["x"], "expect": {}}, "has no 'expect'"),
    ],
)
def test_malformed_operator_steps_are_case_errors(step: dict[str, Any], message: str) -> None:
    block = "```http-example id=x\n" + json.dumps({"steps": [step]}) + "\n```\n"
    with pytest.raises(CaseError, match=re.escape(message)):
        extract_chapter(block, "spec/x.md", "1.0.0")


def test_the_schema_knows_operator_steps() -> None:
    block = "```http-example id=x\n" + json.dumps(BACKUP_AND_SET) + "\n```\n"
    document = extract_chapter(block, "spec/x.md", "1.0.0")
    assert document["examples"][0]["steps"][0] == {
        "operator": "backup",
        "args": ["b_{{uniq}}"],
        "exit": 0,
    }
    assert schema_errors(document) == []


def test_the_operator_command_restarts_where_no_restart_command_is_given(
    liar: Liar, tmp_path: Path
) -> None:
    command, log = _operator(tmp_path)
    case = {"steps": [{"restart": "graceful"}, {"restart": "crash"}]}
    block = "```http-example id=ops-restarts\n" + json.dumps(case) + "\n```\n"
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(extract_chapter(block, "spec/x.md", "1.0.0")))
    code = cli.main(
        ["--url", liar[0], "--token", ADMIN, "--examples", str(cases), "--operator-cmd", command]
    )
    assert code == 0
    assert _calls(log) == [["restart"], ["crash"]]
