// The console page: who you are, which database, and the three panels.
//
// Logging in posts the token once to POST /api/session, which answers with an HttpOnly
// session cookie: from then on every request of the page (the EventSources too, which
// cannot send a header) is let in by it, and no script can read it. With --dev there is
// nothing to log in to.

import {byId, call, element, runSql} from './api.js';
import {CandlePanel} from './candles.js';
import {ChangesPanel} from './changes.js';
import {SchemaTree} from './schema.js';
import {SqlPanel} from './sql.js';

const DEFAULT_DATABASE = 'demo';

class Console {
  constructor() {
    this.database = byId('database');
    this.who = byId('who');
    this.login = byId('login');
    this.logout = byId('logout');
    const wanted = new URLSearchParams(location.search).get('db') || DEFAULT_DATABASE;
    this.database.replaceChildren(element('option', wanted));
    this.database.value = wanted;
    const current = () => this.database.value;
    this.sql = new SqlPanel(current, () => this.refreshTables());
    this.changes = new ChangesPanel(current);
    this.candles = new CandlePanel(current);
    this.schema = new SchemaTree((database, sql) => {
      this.choose(database);
      this.sql.setText(sql);
    });
    this.login.addEventListener('submit', (event) => {
      event.preventDefault();
      this.signIn();
    });
    this.logout.addEventListener('click', () => this.signOut());
    this.database.addEventListener('change', () => this.chosen());
  }

  /** Makes `database` the page's database (the one SQL runs in). */
  choose(database) {
    if (this.database.value === database) return;
    if (![...this.database.options].some((o) => o.value === database)) {
      this.database.append(element('option', database));
    }
    this.database.value = database;
    this.chosen();
  }

  chosen() {
    const url = new URL(location.href);
    url.searchParams.set('db', this.database.value);
    history.replaceState(null, '', url);
    this.refreshTables();
  }

  async start() {
    await this.probe();
    return true;
  }

  /** Whether the page may read the database: signed in, --dev, or rights granted to all. */
  async probe() {
    const answer = await runSql(this.database.value, 'SHOW TABLES');
    const allowed = answer.ok;
    const user = this.who.dataset.user;
    this.login.hidden = Boolean(user); // also offered when allowed: a token may grant more
    this.logout.hidden = !user;
    if (allowed) {
      this.who.textContent = user ? `signed in as ${user}` : 'access granted';
      this.showTables(answer.json.dataset.map((row) => row[0]));
      const databases = await this.listDatabases();
      this.schema.show(databases);
      await this.changes.detectStream();
      await this.candles.discover(databases);
    } else {
      this.who.textContent = answer.status === 0 ? answer.json.error
        : `log in with a token (${answer.json?.error ?? answer.status})`;
    }
    return allowed;
  }

  async listDatabases() {
    const answer = await call('GET', '/api/stats');
    if (!answer.ok) return [this.database.value];
    const names = Object.keys(answer.json.databases ?? {}).sort();
    const chosen = this.database.value;
    if (!names.includes(chosen)) names.unshift(chosen);
    this.database.replaceChildren(...names.map((name) => element('option', name)));
    this.database.value = chosen;
    return names;
  }

  async refreshTables() {
    const answer = await runSql(this.database.value, 'SHOW TABLES');
    if (answer.ok) this.showTables(answer.json.dataset.map((row) => row[0]));
    if (this.schema.databases) this.schema.show(this.schema.databases); // the open ones anew
    // Nothing to chart yet: a table just made, or its first rows, may be chartable now.
    if (!answer.ok) return;
    if (this.candles.sources.size === 0) await this.candles.discover([]);
    else if (this.candles.symbolBox.options.length === 0) await this.candles.chooseSource();
  }

  showTables(names) {
    this.changes.setTables(names);
  }

  async signIn() {
    const token = byId('token');
    const answer = await call('POST', '/api/session', {}, token.value.trim());
    token.value = ''; // the cookie holds the session now; the token is not kept
    if (!answer.ok) {
      this.who.textContent = `not signed in: ${answer.json?.error ?? answer.status}`;
      return;
    }
    this.who.dataset.user = answer.json.user;
    await this.probe();
  }

  async signOut() {
    await call('DELETE', '/api/session');
    delete this.who.dataset.user;
    this.changes.stop('not watching');
    this.candles.stop();
    this.login.hidden = false;
    this.logout.hidden = true;
    this.who.textContent = 'signed out';
  }
}

window.refimplConsole = new Console();
window.consoleReady = window.refimplConsole.start();
