"""`SessionSlot`: the session a kept plan's calls run for is the one its run names, in the
run's thread, and none outside a run."""

from __future__ import annotations

import threading

import pytest

from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.query.expressions import compile_expression
from refimpl.engine.query.session_functions import SessionFunctions, SessionOf, SessionSlot
from refimpl.sql import ast


def whose(call: ast.FuncCall, scope: Scope, session: SessionOf[str]) -> Compiled:
    return Compiled(lambda row: session(), "STRING")


def compiled(functions: SessionFunctions) -> Compiled:
    return compile_expression(ast.FuncCall("whose", ()), Scope([], functions=functions))


def test_a_call_answers_for_the_run_that_names_its_session():
    slot: SessionSlot[str] = SessionSlot()
    fn = compiled(SessionFunctions({"whose": whose}, slot)).fn
    assert slot.run("u", lambda: fn(())) == "u"
    assert slot.run("v", lambda: (fn(()), slot.run("w", lambda: fn(())), fn(()))) == (
        "v",
        "w",
        "v",
    )
    with pytest.raises(RuntimeError):
        fn(())  # outside any run: no session, never the last run's


def test_each_thread_sees_its_own_run():
    slot: SessionSlot[str] = SessionSlot()
    fn = compiled(SessionFunctions({"whose": whose}, slot)).fn
    entered, seen = threading.Barrier(2), {}

    def run(name: str) -> None:
        def both() -> None:
            entered.wait()  # both runs are open at once
            seen[name] = fn(())

        slot.run(name, both)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("u", "v")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"u": "u", "v": "v"}


def test_a_bound_table_answers_for_its_context():
    fn = compiled(SessionFunctions.bound({"whose": whose}, "u")).fn
    assert fn(()) == "u"
