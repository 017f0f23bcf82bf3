// DOM helpers. Every page is built with h() and text nodes, never from HTML
// strings: document keys and values are user data.

// h creates an element. attrs: "class", "for", data-*, aria-* and other
// attributes are set as attributes; on* functions become listeners; value,
// checked, disabled, readOnly, selected, spellcheck are set as properties.
// Children may be strings, numbers, nodes, arrays, null or undefined.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVGNS = 'http://www.w3.org/2000/svg';

// s creates an SVG element; attributes as h's.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const PROPS = new Set(['value', 'checked', 'disabled', 'readOnly', 'selected', 'spellcheck', 'hidden']);

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false && !PROPS.has(k)) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (PROPS.has(k)) {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// clear empties el and appends children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// duration writes seconds as "3d 4h", "2h 5m", "4m 10s", "9s".
export function duration(sec) {
  sec = Math.max(0, Math.round(sec));
  const d = Math.floor(sec / 86400), hr = Math.floor(sec % 86400 / 3600);
  const m = Math.floor(sec % 3600 / 60), s = sec % 60;
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

// utc writes Unix seconds as "2026-11-23 17:44:29 UTC".
export function utc(sec) {
  return new Date(sec * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}

// num writes a number with thousands separators.
export function num(n) {
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: 2 });
}

// bytes writes a byte count as "1.5 MiB".
export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// field is a labelled form control.
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', { class: 'label' }, label), control,
    hint ? h('span', { class: 'hint' }, hint) : null);
}

// status is an element showing the outcome of an action: ok or error text.
export function status(id) {
  const el = h('div', { class: 'status', id, role: 'status', 'aria-live': 'polite' });
  el.ok = (text) => { el.className = 'status ok'; el.textContent = text; };
  el.err = (e) => { el.className = 'status error'; el.textContent = errText(e); };
  el.info = (text) => { el.className = 'status'; el.textContent = text; };
  el.clear = () => { el.className = 'status'; el.textContent = ''; };
  return el;
}

// permissionText says what a permission (Couchbase's notation) lets a user
// do, and which role grants it: ['read documents in shop', 'data_reader[shop]'].
const PERMS = [
  [/^cluster\.bucket\[(.+)\]!delete$/, (b) => [`delete bucket ${b}`, 'admin']],
  [/^cluster\.bucket\[(.+)\]\.settings!read$/, (b) => [`see the settings of ${b}`, `any role on ${b}`]],
  [/^cluster\.bucket\[(.+)\]\.settings!write$/, (b) => [`change the settings of ${b}`, `bucket_admin[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.stats!read$/, (b) => [`see the statistics of ${b}`, `any role on ${b}`]],
  [/^cluster\.bucket\[(.+)\]\.data\.docs!read$/, (b) => [`read documents in ${b}`, `data_reader[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.data\.docs!write$/, (b) => [`write documents in ${b}`, `data_writer[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.views!read$/, (b) => [`read the views of ${b}`, `views_reader[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.views!write$/, (b) => [`change the views of ${b}`, `views_admin[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.data\.dcp!read$/, (b) => [`read the change feed of ${b}`, `data_dcp_reader[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.fts!read$/, (b) => [`search ${b}`, `fts_searcher[${b}]`]],
  [/^cluster\.bucket\[(.+)\]\.fts!write$/, (b) => [`change the search indexes of ${b}`, `fts_admin[${b}]`]],
  [/^cluster\.buckets!create$/, () => ['create buckets', 'admin']],
  [/^cluster\.pools!read$/, () => ['list buckets', 'any role']],
  [/^cluster\.stats!read$/, () => ["read the server's metrics", 'ro_admin']],
  [/^cluster\.admin\.security!read$/, () => ['see users', 'admin']],
  [/^cluster\.admin\.security!write$/, () => ['manage users', 'admin']],
];

export function permissionText(p) {
  for (const [re, f] of PERMS) {
    const m = re.exec(p);
    if (m) return f(m[1]);
  }
  return [`do this (${p})`, 'a role that grants it'];
}

// errText is what an error says to the user. A refusal for want of
// permissions says, in words, what the user may not do and which role
// would let them.
export function errText(e) {
  if (e && e.status === 403 && e.permissions && e.permissions.length) {
    const parts = e.permissions.map(permissionText);
    return `Your roles do not let you ${parts.map(([what]) => what).join(' or ')}: that needs ${parts.map(([, role]) => role).join(' and ')}. An administrator can grant it.`;
  }
  if (e && e.reason) return e.reason;
  if (e && e.message) return e.message;
  return String(e);
}

// busy disables a button while an async action runs.
export async function busy(button, fn) {
  button.disabled = true;
  try {
    return await fn();
  } finally {
    button.disabled = false;
  }
}

// pretty indents JSON text without parsing it into JavaScript values, so
// numbers beyond 2^53 and key order stay exactly as stored. Text that is not
// JSON comes out unchanged apart from whitespace.
export function pretty(text, indent = '  ') {
  let out = '';
  let depth = 0;
  let inStr = false;
  const nl = () => '\n' + indent.repeat(depth);
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inStr) {
      out += c;
      if (c === '\\') out += text[++i] ?? '';
      else if (c === '"') inStr = false;
      continue;
    }
    switch (c) {
      case '"': inStr = true; out += c; break;
      case '{': case '[': {
        const close = c === '{' ? '}' : ']';
        let j = i + 1;
        while (j < text.length && /\s/.test(text[j])) j++;
        if (text[j] === close) { out += c + close; i = j; break; }
        depth++; out += c + nl(); break;
      }
      case '}': case ']': depth = Math.max(0, depth - 1); out += nl() + c; break;
      case ',': out += ',' + nl(); break;
      case ':': out += ': '; break;
      case ' ': case '\t': case '\n': case '\r': break;
      default: out += c;
    }
  }
  return out;
}

// confirmButton is a button that asks once more before a destructive
// action: the first click turns it into "Really …?" for five seconds, the
// second runs action.
export function confirmButton(attrs, label, really, action) {
  const b = h('button', { type: 'button', class: 'danger', ...attrs }, label);
  let armed = 0;
  b.addEventListener('click', () => {
    if (!armed) {
      b.textContent = really;
      b.classList.add('armed');
      armed = setTimeout(() => { armed = 0; b.textContent = label; b.classList.remove('armed'); }, 5000);
      return;
    }
    clearTimeout(armed);
    armed = 0;
    b.textContent = label;
    b.classList.remove('armed');
    busy(b, action);
  });
  return b;
}

// EDIT_MAX is the largest value the Documents editor offers to edit: a
// larger one is shown in part, read-only (an 8 MiB array indented in a text
// box is millions of lines, and the tab stops answering).
export const EDIT_MAX = 1 << 20;

// SHOW_MAX is the most of a value a pane draws (the editor's part of a
// value over EDIT_MAX, the Views page's sample and result cells).
export const SHOW_MAX = 100 << 10;

// utf8Len is text's length in bytes, as stored.
export function utf8Len(text) {
  return new TextEncoder().encode(text).length;
}

// cut gives text whole when it is at most SHOW_MAX characters, else its
// start and a note of the whole value's size: "… (8,388,609 bytes)".
export function cut(text, size) {
  if (text.length <= SHOW_MAX) return text;
  return `${text.slice(0, SHOW_MAX)}… (${num(size ?? utf8Len(text))} bytes)`;
}
