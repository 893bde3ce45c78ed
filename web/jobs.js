// Jobs: the GPU requests of the fleet (queued, running, ended), filtered by state and pool, with
// where each runs, how long it waited and ran, and its GPU-hours. Operators can cancel one.

import { api, can, esc, ago, fmtTime } from './api.js';
import { throttled } from './live.js';

const STATES = ['', 'queued', 'running', 'completed', 'cancelled'];
const SOURCES = [['', 'all'], ['gpufleet', "gpufleet's queue"], ['slurm', 'Slurm']];
const secs = (s) => (s < 90 ? `${Math.round(s)} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

export function mount(el) {
  let gone = false;
  el.innerHTML = `<h2>Jobs</h2>
    <div class="row" style="margin-bottom:8px">
      <label>State <select id="jobs-state">${STATES.map((s) => `<option value="${s}">${s || 'all'}</option>`).join('')}</select></label>
      <label>Pool <select id="jobs-pool"><option value="">all</option></select></label>
      <label>Source <select id="jobs-source">${SOURCES.map(([v, t]) => `<option value="${v}">${t}</option>`).join('')}</select></label>
      <span class="muted" id="jobs-summary"></span></div>
    <div class="panel table-wrap" id="jobs-table">loading…</div>
    <p class="error" id="jobs-error"></p>`;
  const $ = (id) => document.getElementById(id);

  function row(j) {
    const shape = j.gpus_per_node ? `${j.gpus} <span class="muted">(${j.gpus_per_node}/node)</span>` : String(j.gpus);
    const where = j.placement.map((p) => `<a href="#/node/${encodeURIComponent(p.node)}">${esc(p.node)}</a><span class="muted">:${p.gpus.join(',')}</span>`).join(' ');
    // gpufleet's own jobs may be cancelled here; a Slurm job is Slurm's (scancel).
    const live = (j.state === 'queued' || j.state === 'running') && j.source === 'gpufleet';
    const slurm = j.source === 'slurm' ? ` <span class="pill" title="a Slurm job, followed from squeue${j.user ? `; user ${esc(j.user)}` : ''}">slurm ${esc(j.external_id)}</span>` : '';
    return `<tr data-job="${j.id}" data-state="${esc(j.state)}" data-source="${esc(j.source)}"><td class="num">${j.id}${slurm}</td><td>${esc(j.team)}${j.project ? ` <span class="muted">${esc(j.project)}</span>` : ''}</td>
      <td><a href="#/scaling/${encodeURIComponent(j.pool)}">${esc(j.pool)}</a></td><td class="num">${shape}</td><td class="num">${j.priority}</td>
      <td>${esc(j.state)}${j.movable ? ' <span class="pill" title="consolidation may move it">movable</span>' : ''}${j.sim_profile ? ` <span class="pill" title="how its simulated GPUs behave">sim: ${esc(j.sim_profile)}</span>` : ''}</td>
      <td class="num">${secs(j.wait_s)}</td><td class="num">${secs(j.run_s)}</td><td class="num">${j.gpu_hours.toFixed(2)}</td>
      <td>${where || '–'}</td><td class="muted" title="${esc(fmtTime(j.submitted_at))}">${esc(j.reason)} · submitted ${esc(ago(j.submitted_at))}</td>
      <td>${can('operator') && live ? `<button type="button" data-cancel="${j.id}">Cancel</button>` : ''}</td></tr>`;
  }

  async function load() {
    const q = new URLSearchParams({ limit: '200' });
    if ($('jobs-state').value) q.set('state', $('jobs-state').value);
    if ($('jobs-pool').value) q.set('pool', $('jobs-pool').value);
    if ($('jobs-source').value) q.set('source', $('jobs-source').value);
    const [r, queued, running] = await Promise.all([api(`/api/v1/jobs?${q}`), api('/api/v1/jobs?state=queued&limit=1'), api('/api/v1/jobs?state=running&limit=1')]);
    if (gone) return;
    $('jobs-summary').textContent = `${running.total} running, ${queued.total} queued; ${r.total} shown${r.total > r.items.length ? ` (the newest ${r.items.length})` : ''}`;
    $('jobs-table').innerHTML = r.items.length ? `<table><thead><tr><th class="num">ID</th><th>Team</th><th>Pool</th><th class="num">GPUs</th><th class="num">Priority</th><th>State</th>
      <th class="num">Wait</th><th class="num">Run</th><th class="num">GPU-h</th><th>Where</th><th>Why</th><th></th></tr></thead><tbody>${r.items.map(row).join('')}</tbody></table>`
      : '<p class="muted">No jobs here. Submit one with <code>gpufleet jobs submit</code> or <code>POST /api/v1/jobs</code>.</p>';
    for (const b of $('jobs-table').querySelectorAll('button[data-cancel]')) {
      b.addEventListener('click', async () => {
        $('jobs-error').textContent = '';
        try {
          await api(`/api/v1/jobs/${b.dataset.cancel}`, { method: 'DELETE' });
          await load();
        } catch (e) { $('jobs-error').textContent = e.message; }
      });
    }
  }

  const fail = (e) => { if (!gone) $('jobs-error').textContent = e.message; };
  api('/api/v1/pools').then((p) => {
    if (gone) return;
    $('jobs-pool').insertAdjacentHTML('beforeend', p.items.map((x) => `<option>${esc(x.name)}</option>`).join(''));
  }).catch(() => {});
  for (const id of ['jobs-state', 'jobs-pool', 'jobs-source']) $(id).addEventListener('change', () => load().catch(fail));
  load().catch(fail);
  return {
    live: throttled(5000, load),
    unmount() { gone = true; },
  };
}
