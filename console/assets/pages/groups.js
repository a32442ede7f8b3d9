// @ts-check
import { call, num } from '../api.js';
import { historyCharts } from '../history.js';
import { h, replace, table, link, route, fmtNum, fmtDuration, fmtTime, chart, errorBox, confirmTyped, field, duration } from '../ui.js';
import { renderReset } from './group_reset.js';
import { renderConsume, consumePanel } from './group_consume.js';

// Consumer groups (docs/console.md, "Consumer groups"): the list, a
// group's members, offsets and lag with a chart of lag over time, delete,
// the offset reset page (group_reset.js) and consuming as a member
// (group_consume.js).
export default {
  path: 'groups',
  nav: 'Groups',
  async render(ctx) {
    if (ctx.params.length === 0) return renderList(ctx);
    if (ctx.params[1] === 'reset') return renderReset(ctx, ctx.params[0]);
    if (ctx.params[1] === 'consume') return renderConsume(ctx, ctx.params[0]);
    return renderGroup(ctx, ctx.params[0]);
  },
};

function renderList(ctx) {
  const filter = h('input', { type: 'search', id: 'groups-filter', placeholder: 'Filter by group or topic (/)', 'aria-label': 'Filter groups',
    dataset: { filter: '' }, value: ctx.query.get('q') || '' });
  const all = h('input', { type: 'checkbox', id: 'groups-all', checked: ctx.query.get('all') === '1' });
  const body = h('div', { id: 'groups-list' });
  // Consume as a group, also one that does not exist yet (the first
  // member's join creates it): the group's consume page.
  const consumeName = h('input', { type: 'text', id: 'groups-consume-name', placeholder: 'billing', autocomplete: 'off', required: true, size: 16 });
  const consumeForm = h('form', { id: 'groups-consume-form', class: 'toolbar' },
    field('Consume as a group…', consumeName, 'logctl consume TOPIC --group NAME'),
    h('button', { type: 'submit', id: 'groups-consume-go' }, 'Consume…'));
  consumeForm.addEventListener('submit', e => {
    e.preventDefault();
    const n = consumeName.value.trim();
    if (n) ctx.go(route(['groups', n, 'consume']));
  });
  replace(ctx.view, h('h1', null, 'Consumer groups'),
    h('div', { class: 'toolbar' }, filter,
      h('label', { title: 'Also list internal groups (a redrive job\'s position), as logctl group list --all' }, all, ' internal groups')),
    body, consumeForm);
  let groups = [];
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = groups.filter(g => !q || g.group.toLowerCase().includes(q) || (g.topics || []).some(t => t.toLowerCase().includes(q)));
    replace(body, table([
      { label: 'Group', value: g => link(route(['groups', g.group]), g.group) },
      { label: 'State', value: g => stateTag(g.state) },
      { label: 'Members', num: true, value: g => fmtNum(g.members) },
      { label: 'Generation', num: true, value: g => fmtNum(num(g.generation)) },
      { label: 'Topics', value: g => (g.topics || []).join(', ') || '—' },
      { label: 'Lag (records)', num: true, value: g => fmtNum(num(g.lagRecords)) },
      { label: 'Max lag (time)', num: true, value: g => (g.maxLagSeconds ? duration(1000 * g.maxLagSeconds) : '—') },
    ], rows, { class: 'groups-table', empty: groups.length ? 'No group matches the filter.' : 'No consumer groups.' }),
    h('p', { class: 'muted' }, rows.length + ' of ' + groups.length + ' groups'));
    body.firstChild.id = 'groups-table';
  };
  filter.addEventListener('input', () => { ctx.setQuery({ q: filter.value, all: all.checked ? '1' : '' }); draw(); });
  all.addEventListener('change', () => { ctx.setQuery({ q: filter.value, all: all.checked ? '1' : '' }); ctx.refresh(); });
  ctx.every(async () => {
    const r = await call('ListGroups', { all: all.checked }, { signal: ctx.signal });
    groups = (r.groups || []).sort((a, b) => a.group.localeCompare(b.group));
    draw();
  });
}

function stateTag(state) {
  const cls = state === 'stable' ? 'ok' : state === 'rebalancing' ? 'warn' : '';
  return h('span', { class: 'tag ' + cls }, state || 'empty');
}

// maxSamples bounds the lag history kept in the page (two hours at one
// sample every two seconds).
const maxSamples = 3600;

function renderGroup(ctx, name) {
  const summary = h('div', { class: 'cards', id: 'group-summary' });
  const members = h('div', { id: 'group-members' });
  const parts = h('div', { id: 'group-partitions' });
  const lagChart = h('div', { id: 'group-lag-chart' });
  const result = h('div', { id: 'group-action-result' });
  const del = h('button', { type: 'button', class: 'danger', id: 'group-delete' }, 'Delete group…');
  replace(ctx.view,
    h('p', null, link('/groups', '← Consumer groups')),
    h('h1', null, 'Group ', h('code', null, name)),
    summary,
    h('div', { class: 'actions' },
      h('a', { href: '#' + route(['groups', name, 'reset']), id: 'group-reset-link', class: 'button' }, 'Reset offsets…')),
    // Folded until asked for; open when the URL carries a consume's
    // choices (a shared link, or a reload after one).
    h('details', { id: 'group-consume', open: ['topics', 'max', 'wait', 'commit', 'reset'].some(k => ctx.query.has(k)) },
      h('summary', null, 'Consume as a member…'), consumePanel(ctx, name)),
    result,
    historyCharts(ctx, { group: name }),
    h('h2', null, 'Members'), members,
    h('h2', null, 'Offsets and lag'), parts,
    h('h2', null, 'Lag over time'),
    h('p', { class: 'muted' }, 'Sampled at each update while this page is open; the history is kept in this tab only.'),
    lagChart,
    // Destructive actions sit apart, at the end of the page (as a
    // topic's), not beside the everyday ones.
    h('section', { class: 'danger-zone', id: 'group-danger' },
      h('h2', null, 'Danger zone'),
      h('p', { class: 'muted' }, 'Deleting the group removes its committed offsets; it cannot be undone.'), del));
  del.addEventListener('click', async () => {
    const ok = await confirmTyped('Delete group ' + name,
      'The group\'s committed offsets are deleted (logctl group delete). The API refuses while the group has members.', name, 'Delete group');
    if (!ok) return;
    try {
      await call('DeleteGroup', { group: name });
      ctx.go('/groups');
    } catch (e) {
      replace(result, errorBox(e));
    }
  });
  const history = new LagHistory();
  ctx.every(async () => {
    const g = await call('DescribeGroup', { group: name }, { signal: ctx.signal });
    const ps = g.partitions || [];
    const lagRecords = ps.reduce((s, p) => s + num(p.lagRecords), 0);
    const lagSeconds = ps.reduce((s, p) => Math.max(s, p.lagSeconds || 0), 0);
    replace(summary,
      card('State', g.state || 'empty', 'generation ' + fmtNum(num(g.generation))),
      card('Members', fmtNum((g.members || []).length)),
      card('Lag', fmtNum(lagRecords) + ' records', ['oldest uncommitted ', duration(1000 * lagSeconds)]),
      card('Rebalances', fmtNum(num(g.rebalances)), fmtNum(num(g.offsetResets)) + ' offset resets'));
    replace(members, table([
      { label: 'Member', value: m => h('code', null, m.memberId) },
      { label: 'Protocol', value: m => m.protocol || 'logd' },
      { label: 'Client', value: m => [m.clientId, m.clientHost, m.instanceId].filter(Boolean).join(' · ') || '—' },
      { label: 'Topics', value: m => (m.topics || []).join(', ') },
      { label: 'Assigned', value: m => (m.partitions || []).map(p => p.topic + ':' + (p.partition || 0)).join(', ') || '—' },
      { label: 'Joined', value: m => fmtTime(num(m.joinedMs)) },
      { label: 'Last seen', value: m => fmtTime(num(m.lastSeenMs)) },
      { label: 'Session', num: true, value: m => m.sessionTimeoutMs ? duration(m.sessionTimeoutMs) : '—' },
      { label: 'Reset policy', value: m => m.resetPolicy || '—' },
    ], g.members || [], { empty: 'No members.' }));
    replace(parts, table([
      { label: 'Topic', value: p => link(route(['topics', p.topic]), p.topic) },
      { label: 'Partition', num: true, value: p => String(p.partition || 0) },
      { label: 'Committed', num: true, value: p => offsetOrDash(p.committedOffset) },
      { label: 'Log start', num: true, value: p => fmtNum(num(p.logStartOffset)) },
      { label: 'End', num: true, value: p => fmtNum(num(p.endOffset)) },
      { label: 'Lag', num: true, value: p => fmtNum(num(p.lagRecords)) },
      { label: 'Lag time', num: true, value: p => (p.lagSeconds ? duration(1000 * p.lagSeconds) : '—') },
      { label: 'Owner', value: p => (p.owner || '—') + (p.pendingOwner ? ' → ' + p.pendingOwner : '') },
      { label: 'Skipped', num: true, value: p => fmtNum(num(p.skippedRecords)) },
      { label: 'Committed at', value: p => fmtTime(num(p.committedMs)) },
    ], ps, { empty: 'No committed offsets.' }));
    history.add(Date.now(), lagRecords, lagSeconds, ps);
    drawChart(lagChart, history);
  });
}

// LagHistory keeps the lag samples of the page: the group's total lag in
// records and its largest lag in time, and the same per partition (a
// partition first seen later counts as at its first value before).
class LagHistory {
  constructor() {
    this.t = [];
    this.records = [];
    this.seconds = [];
    this.parts = new Map(); // "topic:partition" -> {records: [], seconds: []}
  }
  add(now, records, seconds, partitions) {
    const seen = new Set();
    for (const p of partitions) {
      const key = p.topic + ':' + (p.partition || 0);
      seen.add(key);
      const r = num(p.lagRecords), sec = p.lagSeconds || 0;
      let e = this.parts.get(key);
      if (!e) {
        e = { records: this.t.map(() => r), seconds: this.t.map(() => sec) };
        this.parts.set(key, e);
      }
      e.records.push(r);
      e.seconds.push(sec);
    }
    for (const [key, e] of this.parts) {
      if (!seen.has(key)) { e.records.push(0); e.seconds.push(0); }
    }
    this.t.push(now);
    this.records.push(records);
    this.seconds.push(seconds);
    if (this.t.length > maxSamples) {
      for (const a of [this.t, this.records, this.seconds]) a.shift();
      for (const e of this.parts.values()) { e.records.shift(); e.seconds.shift(); }
    }
  }
  // top returns the keys of the n partitions lagging most now, by field.
  top(field, n) {
    return [...this.parts].filter(([, e]) => e[field][e[field].length - 1] > 0)
      .sort((a, b) => b[1][field][b[1][field].length - 1] - a[1][field][a[1][field].length - 1])
      .slice(0, n).map(([k]) => k);
  }
}

// chartPartitions is how many partitions a chart draws besides the total
// (the ones lagging most now), so it stays readable.
const chartPartitions = 5;

function drawChart(el, history) {
  const n = history.t.length;
  if (n < 2) {
    replace(el, h('p', { class: 'muted' }, 'Collecting samples…'));
    return;
  }
  const span = fmtDuration(history.t[n - 1] - history.t[0]);
  const lines = (field, totalLabel, total) => [{ label: totalLabel, values: total },
    ...(history.parts.size > 1 ? history.top(field, chartPartitions).map(k => ({ label: k, values: history.parts.get(k)[field] })) : [])];
  const legend = series => h('p', { class: 'legend' }, series.map((s, i) => h('span', { class: 'legend-item' },
    h('span', { class: 'legend-swatch c' + (i % 6) }), s.label)));
  const rec = lines('records', 'group total', history.records);
  const sec = lines('seconds', 'group (oldest)', history.seconds);
  replace(el,
    h('p', { class: 'muted' }, 'Lag in records, last ' + span + ' (' + n + ' samples; now ' + fmtNum(history.records[n - 1]) + ')'),
    chart(rec, { label: 'Lag in records over time', format: v => fmtNum(v) }), legend(rec),
    h('p', { class: 'muted' }, 'Lag in time (oldest uncommitted record), last ' + span + ' (now ' + fmtDuration(1000 * history.seconds[n - 1]) + ')'),
    chart(sec, { label: 'Lag in seconds over time', format: v => fmtDuration(1000 * v) }), legend(sec));
}

export function offsetOrDash(v) {
  const n = num(v);
  return n < 0 ? '—' : fmtNum(n);
}

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value),
    sub ? h('div', { class: 'sub' }, sub) : null);
}
