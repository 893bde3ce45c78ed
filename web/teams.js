// Teams: who owns which clusters and pools, their projects, where their alerts go, their
// budget, and what they run now (GPUs of their running jobs, their queued jobs).

import { api, esc } from './api.js';
import { throttled } from './live.js';

const list = (xs) => (xs.length ? xs.map(esc).join(', ') : '<span class="muted">–</span>');

export function mount(el) {
  let gone = false;
  el.innerHTML = `<h2>Teams</h2>
    <p class="muted">Jobs name a team and one of its projects. A team's clusters and pools are its own (a pool without a team of its own is its cluster's); alerts about them carry <code>team=NAME</code> and go to the team's channels too. Change them in the fleet file (<code>teams:</code>), with <code>gpufleet teams</code> or <code>/api/v1/teams</code>.</p>
    <div class="panel table-wrap" id="teams-table">loading…</div>
    <p class="error" id="teams-error"></p>`;
  const $ = (id) => document.getElementById(id);

  async function load() {
    const [teams, running, queued] = await Promise.all([api('/api/v1/teams?limit=1000'),
      api('/api/v1/jobs?state=running&limit=5000'), api('/api/v1/jobs?state=queued&limit=5000')]);
    if (gone) return;
    const gpus = {}, waiting = {};
    for (const j of running.items) gpus[j.team] = (gpus[j.team] || 0) + j.gpus;
    for (const j of queued.items) waiting[j.team] = (waiting[j.team] || 0) + 1;
    const row = (t) => {
      const owns = [...t.clusters.map((c) => `<a href="#/cluster/${encodeURIComponent(c)}">cluster ${esc(c)}</a>`),
        ...t.pools.map((p) => `<a href="#/scaling/${encodeURIComponent(p)}">${esc(p)}</a>`)];
      const projects = t.projects.map((p) => `<span title="${esc(p.description)}">${esc(p.name)}</span>`);
      return `<tr data-team="${esc(t.name)}"><td><b>${esc(t.name)}</b></td><td>${projects.join(', ') || '<span class="muted">none: its jobs are refused</span>'}</td>
        <td>${owns.join(', ') || '<span class="muted">–</span>'}</td><td class="num">${gpus[t.name] || 0}</td><td class="num">${waiting[t.name] || 0}</td>
        <td>${list(t.channels)}</td><td class="num">${t.budget_monthly > 0 ? t.budget_monthly.toLocaleString() : '–'}</td><td>${list(t.contacts)}</td></tr>`;
    };
    $('teams-table').innerHTML = teams.items.length ? `<table><thead><tr><th>Team</th><th>Projects</th><th>Owns</th><th class="num">GPUs running</th>
      <th class="num">Jobs queued</th><th>Alert channels</th><th class="num">Budget / month</th><th>Contacts</th></tr></thead><tbody>${teams.items.map(row).join('')}</tbody></table>`
      : '<p class="muted">No teams yet: jobs are refused until one exists. Add one with <code>gpufleet teams create NAME --project P</code>.</p>';
  }

  const fail = (e) => { if (!gone) $('teams-error').textContent = e.message; };
  load().catch(fail);
  return {
    live: throttled(5000, load),
    unmount() { gone = true; },
  };
}
