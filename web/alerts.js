// Alerts view: firing, pending and recently resolved alerts with their labels and annotations;
// the silences; an operator can silence an alert (matchers prefilled from its labels) and
// expire a silence.

import { api, can, esc, ago, fmtTime } from './api.js';

const STATES = ['firing', 'pending', 'resolved'];
// The labels a new silence matches by default: the alert and where it is.
const SILENCE_LABELS = ['alertname', 'cluster', 'Hostname', 'gpu'];

export function mount(el) {
  let gone = false;
  let state = 'firing';
  let alerts = [];
  el.innerHTML = `<h2>Alerts</h2>
    <div class="row" style="margin-bottom:8px" id="tabs">${STATES.map((s) => `<button data-state="${s}">${s} <span class="badge" data-count="${s}">0</span></button>`).join('')}
      <span class="spacer"></span><input type="search" id="alert-filter" placeholder="filter alerts" aria-label="filter alerts"></div>
    <div class="panel table-wrap" id="alert-list">loading…</div>
    <div class="panel" id="silence-form" hidden></div>
    <div class="panel"><h3 style="margin-top:0">Silences</h3><div id="silences" class="table-wrap muted">loading…</div></div>`;
  const $ = (id) => document.getElementById(id);

  function labelsHtml(labels) {
    return Object.entries(labels).filter(([k]) => k !== 'alertname')
      .map(([k, v]) => `<span class="pill">${esc(k)}=${esc(v)}</span>`).join(' ');
  }

  function render() {
    for (const b of $('tabs').querySelectorAll('button')) b.classList.toggle('primary', b.dataset.state === state);
    for (const s of STATES) el.querySelector(`[data-count="${s}"]`).textContent = alerts.filter((a) => a.state === s).length;
    const q = $('alert-filter').value.trim().toLowerCase();
    const shown = alerts.filter((a) => a.state === state && (!q || JSON.stringify([a.alertname, a.labels, a.annotations]).toLowerCase().includes(q)));
    const canSilence = can('operator');
    $('alert-list').innerHTML = shown.length ? `<table><thead><tr><th>Alert</th><th>Severity</th><th>Labels</th><th>Summary</th><th>Since</th><th></th></tr></thead><tbody>${shown.map((a, i) => `
      <tr data-alert="${esc(a.alertname)}" data-fingerprint="${esc(a.fingerprint)}"><td><b>${esc(a.alertname)}</b>${a.silenced_by.length ? ' <span class="pill">silenced</span>' : ''}</td>
      <td class="sev-${esc(a.labels.severity)}">${esc(a.labels.severity)}</td><td>${labelsHtml(a.labels)}</td>
      <td>${esc(a.annotations.summary)}${a.annotations.description ? `<br><span class="muted">${esc(a.annotations.description)}</span>` : ''}${a.annotations.action ? `<br><span class="muted">action: ${esc(a.annotations.action)}</span>` : ''}</td>
      <td title="${esc(fmtTime(a.active_since))}">${esc(a.state === 'resolved' ? 'resolved ' + ago(a.resolved_at) : ago(a.active_since))}</td>
      <td>${canSilence && a.state !== 'resolved' ? `<button data-silence="${i}">Silence…</button>` : ''}</td></tr>`).join('')}</tbody></table>`
      : `<span class="muted">No ${state} alerts.</span>`;
    for (const b of $('alert-list').querySelectorAll('button[data-silence]')) {
      b.addEventListener('click', () => silenceForm(shown[Number(b.dataset.silence)]));
    }
  }

  function silenceForm(alert) {
    const form = $('silence-form');
    const labels = SILENCE_LABELS.filter((k) => alert.labels[k] !== undefined);
    form.hidden = false;
    form.innerHTML = `<h3 style="margin-top:0">Silence ${esc(alert.alertname)}</h3>
      <p class="muted">Matches alerts with all the checked labels. The alert keeps its state; its notifications stop.</p>
      ${labels.map((k) => `<label style="display:block"><input type="checkbox" name="m" value="${esc(k)}" checked> ${esc(k)} = ${esc(alert.labels[k])}</label>`).join('')}
      <div class="row" style="margin-top:8px"><label>For <select name="duration"><option>1h</option><option selected>2h</option><option>8h</option><option>24h</option><option>7d</option></select></label>
      <input name="comment" placeholder="why (required)" style="flex:1;min-width:200px">
      <button class="primary" type="button" data-create>Create silence</button><button type="button" data-cancel>Cancel</button></div>
      <p class="error" data-error></p>`;
    form.querySelector('[data-cancel]').onclick = () => { form.hidden = true; };
    form.querySelector('[data-create]').onclick = async () => {
      const matchers = [...form.querySelectorAll('input[name=m]:checked')].map((c) => ({ name: c.value, value: alert.labels[c.value], isRegex: false, isEqual: true }));
      try {
        await api('/api/v1/silences', { method: 'POST', body: { matchers, duration: form.querySelector('[name=duration]').value, comment: form.querySelector('[name=comment]').value } });
        form.hidden = true;
        await Promise.all([loadAlerts(), loadSilences()]);
      } catch (e) { form.querySelector('[data-error]').textContent = e.message; }
    };
    form.scrollIntoView({ block: 'nearest' });
  }

  async function loadAlerts() {
    const r = await api('/api/v1/alerts?limit=5000');
    if (gone) return;
    alerts = r.items;
    render();
  }

  async function loadSilences() {
    const r = await api('/api/v1/silences?limit=500');
    if (gone) return;
    const canExpire = can('operator');
    $('silences').innerHTML = r.items.length ? `<table><thead><tr><th>ID</th><th>State</th><th>Matchers</th><th>Ends</th><th>By</th><th>Comment</th><th></th></tr></thead><tbody>${r.items.map((s) => `
      <tr data-silence-id="${esc(s.id)}"><td>${esc(s.id)}</td><td>${esc(s.state)}</td><td>${s.matchers.map((m) => `<span class="pill">${esc(m.name)}${m.isEqual === false ? '!' : ''}${m.isRegex ? '=~' : '='}${esc(m.value)}</span>`).join(' ')}</td>
      <td>${esc(fmtTime(s.ends_at))}</td><td>${esc(s.created_by)}</td><td>${esc(s.comment)}</td>
      <td>${canExpire && s.state !== 'expired' ? `<button data-expire="${esc(s.id)}">Expire</button>` : ''}</td></tr>`).join('')}</tbody></table>` : 'No silences.';
    for (const b of $('silences').querySelectorAll('button[data-expire]')) {
      b.addEventListener('click', async () => {
        try { await api(`/api/v1/silences/${encodeURIComponent(b.dataset.expire)}`, { method: 'DELETE' }); } catch (e) { alert(e.message); }
        await Promise.all([loadAlerts(), loadSilences()]);
      });
    }
  }

  $('tabs').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-state]');
    if (b) { state = b.dataset.state; render(); }
  });
  $('alert-filter').addEventListener('input', render);
  const fail = (e) => { if (!gone) $('alert-list').innerHTML = `<span class="error">${esc(e.message)}</span>`; };
  loadAlerts().catch(fail);
  loadSilences().catch(() => {});
  return {
    live(ev) { if (ev.changed?.alerts || ev.type === 'reconnect') loadAlerts().catch(() => {}); },
    unmount() { gone = true; },
  };
}
