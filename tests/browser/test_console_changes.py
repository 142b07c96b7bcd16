"""The console's changes panel in headless Chromium: changes as rows a person can read.

A table watched from the start of the log shows its CREATE TABLE, inserts, an update with
the changed value highlighted (and the value before on hover), a delete with its key
decoded into the key column and the row as it was, and a schema change, newest on top.
Watched from now, a table without before-images says "insert or update" for a row it never
saw and shows a delete's decoded key alone; one with before-images (REPLICA IDENTITY FULL)
says update and delete with the old values. Pause holds the rows still while changes are
read; clear empties the list; the history keeps only the last 500. The event stream shows
the same rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Browser, Page
from tests.browser.console_page import (
    WAIT,
    click,
    log_in,
    open_console,
    shot,
    text_of,
)
from tests.browser.site import Site

pytestmark = pytest.mark.browser

HIGHLIGHT = (0xFF, 0xF3, 0xB0)  # the background of a changed value
ROWS = (
    "[...document.querySelectorAll('#changes tbody tr')].map((r) =>"
    " [...r.cells].slice(2).map((c) => c.textContent))"
)


def watch(page: Page, table: str, start: str) -> None:
    assert page.wait_for(
        "[...document.querySelectorAll('#change-table option')]"
        f".some((o) => o.value === '{table}')",
        WAIT,
    )
    page.evaluate(f"document.querySelector('#change-table').value = '{table}'")
    page.evaluate(f"document.querySelector('#change-from').value = '{start}'")
    page.evaluate("document.querySelector('#changes-status').textContent = ''")
    click(page, "#watch")
    # Said once the place to read from is fixed: a commit after it is shown.
    said = "document.querySelector('#changes-status').textContent"
    assert page.wait_for(
        f"{said}.startsWith('watching {table}') || {said}.startsWith('following {table}')", WAIT
    ), text_of(page, "#changes-status")


def rows_are(page: Page, expected: list[list[str]]) -> list[Any]:
    """Waits until the panel's rows (change, then the columns) are `expected`; what it has."""
    page.wait_for(
        f"JSON.stringify({ROWS}) === {json.dumps(json.dumps(expected, separators=(',', ':')))}",
        WAIT,
    )
    return page.evaluate(ROWS)


def test_changes_read_from_the_start_are_rows_with_their_meaning(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    site.sql("CREATE TABLE acct (id INT PRIMARY KEY, name STRING, bal DOUBLE)")
    site.sql("INSERT INTO acct VALUES (1, 'Asha', 10), (2, 'Bikash', 20)")
    page = open_console(browser, site)
    log_in(page, site)
    watch(page, "acct", "start")
    site.sql("UPDATE acct SET bal = 15 WHERE id = 1")
    site.sql("DELETE FROM acct WHERE id = 2")
    assert page.wait_for(f"{ROWS}.length === 5", WAIT)  # read before the column is added
    site.sql("ALTER TABLE acct ADD COLUMN note STRING")
    create = "CREATE TABLE acct (\n  id INT PRIMARY KEY,\n  name STRING,\n  bal DOUBLE\n)"
    expected = [
        ["schema", "ALTER TABLE acct ADD COLUMN note STRING"],
        ["delete", "2", "Bikash", "20", ""],  # the row as the panel saw it, struck through
        ["update", "1", "Asha", "15", ""],
        ["insert", "2", "Bikash", "20", ""],
        ["insert", "1", "Asha", "10", ""],
        ["schema", create],
    ]
    assert rows_are(page, expected) == expected
    heads = page.evaluate("[...document.querySelectorAll('#changes th')].map((c) => c.textContent)")
    assert heads == [
        "lsn",
        "committed (UTC)",
        "change",
        "id INT key",
        "name STRING",
        "bal DOUBLE",
        "note STRING",
    ]
    changed = page.evaluate(
        "[...document.querySelectorAll('#changes td.changed')].map((c) =>"
        " [c.closest('tr').cells[2].textContent, c.textContent, c.title])"
    )
    assert changed == [["update", "15", "was 10"]]  # only the value that changed

    picture = shot(page, "#changes", tmp_path / "changes.png")
    assert picture.count(HIGHLIGHT, (0, 0, picture.width, picture.height), slack=6) > 100

    # Pause: changes are read but the rows stand still; resume shows them; clear empties.
    click(page, "#pause")
    site.sql("INSERT INTO acct VALUES (3, 'Chandra', 30, 'new')")
    assert page.wait_for(
        "document.querySelector('#changes-count').textContent.startsWith('paused: 7 change(s)')",
        WAIT,
    ), text_of(page, "#changes-count")
    assert len(page.evaluate(ROWS)) == 6
    click(page, "#pause")
    assert page.wait_for("document.querySelectorAll('#changes tbody tr').length === 7", WAIT)
    assert page.evaluate(ROWS)[0] == ["insert", "3", "Chandra", "30", "new"]
    click(page, "#clear")
    assert page.wait_for("document.querySelectorAll('#changes tbody tr').length === 0", WAIT)
    site.sql("UPDATE acct SET note = 'x' WHERE id = 3")
    assert rows_are(page, [["update", "3", "Chandra", "30", "x"]]) == [
        ["update", "3", "Chandra", "30", "x"]
    ]


def test_changes_from_now_use_before_images_where_the_table_keeps_them(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    site.sql(
        "CREATE TABLE ticks (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
        " PARTITION BY DAY, SYMBOL(symbol) DEDUP KEY (symbol, time)"
    )
    site.sql("CREATE TABLE kept (id INT PRIMARY KEY, v STRING) REPLICA IDENTITY FULL")
    site.sql(
        "INSERT INTO ticks VALUES ('2026-03-02T10:00:00Z', 'NABIL', 10),"
        " ('2026-03-02T10:01:00Z', 'NABIL', 10), ('2026-03-02T10:00:00Z', 'NEPSE', 99),"
        " ('2026-03-02T10:01:00Z', 'NEPSE', 99)"
    )
    site.sql("INSERT INTO kept VALUES (1, 'a'), (2, 'b')")
    page = open_console(browser, site)
    log_in(page, site)

    watch(page, "ticks", "now")  # the rows were written before: the panel never saw them
    at = "time = '2026-03-02T10:00:00Z'"
    site.sql(f"UPDATE ticks SET price = 11 WHERE symbol = 'NABIL' AND {at}")
    site.sql(f"DELETE FROM ticks WHERE symbol = 'NEPSE' AND {at}")
    site.sql(f"DELETE FROM ticks WHERE symbol = 'NABIL' AND {at}")
    site.sql("INSERT INTO ticks VALUES ('2026-03-02T10:00:00Z', 'NABIL', 12)")
    time = "2026-03-02T10:00:00.000Z"
    expected = [
        ["insert", time, "NABIL", "12"],  # its key was deleted: not there before
        ["delete", time, "NABIL", "11"],  # the row as the update showed it
        ["delete", time, "NEPSE", ""],  # never seen: the key decoded into its columns
        ["insert or update", time, "NABIL", "11"],  # no before-image, never seen
    ]
    assert rows_are(page, expected) == expected
    assert page.evaluate("document.querySelectorAll('#changes th.key').length") == 2

    watch(page, "kept", "now")
    site.sql("UPDATE kept SET v = 'z' WHERE id = 2")
    site.sql("DELETE FROM kept WHERE id = 1")
    expected = [["delete", "1", "a"], ["update", "2", "z"]]  # told by the before-images
    assert rows_are(page, expected) == expected
    assert page.evaluate(
        "[...document.querySelectorAll('#changes td.changed')].map((c) => c.title)"
    ) == ["was b"]
    shot(page, "#changes-panel", tmp_path / "changes-before-images.png")


def test_the_history_keeps_the_last_500(browser: Browser, site: Site) -> None:
    site.sql("CREATE TABLE many (id INT PRIMARY KEY)")
    page = open_console(browser, site)
    log_in(page, site)
    watch(page, "many", "start")
    site.sql("INSERT INTO many VALUES " + ", ".join(f"({n})" for n in range(1, 601)))
    assert page.wait_for(
        "document.querySelector('#changes-count').textContent"
        " === '601 change(s) of many, the last 500 shown'",
        WAIT,
    ), text_of(page, "#changes-count")
    rows = page.evaluate(ROWS)
    assert len(rows) == 500 and rows[0] == ["insert", "600"] and rows[-1] == ["insert", "101"]


def test_the_event_stream_shows_the_same_rows(browser: Browser, site: Site) -> None:
    site.sql("CREATE TABLE acct (id INT PRIMARY KEY, name STRING, bal DOUBLE)")
    page = open_console(browser, site)
    log_in(page, site)
    detected = page.wait_for("document.querySelector('#use-stream').dataset.detected", WAIT)
    if detected != "yes":
        pytest.skip("this server has no POST /stream/tickets")
    click(page, "#use-stream")
    watch(page, "acct", "now")
    site.sql("INSERT INTO acct VALUES (1, 'Asha', 10)")
    site.sql("UPDATE acct SET bal = 15 WHERE id = 1")
    site.sql("DELETE FROM acct WHERE id = 1")
    site.sql("ALTER TABLE acct ADD COLUMN note STRING")
    expected = [
        ["schema", "ALTER TABLE acct ADD COLUMN note STRING"],
        ["delete", "1", "Asha", "15", ""],
        ["update", "1", "Asha", "15", ""],
        ["insert or update", "1", "Asha", "10", ""],  # read from now: it may have been there
    ]
    assert rows_are(page, expected) == expected
    assert page.evaluate(
        "[...document.querySelectorAll('#changes td.changed')].map((c) => c.title)"
    ) == ["was 10"]
