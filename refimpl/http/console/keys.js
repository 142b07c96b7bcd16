// A delete's `key` decoded into the row's key columns (spec/changes.md, "The key of a
// delete"): lower-case hex of the MessagePack of `[partition, identity]`, identity being
// the key columns' values in key order (or `[row id]` for a table without a key).
//
// Only what that encoding uses is read: nil, booleans, integers, 32/64-bit floats, strings
// and arrays. Anything else is refused with an Error, and the panel shows the hex instead.

/** The values MessagePack `hex` holds (arrays as arrays; 64-bit integers as Numbers). */
export function unpackHex(hex) {
  if (!/^([0-9a-f]{2})*$/.test(hex)) throw new Error('not hex');
  const bytes = new Uint8Array(hex.length / 2);
  for (let n = 0; n < bytes.length; n += 1) bytes[n] = parseInt(hex.slice(2 * n, 2 * n + 2), 16);
  const view = new DataView(bytes.buffer);
  let at = 0;
  const take = (count) => {
    if (at + count > bytes.length) throw new Error('the key ends too soon');
    const from = at;
    at += count;
    return from;
  };
  const text = (length) => new TextDecoder().decode(bytes.subarray(take(length), at));
  const list = (length) => Array.from({length}, () => value());
  function value() {
    const head = bytes[take(1)];
    if (head <= 0x7f) return head;
    if (head >= 0xe0) return head - 0x100;
    if (head >= 0x90 && head <= 0x9f) return list(head & 0x0f);
    if (head >= 0xa0 && head <= 0xbf) return text(head & 0x1f);
    switch (head) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xca: return view.getFloat32(take(4));
      case 0xcb: return view.getFloat64(take(8));
      case 0xcc: return view.getUint8(take(1));
      case 0xcd: return view.getUint16(take(2));
      case 0xce: return view.getUint32(take(4));
      case 0xcf: return Number(view.getBigUint64(take(8)));
      case 0xd0: return view.getInt8(take(1));
      case 0xd1: return view.getInt16(take(2));
      case 0xd2: return view.getInt32(take(4));
      case 0xd3: return Number(view.getBigInt64(take(8)));
      case 0xd9: return text(view.getUint8(take(1)));
      case 0xda: return text(view.getUint16(take(2)));
      case 0xdb: return text(view.getUint32(take(4)));
      case 0xdc: return list(view.getUint16(take(2)));
      case 0xdd: return list(view.getUint32(take(4)));
      default: throw new Error('a MessagePack type keys do not use: 0x' + head.toString(16));
    }
  }
  const result = value();
  if (at !== bytes.length) throw new Error('bytes after the key');
  return result;
}

/**
 * The key columns' values of a delete's `key`, as {column: value}; TIMESTAMP columns as the
 * API writes them (ISO 8601, UTC, milliseconds). A table without a key gives {row_id: n}.
 * `keyColumns` is [[name, type], ...] in key order. Throws when the key is not such a key.
 */
export function decodeKey(hex, keyColumns) {
  const decoded = unpackHex(hex);
  if (!Array.isArray(decoded) || decoded.length !== 2 || !Array.isArray(decoded[1])) {
    throw new Error('not a [partition, identity] key');
  }
  const identity = decoded[1];
  if (keyColumns.length === 0) return {row_id: identity[0]};
  if (identity.length !== keyColumns.length) throw new Error('the key has other columns');
  const values = {};
  keyColumns.forEach(([name, type], n) => {
    const raw = identity[n];
    values[name] = type === 'TIMESTAMP' && typeof raw === 'number'
      ? microsToText(raw) : raw;
  });
  return values;
}

/** Microseconds since 1970 as the API writes a TIMESTAMP (more digits when they matter). */
function microsToText(micros) {
  const millis = Math.floor(micros / 1000);
  const text = new Date(millis).toISOString();
  const rest = micros - millis * 1000;
  return rest === 0 ? text : text.replace('Z', String(rest).padStart(3, '0') + 'Z');
}

/** The key columns of a table, in key order, from its SHOW CREATE TABLE statement. */
export function keyColumnsOf(statement, columns) {
  const types = new Map(columns.map(([name, type]) => [name, type]));
  const clause = /\b(?:PRIMARY|DEDUP) KEY\s*\(([^)]*)\)/i.exec(statement);
  const names = clause ? clause[1].split(',').map((name) => name.trim())
    : [...statement.matchAll(/^\s+(\w+) \w+ PRIMARY KEY/gim)].map((m) => m[1]);
  return names.filter((name) => types.has(name)).map((name) => [name, types.get(name)]);
}
