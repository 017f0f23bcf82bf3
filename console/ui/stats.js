// The Stats page: the bucket's statistics polled every few seconds and drawn
// as live line charts, with the request rate from /metrics when the user may
// read it, and every statistic's current value. The charts open with the
// samples the server kept of the last minutes (GET .../stats/history).
import { get, request, path } from './api.js';
import { h, fill, num, utc } from './dom.js';
import { lineChart } from './charts.js';

const EVERY = 3; // seconds between polls
const KEEP = 200; // samples kept per series (10 minutes)

// charts: what is drawn. A rate is the counter's change per second.
const CHARTS = [
  { stat: 'curr_items', title: 'Items' },
  { stat: 'ep_items_with_expiry', title: 'Items with an expiration' },
  { stat: 'ep_expired_unpurged', title: 'Expired, not purged yet' },
  { stat: 'ep_expired', title: 'Expirations per second', rate: true },
  { stat: 'ep_expired_pager', title: 'Purged by the pager per second', rate: true },
  { stat: 'ep_queue_size', title: 'Disk queue' },
  { stat: 'ep_tombstones', title: 'Tombstones' },
  { stat: 'mem_used', title: 'Memory used (bytes)' },
  { stat: 'vb_active_perc_mem_resident', title: 'Resident %' },
  { stat: 'ep_num_value_ejects', title: 'Values ejected per second', rate: true },
  { stat: 'ep_bg_fetched', title: 'Read from disk per second', rate: true },
  { stat: 'http_requests', title: 'HTTP requests per second', rate: true },
];

// requestCount sums mayfly_http_requests_total in Prometheus text.
function requestCount(text) {
  let n = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('mayfly_http_requests_total{')) n += Number(line.slice(line.lastIndexOf(' ') + 1)) || 0;
  }
  return n;
}

export function render(main, { bucket }) {
  const grid = h('div', { class: 'charts', id: 'stats-charts' });
  const table = h('div', { id: 'stats-table' });
  const note = h('p', { class: 'muted', id: 'stats-note' }, `Polled every ${EVERY} s; the charts show the last 10 minutes.`);
  main.append(h('h1', null, `Stats of ${bucket}`), note, grid, h('h2', { class: 'after-charts' }, 'All statistics'), table);
  const series = new Map(CHARTS.map((c) => [c.stat, []]));
  let prev = null;
  let metrics = true; // until /metrics refuses
  let stopped = false;

  // seed draws the server's recent samples before the first poll, placed
  // on this browser's clock (the server says its own time of the answer).
  async function seed() {
    let op;
    try {
      op = (await get(path`/pools/default/buckets/${bucket}/stats/history`)).op;
    } catch { return; } // the live polls still draw
    const shift = Date.now() / 1000 - op.now / 1000; // wall clock: browser minus server
    const times = op.samples.timestamp || [];
    let last = null;
    times.forEach((ms, i) => {
      const t = ms / 1000 + shift;
      const st = {};
      for (const c of CHARTS) if (op.samples[c.stat]) st[c.stat] = op.samples[c.stat][i];
      for (const c of CHARTS) {
        if (st[c.stat] === undefined) continue;
        let v = st[c.stat];
        if (c.rate) {
          if (!last || last.st[c.stat] === undefined || t <= last.t) continue;
          v = Math.max(0, (st[c.stat] - last.st[c.stat]) / (t - last.t));
        }
        const pts = series.get(c.stat);
        pts.push({ t, v });
        if (pts.length > KEEP) pts.shift();
      }
      last = { t, st };
    });
    if (last) prev = last;
  }

  async function poll() {
    let st;
    try {
      st = await get(path`/pools/default/buckets/${bucket}/stats`);
    } catch (e) {
      note.textContent = `Cannot read the statistics: ${e.reason || e}`;
      return;
    }
    if (metrics) {
      try {
        st.http_requests = requestCount((await request('GET', '/metrics')).data);
      } catch { metrics = false; }
    }
    if (stopped) return;
    const t = Date.now() / 1000; // wall clock: the poll's own time axis
    for (const c of CHARTS) {
      if (st[c.stat] === undefined) continue;
      let v = st[c.stat];
      if (c.rate) {
        if (!prev || prev.st[c.stat] === undefined) continue;
        v = Math.max(0, (st[c.stat] - prev.st[c.stat]) / (t - prev.t));
      }
      const pts = series.get(c.stat);
      pts.push({ t, v });
      if (pts.length > KEEP) pts.shift();
    }
    prev = { t, st };
    fill(grid, CHARTS.filter((c) => st[c.stat] !== undefined).map((c) => {
      const pts = series.get(c.stat);
      const last = pts.length ? pts[pts.length - 1].v : null;
      return h('figure', { class: 'stat-chart', 'data-stat': c.stat },
        h('figcaption', null, h('span', null, c.title), h('span', { class: 'latest' }, last === null ? '—' : num(last))),
        lineChart(pts, { window: KEEP * EVERY, now: t, integer: !c.rate }));
    }));
    fill(table, h('table', { class: 'grid stats' }, h('tbody', null,
      Object.keys(st).filter((k) => k !== 'http_requests').sort().map((k) => h('tr', { 'data-stat': k }, h('td', { class: 'mono' }, k), h('td', { class: 'num' }, k.endsWith('_next_run') && st[k] > 0 ? utc(st[k]) : num(st[k])))))));
  }
  seed().then(poll);
  const timer = setInterval(poll, EVERY * 1000);
  return () => { stopped = true; clearInterval(timer); };
}
