// Node view: facts, the actions the role allows (cordon, uncordon, drain; reboot, reset a GPU,
// maintenance, decommission: each drains first and is carried out by the node's agent), each
// GPU with its health, per-GPU charts over a chosen range (drag to zoom, double-click to
// reset), the node's alerts, its versions and the rollouts that changed them, its operations,
// and its recent events (state changes and GPU events).

import { api, can, esc, ago, fmtTime, simPill } from './api.js';
import { lineChart, destroyChart, toColumns, spanSeconds } from './charts.js';

const RANGES = { '15m': ['-15m', '10s'], '1h': ['-1h', '1m'], '6h': ['-6h', '5m'], '24h': ['-24h', '15m'], '7d': ['-7d', '1h'] };
// [metric, title, unit, scale, options]: stored units to shown units; the fields NVIDIA's DCGM
// dashboard charts. A field the GPUs do not report (absent, not zero) says so in its box.
const PCT = { yRange: [0, 100] };
const CHARTS = [['gpu_util', 'Utilization', '%', 1, PCT], ['mem_copy_util', 'Memory copy utilization', '%', 1, PCT],
  ['gpu_temp', 'GPU temperature', '°C', 1], ['memory_temp', 'Memory temperature', '°C', 1],
  ['power_usage', 'Power', 'W', 0.001], ['total_energy', 'Energy consumed (counter)', 'kWh', 1 / 3.6e9],
  ['fb_used', 'Memory used', 'GiB', 1 / 1024], ['sm_clock', 'SM clock', 'MHz', 1], ['mem_clock', 'Memory clock', 'MHz', 1],
  ['clocks_event_reasons', 'Clock event (throttle) reasons', 'bitmask', 1, { reasons: true }],
  ['pcie_tx', 'PCIe transmit', 'MB/s', 1 / 1000], ['pcie_rx', 'PCIe receive', 'MB/s', 1 / 1000], ['pcie_replay', 'PCIe replays', 'count', 1],
  ['ecc_sbe_volatile', 'ECC single-bit errors (volatile)', 'errors', 1], ['ecc_dbe_volatile', 'ECC double-bit errors (volatile)', 'errors', 1],
  ['remapped_correctable', 'Rows remapped (correctable)', 'rows', 1], ['nvlink_links_down', 'NVLink links down', 'links', 1]];
// NVML's clocks event reasons (nvmlClocksEventReason*): what holds the clocks down.
const REASONS = [[0x1, 'idle'], [0x2, 'application clocks'], [0x4, 'SW power cap'], [0x8, 'HW slowdown'], [0x10, 'sync boost'],
  [0x20, 'SW thermal slowdown'], [0x40, 'HW thermal slowdown'], [0x80, 'HW power brake'], [0x100, 'display clocks']];
export const reasonsOf = (mask) => REASONS.filter(([bit]) => mask & bit).map(([, name]) => name);

export function mount(el, params) {
  const name = params.node;
  let gone = false;
  let charts = [];
  el.innerHTML = `<div class="row"><h2 id="title">${esc(name)}</h2><span class="spacer"></span><span id="actions" class="row"></span></div>
    <p class="error" id="node-error"></p>
    <div class="panel"><div class="facts" id="facts">loading…</div></div>
    <div class="panel"><h3 style="margin-top:0">GPUs</h3><div class="table-wrap" id="gpus"></div></div>
    <div class="row"><h3>Telemetry</h3><span class="spacer"></span><label>Range <select id="range" aria-label="range">${Object.keys(RANGES).map((r) => `<option${r === '1h' ? ' selected' : ''}>${r}</option>`).join('')}</select></label></div>
    <div class="charts" id="charts"></div>
    <div class="panel"><h3 style="margin-top:0">Alerts</h3><div id="node-alerts" class="muted table-wrap">loading…</div></div>
    <div class="panel"><h3 style="margin-top:0">Versions</h3><div id="versions" class="table-wrap muted">loading…</div></div>
    <div class="panel"><h3 style="margin-top:0">Operations</h3><div id="operations" class="table-wrap muted">loading…</div></div>
    <div class="panel"><h3 style="margin-top:0">Recent events</h3><div id="events" class="table-wrap muted">loading…</div></div>`;
  const $ = (id) => document.getElementById(id);

  function actions(node) {
    const box = $('actions');
    if (!can('operator')) { box.innerHTML = '<span class="muted">read-only (viewer)</span>'; return; }
    const cordoned = ['cordoned', 'draining', 'drained'].includes(node.state);
    const retiring = ['decommissioning', 'retired'].includes(node.state);
    box.innerHTML = `${cordoned ? '<button data-action="uncordon">Uncordon</button>' : '<button data-action="cordon">Cordon</button>'}
      ${node.state === 'drained' || node.state === 'draining' ? '' : '<button class="danger" data-action="drain">Drain</button>'}
      ${retiring ? '' : `<button data-op="reboot" title="drain, reboot through its agent, put back">Reboot</button>
      <button data-op="reset-gpu" title="drain, reset one GPU, put back">Reset GPU…</button>
      ${node.state === 'maintenance' ? '<button data-op="maintenance" data-mode="leave">Leave maintenance</button>' : '<button data-op="maintenance" data-mode="enter" title="drain, then maintenance">Maintenance</button>'}
      <button class="danger" data-op="decommission">Decommission</button>`}`;
    for (const b of box.querySelectorAll('button[data-op]')) {
      b.addEventListener('click', async () => {
        const body = { action: b.dataset.op };
        if (b.dataset.mode) body.mode = b.dataset.mode;
        if (b.dataset.op === 'reset-gpu') {
          const idx = prompt(`Reset which GPU of ${name}? (index 0..${node.gpus.length - 1})`, '0');
          if (idx === null) return;
          body.gpu = Number(idx);
        } else if (!confirm(`${b.textContent.trim()} ${name}? Its jobs are drained first.`)) return;
        b.disabled = true;
        try {
          await api(`/api/v1/nodes/${encodeURIComponent(name)}/actions`, { method: 'POST', body });
          $('node-error').textContent = '';
          await load();
        } catch (e) { $('node-error').textContent = e.message; b.disabled = false; }
      });
    }
    for (const b of box.querySelectorAll('button[data-action]')) {
      b.addEventListener('click', async () => {
        b.disabled = true;
        try {
          await api(`/api/v1/nodes/${encodeURIComponent(name)}/${b.dataset.action}`, { method: 'POST', body: {} });
          $('node-error').textContent = '';
          await load();
        } catch (e) { $('node-error').textContent = e.message; b.disabled = false; }
      });
    }
  }

  async function load() {
    const [node, health, events, gpuEvents, latest, slurmView] = await Promise.all([
      api(`/api/v1/nodes/${encodeURIComponent(name)}`),
      api(`/api/v1/health?node=${encodeURIComponent(name)}&show=all`).catch(() => null),
      api(`/api/v1/nodes/${encodeURIComponent(name)}/events?limit=20`),
      api(`/api/v1/events?node=${encodeURIComponent(name)}&limit=20`).catch(() => ({ items: [] })),
      Promise.all(['gpu_util', 'gpu_temp', 'power_usage'].map((m) =>
        api(`/api/v1/query?metric=${m}&node=${encodeURIComponent(name)}`).catch(() => ({ items: [] })))),
      api('/api/v1/slurm').catch(() => null),
    ]);
    if (gone) return;
    const f = node.facts || {};
    $('title').innerHTML = `${esc(node.name)}${simPill(node.simulated)} <span class="st-${esc(node.state)}" style="font-size:14px">${esc(node.state)}</span>`;
    const facts = [['Cluster', `<a href="#/cluster/${encodeURIComponent(node.cluster)}">${esc(node.cluster)}</a>`], ['Pool', esc(node.pool)],
      ['State', `<span class="st-${esc(node.state)}">${esc(node.state)}</span> since ${esc(ago(node.state_since))}`], ['Reason', esc(node.reason)],
      ['GPUs', `${node.gpu_count} × ${esc(node.gpu_model)}`], ['Driver', esc(f.driver_version)], ['CUDA', esc(f.cuda_driver_version)],
      ['OS', esc(f.os)], ['Kernel', esc(f.kernel)], ['Agent', `${esc(f.agent_version)} (${esc(f.backend)})`],
      ['Labels', `<span id="node-labels">${Object.entries(f.labels || {}).map(([k, v]) => `<code>${esc(k)}=${esc(v)}</code>`).join(' ') || '—'}</span>`],
      ['Connected', node.connected ? 'yes' : 'no'], ['Last seen', esc(ago(node.last_seen_at))], ['Registered', esc(fmtTime(node.registered_at))]];
    const slurm = (slurmView || { items: [] }).items.flatMap((c) => c.nodes).find((n) => n.node === node.name);
    if (slurm) {
      const by = slurm.drained_by ? ` <span class="muted">(drained by ${esc(slurm.drained_by)})</span>` : '';
      facts.splice(4, 0, ['Slurm', `<span id="node-slurm">${esc(slurm.slurm_name)}: ${esc(slurm.state)}${slurm.flags.length ? ` ${esc(slurm.flags.join(','))}` : ''}${slurm.reason ? ` · ${esc(slurm.reason)}` : ''}${by}</span>`]);
    }
    $('facts').innerHTML = facts.map(([k, v]) => `<div><span>${k}</span>${v}</div>`).join('');
    actions(node);
    const hv = new Map((health?.items?.[0]?.gpus || []).map((g) => [g.index, g]));
    const lv = latest.map((r) => new Map(r.items.map((i) => [i.gpu, i.value])));
    $('gpus').innerHTML = `<table><thead><tr><th>#</th><th>UUID</th><th>Model</th><th>Serial</th><th>Health</th><th>Util %</th><th>Temp °C</th><th>Power W</th><th>Limit W</th><th>Settings</th><th>Reasons</th></tr></thead><tbody>${node.gpus.map((g) => {
      const st = g.settings || {};
      const layout = g.mig_layout && Object.entries(g.mig_layout).map(([p, n]) => `${p} ×${n}`).join(', ');
      const mig = g.mig_mode === 'enabled' ? `MIG ${layout || (g.mig_layout ? 'on, no instances' : 'on')}` : g.mig_mode === 'disabled' ? 'MIG off' : '';
      const settings = [mig, st.persistence_mode && `persistence ${st.persistence_mode}`, st.ecc_mode && `ECC ${st.ecc_mode}`,
        st.compute_mode && `compute ${st.compute_mode}`,
        st.app_clock_graphics_mhz != null && `clocks ${st.app_clock_graphics_mhz}/${st.app_clock_mem_mhz} MHz`].filter(Boolean).join(', ');
      const h = hv.get(g.index);
      const power = lv[2].get(g.index);
      return `<tr data-gpu="${g.index}"><td>${g.index}</td><td><code>${esc(g.uuid)}</code></td><td>${esc(g.model || g.name)}</td><td>${esc(g.serial)}</td>
        <td class="lv-${esc(h?.health)}">${esc(h?.health ?? '—')}</td><td class="num">${lv[0].get(g.index) ?? '—'}</td><td class="num">${lv[1].get(g.index) ?? '—'}</td>
        <td class="num">${power == null ? '—' : Math.round(power / 1000)}</td><td class="num">${st.power_limit_w ?? '—'}</td><td>${esc(settings || '—')}</td><td>${esc((h?.reasons || []).map((r) => r.message).join('; '))}</td></tr>`;
    }).join('')}</tbody></table>`;
    loadVersions().catch(() => {});
    const rows = [
      ...events.items.map((e) => ({ t: e.time, what: `state ${e.from} → ${e.to}`, detail: e.reason, by: e.actor })),
      ...gpuEvents.items.map((e) => ({ t: e.time, what: `GPU ${e.gpu} ${e.kind}${e.kind === 'xid' ? ' ' + e.value : ''}`, detail: e.uuid, by: '' })),
    ].sort((a, b) => (a.t < b.t ? 1 : -1)).slice(0, 30);
    $('events').innerHTML = rows.length ? `<table><thead><tr><th>When</th><th>What</th><th>Detail</th><th>By</th></tr></thead><tbody>${rows.map((r) =>
      `<tr><td title="${esc(fmtTime(r.t))}">${esc(ago(r.t))}</td><td>${esc(r.what)}</td><td>${esc(r.detail)}</td><td>${esc(r.by)}</td></tr>`).join('')}</tbody></table>` : 'No events.';
  }

  async function loadVersions() {
    const [v, ops, vulns, drift] = await Promise.all([
      api(`/api/v1/nodes/${encodeURIComponent(name)}/versions`),
      api(`/api/v1/nodes/${encodeURIComponent(name)}/actions`),
      api(`/api/v1/vulnerabilities?node=${encodeURIComponent(name)}`).catch(() => ({ items: [] })),
      api(`/api/v1/drift?node=${encodeURIComponent(name)}`).catch(() => ({ items: [] })),
    ]);
    if (gone) return;
    const sec = vulns.items[0];
    const security = !sec ? '' : sec.status === 'ok'
      ? '<p id="node-security" class="vuln-ok">No published CVE applies to its driver or Container Toolkit.</p>'
      : `<p id="node-security"><a href="#/security" class="vuln-${esc(sec.status)}">${sec.status === 'unsupported_branch' ? 'Unsupported branch' : 'Exposed'}</a>:
        ${sec.cves.length} published CVE(s), highest CVSS ${Number(sec.max_cvss).toFixed(1)}${sec.fix ? `; fix: ${esc(sec.fix)}` : ''}
        (<code>gpufleet vulns show ${esc(name)}</code>)</p>`;
    // Its drift from the golden profile: the unresolved findings.
    const open = drift.items.filter((f) => f.state !== 'resolved');
    const driftHtml = `<div id="node-drift">${open.length ? `<p><a href="#/drift">Drift from its profile</a>: ${open.length} finding(s)
      (<code>gpufleet drift list --node ${esc(name)}</code>)</p><table><thead><tr><th>Fact</th><th>Expected</th><th>Actual</th><th>Severity</th>
      <th>Remediation</th><th>State</th></tr></thead><tbody>${open.map((f) => `<tr><td>${esc(f.fact)}${f.gpu !== null ? ` (GPU ${f.gpu})` : ''}</td>
      <td><code>${esc(f.expected)}</code></td><td><code>${esc(f.actual)}</code></td><td>${esc(f.severity)}</td><td>${esc(f.remediation)}</td>
      <td>${esc(f.state)}</td></tr>`).join('')}</tbody></table>` : '<p class="muted">It matches its profile (or its pool has none).</p>'}</div>`;
    $('versions').innerHTML = `<p>Driver <code>${esc(v.driver)}</code> (CUDA ${esc(v.cuda_driver)}), VBIOS <code>${esc(v.vbios || '—')}</code>, NIC firmware <code>${esc(v.nic_firmware || '—')}</code>${sec?.container_toolkit ? `, Container Toolkit <code>${esc(sec.container_toolkit)}</code>` : ''}</p>${security}${driftHtml}
      ${v.history.length ? `<table><thead><tr><th>Rollout</th><th>Kind</th><th>From</th><th>To</th><th>State</th><th>Ended</th><th>Message</th></tr></thead><tbody>${v.history.map((h) =>
        `<tr><td><a href="#/rollouts/${h.rollout}">${h.rollout}</a></td><td>${esc(h.kind)}</td><td><code>${esc(h.from)}</code></td><td><code>${esc(h.to)}</code></td>
        <td class="ro-${esc(h.state)}">${esc(h.state)}</td><td>${esc(h.ended_at ? ago(h.ended_at) : '')}</td><td>${esc(h.message)}</td></tr>`).join('')}</tbody></table>` : '<p class="muted">No rollout has changed this node.</p>'}`;
    $('operations').innerHTML = ops.items.length ? `<table><thead><tr><th>#</th><th>Action</th><th>State</th><th>By</th><th>Started</th><th>Message</th></tr></thead><tbody>${ops.items.map((o) =>
      `<tr data-op-id="${o.id}"><td>${o.id}</td><td>${esc(o.action)}${o.gpu !== undefined ? ` GPU ${o.gpu}` : ''}${o.mode ? ` ${esc(o.mode)}` : ''}</td><td>${esc(o.state)}</td><td>${esc(o.actor)}</td>
      <td>${esc(ago(o.created_at))}</td><td>${esc(o.message)}</td></tr>`).join('')}</tbody></table>` : 'No operation on this node since the controller started.';
  }

  async function loadAlerts() {
    const r = await api('/api/v1/alerts?limit=5000');
    if (gone) return;
    const mine = r.items.filter((a) => a.labels.Hostname === name || a.labels.node === name);
    $('node-alerts').innerHTML = mine.length ? `<table><thead><tr><th>Alert</th><th>State</th><th>Severity</th><th>GPU</th><th>Summary</th><th>Since</th></tr></thead><tbody>${mine.map((a) =>
      `<tr><td>${esc(a.alertname)}</td><td>${esc(a.state)}</td><td class="sev-${esc(a.labels.severity)}">${esc(a.labels.severity)}</td><td>${esc(a.labels.gpu)}</td>
      <td>${esc(a.annotations.summary)}</td><td>${esc(ago(a.active_since))}</td></tr>`).join('')}</tbody></table>` : 'No alerts for this node.';
  }

  async function loadCharts() {
    const [start, step] = RANGES[$('range').value];
    const replies = await Promise.all(CHARTS.map(([m]) =>
      api(`/api/v1/query_range?metric=${m}&node=${encodeURIComponent(name)}&start=${start}&step=${step}`)));
    if (gone) return;
    charts.forEach(destroyChart);
    charts = [];
    const box = $('charts');
    box.innerHTML = '';
    const now = Date.now() / 1000;
    const xRange = [now - spanSeconds(start), now];
    CHARTS.forEach(([metric, title, unit, scale, opts = {}], i) => {
      const r = replies[i];
      const { xs, cols } = toColumns(r.series);
      const div = document.createElement('div');
      div.className = 'chart';
      div.dataset.metric = metric;
      box.appendChild(div);
      if (!xs.length) { div.innerHTML = `<h4>${title}</h4><p class="muted">not reported in this range</p>`; return; }
      div.dataset.points = String(cols.reduce((n, c) => n + c.filter((v) => v !== null).length, 0));
      if (opts.reasons) {
        // A bitmask is no line: each GPU's reasons now, and how many there were over the range.
        div.innerHTML = `<h4>${title}</h4><table><thead><tr><th>GPU</th><th>Now</th><th>Seen in this range</th></tr></thead><tbody>${r.series.map((s, k) => {
          const seen = cols[k].reduce((m, v) => (v === null ? m : m | v), 0);
          const last = [...cols[k]].reverse().find((v) => v !== null) ?? 0;
          return `<tr data-gpu="${s.gpu}"><td>${s.gpu}</td><td>${esc(reasonsOf(last).join(', ') || 'none')}</td><td>${esc(reasonsOf(seen).join(', ') || 'none')}</td></tr>`;
        }).join('')}</tbody></table>`;
        return;
      }
      charts.push(lineChart(div, { title, unit, xs, height: 180, xRange, minSpan: 300, yRange: opts.yRange,
        series: r.series.map((s, k) => ({ label: `GPU ${s.gpu}`, values: cols[k].map((v) => (v === null ? null : v * scale)) })) }));
    });
  }

  $('range').addEventListener('change', () => loadCharts().catch((e) => ($('node-error').textContent = e.message)));
  const fail = (e) => { if (!gone) $('node-error').textContent = e.status === 404 ? `No node named ${name}.` : e.message; };
  load().catch(fail);
  loadAlerts().catch(() => {});
  loadCharts().catch(fail);
  let lastCharts = Date.now();
  return {
    live(ev) {
      load().catch(() => {});
      if (ev.changed?.alerts) loadAlerts().catch(() => {});
      // Short ranges move visibly: redraw them; longer ones every minute.
      const short = $('range').value === '15m';
      if (charts.some((u) => u.zoomed)) return; // keep what the user zoomed into
      if (short || Date.now() - lastCharts > 60000) { lastCharts = Date.now(); loadCharts().catch(() => {}); }
    },
    unmount() { gone = true; charts.forEach(destroyChart); },
  };
}
