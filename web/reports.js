// Reports: over a period, utilization (GPU-hours allocated against used) and cost per team
// against its budget, energy per pool with the share spent by idle or unallocated GPUs, demand
// by hour of the week, queue waits per day, the optimization advice and the capacity plan. Each
// table but the last two can be saved as CSV; the page prints as a statement of the period (the
// browser's print).

import { api, downloadCsv, esc } from './api.js';
import { throttled } from './live.js';

const PERIODS = [['-7d', 'last 7 days'], ['-30d', 'last 30 days'], ['-90d', 'last 90 days'], ['-400d', 'last 13 months']];
const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

// Small figures keep three significant digits (a GPU-hour's fraction), larger ones `digits`.
const num = (v, digits = 1) => {
  if (v == null) return '–';
  const n = Number(v);
  return Math.abs(n) > 0 && Math.abs(n) < 10 ? n.toLocaleString(undefined, { maximumSignificantDigits: 3 })
    : n.toLocaleString(undefined, { maximumFractionDigits: digits });
};
const pct = (v) => (v == null ? '–' : `${(v * 100).toFixed(1)}%`);
const money = (v, currency) => (v == null ? '–'
  : `${Number(v).toLocaleString(undefined, { maximumFractionDigits: Math.abs(v) < 100 ? 2 : 0 })} ${esc(currency || '')}`);
// A bar of `share` (0..1) of the cell's width.
const bar = (share, cls = '') => `<div class="rbar ${cls}"><span style="width:${Math.max(0, Math.min(1, share || 0)) * 100}%"></span></div>`;

export function mount(el) {
  let gone = false;
  let from = '-30d';
  el.innerHTML = `<h2>Reports</h2>
    <div class="report-head no-print"><label>Period <select id="rep-period">${PERIODS.map(([v, t]) => `<option value="${v}"${v === from ? ' selected' : ''}>${t}</option>`).join('')}</select></label>
      <button id="rep-print" type="button">Print statement</button>
      <span class="muted">From the usage ledger (every allocation that ended, with what its GPUs did) and each pool's hours (GPUs installed, held and queued for, energy). Also <code>gpufleet reports …</code> and <code>/api/v1/reports/…</code>.</span></div>
    <p class="muted" id="rep-period-text"></p>
    <section class="panel" id="rep-util"><h3>Utilization by team</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-cost"><h3>Cost by team</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-energy"><h3>Energy by pool</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-peaks"><h3>Demand by hour of the week (UTC)</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-queue"><h3>Queue waits per day</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-advice"><h3>Recommendations</h3><div class="table-wrap">loading…</div></section>
    <section class="panel" id="rep-capacity"><h3>Capacity plan</h3>
      <div class="row no-print" id="cap-form"><label>Horizon <select name="horizon"><option value="90d">90 days</option><option value="180d" selected>180 days</option><option value="365d">a year</option><option value="730d">two years</option></select></label>
        <label>Lead time <input name="lead_time" value="90" size="4" aria-label="lead time in days"> days</label>
        <label>p95 wait under <input name="wait" value="10" size="4" aria-label="p95 wait in minutes"> min</label>
        <label>Budget <input name="budget" size="9" placeholder="none" aria-label="budget"></label></div>
      <div class="table-wrap">loading…</div></section>
    <p class="error" id="rep-error"></p>`;
  const $ = (id) => document.getElementById(id);
  const body = (id) => $(id).querySelector('.table-wrap');

  const csv = (kind, by) => downloadCsv(`/api/v1/reports/${kind}?from=${from}&by=${by}&format=csv`, `gpufleet-${kind}-by-${by}.csv`);
  const csvButton = (kind, by) => `<button type="button" class="no-print rep-csv" data-kind="${kind}" data-by="${by}">CSV</button>`;
  const empty = (what) => `<p class="muted">${what}</p>`;

  function utilization(r) {
    if (!r.items.length) return empty('No allocation ended in this period: the ledger records each one when its job ends.');
    const max = Math.max(...r.items.map((i) => i.gpu_hours_allocated));
    return `<table><thead><tr><th>Team</th><th class="num">GPU-h allocated</th><th class="num">GPU-h used</th><th>allocated (light) and used (dark)</th>
      <th class="num">Util mean</th><th class="num">GPU-h unused</th><th class="num">Idle share</th></tr></thead><tbody>${r.items.map((i) => `<tr data-key="${esc(i.key)}">
      <td>${esc(i.key)}</td><td class="num">${num(i.gpu_hours_allocated)}</td><td class="num">${num(i.gpu_hours_effective)}</td>
      <td><div class="rstack">${bar(i.gpu_hours_allocated / max, 'alloc')}${bar((i.gpu_hours_effective || 0) / max, 'used')}</div></td>
      <td class="num">${i.util_mean == null ? '–' : num(i.util_mean) + '%'}</td><td class="num">${num(i.gpu_hours_unused)}</td><td class="num">${pct(i.idle_share)}</td></tr>`).join('')}</tbody></table>${csvButton('utilization', 'team')}`;
  }

  function cost(r) {
    if (!r.items.length) return empty('Nothing to charge in this period.');
    return `<table><thead><tr><th>Team</th><th class="num">GPU-h</th><th class="num">Cost</th><th class="num">Idle cost (shared)</th><th class="num">Total</th>
      <th class="num">Budget</th><th>Budget used</th></tr></thead><tbody>${r.items.map((i) => `<tr data-key="${esc(i.key)}">
      <td>${esc(i.key)}</td><td class="num">${num(i.gpu_hours)}</td><td class="num">${money(i.cost, r.currency)}</td><td class="num">${money(i.idle_cost, r.currency)}</td>
      <td class="num"><b>${money(i.total_cost, r.currency)}</b></td><td class="num">${money(i.budget, r.currency)}</td>
      <td>${i.budget_used == null ? '<span class="muted">no budget</span>' : `${bar(i.budget_used, i.budget_used > 1 ? 'over' : '')} ${pct(i.budget_used)}`}</td></tr>`).join('')}</tbody></table>
      <p class="muted">A job is charged its GPU-hours at its model's rate (and site's, where one is set: <code>gpufleet reports rates</code>). The idle cost (GPUs installed, no job on them) is shared in proportion to cost, as OpenCost shares it; the budget is the team's monthly budget over the period.</p>${csvButton('cost', 'team')}`;
  }

  function energy(r) {
    if (!r.items.length) return empty('No pool hours recorded in this period yet: they are added to every minute.');
    return `<table><thead><tr><th>Pool</th><th class="num">kWh</th><th class="num">Cost</th><th class="num">GPU-h allocated</th><th class="num">GPU-h per kWh</th>
      <th>Spent by idle or unallocated GPUs</th></tr></thead><tbody>${r.items.map((i) => `<tr data-key="${esc(i.key)}">
      <td><a href="#/scaling/${encodeURIComponent(i.key)}">${esc(i.key)}</a></td><td class="num">${num(i.kwh, 2)}</td><td class="num">${money(i.cost, r.currency)}</td>
      <td class="num">${num(i.gpu_hours)}</td><td class="num">${num(i.gpu_hours_per_kwh, 2)}</td><td>${bar(i.idle_share, 'idle')} ${pct(i.idle_share)}</td></tr>`).join('')}</tbody></table>${csvButton('energy', 'pool')}`;
  }

  function peaks(r) {
    if (!r.items.length) return empty('No pool hours recorded in this period yet.');
    const demand = {};
    let max = 0;
    for (const i of r.items) {
      demand[i.hour_of_week] = i;
      max = Math.max(max, i.gpus_demand);
    }
    const hours = [...Array(24).keys()];
    const cell = (d, h) => {
      const i = demand[`${d} ${String(h).padStart(2, '0')}:00`];
      if (!i) return '<td class="peak-cell" title="no data"></td>';
      const share = max > 0 ? i.gpus_demand / max : 0;
      return `<td class="peak-cell" style="background: rgba(59, 130, 246, ${(0.08 + 0.92 * share).toFixed(2)})"
        title="${d} ${h}:00 UTC: ${num(i.gpus_allocated)} GPUs allocated, ${num(i.gpus_queued)} queued for, of ${num(i.gpus_installed)}"></td>`;
    };
    return `<table class="peaks"><thead><tr><th></th>${hours.map((h) => `<th>${h}</th>`).join('')}</tr></thead><tbody>
      ${DAYS.map((d) => `<tr><th>${d}</th>${hours.map((h) => cell(d, h)).join('')}</tr>`).join('')}</tbody></table>
      <p class="muted">GPUs allocated and queued for (demand), mean per hour of the week; the darkest is ${num(max)} GPUs.</p>${csvButton('peaks', 'fleet')}`;
  }

  function queue(r) {
    if (!r.items.length) return empty('No job started in this period.');
    const rows = r.items.slice().sort((a, b) => (a.day === b.day ? a.key.localeCompare(b.key) : b.day.localeCompare(a.day))).slice(0, 200);
    return `<table><thead><tr><th>Day</th><th>Pool</th><th class="num">Starts</th><th class="num">Wait p50</th><th class="num">Wait p95</th><th class="num">Longest</th></tr></thead>
      <tbody>${rows.map((i) => `<tr><td>${esc(i.day)}</td><td>${esc(i.key)}</td><td class="num">${i.starts}</td><td class="num">${num(i.wait_p50_s, 0)} s</td>
      <td class="num">${num(i.wait_p95_s, 0)} s</td><td class="num">${num(i.wait_max_s, 0)} s</td></tr>`).join('')}</tbody></table>${csvButton('queue', 'pool')}`;
  }

  function advice(r) {
    if (!r.items.length) return empty('Nothing to advise in this period: no idle allocation of an hour or more, no pool to shrink, no project to right-size.');
    const total = r.items.reduce((n, i) => n + i.gpu_hours_saved, 0);
    const cost = r.items.reduce((n, i) => n + (i.cost_saved || 0), 0);
    return `<table><thead><tr><th>Kind</th><th>Target</th><th>Why</th><th class="num">GPU-h saved</th><th class="num">Cost saved</th><th class="num">kWh saved</th></tr></thead>
      <tbody>${r.items.map((i) => `<tr data-kind="${esc(i.kind)}" data-target="${esc(i.target)}"><td><span class="pill">${esc(i.kind.replace('_', ' '))}</span></td><td>${esc(i.target)}</td>
      <td title="${esc(JSON.stringify(i.evidence))}">${esc(i.summary)}</td><td class="num">${num(i.gpu_hours_saved)}</td><td class="num">${money(i.cost_saved, r.currency)}</td>
      <td class="num">${num(i.kwh_saved)}</td></tr>`).join('')}</tbody></table>
      <p class="muted">${r.items.length} recommendation(s): ${num(total)} GPU-hours and ${money(cost, r.currency)} over the period. A hover on the reason shows its evidence; <code>gpufleet recommendations -o json</code> gives all of it.</p>`;
  }

  const wait = (s) => (s == null ? 'no fit' : s < 120 ? `${num(s, 0)} s` : `${num(s / 60, 0)} min`);
  function capacity(r) {
    if (!r.items.length) return empty('No pools.');
    const g = r.growth;
    const growth = [...g.teams.map((t) => `team ${esc(t.team)} ${t.quarterly >= 0 ? '+' : ''}${num(t.quarterly * 100, 0)}% a quarter`),
      ...g.demands.map((d) => `${esc(d.name)}: ${d.gpus} GPUs of ${esc(d.pool)} from ${esc(d.from)}`)];
    return `<table><thead><tr><th>Pool</th><th>Model</th><th class="num">Nodes</th><th class="num">Demand now</th><th class="num">× at horizon</th>
      <th class="num">p95 wait now</th><th class="num">then</th><th class="num">Nodes needed</th><th>Order</th><th>Order by</th><th class="num">Cost</th></tr></thead>
      <tbody>${r.items.map((i) => `<tr data-pool="${esc(i.pool)}"${i.order_gpus ? ' class="cap-order"' : ''} title="${esc([i.summary, ...i.notes].join('\n'))}">
      <td>${esc(i.pool)}</td><td>${esc(i.gpu_model)}</td><td class="num">${i.nodes}</td><td class="num">${num(i.peak_demand_now)} GPUs</td>
      <td class="num">${num(i.factor, 2)}</td><td class="num">${wait(i.wait_p95_now_s)}</td><td class="num">${wait(i.wait_p95_horizon_s)}</td>
      <td class="num">${i.nodes_needed}</td><td>${i.order_gpus ? `${i.order_nodes} × ${i.gpus_per_node} GPUs` : i.history_short ? `<span class="pill cap-short">none: ${i.trend_days_recorded} of ${i.trend_days_needed} days recorded</span>` : '–'}</td>
      <td>${esc(i.order_by || '–')}${i.notes.some((n) => n.startsWith('late')) ? ' <span class="pill state-rma">late</span>' : ''}</td>
      <td class="num">${money(i.cost, r.currency)}${i.within_budget ? '' : ' <span class="pill state-rma">over budget</span>'}</td></tr>`).join('')}</tbody></table>
      <ul class="cap-orders">${r.items.filter((i) => i.order_gpus || (i.history_short && i.nodes_needed > i.nodes)).map((i) => `<li${i.history_short ? ' class="cap-short"' : ''}><b>${esc(i.pool)}</b>: ${esc(i.summary)}</li>`).join('')}</ul>
      <p class="muted">Each pool's jobs of the last ${r.history_days} days and those running and queued now, replayed on its nodes as they are and with more, on the demand projected to the horizon: the trend of its daily peak, its season (with a year of data), and the growth planned (${growth.length ? growth.join('; ') : 'none'}: <code>gpufleet plan growth</code>). Costs from the purchase prices in the asset register; total ${money(r.total_cost, r.currency)}. A hover on a row gives its notes.</p>`;
  }
  async function loadCapacity() {
    const f = new FormData();
    for (const el of $('cap-form').querySelectorAll('select, input')) f.set(el.name, el.value.trim());
    const q = new URLSearchParams({ horizon: f.get('horizon'), lead_time: `${Number(f.get('lead_time')) || 0}d`, wait_p95: `${Number(f.get('wait')) || 0}m` });
    if (f.get('budget')) q.set('budget', f.get('budget'));
    const r = await api('/api/v1/reports/capacity?' + q);
    if (!gone) body('rep-capacity').innerHTML = capacity(r);
  }
  $('cap-form').addEventListener('change', () => loadCapacity().catch(fail));

  async function load() {
    const q = (kind, by) => api(`/api/v1/reports/${kind}?from=${from}&by=${by}`);
    const [u, c, e, p, w, a] = await Promise.all([q('utilization', 'team'), q('cost', 'team'), q('energy', 'pool'), q('peaks', 'fleet'), q('queue', 'pool'),
      api(`/api/v1/recommendations?from=${from}`)]);
    if (gone) return;
    $('rep-period-text').textContent = `From ${new Date(u.from).toLocaleString()} to ${new Date(u.to).toLocaleString()}.`;
    // A report on less history than its period says so above its table.
    const note = (r) => (r.note ? `<p class="rep-note warning-line">${esc(r.note)}.</p>` : '');
    body('rep-util').innerHTML = note(u) + utilization(u);
    body('rep-cost').innerHTML = note(c) + cost(c);
    body('rep-energy').innerHTML = note(e) + energy(e);
    body('rep-peaks').innerHTML = peaks(p);
    body('rep-queue').innerHTML = note(w) + queue(w);
    body('rep-advice').innerHTML = advice(a);
  }

  const fail = (err) => { if (!gone) $('rep-error').textContent = err.message; };
  $('rep-period').addEventListener('change', (ev) => { from = ev.target.value; load().catch(fail); });
  $('rep-print').addEventListener('click', () => window.print());
  el.addEventListener('click', (ev) => {
    const b = ev.target.closest('.rep-csv');
    if (b) csv(b.dataset.kind, b.dataset.by).catch(fail);
  });
  load().catch(fail);
  loadCapacity().catch(fail);
  return {
    live: throttled(30000, load),
    unmount() { gone = true; },
  };
}
