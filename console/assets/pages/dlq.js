// @ts-check
import { call, num } from '../api.js';
import { h, replace, table, link, route, fmtNum, fmtTime, duration, errorBox, field, b64bytes, bytesB64, text, hexdump, prettyJSON } from '../ui.js';

// Dead letters (docs/console.md, "Dead letters"): a queue group's
// dead-letter topics, their records with the reason, error, origin and
// attempts the server wrote into the logd-dlq-* headers, and redrive jobs,
// which run on the cluster's leader (StartRedrive and friends). The list
// is ListDeadLetters, which selects with a redrive job's own filter, so the
// page shows what a redrive moves; records are moved only by a job:
// nothing is produced from the browser.

// The reasons a dead letter can carry (docs/guide.md, "Work queues").
const reasons = ['rejected', 'max_deliveries', 'deadline_exceeded', 'expired', 'invalid_deadline'];

// listLimit bounds the dead letters one view shows; narrow with the
// filters or the offset range beyond it.
const listLimit = 2000;

export default {
  path: 'dlq',
  nav: 'Dead letters',
  async render(ctx) {
    const [first, second] = ctx.params;
    if (first === undefined) return renderTopics(ctx);
    if (first === 'jobs') return second === undefined ? renderJobs(ctx) : renderJob(ctx, second);
    return renderTopic(ctx, first);
  },
};

// renderTopics lists the dead-letter topics: each queue group's, as
// logctl dlq finds it (the group's dead-letter-topic setting), with what
// it holds; and topics named as groups name them by default
// (TOPIC.GROUP.dlq) that no group names any more. Another topic is opened
// by name.
async function renderTopics(ctx) {
  const list = h('div', { id: 'dlq-topics' });
  const name = h('input', { type: 'text', id: 'dlq-open-name', placeholder: 'orders.workers.dlq', required: true, autocomplete: 'off', 'data-filter': '' });
  const open = h('form', { class: 'toolbar', id: 'dlq-open' },
    field('Dead-letter topic', name, 'Any topic of dead letters, by name.'),
    h('button', { type: 'submit' }, 'Open'));
  open.addEventListener('submit', e => { e.preventDefault(); ctx.go(route(['dlq', name.value.trim()])); });
  replace(ctx.view, h('h1', null, 'Dead letters'),
    h('p', null, link('/dlq/jobs', 'Redrive jobs'), ' · dead letters are redriven by a job the leader runs (logctl dlq redrive).'),
    list, open);
  ctx.every(async () => {
    const [{ groups = [] }, { topics = [] }] = await Promise.all([
      call('ListQueueGroups', {}, { signal: ctx.signal }),
      call('ListTopics', {}, { signal: ctx.signal }),
    ]);
    /**
     * A row per dead-letter topic; one no group names has no topic, group
     * or total.
     * @type {{name: string, topic?: string, group?: string, held: number, paused?: boolean, total: number | null}[]}
     */
    const rows = groups.filter(g => g.config && g.config.deadLetterTopic).map(g => ({
      name: g.config.deadLetterTopic, topic: g.topic, group: g.group, held: num(g.deadLetterRecords), paused: !!g.paused,
      total: (g.partitions || []).reduce((s, p) => s + num(p.deadLettered), 0),
    }));
    const named = new Set(rows.map(r => r.name));
    const orphans = topics.filter(t => t.name.endsWith('.dlq') && !named.has(t.name));
    for (const t of await Promise.all(orphans.map(t => call('DescribeTopic', { name: t.name }, { signal: ctx.signal })))) {
      const held = (t.partitions || []).reduce((s, p) => s + num(p.endOffset) - num(p.logStartOffset), 0);
      rows.push({ name: t.topic.name, held, total: null });
    }
    replace(list, table([
      { label: 'Dead-letter topic', value: r => link(route(['dlq', r.name]), r.name) },
      { label: 'Queue group', value: r => r.group ? link(route(['queues', r.topic, r.group]), r.topic + ' / ' + r.group) : h('span', { class: 'muted' }, 'none names it') },
      { label: 'Held', num: true, value: r => h('span', { class: r.held > 0 ? 'bad' : null }, fmtNum(r.held)) },
      { label: 'Dead-lettered in all', num: true, value: r => r.total === null ? '—' : fmtNum(r.total) },
      { label: 'Group state', value: r => r.group ? (r.paused ? h('span', { class: 'tag warn' }, 'paused') : 'running') : '—' },
    ], rows, { class: 'dlq-topics', empty: 'No queue group, and no topic named TOPIC.GROUP.dlq.' }));
  }, 5000);
}

// filterOf reads the page's filter from its URL query.
function filterOf(q) {
  return {
    reasons: (q.get('reason') || '').split(',').filter(Boolean),
    key: q.get('key') || '',
    hasKey: q.has('key'),
    since: q.get('since') || '',
    until: q.get('until') || '',
    from: q.get('from') || '',
    to: q.get('to') || '',
  };
}

// whenMs reads an RFC 3339 time or a duration before now (30m, 2h, 1d),
// as logctl's --since and --until do; 0 for none, NaN for unreadable.
function whenMs(s, now = Date.now()) {
  if (!s) return 0;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(s.trim());
  if (m) return now - Number(m[1]) * { ms: 1, s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[m[2]];
  const t = Date.parse(s);
  return Number.isNaN(t) ? NaN : t;
}

// fromAPI is a dead letter of a ListDeadLetters answer, ready to show.
function fromAPI(x) {
  let history = null;
  if (x.history) {
    try { history = JSON.parse(x.history); } catch { history = null; }
  }
  return {
    partition: x.partition || 0, offset: num(x.offset), reason: x.reason || '', error: x.error || '',
    originTopic: x.originTopic || '', originPartition: x.originPartition || 0, originOffset: num(x.originOffset),
    group: x.group || '', deliveries: x.deliveries || 0, firstDelivery: num(x.firstDeliveryMs), lastDelivery: num(x.lastDeliveryMs),
    deadLettered: num(x.deadLetteredMs), idempotencyKey: x.idempotencyKey || '', redrives: x.redrives || 0,
    history, historyText: x.history || '', hasKey: x.key !== undefined, key: b64bytes(x.key), value: b64bytes(x.value),
    headers: (x.headers || []).map(hd => ({ key: hd.key, value: b64bytes(hd.value) })),
    // The redrive job that moved it, or will (docs/guide.md, "Redriven
    // dead letters"); null when none did.
    redrive: x.redriveJob ? { job: x.redriveJob, pending: !!x.redrivePending, at: num(x.redriveMs) } : null,
  };
}

// redriveText is a dead letter's redrive state, as logctl dlq list says it.
function redriveText(d) {
  if (!d.redrive) return '—';
  if (d.redrive.pending) return 'pending in job ' + d.redrive.job;
  return 'redriven by job ' + d.redrive.job + ' at ' + fmtTime(d.redrive.at);
}

// filterRequest is the page's filter as the fields ListDeadLetters and
// StartRedrive share.
function filterRequest(f, since, until) {
  const req = {};
  if (f.reasons.length) req.reasons = f.reasons;
  if (f.hasKey) { req.key = bytesB64(f.key); req.hasKey = true; }
  if (since) req.sinceMs = String(since);
  if (until) req.untilMs = String(until);
  if (f.from) req.fromOffset = String(f.from);
  if (f.to) req.toOffset = String(f.to);
  return req;
}

const refOf = d => d.partition + '/' + d.offset;

function keyText(d) {
  return d.hasKey ? JSON.stringify(text(d.key)) : 'null';
}

// renderTopic lists one dead-letter topic's records with filters, an
// inspector, and the two redrives.
async function renderTopic(ctx, topic) {
  const f = filterOf(ctx.query);
  const selected = new Set();
  let shown = [];
  let inspected = ctx.query.get('sel') || '';

  const reasonSel = h('select', { id: 'dlq-reason', 'aria-label': 'Reason' },
    h('option', { value: '' }, 'any reason'),
    reasons.map(r => h('option', { value: r, selected: f.reasons.length === 1 && f.reasons[0] === r }, r)));
  const keyIn = h('input', { type: 'text', id: 'dlq-key', value: f.key, placeholder: 'exact key', 'data-filter': '', autocomplete: 'off' });
  const sinceIn = h('input', { type: 'text', id: 'dlq-since', value: f.since, placeholder: '1h or 2026-11-29T09:00:00Z', autocomplete: 'off' });
  const untilIn = h('input', { type: 'text', id: 'dlq-until', value: f.until, placeholder: 'time or duration ago', autocomplete: 'off' });
  const fromIn = h('input', { type: 'number', id: 'dlq-from', value: f.from, min: 0, placeholder: '0', class: 'narrow' });
  const toIn = h('input', { type: 'number', id: 'dlq-to', value: f.to, min: 0, placeholder: 'end', class: 'narrow' });
  const filterForm = h('form', { class: 'toolbar', id: 'dlq-filter' },
    field('Reason', reasonSel), field('Key', keyIn), field('Since', sinceIn), field('Until', untilIn),
    field('From offset', fromIn), field('To offset', toIn),
    h('button', { type: 'submit', class: 'primary' }, 'Filter'),
    h('button', { type: 'button', id: 'dlq-clear', onclick: () => ctx.go(route(['dlq', topic])) }, 'Clear'));
  filterForm.addEventListener('submit', e => {
    e.preventDefault();
    const q = { reason: reasonSel.value || (f.reasons.length > 1 ? f.reasons.join(',') : ''), since: sinceIn.value.trim(),
      until: untilIn.value.trim(), from: fromIn.value, to: toIn.value, sel: inspected };
    if (keyIn.value !== '') q.key = keyIn.value;
    ctx.go(route(['dlq', topic], q));
  });

  const summary = h('p', { id: 'dlq-summary', class: 'muted' }, 'Reading…');
  const listBox = h('div', { id: 'dlq-list' });
  const detail = h('div', { id: 'dlq-detail' });
  const actions = h('div', { class: 'actions', id: 'dlq-actions' });
  const formBox = h('div', { id: 'dlq-redrive' });
  const jobsBox = h('div', { id: 'dlq-topic-jobs' });
  const selectedBtn = h('button', { type: 'button', id: 'dlq-redrive-selected', disabled: true,
    onclick: () => openRedrive(ctx, topic, f, formBox, shown.filter(d => selected.has(refOf(d))), true) },
  'Redrive selected (0)');
  const filteredBtn = h('button', { type: 'button', id: 'dlq-redrive-filtered', onclick: () => openRedrive(ctx, topic, f, formBox, shown, false) },
    'Redrive filtered…');
  replace(actions, filteredBtn, selectedBtn);
  replace(ctx.view,
    h('h1', null, 'Dead letters in ', h('code', null, topic)),
    h('p', null, link('/dlq', 'All dead-letter topics'), ' · ', link(route(['dlq', 'jobs']), 'Redrive jobs')),
    filterForm, summary, actions, formBox, listBox, detail, h('h2', null, 'Redrive jobs of this topic'), jobsBox);

  const since = whenMs(f.since), until = whenMs(f.until);
  if (Number.isNaN(since) || Number.isNaN(until)) {
    replace(summary, errorBox({ code: 'invalid_argument', message: 'since/until: want an RFC 3339 time or a duration such as 30m, 2h, 1d' }));
    return;
  }
  const updateSelected = () => {
    selectedBtn.textContent = 'Redrive selected (' + selected.size + ')';
    selectedBtn.disabled = selected.size === 0;
  };
  const showDetail = () => {
    const d = shown.find(x => refOf(x) === inspected);
    if (!d) { detail.replaceChildren(); return; }
    replace(detail, inspect(d, ctx.query.get('view') || 'text', v => {
      const q = Object.fromEntries(ctx.query);
      q.view = v;
      ctx.setQuery(q);
      showDetail();
    }));
  };
  ctx.every(async () => {
    const resp = await call('ListDeadLetters', { topic, maxRecords: listLimit, ...filterRequest(f, since, until) }, { signal: ctx.signal });
    shown = (resp.deadLetters || []).map(fromAPI);
    for (const s of [...selected]) if (!shown.some(d => refOf(d) === s)) selected.delete(s);
    updateSelected();
    replace(summary, fmtNum(shown.length) + ' dead letters match, of ' + fmtNum(num(resp.total)) + ' records',
      resp.truncated ? ' (the first ' + fmtNum(shown.length) + ' of the ' + fmtNum(num(resp.scanned)) + ' records read: narrow with the filters or the offset range)' : '');
    const all = h('input', { type: 'checkbox', id: 'dlq-select-all', 'aria-label': 'Select all shown',
      checked: shown.length > 0 && selected.size === shown.length,
      onchange: e => { for (const d of shown) e.target.checked ? selected.add(refOf(d)) : selected.delete(refOf(d));
        for (const c of listBox.querySelectorAll('input.dlq-pick')) c.checked = e.target.checked; updateSelected(); } });
    const cols = [
      { label: all, value: d => h('input', { type: 'checkbox', class: 'dlq-pick', 'aria-label': 'Select ' + refOf(d), dataset: { ref: refOf(d) },
        checked: selected.has(refOf(d)), onchange: e => { e.target.checked ? selected.add(refOf(d)) : selected.delete(refOf(d)); updateSelected(); } }) },
      { label: 'Offset', value: d => h('button', { type: 'button', class: 'linkish dlq-inspect', dataset: { ref: refOf(d) }, title: 'Inspect',
        onclick: () => { inspected = refOf(d); const q = Object.fromEntries(ctx.query); q.sel = inspected; ctx.setQuery(q); showDetail(); } }, refOf(d)) },
      { label: 'Dead-lettered', value: d => fmtTime(d.deadLettered) },
      { label: 'Reason', value: d => h('span', { class: 'tag bad' }, d.reason) },
      { label: 'Error', value: d => h('span', { class: 'clip', title: d.error || '' }, d.error || '—') },
      { label: 'Origin', value: d => d.originTopic + '/' + d.originPartition + '@' + d.originOffset },
      { label: 'Deliveries', num: true, value: d => String(d.deliveries || 0) },
      { label: 'Redrives', num: true, value: d => String(d.redrives) },
      { label: 'State', value: d => h('span', { class: d.redrive ? 'tag ok dlq-state' : 'muted dlq-state' }, redriveText(d)) },
      { label: 'Key', value: d => h('code', null, keyText(d)) },
    ];
    replace(listBox, table(cols, shown, { class: 'dlq-letters', empty: 'No dead letters match.',
      rowProps: d => ({ class: refOf(d) === inspected ? 'picked' : null }) }));
    showDetail();
    const { jobs = [] } = await call('ListRedrives', { deadLetterTopic: topic }, { signal: ctx.signal });
    replace(jobsBox, jobsTable(ctx, jobs.slice().reverse()));
  }, 5000);
}

// inspect shows one dead letter: what it is, its value (text, JSON or
// hex), its headers and its attempts.
function inspect(d, view, setView) {
  const views = ['text', 'json', 'hex'].map(v => h('button', { type: 'button', class: v === view ? 'primary' : null, id: 'dlq-view-' + v,
    'aria-pressed': v === view ? 'true' : 'false', onclick: () => setView(v) }, v.toUpperCase()));
  let value;
  if (view === 'hex') value = h('pre', { class: 'value', id: 'dlq-value' }, hexdump(d.value));
  else if (view === 'json') {
    const j = prettyJSON(d.value);
    value = j === null ? h('p', { class: 'muted', id: 'dlq-value' }, 'Not JSON.') : h('pre', { class: 'value', id: 'dlq-value' }, j);
  } else value = h('pre', { class: 'value', id: 'dlq-value' }, text(d.value));
  const facts = [
    ['Dead letter', d.partition + '/' + d.offset],
    ['Reason', d.reason], ['Last error', d.error || '—'],
    ['Origin', d.originTopic + ' partition ' + d.originPartition + ' offset ' + d.originOffset],
    ['Queue group', d.group || '—'], ['Deliveries', String(d.deliveries || 0)], ['Redrives before', String(d.redrives)], ['Redrive', redriveText(d)],
    ['First delivery', fmtTime(d.firstDelivery)], ['Last delivery', fmtTime(d.lastDelivery)], ['Dead-lettered', fmtTime(d.deadLettered)],
    ['Idempotency key', d.idempotencyKey || '—'], ['Key', keyText(d)],
  ];
  return h('section', { class: 'card dlq-inspect-card' },
    h('h2', null, 'Dead letter ', d.partition + '/' + d.offset),
    h('div', { class: 'dlq-cols' },
      h('div', null,
        table([{ label: 'Field', value: r => r[0] }, { label: 'Value', value: r => r[1] }], facts, { class: 'facts' })),
      h('div', null,
        h('h3', null, 'Attempts'), history(d),
        h('h3', null, 'Value'), h('div', { class: 'toolbar' }, views), value,
        h('h3', null, 'Headers'),
        table([{ label: 'Key', value: x => h('code', null, x.key) }, { label: 'Value', value: x => text(x.value) }], d.headers,
          { empty: 'No headers of its own.', class: 'dlq-headers' }))));
}

// history lists a dead letter's attempts from its logd-dlq-history
// header, one line each, oldest first.
function history(d) {
  if (!d.history) {
    return h('p', { class: 'muted', id: 'dlq-history' }, d.historyText ? 'The history header is not readable: ' + d.historyText
      : 'No attempt history (dead-lettered before feature level 6).');
  }
  const hs = d.history;
  const notes = [];
  if (hs.previous_unreadable) notes.push(h('li', { class: 'muted' }, 'The history before its last redrive was unreadable.'));
  if (hs.dropped_attempts) notes.push(h('li', { class: 'muted' }, hs.dropped_attempts + ' older attempts not kept.'));
  const lines = (hs.attempts || []).map(a => {
    const claimed = Date.parse(a.claimed) || 0, ended = Date.parse(a.ended) || 0;
    let err = a.error || '';
    if (a.error_dropped) err = '(error text dropped: the group\'s history budget)';
    else if (a.error_truncated) err += ' (cut at 1 KiB)';
    return h('li', { class: 'attempt' },
      h('strong', null, '#' + a.delivery + (a.redrive ? ' redrive ' + a.redrive : '')), ' ',
      h('span', { class: 'tag' + (a.outcome === 'acked' ? ' ok' : ' bad') }, a.outcome), ' ',
      'claimed ' + fmtTime(claimed), a.worker ? ' by ' + a.worker : '',
      ended && claimed ? [', held ', duration(ended - claimed)] : '',
      a.extensions ? ', extended ' + a.extensions + '×' : '',
      err ? ' — ' + err : '');
  });
  return h('ol', { class: 'history', id: 'dlq-history' }, notes, lines);
}

// openRedrive shows the redrive form for letters, the dead letters the
// page shows (filtered) or those ticked (named: the job names them). Its
// preview is logctl dlq redrive --dry-run's: how many the loop guard
// would refuse.
function openRedrive(ctx, topic, f, box, letters, named) {
  const records = named ? letters.map(d => ({ partition: d.partition, offset: String(d.offset) })) : null;
  const count = letters.length;
  const targetSel = h('select', { id: 'redrive-target-kind' }, h('option', { value: 'origin' }, 'each record\'s origin'), h('option', { value: 'topic' }, 'a topic'));
  const targetIn = h('input', { type: 'text', id: 'redrive-target', placeholder: 'topic', autocomplete: 'off', disabled: true });
  targetSel.addEventListener('change', () => { targetIn.disabled = targetSel.value !== 'topic'; });
  const rateIn = h('input', { type: 'number', id: 'redrive-rate', value: '50', min: 0, step: 'any', class: 'narrow' });
  const maxIn = h('input', { type: 'number', id: 'redrive-max', value: '3', min: 1, class: 'narrow' });
  const err = h('div', { id: 'redrive-error' });
  const preview = h('p', { id: 'redrive-preview' });
  const showPreview = () => {
    const max = Number(maxIn.value) || 3;
    const refused = letters.filter(d => d.redrives >= max).length;
    replace(preview, h('strong', null, fmtNum(count) + ' selected, ' + fmtNum(count - refused) + ' would be redriven, ' +
      fmtNum(refused) + ' refused by the loop guard'), named ? '.' : ' (of the dead letters read here).');
  };
  maxIn.addEventListener('input', showPreview);
  showPreview();
  const what = records
    ? records.length + ' selected dead letter' + (records.length === 1 ? '' : 's')
    : 'the dead letters the filter selects (' + fmtNum(count || 0) + ' shown here; the job reads up to the end offsets as they are when it starts)';
  const form = h('form', { class: 'card', id: 'redrive-form' },
    h('h2', null, records ? 'Redrive selected' : 'Redrive filtered'),
    h('p', null, 'Moves ', what, ' of ', h('code', null, topic), ' back, as a job on the leader (logctl dlq redrive).'),
    filterText(f, !!records), preview,
    field('Target', targetSel), field('Topic', targetIn, 'Routed by key.'),
    field('Rate (records/s)', rateIn, '0: unbounded'), field('Max redrives', maxIn, 'The loop guard: refuse records redriven this often.'),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', class: 'primary', id: 'redrive-start' }, 'Start redrive…'),
      h('button', { type: 'button', id: 'redrive-cancel', onclick: () => box.replaceChildren() }, 'Cancel')),
    err);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    err.replaceChildren();
    const req = { deadLetterTopic: topic, rate: Number(rateIn.value || 0), maxRedrives: Number(maxIn.value || 0) };
    if (targetSel.value === 'topic') {
      if (!targetIn.value.trim()) { replace(err, errorBox({ code: 'invalid_argument', message: 'name the target topic' })); return; }
      req.target = targetIn.value.trim();
    }
    Object.assign(req, filterRequest(f, whenMs(f.since), whenMs(f.until)));
    if (records) req.records = records;
    const ok = await confirmStart(topic, what, req);
    if (!ok) return;
    try {
      const { job } = await call('StartRedrive', req, { signal: ctx.signal });
      ctx.go(route(['dlq', 'jobs', job.id]));
    } catch (x) {
      replace(err, errorBox(x));
    }
  });
  replace(box, form);
}

// filterText says what the job's filter adds: for named dead letters
// only what narrows them further (the job moves the named ones the filter
// selects).
function filterText(f, named) {
  const parts = [];
  if (f.reasons.length) parts.push('reason ' + f.reasons.join(' or '));
  if (f.hasKey) parts.push('key ' + JSON.stringify(f.key));
  if (f.since) parts.push('since ' + f.since);
  if (f.until) parts.push('until ' + f.until);
  if (f.from || f.to) parts.push('offsets [' + (f.from || 0) + ', ' + (f.to || 'end') + ')');
  if (named) {
    return h('p', { class: 'muted', id: 'redrive-filter' }, parts.length
      ? 'Of those, only the ones the filter selects: ' + parts.join(', ') + '.'
      : 'Only the selected dead letters; no filter narrows them.');
  }
  return h('p', { class: 'muted', id: 'redrive-filter' }, 'Filter: ' + (parts.length ? parts.join(', ') : 'none (every dead letter)') + '.');
}

// confirmStart asks before a job starts; resolves true to go on.
function confirmStart(topic, what, req) {
  return new Promise(resolve => {
    const dlg = h('dialog', { class: 'confirm', id: 'redrive-confirm' },
      h('form', { method: 'dialog' },
        h('h2', null, 'Start a redrive?'),
        h('p', null, 'Redrive ', what, ' of ', h('code', null, topic), ' to ', req.target ? h('code', null, req.target) : 'their origin topics',
          ' at ', req.rate ? req.rate + ' records/s' : 'no rate bound', ', refusing records redriven ', String(req.maxRedrives || 3), ' times already.'),
        h('p', null, 'Redriven records are new records: their queue group delivers them again.'),
        h('div', { class: 'actions' },
          h('button', { type: 'button', id: 'redrive-confirm-cancel', onclick: () => dlg.close() }, 'Cancel'),
          h('button', { type: 'submit', class: 'danger', id: 'redrive-confirm-ok', value: 'ok' }, 'Start redrive'))));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue === 'ok'); });
    document.body.appendChild(dlg);
    dlg.showModal();
  });
}

function targetOf(j) {
  return j.spec && j.spec.target ? j.spec.target : '(origin)';
}

// jobsTable lists redrive jobs with their progress and a stop for each
// running one.
function jobsTable(ctx, jobs) {
  return table([
    { label: 'Job', value: j => link(route(['dlq', 'jobs', j.id]), j.id) },
    { label: 'State', value: j => stateTag(j) },
    { label: 'Dead letters', value: j => link(route(['dlq', j.spec.deadLetterTopic]), j.spec.deadLetterTopic) },
    { label: 'Target', value: targetOf },
    { label: 'Selected', value: j => (j.spec.records || []).length ? fmtNum(j.spec.records.length) + ' named' : 'by filter' },
    { label: 'Scanned', num: true, value: j => fmtNum(num(j.progress && j.progress.scanned)) + ' / ' + fmtNum(num(j.total)) },
    { label: 'Redriven', num: true, value: j => fmtNum(num(j.progress && j.progress.redriven)) },
    { label: 'Refused', num: true, value: j => fmtNum(num(j.progress && j.progress.refused)) },
    { label: 'Started', value: j => fmtTime(num(j.createdMs)) },
    { label: 'By', value: j => j.principal || '—' },
    { label: '', value: j => j.state === 'running' ? stopButton(ctx, j) : null },
  ], jobs, { class: 'redrive-jobs', empty: 'No redrive jobs.' });
}

function stateTag(j) {
  const cls = { running: 'warn', done: 'ok', failed: 'bad', stopped: '' }[j.state] || '';
  return h('span', { class: 'tag ' + cls + ' job-state' }, j.state);
}

function stopButton(ctx, j) {
  return h('button', { type: 'button', class: 'danger redrive-stop', dataset: { id: j.id }, onclick: async () => {
    if (!await confirmStop(j.id)) return;
    try {
      await call('StopRedrive', { id: j.id }, { signal: ctx.signal });
      await ctx.refresh();
    } catch (e) {
      ctx.fail(e);
    }
  } }, 'Stop');
}

function confirmStop(id) {
  return new Promise(resolve => {
    const dlg = h('dialog', { class: 'confirm', id: 'stop-confirm' },
      h('form', { method: 'dialog' },
        h('h2', null, 'Stop ' + id + '?'),
        h('p', null, 'The job stops after the batch in hand; what it redrove stays redriven. A new job can go on from the dead letters left.'),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => dlg.close() }, 'Cancel'),
          h('button', { type: 'submit', class: 'danger', id: 'stop-confirm-ok', value: 'ok' }, 'Stop job'))));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue === 'ok'); });
    document.body.appendChild(dlg);
    dlg.showModal();
  });
}

// renderJobs lists every redrive job kept (running, and the latest ended).
async function renderJobs(ctx) {
  const box = h('div', { id: 'redrive-jobs' });
  replace(ctx.view, h('h1', null, 'Redrive jobs'), h('p', null, link('/dlq', 'Dead-letter topics'), ' · logctl dlq redrive list'), box);
  ctx.every(async () => {
    const { jobs = [] } = await call('ListRedrives', {}, { signal: ctx.signal });
    replace(box, jobsTable(ctx, jobs.slice().reverse()));
  });
}

// renderJob follows one job: state, counters, a bar and the measured
// rate, its position per partition, and a stop.
async function renderJob(ctx, id) {
  const box = h('div', { id: 'redrive-job' });
  replace(ctx.view, h('h1', null, 'Redrive ', h('code', null, id)), h('p', null, link('/dlq/jobs', 'All redrive jobs')), box);
  let last = null;
  ctx.every(async () => {
    const { job: j } = await call('DescribeRedrive', { id }, { signal: ctx.signal });
    const p = j.progress || {};
    const now = { t: Date.now(), redriven: num(p.redriven) };
    const rate = last && now.t > last.t ? (now.redriven - last.redriven) * 1000 / (now.t - last.t) : 0;
    last = now;
    const total = num(j.total), scanned = num(p.scanned);
    const sp = j.spec || {};
    const cards = [
      ['State', stateTag(j), j.error || ''],
      ['Scanned', fmtNum(scanned) + ' / ' + fmtNum(total), total ? Math.floor(scanned * 100 / total) + '%' : ''],
      ['Redriven', fmtNum(num(p.redriven)), fmtNum(num(p.bytes)) + ' bytes'],
      ['Duplicates', fmtNum(num(p.duplicates)), 'written before, not again'],
      ['Refused', fmtNum(num(p.refused)), 'by the loop guard'],
      ['Skipped', fmtNum(num(p.skipped)), 'by the filter'],
      ['Rate', j.state === 'running' ? rate.toFixed(1) + '/s' : '—', 'bound ' + (sp.rate ? sp.rate + '/s' : 'none')],
    ].map(([label, value, sub]) => h('div', { class: 'card' }, h('div', { class: 'label' }, label),
      h('div', { class: 'value', id: 'job-' + label.toLowerCase() }, value), sub ? h('div', { class: 'sub' }, sub) : null));
    const spec = [
      ['Dead-letter topic', link(route(['dlq', sp.deadLetterTopic]), sp.deadLetterTopic)],
      ['Target', targetOf(j)],
      ['Reasons', (sp.reasons || []).join(', ') || 'any'],
      ['Key', sp.hasKey ? JSON.stringify(text(b64bytes(sp.key))) : 'any'],
      ['Dead-lettered', (num(sp.sinceMs) ? 'from ' + fmtTime(num(sp.sinceMs)) : '') + (num(sp.untilMs) ? ' before ' + fmtTime(num(sp.untilMs)) : '') || 'any time'],
      ['Offsets', '[' + num(sp.fromOffset) + ', ' + (num(sp.toOffset) || 'end') + ')'],
      ['Named records', (sp.records || []).map(r => (r.partition || 0) + '/' + num(r.offset)).join(', ') || 'none (the filter selects)'],
      ['Max redrives', String(sp.maxRedrives || 3)],
      ['Position', (j.position || []).map((pos, i) => i + ': ' + num(pos) + ' / ' + num((j.endOffsets || [])[i])).join(', ')],
      ['Position group', j.positionGroup],
      ['Started', fmtTime(num(j.createdMs)) + (j.principal ? ' by ' + j.principal : '')],
      ['Updated', fmtTime(num(j.updatedMs))],
    ];
    replace(box,
      h('progress', { class: 'progress', id: 'job-progress', max: Math.max(total, 1), value: scanned }),
      h('div', { class: 'cards' }, cards),
      j.state === 'running' ? h('div', { class: 'actions' }, stopButton(ctx, j)) : null,
      h('h2', null, 'Job'),
      table([{ label: 'Field', value: r => r[0] }, { label: 'Value', value: r => r[1] }], spec, { class: 'facts' }));
  }, 1000);
}
