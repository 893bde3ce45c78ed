// Rollouts: every rollout of a driver or firmware (state, stage, progress), and for one its
// stages with their progress, the gates watched on the updated nodes, every node's state and
// the controls (pause, resume, approve, abort, roll back) for operators. Operators can plan and
// start one here too; the plan is a dry run that changes nothing.

import { api, can, esc, ago, fmtTime } from './api.js';

const STATES_DONE = new Set(['updated', 'failed', 'skipped', 'rolled_back']);
const CONTROLS = {
  running: ['pause', 'abort', 'rollback'],
  waiting_window: ['pause', 'abort', 'rollback'],
  awaiting_approval: ['approve', 'pause', 'abort', 'rollback'],
  paused: ['resume', 'abort', 'rollback'],
  halted: ['resume', 'rollback'],
  completed: ['rollback'],
  aborted: ['rollback'],
};

function stageName(n) { return n.stage; }

// "10m", "90s", "1h30m" -> ms (0: not a duration).
function durationMs(text) {
  let ms = 0, rest = String(text || '');
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000 };
  while (rest) {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)/.exec(rest);
    if (!m) return 0;
    ms += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return ms;
}

// A draining node's time left before its drain times out (its jobs are then requeued).
function tickDeadlines(root) {
  for (const e of root.querySelectorAll('[data-deadline]')) {
    const left = Math.round((Number(e.dataset.deadline) - Date.now()) / 1000);
    e.textContent = left > 0 ? `${Math.floor(left / 60)}m ${String(left % 60).padStart(2, '0')}s left` : 'drain timed out: its jobs are requeued';
  }
}

export function mount(el, params) {
  const ticking = setInterval(() => tickDeadlines(el), 1000);
  let gone = false;
  let selected = params.id || '';
  let lastLoad = 0;
  el.innerHTML = `<h2>Rollouts</h2>
    <div class="panel table-wrap" id="rollout-list">loading…</div>
    <div id="rollout-detail"></div>
    <div class="panel operator-only" id="rollout-new" ${can('operator') ? '' : 'hidden'}>
      <h3 style="margin-top:0">New rollout</h3>
      <div class="row" style="flex-wrap:wrap;gap:8px">
        <label>Kind <select id="ro-kind"><option>driver</option><option>gpu-firmware</option><option>nic-firmware</option></select></label>
        <label>Target <input id="ro-target" placeholder="580.95.05" size="14"></label>
        <label>Pools <input id="ro-pools" placeholder="a10-dev,t4-dev" size="22"></label>
        <label>Canaries per pool <input id="ro-canary" value="1" size="4"></label>
        <label>Confidence <input id="ro-confidence" value="2m" size="5"></label>
        <label>Batch <input id="ro-batch" value="2" size="4"></label>
        <label>Max unavailable <input id="ro-unavailable" value="25%" size="5"></label>
        <label>Rollback <select id="ro-rollback"><option>automatic</option><option>manual</option></select></label>
        <button type="button" id="ro-plan">Plan</button>
        <button type="button" class="primary" id="ro-start">Start</button>
      </div>
      <p class="error" id="ro-error"></p>
      <div id="ro-plan-out"></div>
    </div>
    <p class="error" id="rollouts-error"></p>`;
  const $ = (id) => document.getElementById(id);

  function request() {
    const pools = $('ro-pools').value.split(',').map((s) => s.trim()).filter(Boolean);
    const canary = $('ro-canary').value.trim();
    const unavailable = $('ro-unavailable').value.trim();
    return {
      kind: $('ro-kind').value,
      target: $('ro-target').value.trim(),
      selector: { pools },
      strategy: {
        canary: /%$/.test(canary) ? canary : Number(canary),
        confidence: $('ro-confidence').value.trim(),
        batch: { size: Number($('ro-batch').value) || 1, growth: 'linear' },
        max_unavailable: /%$/.test(unavailable) ? unavailable : Number(unavailable),
        rollback: $('ro-rollback').value,
      },
    };
  }

  function showFailed(body) {
    const failed = body?.failed || [];
    return failed.length ? `<table><thead><tr><th>Pool</th><th>Rule</th><th>Why</th><th>Source</th></tr></thead><tbody>${failed.map((f) =>
      `<tr><td>${esc(f.pool)}</td><td>${esc(f.rule)}</td><td>${esc(f.reason)}</td><td class="muted">${esc(f.source)}</td></tr>`).join('')}</tbody></table>` : '';
  }

  $('ro-plan').addEventListener('click', async () => {
    $('ro-error').textContent = '';
    try {
      const p = await api('/api/v1/rollouts/plan', { method: 'POST', body: request() });
      const mins = (s) => `${Math.round(s / 60)} min`;
      $('ro-plan-out').innerHTML = `<p>${p.nodes} node(s), expected <b>${mins(p.expected_s)}</b> (the confidence period included).</p>
        <table><thead><tr><th>Stage</th><th class="num">Nodes</th><th class="num">Expected</th><th>Nodes</th></tr></thead><tbody>${p.stages.map((s) =>
          `<tr><td>${esc(s.name)}</td><td class="num">${s.count}</td><td class="num">${mins(s.expected_s)}</td><td>${esc(s.nodes.slice(0, 6).join(', '))}${s.nodes.length > 6 ? ', …' : ''}</td></tr>`).join('')}</tbody></table>
        ${p.windows.filter((w) => !w.always).map((w) => `<p>Pool ${esc(w.pool)}: window ${w.open ? `open until ${esc(fmtTime(w.closes))}` : `closed, opens ${esc(fmtTime(w.next_open))}`}</p>`).join('')}
        ${p.failed.length ? `<p class="error">The target fails these compatibility rules; starting it would be refused:</p>${showFailed(p)}` : ''}
        ${warningsHtml(p.warnings)}`;
    } catch (e) { $('ro-error').textContent = e.message; }
  });
  // A downgrade or a target with known CVEs: said in the plan, and confirmed before a start.
  function warningsHtml(warnings) {
    return (warnings || []).map((w) => `<p class="warning-line" data-warning="${esc(w.kind)}"><b>${w.kind === 'cve' ? 'Known CVEs' : 'Downgrade'}:</b> ${esc(w.message)}</p>`).join('');
  }
  $('ro-start').addEventListener('click', async () => {
    $('ro-error').textContent = '';
    $('ro-plan-out').innerHTML = '';
    try {
      // (A target the matrix refuses is not asked about: the start below is refused and says why.)
      const p = await api('/api/v1/rollouts/plan', { method: 'POST', body: request() });
      if (!p.failed?.length && p.warnings?.length && !confirm(`Start this rollout anyway?\n\n${p.warnings.map((w) => w.message).join('\n\n')}`)) {
        $('ro-plan-out').innerHTML = warningsHtml(p.warnings);
        return;
      }
    } catch { /* the start below says what is wrong */ }
    try {
      const r = await api('/api/v1/rollouts', { method: 'POST', body: request() });
      location.hash = `#/rollouts/${r.id}`;
    } catch (e) {
      $('ro-error').textContent = e.message;
      $('ro-plan-out').innerHTML = showFailed(e.body);
    }
  });

  function list(items) {
    if (!items.length) {
      $('rollout-list').innerHTML = `<p class="muted">No rollout yet. Plan and start one below, or with <code>gpufleet rollouts start</code>.</p>`;
      return;
    }
    $('rollout-list').innerHTML = `<table><thead><tr><th>ID</th><th>Kind</th><th>Target</th><th>State</th><th>Stage</th><th>Progress</th><th class="num">Failed</th><th>Started</th><th>By</th></tr></thead><tbody>${items.map((r) => {
      const done = r.counts.updated + r.counts.rolled_back + r.counts.skipped + r.counts.failed;
      return `<tr data-rollout="${r.id}"${String(r.id) === String(selected) ? ' class="selected"' : ''}>
        <td><a href="#/rollouts/${r.id}">${r.id}</a></td><td>${esc(r.kind)}</td><td><code>${esc(r.target)}</code></td>
        <td class="ro-${esc(r.state)}">${esc(r.state)}</td><td>${esc(r.stage)}</td>
        <td><progress max="${r.total}" value="${done}"></progress> ${done}/${r.total}</td>
        <td class="num${r.counts.failed ? ' error' : ''}">${r.counts.failed}</td>
        <td title="${esc(fmtTime(r.created_at))}">${esc(ago(r.created_at))}</td><td>${esc(r.created_by)}</td></tr>`;
    }).join('')}</tbody></table>`;
  }

  function detail(r) {
    const box = $('rollout-detail');
    if (!r) { box.innerHTML = ''; return; }
    const stages = [];
    for (const n of r.nodes) {
      let s = stages.find((x) => x.name === stageName(n));
      if (!s) stages.push(s = { name: stageName(n), total: 0, done: 0, failed: 0, busy: 0 });
      s.total++;
      if (STATES_DONE.has(n.state)) s.done++;
      if (n.state === 'failed') s.failed++;
      if (n.step) s.busy++;
    }
    const updated = r.nodes.filter((n) => n.state === 'updated').length;
    const failed = r.nodes.filter((n) => n.state === 'failed');
    const controls = can('operator') ? (CONTROLS[r.state] || []) : [];
    box.innerHTML = `<div class="panel" data-rollout-detail="${r.id}">
      <div class="row"><h3 style="margin:0">Rollout ${r.id}: ${esc(r.kind)} <code>${esc(r.target)}</code></h3>
        <span class="ro-${esc(r.state)}" id="ro-state">${esc(r.state)}</span><span class="spacer"></span>
        ${controls.map((c) => `<button type="button" data-control="${c}"${c === 'abort' || c === 'rollback' ? ' class="danger"' : ''}>${c}</button>`).join('')}</div>
      <p id="ro-reason">${esc(r.reason)}</p>
      ${r.forced ? `<p class="error">Forced past the compatibility matrix: ${esc(r.forced)}</p>` : ''}
      <p class="error" id="ro-control-error"></p>
      <div class="totals">
        <div class="total"><span class="muted">Stage</span><b>${esc(r.stage || '—')}</b></div>
        <div class="total"><span class="muted">Updated</span><b>${updated} / ${r.total}</b></div>
        <div class="total"><span class="muted">Failed</span><b${failed.length ? ' class="error"' : ''}>${failed.length}</b> <small class="muted">halts at ${esc(r.strategy.max_failed_nodes)}</small></div>
        <div class="total"><span class="muted">Max unavailable</span><b>${esc(r.strategy.max_unavailable)}</b> <small class="muted">per pool and cluster</small></div>
        <div class="total"><span class="muted">Confidence</span><b>${esc(r.strategy.confidence)}</b>${r.confidence_until ? ` <small class="muted">until ${esc(fmtTime(r.confidence_until))}</small>` : ''}</div>
        <div class="total"><span class="muted">Windows</span><b>${r.strategy.respect_windows === false || (r.strategy.respect_windows === undefined && r.kind === 'driver') ? 'ignored' : 'respected'}</b></div>
      </div>
      <h4>Stages</h4>
      <table id="ro-stages"><thead><tr><th>Stage</th><th>Progress</th><th class="num">In progress</th><th class="num">Failed</th></tr></thead><tbody>${stages.map((s) =>
        `<tr><td>${esc(s.name)}</td><td><progress max="${s.total}" value="${s.done}"></progress> ${s.done}/${s.total}</td><td class="num">${s.busy}</td><td class="num${s.failed ? ' error' : ''}">${s.failed}</td></tr>`).join('')}</tbody></table>
      <h4>Gates on the updated nodes</h4>
      <p class="muted" style="margin-top:0">A node fails its gate when, after its update, the health model judges it unhealthy, it raises an XID that the rest of its pool does not, or an alert fires on it; a node that does not come back reporting the target within ${esc(r.strategy.boot_timeout)} fails too.</p>
      ${failed.length ? `<ul>${failed.map((n) => `<li><a href="#/node/${encodeURIComponent(n.node)}">${esc(n.node)}</a>: ${esc(n.message)}</li>`).join('')}</ul>` : '<p>No node has failed.</p>'}
      <h4>Nodes</h4>
      <div class="table-wrap"><table id="ro-nodes"><thead><tr><th>Node</th><th>Pool</th><th>Stage</th><th>State</th><th>From</th><th>To</th><th>Started</th><th>Ended</th><th>Message</th></tr></thead><tbody>${r.nodes.map((n) =>
        `<tr data-node="${esc(n.node)}"><td><a href="#/node/${encodeURIComponent(n.node)}">${esc(n.node)}</a></td><td>${esc(n.pool)}</td><td>${esc(n.stage)}</td>
        <td class="ro-${esc(n.state)}">${esc(n.state)}${n.state === 'draining' && n.started_at && durationMs(r.strategy.drain_timeout) ? ` <small class="muted" data-deadline="${Date.parse(n.started_at) + durationMs(r.strategy.drain_timeout)}"></small>` : ''}</td><td><code>${esc(n.from)}</code></td><td><code>${esc(n.to)}</code></td>
        <td>${esc(n.started_at ? ago(n.started_at) : '')}</td><td>${esc(n.ended_at ? ago(n.ended_at) : '')}</td><td>${esc(n.message)}</td></tr>`).join('')}</tbody></table></div>
    </div>`;
    tickDeadlines(box);
    for (const b of box.querySelectorAll('button[data-control]')) {
      b.addEventListener('click', async () => {
        const c = b.dataset.control;
        if ((c === 'abort' || c === 'rollback') && !confirm(`${c} rollout ${r.id}?`)) return;
        b.disabled = true;
        try {
          await api(`/api/v1/rollouts/${r.id}/${c}`, { method: 'POST', body: {} });
          await load();
        } catch (e) { $('ro-control-error').textContent = e.message; b.disabled = false; }
      });
    }
  }

  async function load() {
    lastLoad = Date.now();
    const all = await api('/api/v1/rollouts?limit=200');
    if (gone) return;
    list(all.items);
    if (!selected && all.items.length) selected = String(all.items[0].id);
    if (selected) {
      const r = await api(`/api/v1/rollouts/${encodeURIComponent(selected)}`).catch(() => null);
      if (!gone) detail(r);
    }
    $('rollouts-error').textContent = '';
  }

  load().catch((e) => { if (!gone) $('rollouts-error').textContent = e.message; });
  return {
    live() { if (Date.now() - lastLoad > 1500) load().catch(() => {}); },
    unmount() { gone = true; clearInterval(ticking); },
  };
}
