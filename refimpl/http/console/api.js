// The console's one way to call the server: same-origin requests, JSON answers.
// Credentials are the session cookie (HttpOnly: this script never sees it) or none with
// --dev; a token is only ever sent once, to POST /api/session.

/** The query string of `params`, leaving out null and undefined values. */
export function queryString(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined) query.set(name, String(value));
  }
  const text = query.toString();
  return text ? '?' + text : '';
}

/**
 * Calls `path` and reads its JSON answer: {status, ok, json, text}. A network failure
 * answers status 0 with the reason as `json.error`, so callers handle one shape.
 */
export async function call(method, path, params = {}, body = undefined) {
  const options = {method, credentials: 'same-origin', headers: {}};
  if (body !== undefined) {
    options.body = body;
    options.headers['Content-Type'] = 'text/plain; charset=utf-8';
  }
  let answer;
  try {
    answer = await fetch(path + queryString(params), options);
  } catch (error) {
    return {status: 0, ok: false, json: {error: 'the server does not answer: ' + error.message},
            text: ''};
  }
  const text = await answer.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = {error: text};
  }
  return {status: answer.status, ok: answer.ok, json, text};
}

/** Runs SQL in `database` (POST /exec, the SQL as a text/plain body). */
export function runSql(database, sql) {
  return call('POST', '/exec', {db: database}, sql);
}

/** The element with this id; a missing one is a bug of the page, said at once. */
export function byId(id) {
  const element = document.getElementById(id);
  if (element === null) throw new Error('the page has no element #' + id);
  return element;
}

/** A new element with text content (never HTML: server text is data, not markup). */
export function element(tag, text = '', className = '') {
  const made = document.createElement(tag);
  if (text !== '') made.textContent = text;
  if (className) made.className = className;
  return made;
}

/** A value of a JSON answer as the console shows it. */
export function shown(value) {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
