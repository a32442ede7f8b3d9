// @ts-check
import { call, num } from '../api.js';
import { historyCharts } from '../history.js';
import { h, replace, table, link, route, fmtNum, fmtDuration, fmtTime, field, errorBox, parseDuration, fmtGoDuration, duration, size } from '../ui.js';
import { claimPanel } from './queue_ops.js';

// Queue groups (docs/console.md, "Queue groups"): the list with each
// group's health, create (logctl queue create), and a group's page:
// per-partition state, settings and alter (logctl queue alter),
// pause/resume, the records in flight (queue describe --in-flight), and
// claim and settle (queue claim, ack, nack, extend; queue_ops.js).
export default {
  path: 'queues',
  nav: 'Queues',
  async render(ctx) {
    if (ctx.params.length >= 2) return renderQueue(ctx, ctx.params[0], ctx.params[1]);
    return renderList(ctx);
  },
};

// totals sums a group's partitions as queue describe's table does.
function totals(g) {
  const t = { ready: 0, inFlight: 0, delayed: 0, acked: 0, deadLettered: 0, deadPending: 0, oldestReady: 0, oldestLease: 0, atCap: 0 };
  for (const p of g.partitions || []) {
    t.ready += num(p.ready);
    t.inFlight += num(p.inFlight);
    t.delayed += num(p.delayed);
    t.acked += num(p.acked);
    t.deadLettered += num(p.deadLettered);
    t.deadPending += num(p.deadPending);
    t.oldestReady = Math.max(t.oldestReady, num(p.oldestReadyAgeMs));
    t.oldestLease = Math.max(t.oldestLease, num(p.oldestInFlightAgeMs));
    if (p.atCap) t.atCap++;
  }
  return t;
}

function stateTags(g, t) {
  return [
    g.paused ? h('span', { class: 'tag warn' }, 'paused') : h('span', { class: 'tag ok' }, 'running'),
    t.atCap ? [' ', h('span', { class: 'tag bad', title: t.atCap + ' partition(s) at max in-flight' }, 'at in-flight cap')] : null,
  ];
}

function renderList(ctx) {
  const filter = h('input', { type: 'search', id: 'queues-filter', placeholder: 'Filter by topic or group (/)', 'aria-label': 'Filter queue groups',
    dataset: { filter: '' }, value: ctx.query.get('q') || '' });
  const body = h('div', { id: 'queues-list' });
  const createBox = h('div', { id: 'queue-create' });
  const openCreate = h('button', { type: 'button', id: 'queue-create-open' }, 'Create queue group…');
  replace(ctx.view, h('h1', null, 'Queue groups'), h('div', { class: 'toolbar' }, filter, openCreate), createBox, body);
  openCreate.addEventListener('click', () => {
    openCreate.disabled = true;
    replace(createBox, createForm(ctx, () => { openCreate.disabled = false; replace(createBox); }));
  });
  let groups = [];
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = groups.filter(g => !q || g.topic.toLowerCase().includes(q) || g.group.toLowerCase().includes(q));
    const t = table([
      { label: 'Topic', value: g => link(route(['topics', g.topic]), g.topic) },
      { label: 'Group', value: g => link(route(['queues', g.topic, g.group]), g.group) },
      { label: 'State', value: g => stateTags(g, g.t) },
      { label: 'Ready', num: true, value: g => fmtNum(g.t.ready) },
      { label: 'In flight', num: true, value: g => fmtNum(g.t.inFlight) },
      { label: 'Delayed', num: true, value: g => fmtNum(g.t.delayed) },
      { label: 'Acked', num: true, value: g => fmtNum(g.t.acked) },
      { label: 'Dead-lettered', num: true, value: g => fmtNum(g.t.deadLettered) },
      { label: 'Oldest ready', num: true, value: g => (g.t.oldestReady ? duration(g.t.oldestReady) : '—') },
      { label: 'Backlog', num: true, value: g => [fmtNum(num(g.backlogRecords)), ' · ', size(num(g.backlogBytes))] },
      { label: 'Dead-letter topic', value: g => g.config && g.config.deadLetterTopic
        ? [link(route(['dlq', g.config.deadLetterTopic]), g.config.deadLetterTopic), ' (' + fmtNum(num(g.deadLetterRecords)) + ')'] : '—' },
    ], rows, { empty: groups.length ? 'No queue group matches the filter.' : 'No queue groups.' });
    t.id = 'queues-table';
    replace(body, t, h('p', { class: 'muted' }, rows.length + ' of ' + groups.length + ' queue groups'));
  };
  filter.addEventListener('input', () => { ctx.setQuery({ q: filter.value }); draw(); });
  ctx.every(async () => {
    const r = await call('ListQueueGroups', {}, { signal: ctx.signal });
    groups = (r.groups || []).map(g => ({ ...g, t: totals(g) }));
    draw();
  });
}

// Settings as the form shows them: [field of QueueGroupConfig, label,
// kind, logctl flag, hint].
const settings = [
  ['leaseMs', 'Lease', 'duration', '--lease', 'a claim that names none; default 30s'],
  ['maxDeliveries', 'Max deliveries', 'int', '--max-deliveries', 'then dead-lettered; default 5'],
  ['backoffBaseMs', 'Backoff base', 'duration', '--backoff-base', 'default 1s'],
  ['backoffMaxMs', 'Backoff max', 'duration', '--backoff-max', 'default 5m'],
  ['maxInFlight', 'Max in flight', 'int', '--max-in-flight', 'per partition; default 1000'],
  ['ageLimitMs', 'Age limit', 'duration', '--age-limit', '0: none (the default); up to 168h'],
  ['deadLetterTopic', 'Dead-letter topic', 'text', '--dead-letter-topic', 'default <topic>.<group>.dlq'],
  ['deadlineHeader', 'Deadline header', 'text', '--deadline-header', 'default deadline; - for none'],
];

function settingInput(key, kind, value, prefix) {
  return h('input', { type: kind === 'int' ? 'number' : 'text', id: prefix + '-' + key, name: key, min: kind === 'int' ? 1 : null,
    value: value === undefined ? '' : value });
}

function showSetting(kind, v) {
  if (v === undefined || v === null || v === '') return '';
  if (kind === 'duration') return fmtGoDuration(num(v));
  return String(v);
}

// readSettings reads the inputs into a QueueGroupConfig: only the fields
// filled in (create) or changed from before (alter) are set.
function readSettings(inputs, before) {
  const cfg = {};
  for (const [key, label, kind] of settings) {
    const raw = inputs[key].value.trim();
    if (raw === '' || (before && raw === showSetting(kind, before[key]))) continue;
    if (kind === 'duration') {
      const ms = parseDuration(raw);
      if (ms === null) throw new Error(label + ': "' + raw + '" is not a duration (e.g. 30s, 5m, 1h30m)');
      cfg[key] = String(ms);
    } else if (kind === 'int') {
      if (!/^\d+$/.test(raw)) throw new Error(label + ': "' + raw + '" is not a whole number');
      cfg[key] = Number(raw);
    } else {
      cfg[key] = raw;
    }
  }
  return cfg;
}

function createForm(ctx, close) {
  const topic = h('input', { type: 'text', id: 'queue-create-topic', required: true, list: 'queue-create-topics', autocomplete: 'off' });
  const topicList = h('datalist', { id: 'queue-create-topics' });
  const name = h('input', { type: 'text', id: 'queue-create-group', required: true, autocomplete: 'off' });
  const fromEnd = h('input', { type: 'checkbox', id: 'queue-create-from-end' });
  const inputs = {};
  for (const [key, , kind] of settings) inputs[key] = settingInput(key, kind, '', 'queue-create');
  const msg = h('div', { id: 'queue-create-result' });
  const form = h('form', { class: 'card settings-form', id: 'queue-create-form' },
    h('h2', null, 'Create a queue group'),
    h('p', { class: 'muted' }, 'As logctl queue create TOPIC GROUP: empty settings take the server\'s defaults.'),
    field('Topic', topic), topicList, field('Group', name),
    h('div', null, settings.map(([key, label, , flag, hint]) => field(label + ' (' + flag + ')', inputs[key], hint))),
    h('label', null, fromEnd, ' Work only records appended from now on (--from-end)'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'queue-create-submit' }, 'Create'),
      h('button', { type: 'button', id: 'queue-create-cancel', onclick: close }, 'Cancel')),
    msg);
  call('ListTopics', {}, { signal: ctx.signal }).then(r => {
    replace(topicList, (r.topics || []).map(t => h('option', { value: t.name })));
  }, e => ctx.fail(e));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    let config;
    try {
      config = readSettings(inputs, null);
    } catch (err) {
      replace(msg, errorBox({ code: 'invalid_argument', message: err.message }));
      return;
    }
    try {
      await call('CreateQueueGroup', { topic: topic.value.trim(), group: name.value.trim(), config, fromEnd: fromEnd.checked });
      ctx.go(route(['queues', topic.value.trim(), name.value.trim()]));
    } catch (err) {
      replace(msg, errorBox(err));
    }
  });
  setTimeout(() => topic.focus(), 0);
  return form;
}

function renderQueue(ctx, topic, name) {
  const summary = h('div', { class: 'cards', id: 'queue-summary' });
  const parts = h('div', { id: 'queue-partitions' });
  const settingsBox = h('div', { id: 'queue-settings' });
  const inflightBox = h('div', { id: 'queue-inflight' });
  const result = h('div', { id: 'queue-action-result' });
  const pauseBtn = h('button', { type: 'button', id: 'queue-pause', hidden: true }, 'Pause deliveries');
  const resumeBtn = h('button', { type: 'button', id: 'queue-resume', class: 'primary', hidden: true }, 'Resume deliveries');
  const showInflight = h('input', { type: 'checkbox', id: 'queue-show-inflight', checked: ctx.query.get('inflight') === '1' });
  replace(ctx.view,
    h('p', null, link('/queues', '← Queue groups')),
    h('h1', null, 'Queue group ', h('code', null, name), ' on ', link(route(['topics', topic]), h('code', null, topic))),
    summary,
    h('div', { class: 'actions' }, pauseBtn, resumeBtn),
    result,
    historyCharts(ctx, { topic, queueGroup: name }),
    h('h2', null, 'Partitions'), parts,
    h('h2', null, 'Settings'), settingsBox,
    h('h2', null, 'In flight'),
    h('label', null, showInflight, ' List the records in flight (worker, delivery, lease; the first 10,000)'),
    inflightBox,
    h('h2', null, 'Claim and settle'),
    claimPanel(ctx, topic, name));

  const pause = async paused => {
    pauseBtn.disabled = resumeBtn.disabled = true;
    try {
      const r = await call('PauseQueueGroup', { topic, group: name, paused });
      replace(result, h('p', { class: 'ok', id: 'queue-pause-result' },
        (paused ? 'Paused' : 'Resumed') + (r.changed ? '.' : ' (it already was).') +
        (paused ? ' Leases already given keep running; acks and nacks are taken.' : '')));
      await ctx.refresh();
    } catch (e) {
      replace(result, errorBox(e));
    } finally {
      pauseBtn.disabled = resumeBtn.disabled = false;
    }
  };
  pauseBtn.addEventListener('click', () => pause(true));
  resumeBtn.addEventListener('click', () => pause(false));
  showInflight.addEventListener('change', () => { ctx.setQuery({ inflight: showInflight.checked ? '1' : '' }); ctx.refresh(); });

  // The alter form is drawn once from the first answer and redrawn only
  // after an alter, so an update does not overwrite what is being typed.
  let alterDrawn = false;
  const drawSettings = cfg => {
    const inputs = {};
    for (const [key, , kind] of settings) inputs[key] = settingInput(key, kind, showSetting(kind, cfg[key]), 'queue-alter');
    const msg = h('div', { id: 'queue-alter-result' });
    const form = h('form', { class: 'settings-form', id: 'queue-alter-form' },
      table([
        { label: 'Setting', value: s => s[1] },
        { label: 'Now', value: s => h('span', { id: 'queue-setting-' + s[0] }, s[0] === 'ageLimitMs' && !num(cfg[s[0]]) ? 'none' : showSetting(s[2], cfg[s[0]]) || '—') },
        { label: 'New value', value: s => inputs[s[0]] },
        { label: 'logctl queue alter', value: s => h('code', null, s[3]) },
        { label: '', value: s => h('small', null, s[4]) },
      ], settings),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'queue-alter-submit' }, 'Apply changes')),
      msg);
    form.addEventListener('submit', async e => {
      e.preventDefault();
      let config;
      try {
        config = readSettings(inputs, cfg);
      } catch (err) {
        replace(msg, errorBox({ code: 'invalid_argument', message: err.message }));
        return;
      }
      if (Object.keys(config).length === 0) {
        replace(msg, h('p', { class: 'muted' }, 'Nothing changed.'));
        return;
      }
      try {
        const r = await call('AlterQueueGroup', { topic, group: name, config });
        drawSettings(r.config || {});
        replace(document.getElementById('queue-alter-result'), h('p', { class: 'ok' }, 'Changed: ' + Object.keys(config).map(k => settings.find(s => s[0] === k)[1]).join(', ') + '.'));
      } catch (err) {
        replace(msg, errorBox(err));
      }
    });
    replace(settingsBox, form);
  };

  ctx.every(async () => {
    const g = await call('DescribeQueueGroup', { topic, group: name, inFlight: showInflight.checked }, { signal: ctx.signal });
    const t = totals(g);
    pauseBtn.hidden = !!g.paused;
    resumeBtn.hidden = !g.paused;
    const dlt = (g.config || {}).deadLetterTopic;
    replace(summary,
      card('State', stateTags(g, t), 'created ' + fmtTime(num(g.createdMs))),
      card('Ready', fmtNum(t.ready), ['oldest ', t.oldestReady ? duration(t.oldestReady) : '—']),
      card('In flight', fmtNum(t.inFlight), ['oldest lease ', t.oldestLease ? duration(t.oldestLease) : '—']),
      card('Delayed', fmtNum(t.delayed), fmtNum(t.deadPending) + ' waiting for the dead-letter topic'),
      card('Acked', fmtNum(t.acked), 'drain ' + (g.drainPerSec || 0).toFixed(1) + ' records/s'),
      card('Dead-lettered', fmtNum(t.deadLettered), dlt ? [link(route(['dlq', dlt]), dlt), ' holds ' + fmtNum(num(g.deadLetterRecords))] : null),
      card('Backlog', fmtNum(num(g.backlogRecords)) + ' records', [size(num(g.backlogBytes)), g.backlogBytesExact ? '' : ' (estimate)',
        '; oldest unfinished ', num(g.oldestUnfinishedAgeMs) ? duration(num(g.oldestUnfinishedAgeMs)) : '—',
        num(g.maxBacklogAgeMs) >= 0 && g.maxBacklogAgeMs !== undefined ? [' (bound ', duration(num(g.maxBacklogAgeMs)), ')'] : ' (no age bound)']),
      card('Admission refusals', fmtNum(num(g.admissionRefusals)), 'produces refused by this node'));
    replace(parts, table([
      { label: 'Partition', num: true, value: p => String(p.partition || 0) },
      { label: 'Ready', num: true, value: p => fmtNum(num(p.ready)) },
      { label: 'In flight', num: true, value: p => fmtNum(num(p.inFlight)) },
      { label: 'Delayed', num: true, value: p => fmtNum(num(p.delayed)) },
      { label: 'Acked', num: true, value: p => fmtNum(num(p.acked)) },
      { label: 'Dead-lettered', num: true, value: p => fmtNum(num(p.deadLettered)) + (num(p.deadPending) ? ' (+' + fmtNum(num(p.deadPending)) + ' pending)' : '') },
      { label: 'Done below', num: true, value: p => fmtNum(num(p.doneOffset)) },
      { label: 'End', num: true, value: p => fmtNum(num(p.endOffset)) },
      { label: 'Oldest ready', num: true, value: p => (num(p.oldestReadyAgeMs) ? duration(num(p.oldestReadyAgeMs)) : '—') },
      { label: 'Oldest lease', num: true, value: p => (num(p.oldestInFlightAgeMs) ? duration(num(p.oldestInFlightAgeMs)) : '—') },
      { label: 'Ack/s', num: true, value: p => (p.ackedPerSec || 0).toFixed(1) },
      { label: 'Nacked', num: true, value: p => fmtNum(num(p.nacked)) },
      { label: 'Expired', num: true, value: p => fmtNum(num(p.expired)) },
      { label: 'State', value: p => (p.atCap ? h('span', { class: 'tag bad' }, 'AT IN-FLIGHT CAP') : h('span', { class: 'tag ok' }, 'ok')) },
    ], g.partitions || []));
    if (!alterDrawn) {
      alterDrawn = true;
      drawSettings(g.config || {});
    }
    if (showInflight.checked) {
      const now = Date.now();
      const recs = g.inFlight || [];
      replace(inflightBox, table([
        { label: 'Partition', num: true, value: r => String(r.partition || 0) },
        { label: 'Offset', num: true, value: r => fmtNum(num(r.offset)) },
        { label: 'Worker', value: r => r.worker || '—' },
        { label: 'Delivery', num: true, value: r => String(r.delivery || 0) },
        { label: 'Claimed', value: r => fmtTime(num(r.deliveredMs)) },
        { label: 'Lease until', value: r => fmtTime(num(r.leaseUntilMs)) + ' (' + (num(r.leaseUntilMs) > now ? 'in ' + fmtDuration(num(r.leaseUntilMs) - now) : 'ended') + ')' },
        { label: 'Extensions', num: true, value: r => fmtNum(r.extensions || 0) },
      ], recs, { empty: 'Nothing in flight.' }));
      inflightBox.firstChild.id = 'queue-inflight-table';
    } else {
      replace(inflightBox);
    }
  });
}

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value),
    sub ? h('div', { class: 'sub' }, sub) : null);
}
