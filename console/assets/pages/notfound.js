// @ts-check
import { h, replace, link } from '../ui.js';

// Any route no page claims.
export default {
  path: 'notfound',
  title: 'Not found',
  render(ctx) {
    replace(ctx.view, h('h1', null, 'Not found'),
      h('p', null, 'No page at ', h('code', null, '/' + ctx.route.parts.join('/')), '. ', link('/cluster', 'Back to the cluster')));
  },
};
