// The live stream: a WebSocket to /api/v1/stream. The first message carries the token (a
// browser's WebSocket cannot set headers, and a token in the URL would land in logs). The
// server sends one "cycle" event per health evaluation with digests of the health verdicts and
// of the alerts; views subscribe and refetch what they show. On loss it reconnects with backoff
// and the indicator in the top bar says so.

import { session } from './api.js';

const listeners = new Set();
let socket = null;
let retryMs = 500;
let stopped = true;
let last = { health: '', alerts: '' };

function indicate(state, title) {
  const el = document.getElementById('live');
  el.className = state;
  el.textContent = state === 'up' ? 'live' : state === 'down' ? 'reconnecting' : 'connecting';
  el.title = title;
}

function connect() {
  if (stopped) return;
  indicate('', 'connecting to the live stream');
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/v1/stream';
  const ws = new WebSocket(url);
  socket = ws;
  ws.onopen = () => ws.send(JSON.stringify({ token: session.token }));
  ws.onmessage = (e) => {
    let msg;
    try { msg = JSON.parse(e.data); } catch { return; }
    if (msg.type === 'hello') {
      retryMs = 500;
      indicate('up', 'live: updates arrive as the controller evaluates the fleet');
      // Whatever changed while we were away: every view refetches once.
      for (const fn of listeners) fn({ type: 'reconnect', changed: { health: true, alerts: true } });
    } else if (msg.type === 'cycle') {
      const changed = { health: msg.health !== last.health, alerts: msg.alerts !== last.alerts };
      last = { health: msg.health, alerts: msg.alerts };
      for (const fn of listeners) fn({ ...msg, changed });
    } else if (msg.type === 'error') {
      indicate('down', 'the live stream refused the token: ' + msg.message);
      stopped = true;
    }
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = null;
    if (stopped) return;
    indicate('down', `live stream lost; retrying in ${Math.round(retryMs / 1000)}s`);
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 10000);
  };
}

export function startLive() {
  if (!stopped) return;
  stopped = false;
  retryMs = 500;
  connect();
}

export function stopLive() {
  stopped = true;
  if (socket) socket.close();
  socket = null;
}

// fn(event) for every cycle; returns the unsubscribe function.
export function onLive(fn) {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

// A view's live(): `fn` at most once every `ms`, the first `ms` after the view was mounted (it
// loaded then). The stream's cycles come every few seconds; a page whose figures change slowly
// refetches less often. A failed refetch is left for the next.
export function throttled(ms, fn) {
  let last = Date.now();
  return () => {
    if (Date.now() - last < ms) return;
    last = Date.now();
    Promise.resolve().then(fn).catch(() => {});
  };
}
