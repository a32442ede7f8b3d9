// @ts-check
import { call, num, ApiError } from '../api.js';
import { h, replace, table, link, route, fmtNum, fmtTime, field, errorBox, parseDuration, b64bytes, text } from '../ui.js';
import { showValue } from './records.js';

// The Consume panel of a consumer group (docs/console.md, "Consume as a
// group member"): what logctl consume TOPIC --group G --max N does, once.
// The tab joins the group as a member, waits for its assignment, reads
// from the group's committed offsets on the partitions assigned to it,
// shows the records, commits the offsets after the records shown (unless
// told not to) and leaves the group, always. Every step is the Connect
// API's, as the Go client (client/group_consumer.go) calls it: the
// server assigns, fences and commits; the page only follows.

// maxConsume bounds the records of one consume from the page: a look at
// a group's next records, not a dump of a topic into a browser tab.
export const maxConsume = 1000;
// maxWaitMs bounds how long a consume waits, for an assignment and then
// for records when there are none.
export const maxWaitMs = 10000;
const defaultMax = 10;
const defaultWait = '2s';
// sessionMs is the member's session timeout: a tab closed while it
// consumes (whose leave did not go out) is removed from the group after
// it, and its partitions move on.
const sessionMs = 10000;
// beatMs is how often the member heartbeats while it waits for its
// assignment and while it reads, well within sessionMs.
const beatMs = 500;
// sliceMs bounds each long poll, so a record arriving on one partition is
// not held back by the wait of the others, and heartbeats stay due.
const sliceMs = 1000;
// maxRounds bounds the fetch rounds of one consume (each brings records,
// moves a partition forward, or waits a slice within the wait).
const maxRounds = 200;

const views = ['text', 'json', 'hex'];

// refusals are the Connect codes of a call the node refused before
// changing anything.
const refusals = ['invalid_argument', 'not_found', 'permission_denied', 'unauthenticated', 'failed_precondition',
  'out_of_range', 'already_exists', 'resource_exhausted'];

// renderConsume is #/groups/NAME/consume: the panel alone, for any group
// name, one that does not exist yet included (the first join creates it).
export function renderConsume(ctx, name) {
  replace(ctx.view,
    h('p', null, link(route(['groups', name]), '← Group ' + name)),
    h('h1', null, 'Consume as ', h('code', null, name)),
    consumePanel(ctx, name));
}

// consumePanel returns the panel for group name. Its choices are kept in
// the URL (topics, max, wait, commit, reset), so a consume can be shared.
export function consumePanel(ctx, name) {
  const q = ctx.query;
  const topicsIn = h('input', { type: 'text', id: 'consume-topics', value: q.get('topics') || '', placeholder: 'orders', size: 30,
    autocomplete: 'off', 'aria-label': 'Topics' });
  const maxIn = h('input', { type: 'number', id: 'consume-max', min: 1, max: maxConsume, value: q.get('max') || String(defaultMax), class: 'narrow' });
  const waitIn = h('input', { type: 'text', id: 'consume-wait', value: q.get('wait') || defaultWait, autocomplete: 'off', class: 'narrow' });
  const resetSel = h('select', { id: 'consume-reset', 'aria-label': 'Reset policy' },
    ['earliest', 'latest', 'none'].map(v => h('option', { value: v }, v)));
  resetSel.value = ['earliest', 'latest', 'none'].includes(q.get('reset')) ? q.get('reset') : 'earliest';
  const commitIn = h('input', { type: 'checkbox', id: 'consume-commit', checked: q.get('commit') !== '0' });
  const btn = h('button', { type: 'submit', class: 'primary', id: 'consume-submit' }, 'Consume');
  const memberOut = h('code', { id: 'consume-member' }, '…');
  const result = h('div', { id: 'consume-result', role: 'status' });
  const form = h('form', { id: 'consume-form', class: 'toolbar' },
    field('Topics', topicsIn, 'one or more, separated by spaces'),
    field('Records (--max)', maxIn, 'at most ' + fmtNum(maxConsume)),
    field('Wait', waitIn, 'for an assignment and for records; at most 10s'),
    field('Reset policy (--reset-policy)', resetSel, 'without a committed offset'),
    h('label', { title: 'Off: read as the group without moving it (a peek)' }, commitIn, ' Commit after reading'),
    btn);
  const panel = h('section', { class: 'panel', id: 'consume-panel' },
    h('p', { class: 'note' },
      'Consume joins the group as the member ', memberOut, ', reads from the group\'s committed offsets on the partitions the node ',
      'assigns to it, shows the records, commits the offsets after the records shown (unless unticked) and leaves the group, ',
      'as logctl consume TOPIC --group ' + name + ' --max N does. A partition another live member owns moves to this one only ',
      'once that member released it, within the wait.'),
    form, result);

  let member = '';
  const rand = new Uint8Array(4);
  crypto.getRandomValues(rand);
  const suffix = Array.from(rand, b => b.toString(16).padStart(2, '0')).join('');
  call('WhoAmI', {}, { signal: ctx.signal }).then(me => {
    member = 'console/' + (me.principal || 'anonymous') + '/' + suffix;
    memberOut.textContent = member;
  }, e => ctx.fail(e));
  if (!topicsIn.value) {
    // The group's topics, when it has any, as the default.
    call('ListGroups', { all: true }, { signal: ctx.signal }).then(r => {
      const g = (r.groups || []).find(x => x.group === name);
      if (g && !topicsIn.value) topicsIn.value = (g.topics || []).join(' ');
    }, e => ctx.fail(e));
  }

  const remember = () => ctx.setQuery({ topics: topicsIn.value.trim(), max: maxIn.value === String(defaultMax) ? '' : maxIn.value,
    wait: waitIn.value.trim() === defaultWait ? '' : waitIn.value.trim(), commit: commitIn.checked ? '' : '0',
    reset: resetSel.value === 'earliest' ? '' : resetSel.value });

  // options reads the form, or throws a message saying what is wrong.
  const options = () => {
    const topics = [...new Set(topicsIn.value.trim().split(/[\s,]+/).filter(Boolean))];
    if (topics.length === 0) throw new Error('name a topic');
    const max = Number(maxIn.value);
    if (!Number.isInteger(max) || max < 1 || max > maxConsume) throw new Error('records: a whole number from 1 to ' + fmtNum(maxConsume));
    const wait = parseDuration(waitIn.value);
    if (wait === null || wait > maxWaitMs) throw new Error('wait: a duration up to 10s, such as 2s or 500ms');
    if (!member) throw new Error('the member name is not known yet (WhoAmI has not answered)');
    return { group: name, member, topics, max, waitMs: wait, commit: commitIn.checked, resetPolicy: resetSel.value };
  };

  let view = 'text';
  form.addEventListener('submit', async e => {
    e.preventDefault();
    let o;
    try {
      o = options();
    } catch (err) {
      replace(result, errorBox({ code: 'invalid_argument', message: err.message }));
      return;
    }
    remember();
    btn.disabled = true;
    const running = h('p', { class: 'muted', id: 'consume-running' }, 'Joining the group as ' + o.member + '…');
    replace(result, running);
    let out;
    try {
      out = await consume(o, ctx.signal, s => { running.textContent = s; });
    } catch (err) {
      if (err && err.name === 'AbortError') return; // the page was left; the member left too
      throw err;
    } finally {
      btn.disabled = false;
    }
    if (ctx.signal.aborted) return;
    const viewBtns = views.map(v => h('button', { type: 'button', id: 'consume-view-' + v, 'aria-pressed': v === view ? 'true' : 'false' },
      { text: 'Text', json: 'JSON', hex: 'Hex' }[v]));
    const list = h('div', { class: 'records' });
    const columns = [
      { label: 'Topic', value: r => r.topic },
      { label: 'Partition', num: true, value: r => String(r.partition) },
      { label: 'Offset', num: true, value: r => fmtNum(num(r.offset)) },
      { label: 'Timestamp', value: r => fmtTime(num(r.timestampMs)) },
      { label: 'Key', value: r => r.key === undefined ? h('span', { class: 'nullv' }, 'null') : h('code', null, text(b64bytes(r.key))) },
      { label: 'Value', value: r => showValue(r, view) },
    ];
    const draw = () => {
      replace(list, table(columns, out.records, { class: 'consume-records', empty: 'No records.' }));
      list.firstChild.id = 'consume-records';
    };
    viewBtns.forEach((b, i) => b.addEventListener('click', () => {
      view = views[i];
      viewBtns.forEach((x, j) => x.setAttribute('aria-pressed', i === j ? 'true' : 'false'));
      draw();
    }));
    draw();
    replace(result,
      h('p', { id: 'consume-outcome', class: out.error ? 'bad' : 'ok' }, outcome(o, out)),
      out.error ? errorBox(out.error) : null,
      out.notes.length ? h('ul', { id: 'consume-notes' }, out.notes.map(n => h('li', null, n))) : null,
      out.leaveError ? h('div', null, h('p', null, 'Leaving the group failed; the node removes the member after its session timeout (' +
        sessionMs / 1000 + 's).'), errorBox(out.leaveError)) : null,
      out.records.length ? h('div', { class: 'toolbar' }, h('span', { class: 'seg', role: 'group', 'aria-label': 'Show values as' }, viewBtns)) : null,
      list);
    ctx.refresh();
  });
  return panel;
}

// outcome says what a consume did, in one line.
function outcome(o, out) {
  const parts = new Set(out.records.map(r => r.topic + '/' + r.partition));
  let s = 'Read ' + fmtNum(out.records.length) + ' record' + (out.records.length === 1 ? '' : 's') +
    ' from ' + parts.size + ' partition' + (parts.size === 1 ? '' : 's');
  if (out.assigned.length) {
    s += ' (assigned ' + out.assigned.map(p => p.topic + '/' + p.partition).join(', ') + ' at generation ' + fmtNum(out.generation) + ')';
  }
  if (out.error) {
    s += '; refused, nothing committed';
  } else if (out.committed.length) {
    s += '; committed ' + out.committed.map(c => c.topic + '/' + c.partition + ' → ' + fmtNum(c.offset)).join(', ');
  } else if (!o.commit) {
    s += '; nothing committed (commit after reading is off)';
  } else {
    s += '; nothing to commit';
  }
  return s + (out.left ? '; left the group.' : '.');
}

// consume joins, reads and commits as one member of o.group, and always
// leaves (also when a call is refused, or the page is left: signal). It
// resolves to what happened; refusals are in error, never thrown. Only an
// abort by signal rejects. status(text) tells what it is doing.
async function consume(o, signal, status) {
  const out = { records: [], assigned: [], committed: [], notes: [], generation: 0, error: null, left: false, leaveError: null };
  const deadline = Date.now() + o.waitMs;
  // joined: the node may hold the member (a join went out and was not
  // refused), so the member must leave.
  let joined = false;
  const leave = () => call('LeaveGroup', { group: o.group, memberId: o.member }, { keepalive: true });
  // A tab closed while consuming still leaves, if the call gets out.
  const onHide = () => { if (joined) leave().catch(() => {}); };
  window.addEventListener('pagehide', onHide);
  try {
    await run(o, signal, status, out, deadline, v => { joined = v; });
  } catch (e) {
    if (e && e.name === 'AbortError') {
      if (joined) leave().catch(() => {});
      throw e;
    }
    out.error = e;
    out.committed = [];
  } finally {
    window.removeEventListener('pagehide', onHide);
  }
  if (joined) {
    status('Leaving the group…');
    try {
      await leave();
      out.left = true;
    } catch (e) {
      out.leaveError = e;
    }
  }
  return out;
}

// run is consume's body; setJoined records whether the member exists.
async function run(o, signal, status, out, deadline, setJoined) {
  const base = { group: o.group, memberId: o.member };
  let a;
  setJoined(true);
  try {
    const r = await call('JoinGroup', { ...base, topics: o.topics, sessionTimeoutMs: sessionMs, resetPolicy: o.resetPolicy }, { signal });
    a = r.assignment || {};
  } catch (e) {
    // A join the node refused added no member; one that went
    // unanswered or failed on the way (unavailable, deadline_exceeded,
    // internal) may have, and is left.
    if (e instanceof ApiError && refusals.includes(e.code)) setJoined(false);
    throw e;
  }
  // Cooperative moves: a partition a live member owns comes to this one
  // once that member released it in a heartbeat (or its session ended);
  // the assignment lists only what this member owns.
  while ((a.partitions || []).length === 0 && Date.now() < deadline) {
    status('Waiting for an assignment (another member owns the partitions until it releases them)…');
    await sleep(Math.min(beatMs, deadline - Date.now()), signal);
    a = (await call('GroupHeartbeat', base, { signal })).assignment || {};
  }
  // Every fetch and the commit name this generation: the one the member
  // read at. A reset or a move since fences them (the server refuses),
  // so nothing read under an older generation is committed.
  const generation = a.generation || '0';
  out.generation = num(generation);
  const parts = (a.partitions || []).map(p => ({ topic: p.topic, partition: p.partition || 0, next: num(p.position), shownTo: -1, done: false }))
    .sort((x, y) => x.topic.localeCompare(y.topic) || x.partition - y.partition);
  out.assigned = parts;
  if (parts.length === 0) {
    out.notes.push('No partition was assigned to this member within the wait: the group\'s other live members own them all ' +
      '(or the topics have fewer partitions than the group has members).');
    return;
  }
  for (const p of parts) {
    if (p.next < 0) {
      p.done = true;
      out.notes.push(p.topic + '/' + p.partition + ': no committed offset and reset policy none; not read.');
    }
  }

  // fetchOne reads p from its next offset, up to what is still wanted;
  // it reports whether p moved (records taken or its offset advanced).
  const fetchOne = async (p, wait) => {
    const want = o.max - out.records.length;
    const r = await call('GroupFetch', { ...base, generation, fetch: {
      topic: p.topic, partition: p.partition, offset: String(p.next), maxRecords: want, maxWaitMs: wait,
    } }, { signal });
    return r;
  };
  // take applies p's answer r: the records at or after p's offset (a
  // batch may start before it), up to what is still wanted.
  const take = (p, r) => {
    let moved = false;
    let from = p.next;
    if (r.autoReset) {
      from = num(r.resetTo);
      out.notes.push(p.topic + '/' + p.partition + ': retention removed the group\'s records from offset ' + fmtNum(num(r.resetFrom)) +
        '; the reset policy moved its committed offset to ' + fmtNum(from) + '.');
      moved = true;
    }
    const f = r.fetch || {};
    const recs = (f.records || []).filter(x => num(x.offset) >= from);
    const got = recs.slice(0, Math.max(0, o.max - out.records.length));
    for (const x of got) out.records.push({ ...x, topic: p.topic, partition: p.partition });
    let next = from;
    if (got.length) {
      next = num(got[got.length - 1].offset) + 1;
      p.shownTo = next;
      moved = true;
    }
    if (got.length === recs.length) next = Math.max(next, num(f.nextOffset));
    if (next > p.next) moved = true;
    p.next = Math.max(p.next, next);
    return moved;
  };

  let lastBeat = Date.now();
  let first = true;
  for (let round = 0; round < maxRounds && out.records.length < o.max; round++) {
    const open = parts.filter(p => !p.done);
    if (open.length === 0) break;
    // Read what is there first; wait (in slices, every partition at
    // once) only while nothing has been read.
    const waiting = !first && out.records.length === 0;
    const wait = waiting ? Math.min(sliceMs, deadline - Date.now()) : 0;
    if (waiting && wait <= 0) break;
    status(waiting ? 'Waiting for records, up to ' + Math.ceil(Math.max(0, deadline - Date.now()) / 1000) + 's…' : 'Reading…');
    first = false;
    let moved = false;
    if (wait === 0) {
      for (const p of open) {
        if (out.records.length >= o.max) break;
        if (take(p, await fetchOne(p, 0))) moved = true;
      }
    } else {
      const answers = await Promise.all(open.map(p => fetchOne(p, wait)));
      open.forEach((p, i) => { if (take(p, answers[i])) moved = true; });
    }
    if (!moved && out.records.length > 0) break;
    if (Date.now() - lastBeat >= beatMs) {
      // Stay alive, and stop reading partitions the node asks back
      // (they are committed below, then released by the leave).
      const hb = (await call('GroupHeartbeat', base, { signal })).assignment || {};
      lastBeat = Date.now();
      for (const rv of hb.revoke || []) {
        const p = parts.find(x => x.topic === rv.topic && x.partition === (rv.partition || 0));
        if (p) p.done = true;
      }
    }
  }

  if (!o.commit) return;
  const offsets = parts.filter(p => p.shownTo >= 0).map(p => ({ topic: p.topic, partition: p.partition, offset: String(p.shownTo) }));
  if (offsets.length === 0) return;
  status('Committing…');
  await call('CommitOffsets', { ...base, generation, offsets }, { signal });
  out.committed = offsets.map(x => ({ topic: x.topic, partition: x.partition, offset: num(x.offset) }));
}

/**
 * sleep waits ms, or rejects with an AbortError when signal ends first.
 * @param {number} ms
 * @param {AbortSignal} signal
 * @returns {Promise<void>}
 */
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) { reject(new DOMException('left the page', 'AbortError')); return; }
    const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, Math.max(0, ms));
    const onAbort = () => { clearTimeout(t); reject(new DOMException('left the page', 'AbortError')); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
