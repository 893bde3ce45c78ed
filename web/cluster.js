// Cluster view: the heatmap of every GPU (one request to /api/v1/heatmap), the cluster's
// active alerts, and a sortable, filterable node table.

import { api, esc, ago, simPill, Table } from './api.js';
import { Heatmap, scaleColor, healthColor, allocationColor, HEALTH_NAMES, ALLOCATION_NAMES } from './heatmap.js';

const FIELDS = [['gpu_util', 'Utilization'], ['gpu_temp', 'Temperature'], ['power_usage', 'Power'],
  ['memory', 'Memory used'], ['health', 'Health'], ['allocation', 'Allocation']];

export function mount(el, params) {
  let gone = false;
  let cluster = params.cluster;
  let field = sessionStorage.getItem('gpufleet.field') || 'gpu_util';
  el.innerHTML = `<div class="row"><h2 id="title">Cluster</h2><span class="spacer"></span>
      <label>Cluster <select id="cluster-pick" aria-label="cluster"></select></label></div>
    <div class="panel"><div class="heat-head">
      <label>Colour by <select id="field" aria-label="field">${FIELDS.map(([f, l]) => `<option value="${f}"${f === field ? ' selected' : ''}>${l}</option>`).join('')}</select></label>
      <span class="legend" id="legend"></span><span class="spacer"></span><span class="muted" id="heat-info"></span></div>
      <div class="heat-box" id="heat"></div></div>
    <div class="panel" id="alerts-panel"><h3 style="margin-top:0">Active alerts</h3><div id="cluster-alerts" class="muted table-wrap">loading…</div></div>
    <div class="panel"><h3 style="margin-top:0">Nodes</h3><div id="nodes"></div></div>`;
  const tip = document.getElementById('tip');
  const uuids = new Map(); // node -> [uuid by index], fetched on hover
  let hovered = null, lastMouse = null;
  const heat = new Heatmap(document.getElementById('heat'), {
    onHover: (cell, e) => {
      hovered = cell;
      lastMouse = e;
      if (!cell) { tip.hidden = true; return; }
      showTip(cell, e);
      if (!uuids.has(cell.node)) {
        uuids.set(cell.node, null);
        api(`/api/v1/nodes/${encodeURIComponent(cell.node)}`).then((n) => {
          uuids.set(cell.node, n.gpus.map((g) => g.uuid));
          if (hovered && hovered.node === cell.node && !tip.hidden) showTip(hovered, null);
        }).catch(() => uuids.delete(cell.node));
      }
    },
    onClick: (cell) => { tip.hidden = true; location.hash = `#/node/${encodeURIComponent(cell.node)}`; },
  });
  let data = null;
  window.gpufleet = { heatmap: heat }; // for the browser tests and for curious people

  function valueText(v) {
    if (v === null || v === undefined) return 'no data';
    if (data.field === 'health') return HEALTH_NAMES[v] ?? String(v);
    if (data.field === 'allocation') return ALLOCATION_NAMES[v] ?? String(v);
    return `${v} ${data.unit}`;
  }
  function showTip(cell, e) {
    const u = uuids.get(cell.node);
    tip.innerHTML = `<b>${esc(cell.node)}</b> GPU ${cell.gpu}${cell.simulated ? ' (simulated)' : ''}<br>
      ${esc(u ? u[cell.gpu] || '' : 'UUID …')}<br>${esc(cell.model)} · ${esc(cell.pool)} · node ${esc(cell.state)}<br>
      ${esc(data.label)}: <b>${esc(valueText(cell.value))}</b>`;
    tip.hidden = false;
    if (e) {
      const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
      tip.style.left = Math.max(4, x) + 'px';
      tip.style.top = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + 'px';
    }
  }

  function legend() {
    const lg = document.getElementById('legend');
    if (data.field === 'allocation') {
      lg.innerHTML = ALLOCATION_NAMES.map((n, i) => `<span class="swatch" style="background:${allocationColor(i)}"></span>${n}`).join(' ');
      return;
    }
    if (data.field === 'health') {
      lg.innerHTML = HEALTH_NAMES.map((n, i) => `<span class="swatch" style="background:${healthColor(i)}"></span>${n}`).join(' ') +
        ` <span class="swatch" style="background:${healthColor(-1)}"></span>no data`;
      return;
    }
    const bad = (data.unhealthy || []).length;
    lg.innerHTML = `${data.min}<canvas width="160" height="12"></canvas>${data.max} ${esc(data.unit)}
      <span class="swatch" style="background:${healthColor(-1)}"></span>no data
      <span class="swatch outlined" style="border-color:${healthColor(2)}"></span>failed
      <span class="swatch outlined" style="border-color:${healthColor(1)}"></span>warning${bad ? ` <b class="critical" id="unhealthy-count">(${bad} GPU${bad > 1 ? 's' : ''})</b>` : ''}`;
    const cv = lg.querySelector('canvas');
    const ctx = cv.getContext('2d');
    for (let x = 0; x < 160; x++) { ctx.fillStyle = scaleColor(x / 159); ctx.fillRect(x, 0, 1, 12); }
  }

  async function loadHeat() {
    const t0 = performance.now();
    const d = await api(`/api/v1/heatmap?cluster=${encodeURIComponent(cluster)}&field=${field}`);
    if (gone) return;
    const fetched = performance.now();
    data = d;
    const drawMs = heat.setData(d);
    legend();
    // A tooltip that is open shows the new value (and field) of the cell under the pointer.
    if (!tip.hidden && lastMouse) {
      hovered = heat.cellAt(lastMouse);
      if (hovered) showTip(hovered, null); else tip.hidden = true;
    }
    const gpus = d.values.length;
    const simulated = d.nodes.filter((n) => n[5]).length;
    document.getElementById('heat-info').textContent =
      `${gpus} GPUs on ${d.nodes.length} nodes${simulated ? ` (${simulated === d.nodes.length ? 'all' : simulated} simulated)` : ''} · drawn in ${drawMs.toFixed(1)} ms · ${new Date(d.time_ms).toLocaleTimeString()}`;
    const perf = (window.gpufleetPerf = window.gpufleetPerf || {});
    (perf.heatmapDrawMs = perf.heatmapDrawMs || []).push(drawMs);
    (perf.heatmapFetchMs = perf.heatmapFetchMs || []).push(fetched - t0);
  }

  // Firing alerts, then pending ones apart; each in the API's order (severity, then age).
  async function loadAlerts() {
    const r = await api('/api/v1/alerts?limit=5000');
    if (gone) return;
    const mine = r.items.filter((a) => a.labels.cluster === cluster);
    const rows = (list) => `<table><thead><tr><th>Alert</th><th>Severity</th><th>Node</th><th>GPU</th><th>Summary</th><th>Since</th></tr></thead><tbody>${list.map((a) =>
      `<tr data-alert="${esc(a.alertname)}" data-state="${esc(a.state)}"><td>${esc(a.alertname)}</td><td class="sev-${esc(a.labels.severity)}">${esc(a.labels.severity)}</td>
      <td>${a.labels.Hostname ? `<a href="#/node/${encodeURIComponent(a.labels.Hostname)}">${esc(a.labels.Hostname)}</a>` : ''}</td><td>${esc(a.labels.gpu)}</td>
      <td>${esc(a.annotations.summary)}</td><td>${esc(ago(a.active_since))}</td></tr>`).join('')}</tbody></table>`;
    const firing = mine.filter((a) => a.state === 'firing');
    const pending = mine.filter((a) => a.state === 'pending');
    document.getElementById('cluster-alerts').innerHTML = firing.length || pending.length
      ? `${firing.length ? rows(firing) : '<span class="muted">Nothing firing in this cluster.</span>'}
        ${pending.length ? `<h4 class="muted">Pending (${pending.length}): firing if they last</h4>${rows(pending)}` : ''}`
      : '<span class="muted">No active alerts in this cluster.</span>';
  }

  const table = new Table(document.getElementById('nodes'), [
    { key: 'name', label: 'Node', html: (r) => `<a href="#/node/${encodeURIComponent(r.name)}">${esc(r.name)}</a>${simPill(r.simulated)}` },
    { key: 'pool', label: 'Pool' },
    { key: 'state', label: 'State', html: (r) => `<span class="st-${esc(r.state)}">${esc(r.state)}</span>` },
    { key: 'health', label: 'Health', html: (r) => `<span class="st-${esc(r.health)}">${esc(r.health)}</span>` },
    { key: 'gpus', label: 'GPUs', num: true },
    { key: 'model', label: 'Model' },
    { key: 'driver', label: 'Driver' },
    { key: 'reason', label: 'Reason' },
    { key: 'seen', label: 'Last seen' },
  ], { filterPlaceholder: 'filter nodes (name, state, reason…)' });

  async function loadNodes() {
    const [nodes, health] = await Promise.all([
      api(`/api/v1/nodes?cluster=${encodeURIComponent(cluster)}&limit=5000`),
      api(`/api/v1/health?cluster=${encodeURIComponent(cluster)}&show=problems&limit=5000`).catch(() => ({ items: [] })),
    ]);
    if (gone) return;
    const problems = new Map(health.items.map((h) => [h.node, h]));
    table.set(nodes.items.map((n) => {
      const h = problems.get(n.name);
      return { name: n.name, pool: n.pool, state: n.state, health: h ? h.health : 'ready', gpus: n.gpu_count,
        model: n.gpu_model, driver: n.facts?.driver_version || '', simulated: n.simulated,
        reason: h && h.reasons.length ? h.reasons.join('; ') : n.reason, seen: ago(n.last_seen_at) };
    }));
  }

  // A cluster Slurm schedules: a badge that says so, and whether its last poll worked.
  async function slurmBadge(name) {
    const st = (await api('/api/v1/slurm')).items.find((x) => x.cluster === name);
    if (gone || !st) return;
    const bad = st.state === 'error';
    const text = bad ? `Slurm: ${st.error}` : `Slurm: ${st.jobs_running} running, ${st.jobs_pending} pending`;
    document.getElementById('title').insertAdjacentHTML('beforeend',
      ` <span class="pill${bad ? ' error' : ''}" id="slurm-badge" title="scheduled by Slurm (docs/slurm.md); last poll ${esc(st.last_poll_at || 'not yet')}">${esc(text)}</span>`);
  }

  async function start() {
    const clusters = await api('/api/v1/clusters');
    if (gone) return;
    const pick = document.getElementById('cluster-pick');
    pick.innerHTML = clusters.items.map((c) => `<option${c.name === cluster ? ' selected' : ''}>${esc(c.name)}</option>`).join('');
    if (!cluster) {
      if (!clusters.items.length) { el.innerHTML = '<div class="panel muted">No clusters yet.</div>'; return; }
      cluster = clusters.items[0].name;
      history.replaceState(null, '', `#/cluster/${encodeURIComponent(cluster)}`);
    }
    const c = clusters.items.find((x) => x.name === cluster);
    document.getElementById('title').innerHTML = c
      ? `${esc(c.name)} <span class="muted" style="font-size:14px">${esc(c.type)} · ${esc(c.site)} · ${c.nodes} nodes · ${c.gpus} GPUs</span>`
      : `${esc(cluster)} <span class="error" style="font-size:14px">not found</span>`;
    if (c?.scheduler?.type === 'slurm') slurmBadge(c.name).catch(() => {});
    pick.onchange = () => { location.hash = `#/cluster/${encodeURIComponent(pick.value)}`; };
    await Promise.all([loadHeat(), loadAlerts(), loadNodes()]);
  }
  document.getElementById('field').addEventListener('change', (e) => {
    field = e.target.value;
    sessionStorage.setItem('gpufleet.field', field);
    loadHeat().catch(showError);
  });
  function showError(e) { if (!gone) document.getElementById('heat-info').innerHTML = `<span class="error">${esc(e.message)}</span>`; }
  start().catch(showError);
  let lastNodes = Date.now();
  return {
    live(ev) {
      if (!cluster) return;
      loadHeat().catch(showError);
      if (ev.changed?.alerts) loadAlerts().catch(() => {});
      if (ev.changed?.health || Date.now() - lastNodes > 30000) { lastNodes = Date.now(); loadNodes().catch(() => {}); }
    },
    unmount() { gone = true; heat.destroy(); tip.hidden = true; },
  };
}
