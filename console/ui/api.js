// The HTTP API, as the console calls it: every request carries the HTTP
// Basic credentials the user logged in with, kept in sessionStorage (gone
// when the tab closes). Requests are sent with credentials: "omit" so the
// browser neither adds cookies nor pops up its own login dialog on a 401.

const KEY = 'mayfly.auth';
const USER = 'mayfly.user';

// ApiError is an answer other than 2xx: status, and the API's error and
// reason; for a 403, permissions lists what the user lacks (Couchbase's
// notation, as the API answers).
export class ApiError extends Error {
  constructor(status, error, reason, permissions) {
    super(reason || error || `HTTP ${status}`);
    this.status = status;
    this.error = error;
    this.reason = reason || error || `HTTP ${status}`;
    this.permissions = Array.isArray(permissions) ? permissions : [];
  }
}

function basic(user, password) {
  const utf8 = new TextEncoder().encode(`${user}:${password}`);
  let bin = '';
  for (const b of utf8) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export function loggedIn() { return sessionStorage.getItem(KEY) !== null; }
export function user() { return sessionStorage.getItem(USER) || ''; }

// logout forgets the credentials and every other choice the console kept
// for this tab (the bucket, design document and view last shown): the next
// user of the tab does not see the names the last one chose.
export function logout() {
  for (const k of Object.keys(sessionStorage)) {
    if (k.startsWith('mayfly.')) sessionStorage.removeItem(k);
  }
}

// login checks the credentials against the API and keeps them if they work.
export async function login(name, password) {
  const authz = basic(name, password);
  await request('GET', '/pools/default/buckets', { authz });
  sessionStorage.setItem(KEY, authz);
  sessionStorage.setItem(USER, name);
}

// path builds an API path, encoding each interpolated value as one segment:
// path`/${bucket}/docs/${key}`.
export function path(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => { out += encodeURIComponent(String(v)) + strings[i + 1]; });
  return out;
}

// request calls the API. opts: query (object; undefined and '' values are
// left out), json (a value sent as JSON), form (an object sent
// form-encoded), body + type (sent as they are), raw (keep a JSON answer as
// text), bytes (keep a 2xx answer as its bytes, a Uint8Array: a binary
// value decoded as text would lose the bytes that are not UTF-8). It
// resolves to { status, headers, data }: data is parsed JSON when the answer
// is JSON, else text. A non-2xx answer rejects with an ApiError; a 401 also
// logs out.
export async function request(method, p, opts = {}) {
  let url = p;
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const qs = q.toString();
    if (qs) url += '?' + qs;
  }
  const headers = { Accept: 'application/json' };
  const authz = opts.authz || sessionStorage.getItem(KEY);
  if (authz) headers.Authorization = authz;
  let body;
  if (opts.json !== undefined) {
    body = typeof opts.json === 'string' ? opts.json : JSON.stringify(opts.json);
    headers['Content-Type'] = 'application/json';
  } else if (opts.form) {
    body = new URLSearchParams(opts.form).toString();
    headers['Content-Type'] = 'application/x-www-form-urlencoded';
  } else if (opts.body !== undefined) {
    body = opts.body;
    headers['Content-Type'] = opts.type || 'application/json';
  }
  let resp;
  try {
    resp = await fetch(url, { method, headers, body, credentials: 'omit', cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', `cannot reach the server: ${e.message}`);
  }
  if (opts.bytes && resp.ok) {
    return { status: resp.status, headers: resp.headers, data: new Uint8Array(await resp.arrayBuffer()) };
  }
  const text = await resp.text();
  let data = text;
  if ((!opts.raw || !resp.ok) && (resp.headers.get('Content-Type') || '').startsWith('application/json') && text !== '') {
    try { data = JSON.parse(text); } catch { /* keep the text */ }
  }
  if (!resp.ok) {
    if (resp.status === 401 && !opts.authz) {
      logout();
      window.dispatchEvent(new CustomEvent('mayfly:logout', { detail: 'Your session ended: log in again.' }));
    }
    const err = typeof data === 'object' && data ? data : {};
    throw new ApiError(resp.status, err.error, err.reason || err.message || (typeof data === 'string' ? data.trim() : ''), err.permissions);
  }
  return { status: resp.status, headers: resp.headers, data };
}

export const get = (p, query, signal) => request('GET', p, { query, signal }).then((r) => r.data);

// perm names the permissions the pages ask about, in Couchbase's notation.
export const perm = {
  createBuckets: 'cluster.buckets!create',
  deleteBucket: (b) => `cluster.bucket[${b}]!delete`,
  writeSettings: (b) => `cluster.bucket[${b}].settings!write`,
  readDocs: (b) => `cluster.bucket[${b}].data.docs!read`,
  writeDocs: (b) => `cluster.bucket[${b}].data.docs!write`,
  writeViews: (b) => `cluster.bucket[${b}].views!write`,
};

// permissions asks the server which of perms the user holds (POST
// /pools/default/checkPermissions): { perm: true|false }. The pages leave
// out the buttons whose action would only be refused. If the server cannot
// say (not a 401), every answer is true: the API still refuses what it must.
export async function permissions(perms) {
  try {
    return (await request('POST', '/pools/default/checkPermissions', { body: perms.join(','), type: 'text/plain' })).data;
  } catch (e) {
    if (e.status === 401) throw e;
    return Object.fromEntries(perms.map((p) => [p, true]));
  }
}

// clock tracks the server's engine clock: offset is server seconds minus
// browser seconds, so countdowns follow the server's idea of now (which a
// test may move).
export const clock = {
  offset: 0,
  set(serverNow) { this.offset = serverNow - Date.now() / 1000; },
  now() { return Date.now() / 1000 + this.offset; },
};

// syncClock reads the engine clock's now from the bucket's expiry forecast.
export async function syncClock(bucket) {
  try {
    const f = await get(path`/${bucket}/_expiry`, { interval: 3600, horizon: 3600 });
    clock.set(f.now);
  } catch { /* keep the last offset */ }
}
