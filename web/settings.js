// Settings: how this controller connects to the rest of the monitoring stack — the Prometheus
// data source Grafana and promtool read (/prometheus), and each remote-write receiver's state
// (samples sent, sent again, dropped, pending; the last error), refreshed live.

import { api, esc } from './api.js';
import { throttled } from './live.js';

const n = (v) => Number(v).toLocaleString();
const mib = (b) => (b / (1 << 20)).toFixed(1);

export function mount(el) {
  let gone = false;
  const source = `${location.origin}/prometheus`;
  el.innerHTML = `<h2>Settings</h2>
    <div class="panel"><h3 style="margin:0 0 .5em">Grafana and promtool</h3>
      <p>Prometheus data source URL: <code id="prom-url">${esc(source)}</code>. Authenticate with an API token: as a bearer
      token (Grafana's custom header <code>Authorization: Bearer TOKEN</code>) or as the basic-auth password. See docs/grafana.md.</p></div>
    <div class="panel"><h3 style="margin:0 0 .5em">Remote write</h3><div id="rw" class="table-wrap">loading…</div></div>
    <p class="error" id="settings-error"></p>`;
  const $ = (id) => document.getElementById(id);

  async function load() {
    const r = await api('/api/v1/remote-write');
    if (gone) return;
    if (!r.items.length) {
      $('rw').innerHTML = `<p class="muted">No receiver. Start the controller with <code>--remote-write URL</code> (repeat for several),
        or list them under <code>remote_write:</code> in a <code>--config</code> file, to keep months of history in VictoriaMetrics or Prometheus.</p>`;
      return;
    }
    const row = (x) => {
      const state = x.state === 'retrying' ? `<span class="critical">retrying</span>` : esc(x.state);
      return `<tr data-receiver="${esc(x.name)}"><td><b>${esc(x.name)}</b><br><span class="muted">${esc(x.url)}</span></td>
        <td>${state}</td><td class="num">${n(x.samples_sent)}</td><td class="num">${n(x.samples_failed)}</td>
        <td class="num">${n(x.samples_dropped)}</td><td class="num pending">${n(x.samples_pending)}</td>
        <td>${esc(x.newest_sample_sent || '–')}</td><td>${esc(x.last_error) || '<span class="muted">–</span>'}</td></tr>`;
    };
    $('rw').innerHTML = `<table><thead><tr><th>Receiver</th><th>State</th><th class="num">Sent</th><th class="num">Failed (sent again)</th>
      <th class="num">Dropped</th><th class="num">Pending</th><th>Newest sample sent</th><th>Last error</th></tr></thead>
      <tbody>${r.items.map(row).join('')}</tbody></table>
      <p class="muted">Queue on disk: ${mib(r.queue_bytes)} MiB of ${mib(r.window_bytes)} MiB kept for receivers that are behind.</p>`;
  }

  const fail = (e) => { if (!gone) $('settings-error').textContent = e.message; };
  load().catch(fail);
  return {
    live: throttled(2000, () => load().catch(fail)),
    unmount() { gone = true; },
  };
}
