"""Hostile HTTP framing and parameters over raw sockets, against a real server on loopback.

Every request below is sent on a connection of its own, followed by a pipelined `GET /health`
(so a server that reads a body's end differently from its client shows it by answering
bytes of the body as a request), then the connection is half-closed. What must hold, for
every request: no 5xx (but a 503 with `Retry-After`), every error a JSON body with an
`error` sentence, an answer (a connection closed without a word is no answer), the server
alive afterwards (`/health` within 2 s), no traceback in its log, and nothing committed by a
request it refused. The body of every request that carries one would insert a row, so a
refused request that committed shows in the table.

The cases: bad chunk sizes, chunk extensions, duplicate and conflicting Content-Length,
Transfer-Encoding variants, HTTP/0.9 and other versions, control bytes in headers, over-long
request lines and heads, numeric parameters of 5,000 digits or `²`, bad UTF-8, unknown
parameters. `tools/fuzz_sql.py --requests N` runs the generated mix for longer.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.http.conftest import Server
from tests.http.fuzz_judge import Target, shorten
from tests.http.hostile_requests import framing_cases, parameter_cases, raw_requests, send

EXAMPLES = int(os.environ.get("HOSTILE_FUZZ_EXAMPLES", "200"))


@pytest.fixture
def target(server: Server) -> Target:
    return Target.on(server)


@pytest.mark.parametrize("cases", [framing_cases, parameter_cases])
def test_every_hostile_request_gets_a_clear_answer(target: Target, cases) -> None:
    found = {}
    for name, data in cases(target).items():
        statuses, problems = send(target, data)
        if problems:
            found[name] = (statuses, problems)
    assert not found, found


def test_generated_hostile_requests(target: Target) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=raw_requests(target))
    def check(data: bytes) -> None:
        statuses, problems = send(target, data)
        assert not problems, (shorten(data.decode("latin-1"), 600), statuses, problems)

    check()
