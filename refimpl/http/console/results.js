// One statement's answer as the page shows it: a message, or a table shown a page of rows
// at a time (the whole answer is held; only a page is in the DOM), with a CSV download of
// all its rows made in the page (RFC 4180, like GET /exp), so nothing is asked twice.

import {element, shown} from './api.js';

export const PAGE_ROWS = 100;

/** `value` as a CSV field: quoted when it holds a comma, a quote or a line break. */
export function csvField(value) {
  if (value === null || value === undefined) return '';
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? '"' + text.replaceAll('"', '""') + '"' : text;
}

/** The whole answer as CSV text: a header of column names, then every row. */
export function csvOf(body) {
  const lines = [body.columns.map((c) => csvField(c.name)).join(',')];
  for (const row of body.dataset) lines.push(row.map(csvField).join(','));
  return lines.join('\r\n') + '\r\n';
}

/** A block showing `body` (an /exec answer); `name` names its CSV file. */
export function resultBlock(body, name) {
  const block = element('div', '', 'result');
  if (!Array.isArray(body.columns)) {
    block.append(element('p', body.message ?? 'done', 'message'));
    return block;
  }
  const table = element('table');
  const head = element('tr');
  for (const column of body.columns) {
    const cell = element('th', column.name);
    cell.append(element('span', ' ' + column.type, 'type'));
    head.append(cell);
  }
  table.append(element('thead'));
  table.tHead.append(head);
  const rows = element('tbody');
  table.append(rows);
  const pages = Math.max(1, Math.ceil(body.dataset.length / PAGE_ROWS));
  const bar = element('div', '', 'bar pager');
  const earlier = element('button', 'previous', 'previous');
  const later = element('button', 'next', 'next');
  const where = element('span', '', 'muted where');
  const download = element('button', 'CSV', 'csv');
  download.title = `download all ${body.dataset.length} row(s) as CSV`;
  earlier.type = later.type = download.type = 'button';
  let page = 0;
  const show = () => {
    const first = page * PAGE_ROWS;
    const slice = body.dataset.slice(first, first + PAGE_ROWS);
    rows.replaceChildren(...slice.map((row) => {
      const line = element('tr');
      for (const value of row) line.append(element('td', shown(value), value === null ? 'null' : ''));
      return line;
    }));
    const last = first + slice.length;
    where.textContent = body.dataset.length > PAGE_ROWS
      ? `rows ${first + 1}-${last} of ${body.count}, page ${page + 1} of ${pages}`
      : `${body.count} row(s)`;
    earlier.disabled = page === 0;
    later.disabled = page >= pages - 1;
    block.dataset.page = String(page + 1);
  };
  earlier.addEventListener('click', () => { page = Math.max(0, page - 1); show(); });
  later.addEventListener('click', () => { page = Math.min(pages - 1, page + 1); show(); });
  download.addEventListener('click', () => {
    const url = URL.createObjectURL(new Blob([csvOf(body)], {type: 'text/csv'}));
    const link = element('a');
    link.href = url;
    link.download = name + '.csv';
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  });
  if (pages > 1) bar.append(earlier, later);
  bar.append(where, download);
  block.append(table, bar);
  show();
  return block;
}
