// The Buckets page: every bucket with its settings (maxTTL, the expiry
// pager's interval), its pager's last and next run, "run pager now", and
// forms to create and delete buckets.
import { get, request, path, clock, syncClock, perm, permissions } from './api.js';
import { h, fill, field, status, busy, confirmButton, duration, utc, num, errText } from './dom.js';

export function render(main, ctx) {
  const list = h('div', { id: 'bucket-list' }, h('p', { class: 'muted' }, 'Loading…'));
  const listStatus = status('bucket-list-status');
  // Built once (a reload must not wipe what the user is typing), shown once
  // the server says the user may create buckets.
  const create = createForm(ctx, load);
  create.hidden = true;
  main.append(h('h1', null, 'Buckets'), listStatus, list, create);
  let timer = 0;

  // load draws the list; flash, { bucket, text, error }, is shown in that
  // bucket's row (the outcome of the action that asked for the reload).
  async function load(flash) {
    let buckets;
    try {
      buckets = await get('/pools/default/buckets');
    } catch (e) {
      listStatus.err(e);
      return;
    }
    if (buckets.length) await syncClock(buckets[0].name);
    // The actions the user's roles allow: the others are left out.
    let may;
    try {
      may = await permissions([perm.createBuckets, ...buckets.flatMap((b) => [perm.writeSettings(b.name), perm.deleteBucket(b.name)])]);
    } catch (e) {
      listStatus.err(e);
      return;
    }
    create.hidden = !may[perm.createBuckets];
    const rows = await Promise.all(buckets.map(async (b) => {
      const pager = await get(path`/pools/default/buckets/${b.name}/settings/expiryPager`).catch(() => null);
      const allowed = { write: may[perm.writeSettings(b.name)], del: may[perm.deleteBucket(b.name)] };
      return bucketRow(b, pager, allowed, ctx, load, flash && flash.bucket === b.name ? flash : null);
    }));
    fill(list, buckets.length ? h('table', { class: 'grid buckets' },
      h('thead', null, h('tr', null, ['Bucket', 'Type', 'Items', 'Max TTL (s)', 'Pager every (s)', 'Pager', ''].map((t) => h('th', null, t)))),
      h('tbody', null, rows)) : h('p', { class: 'muted' }, 'No buckets yet.'));
    tick();
  }

  // tick refreshes the "next run in" countdowns.
  function tick() {
    for (const el of list.querySelectorAll('[data-next-run]')) {
      const next = Number(el.dataset.nextRun);
      el.textContent = next ? `next run in ${duration(next - clock.now())}` : 'disabled';
    }
  }
  load();
  timer = setInterval(tick, 1000);
  return () => clearInterval(timer);
}

// bucketRow is one bucket's row; allowed.write and allowed.del say whether
// the user may change its settings (and run its pager) and delete it.
function bucketRow(b, pager, allowed, ctx, reload, flash) {
  const st = status();
  st.classList.add('row-status');
  if (flash) {
    if (flash.error) st.err(flash.text); else st.ok(flash.text);
  }
  const maxTTL = h('input', { type: 'number', min: 0, value: b.maxTTL, class: 'max-ttl', 'aria-label': `maxTTL of ${b.name}`, readOnly: !allowed.write });
  const stime = h('input', { type: 'number', min: 0, value: pager ? pager.exp_pager_stime : '', disabled: !pager, class: 'pager-stime', 'aria-label': `pager interval of ${b.name}`, readOnly: !allowed.write });
  const save = h('button', { type: 'button', class: 'save' }, 'Save');
  save.addEventListener('click', () => busy(save, async () => {
    const changed = [];
    let failed = null;
    try {
      if (String(b.maxTTL) !== maxTTL.value) {
        await request('POST', path`/pools/default/buckets/${b.name}`, { form: { maxTTL: maxTTL.value } });
        changed.push('maxTTL');
      }
      if (pager && String(pager.exp_pager_stime) !== stime.value) {
        await request('POST', path`/pools/default/buckets/${b.name}/settings/expiryPager`, { form: { exp_pager_stime: stime.value } });
        changed.push('pager interval');
      }
    } catch (e) {
      failed = e;
    }
    if (!changed.length) {
      if (failed) st.err(failed); else st.info('Nothing changed.');
      return;
    }
    const text = `Saved ${changed.join(' and ')}.` + (failed ? ` Not saved: ${errText(failed)}` : '');
    await reload({ bucket: b.name, text, error: !!failed });
  }));
  const run = h('button', { type: 'button', class: 'run-pager', disabled: !pager }, 'Run pager now');
  run.addEventListener('click', () => busy(run, async () => {
    try {
      const r = (await request('POST', path`/pools/default/buckets/${b.name}/controller/runExpiryPager`)).data;
      await reload({ bucket: b.name, text: `Pager run: purged ${num(r.purged)} in ${num(r.duration_ms)} ms.`, error: false });
    } catch (e) { st.err(e); }
  }));
  const del = confirmButton({ class: 'danger delete-bucket' }, 'Delete…', `Really delete ${b.name}?`, async () => {
    try {
      await request('DELETE', path`/pools/default/buckets/${b.name}`);
      await ctx.refreshBuckets();
      reload();
    } catch (e) { st.err(e); }
  });
  const last = pager && pager.last_run;
  const lastRun = h('div', { class: 'muted last-run' }, last ? `last run ${utc(last.start)}: purged ${num(last.purged)}` : '');
  const nextRun = pager ? h('div', { 'data-next-run': pager.next_run }) : null;
  return h('tr', { 'data-bucket': b.name },
    h('td', null, h('a', { href: `#/docs/${encodeURIComponent(b.name)}` }, b.name)),
    h('td', null, b.bucketType === 'membase' ? 'couchbase' : b.bucketType), // Couchbase's REST says membase
    h('td', { class: 'items num' }, num(b.basicStats ? b.basicStats.itemCount : 0)),
    h('td', null, maxTTL),
    h('td', null, stime, h('div', { class: 'hint' }, '0: off')),
    h('td', { class: 'pager-info' },
      nextRun || h('div', { class: 'muted' }, 'no pager'), lastRun),
    h('td', { class: 'actions' }, allowed.write ? save : null, allowed.write ? run : null, allowed.del ? del : null,
      allowed.write || allowed.del ? null : h('span', { class: 'muted read-only' }, 'read-only'), st));
}

function createForm(ctx, reload) {
  const name = h('input', { id: 'new-bucket-name', required: true, pattern: '[A-Za-z0-9._%\\-]+', placeholder: 'travel' });
  const type = h('select', { id: 'new-bucket-type' }, ['couchbase', 'ephemeral', 'memcached'].map((t) => h('option', { value: t }, t)));
  const maxTTL = h('input', { id: 'new-bucket-maxttl', type: 'number', min: 0, value: 0 });
  const st = status('new-bucket-status');
  const submit = h('button', { id: 'new-bucket-create', type: 'submit', class: 'primary' }, 'Create bucket');
  return h('form', {
    class: 'card', id: 'new-bucket', onsubmit: (ev) => {
      ev.preventDefault();
      busy(submit, async () => {
        try {
          await request('POST', '/pools/default/buckets', { form: { name: name.value, bucketType: type.value, maxTTL: maxTTL.value } });
          st.ok(`Created bucket ${name.value}.`);
          name.value = '';
          await ctx.refreshBuckets();
          reload();
        } catch (e) { st.err(e); }
      });
    },
  }, h('h2', null, 'Create a bucket'),
  h('div', { class: 'row' }, field('Name', name), field('Type', type), field('Max TTL (s)', maxTTL, '0: none')),
  submit, st);
}

