// The API client and small helpers every view uses. The token lives in sessionStorage (gone
// when the tab closes) and travels only in the Authorization header, never in a URL.

export const session = {
  get token() { return sessionStorage.getItem('gpufleet.token') || ''; },
  set token(t) {
    if (t) sessionStorage.setItem('gpufleet.token', t); else sessionStorage.removeItem('gpufleet.token');
  },
  who: null, // {name, role, clusters} from /api/v1/whoami
};

const roles = { viewer: 0, operator: 1, admin: 2 };
// Whether the signed-in token's role reaches `role`: what the page shows controls by. The
// server checks again on every call.
export function can(role) {
  return session.who != null && roles[session.who.role] >= roles[role];
}

export class ApiError extends Error {
  constructor(status, message, body) { super(message); this.status = status; this.body = body; }
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

// fetch + JSON; a non-2xx reply throws ApiError with the server's message.
// `type`: the body is text of that Content-Type (an asset file's CSV), sent as it is.
export async function api(path, { method = 'GET', body, type } = {}) {
  const headers = { Authorization: 'Bearer ' + session.token };
  if (body !== undefined) headers['Content-Type'] = type || 'application/json';
  const sent = body === undefined ? undefined : type ? body : JSON.stringify(body);
  const r = await fetch(path, { method, headers, body: sent });
  let data = null;
  const text = await r.text();
  if (text) { try { data = JSON.parse(text); } catch { data = { raw: text }; } }
  if (!r.ok) {
    const message = data?.error?.message || `${method} ${path}: HTTP ${r.status}`;
    if (r.status === 401) onUnauthorized(message);
    throw new ApiError(r.status, message, data);
  }
  return data;
}

// Saves the CSV that `path` answers as the file `name` (the browser's download).
export async function downloadCsv(path, name) {
  const d = await api(path);
  const url = URL.createObjectURL(new Blob([d?.raw ?? ''], { type: 'text/csv' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');

export function ago(iso) {
  if (!iso) return '';
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function fmtTime(iso) {
  return iso ? new Date(iso).toLocaleString() : '';
}

export function simPill(simulated) {
  return simulated ? ' <span class="pill sim" title="a simulated node, not real hardware">simulated</span>' : '';
}

// A sortable, filterable table: columns [{key, label, num, html(row)}]; re-rendering keeps the
// sort and the filter text.
export class Table {
  constructor(container, columns, { filterPlaceholder = 'filter', rowKey } = {}) {
    this.columns = columns;
    this.rows = [];
    this.sort = { key: columns[0].key, dir: 1 };
    this.rowKey = rowKey;
    container.innerHTML = `<div class="row" style="margin-bottom:6px"><input type="search" placeholder="${esc(filterPlaceholder)}"
      aria-label="filter"><span class="muted count"></span></div><div class="table-wrap"><table><thead><tr>${columns
      .map((c) => `<th class="sortable" data-key="${esc(c.key)}">${esc(c.label)}</th>`).join('')}</tr></thead><tbody></tbody></table></div><button type="button" class="more" hidden></button>`;
    this.filter = container.querySelector('input');
    this.count = container.querySelector('.count');
    this.body = container.querySelector('tbody');
    this.heads = [...container.querySelectorAll('th')];
    this.more = container.querySelector('button.more');
    this.more.addEventListener('click', () => { this.showAll = true; this.render(); });
    this.filter.addEventListener('input', () => this.render());
    for (const th of this.heads) {
      th.addEventListener('click', () => {
        const key = th.dataset.key;
        this.sort = { key, dir: this.sort.key === key ? -this.sort.dir : 1 };
        this.render();
      });
    }
  }
  set(rows) { this.rows = rows; this.render(); }
  render() {
    const q = this.filter.value.trim().toLowerCase();
    const { key, dir } = this.sort;
    const shown = this.rows.filter((r) => !q || this.columns.some((c) => String(r[c.key] ?? '').toLowerCase().includes(q)));
    shown.sort((a, b) => {
      const x = a[key] ?? '', y = b[key] ?? '';
      return (typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true })) * dir;
    });
    for (const th of this.heads) {
      th.classList.toggle('asc', th.dataset.key === key && dir > 0);
      th.classList.toggle('desc', th.dataset.key === key && dir < 0);
    }
    this.count.textContent = `${shown.length} of ${this.rows.length}`;
    // Thousands of rows cost more to lay out than anyone reads: the first 300, and a way to the rest.
    const cut = !this.showAll && shown.length > 300;
    const rows = cut ? shown.slice(0, 300) : shown;
    this.more.hidden = !cut;
    this.more.textContent = `show all ${shown.length} rows`;
    this.body.innerHTML = rows.map((r) => `<tr>${this.columns.map((c) =>
      `<td${c.num ? ' class="num"' : ''}>${c.html ? c.html(r) : esc(r[c.key])}</td>`).join('')}</tr>`).join('');
  }
}
