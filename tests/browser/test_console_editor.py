"""The console's SQL editor in headless Chromium: several statements, pages, CSV, history,
the schema tree.

A text of several statements shows each statement's answer in turn (a `;` inside a string
or a comment does not cut); a transaction is sent whole, so its ROLLBACK rolls back; an
error stops the run and is marked where it is in the editor. A big answer is shown a page
of 100 rows at a time, and its CSV download holds every row. What was run comes back with
Ctrl+Up, also after the page is loaded again. The schema tree lists databases, tables and
columns, and puts a table's query in the editor.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.browser.conftest import Browser, Page
from tests.browser.console_page import (
    WAIT,
    click,
    log_in,
    open_console,
    run_sql,
    screenshot,
    text_of,
    type_into,
)
from tests.browser.site import Site

pytestmark = pytest.mark.browser

TRICKY = 'a;b, "c"'  # a ; a comma and quotes: the splitter and the CSV must keep it whole
SCRIPT = (
    "-- three statements; the ; in this comment cuts nothing\n"
    "CREATE TABLE n (id INT PRIMARY KEY, s STRING);\n"
    "INSERT INTO n VALUES (1, '"
    + TRICKY
    + "'), "
    + ", ".join(f"({n}, 'row {n}')" for n in range(2, 251))
    + ";\nSELECT id, s FROM n ORDER BY id"
)
BLOCKS = "document.querySelectorAll('#results .result')"


def first_cells(page: Page, block: int) -> list[str]:
    return page.evaluate(
        f"[...{BLOCKS}[{block}].querySelectorAll('tbody tr')].map((r) => r.cells[0].textContent)"
    )


def ctrl_up(page: Page) -> None:
    for kind in ("rawKeyDown", "keyUp"):
        page.call(
            "Input.dispatchKeyEvent",
            type=kind,
            key="ArrowUp",
            code="ArrowUp",
            windowsVirtualKeyCode=38,
            modifiers=2,  # Ctrl
        )


def test_every_statement_answers_in_turn_with_pages_and_csv(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    page = open_console(browser, site)
    log_in(page, site)
    run_sql(page, SCRIPT)
    assert text_of(page, "#sql-status").startswith("3 requests, 200 in")
    captions = page.evaluate(
        f"[...{BLOCKS}].map((b) => b.querySelector('.caption code').textContent)"
    )
    assert captions[0] == (
        "-- three statements; the ; in this comment cuts nothing "
        "CREATE TABLE n (id INT PRIMARY KEY, s STRING)"
    )
    assert captions[2] == "SELECT id, s FROM n ORDER BY id"
    assert page.evaluate(f"{BLOCKS}[0].querySelector('.message').textContent") == (
        "table 'n' created"
    )
    assert "250" in page.evaluate(f"{BLOCKS}[1].querySelector('.message').textContent")

    # The answer of 250 rows, a page at a time.
    assert first_cells(page, 2) == [str(n) for n in range(1, 101)]
    assert page.evaluate(f"{BLOCKS}[2].querySelector('tbody td:nth-child(2)').textContent") == (
        TRICKY
    )
    where = f"{BLOCKS}[2].querySelector('.where').textContent"
    assert page.evaluate(where) == "rows 1-100 of 250, page 1 of 3"
    click(page, "#results .result:nth-child(3) button.next")
    click(page, "#results .result:nth-child(3) button.next")
    assert first_cells(page, 2) == [str(n) for n in range(201, 251)]
    assert page.evaluate(where) == "rows 201-250 of 250, page 3 of 3"
    assert page.evaluate(f"{BLOCKS}[2].querySelector('button.next').disabled") is True
    click(page, "#results .result:nth-child(3) button.previous")
    assert first_cells(page, 2)[0] == "101"

    # CSV of all 250 rows, downloaded as a person would (the browser saves the file).
    folder = tmp_path / "downloads"
    folder.mkdir()
    browser.call("Browser.setDownloadBehavior", behavior="allow", downloadPath=str(folder))
    click(page, "#results .result:nth-child(3) button.csv")
    saved = folder / "result-3.csv"
    deadline = time.monotonic() + WAIT
    while not saved.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = saved.read_bytes().decode().split("\r\n")
    assert lines[:3] == ["id,s", '1,"a;b, ""c"""', "2,row 2"]
    assert len(lines) == 252 and lines[250] == "250,row 250" and lines[251] == ""
    screenshot(page, tmp_path / "editor.png")

    # A transaction is one request: its ROLLBACK rolls the DELETE back.
    run_sql(page, "BEGIN;\nDELETE FROM n;\nROLLBACK;\nSELECT count(*) AS n_left FROM n")
    assert text_of(page, "#sql-status").startswith("2 requests, 200 in")
    assert page.evaluate(f"{BLOCKS}[1].querySelector('tbody td').textContent") == "250"
    assert site.sql("SELECT count(*) FROM n")["dataset"] == [[250]]

    # An error stops the run; its place is marked in the editor, not in the statement alone.
    text = "SELECT 1;\nSELECT (1 + 2));\nSELECT 3"
    run_sql(page, text)
    assert page.evaluate(f"{BLOCKS}.length") == 1
    error = text_of(page, "#sql-error")
    assert "in statement 2 of 3; the ones after it were not run" in error, error
    assert "in the editor at line 2, column 15" in error, error
    marked = page.evaluate(
        "(() => { const m = document.querySelector('#sql-marks mark');"
        " return [m.previousSibling.textContent.length, m.textContent]; })()"
    )
    assert marked == [text.index("))") + 1, ")"]

    type_into(page, "#sql", "-- only a comment; nothing else")
    click(page, "#run")
    assert text_of(page, "#sql-status") == "nothing to run: the text holds only comments"


def test_history_and_the_schema_tree(browser: Browser, site: Site, tmp_path: Path) -> None:
    site.sql("CREATE TABLE acct (id INT PRIMARY KEY, name STRING, bal DOUBLE)")
    page = open_console(browser, site)
    log_in(page, site)
    run_sql(page, "SELECT 1 AS one")
    run_sql(page, "SELECT 2 AS two")
    page.navigate(site.server.url + "/")  # the history is kept across loads of the page
    assert page.evaluate("window.consoleReady") is True
    click(page, "#sql")
    ctrl_up(page)
    assert page.evaluate("document.querySelector('#sql').value") == "SELECT 2 AS two"
    ctrl_up(page)
    assert page.evaluate("document.querySelector('#sql').value") == "SELECT 1 AS one"
    options = page.evaluate("[...document.querySelectorAll('#history option')].map((o) => o.text)")
    assert options[1:3] == ["SELECT 2 AS two", "SELECT 1 AS one"]

    # The tree: the database, its table, the table's columns; "query" fills the editor.
    assert page.wait_for("document.querySelector('#schema details.database') !== null", WAIT)
    click(page, "#schema details.database[data-path='demo'] > summary")
    assert page.wait_for(
        "document.querySelector(\"#schema details[data-path='demo.acct']\") !== null", WAIT
    ), text_of(page, "#schema")
    click(page, "#schema details[data-path='demo.acct'] > summary .name")
    columns = "[...document.querySelectorAll('#schema .column')].map((c) => c.textContent)"
    assert page.wait_for(f"{columns}.length === 3", WAIT)
    assert page.evaluate(columns) == ["id INT key", "name STRING", "bal DOUBLE"]
    click(page, "#schema details[data-path='demo.acct'] button.query")
    assert page.evaluate("document.querySelector('#sql').value") == "SELECT * FROM acct LIMIT 100"
    click(page, "#run")
    assert page.wait_for(f"{BLOCKS}.length === 1", WAIT)
    assert page.wait_for(f"{columns}.length === 3", WAIT)  # drawn anew, still open
    screenshot(page, tmp_path / "schema.png")
    type_into(page, "#sql", "CREATE TABLE later (x INT)")
    click(page, "#run")  # the open database shows the new table
    assert page.wait_for(
        "document.querySelector(\"#schema details[data-path='demo.later']\") !== null", WAIT
    ), text_of(page, "#schema")
