"""The console's candle chart in headless Chromium, checked by what a person would see.

On a fresh `serve --sample` the chart draws the sample's candles after logging in, with no
typing; the screenshot of the chart has green and red candles across its width; the
crosshair's values are the database's; the wheel zooms and "show all" zooms out; a commit
adds a candle live. Raw trades are charted too, as candles made from their prices, live and
by polling, and by polling when the live query cannot connect; after a restart of the server
the chart goes live again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import Browser, Page
from tests.browser.console_page import (
    WAIT,
    box_of,
    click,
    log_in,
    open_console,
    screenshot,
    shot,
    text_of,
)
from tests.browser.site import TRADES, Site

pytestmark = pytest.mark.browser

UP = (0x1A, 0x7F, 0x4B)  # the console's colours of a rising and a falling candle
DOWN = (0xC2, 0x3B, 0x22)
CANDLES = "document.querySelector('#chart').dataset.candles"
LAST = "JSON.parse(document.querySelector('#chart').dataset.last || 'null')"


@pytest.fixture
def sample(tmp_path: Path) -> Iterator[Site]:
    with Site(tmp_path, "--sample") as running:
        yield running


def visible_range(page: Page) -> float:
    """How many bars the chart shows across its width (the logical range's length)."""
    return page.evaluate(
        "(() => { const r = window.refimplConsole.candles.chart.timeScale()"
        ".getVisibleLogicalRange(); return r.to - r.from; })()"
    )


def trade(second: int, symbol: str, price: float) -> str:
    return f"('2026-03-02T10:00:{second:02d}Z', '{symbol}', {price})"


def test_a_fresh_sample_server_charts_its_candles_with_no_typing(
    browser: Browser, sample: Site, tmp_path: Path
) -> None:
    page = open_console(browser, sample)
    log_in(page, sample)
    assert page.wait_for(f"{CANDLES} === '240'", WAIT), text_of(page, "#chart-status")
    assert page.evaluate("document.querySelector('#chart-source').value") == "sample.ochl_minutes"
    assert page.evaluate("document.querySelector('#chart-symbol').value") == "CITY"
    assert text_of(page, "#chart-status") == "live: 240 candle(s) of CITY"
    first, last = sample.sql(
        "SELECT time, open, high, low, close FROM ochl_minutes WHERE symbol = 'CITY'"
        " AND (time = '2026-09-24T05:15:00Z' OR time = '2026-09-24T09:14:00Z') ORDER BY time",
        "sample",
    )["dataset"]
    assert page.evaluate(LAST) == last
    legend = text_of(page, "#chart-legend")  # the last candle, until the crosshair moves
    assert legend.startswith("CITY  2026-09-24 09:14:00 UTC") and f"C {last[4]}" in legend

    picture = shot(page, "#chart", tmp_path / "chart-sample.png")
    plot = (0, 0, picture.width - 70, picture.height - 30)  # without the price and time axes
    rising, falling = picture.columns_with(UP, plot), picture.columns_with(DOWN, plot)
    assert rising > 100 and falling > 100, (rising, falling)  # 240 candles over ~500 columns
    assert rising + falling > 200  # about one column a candle: all 240 drawn, side by side
    assert text_of(page, ".price-title") == "price" and text_of(page, ".time-title") == "time (UTC)"

    # The crosshair: the mouse over the plot's left edge names the first candles' values.
    x, y, width, height = box_of(page, "#chart")
    page.call("Input.dispatchMouseEvent", type="mouseMoved", x=x + 3, y=y + height / 2)
    assert page.wait_for(
        "document.querySelector('#chart-legend').dataset.time !== '2026-09-24T09:14:00.000Z'", WAIT
    )
    hovered = page.evaluate("document.querySelector('#chart-legend').dataset.time")
    row = sample.sql(
        f"SELECT open, high, low, close FROM ochl_minutes WHERE symbol = 'CITY'"
        f" AND time = '{hovered}'",
        "sample",
    )["dataset"][0]
    legend = text_of(page, "#chart-legend")
    assert [f"O {row[0]}", f"H {row[1]}", f"L {row[2]}", f"C {row[3]}"] == [
        part for part in legend.split("   ") if part[:2] in ("O ", "H ", "L ", "C ")
    ]
    assert hovered < "2026-09-24T05:30:00.000Z", hovered
    assert first[0] == "2026-09-24T05:15:00.000Z"

    # Zoom: the wheel over the plot shows fewer candles; "show all" shows them all again.
    whole = visible_range(page)
    for _ in range(3):
        page.call(
            "Input.dispatchMouseEvent",
            type="mouseWheel",
            x=x + width / 2,
            y=y + height / 2,
            deltaX=0,
            deltaY=-300,
        )
    assert page.wait_for(
        f"window.refimplConsole.candles.chart.timeScale()"
        f".getVisibleLogicalRange().to - window.refimplConsole.candles.chart"
        f".timeScale().getVisibleLogicalRange().from < {whole * 0.8}",
        WAIT,
    )
    zoomed = visible_range(page)
    click(page, "#chart-fit")
    assert page.wait_for(
        "(() => { const r = window.refimplConsole.candles.chart.timeScale()"
        f".getVisibleLogicalRange(); return r.to - r.from > {zoomed * 1.2}; }})()",
        WAIT,
    )

    # Live: a new minute of CITY arrives as a new candle, with nothing clicked.
    sample.sql(
        "INSERT INTO ochl_minutes VALUES ('2026-09-24T09:15:00Z', 'CITY', 240, 260, 239, 255, 7)",
        "sample",
    )
    assert page.wait_for(f"{CANDLES} === '241'", WAIT), text_of(page, "#chart-status")
    assert page.evaluate(LAST) == ["2026-09-24T09:15:00.000Z", 240, 260, 239, 255]
    click(page, "#chart-fit")
    screenshot(page, tmp_path / "console-sample.png")
    assert page.evaluate("window.cspRefused") == []  # the vendored library runs under the CSP


def test_raw_trades_are_charted_as_candles_live_and_by_polling(
    browser: Browser, site: Site, tmp_path: Path
) -> None:
    site.sql(TRADES)
    site.sql(
        "INSERT INTO trades VALUES "
        + ", ".join([trade(1, "NABIL", 10), trade(2, "NABIL", 12), trade(3, "NEPSE", 99)])
    )
    page = open_console(browser, site)
    log_in(page, site)
    assert page.wait_for(f"{CANDLES} === '1'", WAIT), text_of(page, "#chart-status")
    assert page.evaluate("document.querySelector('#chart-source').value") == "demo.trades"
    assert text_of(page, "#chart-source") == "demo.trades (trades)"
    assert text_of(page, "#chart-status").startswith("live")
    assert page.evaluate(LAST) == ["2026-03-02T10:00:00.000Z", 10, 12, 10, 12]
    site.sql("INSERT INTO trades VALUES ('2026-03-02T10:01:00Z', 'NABIL', 15)")
    assert page.wait_for(f"{CANDLES} === '2'", WAIT), text_of(page, "#chart-status")
    assert page.evaluate(LAST) == ["2026-03-02T10:01:00.000Z", 15, 15, 15, 15]
    picture = shot(page, "#chart", tmp_path / "chart-trades.png")
    assert picture.count(UP, (0, 0, picture.width - 70, picture.height - 30)) > 20

    page.evaluate("document.querySelector('#chart-mode').value = 'poll'")
    click(page, "#chart-button")
    assert page.wait_for(f"{CANDLES} === '2'", WAIT), text_of(page, "#chart-status")
    site.sql("INSERT INTO trades VALUES ('2026-03-02T10:02:00Z', 'NABIL', 9)")
    assert page.wait_for(f"{CANDLES} === '3'", WAIT), text_of(page, "#chart-status")
    assert text_of(page, "#chart-status").startswith("polling")
    picture = shot(page, "#chart", tmp_path / "chart-trades-polled.png")
    plot = (0, 0, picture.width - 70, picture.height - 30)
    assert picture.count(DOWN, plot) == 0  # 10 to 12, then 15 and 9 alone: none fell
    assert picture.runs_with(UP, plot) == 3  # all three candles in sight, apart


def test_the_chart_polls_when_the_live_query_cannot_connect(browser: Browser, site: Site) -> None:
    site.sql(TRADES)
    site.sql("INSERT INTO trades VALUES " + trade(1, "NABIL", 10))
    page = open_console(browser, site)
    page.call("Network.enable")
    page.call("Network.setBlockedURLs", urls=["*/api/subscribe*"])  # as a proxy might
    log_in(page, site)
    assert page.wait_for(f"{CANDLES} === '1'", WAIT), text_of(page, "#chart-status")
    assert page.wait_for(
        "document.querySelector('#chart-status').textContent.includes('polling /api/rev instead')",
        WAIT,
    ), text_of(page, "#chart-status")
    site.sql("INSERT INTO trades VALUES ('2026-03-02T10:01:00Z', 'NABIL', 15)")
    assert page.wait_for(f"{CANDLES} === '2'", WAIT), text_of(page, "#chart-status")


def test_the_chart_goes_live_again_after_a_restart_of_the_server(
    browser: Browser, site: Site
) -> None:
    site.sql(TRADES)
    site.sql("INSERT INTO trades VALUES " + trade(1, "NABIL", 10))
    page = open_console(browser, site)
    log_in(page, site)
    assert page.wait_for(f"{CANDLES} === '1'", WAIT), text_of(page, "#chart-status")
    assert text_of(page, "#chart-status").startswith("live")
    site.restart()  # the live query cannot connect for a while: the chart polls meanwhile
    site.sql("INSERT INTO trades VALUES ('2026-03-02T10:01:00Z', 'NABIL', 15)")
    assert page.wait_for(f"{CANDLES} === '2'", WAIT), text_of(page, "#chart-status")
    assert page.wait_for(
        "document.querySelector('#chart-status').textContent.startsWith('live')", 2 * WAIT
    ), text_of(page, "#chart-status")
    site.sql("INSERT INTO trades VALUES ('2026-03-02T10:02:00Z', 'NABIL', 9)")
    assert page.wait_for(f"{CANDLES} === '3'", WAIT), text_of(page, "#chart-status")
    assert text_of(page, "#chart-status").startswith("live")
