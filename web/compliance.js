// Compliance: per cluster and for the fleet, the share of nodes on a supported driver branch,
// free of drift, free of critical and high CVEs, with firmware at the profile, and whether the
// audit chain verifies; the daily trend; the nodes behind the figures with why they fail; both
// as CSV.

import { api, downloadCsv, esc, fmtTime, Table } from './api.js';
import { lineChart, destroyChart } from './charts.js';
import { throttled } from './live.js';

const CHECKS = [
  ['supported_branch', 'Supported branch'],
  ['drift_free', 'Free of drift'],
  ['cve_free', 'Free of critical/high CVEs'],
  ['firmware_at_profile', 'Firmware at profile'],
  ['audit_chain_verified', 'Audit chain verified'],
  ['compliant', 'Compliant'],
];
const pct = (x) => `${(100 * x).toFixed(1)}%`;
const cls = (x) => (x >= 0.999 ? '' : x >= 0.9 ? 'warning' : 'critical');

export function mount(el) {
  let gone = false;
  let chart = null;
  el.innerHTML = `<h2>Compliance</h2>
    <div class="totals" id="comp-totals">loading…</div>
    <p class="muted" id="comp-note"></p>
    <div class="panel"><h3 style="margin-top:0">Now</h3><div class="table-wrap" id="comp-scopes"></div>
      <p><button type="button" id="comp-csv">Download the trend (CSV)</button>
        <button type="button" id="comp-nodes-csv">Download the nodes (CSV)</button></p></div>
    <div class="panel"><h3 style="margin-top:0">Trend, fleet</h3><div id="comp-trend"></div>
      <p class="muted" id="comp-trend-note"></p></div>
    <div class="panel"><h3 style="margin-top:0">Nodes failing a check</h3><div id="comp-nodes"></div></div>
    <p class="error" id="comp-error"></p>`;
  const $ = (id) => document.getElementById(id);
  const nodes = new Table($('comp-nodes'), [
    { key: 'node', label: 'Node', html: (n) => `<a href="#/node/${encodeURIComponent(n.node)}">${esc(n.node)}</a>` },
    { key: 'cluster', label: 'Cluster' },
    { key: 'pool', label: 'Pool' },
    { key: 'fails', label: 'Fails', html: (n) => n.reasons.map((r) => `<div data-reason>${esc(r)}</div>`).join('') },
  ], { filterPlaceholder: 'filter nodes' });

  function scopes(v) {
    const row = (label, s, attrs) => `<tr ${attrs}><td>${label}</td><td class="num">${s.nodes}</td>${CHECKS.map(([k]) =>
      `<td class="num ${cls(s[k])}" data-share="${k}">${pct(s[k])}</td>`).join('')}</tr>`;
    $('comp-scopes').innerHTML = `<table><thead><tr><th>Scope</th><th class="num">Nodes</th>${CHECKS.map(([, l]) =>
      `<th class="num">${esc(l)}</th>`).join('')}</tr></thead><tbody>
      ${row('<b>Fleet</b>', v.fleet, 'data-scope="fleet"')}
      ${v.clusters.map((c) => row(`<a href="#/cluster/${encodeURIComponent(c.name)}">${esc(c.name)}</a>`, c, `data-scope="${esc(c.name)}"`)).join('')}
      </tbody></table>`;
  }

  function trend(v) {
    destroyChart(chart);
    chart = null;
    const box = $('comp-trend');
    box.innerHTML = '';
    const xs = v.series.map((d) => Date.parse(d.day + 'T12:00:00Z') / 1000);
    chart = lineChart(box, {
      unit: '%', xs, height: 220, yRange: [0, 100],
      // The days recorded, not an empty month: at least three days wide around one day.
      xRange: [xs[xs.length - 1] - 29 * 86400, xs[xs.length - 1] + 43200], minSpan: 3 * 86400,
      series: CHECKS.map(([k, l]) => ({ label: l, values: v.series.map((d) => 100 * d[k]) })),
    });
    $('comp-trend-note').textContent = v.series.length === 1
      ? `Recorded daily from the first day the controller ran; today's is now's. ${v.series[0].day} is the first day recorded.`
      : `${v.series.length} days, each as last measured that day (every ten minutes); today's is now's.`;
  }

  async function download(path, name) {
    $('comp-error').textContent = '';
    try {
      await downloadCsv(path, name);
    } catch (e) { $('comp-error').textContent = e.message; }
  }
  $('comp-csv').addEventListener('click', () => download('/api/v1/reports/compliance?format=csv&days=400', 'compliance.csv'));
  $('comp-nodes-csv').addEventListener('click', () => download('/api/v1/reports/compliance/nodes?format=csv', 'compliance-nodes.csv'));

  async function load() {
    const [v, failing] = await Promise.all([
      api('/api/v1/reports/compliance?days=90'),
      api('/api/v1/reports/compliance/nodes?failing=true&limit=5000'),
    ]);
    if (gone) return;
    const f = v.fleet;
    const total = (label, id, value, c = '') => `<div class="total"><span class="muted">${label}</span><b id="${id}" class="${c}">${value}</b></div>`;
    $('comp-totals').innerHTML = total('Compliant', 'comp-compliant', pct(f.compliant), cls(f.compliant)) +
      total('Nodes', 'comp-node-count', f.nodes) +
      total('Failing a check', 'comp-failing', failing.total, failing.total ? 'warning' : '') +
      total('Audit chain', 'comp-audit', v.audit.verified ? 'verified' : 'NOT verified', v.audit.verified ? '' : 'critical');
    $('comp-note').textContent = `Measured ${fmtTime(v.measured_at)}. A node is compliant when it is on a supported branch (known, not end of life, `
      + `not a new feature branch in a production pool), has no unresolved drift, no CVE of CVSS 7.0 or more, its firmware at the profile, `
      + `and the audit chain verifies${v.audit.verified ? ` (${v.audit.records} records)` : `: ${v.audit.problem}`}. gpufleet reports compliance`;
    scopes(v);
    trend(v);
    nodes.set(failing.items.map((n) => ({ ...n, fails: n.reasons.join('; ') })));
  }

  const fail = (e) => { if (!gone) $('comp-error').textContent = e.message; };
  load().catch(fail);
  return {
    live: throttled(30000, load),
    unmount() { gone = true; destroyChart(chart); },
  };
}
