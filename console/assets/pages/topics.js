// @ts-check
import { call, num } from '../api.js';
import { historyCharts } from '../history.js';
import { h, replace, table, link, route, fmtNum, fmtTime, sparkline, errorBox, confirmTyped, field, settingValue, duration, size } from '../ui.js';
import { renderRecords } from './records.js';

// Samples of each topic's summed end offsets, kept while the console is
// open, so the produce-rate sparkline survives moving between pages.
const samples = new Map();
const maxSamples = 30;

// The topics list, a topic's page and (topics/NAME/records) its records
// browser (docs/console.md).
export default {
  path: 'topics',
  nav: 'Topics',
  async render(ctx) {
    if (ctx.params.length === 0) return renderList(ctx);
    if (ctx.params.length === 2 && ctx.params[1] === 'records') return renderRecords(ctx, ctx.params[0]);
    return renderTopic(ctx, ctx.params[0]);
  },
};

// record adds a sample of a topic's end offsets and returns the produce
// rates (records/s) between successive samples.
function record(name, endOffsets, now) {
  let s = samples.get(name);
  if (!s) samples.set(name, s = []);
  if (s.length && s[s.length - 1].end > endOffsets) s.length = 0; // recreated
  s.push({ t: now, end: endOffsets });
  if (s.length > maxSamples) s.shift();
  const rates = [];
  for (let i = 1; i < s.length; i++) {
    const dt = (s[i].t - s[i - 1].t) / 1000;
    rates.push(dt > 0 ? (s[i].end - s[i - 1].end) / dt : 0);
  }
  return rates;
}

function fmtRate(r) {
  if (r === undefined) return '—';
  return (r >= 10 ? Math.round(r).toLocaleString('en-US') : r.toFixed(1)) + '/s';
}

// retention summarizes a topic's retention and compaction settings.
function retention(cfg) {
  const parts = [];
  const policy = cfg['cleanup.policy'] || 'delete';
  if (policy.includes('delete')) {
    const ms = Number(cfg['retention.ms']);
    const bytes = Number(cfg['retention.bytes']);
    parts.push(ms > 0 ? duration(ms) : 'forever');
    if (bytes > 0) parts.push(h('span', null, size(bytes), '/partition'));
  }
  if (policy.includes('compact')) parts.push('compacted');
  return parts.flatMap((x, i) => (i ? [', ', x] : [x]));
}

function renderList(ctx) {
  const filter = h('input', { type: 'search', id: 'topics-filter', placeholder: 'Filter topics (/)', 'aria-label': 'Filter topics',
    dataset: { filter: '' }, value: ctx.query.get('q') || '' });
  const list = h('div', { id: 'topics-list' });
  const count = h('span', { class: 'muted', id: 'topics-count' });
  const createArea = h('div', { id: 'topic-create-area' });
  const newBtn = h('button', { type: 'button', id: 'topic-new', class: 'primary', 'aria-expanded': 'false' }, 'New topic');
  let last = [];
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = q ? last.filter(t => t.name.toLowerCase().includes(q)) : last;
    const total = fmtNum(last.length) + (last.length === 1 ? ' topic' : ' topics');
    count.textContent = rows.length === last.length ? total : fmtNum(rows.length) + ' of ' + total;
    replace(list, table([
      { label: 'Topic', value: t => link(route(['topics', t.name]), t.name) },
      { label: 'Partitions', num: true, value: t => fmtNum(t.partitions) },
      { label: 'Records', num: true, value: t => fmtNum(num(t.stats && t.stats.records)) },
      { label: 'Bytes', num: true, value: t => size(num(t.stats && t.stats.bytes)) },
      { label: 'Retention', value: t => retention(t.config || {}) },
      { label: 'Produce rate', value: t => h('span', { class: 'rate' },
        sparkline(t.rates, { label: 'produce rate of ' + t.name, width: 80, height: 18 }), fmtRate(t.rates[t.rates.length - 1])) },
    ], rows, { class: 'topics', empty: q ? 'No topic matches.' : 'No topics yet.', rowProps: t => ({ dataset: { topic: t.name } }) }));
  };
  filter.addEventListener('input', () => { ctx.setQuery({ q: filter.value }); draw(); });
  newBtn.addEventListener('click', () => {
    const open = newBtn.getAttribute('aria-expanded') === 'true';
    newBtn.setAttribute('aria-expanded', open ? 'false' : 'true');
    replace(createArea, open ? null : createForm(ctx));
  });
  replace(ctx.view, h('h1', null, 'Topics'),
    h('div', { class: 'toolbar' }, filter, newBtn, count), createArea, list);
  ctx.every(async () => {
    const r = await call('ListTopics', { stats: true }, { signal: ctx.signal });
    const now = Date.now();
    last = (r.topics || []).map(t => ({ ...t, rates: record(t.name, num(t.stats && t.stats.endOffsets), now) }));
    draw();
  });
}

// parseSettings reads "key=value" lines; blank lines are skipped.
function parseSettings(textValue) {
  const out = {};
  for (const raw of textValue.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const i = line.indexOf('=');
    if (i <= 0) throw new Error('setting "' + line + '" is not key=value');
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

// createForm is logctl topic create: name, partitions and settings.
function createForm(ctx) {
  const name = h('input', { type: 'text', id: 'create-name', required: true, autocomplete: 'off', pattern: '[A-Za-z0-9._\\-]+' });
  const parts = h('input', { type: 'number', id: 'create-partitions', min: 1, value: '1', required: true });
  const policy = h('select', { id: 'create-cleanup' },
    h('option', { value: '' }, 'default (delete)'), h('option', { value: 'delete' }, 'delete'),
    h('option', { value: 'compact' }, 'compact'), h('option', { value: 'compact,delete' }, 'compact,delete'));
  const retMs = h('input', { type: 'text', id: 'create-retention-ms', placeholder: 'default', inputmode: 'numeric' });
  const retBytes = h('input', { type: 'text', id: 'create-retention-bytes', placeholder: 'default', inputmode: 'numeric' });
  const other = h('textarea', { id: 'create-config', class: 'value', placeholder: 'max.message.bytes=1048576\nsegment.bytes=…' });
  const out = h('div', { id: 'create-result' });
  const form = h('form', { class: 'panel', id: 'topic-create' },
    h('h2', null, 'New topic'),
    field('Name', name), field('Partitions', parts), field('cleanup.policy', policy),
    field('retention.ms', retMs), field('retention.bytes', retBytes),
    field('Other settings', other, 'key=value, one a line'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'create-submit' }, 'Create topic')), out);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    replace(out);
    try {
      const config = parseSettings(other.value);
      if (policy.value) config['cleanup.policy'] = policy.value;
      if (retMs.value.trim()) config['retention.ms'] = retMs.value.trim();
      if (retBytes.value.trim()) config['retention.bytes'] = retBytes.value.trim();
      const r = await call('CreateTopic', { name: name.value.trim(), partitions: Number(parts.value), config });
      ctx.go(route(['topics', r.topic.name]));
    } catch (err) {
      replace(out, errorBox(err));
    }
  });
  setTimeout(() => name.focus(), 0);
  return form;
}

async function renderTopic(ctx, name) {
  const head = h('div', { class: 'cards', id: 'topic-summary' });
  const parts = h('div', { id: 'partitions' });
  const settings = h('div', { id: 'settings' });
  const grow = h('div', { id: 'grow' });
  const msg = h('div', { id: 'topic-message', role: 'status' });
  const del = h('button', { type: 'button', class: 'danger', id: 'topic-delete' }, 'Delete topic…');
  // Destructive actions sit apart, at the end of the page, not among the
  // everyday links.
  const danger = h('section', { class: 'danger-zone', id: 'topic-danger' },
    h('h2', null, 'Danger zone'),
    h('p', { class: 'muted' }, 'Deleting the topic removes its records on every node; it cannot be undone.'), del);
  replace(ctx.view,
    h('p', null, link('/topics', '← Topics')),
    h('h1', null, 'Topic ', h('code', { id: 'topic-name' }, name)),
    h('div', { class: 'toolbar' }, h('a', { href: '#' + route(['topics', name, 'records']), id: 'topic-browse' }, 'Browse records')),
    msg, head, historyCharts(ctx, { topic: name }), h('h2', null, 'Partitions'), parts, h('h2', null, 'Settings'), settings, h('h2', null, 'Add partitions'), grow, danger);

  del.addEventListener('click', async () => {
    const ok = await confirmTyped('Delete topic ' + name,
      'The topic, its records and its partitions are deleted on every node. Consumer and queue groups of it lose their positions. This cannot be undone.',
      name, 'Delete topic');
    if (!ok) return;
    try {
      await call('DeleteTopic', { name });
      ctx.go('/topics');
    } catch (err) {
      replace(msg, errorBox(err));
    }
  });

  let drawnConfig = null;
  ctx.every(async () => {
    const r = await call('DescribeTopic', { name }, { signal: ctx.signal });
    const t = r.topic;
    const ps = r.partitions || [];
    const sum = k => ps.reduce((a, p) => a + num(p[k]), 0);
    replace(head,
      card('Partitions', fmtNum(t.partitions)),
      card('Records', fmtNum(ps.reduce((a, p) => a + num(p.endOffset) - num(p.logStartOffset), 0)), 'offsets held'),
      card('Bytes', size(sum('bytes')), fmtNum(sum('segments')) + ' segments'),
      card('Retention', retention(t.config || {}).length ? retention(t.config || {}) : '—'),
      card('Created', fmtTime(num(t.createdMs)).slice(0, 10), fmtTime(num(t.createdMs)).slice(11)));
    replace(parts, table([
      { label: 'Partition', num: true, value: p => String(p.partition || 0) },
      { label: 'Start offset', num: true, value: p => fmtNum(num(p.logStartOffset)) },
      { label: 'End offset', num: true, value: p => fmtNum(num(p.endOffset)) },
      { label: 'Records', num: true, value: p => fmtNum(num(p.endOffset) - num(p.logStartOffset)) },
      { label: 'Bytes', num: true, value: p => size(num(p.bytes)) },
      { label: 'Segments', num: true, value: p => fmtNum(p.segments || 0) },
      { label: 'Compacted', num: true, value: p => fmtNum(p.compactedSegments || 0) },
      { label: 'Last cleaner run', value: p => p.lastCleanerRun ? p.lastCleanerRun.action + ' at ' + fmtTime(num(p.lastCleanerRun.timeMs)) : '—' },
      { label: '', value: p => link(route(['topics', name, 'records'], { p: p.partition || 0 }), 'records') },
    ], ps, { class: 'partitions', rowProps: p => ({ dataset: { partition: p.partition || 0 } }) }));
    // The forms are drawn again only when the settings or the partition
    // count changed, so a poll does not wipe what the user is typing.
    const cfg = t.partitions + ' ' + JSON.stringify(t.config || {});
    if (cfg !== drawnConfig) {
      drawnConfig = cfg;
      replace(settings, settingsForm(ctx, name, t.config || {}, msg));
      replace(grow, growForm(ctx, name, t.partitions, msg));
    }
  });
}

// settingsForm is logctl topic alter --config / --delete-config: every
// effective setting, editable; Save sends the changed ones, Default
// returns one to its default.
function settingsForm(ctx, name, config, msg) {
  const keys = Object.keys(config).sort();
  const inputs = new Map();
  const rows = keys.map(k => {
    const input = h('input', { type: 'text', class: 'setting', value: config[k], 'aria-label': k, dataset: { key: k } });
    inputs.set(k, input);
    input.addEventListener('input', () => input.parentElement.classList.toggle('changed', input.value !== config[k]));
    return k;
  });
  const alter = async (req, what) => {
    try {
      await call('AlterTopic', { name, ...req });
      replace(msg, h('p', { class: 'ok' }, what));
      await ctx.refresh();
    } catch (err) {
      replace(msg, errorBox(err));
    }
  };
  const form = h('form', { id: 'settings-form' },
    table([
      { label: 'Setting', value: k => h('code', null, k) },
      { label: 'Value', value: k => inputs.get(k) },
      { label: 'Means', value: k => h('span', { class: 'setting-means', dataset: { key: k } }, settingValue(k, config[k])) },
      { label: '', value: k => h('button', { type: 'button', class: 'setting-default', dataset: { key: k },
        onclick: () => alter({ deleteConfig: [k] }, k + ' returned to its default.') }, 'Default') },
    ], rows, { class: 'settings' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'settings-save' }, 'Save changes')));
  form.addEventListener('submit', e => {
    e.preventDefault();
    const changed = {};
    for (const [k, input] of inputs) if (input.value !== config[k]) changed[k] = input.value.trim();
    if (Object.keys(changed).length === 0) { replace(msg, h('p', { class: 'muted' }, 'Nothing changed.')); return; }
    alter({ config: changed }, 'Changed ' + Object.keys(changed).join(', ') + '.');
  });
  return form;
}

// growForm is logctl topic alter --partitions N: checked first
// (validate_only), then made after the keyed-order caveat is read.
function growForm(ctx, name, current, msg) {
  const count = h('input', { type: 'number', id: 'grow-count', min: current + 1, value: String(current + 1), 'aria-label': 'Partitions in all' });
  const plan = h('div', { id: 'grow-plan' });
  const form = h('form', { id: 'grow-form', class: 'toolbar' },
    field('Partitions in all (now ' + current + ')', count),
    h('button', { type: 'submit', id: 'grow-check' }, 'Check'), plan);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const n = Number(count.value);
    try {
      await call('CreatePartitions', { name, count: n, validateOnly: true });
    } catch (err) {
      replace(plan, errorBox(err));
      return;
    }
    const go = h('button', { type: 'button', class: 'primary', id: 'grow-execute' }, 'Grow to ' + n + ' partitions');
    go.addEventListener('click', async () => {
      try {
        await call('CreatePartitions', { name, count: n });
        replace(msg, h('p', { class: 'ok' }, name + ' grew from ' + current + ' to ' + n + ' partitions.'));
        await ctx.refresh();
      } catch (err) {
        replace(plan, errorBox(err));
      }
    });
    replace(plan, h('p', { class: 'warn' }, 'Keyed records produced from now on are spread over ' + n + ' partitions instead of ' + current +
      ': a key may go to another partition than its earlier records. Partitions cannot be removed.'), go);
  });
  return form;
}

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), sub ? h('div', { class: 'sub' }, sub) : null);
}
