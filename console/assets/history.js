// @ts-check
// The charts of the last 15 minutes on the topic, consumer group and
// queue group pages: the node's own samples (GetHistory; server/history.go
// keeps one every 10 s, 90 per series), drawn as inline SVG. Each chart's
// polyline carries its samples as data attributes (data-count, data-times,
// data-values), so a test can check what is drawn against what the API
// answered without reading pixels.
import { call, num } from './api.js';
import { h, replace, fmtNum, fmtDuration } from './ui.js';

// titles names each series the API answers.
const titles = {
  produce_rate: 'Produce rate',
  consume_rate: 'Consume rate',
  lag_records: 'Lag (records)',
  lag_seconds: 'Lag (time)',
  backlog_records: 'Backlog (records)',
  backlog_age_seconds: 'Backlog age',
};

// fmtValue shows a value in its series' unit.
function fmtValue(unit, v) {
  if (unit === 'seconds') return fmtDuration(1000 * v);
  if (unit === 'records/s') return (v >= 10 ? fmtNum(Math.round(v)) : v.toFixed(1)) + '/s';
  return fmtNum(Math.round(v));
}

// historyCharts returns a box that shows the charts of req (a
// GetHistory request) and keeps them up to date while the page is live.
/**
 * @param {any} ctx the page's context (app.js)
 * @param {import('../apitypes.js').Procedures['GetHistory'][0]} req
 */
export function historyCharts(ctx, req) {
  const charts = h('div', { class: 'history-charts' });
  const note = h('p', { class: 'muted', id: 'history-note' });
  const title = h('h2', null, 'Last 15 minutes');
  const box = h('section', { id: 'history' }, title, note, charts);
  ctx.every(async () => {
    const r = await call('GetHistory', req, { signal: ctx.signal });
    const windowMs = num(r.intervalMs) * (r.capacity || 0);
    const span = windowMs % 60000 === 0 ? windowMs / 60000 + ' minutes' : fmtDuration(windowMs);
    title.textContent = 'Last ' + span;
    note.textContent = 'Sampled by node ' + r.nodeId + ' every ' + fmtDuration(num(r.intervalMs)) + ', kept ' + span +
      ' in its memory: this node\'s view (with data groups, a node sees only the partitions it holds).';
    const series = r.series || [];
    if (series.length === 0) {
      replace(charts, h('p', { class: 'muted' }, 'No samples yet: the first come ' + fmtDuration(num(r.intervalMs)) +
        ' after the node started, a rate after two.'));
      return;
    }
    const end = Date.now();
    replace(charts, series.map(s => timeChart(s, end - windowMs, end)));
  });
  return box;
}

// timeChart draws one series between the times from and to (Unix ms) as
// a small SVG line chart with its title, its latest value and its scale.
/**
 * @param {import('../apitypes.js').HistorySeries} s
 * @param {number} from
 * @param {number} to
 */
function timeChart(s, from, to) {
  const w = 320, ht = 90, top = 14, bottom = 14;
  const times = (s.timeMs || []).map(num), values = s.values || [];
  const max = Math.max(...values, 0) || 1;
  const x = t => ((t - from) / Math.max(to - from, 1)) * w;
  const y = v => ht - bottom - (v / max) * (ht - top - bottom);
  const pts = times.map((t, i) => x(t).toFixed(1) + ',' + y(values[i]).toFixed(1));
  const last = values.length ? values[values.length - 1] : 0;
  const svg = h('svg:svg', { class: 'chart small', viewBox: `0 0 ${w} ${ht}`, role: 'img',
    'aria-label': (titles[s.name] || s.name) + ' over the last 15 minutes' },
  h('svg:text', { x: 2, y: 10, class: 'chart-axis' }, fmtValue(s.unit || '', max)),
  h('svg:text', { x: 2, y: ht - 2, class: 'chart-axis' }, '−' + fmtDuration(to - from)),
  h('svg:text', { x: w - 2, y: ht - 2, class: 'chart-axis end' }, 'now'),
  h('svg:line', { x1: 0, y1: ht - bottom, x2: w, y2: ht - bottom, class: 'chart-grid' }),
  h('svg:polyline', { points: pts.join(' '), fill: 'none', class: 'chart-line c0',
    dataset: { series: s.name, node: s.nodeId, count: String(values.length), times: times.join(','), values: values.join(',') } },
  h('svg:title', null, (titles[s.name] || s.name) + ', sampled by ' + s.nodeId)));
  return h('figure', { class: 'history-chart', dataset: { series: s.name } },
    h('figcaption', null, h('strong', null, titles[s.name] || s.name), ' ',
      h('span', { class: 'muted' }, fmtValue(s.unit || '', last) + ' now · ' + s.nodeId)),
    svg);
}
