// Drift: the nodes that differ from their golden profile (the fleet file's `profile:`), each
// difference with its expected and actual values, severity, remediation and state; an operator
// plans and starts the rollout that fixes a driver or firmware finding here.

import { api, can, esc, ago, Table } from './api.js';
import { throttled } from './live.js';

const SEV_CLASS = { critical: 'critical', high: 'critical', medium: 'warning', low: '' };

export function mount(el) {
  let gone = false;
  el.innerHTML = `<h2>Drift</h2>
    <div class="totals" id="drift-totals">loading…</div>
    <p class="muted">Each node is compared with its pool's profile every few seconds; a fact it does not report is a finding
      (<code>unknown</code>), never a match. <code>gpufleet drift list</code></p>
    <div class="panel"><h3 style="margin-top:0">By cause</h3><div class="table-wrap" id="drift-causes"></div></div>
    <div class="panel"><h3 style="margin-top:0">Findings</h3>
      <div class="row" style="margin-bottom:6px"><label>State <select id="drift-state">
        <option value="">unresolved</option><option value="open">open</option><option value="remediating">remediating</option>
        <option value="resolved">resolved</option><option value="all">all</option></select></label></div>
      <div id="drift-list"></div><p class="error" id="drift-fix-error"></p><div id="drift-fix"></div></div>
    <p class="error" id="drift-error"></p>`;
  const $ = (id) => document.getElementById(id);
  const table = new Table($('drift-list'), [
    { key: 'id', label: '#', num: true },
    { key: 'node', label: 'Node', html: (f) => `<a href="#/node/${encodeURIComponent(f.node)}">${esc(f.node)}</a>${f.gpu !== null ? ` GPU ${f.gpu}` : ''}` },
    { key: 'pool', label: 'Pool' },
    { key: 'fact', label: 'Fact' },
    { key: 'expected', label: 'Expected', html: (f) => `<code>${esc(f.expected)}</code>` },
    { key: 'actual', label: 'Actual', html: (f) => `<code>${esc(f.actual)}</code>` },
    { key: 'severity_rank', label: 'Severity', num: true, html: (f) => `<span class="${SEV_CLASS[f.severity] || ''}">${esc(f.severity)}</span>` },
    { key: 'remediation', label: 'Remediation', html: (f) => f.remediation === 'rollout' && f.state === 'open' && can('operator')
      ? `<button type="button" data-fix="${f.id}">Plan the rollout</button>` : esc(f.remediation) },
    { key: 'state', label: 'State', html: (f) => `<span data-state="${esc(f.state)}">${esc(f.state)}</span>`
      + (f.note ? `<div class="muted" title="what remediation did last">${esc(f.note)}</div>` : '') },
    { key: 'first_seen', label: 'Since', html: (f) => esc(f.resolved_at ? 'resolved ' + ago(f.resolved_at) : ago(f.first_seen)) },
  ], { filterPlaceholder: 'filter findings', rowKey: (f) => f.id });
  table.sort = { key: 'severity_rank', dir: -1 };
  $('drift-list').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-fix]');
    if (b) propose(b.dataset.fix);
  });

  async function propose(id) {
    $('drift-fix-error').textContent = '';
    $('drift-fix').innerHTML = '';
    try {
      const r = await api(`/api/v1/drift/${id}/remediation`);
      if (!r.request) { $('drift-fix').innerHTML = `<p>${esc(r.why)}</p>`; return; }
      const plan = await api('/api/v1/rollouts/plan', { method: 'POST', body: r.request });
      $('drift-fix').innerHTML = `<div data-fix-finding="${esc(id)}"><p id="drift-fix-why">${esc(r.why)}</p>
        ${plan.failed.length ? `<p class="error">The target fails ${plan.failed.length} compatibility rule(s): ${esc(plan.failed.map((f) => f.reason).join('; '))}</p>` : ''}
        <button type="button" class="primary" id="drift-fix-start">Start the rollout</button></div>`;
      $('drift-fix-start').addEventListener('click', async () => {
        try {
          const started = await api('/api/v1/rollouts', { method: 'POST', body: r.request });
          location.hash = `#/rollouts/${started.id}`;
        } catch (e) { $('drift-fix-error').textContent = e.message; }
      });
    } catch (e) { $('drift-fix-error').textContent = e.message; }
  }

  const RANK = { critical: 4, high: 3, medium: 2, low: 1 };
  async function load() {
    const state = $('drift-state').value;
    const q = state === 'all' ? '' : state ? `&state=${state}` : '';
    const v = await api(`/api/v1/drift?limit=5000${q}`);
    if (gone) return;
    const s = v.summary;
    const total = (label, id, value, cls = '') => `<div class="total"><span class="muted">${label}</span><b id="${id}" class="${cls}">${value}</b></div>`;
    $('drift-totals').innerHTML = total('Nodes drifted', 'drift-nodes', s.nodes_drifted, s.nodes_drifted ? 'warning' : '') +
      total('Open', 'drift-open', s.open) + total('Remediating', 'drift-remediating', s.remediating) +
      total('High or critical', 'drift-high', s.by_severity.critical + s.by_severity.high, s.by_severity.critical + s.by_severity.high ? 'critical' : '') +
      total('Resolved', 'drift-resolved', s.resolved);
    // One row per cause (the same fact, expected and actual on many nodes): what fixes them all.
    $('drift-causes').innerHTML = v.causes.length ? `<table><thead><tr><th>Severity</th><th>Fact</th><th>Actual</th><th>Expected</th>
      <th class="num">Nodes</th><th>Pools</th><th>Fix</th></tr></thead><tbody>${v.causes.map((c) =>
      `<tr data-cause="${esc(c.fact)}" data-severity="${esc(c.severity)}" title="${esc(c.node_names.join(', ') + (c.nodes > c.node_names.length ? ', …' : ''))}">
        <td><span class="${SEV_CLASS[c.severity] || ''}">${esc(c.severity)}</span></td><td>${esc(c.fact)}</td><td><code>${esc(c.actual)}</code></td>
        <td><code>${esc(c.expected)}</code></td><td class="num">${c.nodes}</td><td>${esc(c.pools.join(', '))}</td>
        <td>${esc(c.summary.slice(c.summary.indexOf('→') + 2))}</td></tr>`).join('')}</tbody></table>`
      : '<p class="muted">No node differs from its profile.</p>';
    const rows = state === '' ? v.items.filter((f) => f.state !== 'resolved') : v.items;
    table.set(rows.map((f) => ({ ...f, severity_rank: RANK[f.severity] || 0 })));
  }
  $('drift-state').addEventListener('change', () => load().catch(fail));

  const fail = (e) => { if (!gone) $('drift-error').textContent = e.message; };
  load().catch(fail);
  return {
    live: throttled(10000, load),
    unmount() { gone = true; },
  };
}
