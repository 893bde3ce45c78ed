// Security: each node's exposure to NVIDIA's published CVEs (from the driver and Container
// Toolkit its agent reports, judged against the bulletins in effect), the fleet's CVEs, each
// pool's state with the rollout that fixes it (operators plan and start it here), and the
// bulletins themselves.

import { api, ago, can, esc, simPill, Table } from './api.js';
import { throttled } from './live.js';

const STATUS_LABEL = { ok: 'ok', exposed: 'exposed', unsupported_branch: 'unsupported branch' };
const score = (x) => Number(x).toFixed(1);
const sevClass = (x) => (x >= 9 ? 'critical' : x >= 7 ? 'warning' : '');

export function mount(el) {
  let gone = false;
  el.innerHTML = `<h2>Security</h2>
    <div class="totals" id="sec-totals">loading…</div>
    <p class="muted" id="sec-note"></p>
    <div class="panel"><h3 style="margin-top:0">What to fix, by cause</h3><div class="table-wrap" id="sec-causes"></div>
      <div class="table-wrap" id="sec-forbidden"></div></div>
    <div class="panel"><h3 style="margin-top:0">Pools</h3><div class="table-wrap" id="sec-pools"></div>
      <p class="error" id="sec-fix-error"></p><div id="sec-fix"></div></div>
    <div class="panel"><h3 style="margin-top:0">CVEs in the fleet</h3><div class="table-wrap" id="sec-cves"></div></div>
    <div class="panel"><h3 style="margin-top:0">Nodes</h3><div id="sec-nodes"></div></div>
    <div class="panel"><h3 style="margin-top:0">Bulletins</h3><div class="table-wrap" id="sec-bulletins"></div>
      <p class="muted">Load a new one from NVIDIA's CSAF document: <code>gpufleet bulletins import 5703.json</code> (admin).</p></div>
    <p class="error" id="sec-error"></p>`;
  const $ = (id) => document.getElementById(id);
  const nodes = new Table($('sec-nodes'), [
    { key: 'node', label: 'Node', html: (n) => `<a href="#/node/${encodeURIComponent(n.node)}">${esc(n.node)}</a>${simPill(n.simulated)}` },
    { key: 'pool', label: 'Pool' },
    { key: 'driver', label: 'Driver', html: (n) => `<code>${esc(n.driver ?? '—')}</code>` },
    { key: 'branch', label: 'Branch' },
    { key: 'container_toolkit', label: 'Toolkit' },
    { key: 'status', label: 'Status', html: (n) => `<span class="vuln-${esc(n.status)}">${esc(STATUS_LABEL[n.status] || n.status)}</span>` },
    { key: 'cve_count', label: 'CVEs', num: true },
    { key: 'max_cvss', label: 'Max CVSS', num: true, html: (n) => `<span class="${sevClass(n.max_cvss)}">${score(n.max_cvss)}</span>` },
    { key: 'fix', label: 'Fix' },
  ], { filterPlaceholder: 'filter nodes' });
  nodes.sort = { key: 'max_cvss', dir: -1 };

  function pools(rows) {
    $('sec-pools').innerHTML = `<table><thead><tr><th>Pool</th><th>Cluster</th><th class="num">Nodes</th><th class="num">Exposed</th>
      <th class="num">Unsupported branch</th><th class="num">Max CVSS</th><th></th></tr></thead><tbody>${rows.map((p) =>
      `<tr data-pool="${esc(p.pool)}"><td>${esc(p.pool)}</td><td>${esc(p.cluster)}</td><td class="num">${p.nodes}</td>
        <td class="num">${p.exposed}</td><td class="num">${p.unsupported_branch}</td><td class="num ${sevClass(p.max_cvss)}">${score(p.max_cvss)}</td>
        <td>${(p.exposed || p.unsupported_branch) && can('operator') ? `<button type="button" data-fix="${esc(p.pool)}">Propose fix</button>` : ''}</td></tr>`).join('')}</tbody></table>`;
    for (const b of $('sec-pools').querySelectorAll('button[data-fix]')) b.addEventListener('click', () => propose(b.dataset.fix));
  }

  // The fix: the proposal (target and nodes), the rollout's plan, and a button that starts it.
  async function propose(pool) {
    $('sec-fix-error').textContent = '';
    $('sec-fix').innerHTML = '';
    try {
      const p = await api(`/api/v1/vulnerabilities/fix?pool=${encodeURIComponent(pool)}`);
      const plan = await api('/api/v1/rollouts/plan', { method: 'POST', body: p.request });
      $('sec-fix').innerHTML = `<div data-fix-pool="${esc(p.pool)}">
        <p>Pool <b>${esc(p.pool)}</b>: driver <code id="sec-fix-target">${esc(p.target)}</code> (${esc(p.branch)}: ${esc(p.why)})
          fixes ${p.nodes.length} node(s): ${esc(p.nodes.slice(0, 8).join(', '))}${p.nodes.length > 8 ? ', …' : ''}</p>
        <p>The rollout: ${plan.stages.map((s) => `${esc(s.name)} (${s.count})`).join(' → ')}, ${plan.nodes} node(s),
          about ${Math.round(plan.expected_s / 60)} min with the default strategy.</p>
        ${plan.failed.length ? `<p class="error">The target fails ${plan.failed.length} compatibility rule(s): ${esc(plan.failed.map((f) => f.reason).join('; '))}</p>` : ''}
        <button type="button" class="primary" id="sec-fix-start">Start the rollout</button>
        <span class="muted">or tune its strategy on the <a href="#/rollouts">Rollouts</a> page</span></div>`;
      $('sec-fix-start').addEventListener('click', async () => {
        try {
          const r = await api('/api/v1/rollouts', { method: 'POST', body: p.request });
          location.hash = `#/rollouts/${r.id}`;
        } catch (e) { $('sec-fix-error').textContent = e.message; }
      });
    } catch (e) { $('sec-fix-error').textContent = e.message; }
  }

  // Forbidden packages are drift findings (the profile's packages.forbidden) and critical
  // security findings: listed here with the CVE causes. No drift detection: none listed.
  const forbiddenPackages = () => api('/api/v1/drift?severity=critical&limit=5000')
    .then((d) => d.items.filter((f) => f.state !== 'resolved' && f.fact.startsWith('package:')))
    .catch(() => []);

  async function load() {
    const [v, b, forbidden] = await Promise.all([api('/api/v1/vulnerabilities?limit=5000'), api('/api/v1/bulletins?limit=1000'), forbiddenPackages()]);
    if (gone) return;
    $('sec-causes').innerHTML = v.causes.length ? `<table><thead><tr><th>Driver</th><th>Toolkit</th><th>Status</th><th class="num">Nodes</th>
      <th class="num">CVEs</th><th class="num">Max CVSS</th><th>Fix</th><th>Pools</th></tr></thead><tbody>${v.causes.map((c) =>
      `<tr data-cause-driver="${esc(c.driver)}"><td><code>${esc(c.driver || 'unknown')}</code></td><td>${esc(c.container_toolkit || '—')}</td>
        <td><span class="vuln-${esc(c.status)}">${esc(STATUS_LABEL[c.status] || c.status)}</span></td><td class="num">${c.nodes}</td>
        <td class="num">${c.cve_count}</td><td class="num ${sevClass(c.max_cvss)}">${score(c.max_cvss)}</td><td>${esc(c.fix || '—')}</td>
        <td>${c.pools.map((p) => esc(p)).join(', ')}</td></tr>`).join('')}</tbody></table>`
      : '<p class="muted">Every node is on a supported driver with no published CVE.</p>';
    $('sec-forbidden').innerHTML = forbidden.length ? `<h4>Forbidden packages (critical)</h4><table id="sec-forbidden-table"><thead><tr><th>Node</th><th>Package</th><th>Version</th><th>Pool</th><th>Since</th></tr></thead>
      <tbody>${forbidden.map((f) => `<tr data-package="${esc(f.fact.slice(8))}"><td><a href="#/node/${encodeURIComponent(f.node)}">${esc(f.node)}</a></td>
        <td class="critical">${esc(f.fact.slice(8))}</td><td><code>${esc(f.actual)}</code></td><td>${esc(f.pool)}</td><td>${esc(ago(f.first_seen))}</td></tr>`).join('')}</tbody></table>
      <p class="muted">Installed against the pool's profile (<code>packages.forbidden</code>): remove them by hand; the finding resolves when the node reports it gone.</p>` : '';
    const s = v.summary;
    const total = (label, id, value, cls = '') => `<div class="total"><span class="muted">${label}</span><b id="${id}" class="${cls}">${value}</b></div>`;
    $('sec-totals').innerHTML = total('Nodes', 'sec-nodes-total', s.nodes) + total('OK', 'sec-ok', s.ok) +
      total('Exposed', 'sec-exposed', s.exposed, s.exposed ? 'warning' : '') +
      total('Unsupported branch', 'sec-unsupported', s.unsupported_branch, s.unsupported_branch ? 'critical' : '') +
      total('CVSS ≥ 9.0', 'sec-critical', s.critical, s.critical ? 'critical' : '') +
      total('Forbidden packages', 'sec-forbidden-total', forbidden.length, forbidden.length ? 'critical' : '');
    const sim = v.items.filter((n) => n.simulated).length;
    $('sec-note').textContent = `Judged on ${v.today} against ${b.total} bulletins.` +
      (sim ? ` ${sim} of these nodes are simulated: their versions are staged by the simulator.` : '') +
      (v.items.length < v.total ? ` The node table shows the first ${v.items.length} of ${v.total}.` : '');
    nodes.set(v.items.map((n) => ({ ...n, cve_count: n.cves.length })));
    pools(v.pools);
    $('sec-cves').innerHTML = v.cves.length ? `<table><thead><tr><th>CVE</th><th class="num">CVSS</th><th>Component</th><th>Bulletin</th>
      <th class="num">Nodes</th><th>Summary</th></tr></thead><tbody>${v.cves.map((c) =>
      `<tr data-cve="${esc(c.id)}"><td>${esc(c.id)}</td><td class="num ${sevClass(c.cvss)}">${score(c.cvss)}</td><td>${esc(c.component)}</td>
        <td>${esc(c.bulletin)}</td><td class="num">${c.nodes}</td><td>${esc(c.summary)}</td></tr>`).join('')}</tbody></table>`
      : '<p class="muted">No published CVE applies to any node.</p>';
    $('sec-bulletins').innerHTML = `<table><thead><tr><th>ID</th><th>Published</th><th>Product</th><th class="num">CVEs</th>
      <th class="num">Max CVSS</th><th>Origin</th></tr></thead><tbody>${b.items.map((x) =>
      `<tr><td>${esc(x.id)}</td><td>${esc(x.published)}</td><td>${esc(x.product)}</td><td class="num">${x.cve_count}</td>
        <td class="num ${sevClass(x.max_cvss)}">${score(x.max_cvss)}</td><td>${esc(x.origin)}</td></tr>`).join('')}</tbody></table>`;
  }

  const fail = (e) => { if (!gone) $('sec-error').textContent = e.message; };
  load().catch(fail);
  return {
    live: throttled(10000, load),
    unmount() { gone = true; },
  };
}
