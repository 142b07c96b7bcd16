// The SQL panel: an editor whose error position is marked in place, and the answer's table.
//
// The editor is a textarea over a <pre> that mirrors its text (same font, padding and
// wrapping); the mirror is transparent except for a <mark> on the character the server's
// `position` names, so the mark sits exactly under that character as the user sees it.

import {byId, element, runSql, shown} from './api.js';

const MAX_ROWS_SHOWN = 1000;

/** The UTF-16 offset in `text` of the 1-based line and column (counted in characters). */
export function offsetOf(text, line, column) {
  const lines = text.split('\n');
  let offset = 0;
  for (let n = 0; n < Math.min(line - 1, lines.length); n += 1) offset += lines[n].length + 1;
  const current = lines[Math.min(line, lines.length) - 1] ?? '';
  const before = Array.from(current).slice(0, Math.max(0, column - 1)).join('');
  return offset + before.length;
}

export class SqlPanel {
  constructor(getDatabase, onChanged) {
    this.getDatabase = getDatabase;
    this.onChanged = onChanged; // called after a run that may have changed the tables
    this.editor = byId('sql');
    this.marks = byId('sql-marks');
    this.error = byId('sql-error');
    this.results = byId('results');
    this.status = byId('sql-status');
    byId('run').addEventListener('click', () => this.run());
    this.editor.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.run();
      }
    });
    this.editor.addEventListener('input', () => this.mark(null));
    this.editor.addEventListener('scroll', () => {
      this.marks.scrollTop = this.editor.scrollTop;
      this.marks.scrollLeft = this.editor.scrollLeft;
    });
    this.mark(null);
  }

  async run() {
    const sql = this.editor.value;
    if (!sql.trim()) return;
    this.status.textContent = 'running...';
    const started = performance.now();
    const answer = await runSql(this.getDatabase(), sql);
    const took = (performance.now() - started).toFixed(1);
    this.status.textContent = `${answer.status || 'no answer'} in ${took} ms`;
    if (answer.ok) {
      this.showError(null);
      this.mark(null);
      this.showResult(answer.json);
      this.onChanged();
    } else {
      this.showError(answer.json, sql);
      this.results.replaceChildren();
    }
  }

  /** Mirrors the editor's text, with the character at `offset` marked (null: none). */
  mark(offset) {
    const text = this.editor.value;
    if (offset === null) {
      this.marks.replaceChildren(document.createTextNode(text + '\n'));
      return;
    }
    const at = Math.min(offset, text.length);
    const next = text.codePointAt(at);
    const width = next === undefined ? 0 : String.fromCodePoint(next).length;
    // At a line end or the end of the text, a space is marked: the place is still shown.
    const markedText = width && text[at] !== '\n' ? text.slice(at, at + width) : ' ';
    const mark = element('mark', markedText, 'error-at');
    const after = markedText === ' ' ? text.slice(at) : text.slice(at + width);
    this.marks.replaceChildren(document.createTextNode(text.slice(0, at)), mark,
                               document.createTextNode(after + '\n'));
  }

  showError(body, sql = '') {
    if (body === null) {
      this.error.hidden = true;
      this.error.replaceChildren();
      return;
    }
    const parts = [element('span', body?.error ?? 'the server gave no reason')];
    const position = body?.position;
    if (position && Number.isInteger(position.line) && Number.isInteger(position.column)) {
      const where = `line ${position.line}, column ${position.column}`;
      if (!parts[0].textContent.includes(where)) {
        parts.push(element('span', ` (at ${where})`, 'error-where'));
      }
      const offset = offsetOf(sql, position.line, position.column);
      this.mark(offset);
      this.editor.focus();
      this.editor.setSelectionRange(offset, offset);
    }
    if (Number.isInteger(body?.statement)) {
      parts.push(element('span', ` in statement ${body.statement}`, 'error-where'));
    }
    this.error.replaceChildren(...parts);
    this.error.hidden = false;
  }

  showResult(body) {
    if (!Array.isArray(body.columns)) {
      this.results.replaceChildren(element('p', body.message ?? 'done', 'message'));
      return;
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
    for (const row of body.dataset.slice(0, MAX_ROWS_SHOWN)) {
      const line = element('tr');
      for (const value of row) {
        line.append(element('td', shown(value), value === null ? 'null' : ''));
      }
      rows.append(line);
    }
    table.append(rows);
    const more = body.count > MAX_ROWS_SHOWN ? `, the first ${MAX_ROWS_SHOWN} shown` : '';
    this.results.replaceChildren(table, element('p', `${body.count} row(s)${more}`, 'muted'));
  }
}
