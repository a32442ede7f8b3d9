// @ts-check
import { call, num } from '../api.js';
import { h, replace, table, fmtNum, fmtDuration, fmtTime, field, errorBox, parseDuration, b64bytes, text } from '../ui.js';

// The claim and settle panel of a queue group's page (docs/console.md,
// "Claim and settle"): the console claims records as a worker (logctl
// queue claim) and acks, nacks, rejects or extends them (queue ack, nack,
// nack --permanent, extend) with their delivery tokens.
//
// Tokens live in this module's memory only: never in the URL, storage or
// the page's text. They outlive a move to another page of the console
// (the module stays loaded) and are gone when the tab reloads; a record
// left unsettled comes back to the queue when its lease ends.

// held maps "topic\0group" to {worker, recs: Map token -> record}.
const held = new Map();

// maxClaim bounds a claim from the page: a worker's batch, not a dump of
// the queue into a browser tab (logctl allows 10,000).
const maxClaim = 1000;
// maxWaitMs bounds a claim's long poll from the page.
const maxWaitMs = 10000;

function heldFor(topic, group) {
  const k = topic + '\u0000' + group;
  if (!held.has(k)) held.set(k, { worker: '', recs: new Map() });
  return held.get(k);
}

// reasonName shows an API reason (REASON_STALE_TOKEN) as logctl prints
// it (stale_token).
function reasonName(r) {
  return String(r || '').replace(/^REASON_/, '').toLowerCase();
}

function preview(b64) {
  if (b64 === undefined) return h('span', { class: 'nullv' }, 'null');
  const s = text(b64bytes(b64));
  return h('span', { class: 'clip', title: s.length > 200 ? s.slice(0, 200) + '…' : s }, s.length > 80 ? s.slice(0, 80) + '…' : s);
}

// claimPanel returns the panel; ctx.refresh() updates the page's counts
// after each action.
export function claimPanel(ctx, topic, group) {
  const st = heldFor(topic, group);
  const maxIn = h('input', { type: 'number', id: 'claim-max', min: 1, max: maxClaim, value: '1', class: 'narrow' });
  const leaseIn = h('input', { type: 'text', id: 'claim-lease', placeholder: "group's", autocomplete: 'off', class: 'narrow' });
  const workerIn = h('input', { type: 'text', id: 'claim-worker', autocomplete: 'off', maxlength: 128, size: 30, value: st.worker });
  const waitIn = h('input', { type: 'text', id: 'claim-wait', placeholder: '0s', autocomplete: 'off', class: 'narrow' });
  const claimBtn = h('button', { type: 'submit', class: 'primary', id: 'claim-submit' }, 'Claim');
  const result = h('div', { id: 'claim-result', role: 'status' });
  const box = h('div', { id: 'claim-held' });
  const form = h('form', { id: 'claim-form', class: 'toolbar' },
    field('Records (--max)', maxIn), field('Lease (--lease)', leaseIn, "empty: the group's"),
    field('Worker (--worker)', workerIn), field('Wait (--wait)', waitIn, 'at most 10s'), claimBtn);
  const panel = h('section', { class: 'panel', id: 'claim-panel' },
    h('p', { class: 'note', id: 'claim-note' },
      'Records claimed here are leased to this tab as a worker, as logctl queue claim leases them. ',
      'Settle each one: Ack finishes it, Nack retries it after the backoff (or a delay), Reject dead-letters it, ',
      'Extend renews its lease. A record left unsettled comes back to the queue when its lease ends. ',
      'The delivery tokens are kept in this tab\'s memory only: reloading the tab forgets them.'),
    form, result, box);

  if (!st.worker) {
    call('WhoAmI', {}, { signal: ctx.signal }).then(me => {
      if (!st.worker) st.worker = 'console/' + (me.principal || 'anonymous');
      if (!workerIn.value) workerIn.value = st.worker;
    }, e => ctx.fail(e));
  }

  const selected = new Set();

  // show reports an action: one row per token result, a refusal with
  // its typed reason; a call refused whole shows the API's error.
  const show = (what, rows) => {
    replace(result, h('p', null, what),
      table([
        { label: 'Record', value: r => r.rec ? r.rec.partition + '@' + r.rec.offset : '—' },
        { label: 'Result', value: r => r.err ? h('span', { class: 'tag bad' }, reasonName(r.err)) : h('span', { class: 'tag ok' }, r.duplicate ? 'duplicate' : 'ok') },
        { label: 'Detail', value: r => r.detail },
      ], rows, { class: 'claim-results' }));
  };

  const draw = () => {
    const now = Date.now();
    const recs = [...st.recs.values()];
    for (const t of [...selected]) if (!st.recs.has(t)) selected.delete(t);
    const all = h('input', { type: 'checkbox', id: 'claim-select-all', 'aria-label': 'Select all held records',
      checked: recs.length > 0 && selected.size === recs.length });
    all.addEventListener('change', () => {
      selected.clear();
      if (all.checked) for (const r of recs) selected.add(r.token);
      draw();
    });
    const t = table([
      { label: all, value: r => {
        const c = h('input', { type: 'checkbox', class: 'claim-select', 'aria-label': 'Select ' + r.partition + '@' + r.offset, checked: selected.has(r.token) });
        c.addEventListener('change', () => { if (c.checked) selected.add(r.token); else selected.delete(r.token); drawBulk(); });
        return c;
      } },
      { label: 'Partition', num: true, value: r => String(r.partition) },
      { label: 'Offset', num: true, value: r => fmtNum(r.offset) },
      { label: 'Delivery', num: true, value: r => String(r.delivery) },
      { label: 'Key', value: r => r.key === undefined ? h('span', { class: 'nullv' }, 'null') : h('code', null, text(b64bytes(r.key))) },
      { label: 'Value', value: r => preview(r.value) },
      { label: 'Lease until', value: r => [fmtTime(r.leaseUntil), ' ', r.leaseUntil > now
        ? h('span', { class: 'countdown', dataset: { until: r.leaseUntil } }, 'in ' + fmtDuration(r.leaseUntil - now))
        : h('span', { class: 'tag warn' }, 'lease ended: the record is back in the queue')] },
      { label: 'State', value: r => r.stale ? h('span', { class: 'tag bad', title: r.stale }, 'refused: ' + r.staleReason) : '' },
      { label: '', value: r => h('span', { class: 'row-actions' },
        h('button', { type: 'button', class: 'claim-ack', onclick: () => ack([r.token]) }, 'Ack'), ' ',
        h('button', { type: 'button', class: 'claim-nack', onclick: () => nackDialog([r.token], false) }, 'Nack…'), ' ',
        h('button', { type: 'button', class: 'claim-reject danger', onclick: () => nackDialog([r.token], true) }, 'Reject…'), ' ',
        h('button', { type: 'button', class: 'claim-extend', onclick: () => extend([r.token]) }, 'Extend'), ' ',
        h('button', { type: 'button', class: 'claim-forget', title: 'Drop the token from this tab; the lease runs out by itself',
          onclick: () => { st.recs.delete(r.token); draw(); } }, 'Forget')) },
    ], recs, { class: 'claim-table', empty: 'No records held by this tab.',
      rowProps: r => ({ dataset: { record: r.partition + '@' + r.offset } }) });
    t.id = 'claim-table';
    replace(box, bulk, t);
    drawBulk();
  };

  const bulkAck = h('button', { type: 'button', id: 'claim-ack-selected', onclick: () => ack([...selected]) }, 'Ack selected');
  const bulkNack = h('button', { type: 'button', id: 'claim-nack-selected', onclick: () => nackDialog([...selected], false) }, 'Nack selected…');
  const bulkReject = h('button', { type: 'button', class: 'danger', id: 'claim-reject-selected', onclick: () => nackDialog([...selected], true) }, 'Reject selected…');
  const bulkExtend = h('button', { type: 'button', id: 'claim-extend-selected', onclick: () => extend([...selected]) }, 'Extend selected');
  const bulkCount = h('span', { class: 'muted', id: 'claim-selected-count' });
  const bulk = h('div', { class: 'toolbar', id: 'claim-bulk' }, bulkAck, bulkNack, bulkReject, bulkExtend, bulkCount);
  const drawBulk = () => {
    for (const b of [bulkAck, bulkNack, bulkReject, bulkExtend]) b.disabled = selected.size === 0;
    bulkCount.textContent = selected.size + ' of ' + st.recs.size + ' selected';
  };

  // settle runs an ack, nack or extend and applies its token results:
  // done records leave the table, refused ones stay marked with the
  // reason; a call the node refused whole marks them all.
  const settle = async (what, tokens, run, onOk) => {
    if (tokens.length === 0) return;
    try {
      const r = await run();
      const rows = (r.results || []).map(x => {
        const rec = st.recs.get(x.token);
        if (x.error) {
          if (rec) { rec.stale = x.message || reasonName(x.error); rec.staleReason = reasonName(x.error); }
          return { rec, err: x.error, detail: x.message || '' };
        }
        return { rec, duplicate: x.duplicate, detail: onOk(x, rec) };
      });
      show(what + ': ' + rows.filter(x => !x.err).length + ' of ' + rows.length + ' accepted.', rows);
    } catch (e) {
      if (e && e.name === 'AbortError') return;
      // The node's message quotes the first stale token; the panel shows
      // the record instead.
      let message = e.message || String(e);
      for (const t of tokens) {
        const rec = st.recs.get(t);
        if (rec) message = message.split(t).join('of ' + rec.partition + '@' + rec.offset);
      }
      for (const t of tokens) {
        const rec = st.recs.get(t);
        if (rec && e.reason) { rec.stale = message; rec.staleReason = reasonName(e.reason); }
      }
      replace(result, errorBox({ code: e.code, reason: e.reason, message }));
    }
    draw();
    ctx.refresh();
  };

  const ack = tokens => settle('Ack', tokens, () => call('Ack', { topic, group, tokens }), x => {
    st.recs.delete(x.token);
    return x.duplicate ? 'already acked' : 'acked';
  });

  const extend = tokens => {
    let leaseMs = 0;
    const raw = leaseIn.value.trim();
    if (raw) {
      leaseMs = parseDuration(raw);
      if (leaseMs === null) { replace(result, errorBox({ code: 'invalid_argument', message: 'lease "' + raw + '" is not a duration (e.g. 30s, 5m)' })); return; }
    }
    return settle('Extend', tokens, () => call('Extend', { topic, group, tokens, leaseMs: String(leaseMs) }), (x, rec) => {
      if (rec) { rec.leaseUntil = num(x.leaseDeadlineMs); rec.stale = ''; }
      return 'lease until ' + fmtTime(num(x.leaseDeadlineMs));
    });
  };

  const nack = (tokens, permanent, reason, delayMs) => settle(permanent ? 'Reject' : 'Nack', tokens, () => call('Nack', {
    topic, group, nacks: tokens.map(token => {
      const n = { token, permanent, error: reason };
      if (delayMs !== null) n.delayMs = String(delayMs);
      return n;
    }),
  }), x => {
    st.recs.delete(x.token);
    if (x.deadLettered) return 'dead-lettered';
    return x.duplicate ? 'already settled' : 'available at ' + fmtTime(num(x.availableAtMs));
  });

  // nackDialog asks for the reason (and a delay, or, to reject, the
  // explicit confirmation) before a nack.
  const nackDialog = (tokens, permanent) => {
    if (tokens.length === 0) return;
    const reason = h('input', { type: 'text', id: 'nack-reason', autocomplete: 'off', size: 40 });
    const delay = permanent ? null : h('input', { type: 'text', id: 'nack-delay', autocomplete: 'off', placeholder: 'backoff', class: 'narrow' });
    const err = h('div', { id: 'nack-error' });
    const n = tokens.length === 1 ? 'this record' : tokens.length + ' records';
    const form = h('form', { method: 'dialog' },
      h('h2', null, permanent ? 'Reject ' + n : 'Nack ' + n),
      h('p', null, permanent
        ? 'Rejecting dead-letters ' + n + ' at once with the reason rejected, no retries (logctl queue nack --permanent).'
        : 'The record is offered again after the group\'s backoff, or after the delay given; after its last allowed delivery it is dead-lettered (logctl queue nack).'),
      field('Reason (--reason)', reason, 'kept as the record\'s last error'),
      delay ? field('Delay (--delay)', delay, 'empty: the group\'s backoff') : null,
      err,
      h('div', { class: 'actions' },
        h('button', { type: 'button', id: 'nack-cancel', onclick: () => dlg.close() }, 'Cancel'),
        h('button', { type: 'submit', id: 'nack-ok', class: permanent ? 'danger' : 'primary' }, permanent ? 'Reject (dead-letter)' : 'Nack')));
    const dlg = h('dialog', { class: 'confirm', id: 'nack-dialog' }, form);
    form.addEventListener('submit', e => {
      e.preventDefault();
      let delayMs = null;
      if (delay && delay.value.trim()) {
        delayMs = parseDuration(delay.value);
        if (delayMs === null) { replace(err, errorBox({ code: 'invalid_argument', message: 'delay "' + delay.value + '" is not a duration (e.g. 10s, 5m)' })); return; }
      }
      dlg.close();
      nack(tokens, permanent, reason.value.trim(), delayMs);
    });
    dlg.addEventListener('close', () => dlg.remove());
    document.body.appendChild(dlg);
    dlg.showModal();
    reason.focus();
  };

  form.addEventListener('submit', async e => {
    e.preventDefault();
    const max = Number(maxIn.value);
    let leaseMs = 0, waitMs = 0;
    try {
      if (!Number.isInteger(max) || max < 1 || max > maxClaim) throw new Error('records: 1 to ' + fmtNum(maxClaim));
      if (leaseIn.value.trim()) {
        leaseMs = parseDuration(leaseIn.value);
        if (leaseMs === null) throw new Error('lease "' + leaseIn.value + '" is not a duration (e.g. 30s, 5m)');
      }
      if (waitIn.value.trim()) {
        waitMs = parseDuration(waitIn.value);
        if (waitMs === null || waitMs > maxWaitMs) throw new Error('wait "' + waitIn.value + '": a duration of at most 10s');
      }
    } catch (err) {
      replace(result, errorBox({ code: 'invalid_argument', message: err.message }));
      return;
    }
    st.worker = workerIn.value.trim();
    claimBtn.disabled = true;
    replace(result, h('p', { class: 'muted' }, waitMs ? 'Claiming (waiting up to ' + fmtDuration(waitMs) + ')…' : 'Claiming…'));
    try {
      const r = await call('Claim', { topic, group, maxRecords: max, leaseMs: String(leaseMs), maxWaitMs: waitMs, worker: st.worker }, { signal: ctx.signal });
      const recs = r.records || [];
      for (const c of recs) {
        st.recs.set(c.token, { token: c.token, partition: c.partition || 0, offset: num(c.offset), delivery: c.deliveryCount || 0,
          key: c.key, value: c.value, leaseUntil: num(c.leaseDeadlineMs), stale: '', staleReason: '' });
      }
      const notes = [];
      if (r.paused) notes.push('the group is paused: it delivers nothing until resumed');
      if ((r.atCapPartitions || []).length) notes.push('partitions at the in-flight cap: ' + r.atCapPartitions.join(', '));
      if (r.deadLettered) notes.push(r.deadLettered + ' record(s) dead-lettered by this claim (deadline, age limit or last lease)');
      replace(result, h('p', { class: recs.length ? 'ok' : 'muted', id: 'claim-outcome' },
        recs.length ? 'Claimed ' + recs.length + ' record(s) as ' + (st.worker || 'no worker') + '.' : 'Nothing claimable.',
        notes.length ? ' ' + notes.join('; ') + '.' : ''));
    } catch (err) {
      if (err && err.name === 'AbortError') return;
      replace(result, errorBox(err));
    } finally {
      claimBtn.disabled = false;
    }
    draw();
    ctx.refresh();
  });

  // The countdowns move every second while the page is shown; the table
  // is redrawn only when a lease ends, so a click is never lost to it.
  const tick = setInterval(() => {
    const now = Date.now();
    let ended = false;
    for (const el of box.querySelectorAll('.countdown')) {
      const until = Number(el.dataset.until);
      if (until > now) el.textContent = 'in ' + fmtDuration(until - now);
      else ended = true;
    }
    if (ended) draw();
  }, 1000);
  ctx.signal.addEventListener('abort', () => clearInterval(tick));
  draw();
  return panel;
}
