// A text of several statements cut into the requests the console sends, as the SQL shell
// does over HTTP: `/exec` answers a text's last statement only, so each statement is a
// request of its own, and its answer is shown in turn. A `;` ends a statement only outside
// a string ('...', with '' inside), a quoted name ("..."), a comment (-- to the line's end,
// /* ... */) and a dollar-quoted body ($$ ... $$ or $tag$ ... $tag$).
//
// A transaction is one request: from BEGIN (or START TRANSACTION) to its COMMIT, END or
// ROLLBACK, the statements are sent together, since separate requests would each be a
// transaction of their own (and a ROLLBACK would find nothing to roll back).

/** The statements of `text`: [{text, start}], `start` the offset of its first character. */
export function splitStatements(text) {
  const found = [];
  let start = 0;
  let at = 0;
  const push = (end) => {
    const piece = text.slice(start, end);
    const lead = piece.length - piece.trimStart().length;
    if (meaningful(piece)) found.push({text: piece.trim(), start: start + lead});
  };
  while (at < text.length) {
    const c = text[at];
    const next = text[at + 1];
    if (c === "'" || c === '"') {
      at = closing(text, at + 1, c);
    } else if (c === '-' && next === '-') {
      const end = text.indexOf('\n', at);
      at = end === -1 ? text.length : end + 1;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', at + 2);
      at = end === -1 ? text.length : end + 2;
    } else if (c === '$') {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(text.slice(at));
      if (tag) {
        const end = text.indexOf(tag[0], at + tag[0].length);
        at = end === -1 ? text.length : end + tag[0].length;
      } else {
        at += 1;
      }
    } else if (c === ';') {
      push(at);
      at += 1;
      start = at;
    } else {
      at += 1;
    }
  }
  push(text.length);
  return found;
}

/** The requests to send: each statement, but a transaction's statements together. */
export function requestsOf(text) {
  const requests = [];
  let open = null;
  for (const statement of splitStatements(text)) {
    const words = firstWords(statement.text);
    if (open === null && (words[0] === 'BEGIN' || (words[0] === 'START' && words[1] === 'TRANSACTION'))) {
      open = {text: statement.text, start: statement.start, statements: 1, parts: [statement]};
      continue;
    }
    if (open !== null) {
      open.parts.push(statement);
      open.statements += 1;
      if (['COMMIT', 'END', 'ROLLBACK', 'ABORT'].includes(words[0])) {
        requests.push(joined(text, open));
        open = null;
      }
      continue;
    }
    requests.push({text: statement.text, start: statement.start, statements: 1});
  }
  if (open !== null) requests.push(joined(text, open)); // the server says what is missing
  return requests;
}

/** A transaction's statements as one text, cut from the input so positions still match. */
function joined(text, open) {
  const last = open.parts.at(-1);
  return {text: text.slice(open.start, last.start + last.text.length), start: open.start,
          statements: open.statements};
}

function closing(text, at, quote) {
  while (at < text.length) {
    if (text[at] === quote) {
      if (text[at + 1] === quote) at += 2; // a doubled quote is the quote itself
      else return at + 1;
    } else {
      at += 1;
    }
  }
  return at;
}

/** Whether a piece holds more than blanks and comments. */
function meaningful(piece) {
  const bare = piece.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
  return bare.trim() !== '';
}

function firstWords(statement) {
  const bare = statement.replace(/^(\s|--[^\n]*\n?|\/\*[\s\S]*?\*\/)*/, '');
  return bare.split(/[\s;(]+/, 2).map((word) => word.toUpperCase());
}
