// The changes panel: a table's changes as rows, live, resumed by its last id across restarts.
//
// GET /api/changes answers each request once (it waits for a commit, sends, ends). The page
// reconnects itself, always with `from=<the last id>`, rather than leaving it to the
// EventSource: a browser gives up on an answer that is not a 200 (a server shutting down
// answers 503), and a URL carrying `from` would otherwise be asked again as it was.
// Changes are shown once each by their (lsn, seq), in commit order, newest on top.
//
// With the event stream (GET /stream/changes) on the server, the same panel can follow it
// instead: a one-time ticket from POST /stream/tickets before every connect, as a browser's
// EventSource cannot send a header, and `last-event-id` to resume.
//
// Each change is shown as the user thinks of it: insert, update, delete or schema change.
// The log says `upsert` for both an INSERT and an UPDATE; the table's before-images (REPLICA
// IDENTITY FULL, `old_row`) tell them apart, else the rows this panel saw by their key do
// (a key seen before is an update; a key not seen is an insert when the panel read the table
// from its CREATE TABLE or a TRUNCATE on, else "insert or update"). An update's changed
// values are highlighted; a delete's key is decoded into its columns (keys.js) and shows
// the row as it was when the panel knows it.

import {byId, call, element, queryString, runSql, shown} from './api.js';
import {decodeKey, keyColumnsOf} from './keys.js';

const MAX_SHOWN = 500;         // the bounded history: older changes are dropped from the page
const MAX_KNOWN = 100000;      // rows remembered by key to tell updates from inserts
const NEXT_ROUND_MS = 100;     // after an answer that ended as it should
const AFTER_FAILURE_MS = 1000; // after a failed connect: the server may be restarting
const DRAW_MS = 50;
const STREAM_OPS = {create: 'insert', update: 'update', delete: 'delete', schema: 'schema'};

/** (lsn, n) of an event stream id: `<lsn>.<n>` is the n-th event of the transaction, `<lsn>`
 * the end of the whole transaction. */
export function idPlace(id) {
  const [lsn, n] = String(id).split('.');
  return [Number(lsn), n === undefined ? Infinity : Number(n)];
}

export class ChangesPanel {
  constructor(getDatabase) {
    this.getDatabase = getDatabase;
    this.grid = byId('changes');
    this.status = byId('changes-status'); // the connection
    this.counted = byId('changes-count'); // what was read and what is shown
    this.tables = byId('change-table');
    this.streamBox = byId('use-stream');
    this.pauseButton = byId('pause');
    this.source = null;
    this.timer = null;
    this.watching = null; // {database, table, stream}
    this.lastId = null;   // where to read on: the id of the last whole transaction read
    this.shownUpTo = [0, -1]; // (lsn, seq) of the last change shown
    this.history = [];    // the changes shown, oldest first, at most MAX_SHOWN
    this.count = 0;       // changes received since watching began
    this.paused = false;
    this.drawPending = false;
    byId('watch').addEventListener('click', () => this.watch());
    byId('unwatch').addEventListener('click', () => this.stop('not watching'));
    this.pauseButton.addEventListener('click', () => this.pause(!this.paused));
    byId('clear').addEventListener('click', () => {
      this.history = [];
      this.draw();
    });
    this.forgetTable();
  }

  /** Offers the tables of the database; keeps the chosen one when it is still there. */
  setTables(names) {
    const chosen = this.tables.value;
    this.tables.replaceChildren(...names.map((name) => element('option', name)));
    if (names.includes(chosen)) this.tables.value = chosen;
  }

  /** Whether POST /stream/tickets exists here: the event stream can then be chosen. */
  async detectStream() {
    const answer = await call('POST', '/stream/tickets', {db: this.getDatabase()});
    const present = answer.status !== 404 && answer.status !== 405 && answer.status !== 0;
    this.streamBox.disabled = !present;
    this.streamBox.dataset.detected = present ? 'yes' : 'no';
    this.streamBox.title = present ? 'follow GET /stream/changes with a ticket'
      : 'this server has no event stream (POST /stream/tickets answered ' + answer.status + ')';
    return present;
  }

  forgetTable() {
    this.columns = [];    // [[name, type], ...] of the watched table
    this.keyColumns = []; // [[name, type], ...] in key order
    this.known = new Map(); // key text -> the row as last seen, null when deleted
    this.complete = false;  // every row of the table was seen (read from CREATE or TRUNCATE)
  }

  /** Reads the watched table's columns and key (SHOW COLUMNS, SHOW CREATE TABLE). */
  async readTable(watching) {
    const [columns, create] = await Promise.all([
      runSql(watching.database, `SHOW COLUMNS FROM ${watching.table}`),
      runSql(watching.database, `SHOW CREATE TABLE ${watching.table}`)]);
    if (watching !== this.watching || !columns.ok) return;
    this.columns = columns.json.dataset.map((row) => [row[0], row[1]]);
    this.keyColumns = create.ok ? keyColumnsOf(create.json.dataset[0][1], this.columns) : [];
    this.scheduleDraw();
  }

  async watch() {
    const table = this.tables.value;
    if (!table) {
      this.status.textContent = 'no table to watch: create one first';
      return;
    }
    this.stop('');
    const watching = {database: this.getDatabase(), table, stream: this.streamBox.checked};
    this.watching = watching;
    this.lastId = null;
    this.shownUpTo = [0, -1];
    this.history = [];
    this.count = 0;
    this.forgetTable();
    byId('unwatch').disabled = false;
    if (byId('change-from').value === 'now') {
      // From the database's last commit on: what came before is not read (nor known).
      const stats = await call('GET', '/api/stats', {db: watching.database});
      const durable = stats.json?.databases?.[watching.database]?.durable_lsn;
      if (!stats.ok || !Number.isInteger(durable)) {
        this.stop(`cannot start from now: ${stats.json?.error ?? stats.status}`);
        return;
      }
      this.lastId = String(durable);
      this.shownUpTo = [durable, Infinity];
      this.status.textContent = `watching ${table} from ${durable}: waiting for a commit`;
    }
    await this.readTable(watching);
    if (watching === this.watching) this.connect();
  }

  stop(why) {
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
    this.watching = null;
    byId('unwatch').disabled = true;
    if (why) this.status.textContent = why;
  }

  /** Pausing keeps reading (nothing is missed) but holds the page still until resumed. */
  pause(paused) {
    this.paused = paused;
    this.pauseButton.textContent = paused ? 'resume' : 'pause';
    this.pauseButton.setAttribute('aria-pressed', String(paused));
    if (!paused) this.draw();
    else this.say();
  }

  async connect() {
    const watching = this.watching;
    if (watching === null) return;
    const url = watching.stream ? await this.streamUrl(watching) : this.changesUrl(watching);
    if (url === null || watching !== this.watching) return;
    const source = new EventSource(url);
    this.source = source;
    source.opened = false;
    source.addEventListener('open', () => {
      source.opened = true;
      this.status.textContent = `watching ${watching.table} from ${this.lastId ?? 'the start'}`;
    });
    source.addEventListener('change', (event) => this.receive(event));
    source.addEventListener('position', (event) => this.advance(event.lastEventId));
    source.addEventListener('ready', (event) => {
      this.advance(event.lastEventId);
      this.status.textContent = `following ${watching.table} on the event stream`;
    });
    source.addEventListener('reset', (event) => {
      this.advance(event.lastEventId);
      this.forgetTable();
      this.readTable(watching);
      this.add({place: idPlace(event.lastEventId), op: 'reset', committed: null, values: {},
                changed: new Map(), text: 'the stream lost its place: read the table again'});
    });
    source.addEventListener('error', () => this.ended(source, watching));
  }

  changesUrl(watching) {
    return '/api/changes' + queryString({db: watching.database, table: watching.table,
                                         from: this.lastId});
  }

  async streamUrl(watching) {
    const ticket = await call('POST', '/stream/tickets', {db: watching.database,
                                                          table: watching.table});
    if (!ticket.ok || typeof ticket.json?.ticket !== 'string') {
      this.status.textContent = 'no ticket: ' + (ticket.json?.error ?? ticket.status);
      this.retry(watching, AFTER_FAILURE_MS);
      return null;
    }
    return '/stream/changes' + queryString({db: watching.database, table: watching.table,
                                            ticket: ticket.json.ticket,
                                            'last-event-id': this.lastId});
  }

  receive(event) {
    const change = JSON.parse(event.data);
    if (event.lastEventId) this.lastId = event.lastEventId;
    // The change stream numbers a transaction's rows by `seq`; the event stream gives each
    // event its own id, `<lsn>.<n>`.
    const place = this.watching?.stream ? idPlace(event.lastEventId)
      : [change.lsn, change.seq ?? 0];
    const [lsn, seq] = this.shownUpTo;
    if (place[0] < lsn || (place[0] === lsn && place[1] <= seq)) return; // seen already
    this.shownUpTo = place;
    this.count += 1;
    this.add(this.understand(change, place));
  }

  /** What a change means to the user: {place, op, committed, values, changed, text}. */
  understand(change, place) {
    const op = STREAM_OPS[change.op] ?? change.op;
    const entry = {place, op, committed: change.committed_at ?? null, values: {},
                   changed: new Map(), text: ''};
    const before = 'old_row' in change ? change.old_row : undefined; // undefined: not kept
    if (op === 'ddl' || op === 'schema') {
      entry.op = 'schema';
      entry.text = change.statement ?? change.key ?? '';
      this.schemaChanged(entry.text);
      return entry;
    }
    if (op === 'delete') {
      let keyValues = {};
      try {
        keyValues = decodeKey(change.key, this.keyColumns);
      } catch (error) {
        entry.text = `key ${change.key} (${error.message})`;
      }
      const id = this.identity(change, keyValues);
      const last = before ?? (id === null ? null : this.known.get(id));
      if (id !== null) this.known.set(id, null); // known to be gone: a later upsert inserts
      entry.values = {...(last ?? {}), ...keyValues};
      entry.keyOnly = !last;
      return entry;
    }
    const row = change.row ?? {};
    const id = this.identity(change, row);
    const previous = before !== undefined ? before : (id === null ? null : this.known.get(id));
    if (op === 'upsert') {
      if (before !== undefined) entry.op = before === null ? 'insert' : 'update';
      else if (previous) entry.op = 'update';
      else if (id !== null && (this.complete || this.known.has(id))) entry.op = 'insert';
      else entry.op = 'insert or update';
    }
    entry.values = row;
    if (previous) {
      for (const [name, value] of Object.entries(row)) {
        if (JSON.stringify(previous[name]) !== JSON.stringify(value)) {
          entry.changed.set(name, previous[name]);
        }
      }
    }
    if (id !== null) {
      if (this.known.size >= MAX_KNOWN) this.forgetRows(false);
      this.known.set(id, row);
    }
    return entry;
  }

  /** The identity of a changed row as text; null when it cannot be known. The event stream
   * gives every change its row's `key` (also a table's without a key: its row id); the
   * change stream only a delete's, so there the key columns' values are the identity. */
  identity(change, values) {
    if (this.watching?.stream && typeof change.key === 'string') return 'key ' + change.key;
    return this.keyOf(values);
  }

  /** The key columns' values of a row (or of a decoded key) as text; null without a key. */
  keyOf(values) {
    if (this.keyColumns.length === 0) return null;
    const parts = this.keyColumns.map(([name]) => values[name]);
    return parts.some((v) => v === undefined) ? null : JSON.stringify(parts);
  }

  forgetRows(complete) {
    this.known = new Map();
    this.complete = complete;
  }

  /** What a schema change means for telling inserts from updates, and for the columns. */
  schemaChanged(statement) {
    const words = statement.trim().toUpperCase();
    if (words.startsWith('CREATE TABLE') || words.startsWith('TRUNCATE')) this.forgetRows(true);
    else if (words.startsWith('DROP TABLE') || words.includes('DROP PARTITION')) {
      this.forgetRows(false);
    }
    if (this.watching && !words.startsWith('TRUNCATE')) this.readTable(this.watching);
  }

  add(entry) {
    this.history.push(entry);
    if (this.history.length > MAX_SHOWN) this.history.splice(0, this.history.length - MAX_SHOWN);
    this.scheduleDraw();
  }

  scheduleDraw() {
    if (this.paused) {
      this.say();
      return;
    }
    if (this.drawPending) return;
    this.drawPending = true;
    setTimeout(() => { // one drawing for a burst of changes (a big transaction)
      this.drawPending = false;
      this.draw();
    }, DRAW_MS);
  }

  say() {
    const table = this.watching?.table ?? '';
    const kept = this.history.length < this.count ? `, the last ${this.history.length} shown` : '';
    this.counted.textContent = this.paused
      ? `paused: ${this.count} change(s) of ${table} read, shown when resumed`
      : `${this.count} change(s) of ${table}${kept}`;
  }

  /** The history as a table, newest first: one column per table column, the key's marked. */
  draw() {
    const keys = new Set(this.keyColumns.map(([name]) => name));
    const head = element('tr');
    head.append(element('th', 'lsn'), element('th', 'committed (UTC)'), element('th', 'change'));
    for (const [name, type] of this.columns) {
      const cell = element('th', name, keys.has(name) ? 'key' : '');
      cell.append(element('span', ' ' + type + (keys.has(name) ? ' key' : ''), 'type'));
      head.append(cell);
    }
    const body = element('tbody');
    for (let n = this.history.length - 1; n >= 0; n -= 1) body.append(this.line(this.history[n]));
    const headPart = element('thead');
    headPart.append(head);
    this.grid.replaceChildren(headPart, body);
    this.grid.dataset.rows = String(this.history.length);
    this.say();
  }

  line(entry) {
    const row = element('tr', '', 'change ' + entry.op.replaceAll(' ', '-'));
    row.dataset.lsn = String(entry.place[0]);
    row.append(element('td', entry.place.join('.'), 'lsn'),
               element('td', entry.committed ? entry.committed.slice(0, 23).replace('T', ' ') : '',
                       'when'),
               element('td', entry.op, 'op'));
    if (entry.text && Object.keys(entry.values).length === 0) {
      const cell = element('td', entry.text, 'statement');
      cell.colSpan = Math.max(1, this.columns.length);
      row.append(cell);
      return row;
    }
    const keys = new Set(this.keyColumns.map(([name]) => name));
    for (const [name] of this.columns) {
      const has = Object.hasOwn(entry.values, name);
      const value = entry.values[name];
      const classes = [has && value === null ? 'null' : '', keys.has(name) ? 'key' : '',
                       entry.changed.has(name) ? 'changed' : '',
                       entry.keyOnly && !keys.has(name) ? 'unknown' : ''];
      const cell = element('td', has ? shown(value) : '', classes.filter(Boolean).join(' '));
      if (entry.changed.has(name)) cell.title = 'was ' + shown(entry.changed.get(name));
      row.append(cell);
    }
    if (entry.text) row.title = entry.text;
    return row;
  }

  advance(id) {
    if (id) this.lastId = id;
  }

  /** The answer ended (as it should, or by a failure): read on from the last id. */
  async ended(source, watching) {
    const refused = source.readyState === EventSource.CLOSED; // an answer that is not a 200
    source.close();
    if (watching !== this.watching) return;
    if (!refused || watching.stream) {
      if (!source.opened) this.status.textContent = 'the server does not answer: reconnecting...';
      this.retry(watching, source.opened ? NEXT_ROUND_MS : AFTER_FAILURE_MS);
      return;
    }
    // The browser refused the answer: ask the same as JSON to learn why.
    const why = await call('GET', '/api/changes', {db: watching.database, table: watching.table,
                                                   from: this.lastId, format: 'json', wait: 0});
    if (watching !== this.watching) return;
    if (why.status === 401 || why.status === 403 || why.status === 404 || why.status === 410) {
      this.stop(`stopped: ${why.json?.error ?? why.status}`);
      return;
    }
    this.status.textContent = `reconnecting (${why.json?.error ?? why.status})...`;
    this.retry(watching, AFTER_FAILURE_MS);
  }

  retry(watching, delay) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (watching === this.watching) this.connect();
    }, delay);
  }
}
