"""The console page at `/`, used in headless Chromium as a person would.

Keys are typed and buttons clicked through DevTools input events (not by setting values
from script): log in with the admin token, run SQL and see the table, see a syntax error's
place marked in the editor, watch a table's changes and see a commit the test makes appear
(once each), also across a restart of the server on the same port, and on the event stream.
The chart and the changes panel have tests of their own (test_console_chart.py,
test_console_changes.py). A screenshot of the page is saved in the test's temporary folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import Browser
from tests.browser.console_page import (
    WAIT,
    click,
    open_console,
    run_sql,
    screenshot,
    text_of,
    type_into,
)
from tests.browser.site import TRADES, Site

pytestmark = pytest.mark.browser

# The price cells of the changes panel's rows (after lsn, committed, change, time, symbol).
PRICES = (
    "[...document.querySelectorAll('#changes tbody tr.change:not(.schema)')]"
    ".map((r) => r.cells[5].textContent)"
)


def trade(second: int, symbol: str, price: float) -> str:
    return f"('2026-03-02T10:00:{second:02d}Z', '{symbol}', {price})"


def test_the_console_runs_sql_marks_errors_and_shows_changes_live(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    page = open_console(browser, site)
    assert "log in" in text_of(page, "#who")  # no session yet: nothing may be read

    type_into(page, "#token", site.token)
    click(page, "#login-button")
    assert page.wait_for(
        "document.querySelector('#who').textContent === 'signed in as admin'", WAIT
    ), text_of(page, "#who")

    run_sql(page, TRADES)
    assert text_of(page, "#results") == "table 'trades' created"
    run_sql(
        page,
        "INSERT INTO trades VALUES "
        + ", ".join([trade(1, "NABIL", 10), trade(2, "NABIL", 12), trade(3, "NEPSE", 99)]),
    )
    # The chart found the new table, and charts its first symbol once it has rows.
    candles = "document.querySelector('#chart').dataset.candles"
    assert page.wait_for(f"{candles} === '1'", WAIT), text_of(page, "#chart-status")
    assert text_of(page, "#chart-source") == "demo.trades (trades)"
    run_sql(page, "SELECT symbol, price FROM trades ORDER BY price")
    cells = page.evaluate(
        "[...document.querySelectorAll('#results tbody tr')].map((r) =>"
        " [...r.cells].map((c) => c.textContent))"
    )
    assert cells == [["NABIL", "10"], ["NABIL", "12"], ["NEPSE", "99"]]
    assert text_of(page, "#results th") == "symbol SYMBOL"

    run_sql(page, "SELECT (1 + 2))")
    assert "line 1, column 15" in text_of(page, "#sql-error")
    marked = page.evaluate(
        "(() => { const m = document.querySelector('#sql-marks mark');"
        " const before = m.previousSibling.textContent;"
        " return [before.length, m.textContent, document.querySelector('#sql').selectionStart];"
        " })()"
    )
    assert marked == [14, ")", 14]  # the 15th character, and the caret put there
    screenshot(page, tmp_path / "console-error.png")
    type_into(page, "#sql", "SELECT 1")  # editing clears the mark
    assert page.evaluate("document.querySelector('#sql-marks mark')") is None

    assert page.wait_for(
        "[...document.querySelectorAll('#change-table option')].some((o) => o.value === 'trades')",
        WAIT,
    )
    page.evaluate("document.querySelector('#change-table').value = 'trades'")
    click(page, "#watch")
    shown = "document.querySelectorAll('#changes tbody tr').length"
    assert page.wait_for(f"{shown} >= 4", WAIT), text_of(page, "#changes-status")  # ddl + 3
    site.sql("INSERT INTO trades VALUES " + trade(4, "NABIL", 123.5))
    has = f"{PRICES}.includes({{}})"
    assert page.wait_for(has.format("'123.5'"), WAIT), text_of(page, "#changes-status")

    site.restart()  # the page reads on from its last id
    site.sql("INSERT INTO trades VALUES " + trade(5, "NABIL", 456.25))
    assert page.wait_for(has.format("'456.25'"), WAIT), text_of(page, "#changes-status")
    assert sorted(page.evaluate(PRICES)) == sorted(["10", "12", "99", "123.5", "456.25"])

    run_sql(page, "SELECT * FROM trades ORDER BY time")
    screenshot(page, tmp_path / "console.png")

    click(page, "#logout")  # the session ends: the page can read nothing more
    assert page.wait_for("document.querySelector('#who').textContent === 'signed out'", WAIT)
    run_sql(page, "SELECT 1")
    assert text_of(page, "#sql-status").startswith(("401", "403")), text_of(page, "#sql-error")


def test_the_console_follows_the_event_stream_with_a_ticket(browser: Browser, site: Site) -> None:
    site.sql(TRADES)
    page = open_console(browser, site)
    type_into(page, "#token", site.token)
    click(page, "#login-button")
    assert page.wait_for("document.querySelector('#who').textContent.startsWith('signed in')", WAIT)
    detected = page.wait_for("document.querySelector('#use-stream').dataset.detected", WAIT)
    if detected != "yes":
        pytest.skip(
            "this server has no POST /stream/tickets: "
            + page.evaluate("document.querySelector('#use-stream').title")
        )
    click(page, "#use-stream")
    page.evaluate("document.querySelector('#change-table').value = 'trades'")
    click(page, "#watch")
    assert page.wait_for(
        "document.querySelector('#changes-status').textContent.startsWith('following')", WAIT
    ), text_of(page, "#changes-status")
    site.sql(
        "INSERT INTO trades VALUES " + ", ".join([trade(1, "NABIL", 10.5), trade(2, "NABIL", 11.5)])
    )
    has = f"{PRICES}.includes({{}})"
    assert page.wait_for(has.format("'11.5'"), WAIT), text_of(page, "#changes-status")
    site.restart()  # a new ticket, and last-event-id: nothing missed, nothing twice
    site.sql("INSERT INTO trades VALUES " + trade(3, "NABIL", 12.5))
    assert page.wait_for(has.format("'12.5'"), WAIT), text_of(page, "#changes-status")
    assert sorted(page.evaluate(PRICES)) == ["10.5", "11.5", "12.5"]  # each once
