"""Driving the console page as a person does: a server to point it at, clicks, keys, shots.

Keys are typed and buttons clicked through DevTools input events (not by setting values
from script). Screenshots are saved in the test's temporary folder (CI keeps it); `shot`
also reads one back, clipped to an element, so a test can check its pixels.
"""

from __future__ import annotations

import base64
from pathlib import Path

from tests.browser.conftest import Browser, Page
from tests.browser.pixels import Image, read_png
from tests.browser.site import Site

WAIT = 20.0  # seconds for the page to show something


def click(page: Page, selector: str) -> None:
    """A left click in the middle of the element, as the mouse makes it (scrolled to first:
    the mouse reaches only what is on the screen)."""
    box = page.evaluate(
        f"(() => {{ const e = document.querySelector({selector!r});"
        " e.scrollIntoView({block: 'nearest', inline: 'nearest'});"
        " const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
        " })()"
    )
    for kind in ("mousePressed", "mouseReleased"):
        page.call(
            "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1
        )


def type_into(page: Page, selector: str, text: str) -> None:
    """Clicks the field, selects what it holds and types `text` over it."""
    click(page, selector)
    page.evaluate(f"document.querySelector({selector!r}).select()")
    page.call("Input.insertText", text=text)


def run_sql(page: Page, sql: str) -> None:
    page.evaluate("document.querySelector('#sql-status').textContent = ''")
    type_into(page, "#sql", sql)
    click(page, "#run")
    assert page.wait_for(
        "/ in [0-9.]+ ms$/.test(document.querySelector('#sql-status').textContent)", WAIT
    ), "the run got no answer"


def text_of(page: Page, selector: str) -> str:
    return page.evaluate(f"document.querySelector({selector!r})?.textContent ?? ''")


def open_console(browser: Browser, site: Site) -> Page:
    """The console in a new tab of 1280 x 1000; what the page's CSP refused is kept in
    `window.cspRefused` (DevTools adds the listener, so the CSP does not stop it)."""
    page = browser.new_page()
    page.call("Page.enable")
    page.call(
        "Page.addScriptToEvaluateOnNewDocument",
        source="window.cspRefused = []; document.addEventListener('securitypolicyviolation',"
        " (e) => window.cspRefused.push(e.violatedDirective + ' ' + e.blockedURI));",
    )
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=1000,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.navigate(site.server.url + "/")
    assert page.evaluate("window.consoleReady") is True
    return page


def screenshot(page: Page, path: Path) -> None:
    """The whole page as PNG at `path` (CI keeps the test's temporary folder)."""
    shot = page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot of the console: {path}")


def log_in(page: Page, site: Site) -> None:
    """Types the admin token and logs in, as a person does; waits until the page says so."""
    type_into(page, "#token", site.token)
    click(page, "#login-button")
    assert page.wait_for(
        "document.querySelector('#who').textContent === 'signed in as admin'", WAIT
    ), text_of(page, "#who")


def box_of(page: Page, selector: str) -> tuple[float, float, float, float]:
    """The element's box in the document (x, y, width, height), scrolled into view."""
    return tuple(
        page.evaluate(
            f"(() => {{ const e = document.querySelector({selector!r}); e.scrollIntoView();"
            " const r = e.getBoundingClientRect();"
            " return [r.x + scrollX, r.y + scrollY, r.width, r.height]; })()"
        )
    )


def shot(page: Page, selector: str, path: Path) -> Image:
    """A screenshot of one element, saved at `path` and read back to check its pixels."""
    x, y, width, height = box_of(page, selector)
    taken = page.call(
        "Page.captureScreenshot",
        format="png",
        clip={"x": x, "y": y, "width": width, "height": height, "scale": 1},
        captureBeyondViewport=True,
    )
    data = base64.b64decode(taken["data"])
    path.write_bytes(data)
    print(f"screenshot of {selector}: {path}")
    return read_png(data)
