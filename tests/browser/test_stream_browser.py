"""The event stream in headless Chromium: a ticket, an EventSource, a restart, every change once.

The page is served by the server itself (`refimpl serve --static DIR`). It gets a ticket
from `POST /stream/tickets` (with the token from its URL's fragment), opens
`new EventSource('/stream/changes?ticket=...')`, and when the stream breaks (the server
restarts: the browser's own reconnect would reuse the used ticket and be refused), gets a
new ticket and connects again with `&last-event-id=` of the last event it got.
"""

from __future__ import annotations

import time

import pytest

from tests.browser.conftest import Browser
from tests.browser.site import Site

pytestmark = pytest.mark.browser

STREAM_PAGE = """<!doctype html>
<meta charset="utf-8">
<title>stream</title>
<script>
window.received = [];
window.events = [];
window.lastId = null;
window.connects = 0;
const token = decodeURIComponent(location.hash.slice(1));
const pause = (ms) => new Promise((done) => setTimeout(done, ms));

async function ticket() {
  const answer = await fetch('/stream/tickets', {
    method: 'POST', headers: {Authorization: 'Bearer ' + token},
  });
  if (!answer.ok) throw new Error('POST /stream/tickets answered ' + answer.status);
  return (await answer.json()).ticket;
}

function keep(name) {
  return (e) => {
    window.lastId = e.lastEventId;
    window.events.push(name);
    if (name === 'change') window.received.push({id: e.lastEventId, ...JSON.parse(e.data)});
  };
}

async function connect() {
  for (;;) {
    try {
      let url = '/stream/changes?ticket=' + encodeURIComponent(await ticket());
      if (window.lastId !== null) url += '&last-event-id=' + encodeURIComponent(window.lastId);
      const es = new EventSource(url);
      window.connects += 1;
      for (const name of ['ready', 'change', 'reset']) es.addEventListener(name, keep(name));
      // A ticket works once: on any break, a new ticket and the last id.
      es.addEventListener('error', () => { es.close(); pause(200).then(connect); });
      window.es = es;
      return;
    } catch (err) {
      await pause(200);  // the server is restarting
    }
  }
}
connect();
</script>
"""


def test_a_page_follows_every_change_once_across_a_restart(browser: Browser, site: Site) -> None:
    site.add_page("stream.html", STREAM_PAGE)
    site.sql("CREATE TABLE readings (id INT PRIMARY KEY, value DOUBLE)")
    page = browser.new_page()
    page.navigate(site.page_url("stream.html"))
    assert page.wait_for("window.events.includes('ready')", timeout=20)
    total = 40
    for n in range(total):
        if n == total // 2:
            assert page.wait_for(f"window.received.length >= {n}", timeout=20)
            site.restart()
        site.sql(f"INSERT INTO readings VALUES ({n}, {n / 2})")
    page.wait_for(f"window.received.length >= {total}", timeout=20)
    time.sleep(1.5)  # a reconnection more: nothing may come twice
    received = page.evaluate("window.received")
    state = page.evaluate("({events: window.events, connects: window.connects})")
    assert [c["row"]["id"] for c in received] == list(range(total)), state
    assert len({c["id"] for c in received}) == total
    assert state["connects"] >= 2 and "reset" not in state["events"], state
    assert all(c["href"].startswith("/stream/row?") for c in received)
