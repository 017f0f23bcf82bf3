// The console's shell: log-in, navigation, the bucket picker and the
// router. Each page module renders into <main> and returns a function that
// stops its timers when the page is left.
import * as api from './api.js';
import { h, fill, status, busy } from './dom.js';
import * as buckets from './buckets.js';
import * as docs from './docs.js';
import * as views from './views.js';
import * as expiry from './expiry.js';
import * as stats from './stats.js';
import * as cluster from './cluster.js';

const pages = [
  { id: 'buckets', title: 'Buckets', mod: buckets, perBucket: false },
  { id: 'docs', title: 'Documents', mod: docs, perBucket: true },
  { id: 'views', title: 'Views', mod: views, perBucket: true },
  { id: 'expiry', title: 'Expiry', mod: expiry, perBucket: true },
  { id: 'stats', title: 'Stats', mod: stats, perBucket: true },
  { id: 'cluster', title: 'Cluster', mod: cluster, perBucket: false },
];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const picker = document.getElementById('bucket-picker');
let leave = () => {};
let bucketNames = [];
let loginMessage = ''; // why the user was logged out, shown on the form

// current is the bucket the per-bucket pages show.
function current() { return sessionStorage.getItem('mayfly.bucket') || bucketNames[0] || ''; }
function setCurrent(b) { sessionStorage.setItem('mayfly.bucket', b); }

// go shows a page: #/page/bucket.
export function go(page, bucket) {
  const hash = bucket ? `#/${page}/${encodeURIComponent(bucket)}` : `#/${page}`;
  if (location.hash === hash) route(); else location.hash = hash;
}

// refreshBuckets reloads the picker's bucket list (after a create or delete).
export async function refreshBuckets() {
  try {
    const list = await api.get('/pools/default/buckets');
    bucketNames = list.map((b) => b.name);
  } catch { /* the page shows the error */ }
  if (!bucketNames.includes(current())) setCurrent(bucketNames[0] || '');
  fill(picker, bucketNames.map((n) => h('option', { value: n }, n)));
  picker.value = current();
}

function showNav(page, bucket) {
  fill(nav, pages.map((p) => h('a', {
    href: p.perBucket ? `#/${p.id}/${encodeURIComponent(bucket)}` : `#/${p.id}`,
    class: p.id === page ? 'active' : '', 'aria-current': p.id === page ? 'page' : null,
  }, p.title)));
}

async function route() {
  leave();
  leave = () => {};
  const loggedIn = api.loggedIn();
  document.getElementById('logout').hidden = !loggedIn;
  document.getElementById('bucket-picker-label').hidden = !loggedIn;
  document.getElementById('who').textContent = loggedIn ? api.user() : '';
  if (!loggedIn) {
    fill(nav);
    loginPage(loginMessage);
    loginMessage = '';
    return;
  }
  if (!bucketNames.length) await refreshBuckets();
  const [, id = 'buckets', b] = location.hash.split('/');
  const page = pages.find((p) => p.id === id) || pages[0];
  let bucket = b ? decodeURIComponent(b) : current();
  if (bucket) setCurrent(bucket);
  picker.value = bucket;
  showNav(page.id, bucket);
  document.title = `${page.title} — Mayfly console`;
  if (page.perBucket && !bucket) {
    fill(main, h('h1', null, page.title), h('p', null, 'No bucket yet: create one on the ', h('a', { href: '#/buckets' }, 'Buckets'), ' page.'));
    return;
  }
  fill(main);
  const stop = page.mod.render(main, { bucket, go, refreshBuckets });
  leave = typeof stop === 'function' ? stop : () => {};
}

function loginPage(message) {
  const user = h('input', { id: 'login-user', name: 'username', autocomplete: 'username', required: true, value: 'Administrator' });
  const pass = h('input', { id: 'login-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const st = status('login-status');
  const submit = h('button', { id: 'login-submit', type: 'submit', class: 'primary' }, 'Log in');
  if (message) st.err(message);
  const form = h('form', {
    class: 'card login', onsubmit: async (ev) => {
      ev.preventDefault();
      st.info('Checking…');
      await busy(submit, async () => {
        try {
          await api.login(user.value, pass.value);
          bucketNames = [];
          route();
        } catch (e) {
          st.err(e.status === 401 ? 'Wrong user name or password.' : e);
        }
      });
    },
  },
  h('h1', null, 'Log in to Mayfly'),
  h('p', { class: 'muted' }, 'As the administrator or any local user. Your credentials stay in this browser tab, and go when it closes.'),
  h('label', { class: 'field' }, h('span', { class: 'label' }, 'User name'), user),
  h('label', { class: 'field' }, h('span', { class: 'label' }, 'Password'), pass),
  submit, st);
  fill(main, form);
  (user.value ? pass : user).focus();
}

document.getElementById('logout').addEventListener('click', () => {
  api.logout();
  bucketNames = [];
  location.hash = '#/buckets';
  route();
});
picker.addEventListener('change', () => {
  setCurrent(picker.value);
  const [, id = 'buckets'] = location.hash.split('/');
  const page = pages.find((p) => p.id === id) || pages[0];
  go(page.id, page.perBucket ? picker.value : undefined);
});
window.addEventListener('hashchange', route);
window.addEventListener('mayfly:logout', (ev) => {
  loginMessage = ev.detail;
  bucketNames = [];
  route();
});
route();
