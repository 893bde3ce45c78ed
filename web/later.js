// The navigation's places for capabilities that are not built yet. Each says plainly that the
// page does not exist yet and what it will show, so nobody mistakes it for an empty result.

import { esc } from './api.js';

const PAGES = {
  inventory: ['Inventory', 'Models, serials, locations, age and warranty, and configuration drift. (Security bulletins and the CVEs of each node are on the Security page.)'],
};

export function mount(el, params) {
  const [title, what] = PAGES[params.page] || [params.page, ''];
  el.innerHTML = `<h2>${esc(title)}</h2><div class="panel"><p><b>Not built yet.</b> This page will show: ${esc(what)}</p>
    <p class="muted">Until then the fleet's state is on the overview, cluster and node pages, and in the API (<code>/api/v1</code>) and the CLI.</p></div>`;
  return {};
}
