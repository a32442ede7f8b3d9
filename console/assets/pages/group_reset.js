// @ts-check
import { call, num } from '../api.js';
import { h, replace, table, link, route, fmtNum, field, errorBox, confirmTyped, parseDuration } from '../ui.js';

// The offset reset page (docs/console.md, "Offset reset"): the targets of
// logctl group reset-offsets, a dry-run plan from the server, and an
// explicit execute that applies exactly the plan shown (its new offsets,
// as logctl's --from-file does). The chosen target is kept in the URL.

const strategies = [
  ['to-earliest', 'Earliest (log start)', '--to-earliest'],
  ['to-latest', 'Latest (skip everything)', '--to-latest'],
  ['to-offset', 'To offset', '--to-offset N'],
  ['to-datetime', 'To date and time', '--to-datetime T'],
  ['by-duration', 'By duration (now minus D)', '--by-duration D'],
  ['shift-by', 'Shift by N records', '--shift-by ±N'],
  ['from-plan', 'From a saved plan (JSON)', '--from-file F'],
];

export function renderReset(ctx, name) {
  const q = ctx.query;
  const strategy = h('select', { id: 'reset-strategy' },
    strategies.map(([v, label]) => h('option', { value: v }, label)));
  strategy.value = strategies.some(s => s[0] === q.get('strategy')) ? q.get('strategy') : 'to-earliest';
  const allTopics = h('input', { type: 'checkbox', id: 'reset-all-topics', checked: !q.get('topics') });
  const topics = h('input', { type: 'text', id: 'reset-topics', value: q.get('topics') || '', placeholder: 'orders orders2:0,1', size: 40 });
  const offset = h('input', { type: 'number', id: 'reset-offset', min: 0, value: q.get('offset') || '' });
  const datetime = h('input', { type: 'text', id: 'reset-datetime', value: q.get('datetime') || '', placeholder: '2026-01-02T15:04:05Z', size: 28 });
  const duration = h('input', { type: 'text', id: 'reset-duration', value: q.get('duration') || '', placeholder: '1h30m', size: 10 });
  const shift = h('input', { type: 'number', id: 'reset-shift', value: q.get('shift') || '' });
  const planInput = h('textarea', { id: 'reset-plan-input', rows: 6, cols: 80, placeholder: '{"group": "…", "partitions": [{"topic": "orders", "partition": 0, "new_offset": 0}]}' });
  const params = {
    'to-offset': field('Offset', offset, 'the next offset to read'),
    'to-datetime': field('Time (RFC 3339)', datetime, 'the first record at or after it'),
    'by-duration': field('Duration', duration, 'e.g. 1h, 30m, 1h30m: the first record at or after now minus it'),
    'shift-by': field('Shift', shift, 'records; negative moves back'),
    'from-plan': field('Plan', planInput, 'as logctl group reset-offsets -o json writes it, or the JSON below a plan'),
  };
  const scope = h('div', { id: 'reset-scope', class: 'toolbar' },
    h('label', null, allTopics, ' All topics of the group (--all-topics)'), ' ',
    field('Topics', topics, 'T or T:0,1, separated by spaces (--topic, repeatable)'));
  const paramBox = h('div', { id: 'reset-params' });
  const planBtn = h('button', { type: 'submit', class: 'primary', id: 'reset-plan-btn' }, 'Plan (dry run)');
  const execBtn = h('button', { type: 'button', class: 'danger', id: 'reset-execute', disabled: true }, 'Execute this plan…');
  const form = h('form', { id: 'reset-form' },
    h('div', { class: 'toolbar' }, field('Target', strategy)), paramBox, scope,
    h('div', { class: 'actions' }, planBtn, execBtn));
  const out = h('div', { id: 'reset-plan' });
  const result = h('div', { id: 'reset-result' });
  const topicsHint = h('p', { class: 'muted', id: 'reset-group-topics' });
  replace(ctx.view,
    h('p', null, link(route(['groups', name]), '← Group ' + name)),
    h('h1', null, 'Reset offsets of ', h('code', null, name)),
    h('p', { class: 'muted' }, 'Plan first: the plan is computed by the node and nothing changes. Execute applies exactly the offsets of the plan shown; ' +
      'live members are fenced, re-join and continue at the new offsets.'),
    topicsHint, form, out, result);

  // The plan shown, and the request that made it; any change of the form
  // withdraws it, so Execute always applies what is on the screen.
  let shown = null;
  const withdraw = () => {
    if (!shown) return;
    shown = null;
    execBtn.disabled = true;
    replace(out, h('p', { class: 'muted' }, 'The target changed: plan again.'));
  };
  const layout = () => {
    replace(paramBox, params[strategy.value] || null);
    scope.hidden = strategy.value === 'from-plan';
    topics.disabled = allTopics.checked;
  };
  strategy.addEventListener('change', () => { layout(); withdraw(); remember(); });
  allTopics.addEventListener('change', () => { layout(); withdraw(); remember(); });
  for (const el of [topics, offset, datetime, duration, shift, planInput]) el.addEventListener('input', () => { withdraw(); remember(); });
  layout();

  const remember = () => ctx.setQuery({
    strategy: strategy.value,
    topics: allTopics.checked ? '' : topics.value.trim(),
    offset: strategy.value === 'to-offset' ? offset.value : '',
    datetime: strategy.value === 'to-datetime' ? datetime.value : '',
    duration: strategy.value === 'by-duration' ? duration.value : '',
    shift: strategy.value === 'shift-by' ? shift.value : '',
  });

  // request builds the ResetGroupOffsets request from the form, or throws
  // a message saying what is missing.
  const request = () => {
    const req = { group: name };
    const s = strategy.value;
    if (s === 'from-plan') {
      let plan;
      try { plan = JSON.parse(planInput.value); } catch { throw new Error('the plan is not JSON'); }
      const ps = Array.isArray(plan) ? plan : plan.partitions;
      if (!Array.isArray(ps) || ps.length === 0) throw new Error('the plan has no partitions');
      if (plan.group && plan.group !== name) throw new Error('the plan is for group ' + plan.group + ', not ' + name);
      req.strategy = 'explicit';
      req.offsets = ps.map(p => ({ topic: p.topic, partition: p.partition || 0, offset: String(p.new_offset ?? p.newOffset ?? p.offset) }));
      return req;
    }
    req.strategy = s;
    if (s === 'to-offset') {
      if (offset.value === '' || Number(offset.value) < 0) throw new Error('give an offset (not negative)');
      req.offset = String(Math.trunc(Number(offset.value)));
    } else if (s === 'to-datetime') {
      const t = Date.parse(datetime.value.trim());
      if (!/^\d{4}-\d\d-\d\dT/.test(datetime.value.trim()) || Number.isNaN(t)) throw new Error('give an RFC 3339 time, e.g. 2026-01-02T15:04:05Z');
      req.timestampMs = String(t);
    } else if (s === 'by-duration') {
      const d = parseDuration(duration.value);
      if (d === null) throw new Error('give a duration such as 1h, 30m or 1h30m');
      req.durationMs = String(d);
    } else if (s === 'shift-by') {
      if (shift.value === '') throw new Error('give a number of records');
      req.shiftBy = String(Math.trunc(Number(shift.value)));
    }
    if (allTopics.checked) {
      req.allTopics = true;
    } else {
      req.topics = parseTopics(topics.value);
      if (req.topics.length === 0) throw new Error('name a topic, or choose all topics');
    }
    return req;
  };

  form.addEventListener('submit', async e => {
    e.preventDefault();
    replace(result);
    let req;
    try {
      req = request();
    } catch (err) {
      replace(out, errorBox({ code: 'invalid_argument', message: err.message }));
      return;
    }
    remember();
    planBtn.disabled = true;
    try {
      const r = await call('ResetGroupOffsets', { ...req, execute: false });
      shown = { plan: r.plan || [] };
      replace(out, planView(name, shown.plan, false));
      execBtn.disabled = shown.plan.length === 0;
    } catch (err) {
      shown = null;
      execBtn.disabled = true;
      replace(out, errorBox(err));
    } finally {
      planBtn.disabled = false;
    }
  });

  execBtn.addEventListener('click', async () => {
    if (!shown) return;
    const plan = shown.plan;
    const ok = await confirmTyped('Reset offsets of ' + name,
      'The ' + plan.length + ' partition(s) of the plan get the new offsets shown; members are fenced and re-join there.', name, 'Execute reset');
    if (!ok || shown === null || shown.plan !== plan) return;
    execBtn.disabled = true;
    try {
      const r = await call('ResetGroupOffsets', {
        group: name, strategy: 'explicit', execute: true,
        offsets: plan.map(p => ({ topic: p.topic, partition: p.partition || 0, offset: String(num(p.newOffset)) })),
      });
      shown = null;
      replace(out);
      replace(result, h('p', { class: 'ok', id: 'reset-done' },
        'Reset applied to ' + (r.plan || []).length + ' partition(s); group ' + name + ' is at generation ' + fmtNum(num(r.generation)) + '.'),
        planView(name, r.plan || [], true),
        h('p', null, link(route(['groups', name]), 'Back to the group')));
    } catch (err) {
      execBtn.disabled = false;
      replace(result, errorBox(err));
    }
  });

  // The group's topics, as a hint for the scope.
  call('DescribeGroup', { group: name }, { signal: ctx.signal }).then(g => {
    const ts = [...new Set((g.partitions || []).map(p => p.topic))];
    const members = (g.members || []).length;
    replace(topicsHint, ts.length ? 'The group has offsets for: ' + ts.join(', ') + '. ' : 'The group has no committed offsets yet. ',
      members ? 'It has ' + members + ' live member(s): an executed reset fences them and they continue at the new offsets.' : 'It has no live members.');
  }, e => ctx.fail(e));
}

// parseTopics reads "T T2:0,1" as logctl's repeated --topic does.
function parseTopics(s) {
  const byTopic = new Map();
  for (const entry of s.trim().split(/\s+/).filter(Boolean)) {
    const i = entry.lastIndexOf(':');
    const topic = i < 0 ? entry : entry.slice(0, i);
    if (!topic) throw new Error('"' + entry + '": empty topic');
    const parts = byTopic.get(topic) || [];
    if (i >= 0) {
      for (const p of entry.slice(i + 1).split(',')) {
        if (!/^\d+$/.test(p)) throw new Error('"' + entry + '": partition "' + p + '" is not a number');
        parts.push(Number(p));
      }
    }
    byTopic.set(topic, parts);
  }
  return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
}

function planView(name, plan, executed) {
  const rows = table([
    { label: 'Topic', value: p => p.topic },
    { label: 'Partition', num: true, value: p => String(p.partition || 0) },
    { label: 'Current', num: true, value: p => (num(p.currentOffset) < 0 ? '—' : fmtNum(num(p.currentOffset))) },
    { label: 'New', num: true, value: p => fmtNum(num(p.newOffset)) },
    { label: 'Lag before', num: true, value: p => fmtNum(num(p.lagBefore)) },
    { label: 'Lag after', num: true, value: p => fmtNum(num(p.lagAfter)) },
    { label: 'Note', value: p => (p.clamped ? 'clamped (asked ' + fmtNum(num(p.requestedOffset)) + ')' : '') },
  ], plan, { class: 'reset-plan-table', empty: 'The selection has no partitions.' });
  // The plan in logctl's -o json form, to save and apply later (here, or
  // with logctl group reset-offsets --from-file).
  const json = JSON.stringify({
    group: name, executed,
    partitions: plan.map(p => ({
      topic: p.topic, partition: p.partition || 0, current_offset: num(p.currentOffset), new_offset: num(p.newOffset),
      requested_offset: num(p.requestedOffset), ...(p.clamped ? { clamped: true } : {}), lag_before: num(p.lagBefore), lag_after: num(p.lagAfter),
    })),
  }, null, 2);
  return h('div', null,
    h('h2', null, executed ? 'Applied' : 'Plan (nothing changed yet)'), rows,
    h('details', null, h('summary', null, 'Plan as JSON (logctl --from-file)'), h('pre', { class: 'value', id: executed ? 'reset-applied-json' : 'reset-plan-json' }, json)));
}
