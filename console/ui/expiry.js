// The Expiry page: documents expiring per hour over the next day
// (GET /{bucket}/_expiry), those expired but not purged yet, and what each
// expiry pager run purged (GET /{bucket}/_expiry/runs), with "run pager now".
import { get, request, path, clock, perm, permissions } from './api.js';
import { h, fill, status, busy, duration, utc, num, bytes } from './dom.js';
import { barChart } from './charts.js';

export function render(main, { bucket }) {
  const summary = h('div', { class: 'summary', id: 'expiry-summary' });
  const ahead = h('div', { class: 'chart-box', id: 'expiry-chart' });
  const runs = h('div', { class: 'chart-box', id: 'runs-chart' });
  const runTable = h('div', { id: 'runs-table' });
  const st = status('expiry-status');
  const runBtn = h('button', { type: 'button', class: 'primary run-pager', id: 'expiry-run-pager' }, 'Run pager now');
  runBtn.addEventListener('click', () => busy(runBtn, async () => {
    try {
      const r = (await request('POST', path`/pools/default/buckets/${bucket}/controller/runExpiryPager`)).data;
      st.ok(`Pager run: purged ${num(r.purged)} in ${num(r.duration_ms)} ms.`);
      load();
    } catch (e) { st.err(e); }
  }));
  // Running the pager needs the bucket's settings!write: without it, no button.
  const buttons = h('div', { class: 'buttons' });
  permissions([perm.writeSettings(bucket)]).then((may) => {
    if (may[perm.writeSettings(bucket)]) buttons.append(runBtn);
  }).catch((e) => st.err(e));
  main.append(h('h1', null, `Expiry in ${bucket}`), summary, buttons, st,
    h('div', { class: 'card' }, h('h2', null, 'Documents expiring per hour, next 24 hours'), ahead),
    h('div', { class: 'card' }, h('h2', null, 'Documents purged by each pager run'), runs, runTable));

  async function load() {
    let f, r;
    try {
      [f, r] = await Promise.all([
        get(path`/${bucket}/_expiry`, { interval: 3600, horizon: 86400 }),
        get(path`/${bucket}/_expiry/runs`),
      ]);
    } catch (e) {
      st.err(e);
      return;
    }
    clock.set(f.now);
    const total = f.intervals.reduce((n, iv) => n + iv.docs, 0);
    fill(summary,
      h('div', { class: 'figure' }, h('span', { class: 'big', id: 'expiry-unpurged' }, num(f.expired_unpurged.docs)),
        h('span', null, ` expired, not purged yet (${bytes(f.expired_unpurged.bytes)})`)),
      h('div', { class: 'figure' }, h('span', { class: 'big' }, num(total)), h('span', null, ' expiring in the next 24 hours')),
      h('div', { class: 'figure' }, h('span', null, 'Pager: '),
        h('span', { 'data-next-run': f.pager_next_run || 0 }, f.pager_next_run ? `next run in ${duration(f.pager_next_run - f.now)}` : 'disabled')));
    fill(ahead, barChart(f.intervals.map((iv, i) => ({
      label: `+${i}h`, value: iv.docs,
      title: `${utc(iv.start)} – ${utc(iv.end)}: ${num(iv.docs)} documents, ${bytes(iv.bytes)}`,
    })), { unit: 'documents', empty: 'nothing expires' }));
    const list = r.runs.slice(-48);
    fill(runs, barChart(list.map((run) => ({
      // Runs come seconds apart: hours, minutes and seconds tell them apart.
      label: utc(run.start).slice(11, 19), value: run.purged,
      title: `${utc(run.start)}: purged ${num(run.purged)} in ${num(run.duration_ms)} ms`,
    })), { unit: 'purged', empty: 'no pager run yet', className: 'runs' }));
    fill(runTable, list.length ? h('table', { class: 'grid' },
      h('thead', null, h('tr', null, ['Run at', 'Purged', 'Batches', 'Took'].map((t) => h('th', null, t)))),
      h('tbody', null, list.slice(-10).reverse().map((run) => h('tr', { class: 'run' },
        h('td', null, utc(run.start)), h('td', { class: 'num purged' }, num(run.purged)),
        h('td', { class: 'num' }, num(run.batches)), h('td', { class: 'num' }, `${num(run.duration_ms)} ms`))))) : null);
  }

  function tick() {
    for (const el of main.querySelectorAll('[data-next-run]')) {
      const next = Number(el.dataset.nextRun);
      if (next) el.textContent = `next run in ${duration(next - clock.now())}`;
    }
  }
  load();
  const timers = [setInterval(load, 10000), setInterval(tick, 1000)];
  return () => timers.forEach(clearInterval);
}
