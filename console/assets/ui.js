// @ts-check
// DOM helpers. Every piece of data reaches the page as a text node or an
// attribute value, never as markup: nothing here (or in the pages) sets
// innerHTML, so a record value like <img onerror=...> is shown, not run.

// h builds an element. props: class, id, title, href, type, value, ...
// are attributes; on<event> are listeners; dataset sets data-*; style is
// not accepted (the Content-Security-Policy refuses inline styles).
// Children are nodes, strings, numbers, arrays of them, or null.
export function h(tag, props, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else if (k === 'checked' && 'checked' in el) el.checked = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// replace empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// table renders rows under columns: [{label, value(row) -> node|string,
// num: right-aligned, key: stable id for sorting}]. opts.empty is shown
// when there are no rows; opts.rowProps(row) adds attributes to a row.
export function table(columns, rows, opts = {}) {
  const head = h('tr', null, columns.map(c => h('th', { class: c.num ? 'num' : null, scope: 'col' }, c.label)));
  const body = rows.length === 0
    ? [h('tr', null, h('td', { colspan: columns.length, class: 'empty' }, opts.empty || 'None.'))]
    : rows.map(r => h('tr', opts.rowProps ? opts.rowProps(r) : null,
        columns.map(c => h('td', { class: c.num ? 'num' : null }, c.value(r)))));
  return h('table', { class: 'grid' + (opts.class ? ' ' + opts.class : '') }, h('thead', null, head), h('tbody', null, body));
}

// link is an in-console link to a route (hash URL).
export function link(route, text) {
  return h('a', { href: '#' + route }, text);
}

// route builds a hash route from path parts (each escaped) and a query.
export function route(parts, query) {
  let r = '/' + parts.map(p => encodeURIComponent(String(p))).join('/');
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? r + '?' + qs : r;
}

export function fmtNum(n) {
  return Number(n || 0).toLocaleString('en-US');
}

export function fmtBytes(n) {
  n = Number(n || 0);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
}

// settingValue shows a topic setting in human units when its name says
// its unit (*.ms: a duration, *.bytes: a size), with the raw value on
// hover; -1 is "unbounded"; anything else is shown as it is.
export function settingValue(key, value) {
  const v = Number(value);
  const unit = key.endsWith('.ms') ? 'ms' : key.endsWith('.bytes') ? 'bytes' : '';
  if (!unit || value === '' || !Number.isFinite(v)) return value;
  const raw = value + ' ' + unit;
  if (v < 0) return h('span', { class: 'human', title: raw }, 'unbounded');
  return h('span', { class: 'human', title: raw }, unit === 'ms' ? fmtDuration(v) : fmtBytes(v));
}

// duration shows milliseconds in human units (fmtDuration) with the raw
// value on hover; size does the same for bytes (fmtBytes). Every duration
// and size the console shows goes through them, so an operator can always
// read the exact number.
export function duration(ms) {
  const v = Math.round(Number(ms || 0));
  return h('span', { class: 'human', title: v + ' ms' }, fmtDuration(v));
}

export function size(bytes) {
  const v = Number(bytes || 0);
  return h('span', { class: 'human', title: v + ' bytes' }, fmtBytes(v));
}

// fmtDuration shows milliseconds as 850ms, 12.3s, 4m05s, 2h03m, 3d04h.
export function fmtDuration(ms) {
  ms = Number(ms || 0);
  if (ms < 1000) return Math.round(ms) + 'ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + 's';
  const m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
  if (m < 60) return m + 'm' + String(Math.floor(s % 60)).padStart(2, '0') + 's';
  if (h < 24) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
  return d + 'd' + String(h % 24).padStart(2, '0') + 'h';
}

// parseDuration reads a duration as logctl's flags take them (Go's
// syntax: 1h30m, 90s, 250ms, 1.5h, or 0) into milliseconds; null when
// it is not one (a sign included: none of the settings is negative).
export function parseDuration(s) {
  s = String(s || '').trim();
  if (s === '') return null;
  if (s === '0') return 0;
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  let total = 0, rest = s;
  while (rest) {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)/.exec(rest);
    if (!m) return null;
    total += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return Math.round(total);
}

// fmtGoDuration shows milliseconds in the syntax parseDuration reads
// (1h30m, 45s, 250ms), so a form can be filled from a setting.
export function fmtGoDuration(ms) {
  ms = Math.round(Number(ms || 0));
  if (ms === 0) return '0s';
  if (ms % 1000 !== 0) return ms + 'ms';
  let s = ms / 1000, out = '';
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const mm = Math.floor(s / 60); s -= mm * 60;
  if (hh) out += hh + 'h';
  if (mm) out += mm + 'm';
  if (s) out += s + 's';
  return out;
}

export function fmtTime(ms) {
  ms = Number(ms || 0);
  if (!ms) return '—';
  return new Date(ms).toISOString().replace('T', ' ').replace('Z', ' UTC');
}

// b64bytes decodes protobuf JSON bytes (standard base64) to a Uint8Array.
export function b64bytes(s) {
  if (!s) return new Uint8Array(0);
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// bytesB64 encodes bytes (or a string, as UTF-8) for a protobuf JSON field.
export function bytesB64(v) {
  const b = typeof v === 'string' ? new TextEncoder().encode(v) : v;
  let bin = '';
  for (const x of b) bin += String.fromCharCode(x);
  return btoa(bin);
}

// text decodes bytes as UTF-8, replacing what is not.
export function text(bytes) {
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

// hex shows bytes as offset, 16 hex bytes and their printable characters.
export function hexdump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.slice(i, i + 16);
    const hx = Array.from(row, b => b.toString(16).padStart(2, '0')).join(' ');
    const asc = Array.from(row, b => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
    lines.push(i.toString(16).padStart(8, '0') + '  ' + hx.padEnd(47) + '  ' + asc);
  }
  return lines.join('\n');
}

// prettyJSON returns the bytes as indented JSON, or null if they are not JSON.
export function prettyJSON(bytes) {
  try { return JSON.stringify(JSON.parse(text(bytes)), null, 2); } catch { return null; }
}

// sparkline draws values as a small SVG line (no inline style).
export function sparkline(values, opts = {}) {
  const w = opts.width || 120, ht = opts.height || 24;
  const svg = h('svg:svg', { class: 'spark', viewBox: `0 0 ${w} ${ht}`, width: w, height: ht, role: 'img',
    'aria-label': opts.label || 'trend' });
  if (values.length < 2) return svg;
  const max = Math.max(...values, 1), min = Math.min(...values, 0);
  const span = max - min || 1;
  const pts = values.map((v, i) => `${(i / (values.length - 1) * w).toFixed(1)},${(ht - 1 - (v - min) / span * (ht - 2)).toFixed(1)}`);
  svg.appendChild(h('svg:polyline', { points: pts.join(' '), fill: 'none', class: 'spark-line' }));
  return svg;
}

// chart draws series [{label, values}] over a shared x axis as an SVG
// line chart with a y axis label.
export function chart(series, opts = {}) {
  const w = opts.width || 640, ht = opts.height || 180, pad = 36;
  const svg = h('svg:svg', { class: 'chart', viewBox: `0 0 ${w} ${ht}`, role: 'img', 'aria-label': opts.label || 'chart' });
  const all = series.flatMap(s => s.values);
  const max = Math.max(...all, 1);
  svg.appendChild(h('svg:text', { x: 2, y: 12, class: 'chart-axis' }, opts.format ? opts.format(max) : String(max)));
  svg.appendChild(h('svg:text', { x: 2, y: ht - 4, class: 'chart-axis' }, '0'));
  svg.appendChild(h('svg:line', { x1: pad, y1: ht - pad / 2, x2: w, y2: ht - pad / 2, class: 'chart-grid' }));
  series.forEach((s, k) => {
    if (s.values.length < 2) return;
    const pts = s.values.map((v, i) => `${(pad + i / (s.values.length - 1) * (w - pad)).toFixed(1)},${(ht - pad / 2 - v / max * (ht - pad)).toFixed(1)}`);
    svg.appendChild(h('svg:polyline', { points: pts.join(' '), fill: 'none', class: 'chart-line c' + (k % 6) },
      h('svg:title', null, s.label)));
  });
  return svg;
}

// errorBox shows a refused call: its code, reason and message, as text.
export function errorBox(err) {
  const code = err && err.code ? err.code : 'error';
  return h('div', { class: 'error', role: 'alert' },
    h('strong', null, code + (err && err.reason ? ' (' + err.reason + ')' : '')), ': ',
    err && err.message ? err.message : String(err));
}

// confirmTyped opens a dialog that asks the user to type `name` before
// `action` runs; resolves true once it ran, false if cancelled.
export function confirmTyped(title, explain, name, actionLabel) {
  return new Promise(resolve => {
    const input = h('input', { type: 'text', autocomplete: 'off', 'aria-label': 'Type ' + name + ' to confirm', id: 'confirm-input' });
    const ok = h('button', { type: 'submit', class: 'danger', disabled: true, id: 'confirm-ok' }, actionLabel);
    input.addEventListener('input', () => { ok.disabled = input.value !== name; });
    const form = h('form', { method: 'dialog' },
      h('h2', null, title), h('p', null, explain),
      h('p', null, 'Type ', h('code', null, name), ' to confirm.'), input,
      h('div', { class: 'actions' },
        h('button', { type: 'button', id: 'confirm-cancel', onclick: () => { dlg.close(); } }, 'Cancel'), ok));
    const dlg = h('dialog', { class: 'confirm' }, form);
    form.addEventListener('submit', e => { e.preventDefault(); if (input.value === name) { dlg.close('ok'); } });
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue === 'ok'); });
    document.body.appendChild(dlg);
    dlg.showModal();
    input.focus();
  });
}

// field is a labelled form control.
export function field(label, control, hint) {
  return h('label', { class: 'field' }, h('span', null, label), control, hint ? h('small', null, hint) : null);
}
