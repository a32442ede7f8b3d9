// @ts-check
import { call, num, ApiError } from '../api.js';
import { h, replace, table, fmtNum, duration, size } from '../ui.js';

// A follower that answered within this long is in contact (the leader
// hears each at least every tenth of the heartbeat timeout).
const contactMs = 5000;

// The cluster as this node sees it: health at a glance, its role, term,
// indexes and members; on the leader, each follower's lag and last
// contact (Status, docs/console.md).
export default {
  path: 'cluster',
  nav: 'Cluster',
  async render(ctx) {
    const health = h('ul', { class: 'health', id: 'cluster-health', 'aria-label': 'Health' });
    const summary = h('div', { class: 'cards', id: 'cluster-summary' });
    const note = h('div', { id: 'cluster-note' });
    const members = h('div', { id: 'cluster-members' });
    const groups = h('div', { id: 'cluster-groups' });
    const moves = h('div', { id: 'cluster-moves' });
    replace(ctx.view, h('h1', null, 'Cluster'), health, summary, note, h('h2', null, 'Members'), members, groups, moves);
    ctx.every(async () => {
      const s = await call('Status', {}, { signal: ctx.signal });
      document.getElementById('node').textContent = 'node ' + s.nodeId + ' (' + s.state + ')';
      const leads = s.leaderId && s.leaderId === s.nodeId;
      const followers = new Map((s.followers || []).map(f => [f.id, f]));
      replace(health, healthItems(s, leads));
      replace(summary,
        card('This node', s.nodeId, s.state + (s.ready ? ', ready' : ', catching up')),
        card('Leader', s.leaderId || 'none', s.leaderId ? s.leaderAddress : 'no leader known'),
        card('Term', fmtNum(num(s.term)), fmtNum(num(s.leaderChanges)) + (num(s.leaderChanges) === 1 ? ' leader change seen' : ' leader changes seen')),
        card('Commit index', fmtNum(num(s.commitIndex)), 'applied ' + fmtNum(num(s.appliedIndex)) + ', last ' + fmtNum(num(s.lastLogIndex))),
        s.disk ? card('Disk', [size(num(s.disk.availBytes)), ' free'], ['of ', size(num(s.disk.totalBytes)), ' (data directory)']) : null,
        card('Feature level', String(s.clusterLevel || 0), featureText(s)));
      replace(note, leads || !s.leaderId ? null : followerNote(s));
      replace(members, table([
        { label: 'Node', value: m => m.id + (m.id === s.nodeId ? ' (this node)' : '') },
        { label: 'Role', value: m => (m.id === s.leaderId ? 'leader' : 'follower') + (m.suffrage && m.suffrage !== 'Voter' ? ' (' + m.suffrage + ')' : '') },
        { label: 'Raft address', value: m => m.raftAddress },
        { label: 'API address', value: m => m.apiAddress || '—' },
        { label: 'Lag (entries)', num: true, value: m => followers.has(m.id) ? fmtNum(num(followers.get(m.id).lag)) : '—' },
        { label: 'Last contact', value: m => followers.has(m.id) ? contact(followers.get(m.id)) : '—' },
        { label: 'Level', num: true, value: m => String(m.featureLevel || 0) },
      ], s.members || [], { rowProps: m => ({ dataset: { node: m.id } }) }));
      replace(groups, placement(s));
      replace(moves, (s.dataGroups || []).length ? await replicaMoves(ctx) : null);
    });
  },
};

// featureText says in words what the feature levels mean
// (docs/architecture.md, "Rolling upgrades"): a build proposes a command
// of a level only once every member runs a build at that level.
function featureText(s) {
  const cluster = s.clusterLevel || 0, build = s.buildLevel || 0, applied = s.appliedLevel || 0;
  const parts = ['The cluster may use every feature up to level ' + cluster + ', the lowest level its members run.'];
  if (applied < cluster) {
    parts.push('The entries applied so far needed level ' + applied + ' at most; the first that needs a newer feature raises that.');
  }
  if (build > cluster) {
    parts.push('This node\'s build understands level ' + build + '; its newer features wait until every member runs it.');
  }
  const el = h('span', { id: 'feature-level-text', title: 'build ' + build + ', applied ' + applied + ', cluster ' + cluster }, parts.join(' '));
  return el;
}

// healthItems are the checks at a glance, each ok, warn or bad.
function healthItems(s, leads) {
  const items = [
    check(s.leaderId ? 'ok' : 'bad', s.leaderId ? 'Leader known: ' + s.leaderId : 'No leader known'),
    check(s.ready ? 'ok' : 'warn', s.ready ? 'Ready' : 'Catching up, not serving yet'),
  ];
  if (leads) {
    const fs = s.followers || [];
    const late = fs.filter(f => f.lastContactAgeMs === undefined || num(f.lastContactAgeMs) > contactMs);
    items.push(check(late.length === 0 ? 'ok' : 'bad', fs.length === 0
      ? 'No followers (a single node)'
      : late.length === 0
        ? 'All ' + fs.length + ' followers in contact within ' + contactMs / 1000 + ' s'
        : late.length + ' of ' + fs.length + ' followers out of contact: ' + late.map(f => f.id).join(', ')));
  } else if (s.leaderId) {
    items.push(check('muted', 'Follower contact: see the leader'));
  }
  if (s.disk && num(s.disk.totalBytes) > 0) {
    const free = num(s.disk.availBytes) / num(s.disk.totalBytes);
    items.push(check(free < 0.05 ? 'bad' : free < 0.15 ? 'warn' : 'ok', 'Disk ' + Math.round(free * 100) + '% free'));
  }
  return items;
}

function check(level, label) {
  const mark = { ok: '✓', warn: '!', bad: '✗', muted: '·' }[level];
  return h('li', { class: level, dataset: { level } }, h('span', { class: 'mark', 'aria-hidden': 'true' }, mark), ' ', label);
}

function contact(f) {
  if (f.lastContactAgeMs === undefined) return h('span', { class: 'bad' }, 'never (this term)');
  const ms = num(f.lastContactAgeMs);
  return h('span', { class: ms > contactMs ? 'bad' : null }, duration(ms), ' ago');
}

// followerNote says where the follower lags are: only the leader hears
// the followers, so its console shows them.
function followerNote(s) {
  const addr = s.leaderAddress || '';
  const url = addr && /^[A-Za-z0-9.\-\[\]:]+$/.test(addr) ? location.protocol + '//' + addr + '/ui/#/cluster' : '';
  return h('p', { class: 'note' }, 'This node is a follower: the leader ', s.leaderId, ' holds the follower lags and last contacts. ',
    url ? h('a', { href: url, id: 'leader-console', rel: 'noopener noreferrer' }, 'Open the leader\'s console') : 'Its API address is not known.');
}

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), sub ? h('div', { class: 'sub' }, sub) : null);
}

// placement shows the data groups (docs/architecture.md, "Data groups"):
// a grid of groups by members, each cell saying whether the member holds
// a replica of the group, is its preferred leader (listed first) and
// leads it, then how many groups each member leads. A leader is known for
// the groups this node holds a replica of; the others show "—".
function placement(s) {
  const gs = s.dataGroups || [];
  if (gs.length === 0) return null;
  const nodes = (s.members || []).map(m => m.id);
  for (const g of gs) for (const r of g.replicas || []) if (!nodes.includes(r)) nodes.push(r);
  const leads = new Map(nodes.map(n => [n, 0]));
  let unknown = 0;
  for (const g of gs) {
    if (g.leaderId) leads.set(g.leaderId, (leads.get(g.leaderId) || 0) + 1);
    else unknown++;
  }
  const cell = (g, n) => {
    const replicas = g.replicas || [];
    if (!replicas.includes(n)) return h('span', { class: 'muted' }, '·');
    const words = [g.leaderId === n ? 'leader' : 'replica'];
    if (replicas[0] === n) words.push('preferred');
    return h('span', { class: g.leaderId === n ? 'ok' : null, dataset: { role: words.join(' ') } }, words.join(', '));
  };
  const grid = table([
    { label: 'Group', num: true, value: g => String(num(g.id)) },
    ...nodes.map(n => ({ label: n, value: g => cell(g, n) })),
    { label: 'Leader', value: g => g.leaderId || '—' },
    { label: 'Voters', num: true, value: g => (g.voters || []).length ? String((g.voters || []).length) + ' of ' + (g.replicas || []).length : '—' },
    { label: 'Term', num: true, value: g => g.term ? fmtNum(num(g.term)) : '—' },
  ], gs, { class: 'placement', rowProps: g => ({ dataset: { group: String(num(g.id)) } }) });
  const perNode = h('p', { id: 'cluster-leads', class: 'note' }, 'Groups led: ',
    nodes.map(n => n + ' ' + leads.get(n)).join(', '),
    unknown ? ' (' + unknown + ' with a leader this node does not know: it holds no replica of them)' : '');
  return [h('h2', null, 'Data groups'), h('p', { class: 'note' }, gs.length + ' data groups hold the partitions of topics placed over them; each is a Raft group of its own.'), grid, perNode];
}

// replicaMoves shows the data group replica moves in progress
// (ListMoves, as logctl cluster moves): what each group gains and loses,
// why, since when, its voters as a replica reports them and what that
// means. A node that does not know the call (an older build) shows none.
async function replicaMoves(ctx) {
  let r;
  try {
    r = await call('ListMoves', {}, { signal: ctx.signal });
  } catch (e) {
    if (e instanceof ApiError && e.code === 'unimplemented') return null;
    throw e;
  }
  const grid = table([
    { label: 'Group', num: true, value: m => String(num(m.group)) },
    { label: 'Added', value: m => (m.added || []).join(', ') || '—' },
    { label: 'Removed', value: m => (m.removed || []).join(', ') || '—' },
    { label: 'Reason', value: m => m.reason },
    { label: 'Age', num: true, value: m => duration(num(m.ageMs)) },
    { label: 'Voters', value: m => (m.voters || []).join(', ') || '—' },
    { label: 'State', value: m => moveState(m) },
  ], r.moves || [], { class: 'moves', empty: 'No replica moves in progress.', rowProps: m => ({ dataset: { group: String(num(m.group)) } }) });
  return [h('h2', null, 'Replica moves'),
    h('p', { class: 'note' }, 'Groups whose replicas are changing (balancing, a join, a drain, a removal, a node not heard from): each adds its new replicas, lets them catch up and promotes them before it drops the old ones. As ', r.nodeId, ' knows them.'),
    grid];
}

// moveState says where a move stands from the group's voters: added
// replicas not voting yet, removed ones voting still; done when neither
// (the meta leader clears the mark at its next pass).
function moveState(m) {
  if (m.votersError || !(m.voters || []).length) {
    return h('span', { class: 'warn', title: m.votersError || '' }, 'unknown' + (m.votersError ? ': ' + m.votersError : ''));
  }
  const adding = (m.added || []).filter(id => !(m.addedVoters || []).includes(id));
  const removing = m.removedVoters || [];
  const parts = [];
  if (adding.length) parts.push('adding ' + adding.join(', '));
  if (removing.length) parts.push('removing ' + removing.join(', '));
  return parts.length ? parts.join('; ') : h('span', { class: 'ok' }, 'done');
}
