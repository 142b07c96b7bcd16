// node-postgres (pg, pg-cursor) against a refimpl server: each check prints "OK <name>" or
// "FAIL <name>: <why>". Run by tests/pgwire/clients/test_node_pg.py:
//   node check.js HOST PORT DATABASE USER PASSWORD
'use strict';
const { Client } = require('pg');
const Cursor = require('pg-cursor');

const [host, port, database, user, password] = process.argv.slice(2);
const config = { host, port: Number(port), database, user, password };

function expect(ok, what) {
  if (!ok) throw new Error(what);
}

async function check(name, body) {
  try {
    await body();
    console.log(`OK ${name}`);
  } catch (error) {
    console.log(`FAIL ${name}: ${String(error).replace(/\n/g, ' ')}`);
  }
}

async function main() {
  const client = new Client(config);
  await client.connect();
  console.log('OK connect');
  const at = new Date(Date.UTC(2026, 8, 24, 10, 0, 0, 250));
  await check('parameters', async () => {
    await client.query(
      'CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE, name STRING, ok BOOLEAN, at TIMESTAMP)');
    for (let n = 1; n <= 50; n++) {
      await client.query('INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6)',
        [n, String(2 ** 40 + n), n / 4, `é'x ${n}`, n % 2 === 0, at]);
    }
    await client.query('INSERT INTO t (id) VALUES ($1)', [51]);
    const one = await client.query('SELECT * FROM t WHERE id = $1', [7]);
    const row = one.rows[0];
    expect(one.rowCount === 1, `rowCount ${one.rowCount}`);
    expect(row.big === String(2 ** 40 + 7), `big ${row.big}`); // int8 comes as text in pg
    expect(row.x === 1.75 && row.name === "é'x 7" && row.ok === false, JSON.stringify(row));
    expect(row.at.getTime() === at.getTime(), `at ${row.at}`);
    const nulls = await client.query('SELECT * FROM t WHERE id = $1', [51]);
    expect(nulls.rows[0].name === null && nulls.rows[0].at === null, JSON.stringify(nulls.rows[0]));
    const counted = await client.query('SELECT count(*) AS n FROM t WHERE ok AND x > $1', [5]);
    expect(counted.rows[0].n === '15', `count ${counted.rows[0].n}`);
  });
  await check('named-statement', async () => {
    for (let n = 1; n <= 3; n++) {
      const r = await client.query({ name: 'by-id', text: 'SELECT name FROM t WHERE id = $1', values: [n] });
      expect(r.rows[0].name === `é'x ${n}`, r.rows[0].name);
    }
  });
  await check('cursor-pages', async () => {
    await client.query('BEGIN');
    const cursor = client.query(new Cursor('SELECT id FROM t WHERE id <= $1 ORDER BY id', [50]));
    const pages = [];
    for (;;) {
      const rows = await cursor.read(20);
      if (rows.length === 0) break;
      pages.push(rows.map((r) => r.id));
    }
    await cursor.close();
    await client.query('COMMIT');
    expect(pages.length === 3 && pages[2].length === 10, JSON.stringify(pages.map((p) => p.length)));
    expect(pages.flat().join(',') === Array.from({ length: 50 }, (_, i) => i + 1).join(','), 'ids in order');
  });
  await check('listen', async () => {
    const listener = new Client(config);
    await listener.connect();
    const heard = [];
    const arrived = new Promise((resolve) => {
      listener.on('notification', (n) => {
        heard.push(`${n.channel}:${n.payload}`);
        if (heard.length === 2) resolve();
      });
    });
    await listener.query('LISTEN jobs');
    await listener.query('LISTEN "kdb_changes.t"');
    await client.query("NOTIFY jobs, 'go'");
    await client.query('DELETE FROM t WHERE id = $1', [51]);
    await Promise.race([arrived, new Promise((_, reject) => setTimeout(() => reject(new Error(`heard ${heard}`)), 5000))]);
    await listener.end();
    expect(heard[0] === 'jobs:go', heard[0]);
    const change = JSON.parse(heard[1].slice('kdb_changes.t:'.length));
    expect(change.op === 'delete', heard[1]);
  });
  await check('error-code', async () => {
    try {
      await client.query('INSERT INTO t (id) VALUES ($1)', [1]);
      throw new Error('no error');
    } catch (error) {
      expect(error.code === '23505', `code ${error.code}`);
    }
    const after = await client.query('SELECT count(*) AS n FROM t');
    expect(after.rows[0].n === '50', `count ${after.rows[0].n}`);
  });
  await client.end();
}

main().catch((error) => {
  console.log(`FAIL main: ${error}`);
  process.exitCode = 1;
});
