// The schema tree: databases, their tables and views, and each table's columns, read when
// opened (SHOW TABLES, SHOW COLUMNS FROM) with the user's own rights. A table's "query"
// button puts `SELECT * FROM t LIMIT 100` in the editor, in that table's database.

import {byId, element, runSql} from './api.js';

export class SchemaTree {
  constructor(onQuery) {
    this.onQuery = onQuery; // (database, sql) => void
    this.tree = byId('schema');
    this.openPaths = new Set(); // "db" and "db.table" of the open nodes
    byId('schema-refresh').addEventListener('click', () => this.show(this.databases ?? []));
  }

  /** Lists `databases`, each opened on demand; the open ones are read again. */
  show(databases) {
    this.databases = databases;
    this.tree.replaceChildren(...databases.map((name) => this.node(name, 'database', name,
      () => this.tables(name))));
  }

  /** A <details> whose children `load` makes the first time (and every time it reopens). */
  node(label, kind, path, load) {
    const node = element('details', '', kind);
    node.dataset.path = path;
    const summary = element('summary');
    summary.append(element('span', label, 'name'));
    node.append(summary);
    const list = element('ul');
    node.append(list);
    node.addEventListener('toggle', async () => {
      if (!node.open) {
        this.openPaths.delete(path);
        return;
      }
      this.openPaths.add(path);
      list.replaceChildren(element('li', 'reading...', 'muted'));
      const items = await load(node, summary);
      list.replaceChildren(...items);
      node.dataset.loaded = 'yes';
    });
    node.open = this.openPaths.has(path); // drawn anew (after a run), it stays as it was
    return node;
  }

  async tables(database) {
    const answer = await runSql(database, 'SHOW TABLES');
    if (!answer.ok) return [element('li', answer.json?.error ?? String(answer.status), 'error')];
    if (answer.json.dataset.length === 0) return [element('li', 'no tables', 'muted')];
    return answer.json.dataset.map(([table, kind]) => {
      const item = element('li');
      const node = this.node(table, 'table', `${database}.${table}`,
                             () => this.columns(database, table));
      if (kind === 'view') node.querySelector('summary').append(element('span', ' view', 'type'));
      const query = element('button', 'query', 'query');
      query.type = 'button';
      query.title = `SELECT * FROM ${table} LIMIT 100 in ${database}`;
      query.addEventListener('click', (event) => {
        event.preventDefault(); // not a toggle of the <details>
        this.onQuery(database, `SELECT * FROM ${table} LIMIT 100`);
      });
      node.querySelector('summary').append(query);
      item.append(node);
      return item;
    });
  }

  async columns(database, table) {
    const answer = await runSql(database, `SHOW COLUMNS FROM ${table}`);
    if (!answer.ok) return [element('li', answer.json?.error ?? String(answer.status), 'error')];
    return answer.json.dataset.map(([name, type, primaryKey, timeseries]) => {
      const item = element('li', '', 'column');
      item.append(element('span', name, 'name'), element('span', ' ' + type, 'type'));
      if (primaryKey) item.append(element('span', ' key', 'type'));
      if (timeseries) item.append(element('span', ' time', 'type'));
      return item;
    });
  }
}
