// The Views page: design documents, development (dev_…) and production;
// map and reduce editors with the compile error the server gives shown in
// place; publishing a development design document to production; a sample
// document; and a result preview with the query's parameters, where an
// include_docs row whose document expired but is not purged yet
// ("doc": null) says so.
import { get, request, path, clock, syncClock, perm, permissions } from './api.js';
import { h, fill, field, status, busy, confirmButton, duration, num, utc, pretty, permissionText, cut, SHOW_MAX } from './dom.js';

const DEV = 'dev_';
const TEMPLATE = 'function (doc, meta) {\n  emit(meta.id, null);\n}';

export function render(main, { bucket }) {
  const side = h('aside', { class: 'ddocs', id: 'ddoc-list' });
  const detail = h('section', { class: 'ddoc-detail', id: 'ddoc-detail' });
  const listStatus = status('ddoc-list-status');
  let selected = sessionStorage.getItem(`mayfly.ddoc.${bucket}`) || '';
  let ddocs = [];
  let mayWrite = false; // the user's roles allow changing design documents

  main.append(h('h1', null, `Views of ${bucket}`), listStatus, h('div', { class: 'split' }, side, detail));

  // fetchList reads the design documents.
  async function fetchList() {
    try {
      const res = await get(path`/pools/default/buckets/${bucket}/ddocs`);
      ddocs = res.rows.map((r) => ({ name: r.doc.meta.id.replace(/^_design\//, ''), rev: r.doc.meta.rev, body: r.doc.json || {} }));
      listStatus.clear();
    } catch (e) {
      listStatus.err(e);
      ddocs = [];
    }
  }

  // loadList reads the design documents and shows select's.
  async function loadList(select) {
    await fetchList();
    if (select !== undefined) selected = select;
    if (selected && !ddocs.some((d) => d.name === selected)) selected = '';
    sessionStorage.setItem(`mayfly.ddoc.${bucket}`, selected);
    drawList();
    const d = ddocs.find((x) => x.name === selected);
    if (d) showDDoc(d); else fill(detail, h('p', { class: 'muted' }, 'Choose a design document, or create one.'));
  }

  function drawList() {
    const link = (d) => h('li', null, h('a', {
      href: '#', class: `ddoc-link${d.name === selected ? ' active' : ''}`, 'data-ddoc': d.name,
      onclick: (ev) => { ev.preventDefault(); loadList(d.name); },
    }, `_design/${d.name}`));
    const dev = ddocs.filter((d) => d.name.startsWith(DEV));
    const prod = ddocs.filter((d) => !d.name.startsWith(DEV));
    const name = h('input', { id: 'ddoc-new-name', required: true, placeholder: 'cities' });
    const view = h('input', { id: 'ddoc-new-view', required: true, value: 'by_id' });
    const st = status('ddoc-new-status');
    const create = h('button', { type: 'submit', id: 'ddoc-create' }, 'Create');
    fill(side,
      h('h2', null, 'Development'),
      dev.length ? h('ul', null, dev.map(link)) : h('p', { class: 'muted' }, 'none'),
      h('h2', null, 'Production'),
      prod.length ? h('ul', null, prod.map(link)) : h('p', { class: 'muted' }, 'none'),
      !mayWrite ? null : h('form', {
        class: 'card', onsubmit: (ev) => {
          ev.preventDefault();
          busy(create, async () => {
            const n = name.value.startsWith(DEV) ? name.value : DEV + name.value;
            if (ddocs.some((d) => d.name === n)) { st.err(`_design/${n} exists already.`); return; }
            try {
              await request('PUT', path`/${bucket}/_design/${n}`, { json: { views: { [view.value]: { map: TEMPLATE } } } });
              await loadList(n);
            } catch (e) { st.err(e); }
          });
        },
      }, h('h3', null, 'New development design document'),
      field('Name', h('span', { class: 'prefixed' }, h('span', { class: 'prefix' }, '_design/dev_'), name)),
      field('First view', view), create, st));
  }

  // saved takes a design document just saved from the editor: the list and
  // the revision shown follow, the editor and the preview stay as they are.
  async function saved(d) {
    await fetchList();
    drawList();
    const now = ddocs.find((x) => x.name === d.name);
    if (now) {
      d.rev = now.rev;
      const rev = detail.querySelector('#ddoc-rev');
      if (rev) rev.textContent = now.rev;
    }
  }

  function showDDoc(d) {
    const isDev = d.name.startsWith(DEV);
    const viewNames = Object.keys(d.body.views || {}).sort();
    let viewName = sessionStorage.getItem(`mayfly.view.${bucket}.${d.name}`);
    if (!viewNames.includes(viewName)) viewName = viewNames[0] || '';
    const st = status('ddoc-status');

    const actions = [];
    if (!mayWrite) {
      // Read-only: no publish, copy, delete or add.
    } else if (isDev) {
      // Publishing over an existing production design document asks first.
      const prod = d.name.slice(DEV.length);
      const publish = async () => {
        try {
          await request('PUT', path`/${bucket}/_design/${prod}`, { json: d.body });
          await fetchList();
          drawList();
          showDDoc(d); // the button now asks before replacing
          detail.querySelector('#ddoc-status').ok(`Published as _design/${prod}.`);
        } catch (e) { st.err(e); }
      };
      const pub = ddocs.some((x) => x.name === prod)
        ? confirmButton({ id: 'ddoc-publish', class: '' }, 'Publish to production', `Replace _design/${prod}?`, publish)
        : h('button', { type: 'button', id: 'ddoc-publish', onclick: (ev) => busy(ev.currentTarget, publish) }, 'Publish to production');
      actions.push(pub);
    } else {
      // Copying over an existing development design document asks first.
      const copy = async () => {
        try {
          await request('PUT', path`/${bucket}/_design/${DEV + d.name}`, { json: d.body });
          await loadList(DEV + d.name);
        } catch (e) { st.err(e); }
      };
      actions.push(ddocs.some((x) => x.name === DEV + d.name)
        ? confirmButton({ id: 'ddoc-copy-dev', class: '' }, 'Copy to development', `Replace _design/${DEV + d.name}?`, copy)
        : h('button', { type: 'button', id: 'ddoc-copy-dev', onclick: (ev) => busy(ev.currentTarget, copy) }, 'Copy to development'));
    }
    const del = confirmButton({ id: 'ddoc-delete' }, 'Delete…', `Really delete _design/${d.name}?`, async () => {
      try {
        await request('DELETE', path`/${bucket}/_design/${d.name}`);
        await loadList('');
      } catch (e) { st.err(e); }
    });
    if (mayWrite) actions.push(del);

    const tabs = h('div', { class: 'tabs', role: 'tablist' }, viewNames.map((v) => h('button', {
      type: 'button', role: 'tab', class: `view-tab${v === viewName ? ' active' : ''}`, 'data-view': v,
      'aria-selected': v === viewName ? 'true' : 'false',
      onclick: () => { sessionStorage.setItem(`mayfly.view.${bucket}.${d.name}`, v); showDDoc(d); },
    }, v)));
    if (isDev && mayWrite) {
      const nv = h('input', { id: 'view-new-name', placeholder: 'new view', 'aria-label': 'new view name' });
      const add = h('button', { type: 'button', id: 'view-add' }, 'Add view');
      add.addEventListener('click', () => busy(add, async () => {
        const n = nv.value.trim();
        if (!n || (d.body.views || {})[n]) { st.err(n ? `View ${n} exists already.` : 'Name the view first.'); return; }
        const body = structuredClone(d.body);
        body.views = { ...(body.views || {}), [n]: { map: TEMPLATE } };
        try {
          await request('PUT', path`/${bucket}/_design/${d.name}`, { json: body });
          sessionStorage.setItem(`mayfly.view.${bucket}.${d.name}`, n);
          await loadList(d.name);
        } catch (e) { st.err(e); }
      }));
      tabs.append(h('span', { class: 'add-view' }, nv, add));
    }

    fill(detail,
      h('div', { class: 'ddoc-head' },
        h('h2', null, `_design/${d.name}`, ' ', h('span', { class: `badge ${isDev ? 'dev' : 'prod'}` }, isDev ? 'development' : 'production')),
        h('span', { class: 'muted mono', id: 'ddoc-rev' }, d.rev), h('span', { class: 'spacer' }), actions),
      st, tabs,
      viewName ? viewEditor(bucket, d, viewName, isDev, mayWrite, () => loadList(d.name), saved) : h('p', { class: 'muted' }, 'No views in this design document.'));
  }

  permissions([perm.writeViews(bucket)]).then((may) => { mayWrite = may[perm.writeViews(bucket)]; })
    .catch(() => {}) // a 401 logs out; the page goes
    .finally(() => loadList());
}

// compileError splits the server's reason for a refused design document:
// "view by_type: map: SyntaxError: … (line 3)".
function compileError(reason) {
  const m = /^(?:jsruntime: )?view (.+?): (map|reduce): (.*?)(?: \(line (\d+)\))?$/s.exec(reason);
  return m ? { view: m[1], fn: m[2], msg: m[3], line: m[4] ? Number(m[4]) : 0 } : null;
}

// viewEditor edits one view: only of a development design document, and
// only for a user who may write views (mayWrite).
function viewEditor(bucket, d, viewName, isDev, mayWrite, reload, saved) {
  const editable = isDev && mayWrite;
  let def = (d.body.views || {})[viewName] || { map: '' };
  const map = h('textarea', { id: 'map-editor', class: 'code', rows: 10, spellcheck: false, readOnly: !editable, 'aria-label': 'map function' });
  map.value = def.map || '';
  const reduce = h('textarea', { id: 'reduce-editor', class: 'code', rows: 4, spellcheck: false, readOnly: !editable, 'aria-label': 'reduce function', placeholder: 'none: _count, _sum, _stats or a function (keys, values, rereduce)' });
  reduce.value = def.reduce || '';
  const mapErr = h('div', { class: 'compile-error', id: 'map-error', role: 'alert', hidden: true });
  const reduceErr = h('div', { class: 'compile-error', id: 'reduce-error', role: 'alert', hidden: true });
  const st = status('view-status');
  const dirty = h('span', { class: 'muted', id: 'view-dirty' });
  const markDirty = () => {
    const changed = map.value !== (def.map || '') || reduce.value !== (def.reduce || '');
    dirty.textContent = changed ? 'Unsaved changes: the preview shows the saved view.' : '';
  };
  map.addEventListener('input', markDirty);
  reduce.addEventListener('input', markDirty);

  function clearErrors() {
    for (const [box, ed] of [[mapErr, map], [reduceErr, reduce]]) {
      box.hidden = true;
      box.replaceChildren();
      ed.classList.remove('has-error');
    }
  }
  function showError(reason) {
    const ce = compileError(reason);
    const which = ce && ce.fn === 'reduce' ? [reduceErr, reduce] : [mapErr, map];
    const [box, ed] = which;
    ed.classList.add('has-error');
    box.hidden = false;
    if (!ce) {
      fill(box, reason);
      return;
    }
    const src = (ce.fn === 'reduce' ? reduce : map).value.split('\n');
    fill(box,
      h('strong', null, ce.view === viewName ? `${ce.fn}: ` : `view ${ce.view}, ${ce.fn}: `), ce.msg,
      ce.line ? h('span', { class: 'where' }, ` (line ${ce.line})`) : null,
      ce.line && ce.view === viewName && src[ce.line - 1] !== undefined ? h('pre', { class: 'code-line' }, `${ce.line} │ ${src[ce.line - 1]}`) : null);
  }

  const save = h('button', { type: 'button', class: 'primary', id: 'view-save', disabled: !editable }, 'Save');
  save.addEventListener('click', () => busy(save, async () => {
    clearErrors();
    const body = structuredClone(d.body);
    const v = { map: map.value };
    if (reduce.value.trim()) v.reduce = reduce.value.trim().startsWith('_') ? reduce.value.trim() : reduce.value;
    body.views = { ...(body.views || {}), [viewName]: v };
    try {
      await request('PUT', path`/${bucket}/_design/${d.name}`, { json: body });
      d.body = body;
      def = v;
      markDirty();
      await saved(d);
      st.ok(`Saved _design/${d.name}.`);
      info.refresh();
    } catch (e) {
      if (e.status === 400) { showError(e.reason); st.clear(); } else st.err(e);
    }
  }));
  const delView = confirmButton({ id: 'view-delete', disabled: !editable }, 'Delete view', `Really delete ${viewName}?`, async () => {
    const body = structuredClone(d.body);
    delete body.views[viewName];
    try {
      await request('PUT', path`/${bucket}/_design/${d.name}`, { json: body });
      reload();
    } catch (e) { st.err(e); }
  });
  const chips = h('span', { class: 'chips' }, ['_count', '_sum', '_stats', ''].map((r) => h('button', {
    type: 'button', class: 'chip', disabled: !editable,
    onclick: () => { reduce.value = r; markDirty(); },
  }, r || 'no reduce')));

  const info = indexInfo(bucket, d.name, viewName);
  return h('div', { class: 'view-editor' },
    !mayWrite ? h('p', { class: 'note', id: 'view-read-only' }, `Read-only: your roles do not let you ${permissionText(perm.writeViews(bucket)).join(': that needs ')}.`)
      : !isDev ? h('p', { class: 'note' }, 'A production design document is read-only here: copy it to development, edit, then publish.') : null,
    h('div', { class: 'editors' },
      h('div', { class: 'editor' },
        h('label', { class: 'label', for: 'map-editor' }, 'Map'), map, mapErr,
        h('label', { class: 'label', for: 'reduce-editor' }, 'Reduce ', chips), reduce, reduceErr,
        h('div', { class: 'buttons' }, mayWrite ? save : null, mayWrite ? delView : null, dirty), st, info.el),
      sample(bucket)),
    preview(bucket, d.name, viewName, !!def.reduce, info.refresh));
}

// sample shows a document of the bucket, picked at random among the first
// hundred, as the map function would see it. It lists the hundred without
// their values and reads only the one picked; a value over SHOW_MAX is shown
// in part, unindented, with its size.
function sample(bucket) {
  const box = h('div', { class: 'sample', id: 'sample-doc' });
  const another = h('button', { type: 'button', id: 'sample-next' }, 'Another');
  const docs = path`/pools/default/buckets/${bucket}/scopes/_default/collections/_default/docs`;
  async function pick() {
    try {
      const res = await get(docs, { limit: 100 });
      if (!res.rows.length) { fill(box, h('p', { class: 'muted' }, 'The bucket has no documents yet.')); return; }
      const id = res.rows[Math.floor(Math.random() * res.rows.length)].id;
      const k = JSON.stringify(id);
      const r = (await get(docs, { startkey: k, endkey: k, limit: 1, include_docs: 'true' })).rows[0];
      if (!r) { pick(); return; } // deleted meanwhile
      const meta = { id: r.id, rev: r.rev, expiration: r.expiration, flags: r.flags, type: r.type };
      fill(box,
        h('div', { class: 'muted' }, 'doc'), h('pre', { class: 'code' }, r.doc && 'json' in r.doc ? docText(r.doc.json, 2) : '(binary)'),
        h('div', { class: 'muted' }, 'meta'), h('pre', { class: 'code' }, JSON.stringify(meta, null, 2)));
    } catch (e) { fill(box, h('p', { class: 'status error' }, e.reason || String(e))); }
  }
  another.addEventListener('click', pick);
  pick();
  return h('div', { class: 'editor' }, h('div', { class: 'label' }, 'Sample document ', another), box);
}

// docText writes a JSON value for a pane: indented when its text is at most
// SHOW_MAX characters, else cut there, unindented, with its size (an 8 MiB
// array indented is millions of lines, and the tab stops answering).
function docText(v, indent) {
  const text = JSON.stringify(v);
  if (text === undefined) return '';
  return text.length > SHOW_MAX ? cut(text) : indent ? JSON.stringify(v, null, indent) : pretty(text);
}

// preview queries the saved view with the parameters chosen.
function preview(bucket, ddoc, view, hasReduce, queried) {
  const inp = (name, attrs = {}) => h('input', { id: `q-${name}`, name, ...attrs });
  const p = {
    key: inp('key', { placeholder: '"city"' }),
    startkey: inp('startkey', { placeholder: '["a"]' }),
    endkey: inp('endkey'),
    limit: inp('limit', { type: 'number', min: 0, value: 20 }),
    skip: inp('skip', { type: 'number', min: 0 }),
    group_level: inp('group_level', { type: 'number', min: 0 }),
    reduce: h('select', { id: 'q-reduce', name: 'reduce' }, h('option', { value: '' }, hasReduce ? 'default (true)' : 'default'), h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false')),
    stale: h('select', { id: 'q-stale', name: 'stale' }, ['false', 'update_after', 'ok'].map((v) => h('option', { value: v }, v))),
    expired: h('select', { id: 'q-expired', name: 'expired', title: 'exclude: exact answers, without the rows of documents that have expired but are not purged yet' },
      h('option', { value: '' }, 'default'), h('option', { value: 'include' }, 'include'), h('option', { value: 'exclude' }, 'exclude')),
    group: inp('group', { type: 'checkbox' }),
    descending: inp('descending', { type: 'checkbox' }),
    include_docs: inp('include_docs', { type: 'checkbox' }),
  };
  const url = h('code', { id: 'q-url', class: 'url' });
  const results = h('div', { id: 'results' });
  const st = status('query-status');
  const runBtn = h('button', { type: 'submit', class: 'primary', id: 'q-run' }, 'Show results');
  const form = h('form', {
    class: 'query', onsubmit: (ev) => {
      ev.preventDefault();
      busy(runBtn, run);
    },
  },
  h('div', { class: 'row' }, field('key', p.key), field('startkey', p.startkey), field('endkey', p.endkey),
    field('limit', p.limit), field('skip', p.skip)),
  h('div', { class: 'row' }, field('reduce', p.reduce), field('group_level', p.group_level), field('stale', p.stale), field('expired', p.expired),
    h('label', { class: 'check' }, p.group, ' group'), h('label', { class: 'check' }, p.descending, ' descending'),
    h('label', { class: 'check' }, p.include_docs, ' include_docs')),
  h('div', { class: 'buttons' }, runBtn, url));

  function query() {
    const q = {};
    for (const k of ['key', 'startkey', 'endkey', 'limit', 'skip', 'group_level', 'reduce', 'stale', 'expired']) q[k] = p[k].value.trim();
    for (const k of ['group', 'descending', 'include_docs']) if (p[k].checked) q[k] = 'true';
    return q;
  }
  async function run() {
    const q = query();
    const qs = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== '')).toString();
    url.textContent = `GET ${path`/${bucket}/_design/${ddoc}/_view/${view}`}${qs ? '?' + qs : ''}`;
    st.info('Querying…');
    try {
      await syncClock(bucket);
      const r = await request('GET', path`/${bucket}/_design/${ddoc}/_view/${view}`, { query: q });
      const res = r.data;
      const building = r.headers.get('X-Mayfly-Index-Building') === 'true';
      st.ok(`${num(res.rows.length)} row${res.rows.length === 1 ? '' : 's'}` +
        (res.total_rows !== undefined ? ` of ${num(res.total_rows)} in the index` : '') +
        (building ? ` — the index is still building (${num(Number(r.headers.get('X-Mayfly-Index-Pending')))} changes to go)` : '') + '.');
      drawRows(res, q.include_docs === 'true');
      queried();
    } catch (e) {
      st.err(e);
      fill(results);
    }
  }
  function drawRows(res, docs) {
    const show = (v) => (v === undefined ? '' : cut(JSON.stringify(v)));
    if (!res.rows.length) {
      fill(results, h('p', { class: 'muted' }, 'No rows.'));
      return;
    }
    fill(results, h('table', { class: 'grid results' },
      h('thead', null, h('tr', null, ['Key', 'Value', 'ID', docs ? 'Document' : null].filter(Boolean).map((t) => h('th', null, t)))),
      h('tbody', null, res.rows.map((row) => h('tr', { 'data-id': row.id ?? null },
        h('td', { class: 'mono key' }, show(row.key)),
        h('td', { class: 'mono value' }, show(row.value)),
        h('td', { class: 'mono' }, row.id ?? ''),
        docs ? docCell(row) : null)))));
  }
  function docCell(row) {
    if (row.doc === null) {
      return h('td', { class: 'doc expired-doc' }, h('span', { class: 'badge expired' }, 'expired, not purged yet'), ' doc: null');
    }
    if (!row.doc) return h('td', { class: 'doc muted' }, '—');
    const exp = row.doc.meta && row.doc.meta.expiration;
    return h('td', { class: 'doc' }, h('pre', { class: 'code' }, 'json' in row.doc ? docText(row.doc.json) : '(binary)'),
      exp ? h('div', { class: 'muted' }, `expires ${utc(exp)}${exp <= clock.now() ? ' (passed)' : ''}`) : null);
  }
  return h('div', { class: 'card preview' }, h('h3', null, 'Result preview'), form, st, results);
}

// indexInfo shows the design document's index (GET …/_info): whether it is
// building and how far, the view's rows, and its map function's failures,
// which are otherwise invisible (a document the map throws on just has no
// rows). While a build runs it refreshes itself every two seconds.
function indexInfo(bucket, ddoc, view) {
  const el = h('div', { class: 'index-info', id: 'view-info' });
  let timer = 0;
  let first = true;
  async function refresh() {
    clearTimeout(timer);
    if (!first && !el.isConnected) return; // the page was left
    first = false;
    let inf;
    try {
      inf = await get(path`/${bucket}/_design/${ddoc}/_info`);
    } catch (e) {
      fill(el, h('span', { class: 'status error' }, e.reason || String(e)));
      return;
    }
    const v = (inf.views || {})[view] || {};
    const state = inf.building
      ? `building: ${num(inf.docs_indexed)} changes indexed, ${num(inf.docs_to_index)} to go` +
        (inf.rate ? `, ${num(Math.round(inf.rate))}/s` : '') + (inf.eta_seconds ? `, about ${duration(inf.eta_seconds)} left` : '')
      : inf.pending_changes ? `${num(inf.pending_changes)} changes not indexed yet (a stale=false query or the next update indexes them)` : 'up to date';
    const errs = v.recent_errors || [];
    fill(el,
      h('div', null, h('span', { class: 'label' }, 'Index '), state, ` · ${num(v.total_rows || 0)} rows · `,
        h('span', { class: v.map_errors ? 'map-errors bad' : 'map-errors' }, `${num(v.map_errors || 0)} map error${v.map_errors === 1 ? '' : 's'}`),
        ' ', h('button', { type: 'button', class: 'link', onclick: refresh }, 'refresh')),
      errs.length ? h('ul', { class: 'recent-errors' }, errs.slice(-5).reverse().map((e) => h('li', null,
        h('span', { class: 'mono' }, e.id), ': ', e.reason.replace(/^(?:jsruntime: )?view .+?: map: /, ''), e.time ? h('span', { class: 'muted' }, ` (${utc(e.time)})`) : null))) : null);
    if (inf.building) timer = setTimeout(refresh, 2000);
  }
  refresh();
  return { el, refresh };
}
