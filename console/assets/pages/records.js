// @ts-check
import { call, num } from '../api.js';
import { h, replace, table, link, route, fmtNum, fmtTime, errorBox, field, b64bytes, bytesB64, text, hexdump, prettyJSON } from '../ui.js';

const views = ['text', 'json', 'hex'];
const pageSizes = [20, 50, 100, 500];

// renderRecords is the records browser of a topic's partition
// (#/topics/NAME/records?p=0&offset=..|time=..&v=text|json|hex&q=..):
// it reads a page of records from an offset, a time (ListOffsets by
// timestamp) or the newest, shows them as text, JSON or hex, filters what
// it fetched, and produces a test record (docs/console.md).
export async function renderRecords(ctx, name) {
  const d = await call('DescribeTopic', { name }, { signal: ctx.signal });
  const partitions = d.topic.partitions || 1;
  const q = ctx.query;
  const st = {
    p: Math.min(Math.max(Number(q.get('p')) || 0, 0), partitions - 1),
    offset: q.get('offset') ?? '',
    time: q.get('time') ?? '',
    view: views.includes(q.get('v')) ? q.get('v') : 'text',
    search: q.get('q') || '',
    n: pageSizes.includes(Number(q.get('n'))) ? Number(q.get('n')) : 50,
    records: [], logStart: 0, end: 0, next: 0, from: 0,
  };
  const save = () => ctx.setQuery({ p: st.p, offset: st.time ? '' : st.offset, time: st.time, v: st.view === 'text' ? '' : st.view,
    q: st.search, n: st.n === 50 ? '' : st.n });

  const partSel = h('select', { id: 'records-partition', 'aria-label': 'Partition' },
    Array.from({ length: partitions }, (_, i) => h('option', { value: String(i), selected: i === st.p }, String(i))));
  const offsetIn = h('input', { type: 'text', id: 'records-offset', inputmode: 'numeric', placeholder: 'newest', value: st.time ? '' : st.offset, size: 10 });
  const timeIn = h('input', { type: 'text', id: 'records-time', placeholder: '2026-01-31T12:00:00Z or ms', value: st.time, size: 24 });
  const sizeSel = h('select', { id: 'records-size', 'aria-label': 'Records per page' },
    pageSizes.map(n => h('option', { value: String(n), selected: n === st.n }, String(n))));
  const posForm = h('form', { id: 'records-form', class: 'toolbar' },
    field('Partition', partSel), field('From offset', offsetIn), field('or from time', timeIn), field('Per page', sizeSel),
    h('button', { type: 'submit', class: 'primary', id: 'records-read' }, 'Read'));
  const nav = h('div', { class: 'toolbar' },
    h('button', { type: 'button', id: 'records-oldest' }, '⇤ Oldest'),
    h('button', { type: 'button', id: 'records-prev' }, '← Previous'),
    h('button', { type: 'button', id: 'records-next' }, 'Next →'),
    h('button', { type: 'button', id: 'records-newest' }, 'Newest ⇥'),
    h('span', { class: 'muted', id: 'records-range' }));
  const viewBtns = views.map(v => h('button', { type: 'button', id: 'view-' + v, 'aria-pressed': v === st.view ? 'true' : 'false' },
    { text: 'Text', json: 'JSON', hex: 'Hex' }[v]));
  const search = h('input', { type: 'search', id: 'records-search', placeholder: 'Search fetched records (/)', 'aria-label': 'Search fetched records',
    dataset: { filter: '' }, value: st.search });
  const list = h('div', { id: 'records-list', class: 'records' });
  const msg = h('div', { id: 'records-message' });

  replace(ctx.view,
    h('p', null, link(route(['topics', name]), '← Topic ' + name)),
    h('h1', null, 'Records of ', h('code', null, name)),
    posForm, nav,
    h('div', { class: 'toolbar' }, h('span', { class: 'seg', role: 'group', 'aria-label': 'Show values as' }, viewBtns), search),
    msg, list,
    produceForm(ctx, name, partitions, st, () => readAt(null)));

  const draw = () => {
    const needle = st.search.toLowerCase();
    const rows = needle ? st.records.filter(r => matches(r, needle)) : st.records;
    const shown = st.records.length;
    const bounds = ' (partition: log start ' + fmtNum(st.logStart) + ', end ' + fmtNum(st.end) + ')';
    replace(document.getElementById('records-range'), shown === 0
      ? 'No records from offset ' + fmtNum(st.from) + bounds
      : 'Offsets ' + fmtNum(num(st.records[0].offset)) + '–' + fmtNum(num(st.records[shown - 1].offset)) + bounds +
        (needle ? ', ' + rows.length + ' of ' + shown + ' match' : ''));
    replace(list, table([
      { label: 'Offset', num: true, value: r => fmtNum(num(r.offset)) },
      { label: 'Timestamp', value: r => fmtTime(num(r.timestampMs)) },
      { label: 'Key', value: r => r.key === undefined ? h('span', { class: 'nullv' }, 'null') : h('code', null, text(b64bytes(r.key))) },
      { label: 'Headers', value: r => (r.headers || []).map(x => h('div', null, h('code', null, x.key), ': ', text(b64bytes(x.value)))) },
      { label: 'Value', value: r => showValue(r, st.view) },
    ], rows, { class: 'records-table', empty: needle ? 'No fetched record matches.' : 'No records here.',
      rowProps: r => ({ dataset: { offset: num(r.offset) } }) }));
    /** @type {HTMLButtonElement} */ (document.getElementById('records-prev')).disabled = st.from <= st.logStart;
    /** @type {HTMLButtonElement} */ (document.getElementById('records-next')).disabled = st.next >= st.end;
  };

  // readAt reads a page from offset (null: the newest page, or what the
  // form says); errors show above the records.
  const readAt = async (offset) => {
    replace(msg);
    try {
      const b = await call('ListOffsets', { topic: name, partition: st.p }, { signal: ctx.signal });
      st.logStart = num(b.logStartOffset);
      st.end = num(b.endOffset);
      if (offset === null) {
        if (st.time) {
          const ms = /^\d+$/.test(st.time) ? Number(st.time) : Date.parse(st.time);
          if (Number.isNaN(ms)) throw new Error('time "' + st.time + '" is neither an ISO time nor milliseconds');
          const r = await call('ListOffsets', { topic: name, partition: st.p, timestampMs: String(ms) }, { signal: ctx.signal });
          offset = num(r.offset);
        } else if (st.offset !== '') {
          if (!/^\d+$/.test(st.offset)) throw new Error('offset "' + st.offset + '" is not a number');
          offset = Number(st.offset);
        } else {
          offset = Math.max(st.logStart, st.end - st.n);
        }
      }
      const f = await call('Fetch', { topic: name, partition: st.p, offset: String(offset), maxRecords: st.n }, { signal: ctx.signal });
      st.from = offset;
      st.records = f.records || [];
      st.logStart = num(f.logStartOffset);
      st.end = num(f.endOffset);
      st.next = num(f.nextOffset);
    } catch (err) {
      if (err && err.name === 'AbortError') return;
      st.records = [];
      replace(msg, errorBox(err));
    }
    save();
    draw();
  };
  const goOffset = o => { st.time = ''; timeIn.value = ''; st.offset = String(o); offsetIn.value = st.offset; return readAt(o); };

  posForm.addEventListener('submit', e => {
    e.preventDefault();
    st.p = Number(partSel.value);
    st.n = Number(sizeSel.value);
    st.time = timeIn.value.trim();
    st.offset = st.time ? '' : offsetIn.value.trim();
    readAt(null);
  });
  document.getElementById('records-oldest').addEventListener('click', () => goOffset(st.logStart));
  document.getElementById('records-newest').addEventListener('click', () => { st.time = ''; st.offset = ''; timeIn.value = ''; offsetIn.value = ''; readAt(null); });
  document.getElementById('records-prev').addEventListener('click', () => goOffset(Math.max(st.logStart, st.from - st.n)));
  document.getElementById('records-next').addEventListener('click', () => goOffset(st.next));
  viewBtns.forEach((b, i) => b.addEventListener('click', () => {
    st.view = views[i];
    viewBtns.forEach((x, j) => x.setAttribute('aria-pressed', i === j ? 'true' : 'false'));
    save();
    draw();
  }));
  search.addEventListener('input', () => { st.search = search.value; save(); draw(); });
  await readAt(null);
}

// matches is the client-side search: offset, key, value and headers as
// text, case-insensitive, within what was fetched.
function matches(r, needle) {
  const parts = [String(num(r.offset)), r.key ? text(b64bytes(r.key)) : '', r.value ? text(b64bytes(r.value)) : ''];
  for (const x of r.headers || []) parts.push(x.key, text(b64bytes(x.value)));
  return parts.some(p => p.toLowerCase().includes(needle));
}

// showValue renders a value as text, pretty JSON (text when it is not
// JSON) or a hex dump, always as a text node.
export function showValue(r, view) {
  if (r.value === undefined) return h('span', { class: 'nullv' }, 'null (tombstone)');
  const bytes = b64bytes(r.value);
  if (view === 'hex') return h('pre', { class: 'value hex' }, hexdump(bytes));
  if (view === 'json') {
    const j = prettyJSON(bytes);
    if (j !== null) return h('pre', { class: 'value json' }, j);
    return h('div', null, h('span', { class: 'tag warn' }, 'not JSON'), h('pre', { class: 'value' }, text(bytes)));
  }
  return h('pre', { class: 'value' }, text(bytes));
}

// produceForm is logctl produce: key, value (or one record per line, as
// logctl produce TOPIC V1 V2 ... takes several), headers, an idempotency
// key (several records: KEY-1, KEY-2, ... as logctl names them), to a
// partition or routed by the key.
function produceForm(ctx, name, partitions, st, reread) {
  const part = h('select', { id: 'produce-partition', 'aria-label': 'Partition' },
    h('option', { value: '' }, 'by key / round-robin'),
    Array.from({ length: partitions }, (_, i) => h('option', { value: String(i), selected: i === st.p }, String(i))));
  const key = h('input', { type: 'text', id: 'produce-key', placeholder: 'none', autocomplete: 'off' });
  const value = h('textarea', { id: 'produce-value', class: 'value' });
  const lines = h('input', { type: 'checkbox', id: 'produce-lines' });
  const headers = h('textarea', { id: 'produce-headers', class: 'value', placeholder: 'trace-id=abc' });
  const idem = h('input', { type: 'text', id: 'produce-idempotency-key', placeholder: 'none', autocomplete: 'off' });
  const out = h('div', { id: 'produce-result', role: 'status' });
  const form = h('form', { id: 'produce-form', class: 'panel' },
    h('h2', null, 'Produce a test record'),
    field('Partition', part), field('Key (--key)', key, 'empty: no key'), field('Value', value),
    field('Headers (-H)', headers, 'key=value, one a line'),
    field('Idempotency key (--idempotency-key)', idem, 'several records: KEY-1, KEY-2, …; a repeat within the window appends nothing'),
    h('label', null, lines, ' Each line of the value is a record (as logctl produce TOPIC V1 V2 …)'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'produce-submit' }, 'Produce')), out);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    replace(out);
    try {
      const hs = [];
      for (const raw of headers.value.split('\n')) {
        const line = raw.trim();
        if (!line) continue;
        const i = line.indexOf('=');
        if (i <= 0) throw new Error('header "' + line + '" is not key=value');
        hs.push({ key: line.slice(0, i).trim(), value: bytesB64(line.slice(i + 1).trim()) });
      }
      const values = lines.checked ? value.value.split('\n').filter(v => v !== '') : [value.value];
      if (values.length === 0) throw new Error('no values: each non-empty line is a record');
      if (values.length > 1000) throw new Error(values.length + ' lines: at most 1,000 records from this form');
      const ik = idem.value.trim();
      const records = values.map((v, n) => {
        const rec = { value: bytesB64(v), headers: hs };
        if (key.value !== '') rec.key = bytesB64(key.value);
        if (part.value !== '') rec.partition = Number(part.value);
        if (ik) rec.idempotencyKey = values.length === 1 ? ik : ik + '-' + (n + 1);
        return rec;
      });
      const r = await call('Produce', { topic: name, records });
      const results = r.results || [];
      const dups = results.filter(x => x.duplicate).length;
      const where = x => 'partition ' + (x.partition || 0) + ', offset ' + fmtNum(num(x.offset));
      if (results.length === 1) {
        const res = results[0];
        replace(out, h('p', { class: 'ok' }, res.duplicate
          ? 'Duplicate: the idempotency key was seen within the window with the same record; nothing was appended (the original is at ' + where(res) + ').'
          : 'Appended at ' + where(res) + '.'));
      } else {
        replace(out, h('p', { class: 'ok' }, 'Appended ' + (results.length - dups) + ' record(s)' +
          (dups ? '; ' + dups + ' duplicate(s) of records already written, nothing appended for those' : '') + '.'),
        table([
          { label: 'Partition', num: true, value: x => String(x.partition || 0) },
          { label: 'Offset', num: true, value: x => fmtNum(num(x.offset)) },
          { label: '', value: x => (x.duplicate ? h('span', { class: 'tag warn' }, 'duplicate') : '') },
        ], results, { class: 'produce-results' }));
      }
      if (results.some(x => (x.partition || 0) === st.p) && st.offset === '' && !st.time) await reread();
    } catch (err) {
      replace(out, errorBox(err));
    }
  });
  return form;
}
