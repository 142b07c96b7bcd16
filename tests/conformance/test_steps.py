"""The runner's step kinds against lying servers: each lie must fail the example, and the
honest answer pass it.

The servers here are tiny `http.server` apps that stand for an implementation under test;
refimpl itself runs the same step kinds in the spec's examples (tests/conformance/
test_suite_live.py), restarts included.
"""

from __future__ import annotations

import io
import json
import shlex
import sys
import time
from typing import Any

import pytest

from conformance.case_files import schema_errors
from conformance.cases import CaseError, example_from_json, extract_chapter
from conformance.matchers import match, validate_matchers
from conformance.report import ChapterProgress, Progress, print_report
from conformance.restarts import RestartCommands
from conformance.results import FAILED, PASSED, SKIPPED
from conformance.runner import Runner, RunOptions
from tests.conformance.fake_http import ADMIN, http_example
from tests.conformance.liar_http import Behaviour


def _run(url: str, case: dict[str, Any], restarts: RestartCommands | None = None) -> Any:
    options = RunOptions(url, ADMIN, timeout=10.0, restarts=restarts or RestartCommands())
    return Runner(options).run(http_example("case", case))


# ---------------------------------------------------------------------------------------
# Background requests: await and pending
# ---------------------------------------------------------------------------------------

WAITING = {
    "steps": [
        {"request": {"path": "/wait"}, "background": "w"},
        {"pending": "w", "for_ms": 300},
        {"request": {"sql": "COMMIT"}},
        {"await": "w", "within_s": 3, "expect": {"status": 200, "json": {"n": 1}}},
    ]
}


def test_a_waiting_request_answered_after_the_commit_passes(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    result = _run(url, WAITING)
    assert result.verdict == PASSED, result.message + result.diff


def test_an_answer_before_the_commit_fails_pending(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.answers_early = True
    result = _run(url, WAITING)
    assert result.verdict == FAILED
    assert "step 2" in result.message and "should still be waiting" in result.message
    assert result.request.startswith("GET /wait")


def test_no_answer_after_the_commit_fails_await_and_is_closed(
    liar: tuple[str, Behaviour],
) -> None:
    url, behaviour = liar
    behaviour.never_answers = True
    started = time.monotonic()
    result = _run(url, WAITING)
    took = time.monotonic() - started
    assert result.verdict == FAILED
    assert "step 4" in result.message and "did not answer within 3 s" in result.message
    # The runner closed the open request at the end instead of waiting out its timeout.
    assert took < 8, took


def test_a_wrong_late_answer_fails_await(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.wrong_answer = True
    result = _run(url, WAITING)
    assert result.verdict == FAILED
    assert "step 4" in result.message and "expected 1, got 0" in result.message
    assert '"n": 0' in result.diff


def test_await_captures_for_later_steps(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    case = {
        "steps": [
            {"request": {"path": "/wait"}, "background": "w"},
            {"request": {"sql": "COMMIT"}},
            {"await": "w", "capture": {"n": "$.json.n"}},
            {
                "request": {"sql": "SELECT {{n}}"},
                "expect": {"json": {"$match": "contains", "value": {"query": "SELECT 1"}}},
            },
        ]
    }
    result = _run(url, case)
    assert result.verdict == PASSED, result.message + result.diff


@pytest.mark.parametrize(
    "steps, message",
    [
        ([{"await": "w"}], "no earlier step starts"),
        ([{"pending": "w"}], "no earlier step starts"),
        (
            [{"request": {"path": "/wait"}, "background": "w"}, {"await": "w"}, {"await": "w"}],
            "already awaited",
        ),
        (
            [
                {"request": {"path": "/a"}, "background": "w"},
                {"request": {"path": "/b"}, "background": "w"},
            ],
            "already started",
        ),
        (
            [{"request": {"path": "/a"}, "background": "w", "expect": {"status": 200}}],
            "move 'expect'",
        ),
        ([{"restart": "gently"}], "'graceful' or 'crash'"),
        ([{"request": {"path": "/a"}, "pending": "w"}], "exactly one of"),
    ],
)
def test_malformed_steps_are_case_errors(steps: list[dict[str, Any]], message: str) -> None:
    text = f"```http-example id=bad\n{json.dumps({'steps': steps})}\n```\n"
    with pytest.raises(CaseError, match=message):
        extract_chapter(text, "spec/x.md", "0.0.0")


def test_the_schema_knows_the_new_steps() -> None:
    case = {
        "steps": [
            {
                "request": {"path": "/events", "read": {"until": "done", "timeout": 2}},
                "background": "w",
            },
            {"pending": "w", "for_ms": 100},
            {"await": "w", "within_s": 2, "expect": {"status": 200}, "capture": {"x": "$.sse"}},
            {"restart": "graceful"},
            {"restart": "crash"},
        ]
    }
    doc = extract_chapter(f"```http-example id=ok\n{json.dumps(case)}\n```\n", "spec/x.md", "0.0.0")
    assert schema_errors(doc) == []
    doc["examples"][0]["steps"][1]["for_ms"] = "soon"
    assert schema_errors(doc)


# ---------------------------------------------------------------------------------------
# Moved and not moved
# ---------------------------------------------------------------------------------------


def test_differs_matcher() -> None:
    captures = {"boot": "b1"}
    assert match({"$match": "differs", "from": "boot"}, "b2", captures).ok
    out = match({"$match": "differs", "from": "boot"}, "b1", captures)
    assert not out.ok and "got the same" in out.mismatches[0]
    assert not match({"$match": "differs", "from": "nope"}, "b1", captures).ok
    assert not match({"$match": "differs", "from": "n"}, 1.0, {"n": 1}).ok  # 1 == 1.0
    kept: dict[str, Any] = dict(captures)
    assert match({"$match": "differs", "from": "boot", "capture": "boot2"}, "b3", kept).ok
    assert kept["boot2"] == "b3"
    assert validate_matchers({"$match": "differs"})
    assert validate_matchers({"$match": "differs", "from": "boot"}) == []


# ---------------------------------------------------------------------------------------
# Restarts
# ---------------------------------------------------------------------------------------


def _restart_command(url: str) -> str:
    code = f"import urllib.request; urllib.request.urlopen({url + '/_restart'!r}, data=b'')"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


BOOT_MOVES = {
    "steps": [
        {
            "request": {"path": "/rev"},
            "expect": {"json": {"boot": {"$match": "string", "capture": "boot"}}},
        },
        {"restart": "graceful"},
        {
            "request": {"path": "/rev"},
            "expect": {"json": {"boot": {"$match": "differs", "from": "boot"}}},
        },
    ]
}


def test_a_restart_that_moves_the_boot_id_passes(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.down_after_restart_s = 0.5  # the runner must wait for /health
    result = _run(url, BOOT_MOVES, RestartCommands(graceful=_restart_command(url)))
    assert result.verdict == PASSED, result.message + result.diff
    assert result.duration >= 0.5


def test_a_boot_id_kept_across_a_restart_fails(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.keeps_boot = True
    result = _run(url, BOOT_MOVES, RestartCommands(graceful=_restart_command(url)))
    assert result.verdict == FAILED
    assert "step 3" in result.message and "got the same 'boot1'" in result.message


def test_a_server_that_does_not_come_back_fails(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.down_after_restart_s = 60
    commands = RestartCommands(graceful=_restart_command(url), timeout=1.5)
    result = _run(url, BOOT_MOVES, commands)
    assert result.verdict == FAILED and "GET /health did not answer 200" in result.message


def test_a_failing_restart_command_fails(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    command = f"{shlex.quote(sys.executable)} -c 'import sys; sys.exit(3)'"
    result = _run(url, BOOT_MOVES, RestartCommands(graceful=command))
    assert result.verdict == FAILED and "--restart-cmd command exited with 3" in result.message


def test_without_the_command_a_restart_example_is_skipped(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    result = _run(url, BOOT_MOVES, RestartCommands(crash="true"))
    assert result.verdict == SKIPPED and "--restart-cmd" in result.message
    crash = {"steps": [{"restart": "crash"}, {"request": {"path": "/health"}}]}
    assert "--crash-cmd" in _run(url, crash).message


def test_restart_examples_run_alone_after_the_others(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    restarting = http_example("restarting", BOOT_MOVES)
    plain = [http_example(f"plain-{n}", {"request": {"path": "/health"}}) for n in range(4)]
    finished: list[str] = []
    options = RunOptions(url, ADMIN, restarts=RestartCommands(graceful=_restart_command(url)))
    results = Runner(options).run_all(
        [restarting, *plain], jobs=4, on_result=lambda r: finished.append(r.example.id)
    )
    assert [r.verdict for r in results] == [PASSED] * 5
    assert [r.example.id for r in results][0] == "restarting"  # results keep the order
    assert finished[-1] == "restarting"


# ---------------------------------------------------------------------------------------
# Streams: reading up to an event, reconnecting with the last id
# ---------------------------------------------------------------------------------------

RECONNECT = {
    "steps": [
        {
            "request": {"path": "/events", "query": {"n": 2}, "read": {"until": "done"}},
            "expect": {
                "sse": [
                    {"event": "tick", "id": "1", "data": 1},
                    {"event": "tick", "id": "2", "data": 2},
                    {"event": "done", "data": {}},
                ]
            },
            "capture": {"last": "$.sse[-2].id"},
        },
        {
            "request": {
                "path": "/events",
                "query": {"n": 1},
                "headers": {"Last-Event-ID": "{{last}}"},
                "read": {"events": 1, "timeout": 5},
            },
            "expect": {"sse": [{"event": "tick", "id": "3", "data": 3}]},
        },
    ]
}


def test_reading_until_an_event_and_reconnecting_passes(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    started = time.monotonic()
    result = _run(url, RECONNECT)
    assert result.verdict == PASSED, result.message + result.diff
    assert time.monotonic() - started < 2.5  # neither read waited for the stream's end


def test_an_event_repeated_after_a_reconnect_fails(liar: tuple[str, Behaviour]) -> None:
    url, behaviour = liar
    behaviour.repeats_event = True
    result = _run(url, RECONNECT)
    assert result.verdict == FAILED
    assert "step 2" in result.message and "expected '3', got '2'" in result.message


def test_a_background_stream_answers_once_its_reading_is_done(
    liar: tuple[str, Behaviour],
) -> None:
    url, _ = liar
    case = {
        "steps": [
            {
                "request": {"path": "/events", "query": {"n": 3}, "read": {"until": "done"}},
                "background": "s",
            },
            {
                "await": "s",
                "within_s": 2,
                "expect": {"sse": {"$match": "contains", "value": [{"event": "done", "data": {}}]}},
            },
        ]
    }
    result = _run(url, case)
    assert result.verdict == PASSED, result.message + result.diff


# ---------------------------------------------------------------------------------------
# Reports: a line per chapter, skips with their reasons
# ---------------------------------------------------------------------------------------


def test_chapter_progress_and_skip_reasons(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    examples = [
        http_example("one", {"request": {"path": "/health"}}),
        http_example("two", {"request": {"path": "/nowhere"}}),
        http_example("three", BOOT_MOVES),
    ]
    lines = io.StringIO()
    results = Runner(RunOptions(url, ADMIN)).run_all(
        examples, jobs=2, on_result=ChapterProgress([e.chapter for e in examples], lines)
    )
    assert lines.getvalue() == "chapter h: 1 passed, 1 failed, 1 skipped [3/3]\n"
    out = io.StringIO()
    print_report(results, out)
    assert (
        "skipped 1: the example restarts the server (graceful): run the suite with"
        " --restart-cmd (three)" in out.getvalue()
    )


TICK_ONE = {"event": "tick", "id": "1", "data": 1}


def test_a_background_read_ends_at_its_timeout(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    case = {
        "steps": [
            {
                "request": {
                    "path": "/events",
                    "query": {"n": 1},
                    "read": {"events": 5, "timeout": 1},
                },
                "background": "s",
            },
            {
                "await": "s",
                "within_s": 2.5,
                "expect": {"sse": {"$match": "contains", "value": [TICK_ONE]}},
            },
        ]
    }
    result = _run(url, case)
    assert result.verdict == PASSED, result.message + result.diff


def test_a_chapter_line_starts_on_a_line_of_its_own(liar: tuple[str, Behaviour]) -> None:
    url, _ = liar
    first = [http_example(f"a-{n}", {"request": {"path": "/health"}}) for n in range(2)]
    examples = [example_from_json({**e.data, "source": "spec/a.md"}) for e in first]
    examples.append(http_example("b-0", {"request": {"path": "/health"}}))
    shared = io.StringIO()  # stdout and stderr on one terminal
    marks = Progress(len(examples), shared)
    chapters = ChapterProgress([e.chapter for e in examples], shared, before_line=marks.end_line)

    def both(result: Any) -> None:
        marks(result)
        chapters(result)

    Runner(RunOptions(url, ADMIN)).run_all(examples, jobs=1, on_result=both)
    assert shared.getvalue().splitlines() == [
        ".. 2/3",
        "chapter a: 2 passed, 0 failed, 0 skipped [2/3]",
        ". 3/3",
        "chapter h: 1 passed, 0 failed, 0 skipped [3/3]",
    ]
