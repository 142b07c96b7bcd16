"""The document's browser snippets, run as written in headless Chromium.

The pages are served by the server itself (`refimpl serve --static DIR`, at /static/...), so
they are on its origin; each first posts the admin token to /api/session and is let in by the
session cookie from then on, as a browser's EventSource cannot send a header.

- /api/changes: `new EventSource('/api/changes?table=trades')` with a `change` listener
  receives every committed row exactly once, also across a server restart in the middle
  (same port), the browser asking again by itself with Last-Event-ID.
- /api/subscribe: the candle query over `trades` `WHERE symbol = 'NABIL'` gets its snapshot,
  then the candle an INSERT changed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.browser.conftest import Browser
from tests.browser.site import TRADES, Site

pytestmark = pytest.mark.browser  # each test waits 20 s at most for the page

SESSION = """
async function openSession() {
  const token = decodeURIComponent(location.hash.slice(1));
  const answer = await fetch('/api/session', {method: 'POST', body: token});
  if (!answer.ok) throw new Error('POST /api/session answered ' + answer.status);
}
"""

CHANGES_PAGE = """<!doctype html>
<meta charset="utf-8">
<title>changes</title>
<script>
window.received = [];
window.errors = [];
function apply(change) { window.received.push(change); }
__SESSION__
window.started = openSession().then(() => {
  // The document's snippet, as written:
  const es = new EventSource('/api/changes?table=trades');
  es.addEventListener('change', (e) => apply(JSON.parse(e.data)));
  // For the test: what the browser went through.
  es.addEventListener('error', () => window.errors.push(es.readyState));
  window.es = es;
  return true;
});
</script>
""".replace("__SESSION__", SESSION)

# As in the document (a line of it is longer than this file's lines may be).
SUBSCRIBE_SNIPPET = (
    "const q = encodeURIComponent(`SUBSCRIBE SELECT date_trunc('minute', time) AS m,"
    " first(price) AS open,\n"
    "  max(price) AS high, min(price) AS low, last(price) AS close\n"
    "  FROM trades WHERE symbol = 'NABIL' GROUP BY m ORDER BY m`);\n"
    "const es = new EventSource('/api/subscribe?query=' + q);\n"
    "es.addEventListener('snapshot', (e) => drawAll(JSON.parse(e.data).rows));\n"
    "es.addEventListener('rows', (e) => JSON.parse(e.data).rows.forEach(upsertCandle));"
)

SUBSCRIBE_PAGE = """<!doctype html>
<meta charset="utf-8">
<title>subscribe</title>
<script>
window.snapshots = [];
window.updates = [];
function drawAll(rows) { window.snapshots.push(rows); }
function upsertCandle(row) { window.updates.push(row); }
__SESSION__
window.started = openSession().then(() => {
  // The document's snippet, as written:
__SNIPPET__
  window.es = es;
  return true;
});
</script>
""".replace("__SESSION__", SESSION).replace("__SNIPPET__", SUBSCRIBE_SNIPPET)


def candles(rows: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Candle rows with their minute as naive UTC ISO text (JSON gives it with a Z)."""
    out = []
    for minute, *prices in rows:
        moment = datetime.fromisoformat(minute).astimezone(UTC).replace(tzinfo=None)
        out.append((moment.isoformat(), *prices))
    return out


def trade(minute: int, symbol: str, price: float) -> str:
    return f"('2026-03-02T10:{minute:02d}:00Z', '{symbol}', {price})"


def test_event_source_gets_every_change_once_across_a_restart(browser: Browser, site: Site) -> None:
    site.sql(TRADES)
    page = browser.new_page()
    site.add_page("changes.html", CHANGES_PAGE)
    page.navigate(site.page_url("changes.html"))
    assert page.evaluate("window.started") is True
    prices: list[float] = []
    for n in range(40):
        if n == 20:
            # the page must have its first changes before the restart
            assert page.wait_for(f"window.received.length >= {20 + 1}", timeout=20)
            site.restart()
        rows = [trade(n % 60, "NABIL" if n % 2 else "NEPSE", 100 + n + k / 10) for k in range(2)]
        prices += [100 + n + k / 10 for k in range(2)]
        site.sql("INSERT INTO trades VALUES " + ", ".join(rows))
    wanted = len(prices) + 1  # the CREATE TABLE comes first
    # until all came, or the EventSource is CLOSED (it then never asks again)
    page.wait_for(f"window.received.length >= {wanted} || window.es.readyState === 2", 20)
    time.sleep(1.5)  # an answer or a reconnection more: nothing may come twice
    received = page.evaluate("window.received")
    state = page.evaluate(
        "fetch('/api/changes?table=trades&format=json&limit=1').then(async (r) =>"
        " ({readyState: window.es.readyState, errors: window.errors,"
        " 'the same request by fetch now': r.status + ' ' + await r.text()}))"
    )
    # readyState 2 is CLOSED: a browser does not ask again after an answer that is not 200.
    assert len(received) >= wanted, (
        f"the page got {len(received)} of {wanted} changes; its EventSource: {state}"
    )
    assert received[0]["op"] == "ddl"
    upserts = [c for c in received if c["op"] == "upsert"]
    assert [c["row"]["price"] for c in upserts] == prices  # every change once, in order
    positions = [(c["lsn"], c["seq"]) for c in received]
    assert positions == sorted(set(positions))
    assert state["errors"], "the restart should have made the EventSource reconnect"


def test_subscribe_snippet_gets_snapshot_then_candle(browser: Browser, site: Site) -> None:
    site.sql(TRADES)
    site.sql(
        "INSERT INTO trades VALUES "
        + ", ".join(
            [
                trade(0, "NABIL", 10),
                trade(0, "NABIL", 12),
                trade(1, "NABIL", 11),
                trade(1, "NEPSE", 99),
            ]
        )
    )
    page = browser.new_page()
    site.add_page("subscribe.html", SUBSCRIBE_PAGE)
    page.navigate(site.page_url("subscribe.html"))
    assert page.evaluate("window.started") is True
    assert page.wait_for("window.snapshots.length >= 1", timeout=20)
    snapshot = page.evaluate("window.snapshots[0]")
    assert candles(snapshot) == [
        ("2026-03-02T10:00:00", 10.0, 12.0, 10.0, 12.0),
        ("2026-03-02T10:01:00", 11.0, 11.0, 11.0, 11.0),
    ]
    site.sql("INSERT INTO trades VALUES " + trade(1, "NABIL", 15))
    assert page.wait_for("window.updates.length >= 1", timeout=20), page.evaluate(
        "({snapshots: window.snapshots, state: window.es.readyState})"
    )
    updates = page.evaluate("window.updates")
    assert candles(updates) == [("2026-03-02T10:01:00", 11.0, 15.0, 11.0, 15.0)]
    assert page.evaluate("window.snapshots.length") == 1  # no fresh snapshot: an update
