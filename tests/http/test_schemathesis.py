"""Schemathesis against the live server: the answers match spec/openapi.yaml, and no 5xx.

Short, for the default suite (bounded examples); `tools/schemathesis_run.py` runs the long
version (10,000 cases and more, every operation, failures counted rather than stopping).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http.conftest import Server, running_server
from tests.http.schema_checks import CHECKS, STREAM_SETTINGS

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "150"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of this module's own, whose event streams end after 2 s."""
    data = tmp_path_factory.mktemp("schemathesis") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(STREAM_SETTINGS, encoding="utf-8")
    with running_server(data) as running:
        yield running


@pytest.fixture(scope="module")
def api(server: Server) -> schemathesis.schemas.BaseSchema:
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    # Something for the SQL routes to find, so that valid queries answer rows.
    server.sql("CREATE TABLE IF NOT EXISTS t (id INT, name STRING, ts TIMESTAMP)")
    server.sql("INSERT INTO t VALUES (1, 'a', '2026-01-01T00:00:00Z')")
    return schema


def run_cases(server: Server, api, mode: schemathesis.GenerationMode, examples: int) -> None:
    # Half the cases name the database that exists, so they reach past the 404 of `db=`.
    strategy = st.one_of(
        api.as_strategy(generation_mode=mode),
        api.as_strategy(generation_mode=mode, query={"db": "demo"}),
    )
    headers = {"Authorization": f"Bearer {server.token}"}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        case = data.draw(strategy)
        case.call_and_validate(base_url=server.url, headers=headers, checks=CHECKS, timeout=30)

    check()


def test_positive_cases_conform(server: Server, api) -> None:
    run_cases(server, api, schemathesis.GenerationMode.POSITIVE, EXAMPLES)


def test_negative_cases_conform(server: Server, api) -> None:
    run_cases(server, api, schemathesis.GenerationMode.NEGATIVE, EXAMPLES)


def test_anonymous_cases_conform(server: Server, api) -> None:
    strategy = api.as_strategy()

    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        case = data.draw(strategy)
        case.headers = {k: v for k, v in (case.headers or {}).items() if k != "Authorization"}
        case.call_and_validate(base_url=server.url, checks=CHECKS, timeout=30)

    check()
