"""The runner's budget of wait places (conformance.wait_places): what an example holds, the
scheduling that keeps the examples running at once within the budget, and the suite's
live queries at its default jobs against a default refimpl server."""

from __future__ import annotations

import io
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import cli
from conformance.cases import Example
from conformance.report import print_report
from conformance.results import PASSED, ExampleResult
from conformance.runner import Runner, RunOptions
from conformance.wait_places import places_needed, run_within_budget
from tests.conformance.fake_http import http_example
from tests.http.conftest import running_server

SUB = "SUBSCRIBE SELECT id FROM t"


def _get(path: str, background: str = "", auth: str = "admin", **query: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"request": {"path": path, "query": query, "auth": auth}}
    if background:
        step["background"] = background
    return step


def _example(*steps: dict[str, Any], ex_id: str = "w") -> Example:
    example: Example = http_example(ex_id, {"steps": list(steps)})
    return example


@pytest.mark.parametrize(
    ("step", "needed"),
    [
        (_get("/api/changes", table="t", wait=0), 0),
        (_get("/api/changes", table="t", format="json"), 0),  # json's default wait is 0
        (_get("/api/changes", table="t", format="json", wait=200), 1),
        (_get("/api/changes", table="t"), 1),  # sse waits 25 s by default
        (_get("/api/changes", table="t", format="json", squash=1), 1),
        (_get("/api/subscribe", query=SUB), 0),  # the first answer comes at once
        (_get("/api/subscribe", query=SUB, id="{{v}}"), 1),
        (_get("/api/subscribe", query=SUB, id="{{v}}", wait=0), 0),
        (_get("/api/subscribe", query=SUB, id="{{v}}", wait="{{ms}}"), 1),
        (_get("/api/subscribe", query=SUB, stream="true"), 1),
        (_get("/stream/changes", tables="t"), 0),  # streams have a capacity of their own
    ],
)
def test_which_requests_hold_a_place(step: dict[str, Any], needed: int) -> None:
    assert places_needed(_example(step)) == needed


def test_a_resumed_live_query_by_its_header_holds_a_place() -> None:
    step = _get("/api/subscribe", query=SUB)
    step["request"]["headers"] = {"last-event-id": "{{v}}"}
    assert places_needed(_example(step)) == 1


def test_background_waits_hold_their_places_until_awaited() -> None:
    one = _get("/api/changes", "a", table="t")
    two = _get("/api/subscribe", "b", query=SUB, stream="true")
    # Both open, then a foreground long poll on top: three at once.
    assert places_needed(_example(one, two, _get("/api/changes", table="t"))) == 3
    # The first awaited before the second starts: one at a time.
    assert places_needed(_example(one, {"await": "a"}, two, {"await": "b"})) == 1
    # A background event stream holds none.
    assert places_needed(_example(_get("/stream/changes", "s"), one)) == 1


def test_another_users_second_place_needs_its_fair_share() -> None:
    # A user holding k places takes another only while more than k are free: its second
    # needs two free besides the one it holds.
    first = _get("/api/changes", "a", auth="tok", table="t")
    second = _get("/api/changes", "b", auth="tok", table="t")
    assert places_needed(_example(first, second)) == 3
    # The admin takes any free place.
    assert places_needed(_example(_get("/api/changes", "a", table="t"), second)) == 2


def test_sql_examples_hold_none() -> None:
    from conformance.cases import example_from_json

    sql = example_from_json({"id": "s", "kind": "sql", "records": []})
    assert places_needed(sql) == 0


class _Ledger:
    """What a schedule did: the most places and jobs held at once, and each item's runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = self.running = self.most_held = self.most_running = 0
        self.runs: dict[int, int] = {}
        self.started: list[int] = []

    def run(self, item: tuple[int, int]) -> int:
        index, need = item
        with self.lock:
            self.held += need
            self.running += 1
            self.most_held = max(self.most_held, self.held)
            self.most_running = max(self.most_running, self.running)
            self.runs[index] = self.runs.get(index, 0) + 1
            self.started.append(index)
        time.sleep(random.random() / 1000)  # the items end in an order of their own
        with self.lock:
            self.held -= need
            self.running -= 1
        return index


def _schedule(needs: list[int], jobs: int, budget: int, ledger: _Ledger) -> list[int]:
    """Run the schedule on a thread of its own; the items whose `done` came back."""
    done: list[int] = []
    items = list(enumerate(needs))
    worker = threading.Thread(
        target=run_within_budget,
        args=(items, jobs, budget, lambda i: i[1], ledger.run, lambda i, r: done.append(r)),
        daemon=True,
    )
    worker.start()
    worker.join(120)  # a guard against a deadlock, far beyond any schedule's length
    assert not worker.is_alive(), "the schedule never ended: a deadlock"
    return done


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(1, 4),
    jobs=st.integers(1, 8),
    data=st.data(),
)
def test_the_budget_is_never_exceeded_and_every_item_runs_once(
    budget: int, jobs: int, data: st.DataObject
) -> None:
    needs = data.draw(st.lists(st.integers(0, budget), max_size=24))
    ledger = _Ledger()
    done = _schedule(needs, jobs, budget, ledger)
    assert ledger.most_held <= budget
    assert ledger.most_running <= jobs
    assert sorted(done) == list(range(len(needs)))
    assert ledger.runs == dict.fromkeys(range(len(needs)), 1)


def test_an_item_that_needs_every_place_is_not_passed_by() -> None:
    # Among items of one place each, one needs all four: it runs (no deadlock), and no
    # item after it that holds a place starts before it; those that hold none may.
    needs = [1, 1, 1, 4, 1, 0, 1, 0, 1, 1]
    ledger = _Ledger()
    done = _schedule(needs, 8, 4, ledger)
    assert sorted(done) == list(range(len(needs)))
    assert ledger.most_held <= 4
    big = ledger.started.index(3)
    assert all(needs[i] == 0 for i in ledger.started[:big] if i > 3)


def test_an_item_over_the_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="needs 3 places, more than the 2"):
        run_within_budget([3], 4, 2, lambda n: n, lambda n: n, lambda n, r: None)


class _CountingRunner(Runner):
    """A runner whose examples run nowhere: it records the places held while each runs, and
    how many others ran as each started."""

    def __init__(self) -> None:
        super().__init__(RunOptions("http://127.0.0.1:1"))
        self.ledger = _Ledger()
        self.others_running: dict[str, int] = {}

    def run(self, example: Example) -> ExampleResult:
        with self.ledger.lock:
            self.others_running[example.id] = self.ledger.running
        self.ledger.run((int(example.id.split("-")[1]), places_needed(example)))
        return ExampleResult(example, PASSED)


def test_run_all_runs_an_example_over_the_budget_alone_and_says_so() -> None:
    wait = _get("/api/changes", table="t")
    two = [_get("/api/changes", "a", table="t"), wait]  # two at once
    examples = [_example(*(two if i == 2 else [wait]), ex_id=f"e-{i}") for i in range(6)]
    runner = _CountingRunner()
    results = runner.run_all(examples, jobs=4, wait_places=1)
    assert [r.outcome for r in results] == [PASSED] * 6
    assert runner.ledger.most_held == 2  # e-2's two, held alone
    assert runner.ledger.started[-1] == 2 and runner.others_running["e-2"] == 0
    assert [bool(r.note) for r in results] == [False, False, True, False, False, False]
    assert "ran alone" in results[2].note and "--wait-places 1" in results[2].note
    out = io.StringIO()
    print_report(results, out)
    assert "note, 1 example(s): ran alone: it may hold 2" in out.getvalue()
    assert "(e-2)" in out.getvalue()


def test_wait_places_must_be_one_or_more(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--url", "http://127.0.0.1:1", "--wait-places", "0"])
    assert exited.value.code == 2
    assert "must be 1 or more" in capsys.readouterr().err


def test_live_queries_pass_at_eight_jobs_against_a_default_server(tmp_path: Path) -> None:
    # A default server has 16 threads, so 4 wait places; eight examples at once used to
    # leave a background long poll none (answered at once: subscribe-id-wins-and-wait
    # failed). The default budget keeps the waiting examples within them.
    with running_server(tmp_path / "data", "--threads", "16") as server:
        report = tmp_path / "report.json"
        code = cli.main(
            [
                "--url",
                server.url,
                "--token",
                server.token,
                "--only",
                "subscribe*",
                "--jobs",
                "8",
                "--json",
                str(report),
            ]
        )
    assert code == 0
