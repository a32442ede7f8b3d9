// @ts-check
import { h, replace, table } from '../ui.js';
import { pages } from '../pages.js';

// The keys page: what each key does.
export default {
  path: 'help',
  title: 'Keys',
  render(ctx) {
    const keys = [
      ...pages.filter(p => p.nav).map((p, i) => [String(i + 1), 'open ' + p.nav]),
      ['p', 'pause or resume live updates'],
      ['t', 'switch light / dark'],
      ['/', 'focus the page\'s filter'],
      ['?', 'this page'],
    ];
    replace(ctx.view, h('h1', null, 'Keyboard'),
      table([{ label: 'Key', value: r => h('kbd', null, r[0]) }, { label: 'Does', value: r => r[1] }], keys));
  },
};
