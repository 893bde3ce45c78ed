// What the browser tests share: a real `gpufleet up` (controller on the embedded store and a
// simulated fleet) on a loopback port, the fleet file's expected counts, Debian's Chromium
// through playwright-core, and where screenshots go.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const SOURCE = path.resolve(here, '../..');
export const BIN = process.env.GPUFLEET_BIN || path.join(SOURCE, 'build-test/gpufleet');
export const OUT = process.env.GPUFLEET_TEST_OUTPUT || path.join(SOURCE, 'build-test/test-output/browser');
fs.mkdirSync(OUT, { recursive: true });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Clusters and GPU counts from a fleet file (the shape of examples/fleet.yaml): what the
// overview must show, read from the file itself rather than from the API under test.
export function fleetCounts(file) {
  const clusters = new Map();
  let cluster = null, gpusPerNode = 0, inClusters = false;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    let m;
    if ((m = line.match(/^([a-z]\w*):/))) inClusters = m[1] === 'clusters';  // top-level sections
    if (!inClusters) continue;  // the teams' entries are names too
    if ((m = line.match(/^ {2}- name: (\S+)/))) { cluster = m[1]; clusters.set(cluster, { gpus: 0, nodes: 0 }); }
    else if ((m = line.match(/^\s+gpus_per_node: (\d+)/))) gpusPerNode = Number(m[1]);
    else if ((m = line.match(/^\s+size: (\d+)/)) && cluster) {
      const c = clusters.get(cluster);
      c.nodes += Number(m[1]);
      c.gpus += Number(m[1]) * gpusPerNode;
    }
  }
  return clusters;
}

export async function call(base, token, method, route, body) {
  const r = await fetch(base + route, {
    method,
    headers: { Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null, headers: r.headers };
}

export async function waitFor(what, fn, timeoutMs = 60000) {
  const until = Date.now() + timeoutMs;
  let last;
  while (Date.now() < until) {
    try { last = await fn(); if (last) return last; } catch (e) { if (e.fatal) throw e; last = e; }
    await sleep(250);
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

// `gpufleet up -f FILE --workload off` (the tests submit their own jobs), with `extra` flags, in
// a fresh data directory; resolves once every node of the file is
// ready. stop() ends it; restart() starts it again on the same address and data.
export async function startFleet(file, { healthInterval = '1s', extra = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpufleet-browser-'));
  const counts = fleetCounts(file);
  const want = [...counts.values()].reduce((n, c) => n + c.nodes, 0);
  const fleet = { dir, file, counts, base: '', token: '', proc: null, listen: '127.0.0.1:0' };
  fleet.start = async () => {
    try { fs.unlinkSync(path.join(dir, 'controller.addr')); } catch { /* first start */ }
    const log = fs.openSync(path.join(OUT, `${path.basename(file, '.yaml')}-up.log`), 'a');
    // Simulated node actions in seconds, so that a rollout of a small pool ends within a test.
    fleet.proc = spawn(BIN, ['up', '-f', file, '--data-dir', dir, '--listen', fleet.listen, '--health-interval', healthInterval,
      '--workload', 'off', '--sim-install-time', '2s', '--sim-reboot-time', '3s', '--usage-interval', '5s', ...extra],
      { stdio: ['ignore', log, log] });
    fleet.exited = new Promise((r) => fleet.proc.once('exit', r));
    const addr = await waitFor('controller.addr', () => {
      if (fleet.proc.exitCode !== null) {
        throw Object.assign(new Error(`gpufleet up exited with ${fleet.proc.exitCode}; see ${OUT}`), { fatal: true });
      }
      const f = path.join(dir, 'controller.addr');
      return fs.existsSync(f) && fs.readFileSync(f, 'utf8').trim();
    });
    fleet.listen = addr;
    fleet.base = `http://${addr}`;
    fleet.token = fs.readFileSync(path.join(dir, 'admin.token'), 'utf8').trim();
    // A sanitizer build of 1,250 agents is slow: 21 to 152 s alone on this VM, over 250 s in two
    // CI runs; a timeout says how many were ready, to tell slow from stuck.
    let ready = 0;
    await waitFor(`${want} ready nodes`, async () => {
      const r = await call(fleet.base, fleet.token, 'GET', '/api/v1/clusters');
      const states = {};
      if (r.status === 200) {
        ready = r.body.items.reduce((n, c) => n + c.nodes_ready, 0);
        for (const c of r.body.items) {
          for (const [s, n] of Object.entries(c.nodes_by_state)) states[s] = (states[s] || 0) + n;
        }
      }
      // waitFor keeps it for its message: how many are ready, and what the others are. After a
      // restart, nodes earlier tests took out of service (drained by a rollout, failed by an
      // injected XID) stay so: every node is back when none is unreachable.
      const back = fleet.started
        ? Object.entries(states).reduce((n, [s, c]) => n + (s === 'unreachable' ? 0 : c), 0) >= want && !states.unreachable
        : ready === want;
      if (!back) throw new Error(`${ready} ready; by state ${JSON.stringify(states)}`);
      fleet.started = true;
      return true;
    }, Math.max(180000, want * 400));
  };
  // SIGTERM: `gpufleet up` stops cleanly and exits 0. Anything else (a sanitizer's report on
  // the way out, a crash) fails the test that stopped it. A sanitizer build of 1,250 agents
  // took 10.8-11.5 s to stop alone on this VM, 8 of them writing the telemetry checkpoint, and
  // over 20 s in one CI run: so up to 40 ms per node, and at least 20 s, before SIGKILL.
  fleet.stop = async () => {
    if (!fleet.proc || fleet.proc.exitCode !== null) return;
    fleet.proc.kill('SIGTERM');
    const limit = Math.max(20000, want * 40);
    let killed = false;
    const timer = setTimeout(() => { killed = true; fleet.proc.kill('SIGKILL'); }, limit);
    const code = await fleet.exited;
    clearTimeout(timer);
    if (killed) throw new Error(`gpufleet up did not stop within ${limit / 1000} s of SIGTERM; see ${OUT}`);
    if (code !== 0) throw new Error(`gpufleet up exited with ${code} on SIGTERM; see ${OUT}`);
  };
  fleet.cleanup = async () => {
    try {
      await fleet.stop();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    await fleet.start();
  } catch (e) {
    await fleet.cleanup(); // a controller left running would keep the test runner waiting
    throw e;
  }
  return fleet;
}

// Debian's Chromium, headless, kept off the network beyond loopback.
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A page with the token signed in (through the form, as a person does). Errors in the page's
// scripts fail the test that looks at `errors`. `timeout` (ms) replaces Playwright's 30 s default
// for every wait and navigation of the page.
export async function signedIn(browser, base, token, viewport = { width: 1280, height: 800 }, { timeout } = {}) {
  const context = await browser.newContext({ viewport });
  if (timeout) context.setDefaultTimeout(timeout);
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  // What the Content-Security-Policy blocks is an error too: it only shows in the console.
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/.test(m.text())) page.errors.push(m.text());
  });
  await page.goto(base + '/');
  await page.fill('input[name=token]', token);
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#live.up');
  return page;
}

export async function shot(page, name) {
  await page.screenshot({ path: path.join(OUT, name + '.png'), fullPage: true });
}

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN;
}
