// The Documents page: a collection's documents in key order, each with its
// expiration as a live countdown; a document's view, edit and delete; and a
// box that loads newline-delimited JSON through POST /{bucket}/_bulk.
import { get, request, path, clock, syncClock, perm, permissions, ApiError } from './api.js';
import { h, fill, field, status, busy, confirmButton, duration, utc, num, pretty, permissionText, EDIT_MAX, SHOW_MAX, utf8Len } from './dom.js';

const PAGE = 25;

// BULK_STATUS is the HTTP status the document API answers for a _bulk
// line's error code.
const BULK_STATUS = { not_found: 404, key_exists: 409, cas_mismatch: 409, locked: 423, too_large: 413 };

// dotKey tells the keys "." and "..", which a browser cannot send as a
// path segment (it resolves them as the URL's dot segments).
export function dotKey(key) {
  return key === '.' || key === '..';
}

// valueText is how the editor shows a document read by readDoc: { text,
// fixed (read-only: Save changes only the expiry), note }. A JSON value up
// to EDIT_MAX bytes is indented for editing; a binary one that is UTF-8 text
// without carriage returns is edited as text. The rest is shown read-only:
// a larger value in part, unindented; a value that is not UTF-8 as hex; text
// with carriage returns as it is (a text box turns CRLF into LF, so saving
// it would change the bytes). A UTF-8 byte order mark is decoded as the
// character U+FEFF, not dropped, so that Save keeps the value's bytes.
export function valueText(d) {
  const size = `${num(d.size)} bytes`;
  const large = d.size > EDIT_MAX;
  const tooLarge = `Too large to edit here (${size}, over 1 MiB): shown in part, read-only; Save changes only the expiry. Use the HTTP API or the mayfly command for the value.`;
  if (d.json !== undefined) {
    if (!large) return { text: pretty(d.json), fixed: false, note: '' };
    return { text: d.json.length > SHOW_MAX ? `${d.json.slice(0, SHOW_MAX)}… (${size})` : d.json, fixed: true, note: tooLarge };
  }
  let end = d.bytes.length;
  if (large) {
    // Cut at a character's start.
    end = SHOW_MAX;
    while (end > 0 && (d.bytes[end] & 0xc0) === 0x80) end--;
  }
  let text;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(d.bytes.subarray(0, end));
  } catch {
    text = undefined;
  }
  if (text === undefined && !large) {
    return { text: hexDump(d.bytes), fixed: true, note: `A binary value that is not UTF-8 text (${size}), shown in hex, read-only: Save changes only the expiry.` };
  }
  if (large) {
    return { text: text === undefined ? hexDump(d.bytes) : `${text}… (${size})`, fixed: true, note: `A binary value. ${tooLarge}` };
  }
  if (text.includes('\r')) {
    return { text, fixed: true, note: `A binary value with carriage returns (${size}), which a text box would turn into line feeds: shown read-only; Save changes only the expiry.` };
  }
  // ignoreBOM above: a byte order mark at the start is text the box holds
  // (invisible), so Save writes it back.
  const bom = text.startsWith('\uFEFF') ? ' (It begins with a byte order mark, which the box holds but does not show; saving keeps it.)' : '';
  return { text, fixed: false, note: `A binary value, shown as text: saving stores what the box holds.${bom}` };
}

// hexDump writes bytes as lines of offset, 16 bytes in hex and the printable
// ones: at most SHOW_MAX characters' worth, then the whole value's size.
export function hexDump(b) {
  const n = Math.min(b.length, Math.floor(SHOW_MAX / 80) * 16);
  const lines = [];
  for (let off = 0; off < n; off += 16) {
    const row = b.subarray(off, Math.min(off + 16, n));
    const hex = Array.from(row, (x) => x.toString(16).padStart(2, '0')).join(' ');
    const text = Array.from(row, (x) => (x >= 0x20 && x < 0x7f ? String.fromCharCode(x) : '.')).join('');
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${text}`);
  }
  if (b.length > n) lines.push(`… (${num(b.length)} bytes)`);
  return lines.join('\n');
}

// fromBase64 and toBase64 convert between standard base64 and bytes.
export function fromBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function toBase64(b) {
  let bin = '';
  for (let i = 0; i < b.length; i += 0x8000) bin += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(bin);
}

// countdown is the text of an expiration: "never", "in 4m 10s", or expired.
export function countdown(exp) {
  if (!exp) return 'never';
  const left = exp - clock.now();
  return left > 0 ? `in ${duration(left)}` : 'expired, not purged yet';
}

// tickCountdowns rewrites every [data-exp] element under root.
export function tickCountdowns(root) {
  for (const el of root.querySelectorAll('[data-exp]')) {
    const exp = Number(el.dataset.exp);
    el.textContent = countdown(exp);
    el.classList.toggle('expired', exp > 0 && exp <= clock.now());
  }
}

export function render(main, { bucket }) {
  const state = { scope: '_default', coll: '_default', start: '', skip: 0, total: 0 };
  const collSel = h('select', { id: 'doc-collection' });
  const startKey = h('input', { id: 'doc-startkey', placeholder: 'start at key…', type: 'search' });
  const listStatus = status('doc-list-status');
  const list = h('div', { id: 'doc-list' });
  const pos = h('span', { class: 'muted', id: 'doc-pos' });
  const prev = h('button', { type: 'button' }, '‹ Previous');
  const next = h('button', { type: 'button' }, 'Next ›');
  const editor = h('div', { id: 'doc-editor' });
  // What the user's roles allow: reading and writing documents. Until the
  // server says, nothing is shown that it might refuse.
  const may = { read: false, write: false };
  const writeOnly = []; // controls shown only to a user who may write

  const collQuery = () => (state.scope === '_default' && state.coll === '_default' ? undefined : `${state.scope}.${state.coll}`);

  async function load() {
    if (!may.read) return;
    await syncClock(bucket);
    let res;
    try {
      res = await get(path`/pools/default/buckets/${bucket}/scopes/${state.scope}/collections/${state.coll}/docs`,
        { skip: state.skip, limit: PAGE, startkey: state.start ? JSON.stringify(state.start) : undefined });
    } catch (e) {
      listStatus.err(e);
      fill(list);
      return;
    }
    listStatus.clear();
    state.total = res.total_rows;
    const from = res.rows.length ? state.skip + 1 : 0;
    pos.textContent = `${num(from)}–${num(state.skip + res.rows.length)} of ${num(res.total_rows)}`;
    prev.disabled = state.skip === 0;
    next.disabled = state.skip + res.rows.length >= res.total_rows;
    fill(list, res.rows.length ? h('table', { class: 'grid docs' },
      h('thead', null, h('tr', null, ['Key', 'Expires', 'Type', 'Flags', 'Revision'].map((t) => h('th', null, t)))),
      h('tbody', null, res.rows.map((r) => h('tr', { 'data-id': r.id },
        h('td', null, h('a', { href: '#', class: 'doc-key', onclick: (ev) => { ev.preventDefault(); open(r.id); } }, r.id)),
        h('td', { class: 'countdown', 'data-exp': r.expiration, title: r.expiration ? utc(r.expiration) : 'no expiration' }, countdown(r.expiration)),
        h('td', null, r.type),
        h('td', { class: 'num' }, r.flags),
        h('td', { class: 'muted mono' }, r.rev))))) : h('p', { class: 'muted' }, 'No documents here.'));
  }

  // The document routes of keys "." and "..": a browser takes
  // /{b}/docs/.. for the path /{b}/, so these keys go in a query or a
  // body instead (the listing by key to read, _bulk to write); every other
  // key keeps /{b}/docs/{key}.
  const collPath = () => path`/pools/default/buckets/${bucket}/scopes/${state.scope}/collections/${state.coll}/docs`;

  // readDoc reads a document: { cas (text: above 2^53), exp, flags, size,
  // json (the value's text) or bytes (a binary value) }.
  async function readDoc(id) {
    if (!dotKey(id)) {
      const r = await request('GET', path`/${bucket}/docs/${id}`, { query: { collection: collQuery() }, bytes: true });
      const isJSON = (r.headers.get('Content-Type') || '').startsWith('application/json');
      return {
        cas: r.headers.get('X-Mayfly-Cas') || '',
        exp: Number(r.headers.get('X-Mayfly-Expiration') || 0),
        flags: r.headers.get('X-Mayfly-Flags') || '0',
        size: r.data.length,
        json: isJSON ? new TextDecoder().decode(r.data) : undefined,
        bytes: isJSON ? undefined : r.data,
      };
    }
    const key = JSON.stringify(id);
    const text = (await request('GET', collPath(), { query: { startkey: key, endkey: key, limit: 1, include_docs: 'true' }, raw: true })).data;
    const row = JSON.parse(text).rows[0];
    if (!row || row.id !== id || !row.doc) throw new ApiError(404, 'not_found', `No document ${id} here.`);
    const d = { cas: (/"cas":(\d+)/.exec(text) || [])[1] || '', exp: row.expiration || 0, flags: String(row.flags ?? 0) };
    if ('json' in row.doc) {
      // The value's own text: parsing and writing it again would change
      // numbers beyond 2^53.
      const mark = ',"doc":{"json":';
      d.json = text.slice(text.indexOf(mark) + mark.length, text.lastIndexOf(',"meta":'));
      d.size = utf8Len(d.json);
    } else {
      d.bytes = fromBase64(row.doc.base64 || '');
      d.size = d.bytes.length;
    }
    return d;
  }

  // bulkOne runs one _bulk operation and answers its result line, cas as
  // text; a failed one rejects with an ApiError, as the document API would.
  async function bulkOne(op, docText) {
    let line = JSON.stringify({ ...op, collection: collQuery() });
    if (docText !== undefined) line = `${line.slice(0, -1)},"doc":${docText}}`;
    const text = String((await request('POST', path`/${bucket}/_bulk`, { body: line, type: 'application/x-ndjson' })).data);
    const first = text.split('\n').find((l) => l.trim()) || '{}';
    const r = JSON.parse(first);
    if (r.error) throw new ApiError(BULK_STATUS[r.error] || 400, r.error, r.reason);
    r.cas = (/"cas":(\d+)/.exec(first) || [])[1] || '';
    return r;
  }

  // open shows a document in the editor; id '' starts a new one.
  async function open(id) {
    const st = status('doc-status');
    const key = h('input', { id: 'doc-key', value: id, readOnly: id !== '', required: true });
    const body = h('textarea', { id: 'doc-body', rows: 14, spellcheck: false, class: 'code' });
    const keep = h('input', { type: 'checkbox', id: 'doc-keep-expiry', checked: id !== '' });
    const expiry = h('input', { type: 'number', id: 'doc-expiry', min: 0, value: 0, disabled: id !== '' });
    keep.addEventListener('change', () => { expiry.disabled = keep.checked; });
    const expAt = h('span', { class: 'muted' });
    const expInfo = h('span', { class: 'countdown', id: 'doc-expiration' });
    const showExp = (exp) => {
      expInfo.dataset.exp = exp;
      expInfo.textContent = countdown(exp);
      expInfo.title = exp ? utc(exp) : 'no expiration';
      expAt.textContent = exp ? ` (${utc(exp)})` : '';
    };
    let cas = '';
    let flags; // the document's flags, kept by a save as its expiration is
    let binary = false; // a binary document: saved as it is, not checked as JSON
    let fixed = false; // the value is shown read-only: Save changes only the expiry
    if (id) {
      try {
        const d = await readDoc(id);
        cas = d.cas;
        flags = d.flags;
        showExp(d.exp);
        binary = d.json === undefined;
        const shown = valueText(d);
        body.value = shown.text;
        fixed = shown.fixed;
        if (shown.note) st.info(shown.note);
      } catch (e) {
        st.err(e);
      }
    } else {
      body.value = '{\n  \n}';
    }
    const save = h('button', { type: 'button', class: 'primary', id: 'doc-save' }, fixed ? 'Save expiry' : 'Save');
    save.addEventListener('click', () => busy(save, async () => {
      if (fixed) {
        // The value stays as stored: only a touch, which keeps the value
        // and the flags.
        if (keep.checked) {
          st.info('Nothing to save: the value is not edited here and the expiration is kept.');
          return;
        }
        try {
          let r;
          if (dotKey(id)) {
            r = await bulkOne({ op: 'touch', id, expiry: Number(expiry.value) });
          } else {
            const text = (await request('POST', path`/${bucket}/docs/${id}/touch`, { query: { collection: collQuery(), expiry: expiry.value }, raw: true })).data;
            r = JSON.parse(text);
            r.cas = (/"cas":(\d+)/.exec(text) || [])[1] || '';
          }
          st.ok(`Saved the expiration of ${id}: ${r.expiration ? utc(r.expiration) : 'never'}; the value is unchanged.`);
          cas = r.cas;
          showExp(r.expiration);
          load();
        } catch (e) { st.err(e); }
        return;
      }
      if (!binary) {
        try {
          JSON.parse(body.value);
        } catch (e) {
          st.err(`Not valid JSON: ${e.message}`);
          return;
        }
      }
      try {
        const k = key.value;
        let r;
        if (dotKey(k)) {
          const op = { op: id ? 'upsert' : 'insert', id: k, cas: cas || undefined, flags: flags === undefined ? undefined : Number(flags) };
          if (keep.checked) op.preserve_expiry = true; else op.expiry = Number(expiry.value);
          // JSON text holds line breaks only between tokens: one line of
          // the same value.
          if (binary) op.base64 = toBase64(new TextEncoder().encode(body.value));
          r = await bulkOne(op, binary ? undefined : body.value.replace(/[\r\n]+/g, ' '));
        } else {
          const q = { collection: collQuery(), cas: cas || undefined, flags };
          if (keep.checked) q.preserve_expiry = 'true'; else q.expiry = expiry.value;
          if (!id) q.op = 'insert';
          // A CAS is above 2^53, where JavaScript numbers lose digits: it is
          // read from the answer's text.
          const type = binary ? 'application/octet-stream' : 'application/json';
          const text = (await request('PUT', path`/${bucket}/docs/${k}`, { query: q, body: body.value, type, raw: true })).data;
          r = JSON.parse(text);
          r.cas = (/"cas":(\d+)/.exec(text) || [])[1] || '';
        }
        st.ok(r.rev ? `Saved ${r.id} (revision ${r.rev}).` : `Saved ${r.id}.`);
        id = r.id;
        key.readOnly = true;
        del.disabled = false;
        cas = r.cas;
        if (flags === undefined) flags = '0';
        showExp(r.expiration);
        load();
      } catch (e) {
        if (e.error === 'cas_mismatch') st.err('Not saved: the document changed since you opened it. Reopen it to see the new version.');
        else if (e.error === 'key_exists') st.err(`Not saved: ${key.value} exists already.`);
        else st.err(e);
      }
    }));
    const del = confirmButton({ id: 'doc-delete', disabled: !id }, 'Delete', 'Really delete?', async () => {
      try {
        if (dotKey(id)) await bulkOne({ op: 'delete', id, cas: cas || undefined });
        else await request('DELETE', path`/${bucket}/docs/${id}`, { query: { collection: collQuery(), cas: cas || undefined } });
        fill(editor, h('p', { class: 'status ok', id: 'doc-status' }, `Deleted ${id}.`));
        load();
      } catch (e) { st.err(e); }
    });
    const close = h('button', { type: 'button', onclick: () => fill(editor) }, 'Close');
    if (!may.write || fixed) body.readOnly = true;
    if (fixed) body.rows = 8; // a part, to look at: the editor stays short
    fill(editor, h('div', { class: 'card' },
      h('h2', null, id ? `Document ${id}` : 'New document'),
      field('Key', key),
      id ? h('p', null, 'Expires: ', expInfo, expAt) : null,
      field(binary ? 'Value (binary)' : 'Value (JSON)', body),
      h('div', { class: 'row' },
        h('label', { class: 'check' }, keep, ' keep the current expiration'),
        field('or expiry', expiry, 'seconds from now (up to 30 days) or a Unix time; 0: never')),
      h('div', { class: 'buttons' }, may.write ? save : null, may.write ? del : null, close), st));
    editor.scrollIntoView({ block: 'nearest' });
  }

  const bulkText = h('textarea', {
    id: 'bulk-text', rows: 6, spellcheck: false, class: 'code',
    placeholder: '{"id":"a","doc":{"type":"city","name":"Oslo"}}\n{"id":"b","doc":{"type":"city"},"expiry":60}\n{"op":"delete","id":"c"}',
  });
  const bulkStatus = status('bulk-result');
  const bulkBtn = h('button', { type: 'button', class: 'primary', id: 'bulk-load' }, 'Load');
  bulkBtn.addEventListener('click', () => busy(bulkBtn, async () => {
    const body = bulkBody(bulkText.value, collQuery());
    if (!body) {
      bulkStatus.err('Nothing to load: one JSON operation a line.');
      return;
    }
    bulkStatus.info('Loading…');
    try {
      const text = (await request('POST', path`/${bucket}/_bulk`, { body, type: 'application/x-ndjson' })).data;
      const results = String(text).split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
      const failed = results.filter((r) => r.error);
      const msg = `${num(results.length - failed.length)} written, ${num(failed.length)} failed.`;
      if (failed.length) {
        bulkStatus.err(msg);
        bulkStatus.append(h('ul', null, failed.slice(0, 20).map((r) => h('li', null, `${r.id ?? `line ${r.line}`}: ${r.reason}`))));
      } else {
        bulkStatus.ok(msg);
      }
      load();
    } catch (e) { bulkStatus.err(e); }
  }));

  collSel.addEventListener('change', () => {
    [state.scope, state.coll] = collSel.value.split('\u0000');
    state.skip = 0;
    fill(editor);
    load();
  });
  startKey.addEventListener('change', () => { state.start = startKey.value; state.skip = 0; load(); });
  prev.addEventListener('click', () => { state.skip = Math.max(0, state.skip - PAGE); load(); });
  next.addEventListener('click', () => { state.skip += PAGE; load(); });

  const newDoc = h('button', { type: 'button', id: 'doc-new', onclick: () => open(''), hidden: true }, 'New document');
  const bulkCard = h('div', { class: 'card', id: 'bulk-card', hidden: true }, h('h2', null, 'Load documents'),
    h('p', { class: 'muted' }, 'Newline-delimited JSON, one operation a line, sent to POST /', bucket,
      '/_bulk: {"op":"upsert|insert|replace|delete|touch","id":…,"doc":…,"expiry":…}. A line without "op" is an upsert; lines go to the collection chosen above unless they name one.'),
    bulkText, h('div', { class: 'buttons' }, bulkBtn), bulkStatus);
  writeOnly.push(newDoc, bulkCard);
  main.append(h('h1', null, `Documents in ${bucket}`),
    h('div', { class: 'toolbar' }, field('Collection', collSel), field('Start key', startKey),
      h('button', { type: 'button', id: 'doc-refresh', onclick: () => load() }, 'Refresh'),
      newDoc),
    listStatus, list, h('div', { class: 'pager-nav' }, prev, pos, next), editor, bulkCard);

  get(path`/pools/default/buckets/${bucket}/scopes`).then((res) => {
    const opts = [];
    for (const sc of res.scopes) {
      for (const c of sc.collections) {
        opts.push(h('option', { value: `${sc.name}\u0000${c.name}` }, `${sc.name}.${c.name}`));
      }
    }
    fill(collSel, opts);
    collSel.value = `${state.scope}\u0000${state.coll}`;
  }).catch(() => fill(collSel, h('option', null, '_default._default')));
  permissions([perm.readDocs(bucket), perm.writeDocs(bucket)]).then((got) => {
    may.read = got[perm.readDocs(bucket)];
    may.write = got[perm.writeDocs(bucket)];
    for (const el of writeOnly) el.hidden = !may.write;
    if (may.read) {
      load();
    } else {
      const [what, role] = permissionText(perm.readDocs(bucket));
      listStatus.err(`Your roles do not let you ${what}: that needs ${role}. An administrator can grant it.${may.write ? ' You may still write documents here.' : ''}`);
    }
  }).catch((e) => listStatus.err(e));
  const timer = setInterval(() => tickCountdowns(main), 1000);
  return () => clearInterval(timer);
}

// bulkBody turns the box's lines into the bulk body: a JSON object line
// without "op" becomes an upsert, and one without "collection" goes to coll.
// The line's own text is kept (re-encoding a number above 2^53 would change
// it); anything else is sent as it is, for the server to refuse that line.
export function bulkBody(text, coll) {
  const out = [];
  for (const raw of text.split('\n')) {
    let line = raw.trim();
    if (!line) continue;
    let v;
    try { v = JSON.parse(line); } catch { v = null; }
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
      const add = [];
      if (!('op' in v)) add.push('"op":"upsert"');
      if (coll && !('collection' in v)) add.push(`"collection":${JSON.stringify(coll)}`);
      if (add.length) line = `{${add.join(',')},${line.slice(1)}`;
    }
    out.push(line);
  }
  return out.join('\n');
}
