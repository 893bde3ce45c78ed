// Scaling: every autoscaled pool (nodes, demand, forecast, decision), and for one pool its
// nodes over time, demand against forecast and capacity, the queue's longest wait, and its
// scaling events. Operators can scale it by hand (within its policy's bounds), and tune its
// target share (and forecast margin) by replaying its own past jobs.

import { api, can, esc, ago, fmtTime } from './api.js';
import { lineChart, destroyChart } from './charts.js';

const WINDOWS = ['1h', '6h', '24h', '7d'];
const WINDOW_S = { '1h': 3600, '6h': 6 * 3600, '24h': 86400, '7d': 7 * 86400 };

const n0 = (v) => (v === null || v === undefined ? '–' : Math.round(v).toLocaleString());
const pct = (v) => (v === null || v === undefined ? '–' : `${(v * 100).toFixed(1)}%`);

export function mount(el, params) {
  let gone = false;
  let pools = [];
  let pool = params.pool || '';
  let charts = [];
  el.innerHTML = `<h2>Scaling</h2>
    <div class="panel table-wrap" id="scaling-pools">loading…</div>
    <div id="scaling-pool"></div>
    <p class="error" id="scaling-error"></p>`;
  const $ = (id) => document.getElementById(id);

  function poolsTable() {
    if (!pools.length) {
      $('scaling-pools').innerHTML = `<p class="muted">No pool is autoscaled. Give a pool a <code>scaling:</code> block in its fleet file
        (see docs/scaling.md) or <code>gpufleet scaling set POOL -f policy.json</code>.</p>`;
      return;
    }
    $('scaling-pools').innerHTML = `<table><thead><tr><th>Pool</th><th>Cluster</th><th>Mode</th><th class="num">Nodes</th><th class="num">Target</th>
      <th class="num">Bounds</th><th class="num">Demand (GPUs)</th><th class="num">Forecast</th><th class="num">MAPE</th><th>Decision</th><th>Error</th></tr></thead><tbody>${pools.map((s) => `
      <tr data-pool="${esc(s.pool)}"${s.pool === pool ? ' class="selected"' : ''}>
      <td><a href="#/scaling/${encodeURIComponent(s.pool)}">${esc(s.pool)}</a>${s.simulated ? ' <span class="pill sim" title="its nodes are simulated">simulated</span>' : ''}</td>
      <td>${esc(s.cluster)}</td><td>${esc(s.policy.mode)}${s.policy.enabled ? '' : ' (off)'}</td>
      <td class="num">${s.nodes.ready}${s.nodes.provisioning ? ` + ${s.nodes.provisioning} starting` : ''}</td><td class="num">${s.nodes.target}</td>
      <td class="num">${s.policy.min_nodes}..${s.policy.max_nodes}</td><td class="num">${n0(s.demand.gpus)}</td>
      <td class="num">${n0(s.forecast.gpus)}</td><td class="num">${pct(s.forecast.mape)}</td>
      <td>${esc(s.decision.reason)}</td><td class="error">${esc(s.last_error)}</td></tr>`).join('')}</tbody></table>`;
  }

  function detail(s) {
    const box = $('scaling-pool');
    if (!s) { box.innerHTML = pool ? `<div class="panel">Pool ${esc(pool)} is not autoscaled.</div>` : ''; return; }
    if (box.dataset.pool !== s.pool) {
      box.dataset.pool = s.pool;
      box.innerHTML = `<div class="panel">
        <div class="row"><h3 style="margin:0">${esc(s.pool)}</h3><span class="muted" id="scaling-summary"></span><span class="spacer"></span>
          <label>Window <select id="scaling-window">${WINDOWS.map((w) => `<option${w === '6h' ? ' selected' : ''}>${w}</option>`).join('')}</select></label></div>
        <div class="totals" id="scaling-stats" style="margin:10px 0 0"></div>
        <p id="scaling-keep" style="margin:8px 0 0" hidden></p>
        <div class="row operator-only" id="scale-form" ${can('operator') ? '' : 'hidden'} style="margin-top:8px">
          <label>Scale to <input type="number" id="scale-target" min="0" style="width:6em"> nodes</label>
          <label title="the autoscaler keeps at least (up) or at most (down) this many nodes for this long">and keep it <select id="scale-keep"><option value="">no</option><option>1h</option><option>4h</option><option>1d</option></select></label>
          <button class="primary" type="button" id="scale-go">Scale</button><span class="error" id="scale-error"></span></div>
      </div>
      <div class="panel"><div id="scaling-charts" class="charts"></div></div>
      <div class="panel operator-only" id="tune-panel" ${can('operator') ? '' : 'hidden'}><h3 style="margin-top:0">Tune on this pool's past</h3>
        <p class="muted" style="margin-top:0">Replays the pool's own jobs, in virtual time, under target shares from ${s.policy.mode === 'reactive' ? '0.2' : '0.6'} to 1${s.policy.mode === 'predictive' ? ' and forecast margins from 0.5 to 8, each by the recent shortfall and by the hour\'s' : ''},
          and proposes the setting with the fewest idle GPU-hours whose p95 queue wait stays within the objective. <span id="tune-schedule"></span></p>
        <div class="row"><label>p95 wait at most <input id="tune-wait" value="60s" style="width:5em"></label>
          <label>over the last <select id="tune-window"><option>1d</option><option>3d</option><option selected>7d</option></select></label>
          <button type="button" id="tune-go">Replay</button><span class="error" id="tune-error"></span></div>
        <div id="tune-result" class="table-wrap"></div></div>
      <div class="panel"><h3 style="margin-top:0">Events</h3><div id="scaling-events" class="table-wrap muted">loading…</div></div>`;
      $('scaling-window').addEventListener('change', () => loadHistory().catch(fail));
      $('scale-go')?.addEventListener('click', scaleNow);
      $('tune-go')?.addEventListener('click', () => tune(false));
      $('scale-target').value = s.nodes.ready + s.nodes.provisioning;
    }
    const p = s.policy;
    $('scaling-summary').innerHTML = `${esc(s.cluster)} · ${esc(p.mode)}${p.enabled ? '' : ' (disabled: decisions only)'} · ${esc(p.actuator.type)} actuator
      ${s.simulated ? '<span class="pill sim" title="its nodes are simulated">simulated</span>' : ''}`;
    const f = s.forecast;
    const stat = (label, value, title = '') => `<div class="total" title="${esc(title)}" data-stat="${esc(label)}"><span class="muted">${esc(label)}</span><b>${value}</b></div>`;
    $('scaling-stats').innerHTML = [
      stat('Nodes ready', s.nodes.ready),
      stat('Starting', s.nodes.provisioning, 'provisioning or joining: asked for, not ready yet'),
      stat('Target', s.nodes.target, `bounds ${p.min_nodes}..${p.max_nodes}, target share ${p.target_share}`),
      stat('Demand', `${n0(s.demand.gpus)} GPUs`, `${n0(s.demand.running)} running, ${n0(s.demand.queued)} queued`),
      stat('Longest wait', `${n0(s.demand.oldest_wait_s)} s`),
      stat('Forecast', f.gpus === null ? '–' : `${n0(f.gpus)} GPUs`, `peak over the next ${p.lead_time} + ${p.interval}, plus ${p.forecast_margin} × its ${p.margin_by === 'hour' ? 'mean shortfall at this hour of the day' : 'recent mean shortfall'} (${f.shortfall_gpus === null ? '–' : f.shortfall_gpus.toFixed(1) + ' GPUs'})`),
      stat('Forecast MAPE', pct(f.mape), `model ${f.model}; bias ${f.bias === null ? '–' : (f.bias * 100).toFixed(1) + '%'}; ${f.scored} forecasts scored`),
      stat('Consolidation', p.consolidate_below ? `≤ ${Math.round(p.consolidate_below * 100)}% used` : 'off', p.consolidate_below ? `a node this lightly used for ${p.idle_before_remove}, running only movable jobs, is emptied when they fit on other busy nodes and the pool has more nodes than it needs` : 'nodes are never emptied by moving jobs'),
            stat('Decision', esc(s.decision.reason) + (s.decision.delta ? ` ${s.decision.delta > 0 ? '+' : ''}${s.decision.delta}` : ''), fmtTime(s.decided_at)),
    ].join('') + (s.last_error ? `<p class="error">Last actuator error: ${esc(s.last_error)}</p>` : '');
    const sched = $('tune-schedule');
    if (sched) {
      sched.textContent = p.tune.every === '0s' ? 'The policy is not re-tuned by itself (its tune.every is 0).'
        : `The autoscaler re-tunes it every ${p.tune.every} on the last ${p.tune.window}, to a p95 wait of ${p.tune.wait_p95}, and applies what is cheaper (tune events below).`;
    }
    const keep = $('scaling-keep');
    keep.hidden = !s.keep;
    keep.textContent = s.keep ? `Kept by ${s.keep.by}: at ${s.keep.min_nodes !== null ? `least ${s.keep.min_nodes}` : `most ${s.keep.max_nodes}`} nodes until ${fmtTime(s.keep.until)} (a manual scale; the autoscaler decides within it)` : '';
  }

  async function scaleNow() {
    const target = Number($('scale-target').value);
    const keep = $('scale-keep').value;
    $('scale-error').textContent = '';
    try {
      await api(`/api/v1/pools/${encodeURIComponent(pool)}/scale`, { method: 'POST', body: keep ? { target, keep } : { target } });
      await load();
    } catch (e) { $('scale-error').textContent = e.message; }
  }

  const margin = (c) => c.forecast_margin === null ? '–' : `${c.forecast_margin}${c.margin_by === 'hour' ? ' by hour' : ''}`;
  const setting = (c) => `share ${c.target_share}${c.forecast_margin === null ? '' : `, margin ${margin(c)}`}`;

  // Dry run first; Apply sends the same request with apply: true (the server replays again and
  // applies what it finds then, which is the same unless jobs ended in between).
  async function tune(apply) {
    const body = { wait_p95: $('tune-wait').value.trim(), window: $('tune-window').value, apply };
    const box = $('tune-result');
    $('tune-error').textContent = '';
    $('tune-go').disabled = true;
    if (!apply) box.innerHTML = '<p class="muted">replaying…</p>';
    try {
      const t = await api(`/api/v1/pools/${encodeURIComponent(pool)}/scaling/tune`, { method: 'POST', body });
      if (gone) return;
      const row = (label, c, kind) => `<tr data-row="${kind}"><td>${esc(label)}</td><td class="num">${c.target_share}</td>
        <td class="num">${margin(c)}</td><td class="num">${n0(c.gpu_hours_idle)}</td><td class="num">${n0(c.gpu_hours_provisioned)}</td>
        <td class="num">${n0(c.wait_p95_s)} s</td><td class="num">${n0(c.wait_p99_s)} s</td></tr>`;
      const cheaper = t.chosen && t.saving > 0;
      const verdict = t.applied ? `Applied: the policy now has ${setting(t.chosen)}.`
        : !t.chosen ? `No setting kept the p95 wait within ${t.objective.wait_p95_s} s; the lowest was ${n0(t.closest.wait_p95_s)} s (${setting(t.closest)}).`
          : cheaper ? `${setting(t.chosen)}: ${Math.round(t.saving * 100)}% fewer idle GPU-hours than now (${setting(t.current)}), at a p95 wait of ${n0(t.chosen.wait_p95_s)} s against ${n0(t.current.wait_p95_s)} s.`
            : `The current setting (${setting(t.current)}) is as cheap as any within the objective.`;
      box.innerHTML = `<p class="muted" id="tune-summary">${t.jobs.toLocaleString()} jobs from ${esc(fmtTime(t.from))}, ${t.simulated_hours.toFixed(1)} h, replayed under ${t.grid.length + 1} settings in ${t.replay_seconds.toFixed(2)} s</p>
        <table><thead><tr><th>Setting</th><th class="num">Share</th><th class="num">Margin</th><th class="num">GPU-h idle</th><th class="num">GPU-h provisioned</th><th class="num">p95 wait</th><th class="num">p99 wait</th></tr></thead>
        <tbody>${row('now', t.current, 'current')}${t.chosen ? row('cheapest within the objective', t.chosen, 'chosen') : row('lowest p95 (none within)', t.closest, 'closest')}</tbody></table>
        <p id="tune-verdict">${esc(verdict)}</p>
        ${cheaper && !t.applied ? `<button class="primary" type="button" id="tune-apply">Apply ${esc(setting(t.chosen))}</button>` : ''}`;
      $('tune-apply')?.addEventListener('click', () => tune(true));
      if (t.applied) await load();
    } catch (e) {
      if (!apply) box.innerHTML = '';
      $('tune-error').textContent = e.message;
    } finally {
      if (!gone) $('tune-go').disabled = false;
    }
  }

  async function loadHistory() {
    if (!pool || !pools.some((s) => s.pool === pool)) return;
    const h = await api(`/api/v1/pools/${encodeURIComponent(pool)}/scaling/history?window=${$('scaling-window').value}`);
    if (gone) return;
    charts.forEach(destroyChart);
    charts = [];
    const box = $('scaling-charts');
    box.innerHTML = '';
    const xs = h.time_ms.map((t) => t / 1000);
    box.dataset.samples = String(xs.length);
    if (!xs.length) { box.innerHTML = '<p class="muted">No decisions in this window yet.</p>'; return; }
    const g = h.gpus_per_node;
    const now = Date.now() / 1000;
    const xRange = [now - WINDOW_S[$('scaling-window').value], now];
    const add = (name, opts) => {
      const div = document.createElement('div');
      div.className = 'chart';
      div.dataset.chart = name;
      box.appendChild(div);
      charts.push(lineChart(div, { xs, height: 200, xRange, ...opts }));
    };
    add('nodes', { title: 'Nodes', unit: 'nodes', series: [
      { label: 'ready', values: h.ready },
      { label: 'ready + starting', values: h.ready.map((r, i) => r + h.provisioning[i]) },
      { label: 'target', values: h.target },
    ] });
    add('demand', { title: 'Demand, forecast and capacity', unit: 'GPUs', series: [
      { label: 'demand (running + queued)', values: h.demand },
      { label: 'forecast (planning peak)', values: h.forecast },
      { label: 'capacity (ready GPUs)', values: h.ready.map((r) => r * g) },
      { label: 'running', values: h.running },
    ] });
    add('wait', { title: 'Queue: longest wait', unit: 'seconds', series: [{ label: 'oldest queued job', values: h.oldest_wait_s }] });
  }

  async function loadEvents() {
    if (!pool || !pools.some((s) => s.pool === pool)) return;
    const ev = await api(`/api/v1/pools/${encodeURIComponent(pool)}/scaling/events?limit=50`);
    if (gone) return;
    $('scaling-events').innerHTML = ev.items.length ? `<table><thead><tr><th>When</th><th>Kind</th><th class="num">Δ</th><th>Reason</th><th>Nodes</th><th>By</th><th>Detail</th></tr></thead><tbody>${ev.items.map((e) => `
      <tr data-kind="${esc(e.kind)}"><td title="${esc(fmtTime(e.time))}">${esc(ago(e.time))}</td><td>${esc(e.kind.replace('_', ' '))}</td>
      <td class="num">${e.delta > 0 ? '+' : ''}${e.delta || ''}</td><td>${esc(e.reason)}</td><td>${e.nodes.map((n) => `<a href="#/node/${encodeURIComponent(n)}">${esc(n)}</a>`).join(' ')}</td>
      <td>${esc(e.actor)}</td><td class="muted">${esc(e.detail)}</td></tr>`).join('')}</tbody></table>` : 'No events yet.';
  }

  async function load() {
    const r = await api('/api/v1/scaling');
    if (gone) return;
    pools = r.items;
    if (!pool && pools.length) pool = pools[0].pool;
    poolsTable();
    detail(pools.find((s) => s.pool === pool));
    await loadEvents();
  }

  const fail = (e) => { if (!gone) $('scaling-error').textContent = e.message; };
  load().then(loadHistory).catch(fail);
  let last = Date.now();
  return {
    live() {
      // Decisions come once per policy interval (a minute or so): a refetch every 5 s is plenty.
      if (Date.now() - last < 5000) return;
      last = Date.now();
      load().then(() => (charts.some((u) => u.zoomed) ? null : loadHistory())).catch(() => {});
    },
    unmount() { gone = true; charts.forEach(destroyChart); },
  };
}
