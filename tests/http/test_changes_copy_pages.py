"""Pages of an initial copy are bounded (spec: changefeeds, initial copies): in rows by
`copy_page_rows` (a 400 naming it), and in pages one user reads at once (a 429)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.feeds import COPY_PAGES_PER_USER, ChangeFeeds
from refimpl.errors import TooManyRequests
from tests.http.conftest import Server, running_server

PAGE_ROWS = 50


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("copy-pages") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(f"copy_page_rows = {PAGE_ROWS}\n")
    with running_server(data) as running:
        running.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        values = ", ".join(f"({n})" for n in range(1, 121))
        running.sql(f"INSERT INTO t VALUES {values}")
        yield running


def _page(server: Server, limit: int, at: object = None):
    params = {"db": "demo", "table": "t", "initial": "true", "format": "json", "limit": limit}
    if at is not None:
        params["from"] = at
    return server.get("/api/changes", params=params)


def test_a_page_over_copy_page_rows_is_a_400_naming_it(server: Server) -> None:
    answer = _page(server, 100_000_000)
    assert answer.status_code == 400, answer.text
    assert "copy_page_rows" in answer.json()["error"]
    assert server.rows("SELECT count(*) AS n FROM t") == [[120]]


def test_pages_within_copy_page_rows_read_the_whole_table(server: Server) -> None:
    seen: list[int] = []
    answer = _page(server, PAGE_ROWS)
    while True:
        assert answer.status_code == 200, answer.text
        body = answer.json()
        seen += [c["row"]["id"] for c in body["changes"] if c["op"] == "initial"]
        if not body["more"]:
            break
        answer = _page(server, PAGE_ROWS, body["next"])
    assert sorted(seen) == list(range(1, 121))


def test_one_user_reads_at_most_two_copy_pages_at_once(tmp_path: Path) -> None:
    connection = refimpl.connect(tmp_path / "data")
    try:
        feeds = ChangeFeeds(connection.instance)
        reader, other = Principal("reader"), Principal("other")
        with feeds.copy_page(reader, 10), feeds.copy_page(reader, 10):
            assert COPY_PAGES_PER_USER == 2
            with pytest.raises(TooManyRequests) as refused:
                with feeds.copy_page(reader, 10):
                    pass
            assert refused.value.retry_after >= 1
            with feeds.copy_page(other, 10):  # another user's pages are its own
                pass
        with feeds.copy_page(reader, 10):  # its pages were answered: it reads again
            pass
    finally:
        connection.close()
