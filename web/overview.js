// Fleet overview: what needs attention now (failed GPUs, unhealthy and unreachable nodes, firing
// critical and warning alerts, halted rollouts, each named and linked), fleet totals, a card per cluster (type, site, nodes by state, GPUs total and
// healthy, firing alerts by severity, a utilization sparkline) and the fleet's utilization
// trend, and the controllers that serve it (which one leads). The cards come from three small
// requests and paint first; the trend and the controllers follow.

import { api, esc } from './api.js';
import { sparkline, lineChart, destroyChart, toColumns, spanSeconds } from './charts.js';

const RANGES = { '1h': ['-1h', '1m'], '6h': ['-6h', '5m'], '24h': ['-24h', '15m'], '7d': ['-7d', '1h'] };

export function mount(el) {
  el.innerHTML = `<h2>Fleet overview</h2>
    <div class="panel attention" id="attention"><h3>Needs attention</h3><div class="muted">loading…</div></div>
    <div class="totals" id="totals"></div>
    <div class="cards" id="cards"><div class="muted">loading…</div></div>
    <div class="panel"><div class="row"><h3 style="margin:0">Fleet GPU utilization</h3><span class="spacer"></span>
      <select id="range" aria-label="range">${Object.keys(RANGES).map((r) => `<option${r === '1h' ? ' selected' : ''}>${r}</option>`).join('')}</select></div>
      <div id="trend" style="min-height:220px"></div></div>
    <div class="panel" id="controllers-panel" hidden><h3 style="margin:0 0 .5em">Controllers</h3><div id="controllers" class="table-wrap"></div></div>`;
  let chart = null;
  let trendSeries = new Map(); // cluster -> points, for the sparklines
  let gone = false;

  async function cards() {
    const [clusters, health, firing, rollouts] = await Promise.all([
      api('/api/v1/clusters'),
      api('/api/v1/health?show=problems&limit=200').catch(() => null),
      api('/api/v1/alerts?state=firing&limit=5000').catch(() => ({ items: [], total: 0 })),
      api('/api/v1/rollouts?limit=100').catch(() => ({ items: [] })),
    ]);
    if (gone) return;
    attention(health, firing, rollouts);
    const hByCluster = new Map((health?.clusters || []).map((c) => [c.cluster, c]));
    const alertsBy = new Map();
    for (const a of firing.items) {
      const c = a.labels.cluster || '';
      const s = a.labels.severity || 'none';
      if (!alertsBy.has(c)) alertsBy.set(c, {});
      alertsBy.get(c)[s] = (alertsBy.get(c)[s] || 0) + 1;
    }
    let nodes = 0, gpus = 0, healthy = 0, failed = 0, ready = 0, allocated = 0;
    for (const c of clusters.items) {
      nodes += c.nodes; gpus += c.gpus; ready += c.nodes_ready; allocated += c.gpus_allocated ?? 0;
      const h = hByCluster.get(c.name);
      if (h) { healthy += h.gpus_healthy; failed += h.gpus_failed; }
    }
    const critical = firing.items.filter((a) => a.labels.severity === 'critical').length;
    document.getElementById('totals').innerHTML = [
      ['Clusters', clusters.items.length], ['Nodes', nodes], ['Nodes ready', ready], ['GPUs', gpus], ['GPUs allocated', allocated],
      ['GPUs healthy', health ? healthy : '—'], ['GPUs failed', health ? failed : '—', failed > 0],
      ['Alerts firing', `${firing.total}${critical ? ` (${critical} critical)` : ''}`, critical > 0],
    ].map(([k, v, bad]) => `<div class="total${bad ? ' bad' : ''}"><span class="muted">${k}</span><b>${v}</b></div>`).join('');
    document.getElementById('cards').innerHTML = clusters.items.map((c) => {
      const h = hByCluster.get(c.name);
      const states = Object.entries(c.nodes_by_state || {}).map(([s, n]) => `<span class="st-${esc(s)}">${n} ${esc(s)}</span>`).join(', ') || 'none';
      const al = alertsBy.get(c.name) || {};
      const alertText = Object.keys(al).length
        ? Object.entries(al).map(([s, n]) => `<span class="sev-${esc(s)}">${n} ${esc(s)}</span>`).join(', ')
        : '<span class="muted">none</span>';
      return `<a class="card" href="#/cluster/${encodeURIComponent(c.name)}" data-cluster="${esc(c.name)}">
        <h3>${esc(c.name)}</h3><span class="muted">${esc(c.type)} · ${esc(c.site)}</span>
        <div class="kv"><span class="muted">Nodes</span><span>${c.nodes}: ${states}</span>
          <span class="muted">GPUs</span><span><b data-gpus>${c.gpus}</b> total, <span data-allocated>${c.gpus_allocated ?? 0}</span> allocated${h ? `, ${h.gpus_healthy} healthy${h.gpus_failed ? `, <span class="lv-failed">${h.gpus_failed} failed</span>` : ''}` : ''}</span>
          <span class="muted">Alerts</span><span>${alertText}</span></div>
        <canvas data-spark="${esc(c.name)}" title="GPU utilization, last hour"></canvas></a>`;
    }).join('') || '<div class="muted">No clusters yet: <code>gpufleet apply -f fleet.yaml</code></div>';
    drawSparks();
    window.gpufleetPerf = window.gpufleetPerf || {};
    if (!window.gpufleetPerf.overviewPaintMs) window.gpufleetPerf.overviewPaintMs = performance.now();
  }

  // One line per thing to look at, the worst first: failed GPUs and unhealthy or unreachable
  // nodes, firing critical and warning alerts (in the API's order), halted rollouts.
  function attention(health, firing, rollouts) {
    const items = [];
    const nodeLink = (n) => `<a href="#/node/${encodeURIComponent(n)}">${esc(n)}</a>`;
    for (const n of health?.items || []) {
      const failedGpus = n.gpus.filter((g) => g.health === 'failed');
      for (const g of failedGpus) {
        items.push({ rank: 0, kind: 'gpu', node: n.node, html: `${nodeLink(n.node)} GPU ${g.index} failed: ${esc(g.reasons.map((r) => r.message).join('; '))}` });
      }
      if (!failedGpus.length && n.health !== 'ready') {
        items.push({ rank: n.health === 'unhealthy' ? 0 : 1, kind: 'node', node: n.node, html: `${nodeLink(n.node)} ${esc(n.health)}: ${esc(n.reasons.join('; '))}` });
      }
    }
    for (const a of firing.items) {
      const sev = a.labels.severity;
      if (sev !== 'critical' && sev !== 'warning') continue;
      items.push({ rank: sev === 'critical' ? 0 : 1, kind: 'alert', node: a.labels.Hostname || '',
        html: `<a href="#/alerts">${esc(a.alertname)}</a>${a.labels.Hostname ? ` on ${nodeLink(a.labels.Hostname)}` : ''}: ${esc(a.annotations.summary || '')}${a.silenced_by.length ? ' <span class="pill">silenced</span>' : ''}` });
    }
    for (const r of rollouts.items || []) {
      if (r.state !== 'halted' && r.state !== 'rolling_back') continue;
      items.push({ rank: 0, kind: 'rollout', node: '', html: `<a href="#/rollouts/${r.id}">Rollout ${r.id}</a> (${esc(r.target)}) ${esc(r.state.replace('_', ' '))}: ${esc(r.reason || '')}` });
    }
    items.sort((a, b) => a.rank - b.rank); // stable: each kind keeps its own order
    const shown = items.slice(0, 15);
    const box = document.getElementById('attention');
    box.classList.toggle('bad', items.some((i) => i.rank === 0));
    box.innerHTML = `<h3>Needs attention${items.length ? ` <span class="badge ${items.some((i) => i.rank === 0) ? 'critical' : 'warning'}">${items.length}</span>` : ''}</h3>` +
      (items.length
        ? `<ul>${shown.map((i) => `<li class="${i.rank === 0 ? 'sev-critical' : 'sev-warning'}" data-kind="${i.kind}" data-node="${esc(i.node)}">${i.html}</li>`).join('')}</ul>` +
          (items.length > shown.length ? `<div class="muted">and ${items.length - shown.length} more: <a href="#/alerts">Alerts</a></div>` : '')
        : '<div class="ok-text">Nothing: every GPU healthy, every node ready, no critical or warning alert firing.</div>');
  }

  function drawSparks() {
    for (const cv of el.querySelectorAll('canvas[data-spark]')) {
      const pts = trendSeries.get(cv.dataset.spark) || [];
      sparkline(cv, pts.map(([, v]) => v), { max: 100 });
    }
  }

  async function trend() {
    const [start, step] = RANGES[document.getElementById('range').value];
    const r = await api(`/api/v1/query_range?metric=gpu_util&by=cluster&start=${start}&step=${step}`);
    if (gone) return;
    trendSeries = new Map(r.series.map((s) => [s.cluster, s.points]));
    drawSparks();
    // The fleet's utilization: the clusters' averages weighted by their GPUs.
    const { xs, cols } = toColumns(r.series);
    const fleet = xs.map((_, i) => {
      let sum = 0, n = 0;
      r.series.forEach((s, k) => { const v = cols[k][i]; if (v !== null) { sum += v * s.gpus; n += s.gpus; } });
      return n ? sum / n : null;
    });
    destroyChart(chart);
    const box = document.getElementById('trend');
    box.innerHTML = '';
    if (!xs.length) { box.innerHTML = '<p class="muted">No telemetry in this range yet.</p>'; chart = null; return; }
    const now = Date.now() / 1000;
    chart = lineChart(box, { unit: '%', xs, height: 220, yRange: [0, 100], xRange: [now - spanSeconds(start), now], minSpan: 600,
      series: [{ label: 'fleet', values: fleet }, ...r.series.map((s, k) => ({ label: s.cluster, values: cols[k] }))] });
  }

  // The controllers sharing the store: one leads (runs the engines), the others serve. Hidden for
  // a token limited to some clusters, which may not list them.
  async function controllers() {
    const r = await api('/api/v1/controllers').catch(() => null);
    if (gone || !r) return;
    const panel = document.getElementById('controllers-panel');
    panel.hidden = false;
    document.getElementById('controllers').innerHTML = `<table><thead><tr><th>Controller</th><th>URL</th><th>Role</th>
      <th class="num">Epoch</th><th class="num">Agents</th><th>Started</th><th>Last seen</th></tr></thead><tbody>${r.items.map((c) =>
      `<tr data-controller="${esc(c.id)}"><td>${esc(c.id)}${c.self ? ' <span class="muted">(this one)</span>' : ''}</td><td>${esc(c.url)}</td>
        <td>${c.leader ? '<b>leader</b>' : 'follower'}</td><td class="num">${c.leader ? c.epoch : '—'}</td><td class="num">${c.agents}</td>
        <td>${esc(c.started_at)}</td><td${c.live ? '' : ' class="lv-failed"'}>${c.live ? esc(c.last_seen) : `silent for ${c.seen_ago_s} s`}</td></tr>`).join('')}</tbody></table>`;
  }

  document.getElementById('range').addEventListener('change', () => trend().catch(showError));
  function showError(e) { if (!gone) document.getElementById('cards').insertAdjacentHTML('afterbegin', `<p class="error">${esc(e.message)}</p>`); }
  cards().catch(showError).then(() => trend().catch(() => {})).then(controllers);
  let lastTrend = Date.now();
  return {
    live(ev) {
      cards().catch(() => {});
      controllers();
      // Once a minute; until the trend has data (a fleet just started), at every update.
      if (!chart || Date.now() - lastTrend > 60000) { lastTrend = Date.now(); trend().catch(() => {}); }
    },
    unmount() { gone = true; destroyChart(chart); },
  };
}
