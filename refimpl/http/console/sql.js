// The SQL panel: an editor whose error position is marked in place, its history, and the
// answer of every statement of what was run.
//
// The editor is a textarea over a <pre> that mirrors its text (same font, padding and
// wrapping); the mirror is transparent except for a <mark> on the character the server's
// `position` names, so the mark sits exactly under that character as the user sees it.
// A text of several statements is sent a statement a request (statements.js), as the SQL
// shell does over HTTP, each answer shown in turn, stopping at the first error. What was
// run is kept (newest first, in this browser's localStorage) and offered again.

import {byId, element, runSql} from './api.js';
import {resultBlock} from './results.js';
import {requestsOf} from './statements.js';

const HISTORY_KEY = 'refimpl.console.history';
const HISTORY_KEPT = 100;

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
    this.historyBox = byId('history');
    this.history = readHistory();
    this.stepped = -1; // where Ctrl+Up/Down is in the history; -1: the text being written
    byId('run').addEventListener('click', () => this.run());
    this.editor.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.run();
      } else if ((event.key === 'ArrowUp' || event.key === 'ArrowDown') && event.ctrlKey) {
        event.preventDefault();
        this.step(event.key === 'ArrowUp' ? 1 : -1);
      }
    });
    this.historyBox.addEventListener('change', () => {
      const chosen = Number(this.historyBox.value);
      if (Number.isInteger(chosen) && this.history[chosen] !== undefined) {
        this.setText(this.history[chosen]);
      }
      this.historyBox.value = '';
    });
    this.showHistory();
    this.editor.addEventListener('input', () => this.mark(null));
    this.editor.addEventListener('scroll', () => {
      this.marks.scrollTop = this.editor.scrollTop;
      this.marks.scrollLeft = this.editor.scrollLeft;
    });
    this.mark(null);
  }

  /** Puts `text` in the editor, as if typed (the error mark goes). */
  setText(text) {
    this.editor.value = text;
    this.mark(null);
    this.editor.focus();
  }

  step(by) {
    const next = Math.min(this.history.length - 1, Math.max(-1, this.stepped + by));
    if (next === this.stepped) return;
    if (this.stepped === -1) this.draft = this.editor.value;
    this.stepped = next;
    this.setText(next === -1 ? this.draft ?? '' : this.history[next]);
  }

  remember(sql) {
    this.history = [sql, ...this.history.filter((old) => old !== sql)].slice(0, HISTORY_KEPT);
    this.stepped = -1;
    try {
      localStorage.setItem(HISTORY_KEY, JSON.stringify(this.history));
    } catch {
      // storage refused (private window, quota): the history lasts as long as the page
    }
    this.showHistory();
  }

  showHistory() {
    const first = element('option', `history (${this.history.length})`);
    first.value = '';
    this.historyBox.replaceChildren(first, ...this.history.map((sql, n) => {
      const option = element('option', sql.replace(/\s+/g, ' ').slice(0, 80));
      option.value = String(n);
      option.title = sql;
      return option;
    }));
    this.historyBox.value = '';
  }

  async run() {
    const sql = this.editor.value;
    if (!sql.trim()) return;
    this.remember(sql);
    const requests = requestsOf(sql);
    if (requests.length === 0) {
      this.status.textContent = 'nothing to run: the text holds only comments';
      return;
    }
    this.status.textContent = 'running...';
    this.showError(null);
    this.mark(null);
    this.results.replaceChildren();
    const started = performance.now();
    let last = null;
    for (const [n, request] of requests.entries()) {
      const began = performance.now();
      last = await runSql(this.getDatabase(), request.text);
      const took = (performance.now() - began).toFixed(1);
      if (!last.ok) {
        this.showError(last.json, sql, request, requests.length > 1 ? n + 1 : null,
                       requests.length);
        break;
      }
      const block = resultBlock(last.json, `result-${n + 1}`);
      if (requests.length > 1) {
        const caption = element('p', '', 'caption');
        caption.append(element('span', `${n + 1}. `, 'muted'),
                       element('code', request.text.replace(/\s+/g, ' ').slice(0, 120)),
                       element('span', `  ${took} ms`, 'muted'));
        block.prepend(caption);
      }
      this.results.append(block);
    }
    const took = (performance.now() - started).toFixed(1);
    const count = requests.length > 1 ? `${requests.length} requests, ` : '';
    this.status.textContent = `${count}${last?.status || 'no answer'} in ${took} ms`;
    this.onChanged();
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

  /** Shows the error of `request` (a piece of `sql`), its place marked in the editor. */
  showError(body, sql = '', request = {text: sql, start: 0}, number = null, total = 1) {
    if (body === null) {
      this.error.hidden = true;
      this.error.replaceChildren();
      return;
    }
    const parts = [element('span', body?.error ?? 'the server gave no reason')];
    const position = body?.position;
    if (position && Number.isInteger(position.line) && Number.isInteger(position.column)) {
      const offset = request.start + offsetOf(request.text, position.line, position.column);
      const before = sql.slice(0, offset).split('\n');
      const where = `line ${before.length}, column ${Array.from(before.at(-1)).length + 1}`;
      if (!parts[0].textContent.includes(where)) {
        const said = request.start === 0 ? ` (at ${where})` : ` (in the editor at ${where})`;
        parts.push(element('span', said, 'error-where'));
      }
      this.mark(offset);
      this.editor.focus();
      this.editor.setSelectionRange(offset, offset);
    }
    if (number !== null) {
      const after = number < total ? '; the ones after it were not run' : '';
      parts.push(element('span', ` in statement ${number} of ${total}${after}`, 'error-where'));
    } else if (Number.isInteger(body?.statement)) {
      parts.push(element('span', ` in statement ${body.statement}`, 'error-where'));
    }
    this.error.replaceChildren(...parts);
    this.error.hidden = false;
  }
}

function readHistory() {
  try {
    const kept = JSON.parse(localStorage.getItem(HISTORY_KEY) ?? '[]');
    return Array.isArray(kept) ? kept.filter((sql) => typeof sql === 'string') : [];
  } catch {
    return [];
  }
}
