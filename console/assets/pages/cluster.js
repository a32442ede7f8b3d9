import { call, num } from '../api.js';
import { h, replace, table, fmtNum } from '../ui.js';

// The cluster as this node sees it: its role, term, indexes and members.
export default {
  path: 'cluster',
  nav: 'Cluster',
  async render(ctx) {
    const summary = h('div', { class: 'cards', id: 'cluster-summary' });
    const members = h('div', { id: 'cluster-members' });
    replace(ctx.view, h('h1', null, 'Cluster'), summary, h('h2', null, 'Members'), members);
    ctx.every(async () => {
      const s = await call('Status', {}, { signal: ctx.signal });
      document.getElementById('node').textContent = 'node ' + s.nodeId + ' (' + s.state + ')';
      replace(summary,
        card('This node', s.nodeId, s.state + (s.ready ? ', ready' : ', catching up')),
        card('Leader', s.leaderId || 'none', s.leaderId ? s.leaderAddress : 'no leader known'),
        card('Term', fmtNum(num(s.term))),
        card('Commit index', fmtNum(num(s.commitIndex)), 'applied ' + fmtNum(num(s.appliedIndex)) + ', last ' + fmtNum(num(s.lastLogIndex))),
        card('Feature level', String(s.clusterLevel || 0), 'build ' + (s.buildLevel || 0) + ', applied ' + (s.appliedLevel || 0)));
      replace(members, table([
        { label: 'Node', value: m => m.id },
        { label: 'Role', value: m => (m.id === s.leaderId ? 'leader' : 'follower') + (m.suffrage && m.suffrage !== 'Voter' ? ' (' + m.suffrage + ')' : '') },
        { label: 'Raft address', value: m => m.raftAddress },
        { label: 'API address', value: m => m.apiAddress || '—' },
        { label: 'Level', num: true, value: m => String(m.featureLevel || 0) },
      ], s.members || []));
    });
  },
};

function card(label, value, sub) {
  return h('div', { class: 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), sub ? h('div', { class: 'sub' }, sub) : null);
}
