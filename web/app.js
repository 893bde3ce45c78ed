// The dashboard shell: sign-in, the navigation, the alert badge, and a hash router that mounts
// one view at a time. A view module exports mount(el, params) and returns {live(event),
// unmount()}; live() runs on every event of the stream.

import { api, session, setUnauthorizedHandler, esc } from './api.js';
import { startLive, stopLive, onLive } from './live.js';

const $ = (id) => document.getElementById(id);

// #/ overview; #/clusters; #/cluster/NAME; #/node/NAME; #/alerts; #/scaling[/POOL]; #/jobs;
// #/rollouts[/ID]; #/security; #/drift; #/compliance; #/teams; #/reports; #/inventory[/ID];
// #/settings.
const routes = [
  [/^#?\/?$/, 'overview', () => ({})],
  [/^#\/clusters$/, 'cluster', () => ({})],
  [/^#\/cluster\/([^/]+)$/, 'cluster', (m) => ({ cluster: decodeURIComponent(m[1]) })],
  [/^#\/node\/([^/]+)$/, 'node', (m) => ({ node: decodeURIComponent(m[1]) })],
  [/^#\/alerts$/, 'alerts', () => ({})],
  [/^#\/scaling(?:\/([^/]+))?$/, 'scaling', (m) => ({ pool: m[1] ? decodeURIComponent(m[1]) : '' })],
  [/^#\/jobs$/, 'jobs', () => ({})],
  [/^#\/rollouts(?:\/(\d+))?$/, 'rollouts', (m) => ({ id: m[1] || '' })],
  [/^#\/security$/, 'security', () => ({})],
  [/^#\/drift$/, 'drift', () => ({})],
  [/^#\/compliance$/, 'compliance', () => ({})],
  [/^#\/teams$/, 'teams', () => ({})],
  [/^#\/reports$/, 'reports', () => ({})],
  [/^#\/inventory(?:\/([^/]+))?$/, 'inventory', (m) => ({ id: m[1] ? decodeURIComponent(m[1]) : '' })],
  [/^#\/settings$/, 'settings', () => ({})],
];
const modules = {
  overview: () => import('./overview.js'),
  cluster: () => import('./cluster.js'),
  node: () => import('./node.js'),
  alerts: () => import('./alerts.js'),
  scaling: () => import('./scaling.js'),
  jobs: () => import('./jobs.js'),
  rollouts: () => import('./rollouts.js'),
  security: () => import('./security.js'),
  drift: () => import('./drift.js'),
  compliance: () => import('./compliance.js'),
  teams: () => import('./teams.js'),
  reports: () => import('./reports.js'),
  inventory: () => import('./inventory.js'),
  settings: () => import('./settings.js'),
};

let current = null;
let routeSeq = 0;

async function route() {
  const seq = ++routeSeq;
  const hash = location.hash || '#/';
  let name = null, params = {};
  for (const [re, view, get] of routes) {
    const m = hash.match(re);
    if (m) { name = view; params = get(m); break; }
  }
  const el = $('view');
  if (current) { current.unmount?.(); current = null; }
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.view === name);
  if (!name) { el.innerHTML = `<div class="panel">No page at ${esc(hash)}. <a href="#/">Overview</a></div>`; return; }
  const mod = await modules[name]();
  if (seq !== routeSeq) return; // the user moved on while the module loaded
  el.innerHTML = '';
  current = mod.mount(el, params);
}

async function refreshBadge() {
  try {
    const firing = await api('/api/v1/alerts?state=firing&limit=5000');
    const badge = $('alert-badge');
    const critical = firing.items.filter((a) => a.labels.severity === 'critical' && !a.silenced_by.length).length;
    badge.textContent = firing.total;
    badge.className = 'badge' + (critical ? ' critical' : firing.total ? ' warning' : '');
    badge.title = `${firing.total} firing, ${critical} critical not silenced`;
  } catch { /* alerting may be off; the badge stays */ }
}

// The controller's own health (GET /healthz, public): a store or telemetry log that cannot be
// written is said at the top of every page, since nothing new is kept until it can.
async function refreshHealth() {
  let h = null;
  try {
    const r = await fetch('/healthz');
    h = await r.json();
  } catch { return; }
  const problems = [];
  if (h?.store && !h.store.ok) problems.push(`the store: ${h.store.error || 'unavailable'}`);
  if (h?.telemetry && !h.telemetry.ok) problems.push(`the telemetry log: ${h.telemetry.error || 'cannot write'}`);
  const banner = $('health-banner');
  banner.hidden = problems.length === 0;
  banner.textContent = problems.length
    ? `This controller cannot write ${problems.join('; ')}. Nothing new is kept, and agents keep what was not acknowledged, until it can.`
    : '';
}
setInterval(refreshHealth, 10000);
refreshHealth();

function showLogin(message) {
  stopLive();
  session.who = null;
  if (current) { current.unmount?.(); current = null; }
  $('view').innerHTML = '';
  $('nav').hidden = true;
  $('status').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login').token.focus();
}

async function signIn() {
  try {
    session.who = await api('/api/v1/whoami');
  } catch (e) {
    session.token = '';
    showLogin(e.status === 401 ? 'That token was not accepted.' : e.message);
    return;
  }
  $('login').hidden = true;
  $('nav').hidden = false;
  $('status').hidden = false;
  const scope = session.who.clusters.length ? ` · ${session.who.clusters.join(', ')}` : '';
  $('who').textContent = `${session.who.name} (${session.who.role}${scope})`;
  document.body.dataset.role = session.who.role;
  startLive();
  refreshBadge();
  route();
}

setUnauthorizedHandler(() => { session.token = ''; showLogin('Your token is no longer accepted; sign in again.'); });

$('login').addEventListener('submit', (e) => {
  e.preventDefault();
  session.token = e.target.token.value.trim();
  e.target.token.value = '';
  signIn();
});
$('signout').addEventListener('click', () => { session.token = ''; showLogin('Signed out.'); });
window.addEventListener('hashchange', () => { if (session.who) route(); });
onLive((ev) => {
  if (ev.changed?.alerts) refreshBadge();
  current?.live?.(ev);
});

if (session.token) signIn(); else showLogin();
