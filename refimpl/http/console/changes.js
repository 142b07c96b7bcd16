// The changes panel: a table's change stream, live, resumed by its last id across restarts.
//
// GET /api/changes answers each request once (it waits for a commit, sends, ends). The page
// reconnects itself, always with `from=<the last id>`, rather than leaving it to the
// EventSource: a browser gives up on an answer that is not a 200 (a server shutting down
// answers 503), and a URL carrying `from` would otherwise be asked again as it was.
// Changes are shown once each by their (lsn, seq), in commit order.
//
// With the event stream (GET /stream/changes) on the server, the same panel can follow it
// instead: a one-time ticket from POST /stream/tickets before every connect, as a browser's
// EventSource cannot send a header, and `last-event-id` to resume.

import {byId, call, element, queryString, shown} from './api.js';

const MAX_SHOWN = 200;
const NEXT_ROUND_MS = 100;     // after an answer that ended as it should
const AFTER_FAILURE_MS = 1000; // after a failed connect: the server may be restarting

/** (lsn, n) of an event stream id: `<lsn>.<n>` is the n-th event of the transaction, `<lsn>`
 * the end of the whole transaction. */
export function idPlace(id) {
  const [lsn, n] = String(id).split('.');
  return [Number(lsn), n === undefined ? Infinity : Number(n)];
}

export class ChangesPanel {
  constructor(getDatabase) {
    this.getDatabase = getDatabase;
    this.list = byId('changes');
    this.status = byId('changes-status');
    this.tables = byId('change-table');
    this.streamBox = byId('use-stream');
    this.source = null;
    this.timer = null;
    this.watching = null; // {database, table, stream}
    this.lastId = null;   // where to read on: the id of the last whole transaction read
    this.shownUpTo = [0, -1]; // (lsn, seq) of the last change shown
    this.count = 0;
    byId('watch').addEventListener('click', () => this.watch());
    byId('unwatch').addEventListener('click', () => this.stop('not watching'));
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

  watch() {
    const table = this.tables.value;
    if (!table) {
      this.status.textContent = 'no table to watch: create one first';
      return;
    }
    this.stop('');
    this.watching = {database: this.getDatabase(), table, stream: this.streamBox.checked};
    this.lastId = null;
    this.shownUpTo = [0, -1];
    this.count = 0;
    this.list.replaceChildren();
    byId('unwatch').disabled = false;
    this.connect();
  }

  stop(why) {
    clearTimeout(this.timer);
    if (this.source) this.source.close();
    this.source = null;
    this.watching = null;
    byId('unwatch').disabled = true;
    if (why) this.status.textContent = why;
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
      this.list.prepend(element('li', 'reset: the stream lost its place; read the table again',
                                'reset'));
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
    const item = element('li', '', 'change ' + (change.op ?? ''));
    item.dataset.lsn = String(change.lsn);
    item.append(element('span', place.join('.'), 'lsn'),
                element('span', change.op ?? '', 'op'),
                element('code', shown(change.row ?? change.key)));
    this.list.prepend(item);
    while (this.list.children.length > MAX_SHOWN) this.list.lastElementChild.remove();
    this.status.textContent = `${this.count} change(s) of ${this.watching?.table}`;
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
