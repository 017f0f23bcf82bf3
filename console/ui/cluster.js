// The Cluster page: the nodes (up or down), the orchestrator, and per
// bucket the partitions each node leads and holds, the degraded partitions,
// the partitions no node up leads yet (an election under way) and the
// lagging replicas: what `mayfly cluster status` prints, read from
// GET /pools/default's "mayflyCluster" every few seconds. A single node
// (serve without --peers) has none, and the page says so.
import { get } from './api.js';
import { h, fill, num, status } from './dom.js';

const EVERY = 3; // seconds between polls

export function render(main) {
  const st = status('cluster-status');
  const body = h('div', { id: 'cluster' }, h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('h1', null, 'Cluster'), h('p', { class: 'muted' }, `Polled every ${EVERY} s.`), st, body);
  let timer = 0;
  let stopped = false;

  async function load() {
    let pools;
    try {
      pools = await get('/pools/default');
    } catch (e) {
      if (!stopped) st.err(e);
      return;
    }
    if (stopped) return;
    st.clear();
    const c = pools.mayflyCluster;
    if (!c) {
      const me = (pools.nodes || [])[0] || {};
      fill(body, h('p', { id: 'cluster-single' },
        `A single node (${me.hostname || 'this server'}, version ${me.version || '?'}): no cluster. `,
        'Start each node with ', h('code', null, 'mayfly serve --node NAME --peers n1=HOST:PORT,…'), ' to form one.'));
      return;
    }
    fill(body,
      h('p', { id: 'cluster-summary' },
        `Orchestrator: ${c.orchestrator || 'none elected'}. `,
        `${c.nodes.filter((n) => n.up).length} of ${c.nodes.length} nodes up. `,
        pools.balanced ? 'Every partition has all its copies and a leader, none lagging.' : unbalanced(c.buckets)),
      nodeTable(c),
      c.buckets.map((b) => bucketPart(b, c)));
  }

  load();
  timer = setInterval(load, EVERY * 1000);
  return () => { stopped = true; clearInterval(timer); };
}

// nodeTable lists the nodes: up or down, addresses, version.
function nodeTable(c) {
  return h('table', { class: 'grid', id: 'cluster-nodes' },
    h('thead', null, h('tr', null, ['Node', 'State', 'HTTP', 'Cluster port', 'etcd member', 'Version'].map((t) => h('th', null, t)))),
    h('tbody', null, c.nodes.map((n) => {
      const i = n.info || {};
      return h('tr', { 'data-node': n.name, class: n.up ? '' : 'down' },
        h('td', null, n.name, n.name === c.thisNode ? h('span', { class: 'muted' }, ' (this node)') : null),
        h('td', { class: n.up ? 'node-up' : 'node-down' }, n.up ? 'up' : 'down'),
        h('td', null, i.http || ''), h('td', null, i.cluster || ''),
        h('td', null, i.etcdClient ? 'yes' : ''), h('td', null, i.version || ''));
    })));
}

// unbalanced says which states keep the cluster from being balanced, as
// the buckets below show them.
function unbalanced(buckets) {
  const has = (f) => buckets.some((b) => (b[f] || []).length > 0);
  const what = [];
  if (buckets.some((b) => !b.placed)) what.push('not placed yet');
  if (has('degraded')) what.push('degraded');
  if (has('leaderless')) what.push('without a leader yet');
  if (has('lagging')) what.push('lagging');
  if (!what.length) return 'Some partitions are degraded or lagging (below).';
  const last = what.pop();
  return `Some partitions are ${what.length ? `${what.join(', ')} or ${last}` : last} (below).`;
}

// bucketPart is one bucket's partitions: led (the map's, and now) and held
// per node, degraded ones, those without a leader (shown only while there
// are any), lagging replicas.
function bucketPart(b, c) {
  const title = h('h2', null, `Bucket ${b.name} `, h('span', { class: 'muted' }, `(replicaNumber ${b.replicaNumber})`));
  if (!b.placed) return h('section', { 'data-bucket': b.name }, title, h('p', { class: 'muted' }, 'Partitions not placed yet.'));
  const names = c.nodes.map((n) => n.name).filter((n) => b.holds[n] || b.leads[n]);
  const degraded = b.degraded || [];
  const lagging = b.lagging || [];
  const leaderless = b.leaderless || [];
  return h('section', { 'data-bucket': b.name }, title,
    h('p', { class: 'degraded' }, degraded.length ? `${num(degraded.length)} degraded partitions: ${ranges(degraded, 12)}` : 'No degraded partition.'),
    leaderless.length ? h('p', { class: 'leaderless note' },
      `No leader yet in ${num(leaderless.length)} partitions: ${ranges(leaderless, 12)} — an election is under way; writes there answer “retry shortly”.`) : null,
    h('table', { class: 'grid partitions' },
      h('thead', null, h('tr', null, ['Node', 'Leads', 'Holds'].map((t) => h('th', null, t)))),
      h('tbody', null, names.map((n) => h('tr', { 'data-node': n },
        h('td', null, n), h('td', { class: 'leads' }, leadsCell(b, n)), h('td', { class: 'holds' }, num(b.holds[n] || 0)))))),
    lagging.length ? h('ul', { class: 'lagging' }, lagging.map((l) => h('li', null,
      `${l.follower} behind ${l.leader} (${l.why}) in ${num(l.partitions.length)} partitions, at most ${num(l.maxBehind)} entries: ${ranges(l.partitions, 12)}`)))
      : h('p', { class: 'lagging muted' }, 'No replica lagging.'));
}

// leadsCell is a node's partitions as the map prefers them, and, when its
// Raft groups lead another number now (the node is down, or leadership is
// on its way back), that number too.
function leadsCell(b, n) {
  const pref = b.leads[n] || 0;
  const now = b.leading ? b.leading[n] || 0 : pref;
  return now === pref ? num(pref) : `${num(pref)} (leading ${num(now)} now)`;
}

// ranges writes sorted partition numbers as "0-340,512", cut after max runs.
function ranges(ns, max) {
  const runs = [];
  for (let i = 0; i < ns.length;) {
    let j = i;
    while (j + 1 < ns.length && ns[j + 1] === ns[j] + 1) j++;
    runs.push(i === j ? `${ns[i]}` : `${ns[i]}-${ns[j]}`);
    i = j + 1;
  }
  return runs.length > max ? `${runs.slice(0, max).join(',')},… (${runs.length - max} more runs)` : runs.join(',');
}
