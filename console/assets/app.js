// @ts-check
// The console's shell: hash routes, live updates, login, theme and keys.
// Pages (pages/*.js) render into #view from the API's answers.
import { call, token, setToken, ApiError } from './api.js';
import { h, replace, errorBox, field } from './ui.js';
import { pages } from './pages.js';

const view = document.getElementById('view');
const banner = document.getElementById('banner');
const live = document.getElementById('live');
const pauseBtn = document.getElementById('pause');
const state = { paused: sessionStorage.getItem('logd.console.paused') === '1', current: null, me: null };

// Live updates: a page registers pollers with ctx.every; they run while
// the page is shown, the tab visible and updates not paused.
class Ctx {
  constructor(route) {
    this.route = route;
    this.params = route.parts.slice(1);
    this.query = route.query;
    this.view = view;
    this.abort = new AbortController();
    this.signal = this.abort.signal;
    this.pollers = [];
  }
  // every runs fn now and then every ms while live; errors show in the
  // banner (an unauthenticated one opens the login form).
  every(fn, ms = 2000) {
    const p = { fn, ms, timer: 0, running: false };
    this.pollers.push(p);
    const tick = async () => {
      if (this.signal.aborted) return;
      if (!state.paused && document.visibilityState === 'visible' && !p.running) {
        p.running = true;
        try {
          await fn();
          clearBanner();
          // UTC, as every other time on the pages (ui.js fmtTime).
          live.textContent = 'updated ' + new Date().toISOString().slice(11, 19) + ' UTC';
        } catch (e) {
          this.fail(e);
        } finally {
          p.running = false;
        }
      }
      if (!this.signal.aborted) p.timer = setTimeout(tick, p.ms);
    };
    tick();
  }
  // refresh runs every poller now (after an action changed something).
  async refresh() {
    for (const p of this.pollers) {
      try { await p.fn(); } catch (e) { this.fail(e); }
    }
  }
  fail(e) {
    if (e && e.name === 'AbortError') return;
    if (e instanceof ApiError && e.code === 'unauthenticated') { showLogin(e.message); return; }
    showBanner(e);
  }
  stop() {
    this.abort.abort();
    for (const p of this.pollers) clearTimeout(p.timer);
  }
  // go navigates to a route (a hash URL without the #).
  go(r) { location.hash = r; }
  // setQuery replaces the query of the current URL without a re-render,
  // so what the user picked can be shared by URL.
  setQuery(q) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== '') qs.set(k, String(v));
    const path = '/' + this.route.parts.map(encodeURIComponent).join('/');
    history.replaceState(null, '', '#' + path + (qs.toString() ? '?' + qs : ''));
    this.query = qs;
  }
}

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/cluster';
  const [path, qs] = raw.split('?', 2);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts: parts.length ? parts : ['cluster'], query: new URLSearchParams(qs || '') };
}

function showBanner(e) {
  replace(banner, errorBox(e));
  banner.hidden = false;
}

function clearBanner() {
  if (!banner.hidden) { banner.hidden = true; banner.replaceChildren(); }
}

function showLogin(message) {
  if (state.current) state.current.stop();
  const input = h('input', { type: 'password', id: 'token', autocomplete: 'off', required: true });
  const form = h('form', { class: 'login card', id: 'login' },
    h('h1', null, 'Log in'),
    h('p', null, message || 'This node requires authentication.'),
    field('Token', input, 'A bearer token made with logctl token create. It is kept in this tab only.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Log in')));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    setToken(input.value.trim());
    try {
      await whoami();
      footer();
      render();
    } catch (err) {
      setToken('');
      replace(form.querySelector('p'), err.message || String(err));
    }
  });
  replace(view, form);
  input.focus();
}

async function whoami() {
  const me = await call('WhoAmI', {});
  state.me = me;
  const who = document.getElementById('whoami');
  who.textContent = me.principal + (me.superuser ? ' (superuser)' : '');
  document.getElementById('logout').hidden = !token();
  if (me.authRequired && me.principal === 'User:ANONYMOUS') {
    throw new ApiError('unauthenticated', 'This node requires a token.');
  }
  return me;
}

// footer names the node this console talks to, on every page (the
// cluster page keeps it current).
function footer() {
  call('Status', {}).then(s => {
    document.getElementById('node').textContent = 'node ' + s.nodeId + ' (' + s.state + ')';
  }, () => {});
}

function nav(active) {
  const items = pages.filter(p => p.nav).map((p, i) =>
    h('a', { href: '#/' + p.path, class: p.path === active ? 'active' : null, 'aria-current': p.path === active ? 'page' : null,
      title: p.nav + ' (' + (i + 1) + ')' }, p.nav));
  replace(document.getElementById('nav'), items);
}

async function render() {
  if (state.current) state.current.stop();
  clearBanner();
  const route = parseHash();
  const page = pages.find(p => p.path === route.parts[0]) || pages.find(p => p.path === 'notfound');
  nav(page.navAs || page.path);
  const ctx = new Ctx(route);
  state.current = ctx;
  replace(view, h('p', { class: 'muted' }, 'Loading…'));
  document.title = (page.nav || page.title || 'logd') + ' · logd console';
  try {
    await page.render(ctx);
  } catch (e) {
    if (ctx.signal.aborted) return;
    if (e instanceof ApiError && e.code === 'unauthenticated') { showLogin(e.message); return; }
    replace(view, errorBox(e));
  }
}

function setPaused(p) {
  state.paused = p;
  sessionStorage.setItem('logd.console.paused', p ? '1' : '0');
  pauseBtn.textContent = p ? 'Resume' : 'Pause';
  pauseBtn.setAttribute('aria-pressed', p ? 'true' : 'false');
  live.textContent = p ? 'paused' : live.textContent;
  if (!p && state.current) state.current.refresh();
}

function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}

function toggleTheme() {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  const next = dark ? 'light' : 'dark';
  localStorage.setItem('logd.console.theme', next);
  applyTheme(next);
}

// Keys: 1-9 open the pages in the bar, p pauses, t switches the theme,
// / focuses a page's filter, ? shows the keys. Not while typing.
function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable)) return;
  const navPages = pages.filter(p => p.nav);
  if (/^[1-9]$/.test(e.key) && navPages[Number(e.key) - 1]) {
    location.hash = '#/' + navPages[Number(e.key) - 1].path;
  } else if (e.key === 'p') {
    setPaused(!state.paused);
  } else if (e.key === 't') {
    toggleTheme();
  } else if (e.key === '/') {
    const f = view.querySelector('input[data-filter]');
    if (f instanceof HTMLInputElement) { e.preventDefault(); f.focus(); }
  } else if (e.key === '?') {
    location.hash = '#/help';
  } else {
    return;
  }
}

function start() {
  applyTheme(localStorage.getItem('logd.console.theme'));
  pauseBtn.addEventListener('click', () => setPaused(!state.paused));
  document.getElementById('theme').addEventListener('click', toggleTheme);
  document.getElementById('logout').addEventListener('click', () => {
    setToken('');
    document.getElementById('whoami').textContent = '';
    showLogin('Logged out.');
  });
  document.addEventListener('keydown', onKey);
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && state.current && !state.paused) state.current.refresh();
  });
  window.addEventListener('hashchange', render);
  setPaused(state.paused);
  whoami().then(() => { footer(); render(); }, e => {
    if (e instanceof ApiError && e.code === 'unauthenticated') showLogin(e.message);
    else render();
  });
}

start();
