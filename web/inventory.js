// Inventory: the asset register. Counts of GPUs by model, site and lifecycle state, the
// warranties that end within 90 days, the GPUs' ages, every asset (sortable, filterable), one
// asset's history (#/inventory/ID), and for operators the NetBox-column CSV import and the
// lifecycle steps.

import { api, can, downloadCsv, esc, simPill, Table } from './api.js';
import { throttled } from './live.js';

const STATES = ['in_service', 'spare', 'rma', 'retired'];
const LABEL = { in_service: 'in service', spare: 'spare', rma: 'RMA', retired: 'retired' };
const days = (d) => (d == null ? '–' : d < 0 ? `${-d} d ago` : `${d} d`);
const years = (d) => (d == null ? '–' : (d / 365.25).toFixed(1) + ' y');
const where = (a) => (a.node ? (a.kind === 'gpu' ? `${a.node}:${a.gpu_index}` : a.node) : a.last_node ? `(was ${a.last_node})` : '–');
const bar = (share) => `<div class="rbar"><span style="width:${Math.max(0, Math.min(1, share || 0)) * 100}%"></span></div>`;

// A count table with bars: [[label, n], ...].
function counts(title, entries, total, label = (k) => esc(k)) {
  const rows = entries.sort((x, y) => y[1] - x[1]).map(([k, n]) =>
    `<tr><td>${label(k)}</td><td class="num">${n}</td><td>${bar(total ? n / total : 0)}</td></tr>`).join('');
  return `<div><h4>${esc(title)}</h4><table class="inv-counts"><tbody>${rows || '<tr><td class="muted">none</td></tr>'}</tbody></table></div>`;
}

export function mount(el, params) {
  let gone = false;
  const operator = can('operator');
  el.innerHTML = `<h2>Inventory</h2>
    <p class="muted">Every GPU (by its board serial, wherever it moves) and node the agents report is in the register; purchase dates, prices, warranties and rack positions come from imports (NetBox's device columns: <code>gpufleet assets import FILE.csv</code>). <code>gpufleet up</code>'s demo imports made-up ones for its simulated fleet.</p>
    <section class="panel" id="inv-detail" hidden></section>
    <section class="panel"><h3>Assets</h3><div class="inv-stats" id="inv-cards">loading…</div><div class="inv-grid" id="inv-counts"></div></section>
    <section class="panel" id="inv-warranty"><h3>Warranties ending within 90 days</h3><div class="table-wrap">loading…</div></section>
    <section class="panel"><h3>All assets</h3><div id="inv-table"></div>
      <div class="row no-print" style="margin-top:8px"><button type="button" id="inv-export">Export CSV</button>
      ${operator ? `<label>Import <input type="file" id="inv-file" accept=".csv,.json,text/csv,application/json"></label>
      <button type="button" id="inv-check" disabled>Check</button><button type="button" id="inv-import" disabled>Import</button>` : ''}
      <span id="inv-import-result" class="muted"></span></div></section>
    <p class="error" id="inv-error"></p>`;
  const $ = (id) => document.getElementById(id);
  let simulated = new Set();

  const table = new Table($('inv-table'), [
    { key: 'id', label: 'Asset', html: (a) => `<a href="#/inventory/${encodeURIComponent(a.id)}">${esc(a.id)}</a>${simulated.has(a.node) ? simPill(true) : ''}` },
    { key: 'kind', label: 'Kind' },
    { key: 'model', label: 'Model' },
    { key: 'state', label: 'State', html: (a) => `<span class="pill state-${esc(a.state)}">${esc(LABEL[a.state] || a.state)}</span>` },
    { key: 'where', label: 'Where' },
    { key: 'site', label: 'Site' },
    { key: 'rack', label: 'Rack' },
    { key: 'asset_tag', label: 'Asset tag' },
    { key: 'purchase_date', label: 'Bought' },
    { key: 'age_days', label: 'Age', num: true, html: (a) => years(a.age_days) },
    { key: 'warranty_days_left', label: 'Warranty left', num: true, html: (a) => days(a.warranty_days_left) },
  ], { filterPlaceholder: 'filter: serial, model, node, rack…' });

  async function load() {
    const [summary, list, nodes] = await Promise.all([api('/api/v1/assets/summary'),
      api('/api/v1/assets?limit=5000'), api('/api/v1/nodes?limit=5000')]);
    if (gone) return;
    simulated = new Set(nodes.items.filter((n) => n.simulated).map((n) => n.name));
    const g = summary.gpus;
    const ageKnown = Object.entries(summary.gpu_age).filter(([k]) => k !== 'unknown');
    $('inv-cards').innerHTML = [
      ['GPUs', g.total], ['nodes', summary.nodes.total],
      ...STATES.map((s) => [`GPUs ${LABEL[s]}`, g.by_state[s] || 0]),
      ['warranties ending ≤ 90 d', summary.warranty_expiring.length],
      ['out of warranty', summary.warranty_expired],
      ['mean GPU age', summary.gpu_mean_age_years == null ? '–' : summary.gpu_mean_age_years.toFixed(1) + ' y'],
    ].map(([k, v]) => `<div class="stat"><div class="big">${esc(v)}</div><div class="muted">${esc(k)}</div></div>`).join('');
    const order = ['<1y', '1-2y', '2-3y', '3-4y', '4-5y', '5y+', 'unknown'];
    $('inv-counts').innerHTML = counts('By model', Object.entries(g.by_model), g.total)
      + counts('By site', Object.entries(g.by_site), g.total)
      + counts('By state', Object.entries(g.by_state), g.total, (k) => esc(LABEL[k] || k))
      + `<div><h4>By age (years since purchase)</h4><table class="inv-counts"><tbody>${order.filter((k) => summary.gpu_age[k])
        .map((k) => `<tr><td>${esc(k)}</td><td class="num">${summary.gpu_age[k]}</td><td>${bar(summary.gpu_age[k] / (g.total || 1))}</td></tr>`).join('')
        || '<tr><td class="muted">no purchase dates yet</td></tr>'}</tbody></table>${ageKnown.length ? '' : '<p class="muted">Import purchase dates to see ages.</p>'}</div>`;
    const w = summary.warranty_expiring;
    $('inv-warranty').querySelector('.table-wrap').innerHTML = w.length
      ? `<table><thead><tr><th>Asset</th><th>Kind</th><th>Model</th><th>Where</th><th>Site</th><th>Warranty end</th><th class="num">Left</th></tr></thead><tbody>${w.map((a) =>
        `<tr><td><a href="#/inventory/${encodeURIComponent(a.id)}">${esc(a.id)}</a></td><td>${esc(a.kind)}</td><td>${esc(a.model)}</td><td>${esc(where(a))}</td>
        <td>${esc(a.site)}</td><td>${esc(a.warranty_end)}</td><td class="num">${days(a.warranty_days_left)}</td></tr>`).join('')}</tbody></table>`
      : `<p class="muted">None in the next 90 days${summary.warranty_unknown ? ` (${summary.warranty_unknown} in service or spare have no warranty end recorded)` : ''}.</p>`;
    table.set(list.items.map((a) => ({ ...a, where: where(a) })));
  }

  async function detail(id) {
    const box = $('inv-detail');
    if (!id) { box.hidden = true; return; }
    const a = await api('/api/v1/assets/' + encodeURIComponent(id));
    if (gone) return;
    box.hidden = false;
    const field = (k, v) => `<tr><th>${esc(k)}</th><td>${v}</td></tr>`;
    box.innerHTML = `<h3>${esc(a.kind === 'gpu' ? 'GPU' : 'Node')} ${esc(a.id)}${simulated.has(a.node) ? simPill(true) : ''} <a class="muted" href="#/inventory">close</a></h3>
      <div class="inv-grid"><table class="kv"><tbody>
        ${field('state', `<span class="pill state-${esc(a.state)}">${esc(LABEL[a.state])}</span> <span class="muted">(NetBox: ${esc(a.status)})</span>`)}
        ${field('where', a.node ? `<a href="#/node/${encodeURIComponent(a.node)}">${esc(where(a))}</a>` : esc(where(a)))}
        ${field('model', esc(a.model))}${a.kind === 'gpu' ? field('UUID', `<code>${esc(a.gpu_uuid)}</code>`) : field('serial', esc(a.serial))}
        ${field('asset tag', esc(a.asset_tag))}${field('site / room / rack / U', [a.site, a.location, a.rack, a.position].map((x) => esc(x || '–')).join(' / '))}
        ${field('bought', `${esc(a.purchase_date || '–')}${a.purchase_price != null ? ` for ${esc(a.purchase_price.toLocaleString())}` : ''} (${years(a.age_days)})`)}
        ${field('warranty end', `${esc(a.warranty_end || '–')} (${days(a.warranty_days_left)} left)`)}
        ${a.comments ? field('comments', esc(a.comments)) : ''}
      </tbody></table>
      ${operator ? `<form id="inv-state" class="row"><label>Lifecycle <select name="state">${STATES.map((s) =>
        `<option value="${s}"${s === a.state ? ' selected' : ''}>${LABEL[s]}</option>`).join('')}</select></label>
        <input name="note" placeholder="note: RMA number, repair…" aria-label="note"><button type="submit">Set</button></form>` : ''}</div>
      <h4>History</h4><div class="table-wrap"><table><thead><tr><th>Time</th><th>Event</th><th>From</th><th>To</th><th>By</th><th>Note</th></tr></thead><tbody>${
        a.history.slice().reverse().map((e) => `<tr data-event="${esc(e.kind)}"><td>${esc(new Date(e.time_ms).toISOString().replace('T', ' ').slice(0, 19))}</td>
        <td>${esc(e.kind)}</td><td>${esc(e.from)}</td><td>${esc(e.to)}</td><td>${esc(e.actor)}</td><td>${esc(e.note)}</td></tr>`).join('')}</tbody></table></div>`;
    $('inv-state')?.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      api(`/api/v1/assets/${encodeURIComponent(id)}/state`, { method: 'POST', body: { state: f.get('state'), note: f.get('note') } })
        .then(() => Promise.all([detail(id), load()])).catch(fail);
    });
  }

  const fail = (e) => { if (!gone) $('inv-error').textContent = e.message; };
  $('inv-export').addEventListener('click', async () => {
    try {
      await downloadCsv('/api/v1/assets/export?format=csv', 'gpufleet-assets.csv');
    } catch (e) { fail(e); }
  });
  if (operator) {
    let text = '', type = 'text/csv';
    $('inv-file').addEventListener('change', async (ev) => {
      const f = ev.target.files[0];
      text = f ? await f.text() : '';
      type = f && f.name.endsWith('.json') ? 'application/json' : 'text/csv';
      $('inv-check').disabled = $('inv-import').disabled = !f;
      $('inv-import-result').textContent = '';
    });
    const send = async (dry) => {
      const out = $('inv-import-result');
      out.className = 'muted';
      try {
        const r = await api('/api/v1/assets/import' + (dry ? '?dry_run=true' : ''), { method: 'POST', body: text, type });
        out.textContent = `${dry ? 'would apply' : 'applied'} ${r.applied}: ${r.created} new, ${r.updated} changed, ${r.unchanged} unchanged`;
        if (!dry) await load();
      } catch (e) {
        out.className = 'error';
        out.textContent = `refused, nothing applied: ${e.message}`;
      }
    };
    $('inv-check').addEventListener('click', () => send(true));
    $('inv-import').addEventListener('click', () => send(false));
  }
  load().then(() => detail(params.id)).catch(fail);
  return {
    live: throttled(10000, load),
    unmount() { gone = true; },
  };
}
