// @ts-check
// The console's pages, in the order of the navigation bar (keys 1-9).
// A page is {path, nav (label in the bar, if any), render(ctx)}; see
// app.js for ctx.
import cluster from './pages/cluster.js';
import topics from './pages/topics.js';
import groups from './pages/groups.js';
import queues from './pages/queues.js';
import dlq from './pages/dlq.js';
import help from './pages/help.js';
import notfound from './pages/notfound.js';

export const pages = [
  cluster,
  topics,
  groups,
  queues,
  dlq,
  help,
  notfound,
];
