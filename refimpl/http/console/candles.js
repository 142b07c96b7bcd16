// The candle panel: one symbol's candles, kept current as the reference snippets do it.
//
// Live: `SUBSCRIBE SELECT date_trunc(...) AS m, first(price) AS open, max(price) AS high,
// min(price) AS low, last(price) AS close ... GROUP BY m ORDER BY m` on GET /api/subscribe:
// a `snapshot` draws all candles, each `rows` event upserts the candles a trade changed
// (by `m`, the answer's key) and drops the ones `removed_keys` names. The EventSource asks
// again by itself with the subscription id it has, so nothing is lost between answers.
// Polling, the fallback (chosen, or when the live query is refused or cannot connect):
// GET /api/rev every 2 s, and the candles read again with /exec only when the symbol's
// revision moved.
//
// Drawn as SVG by hand (a few dozen lines): no chart library, nothing to vendor.

import {byId, call, runSql} from './api.js';

const POLL_MS = 2000;
const MAX_LIVE_FAILURES = 2; // connects in a row that failed before polling takes over
const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 800;
const HEIGHT = 260;
const MARGIN = {left: 64, right: 12, top: 12, bottom: 28};
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The candle query of `table` for `symbol` in buckets of `bucket` (SQL text). */
export function candleQuery(table, symbol, bucket) {
  const quoted = "'" + symbol.replaceAll("'", "''") + "'";
  return `SELECT date_trunc('${bucket}', time) AS m, first(price) AS open,
  max(price) AS high, min(price) AS low, last(price) AS close
  FROM ${table} WHERE symbol = ${quoted} GROUP BY m ORDER BY m`;
}

export class CandlePanel {
  constructor(getDatabase) {
    this.getDatabase = getDatabase;
    this.chart = byId('chart');
    this.status = byId('chart-status');
    this.candles = new Map(); // m -> [m, open, high, low, close]
    this.source = null;
    this.timer = null;
    this.mode = null;
    byId('chart-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.start(byId('chart-mode').value);
    });
  }

  start(mode) {
    this.stop();
    const table = byId('chart-table').value.trim();
    const symbol = byId('chart-symbol').value;
    if (!NAME.test(table)) {
      this.status.textContent = `'${table}' is not a table name (letters, digits and _)`;
      return;
    }
    this.spec = {database: this.getDatabase(), table, symbol,
                 query: candleQuery(table, symbol, byId('chart-bucket').value)};
    this.candles.clear();
    this.draw();
    if (mode === 'live' && typeof EventSource === 'function') this.subscribe();
    else this.poll('polling /api/rev');
  }

  stop() {
    if (this.source) this.source.close();
    clearInterval(this.timer);
    this.source = null;
    this.timer = null;
    this.mode = null;
  }

  subscribe() {
    const spec = this.spec;
    this.mode = 'live';
    const q = encodeURIComponent('SUBSCRIBE ' + spec.query);
    const es = new EventSource(`/api/subscribe?db=${encodeURIComponent(spec.database)}&query=${q}`);
    this.source = es;
    es.addEventListener('snapshot', (e) => {
      const data = JSON.parse(e.data);
      this.drawAll(data.rows);
      this.status.textContent = `live: ${this.candles.size} candle(s) of ${spec.symbol}`;
    });
    es.addEventListener('rows', (e) => {
      const data = JSON.parse(e.data);
      for (const key of data.removed_keys ?? []) this.candles.delete(String(key[0]));
      data.rows.forEach((row) => this.upsertCandle(row));
      this.draw();
      this.status.textContent = `live: ${this.candles.size} candle(s) of ${spec.symbol}`;
    });
    // Each answer ends after its wait, and the EventSource asks again (an error event after
    // an open). Refused (not a 200), or failing to connect twice in a row: poll instead.
    let opened = false;
    let failures = 0;
    es.addEventListener('open', () => {
      opened = true;
      failures = 0;
    });
    es.addEventListener('error', () => {
      if (this.source !== es) return;
      if (opened && es.readyState !== EventSource.CLOSED) {
        opened = false;
        return;
      }
      failures += 1;
      if (es.readyState !== EventSource.CLOSED && failures < MAX_LIVE_FAILURES) return;
      es.close();
      this.source = null;
      this.poll('the live query is not answered: polling /api/rev instead');
    });
  }

  poll(why) {
    const spec = this.spec;
    this.mode = 'poll';
    this.status.textContent = why;
    let seen = null;
    const check = async () => {
      const r = await call('GET', '/api/rev', {db: spec.database, table: spec.table,
                                                symbol: spec.symbol});
      if (!r.ok) {
        this.status.textContent = `${why}: ${r.json?.error ?? r.status}`;
        return;
      }
      const rev = r.json.revs?.[spec.symbol] ?? r.json.table_rev;
      if (rev === seen) return;
      const answer = await runSql(spec.database, spec.query); // only when the symbol changed
      if (!answer.ok) {
        this.status.textContent = `${why}: ${answer.json?.error ?? answer.status}`;
        return;
      }
      seen = rev;
      this.drawAll(answer.json.dataset);
      this.status.textContent = `${why}: ${this.candles.size} candle(s), rev ${rev}`;
    };
    check();
    this.timer = setInterval(check, POLL_MS);
  }

  drawAll(rows) {
    this.candles.clear();
    rows.forEach((row) => this.candles.set(String(row[0]), row));
    this.draw();
  }

  upsertCandle(row) {
    this.candles.set(String(row[0]), row);
  }

  draw() {
    const rows = [...this.candles.values()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    const svg = document.createElementNS(SVG, 'svg');
    svg.setAttribute('viewBox', `0 0 ${WIDTH} ${HEIGHT}`);
    svg.setAttribute('role', 'img');
    svg.dataset.candles = String(rows.length);
    svg.dataset.mode = this.mode ?? '';
    if (rows.length === 0) {
      svg.append(text(WIDTH / 2, HEIGHT / 2, 'no candles yet', 'empty'));
      this.chart.replaceChildren(svg);
      return;
    }
    const low = Math.min(...rows.map((r) => r[3]));
    const high = Math.max(...rows.map((r) => r[2]));
    const span = high - low || 1;
    const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
    const y = (price) => MARGIN.top + ((high - price) / span) * plotHeight;
    const step = (WIDTH - MARGIN.left - MARGIN.right) / rows.length;
    const body = Math.min(24, Math.max(1, step * 0.6));
    rows.forEach(([m, open, top, bottom, close], n) => {
      const x = MARGIN.left + step * (n + 0.5);
      const group = document.createElementNS(SVG, 'g');
      group.setAttribute('class', close >= open ? 'candle up' : 'candle down');
      group.dataset.m = String(m);
      group.append(shape('line', {x1: x, x2: x, y1: y(top), y2: y(bottom)}),
                   shape('rect', {x: x - body / 2, width: body, y: y(Math.max(open, close)),
                                  height: Math.max(1, Math.abs(y(open) - y(close)))}));
      const title = document.createElementNS(SVG, 'title');
      title.textContent = `${m}  open ${open}  high ${top}  low ${bottom}  close ${close}`;
      group.append(title);
      svg.append(group);
    });
    svg.append(text(MARGIN.left - 6, y(high) + 4, String(high), 'axis end'),
               text(MARGIN.left - 6, y(low), String(low), 'axis end'),
               text(MARGIN.left, HEIGHT - 8, String(rows[0][0]), 'axis'),
               text(WIDTH - MARGIN.right, HEIGHT - 8, String(rows.at(-1)[0]), 'axis end'));
    this.chart.replaceChildren(svg);
  }
}

function shape(tag, attributes) {
  const made = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) made.setAttribute(name, String(value));
  return made;
}

function text(x, yAt, content, className) {
  const made = shape('text', {x, y: yAt, class: className});
  made.textContent = content;
  return made;
}
