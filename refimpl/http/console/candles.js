// The candle panel: one symbol's candles, found without typing and kept current.
//
// What to chart is found by looking: every table (of the page's database first, then of the
// others) whose columns are a TIMESTAMP, maybe a SYMBOL, and either `price` (raw trades,
// aggregated here into candles) or `open`, `high`, `low` and `close` (candles already,
// re-bucketed here when a coarser bucket is chosen). The first one found, and its first
// symbol, are charted at once; `serve --sample`'s `ochl_minutes` is one.
//
// Live: `SUBSCRIBE SELECT date_trunc(...) AS m, first(..) AS open, max(..) AS high,
// min(..) AS low, last(..) AS close ... GROUP BY m ORDER BY m` on GET /api/subscribe:
// a `snapshot` sets all candles, each `rows` event upserts the candles a commit changed (by
// `m`, the answer's key) and drops the ones `removed_keys` names. The EventSource asks again
// by itself with the subscription id it has, so nothing is lost between answers. Polling,
// the fallback (chosen, or when the live query is refused or cannot connect): GET /api/rev
// every 2 s, and the candles read again with /exec only when the symbol's revision moved.
//
// Drawn by TradingView Lightweight Charts (vendor/, Apache-2.0, see vendor/NOTICE): axes,
// crosshair, zoom (wheel, pinch, drag) come from it; it runs under the page's CSP (no eval,
// no inline code) once its attribution logo, which injects a <style>, is turned off and the
// attribution is shown as text under the chart instead.

import {byId, call, element, runSql} from './api.js';
import {CandlestickSeries, ColorType, CrosshairMode, HistogramSeries, createChart}
  from './vendor/lightweight-charts.mjs';

const POLL_MS = 2000;
const MAX_LIVE_FAILURES = 2; // connects in a row that failed before polling takes over
const LIVE_AGAIN_MS = 15000; // polling in place of the live query tries it again after this
const MAX_TABLES_LOOKED_AT = 50; // per database: a page does not read a whole catalog
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const UP = '#1a7f4b';
const DOWN = '#c23b22';
const NUMBER = new Set(['DOUBLE', 'INT', 'BIGINT']);

/** How `columns` (SHOW COLUMNS rows) can be charted, or null: {time, symbol, kind, ...}. */
export function chartable(columns) {
  const types = new Map(columns.map(([name, type]) => [name.toLowerCase(), [name, type]]));
  const times = columns.filter((c) => c[1] === 'TIMESTAMP');
  const time = times.find((c) => c[3]) ?? times[0];
  if (!time) return null;
  const symbol = columns.find((c) => c[4] && c[1] === 'SYMBOL') ?? columns.find((c) => c[1] === 'SYMBOL');
  const numeric = (name) => (NUMBER.has(types.get(name)?.[1]) ? types.get(name)[0] : null);
  const volume = numeric('volume');
  const prices = ['open', 'high', 'low', 'close'].map(numeric);
  const base = {time: time[0], symbol: symbol?.[0] ?? null, volume};
  if (prices.every(Boolean)) {
    const [open, high, low, close] = prices;
    return {...base, kind: 'candles', open, high, low, close};
  }
  const price = numeric('price');
  if (price) return {...base, kind: 'trades', open: price, high: price, low: price, close: price};
  return null;
}

/** The candle query of a source for `symbol` in buckets of `bucket` (SQL text). */
export function candleQuery(source, symbol, bucket) {
  const s = source.shape;
  const where = s.symbol === null ? ''
    : ` WHERE ${s.symbol} = '${String(symbol).replaceAll("'", "''")}'`;
  const volume = s.volume ? `, sum(${s.volume}) AS volume` : '';
  return `SELECT date_trunc('${bucket}', ${s.time}) AS m, first(${s.open}) AS open, ` +
    `max(${s.high}) AS high, min(${s.low}) AS low, last(${s.close}) AS close${volume} ` +
    `FROM ${source.table}${where} GROUP BY m ORDER BY m`;
}

/** A row of the candle query as Lightweight Charts takes it (time in UTC seconds). */
function bar(row) {
  return {time: Date.parse(row[0]) / 1000, open: row[1], high: row[2], low: row[3], close: row[4]};
}

export class CandlePanel {
  constructor(getDatabase) {
    this.getDatabase = getDatabase;
    this.box = byId('chart');
    this.status = byId('chart-status');
    this.legend = byId('chart-legend');
    this.sourceBox = byId('chart-source');
    this.symbolBox = byId('chart-symbol');
    this.sources = new Map(); // "db.table" -> {database, table, shape}
    this.candles = new Map(); // m -> row of the candle query
    this.source = null;
    this.timer = null;
    this.mode = null;
    this.chart = null;
    this.barCount = 0;
    byId('chart-form').addEventListener('submit', (event) => {
      event.preventDefault();
      this.start();
    });
    this.sourceBox.addEventListener('change', () => this.chooseSource());
    for (const id of ['chart-symbol', 'chart-bucket', 'chart-mode']) {
      byId(id).addEventListener('change', () => this.start());
    }
    byId('chart-fit').addEventListener('click', () => this.chart?.timeScale().fitContent());
  }

  /** Finds what can be charted, and charts the first of it: no typing on `serve --sample`. */
  async discover(databases) {
    const first = this.getDatabase();
    const order = [first, ...databases.filter((name) => name !== first)];
    this.sources.clear();
    for (const database of order) {
      const tables = await runSql(database, 'SHOW TABLES');
      if (!tables.ok) continue;
      const names = tables.json.dataset.filter((r) => r[1] !== 'view').map((r) => r[0])
        .filter((name) => NAME.test(name)).slice(0, MAX_TABLES_LOOKED_AT);
      for (const table of names) {
        const columns = await runSql(database, `SHOW COLUMNS FROM ${table}`);
        const shape = columns.ok ? chartable(columns.json.dataset) : null;
        if (shape && [shape.time, shape.symbol ?? 'x', shape.open, shape.close].every((n) => NAME.test(n))) {
          this.sources.set(`${database}.${table}`, {database, table, shape});
        }
      }
    }
    const chosen = this.sourceBox.value;
    this.sourceBox.replaceChildren(...[...this.sources].map(([id, source]) => {
      const option = element('option', `${id} (${source.shape.kind})`);
      option.value = id;
      return option;
    }));
    this.box.parentElement.hidden = this.sources.size === 0; // no empty frame
    if (this.sources.size === 0) {
      this.status.textContent = 'nothing to chart: a table needs a TIMESTAMP column and either'
        + ' price, or open, high, low and close';
      return;
    }
    if (this.sources.has(chosen)) this.sourceBox.value = chosen;
    await this.chooseSource();
  }

  /** Offers the symbols of the chosen table, and charts the first. */
  async chooseSource() {
    const source = this.sources.get(this.sourceBox.value);
    if (!source) return;
    let symbols = [''];
    if (source.shape.symbol !== null) {
      const answer = await runSql(source.database, `SELECT DISTINCT ${source.shape.symbol} ` +
        `FROM ${source.table} ORDER BY ${source.shape.symbol} LIMIT 1000`);
      symbols = answer.ok ? answer.json.dataset.map((r) => r[0]).filter((v) => v !== null) : [];
    }
    this.symbolBox.replaceChildren(...symbols.map((name) => element('option', name || '(all)')));
    symbols.forEach((name, n) => { this.symbolBox.options[n].value = name; });
    this.symbolBox.disabled = source.shape.symbol === null;
    if (symbols.length === 0) {
      this.stop();
      this.status.textContent = `${source.table} has no rows yet`;
      return;
    }
    this.start();
  }

  start() {
    this.stop();
    const source = this.sources.get(this.sourceBox.value);
    if (!source) return;
    const symbol = this.symbolBox.value;
    const bucket = byId('chart-bucket').value;
    this.spec = {database: source.database, table: source.table, symbol,
                 query: candleQuery(source, symbol, bucket), bucket};
    this.candles.clear();
    this.makeChart(bucket, Boolean(source.shape.volume));
    this.draw(true);
    if (byId('chart-mode').value === 'live' && typeof EventSource === 'function') this.subscribe();
    else this.poll('polling /api/rev');
  }

  stop() {
    if (this.source) this.source.close();
    clearInterval(this.timer);
    this.source = null;
    this.timer = null;
    this.mode = null;
  }

  makeChart(bucket, withVolume) {
    if (this.chart) this.chart.remove();
    this.chart = createChart(this.box, {
      autoSize: true,
      layout: {background: {type: ColorType.Solid, color: '#ffffff'}, textColor: '#1d232a',
               attributionLogo: false},
      grid: {vertLines: {color: '#eef0f3'}, horzLines: {color: '#eef0f3'}},
      crosshair: {mode: CrosshairMode.Normal},
      rightPriceScale: {borderColor: '#d6dbe0'},
      timeScale: {borderColor: '#d6dbe0', timeVisible: bucket !== 'day',
                  secondsVisible: bucket === 'second', maxBarSpacing: 40},
      localization: {timeFormatter: (t) => new Date(t * 1000).toISOString().slice(0, 19)
        .replace('T', ' ')},
    });
    this.series = this.chart.addSeries(CandlestickSeries, {
      upColor: UP, downColor: DOWN, borderUpColor: UP, borderDownColor: DOWN,
      wickUpColor: UP, wickDownColor: DOWN, priceLineVisible: false,
    });
    this.volume = null;
    if (withVolume) {
      this.volume = this.chart.addSeries(HistogramSeries, {priceFormat: {type: 'volume'},
        priceScaleId: '', lastValueVisible: false, priceLineVisible: false});
      this.volume.priceScale().applyOptions({scaleMargins: {top: 0.82, bottom: 0}});
      this.series.priceScale().applyOptions({scaleMargins: {top: 0.08, bottom: 0.22}});
    }
    this.chart.subscribeCrosshairMove((param) => this.showLegend(param));
  }

  /** The crosshair's candle, in words above the chart (the last candle when it is away). */
  showLegend(param) {
    const point = param?.time === undefined ? null : this.candles.get(
      new Date(param.time * 1000).toISOString().replace(/\.\d+Z$/, '.000Z'));
    const row = point ?? [...this.candles.values()].at(-1);
    if (!row) {
      this.legend.textContent = '';
      return;
    }
    const [m, open, high, low, close, volume] = row;
    const parts = [`${this.spec.symbol || this.spec.table}  ${m.slice(0, 19).replace('T', ' ')} UTC`,
                   `O ${open}`, `H ${high}`, `L ${low}`, `C ${close}`];
    if (volume !== undefined) parts.push(`V ${volume}`);
    this.legend.textContent = parts.join('   ');
    this.legend.dataset.time = m;
  }

  subscribe() {
    const spec = this.spec;
    this.mode = 'live';
    const q = encodeURIComponent('SUBSCRIBE ' + spec.query);
    const es = new EventSource(`/api/subscribe?db=${encodeURIComponent(spec.database)}&query=${q}`);
    this.source = es;
    const said = () => `live: ${this.candles.size} candle(s) of ${spec.symbol || spec.table}`;
    es.addEventListener('snapshot', (e) => {
      this.setAll(JSON.parse(e.data).rows);
      this.status.textContent = said();
    });
    es.addEventListener('rows', (e) => {
      const data = JSON.parse(e.data);
      for (const key of data.removed_keys ?? []) this.candles.delete(String(key[0]));
      data.rows.forEach((row) => this.candles.set(String(row[0]), row));
      this.draw(false);
      this.status.textContent = said();
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
      this.poll('the live query is not answered: polling /api/rev instead', true);
    });
  }

  /** Polls /api/rev; a `fallback` from the live query tries it again now and then (the
   * server may have been restarting), and keeps polling while it is not answered. */
  poll(why, fallback = false) {
    const spec = this.spec;
    this.mode = 'poll';
    this.status.textContent = why;
    let seen = null;
    const since = Date.now();
    const check = async () => {
      if (fallback && Date.now() - since > LIVE_AGAIN_MS && spec === this.spec) {
        this.stop();
        this.subscribe();
        return;
      }
      const r = await call('GET', '/api/rev', {db: spec.database, table: spec.table,
                                                symbol: spec.symbol || null});
      if (spec !== this.spec) return;
      if (!r.ok) {
        this.status.textContent = `${why}: ${r.json?.error ?? r.status}`;
        return;
      }
      const rev = r.json.revs?.[spec.symbol] ?? r.json.table_rev;
      if (rev === seen) return;
      const answer = await runSql(spec.database, spec.query); // only when the symbol changed
      if (spec !== this.spec) return;
      if (!answer.ok) {
        this.status.textContent = `${why}: ${answer.json?.error ?? answer.status}`;
        return;
      }
      seen = rev;
      this.setAll(answer.json.dataset);
      this.status.textContent = `${why}: ${this.candles.size} candle(s), rev ${rev}`;
    };
    check();
    this.timer = setInterval(check, POLL_MS);
  }

  setAll(rows) {
    const first = this.candles.size === 0;
    this.candles.clear();
    rows.forEach((row) => this.candles.set(String(row[0]), row));
    this.draw(first);
  }

  /** Hands the candles to the chart; `fit` shows them all (else the user's zoom is kept). */
  draw(fit) {
    const rows = [...this.candles.values()].sort((a, b) => (a[0] < b[0] ? -1 : 1));
    // A chart that showed every candle still does after the update; a zoomed one stays put.
    const shown = this.chart.timeScale().getVisibleLogicalRange();
    const all = fit || shown === null || (shown.from <= 0 && shown.to >= this.barCount - 1);
    this.barCount = rows.length;
    this.series.setData(rows.map(bar));
    this.volume?.setData(rows.map((row) => ({time: Date.parse(row[0]) / 1000, value: row[5] ?? 0,
      color: row[4] >= row[1] ? 'rgba(26,127,75,0.35)' : 'rgba(194,59,34,0.35)'})));
    if (all && rows.length) this.chart.timeScale().fitContent();
    this.box.dataset.candles = String(rows.length);
    this.box.dataset.mode = this.mode ?? '';
    this.box.dataset.last = rows.length ? JSON.stringify(rows.at(-1).slice(0, 5)) : '';
    this.showLegend(null);
  }
}
