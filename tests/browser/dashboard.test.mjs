// The dashboard in a real browser against a real controller with the simulated example fleet
// (examples/fleet.yaml: 5 clusters, 94 nodes, 492 GPUs). Each test saves a screenshot under
// the test output directory.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { SOURCE, startFleet, launch, signedIn, shot, call, waitFor } from './harness.mjs';

const FLEET = path.join(SOURCE, 'examples/fleet.yaml');
let fleet, browser;

// A remote-write receiver that never answers (nothing listens on port 9): the settings page
// shows it retrying, with its error and the samples waiting.
const NOWHERE = 'http://127.0.0.1:9/api/v1/write';

before(async () => {
  fleet = await startFleet(FLEET, { extra: ['--remote-write', NOWHERE] });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await fleet?.cleanup();
});

test('sign in: the overview shows every cluster of the fleet file with its GPU count', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.waitForSelector('.card[data-cluster]');
  const cards = await page.$$eval('.card[data-cluster]', (els) =>
    els.map((e) => ({ name: e.dataset.cluster, gpus: Number(e.querySelector('[data-gpus]').textContent) })));
  const want = [...fleet.counts].map(([name, c]) => ({ name, gpus: c.gpus })).sort((a, b) => a.name.localeCompare(b.name));
  assert.deepEqual(cards.sort((a, b) => a.name.localeCompare(b.name)), want);
  const totalGpus = want.reduce((n, c) => n + c.gpus, 0);
  assert.match(await page.textContent('#attention h3'), /Needs attention/);
  const totals = await page.$eval('#totals', (e) => e.textContent);
  assert.match(totals, new RegExp(`GPUs\\s*${totalGpus}`));
  // The token is in session storage, never in the URL.
  assert.ok(!page.url().includes(fleet.token));
  assert.equal(await page.evaluate(() => sessionStorage.getItem('gpufleet.token')), fleet.token);
  // The trend chart draws from the query API once there is telemetry.
  await page.waitForSelector('#trend .uplot', { timeout: 30000 });
  // Its window fits the history that exists (minutes of it: no hour-wide axis), on 0-100 %.
  const axis = await page.$eval('#trend', (e) => ({ ...e.dataset }));
  assert.deepEqual([axis.yMin, axis.yMax], ['0', '100']);
  const hist = (await call(fleet.base, fleet.token, 'GET', '/api/v1/query_range?metric=gpu_util&by=cluster&start=-1h&step=1m')).body;
  const first = Math.min(...hist.series.map((s) => s.points[0][0])) / 1000;
  assert.ok(Number(axis.xMax) - Number(axis.xMin) <= Math.max(Date.now() / 1000 - first, 600) + 120, JSON.stringify({ axis, first }));
  // One controller on SQLite: it leads, at the lease's first epoch, and says it is this one.
  const rows = await page.$$eval('#controllers tr[data-controller]', (els) => els.map((e) => e.textContent));
  assert.equal(rows.length, 1);
  assert.match(rows[0], /\(this one\)/);
  assert.match(rows[0], /leader\s*1/);
  await shot(page, 'overview');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the heatmap API: packed values in node order, gzip when asked, clear errors', async () => {
  const r = await call(fleet.base, fleet.token, 'GET', '/api/v1/heatmap?cluster=infer-use1&field=gpu_temp');
  assert.equal(r.status, 200);
  const plain = await fetch(fleet.base + '/api/v1/heatmap?cluster=infer-use1', {
    headers: { Authorization: 'Bearer ' + fleet.token, 'Accept-Encoding': 'identity' } });
  assert.equal(plain.headers.get('content-encoding'), null, 'no gzip unless the client asks');
  const want = fleet.counts.get('infer-use1');
  assert.equal(r.body.nodes.length, want.nodes);
  assert.equal(r.body.values.length, want.gpus);
  assert.equal(r.body.nodes.reduce((n, row) => n + row[3], 0), want.gpus);
  assert.deepEqual(r.body.pools, ['h100-pcie-serve', 'l40s-serve']);
  assert.equal(r.body.nodes[0][0], 'h100-pcie-serve-0000');
  assert.equal(r.body.unit, '°C');
  const gz = await fetch(fleet.base + '/api/v1/heatmap?cluster=train-use1', {
    headers: { Authorization: 'Bearer ' + fleet.token, 'Accept-Encoding': 'gzip' } });
  assert.equal(gz.headers.get('content-encoding'), 'gzip');
  assert.equal((await gz.json()).values.length, fleet.counts.get('train-use1').gpus);
  const bad = await call(fleet.base, fleet.token, 'GET', '/api/v1/heatmap?cluster=infer-use1&field=bogus');
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /unknown field 'bogus' \(known: health, allocation, memory, gpu_util/);
  const missing = await call(fleet.base, fleet.token, 'GET', '/api/v1/heatmap?cluster=nope');
  assert.equal(missing.status, 404);
  assert.match(missing.body.error.message, /no cluster 'nope'/);
  const anon = await fetch(fleet.base + '/api/v1/heatmap');
  assert.equal(anon.status, 401);
  // A token scoped to one cluster sees only that cluster's GPUs, and no other cluster.
  const scoped = await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'edge-only', role: 'viewer', clusters: ['edge-stores'] });
  assert.equal(scoped.status, 201, JSON.stringify(scoped.body));
  const all = await call(fleet.base, scoped.body.token, 'GET', '/api/v1/heatmap');
  assert.equal(all.body.values.length, fleet.counts.get('edge-stores').gpus);
  assert.equal((await call(fleet.base, scoped.body.token, 'GET', '/api/v1/heatmap?cluster=train-use1')).status, 404);
  const who = await call(fleet.base, scoped.body.token, 'GET', '/api/v1/whoami');
  assert.deepEqual(who.body, { name: 'edge-only', role: 'viewer', clusters: ['edge-stores'] });
  // In the browser the scoped token sees one cluster card, and its heatmap.
  const page = await signedIn(browser, fleet.base, scoped.body.token);
  await page.waitForSelector('.card[data-cluster]');
  assert.deepEqual(await page.$$eval('.card[data-cluster]', (els) => els.map((e) => e.dataset.cluster)), ['edge-stores']);
  assert.match(await page.textContent('#who'), /edge-only \(viewer · edge-stores\)/);
  await page.click('.card[data-cluster="edge-stores"]');
  await page.waitForSelector(`#heat canvas[data-cells="${fleet.counts.get('edge-stores').gpus}"]`);
  await shot(page, 'scoped-token-cluster');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the live stream refuses a bad token with a message and closes', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(fleet.base + '/');
  const reply = await page.evaluate(() => new Promise((resolve) => {
    const ws = new WebSocket(`ws://${location.host}/api/v1/stream`);
    const got = [];
    ws.onopen = () => ws.send(JSON.stringify({ token: 'gfa_wrong' }));
    ws.onmessage = (e) => got.push(JSON.parse(e.data));
    ws.onclose = (e) => resolve({ got, code: e.code });
  }));
  assert.equal(reply.got.length, 1);
  assert.equal(reply.got[0].type, 'error');
  assert.match(reply.got[0].message, /token/);
  assert.equal(reply.code, 1008); // policy violation
  await shot(page, 'stream-refused');
  await context.close();
});

test('every answer carries the security headers, and the page works under its policy', async () => {
  for (const path of ['/', '/ui/app.js', '/healthz', '/api/v1/nodes']) {
    const res = await fetch(fleet.base + path);
    const csp = res.headers.get('content-security-policy');
    assert.match(csp, /script-src 'self'(;|$)/, path);  // no inline script, no eval
    assert.match(csp, /frame-ancestors 'none'/, path);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', path);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer', path);
  }
  // signedIn() counts what the policy blocks among the page's errors.
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.waitForSelector('.card[data-cluster]');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a bad token is refused at the login form', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(fleet.base + '/');
  await page.fill('input[name=token]', 'gfa_not-a-token');
  await page.click('#login button[type=submit]');
  await page.waitForSelector('#login-error:has-text("not accepted")');
  assert.equal(await page.isVisible('#nav'), false);
  await shot(page, 'login-refused');
  await context.close();
});

test('the cluster heatmap has one cell per GPU, and a hover names the GPU', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/cluster/train-use1');
  const want = fleet.counts.get('train-use1').gpus;
  await page.waitForSelector(`#heat canvas[data-cells="${want}"]`);
  const rect = await page.evaluate(() => window.gpufleet.heatmap.cellRect('h100-sxm-0003', 5));
  assert.ok(rect, 'the heatmap places h100-sxm-0003 GPU 5');
  const box = await page.$eval('#heat canvas', (c) => { const r = c.getBoundingClientRect(); return { x: r.left, y: r.top }; });
  await page.mouse.move(box.x + rect.x + rect.w / 2, box.y + rect.y + rect.h / 2);
  await page.waitForSelector('#tip:not([hidden])');
  await waitFor('the UUID in the hover', async () => /GPU-[0-9a-f-]{36}/.test(await page.textContent('#tip')));
  const tip = await page.textContent('#tip');
  assert.match(tip, /h100-sxm-0003 GPU 5 \(simulated\)/);
  assert.match(tip, /H100-SXM5-80GB/);
  assert.match(tip, /Utilization: /);
  await shot(page, 'cluster-heatmap');
  // Every field draws every GPU.
  for (const field of ['gpu_temp', 'power_usage', 'memory', 'health', 'allocation']) {
    await page.selectOption('#field', field);
    await page.waitForFunction((f) => window.gpufleet.heatmap.data?.field === f, field);
    assert.equal(await page.$eval('#heat canvas', (c) => Number(c.dataset.cells)), want);
  }
  // A job shows on the allocation colouring by itself (the live stream's next cycle).
  const job = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs', { team: 'vision', project: 'store-cameras', pool: 'h100-sxm', gpus: 4 });
  assert.equal(job.status, 201, JSON.stringify(job.body));
  await page.waitForFunction(() => window.gpufleet.heatmap.data.values.reduce((n, v) => n + (v || 0), 0) === 4, null, { timeout: 30000 });
  await shot(page, 'cluster-allocation');
  assert.equal((await call(fleet.base, fleet.token, 'DELETE', `/api/v1/jobs/${job.body.id}`)).status, 200);
  // The node table sorts and filters.
  await page.fill('#nodes input[type=search]', 'h200');
  assert.equal(await page.$$eval('#nodes tbody tr', (rows) => rows.length), fleet.counts.get('train-use1').nodes - 32);
  await page.click('#nodes th[data-key=name]');
  const names = await page.$$eval('#nodes tbody tr td:first-child a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(names, [...names].sort().reverse());
  // A click goes to the node. The table's header was clicked further down the page, which
  // scrolled: the heatmap is brought back (to the middle: the page's header stays on top) and
  // measured again.
  await page.fill('#nodes input[type=search]', '');
  const again = await page.$eval('#heat canvas', (c) => {
    c.scrollIntoView({ block: 'center' });
    const r = c.getBoundingClientRect();
    return { x: r.left, y: r.top };
  });
  await page.mouse.click(again.x + rect.x + rect.w / 2, again.y + rect.y + rect.h / 2);
  await page.waitForURL(/#\/node\/h100-sxm-0003$/);
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('an injected XID turns that GPU failed on the heatmap and an alert appears, without a reload', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/cluster/infer-use1');
  await page.selectOption('#field', 'health');
  await page.waitForFunction(() => window.gpufleet?.heatmap?.data?.field === 'health');
  await page.evaluate(() => { window.notReloaded = true; });
  const colour = () => page.evaluate(() => {
    const h = window.gpufleet.heatmap;
    const r = h.cellRect('l40s-serve-0002', 1);
    const [red, green, blue] = h.canvas.getContext('2d').getImageData(r.x + 2, r.y + 2, 1, 1).data;
    return `${red},${green},${blue}`;
  });
  // The pixel is read from the canvas as last drawn, at the cell's place in the current layout; a
  // layout change is redrawn a moment later (ResizeObserver). CI once read a yellow that is no
  // health colour here, so wait for the colour instead of reading it once.
  await waitFor('the cell to be healthy green before the XID', async () => (await colour()) === '34,165,89', 10000);
  const inject = await call(fleet.base, fleet.token, 'POST', '/api/v1/nodes/l40s-serve-0002/gpus/1/inject', { xid: 79 });
  assert.equal(inject.status, 202, JSON.stringify(inject.body));
  await waitFor('the cell to turn failed red', async () => (await colour()) === '214,39,40', 30000);
  // The health colouring's reply lists it among the unhealthy (from its own levels).
  await waitFor('the failed GPU listed', async () => page.evaluate(() =>
    window.gpufleet.heatmap.data.field === 'health' && window.gpufleet.heatmap.data.unhealthy.some(([, level]) => level === 2)), 10000);
  await page.waitForSelector('#cluster-alerts tr[data-alert="GpuXidCritical"]', { timeout: 30000 });
  const row = await page.textContent('#cluster-alerts tr[data-alert="GpuXidCritical"]');
  assert.match(row, /l40s-serve-0002/);
  await waitFor('the alert badge', async () => Number(await page.textContent('#alert-badge')) >= 1);
  // The cluster's alerts: firing ones first, critical at the top; pending ones apart below.
  const states = await page.$$eval('#cluster-alerts tr[data-state]', (rows) => rows.map((r) => r.dataset.state));
  assert.equal(states[0], 'firing');
  assert.deepEqual(states, [...states].sort((a, b) => (a === 'firing' ? 0 : 1) - (b === 'firing' ? 0 : 1)));
  assert.equal(await page.textContent('#cluster-alerts tr[data-state] td:nth-child(2)'), 'critical');
  // The badge's count is readable: white on red, a contrast of at least 4.5 (WCAG AA).
  await waitFor('the badge to turn critical', async () => (await page.getAttribute('#alert-badge', 'class')).includes('critical'));
  const contrast = await page.evaluate(() => {
    const style = getComputedStyle(document.getElementById('alert-badge'));
    const lum = (css) => {
      const [r, g, b] = css.match(/\d+/g).slice(0, 3).map((c) => {
        const v = Number(c) / 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const [a, b] = [lum(style.color), lum(style.backgroundColor)].sort((x, y) => y - x);
    return (a + 0.05) / (b + 0.05);
  });
  assert.ok(contrast >= 4.5, `the badge's contrast is ${contrast.toFixed(2)}`);
  // Coloured by utilization, the failed GPU is outlined in failed red; its inside keeps the
  // utilization colour.
  await page.selectOption('#field', 'gpu_util');
  await page.waitForFunction(() => window.gpufleet?.heatmap?.data?.field === 'gpu_util');
  await waitFor('the failed GPU outlined', async () => (await page.evaluate(() => {
    const h = window.gpufleet.heatmap;
    const r = h.cellRect('l40s-serve-0002', 1);
    const [red, green, blue] = h.canvas.getContext('2d').getImageData(r.x, r.y + Math.floor(r.h / 2), 1, 1).data;
    return `${red},${green},${blue}`;
  })) === '214,39,40', 10000);
  const inside = await page.evaluate(() => {
    const h = window.gpufleet.heatmap;
    const r = h.cellRect('l40s-serve-0002', 1);
    const [red, green, blue] = h.canvas.getContext('2d').getImageData(r.x + Math.floor(r.w / 2), r.y + Math.floor(r.h / 2), 1, 1).data;
    return `${red},${green},${blue}`;
  });
  assert.notEqual(inside, '214,39,40');
  assert.match(await page.textContent('#legend'), /failed/);
  await shot(page, 'heatmap-utilization-failed-outlined');
  assert.equal(await page.evaluate(() => window.notReloaded), true, 'the page was not reloaded');
  await shot(page, 'xid-failed-cell-and-alert');
  // The overview's Needs attention list names the failed GPU and links to its node; the
  // failed-GPU tile is red.
  await page.click('#nav a[data-view=overview]');
  const gpuItem = '#attention li[data-kind="gpu"][data-node="l40s-serve-0002"]';
  await page.waitForSelector(gpuItem, { timeout: 20000 });
  assert.match(await page.textContent(gpuItem), /l40s-serve-0002 GPU 1 failed: .*XID 79/);
  assert.equal(await page.getAttribute(`${gpuItem} a`, 'href'), '#/node/l40s-serve-0002');
  await page.waitForSelector('#attention li[data-kind="alert"]:has-text("GpuXidCritical")');
  const kinds = await page.$$eval('#attention li', (items) => items.map((i) => i.className));
  assert.equal(kinds[0], 'sev-critical');
  const tile = await page.$$eval('#totals .total', (tiles) => tiles.map((t) => [t.textContent, t.className]));
  const failedTile = tile.find(([text]) => text.startsWith('GPUs failed'));
  assert.ok(failedTile && failedTile[1].includes('bad'), JSON.stringify(tile));
  await shot(page, 'overview-needs-attention');
  // The alerts page lists it; an operator silences it from there.
  await page.click('#nav a[data-view=alerts]');
  await page.waitForSelector('#alert-list tr[data-alert="GpuXidCritical"]');
  // Firing alerts, most severe first: the critical XID leads the list.
  const severities = await page.$$eval('#alert-list tbody tr td:nth-child(2)', (cells) => cells.map((c) => c.textContent));
  assert.equal(severities[0], 'critical');
  const rank = (s) => ({ critical: 0, warning: 1, info: 2 })[s] ?? 3;
  assert.deepEqual(severities, [...severities].sort((a, b) => rank(a) - rank(b)));
  await page.click('#alert-list tr[data-alert="GpuXidCritical"] button[data-silence]');
  await page.fill('#silence-form [name=comment]', 'replacing the GPU');
  await page.click('#silence-form [data-create]');
  await page.waitForSelector('#alert-list tr[data-alert="GpuXidCritical"] .pill:has-text("silenced")');
  const silences = await page.textContent('#silences');
  assert.match(silences, /alertname=GpuXidCritical/);
  assert.match(silences, /Hostname=l40s-serve-0002/);
  await shot(page, 'alerts-silenced');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a node page shows facts, GPUs and charts with data', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/node/h200-sxm-0001');
  await page.waitForSelector('#facts:has-text("train-use1")');
  assert.equal(await page.$$eval('#gpus tbody tr', (r) => r.length), 8);
  assert.match(await page.textContent('#title'), /simulated/);
  // The fields DCGM's dashboard charts (issue 51): PCIe, ECC, NVLink, clocks, memory
  // temperature, energy; the clocks' event reasons decoded per GPU.
  for (const metric of ['gpu_util', 'mem_copy_util', 'gpu_temp', 'memory_temp', 'power_usage', 'total_energy', 'fb_used', 'sm_clock',
    'mem_clock', 'pcie_tx', 'pcie_rx', 'pcie_replay', 'ecc_sbe_volatile', 'ecc_dbe_volatile', 'remapped_correctable', 'nvlink_links_down']) {
    const sel = `.chart[data-metric=${metric}]`;
    await page.waitForSelector(`${sel} .uplot`, { timeout: 30000 });
    assert.ok(Number(await page.$eval(sel, (e) => e.dataset.points)) > 0, `${metric} has points`);
  }
  assert.equal(await page.$$eval('.chart[data-metric=clocks_event_reasons] tr[data-gpu]', (r) => r.length), 8);
  // Utilization on a 0-100 % axis whatever the values, and the legend's last and max.
  const legend = await page.textContent('.chart[data-metric=gpu_util] .u-legend');
  assert.match(legend, /GPU 0 \(last [\d.]+, max [\d.]+\)/);
  assert.deepEqual(await page.$eval('.chart[data-metric=gpu_util]', (e) => [e.dataset.yMin, e.dataset.yMax]), ['0', '100']);
  // Operators get the actions; cordon works from the page.
  await page.click('#actions button[data-action=cordon]');
  await page.waitForSelector('#title:has-text("cordoned")');
  await page.click('#actions button[data-action=uncordon]');
  await page.waitForSelector('#title:has-text("ready")');
  await shot(page, 'node');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('a viewer does not see the drain control, and the API refuses the viewer a drain', async () => {
  const made = await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'watcher', role: 'viewer' });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const viewer = made.body.token;
  const page = await signedIn(browser, fleet.base, viewer);
  await page.goto(fleet.base + '/#/node/a100-sxm-0002');
  await page.waitForSelector('#facts:has-text("train-euw1")');
  assert.match(await page.textContent('#actions'), /read-only/);
  assert.equal(await page.$$eval('button[data-action]', (b) => b.length), 0);
  const refused = await page.evaluate(async () => {
    const r = await fetch('/api/v1/nodes/a100-sxm-0002/drain', {
      method: 'POST', headers: { Authorization: 'Bearer ' + sessionStorage.getItem('gpufleet.token') } });
    return { status: r.status, body: await r.json() };
  });
  assert.equal(refused.status, 403);
  assert.match(refused.body.error.message, /operator/);
  const node = await call(fleet.base, fleet.token, 'GET', '/api/v1/nodes/a100-sxm-0002');
  assert.equal(node.body.state, 'ready', 'the refused drain changed nothing');
  // No silence controls either.
  await page.goto(fleet.base + '/#/alerts');
  await page.waitForSelector('#alert-list');
  assert.equal(await page.$$eval('button[data-silence]', (b) => b.length), 0);
  await shot(page, 'viewer-node');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('every page fits 1280x800 and a 390-px phone', async () => {
  for (const [label, viewport] of [['1280', { width: 1280, height: 800 }], ['390', { width: 390, height: 844 }]]) {
    const page = await signedIn(browser, fleet.base, fleet.token, viewport);
    // Each page's last part to paint (the overview's controllers follow its cards and trend).
    for (const [name, hash, ready] of [['overview', '#/', '#controllers table'], ['cluster', '#/cluster/train-use1', '#heat canvas[data-cells]'],
      ['node', '#/node/h100-sxm-0001', '.chart .uplot'], ['alerts', '#/alerts', '#alert-list'], ['scaling', '#/scaling', '#scaling-charts .uplot'],
      ['jobs', '#/jobs', '#jobs-summary:not(:empty)'], ['rollouts', '#/rollouts', '#rollout-list:not(:empty)'],
      ['security', '#/security', '#sec-cves tr[data-cve]'], ['drift', '#/drift', '#drift-list tbody tr'],
      ['compliance', '#/compliance', '#comp-trend .uplot'], ['reports', '#/reports', '#rep-peaks table, #rep-peaks p'],
      ['inventory', '#/inventory', '#inv-table tbody tr'], ['settings', '#/settings', '#rw table']]) {
      await page.goto(fleet.base + '/' + hash);
      await page.waitForSelector(ready, { timeout: 30000 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      await shot(page, `${name}-${label}`);
      // What sticks out: the outermost elements past the window's right edge, to say what to fix.
      const wide = overflow <= 0 ? [] : await page.evaluate(() => [...document.querySelectorAll('body *')]
        .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1 &&
          !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 1))
        .slice(0, 5).map((e) => `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${e.className} ` +
          `(${Math.round(e.getBoundingClientRect().width)} px): ${e.textContent.slice(0, 80)}`));
      assert.ok(overflow <= 0, `${name} at ${label}px is ${overflow}px wider than the window: ${wide.join('; ')}`);
    }
    assert.deepEqual(page.errors, []);
    await page.context().close();
  }
});

test('the scaling page shows the autoscaled pool with charts and events; an operator scales it', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/scaling');
  // examples/fleet.yaml scales h200-sxm (8 nodes, 4..16, predictive, sim actuator).
  await page.waitForSelector('#scaling-pools tr[data-pool="h200-sxm"]');
  const row = await page.textContent('#scaling-pools tr[data-pool="h200-sxm"]');
  for (const want of [/train-use1/, /predictive/, /4\.\.16/, /simulated/]) assert.match(row, want);
  assert.equal(await page.$$eval('#scaling-pools tr[data-pool]', (r) => r.length), 1);
  await page.waitForSelector('#scaling-charts .uplot');
  assert.deepEqual(await page.$$eval('#scaling-charts .chart', (els) => els.map((e) => e.dataset.chart)), ['nodes', 'demand', 'wait']);
  assert.equal(await page.textContent('[data-stat="Nodes ready"] b'), '8');
  const status = await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling');
  assert.equal(status.status, 200);
  assert.equal(status.body.nodes.ready, 8);
  assert.equal(status.body.policy.lead_time, '5m');
  assert.equal(status.body.policy.forecast_margin, 4);
  assert.match(await page.getAttribute('[data-stat="Forecast"]', 'title'), /over the next 5m \+ 1m, plus 4 × its recent mean shortfall \((–|[0-9.]+ GPUs)\)/);
  assert.equal(status.body.policy.consolidate_below, 0.5);
  assert.equal(await page.textContent('[data-stat="Consolidation"] b'), '≤ 50% used');
  assert.match(await page.getAttribute('[data-stat="Consolidation"]', 'title'), /lightly used for 10m, running only movable jobs/);
  assert.equal(status.body.simulated, true);
  // The fleet file set the policy: that is the first event.
  await page.waitForSelector('#scaling-events tr[data-kind="policy"]');

  // An operator asks for 9 nodes, kept for 4 hours: a node is recorded as starting (the sim
  // actuator starts it after the 5-minute lead time), the event names it, and the page says
  // what is kept.
  await page.fill('#scale-target', '9');
  await page.selectOption('#scale-keep', '4h');
  await page.click('#scale-go');
  await page.waitForSelector('#scaling-events tr[data-kind="scale_up"]');
  const event = await page.textContent('#scaling-events tr[data-kind="scale_up"]');
  assert.match(event, /manual/);
  assert.match(event, /h200-sxm-0008/);
  assert.equal(await page.textContent('[data-stat="Starting"] b'), '1');
  const node = await call(fleet.base, fleet.token, 'GET', '/api/v1/nodes/h200-sxm-0008');
  assert.equal(node.body.state, 'provisioning');
  await page.waitForSelector('#scaling-events tr[data-kind="keep"]');
  assert.match(await page.textContent('#scaling-keep'), /^Kept by bootstrap-admin: at least 9 nodes until /);
  assert.equal((await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling')).body.keep.min_nodes, 9);
  // Outside the policy's bounds: the error is shown and nothing changes.
  await page.fill('#scale-target', '40');
  await page.click('#scale-go');
  await page.waitForFunction(() => document.getElementById('scale-error').textContent.includes('outside the policy'));
  assert.equal((await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling')).body.nodes.provisioning, 1);
  await shot(page, 'scaling');
  assert.deepEqual(page.errors, []);
  await page.context().close();

  // A viewer sees the page without the scale control, and the API refuses it.
  const made = await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'scaling-viewer', role: 'viewer' });
  const viewer = await signedIn(browser, fleet.base, made.body.token);
  await viewer.goto(fleet.base + '/#/scaling/h200-sxm');
  await viewer.waitForSelector('#scaling-charts .uplot');
  assert.equal(await viewer.isVisible('#scale-form'), false);
  const refused = await call(fleet.base, made.body.token, 'POST', '/api/v1/pools/h200-sxm/scale', { target: 10 });
  assert.equal(refused.status, 403);
  assert.deepEqual(viewer.errors, []);
  await viewer.context().close();
});

test('an operator tunes a pool on its own past jobs and applies the cheaper setting', async () => {
  // A roomy share, then 20 two-GPU jobs of 30 minutes at once (running: the replay takes their
  // expected duration). Replayed, a share of 1 keeps fewer nodes for them than 0.6 does, and
  // none of them waits either way.
  const before = (await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling')).body.policy;
  assert.equal((await call(fleet.base, fleet.token, 'PUT', '/api/v1/pools/h200-sxm/scaling', { ...before, target_share: 0.6 })).status, 200);
  const ids = [];
  for (let i = 0; i < 20; i++) {
    const r = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs', { team: 'nlp', project: 'llm-finetune', pool: 'h200-sxm', gpus: 2, duration: '30m' });
    assert.equal(r.status, 201);
    ids.push(r.body.id);
  }
  const dry = await call(fleet.base, fleet.token, 'POST', '/api/v1/pools/h200-sxm/scaling/tune', { wait_p95: '60s', window: '7d' });
  assert.equal(dry.status, 200);
  assert.equal(dry.body.applied, false);
  assert.ok(dry.body.chosen && dry.body.saving > 0, JSON.stringify(dry.body.chosen));

  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/scaling/h200-sxm');
  // examples/fleet.yaml has the autoscaler re-tune the pool every 6 hours.
  await page.waitForFunction(() => document.getElementById('tune-schedule')?.textContent.includes('re-tunes it every 6h on the last 7d, to a p95 wait of 1m'));
  await page.click('#tune-go');
  await page.waitForSelector('#tune-verdict');
  assert.match(await page.textContent('#tune-summary'), new RegExp(`^${dry.body.jobs} jobs from .* replayed under 199 settings`));
  const cells = await page.$$eval('#tune-result tr[data-row="chosen"] td', (tds) => tds.map((td) => td.textContent));
  assert.equal(cells[1], String(dry.body.chosen.target_share));
  assert.equal(cells[2], String(dry.body.chosen.forecast_margin));
  assert.match(await page.textContent('#tune-verdict'), /fewer idle GPU-hours than now \(share 0\.6, margin 4\)/);
  assert.equal((await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling')).body.policy.target_share, 0.6, 'a dry run changes nothing');
  await shot(page, 'scaling-tune');
  await page.click('#tune-apply');
  await page.waitForFunction(() => document.getElementById('tune-verdict')?.textContent.startsWith('Applied'));
  const after = (await call(fleet.base, fleet.token, 'GET', '/api/v1/pools/h200-sxm/scaling')).body.policy;
  assert.equal(after.target_share, dry.body.chosen.target_share);
  assert.equal(after.forecast_margin, dry.body.chosen.forecast_margin);
  // A bad objective: the server's message, nothing changed.
  await page.fill('#tune-wait', 'soon');
  await page.click('#tune-go');
  await page.waitForFunction(() => document.getElementById('tune-error').textContent.includes('must be a duration'));
  assert.deepEqual(page.errors, []);
  await page.context().close();

  // A viewer has no tune panel, and the API refuses it.
  const made = await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'tune-viewer', role: 'viewer' });
  const viewer = await signedIn(browser, fleet.base, made.body.token);
  await viewer.goto(fleet.base + '/#/scaling/h200-sxm');
  await viewer.waitForSelector('#scaling-charts .uplot');
  assert.equal(await viewer.isVisible('#tune-panel'), false);
  assert.equal((await call(fleet.base, made.body.token, 'POST', '/api/v1/pools/h200-sxm/scaling/tune', {})).status, 403);
  await viewer.context().close();
  for (const id of ids) assert.equal((await call(fleet.base, fleet.token, 'DELETE', `/api/v1/jobs/${id}`)).status, 200);
});

test('the jobs page lists a spread job with its nodes; an operator cancels it; a viewer cannot', async () => {
  // Jobs name a known team and project: this test's own.
  assert.equal((await call(fleet.base, fleet.token, 'POST', '/api/v1/teams', { name: 'jobs-page', projects: ['ui'] })).status, 201);
  const made = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs', { team: 'jobs-page', project: 'ui', pool: 'h100-sxm', gpus: 8, gpus_per_node: 4, duration: '1h' });
  assert.equal(made.status, 201);
  assert.equal(made.body.state, 'running');
  const id = made.body.id;
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/jobs');
  await page.waitForSelector(`#jobs-table tr[data-job="${id}"]`);
  const row = await page.textContent(`#jobs-table tr[data-job="${id}"]`);
  for (const want of [/jobs-page/, /h100-sxm/, /8 \(4\/node\)/, /running/]) assert.match(row, want);
  const nodes = await page.$$eval(`#jobs-table tr[data-job="${id}"] a[href^="#/node/"]`, (a) => a.map((x) => x.textContent));
  assert.deepEqual(nodes, made.body.placement.map((p) => p.node));
  assert.equal(new Set(nodes).size, 2);
  assert.match(await page.textContent('#jobs-summary'), /\d+ running, \d+ queued/);
  // Filtered to cancelled jobs, it is not there; to running ones, it is.
  await page.selectOption('#jobs-state', 'cancelled');
  await page.waitForFunction((id) => !document.querySelector(`#jobs-table tr[data-job="${id}"]`), id);
  await page.selectOption('#jobs-state', 'running');
  await page.waitForSelector(`#jobs-table tr[data-job="${id}"]`);
  await shot(page, 'jobs');
  await page.click(`#jobs-table button[data-cancel="${id}"]`);
  await page.waitForFunction((id) => !document.querySelector(`#jobs-table tr[data-job="${id}"]`), id);
  assert.equal((await call(fleet.base, fleet.token, 'GET', `/api/v1/jobs/${id}`)).body.state, 'cancelled');
  assert.deepEqual(page.errors, []);
  await page.context().close();

  const viewerToken = (await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'jobs-viewer', role: 'viewer' })).body.token;
  const other = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs', { team: 'jobs-page', project: 'ui', pool: 'h100-sxm', gpus: 1, duration: '1h' });
  const viewer = await signedIn(browser, fleet.base, viewerToken);
  await viewer.goto(fleet.base + '/#/jobs');
  await viewer.waitForSelector(`#jobs-table tr[data-job="${other.body.id}"]`);
  assert.equal(await viewer.$$eval('#jobs-table button[data-cancel]', (b) => b.length), 0);
  assert.deepEqual(viewer.errors, []);
  await viewer.context().close();
  assert.equal((await call(fleet.base, fleet.token, 'DELETE', `/api/v1/jobs/${other.body.id}`)).status, 200);
});

test('the teams page shows the projects of each team, what it owns and what it runs now', async () => {
  // A job of nlp's on vision's edge pool: the running GPUs count for the team that runs them.
  const job = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs', { team: 'nlp', project: 'llm-eval', pool: 'l4-edge', gpus: 1, duration: '1h' });
  assert.equal(job.status, 201);
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/teams');
  await page.waitForSelector('#teams-table tr[data-team="vision"]');
  const vision = await page.textContent('#teams-table tr[data-team="vision"]');
  for (const want of [/store-cameras/, /cluster edge-stores/, /l4-edge/, /vision-leads@acme\.example/, /250,000/]) assert.match(vision, want);
  // speech owns the one pool it names in infer-use1; recsys the rest of that cluster.
  assert.match(await page.textContent('#teams-table tr[data-team="speech"]'), /h100-pcie-serve/);
  assert.doesNotMatch(await page.textContent('#teams-table tr[data-team="recsys"]'), /h100-pcie-serve/);
  await page.waitForFunction(() => Number(document.querySelector('#teams-table tr[data-team="nlp"] td:nth-child(4)').textContent) >= 1);
  await shot(page, 'teams');
  assert.deepEqual(page.errors, []);
  await page.context().close();
  assert.equal((await call(fleet.base, fleet.token, 'DELETE', `/api/v1/jobs/${job.body.id}`)).status, 200);
});

test('the reports page shows utilization and cost by team, energy by pool, peaks and queue waits, and saves a CSV', async () => {
  // A job that holds a development GPU and does nothing: the ledger has an allocation of
  // research's. (A pool no earlier test ran jobs on: a simulated GPU takes a monitor tick and a
  // sample, up to 2 s, to leave the job it ran before.)
  const job = await call(fleet.base, fleet.token, 'POST', '/api/v1/jobs',
    { team: 'research', project: 'explore', pool: 'a10-dev', gpus: 1, duration: '5s', sim_profile: 'idle' });
  assert.equal(job.status, 201);
  assert.equal(job.body.sim_profile, 'idle');
  const record = await waitFor('the job in the ledger', async () =>
    (await call(fleet.base, fleet.token, 'GET', '/api/v1/usage?team=research')).body.items.find((r) => r.job === job.body.id));
  assert.ok(record.util_mean <= 2 && record.energy_j > 0, JSON.stringify(record));
  await waitFor('the pools\' hours', async () => (await call(fleet.base, fleet.token, 'GET', '/api/v1/reports/energy?by=pool')).body.items.length > 0);
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/reports');
  await page.waitForSelector('#rep-util tr[data-key="research"]');
  // GPU-hours, used GPU-hours, the mean utilization and the idle share.
  assert.match(await page.textContent('#rep-util tr[data-key="research"]'), /\d%.*\d%/s);
  // The demo's ledger is minutes old: a 30-day report says how much of the period it covers.
  const util = (await call(fleet.base, fleet.token, 'GET', '/api/v1/reports/utilization?from=-30d&by=team')).body;
  assert.match(util.note, /^the ledger has records from \d{4}-\d\d-\d\d on: \d+ of the 30 days asked$/);
  assert.equal(await page.textContent('#rep-util .rep-note'), util.note + '.');
  // research's cost against its 200,000 a month, over the 30 days shown.
  const cost = await page.textContent('#rep-cost tr[data-key="research"]');
  assert.match(cost, /USD/);
  assert.match(cost, /%/);
  await page.waitForSelector('#rep-energy tr[data-key="a10-dev"]');
  assert.equal(await page.$$eval('#rep-peaks td.peak-cell', (c) => c.length), 7 * 24);
  assert.match(await page.textContent('#rep-queue'), /a10-dev/);
  await page.waitForSelector('#rep-advice table, #rep-advice p');
  const [csv] = await Promise.all([page.waitForEvent('download'), page.click('#rep-util .rep-csv')]);
  const text = await (await import('node:fs/promises')).readFile(await csv.path(), 'utf8');
  assert.match(text, /^key,gpu_hours_allocated,gpu_hours_effective,util_mean,/);
  assert.match(text, /\nresearch,/);
  // The capacity plan: a row per pool, the demo's growth plan named; another horizon replans.
  await waitFor('the demo\'s growth plan', async () =>
    (await call(fleet.base, fleet.token, 'GET', '/api/v1/reports/capacity/growth')).body.demands.length > 0);
  const pools = (await call(fleet.base, fleet.token, 'GET', '/api/v1/pools')).body.items.length;
  await page.selectOption('#cap-form select[name=horizon]', '365d');
  await page.waitForFunction(() => /next-model \(demo\)/.test(document.querySelector('#rep-capacity').textContent), null, { timeout: 60000 });
  assert.equal(await page.$$eval('#rep-capacity tr[data-pool]', (r) => r.length), pools);
  const plan = (await call(fleet.base, fleet.token, 'GET', '/api/v1/reports/capacity?horizon=365d')).body;
  for (const i of plan.items.filter((x) => x.order_gpus > 0)) {
    assert.match(await page.textContent('#rep-capacity .cap-orders'), new RegExp(`${i.pool}: order ${i.order_nodes} x`));
  }
  // A pool with under two weeks of pool hours says so in its row and orders nothing (issue 51).
  for (const i of plan.items.filter((x) => x.history_short)) {
    assert.equal(i.order_gpus, 0);
    assert.match(await page.textContent(`#rep-capacity tr[data-pool="${i.pool}"]`), new RegExp(`none: ${i.trend_days_recorded} of 14 days recorded`));
  }
  await shot(page, 'reports');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the inventory page counts the GPUs, lists warranties ending soon and an asset\'s history; an operator imports and steps the lifecycle', async () => {
  // The demo's import: purchase dates and warranties for the simulated fleet, one GPU in RMA.
  const summary = await waitFor('the demo\'s assets', async () => {
    const s = (await call(fleet.base, fleet.token, 'GET', '/api/v1/assets/summary')).body;
    return s.gpus.by_state.rma === 1 && s;
  });
  const rma = (await call(fleet.base, fleet.token, 'GET', '/api/v1/assets?state=rma')).body.items[0];
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/inventory');
  await page.waitForSelector('#inv-cards .stat');
  assert.match(await page.textContent('#inv-cards'), new RegExp(`${summary.gpus.total}\\s*GPUs`));
  assert.match(await page.textContent('#inv-counts'), /H100-SXM5-80GB/);
  assert.ok(summary.warranty_expiring.length > 0);
  assert.equal(await page.$$eval('#inv-warranty tbody tr', (r) => r.length), summary.warranty_expiring.length);
  await page.fill('#inv-table input[type=search]', rma.id);
  await page.waitForFunction(() => document.querySelectorAll('#inv-table tbody tr').length === 1);
  assert.match(await page.textContent('#inv-table tbody'), /RMA/);
  assert.match(await page.textContent('#inv-table tbody'), /simulated/);
  // Its history: discovered, then the demo's import put it in RMA.
  await page.click(`#inv-table a[href="#/inventory/${rma.id}"]`);
  await page.waitForSelector('#inv-detail tr[data-event="rma"]');
  assert.match(await page.textContent('#inv-detail tr[data-event="rma"]'), /demo/);
  assert.ok(await page.$('#inv-detail tr[data-event="discovered"]'));
  // Back from repair.
  await page.selectOption('#inv-state select', 'in_service');
  await page.fill('#inv-state input[name=note]', 'repaired: HBM replaced');
  await page.click('#inv-state button');
  await page.waitForSelector('#inv-detail tr[data-event="repaired"]');
  assert.match(await page.textContent('#inv-detail tr[data-event="repaired"]'), /HBM replaced/);
  // A bad file is refused whole with its line and field; a good one applied.
  await page.setInputFiles('#inv-file', { name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from(`serial,colour\n${rma.id},red\n`) });
  await page.click('#inv-import');
  await page.waitForSelector('#inv-import-result.error');
  assert.match(await page.textContent('#inv-import-result'), /nothing applied: line 1, field 'colour': unknown column/);
  await page.setInputFiles('#inv-file', { name: 'tags.csv', mimeType: 'text/csv', buffer: Buffer.from(`serial,asset_tag\n${rma.id},GPU-TAG-77\n`) });
  await page.click('#inv-check');
  await page.waitForFunction(() => /would apply 1/.test(document.querySelector('#inv-import-result').textContent));
  await page.click('#inv-import');
  await page.waitForFunction(() => /^applied 1/.test(document.querySelector('#inv-import-result').textContent));
  assert.equal((await call(fleet.base, fleet.token, 'GET', `/api/v1/assets/${rma.id}`)).body.asset_tag, 'GPU-TAG-77');
  const [csv] = await Promise.all([page.waitForEvent('download'), page.click('#inv-export')]);
  const text = await (await import('node:fs/promises')).readFile(await csv.path(), 'utf8');
  assert.match(text, /^name,kind,serial,asset_tag,status,site,location,rack,position,/);
  assert.match(text, new RegExp(`,${rma.id},GPU-TAG-77,active,`));
  await shot(page, 'inventory');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the rollouts page: an operator plans and starts a rollout and watches it end live; the node page shows the new driver', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/rollouts');
  await page.waitForSelector('#rollout-list');
  // A target the compatibility matrix refuses for the pool: the rules are shown, nothing starts.
  await page.fill('#ro-target', '470.256.02');
  await page.fill('#ro-pools', 'h100-sxm');
  await page.click('#ro-start');
  await page.waitForFunction(() => document.querySelector('#ro-error').textContent.includes('compatibility rule'));
  assert.match(await page.textContent('#ro-plan-out'), /branch-eol/);
  assert.equal((await call(fleet.base, fleet.token, 'GET', '/api/v1/rollouts')).body.total, 0);
  // An older driver with known CVEs passes the matrix: the plan says both, and a start asks
  // first (dismissed here: nothing starts).
  await page.fill('#ro-target', '580.65.06');
  await page.fill('#ro-pools', 't4-dev');
  await page.click('#ro-plan');
  await page.waitForSelector('#ro-plan-out [data-warning="downgrade"]');
  assert.match(await page.textContent('#ro-plan-out [data-warning="downgrade"]'), /580\.65\.06 is a downgrade: 4 of the nodes run a newer one: 580\.95\.05/);
  assert.match(await page.textContent('#ro-plan-out [data-warning="cve"]'), /known CVEs?: CVE-/);
  let asked = '';
  page.once('dialog', (d) => { asked = d.message(); d.dismiss(); });
  await page.click('#ro-start');
  await page.waitForFunction(() => document.querySelector('#ro-plan-out [data-warning]'));
  assert.match(asked, /Start this rollout anyway\?/);
  assert.equal((await call(fleet.base, fleet.token, 'GET', '/api/v1/rollouts')).body.total, 0);
  // A good one on the development pool (staged on 580.95.05 by `up`): the plan, then the start.
  await page.fill('#ro-target', '580.159.03');
  await page.fill('#ro-pools', 't4-dev');
  await page.fill('#ro-confidence', '0s');
  await page.fill('#ro-unavailable', '2');
  await page.click('#ro-plan');
  await page.waitForFunction(() => /4 node\(s\), expected/.test(document.querySelector('#ro-plan-out').textContent));
  assert.match(await page.textContent('#ro-plan-out'), /canary/);
  await page.click('#ro-start');
  await page.waitForFunction(() => location.hash === '#/rollouts/1');
  await page.waitForSelector('[data-rollout-detail="1"]');
  assert.equal(await page.$$eval('#ro-nodes tbody tr', (r) => r.length), 4);
  // It ends without a reload: the stream refreshes the page.
  await page.waitForFunction(() => document.querySelector('#ro-state')?.textContent === 'completed', null, { timeout: 120000 });
  const states = await page.$$eval('#ro-nodes tbody tr td:nth-child(4)', (c) => c.map((x) => x.textContent));
  assert.deepEqual(states, ['updated', 'updated', 'updated', 'updated']);
  await shot(page, 'rollouts');
  await page.goto(fleet.base + '/#/node/t4-dev-0000');
  await page.waitForFunction(() => document.querySelector('#versions')?.textContent.includes('580.159.03'));
  assert.match(await page.textContent('#versions'), /580\.95\.05/);
  assert.ok(await page.$('#versions a[href="#/rollouts/1"]'));
  assert.ok(await page.$('#actions button[data-op="reboot"]'));
  assert.deepEqual(page.errors, []);
  await page.context().close();
  // A viewer sees the rollout and no controls.
  const viewerToken = (await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'rollouts-viewer', role: 'viewer' })).body.token;
  const viewer = await signedIn(browser, fleet.base, viewerToken);
  await viewer.goto(fleet.base + '/#/rollouts/1');
  await viewer.waitForSelector('[data-rollout-detail="1"]');
  assert.equal(await viewer.$$eval('button[data-control]', (b) => b.length), 0);
  assert.equal(await viewer.isVisible('#rollout-new'), false);
  assert.deepEqual(viewer.errors, []);
  await viewer.context().close();
});

test('the drift page shows the staged drift from the profiles; an operator plans the rollout that fixes one', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  // examples/fleet.yaml's training, inference and edge profiles ask for 580.159.03; `up` staged
  // older drivers on some of their nodes, and Container Toolkit 1.17.3 on l40s-serve-0001.
  const v = await waitFor('drift findings', async () => {
    const r = (await call(fleet.base, fleet.token, 'GET', '/api/v1/drift?state=open&limit=5000')).body;
    return r.total > 0 && r;
  });
  await page.goto(fleet.base + '/#/drift');
  await page.waitForSelector('#drift-list tbody tr');
  assert.equal(Number(await page.textContent('#drift-open')), v.summary.open);
  assert.ok(v.items.some((f) => f.node === 'l4-edge-0000' && f.actual === '535.247.01'));
  // By cause (issue 51): one row per difference, the forbidden miner first (critical), and the
  // staged old driver as one row of many nodes with the rollout that fixes them.
  await page.waitForSelector('#drift-causes tr[data-cause]');
  assert.equal(await page.getAttribute('#drift-causes tr[data-cause]', 'data-cause'), 'package:xmrig');
  assert.equal(await page.getAttribute('#drift-causes tr[data-cause]', 'data-severity'), 'critical');
  const older = v.causes.find((c) => c.fact === 'driver_version' && c.nodes > 1);
  assert.ok(older, JSON.stringify(v.causes));
  assert.match(older.summary, new RegExp(`^${older.nodes} nodes with driver_version ${older.actual.replaceAll('.', '\\.')} \\(profile: 580\\.159\\.03\\) → one driver rollout to 580\\.159\\.03 per pool$`));
  await page.fill('#drift-list input[type=search]', 'container_toolkit');
  assert.match(await page.textContent('#drift-list tbody'), /l40s-serve-0001.*1\.19\.1.*1\.17\.3/s);
  await page.fill('#drift-list input[type=search]', 'l4-edge-0000');
  await page.click('#drift-list button[data-fix]');
  await page.waitForSelector('#drift-fix-why');
  assert.equal(await page.textContent('#drift-fix-why'), 'a driver rollout of l4-edge-0000 to 580.159.03');
  await shot(page, 'drift');
  // The node page has its section.
  await page.goto(fleet.base + '/#/node/l40s-serve-0001');
  await page.waitForSelector('#node-drift');
  assert.match(await page.textContent('#node-drift'), /container_toolkit/);
  // The edge profile's override for fanless stores: l4-edge-0008 carries the label and started
  // at the L4's 72 W, where the override asks for 60 W; the agent set it back.
  const fanless = await waitFor('the override\'s finding resolved', async () => {
    const r = (await call(fleet.base, fleet.token, 'GET', '/api/v1/drift?node=l4-edge-0008&state=resolved')).body;
    return r.items.find((f) => f.fact === 'power_limit_w' && f.expected === '60' && f.actual === '72');
  });
  assert.equal(fanless.remediation, 'auto');
  await page.goto(fleet.base + '/#/node/l4-edge-0008');
  await page.waitForSelector('#node-labels code');
  assert.equal(await page.textContent('#node-labels'), 'enclosure=fanless');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the compliance page shows the posture per cluster, the trend and the failing nodes, and downloads both CSVs', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/compliance');
  await page.waitForSelector('#comp-trend .uplot');
  const v = (await call(fleet.base, fleet.token, 'GET', '/api/v1/reports/compliance')).body;
  // A row for the fleet and one per cluster, each share as the API has it (the staged nodes keep
  // the fleet under 100%).
  assert.equal(await page.$$eval('#comp-scopes tr[data-scope]', (r) => r.length), 1 + v.clusters.length);
  assert.equal(Number(await page.textContent('#comp-node-count')), v.fleet.nodes);
  assert.ok(v.fleet.compliant < 1 && v.fleet.cve_free < 1 && v.fleet.supported_branch < 1, JSON.stringify(v.fleet));
  assert.equal(await page.textContent('#comp-scopes tr[data-scope="fleet"] td[data-share="supported_branch"]'),
    `${(100 * v.fleet.supported_branch).toFixed(1)}%`);
  assert.equal(await page.textContent('#comp-audit'), 'verified');
  // The edge node on R535 is among the failing ones, with why.
  await page.fill('#comp-nodes input[type=search]', 'l4-edge-0000');
  assert.match(await page.textContent('#comp-nodes tbody'), /supported_branch: R535 is end of life \(2026-06\)/);
  // The CSVs, as the API writes them.
  const [trend] = await Promise.all([page.waitForEvent('download'), page.click('#comp-csv')]);
  const text = await (await import('node:fs/promises')).readFile(await trend.path(), 'utf8');
  assert.match(text, /^day,scope,nodes,supported_branch,drift_free,cve_free,firmware_at_profile,audit_chain_verified,compliant\n\d{4}-\d\d-\d\d,fleet,/);
  const [nodes] = await Promise.all([page.waitForEvent('download'), page.click('#comp-nodes-csv')]);
  assert.match(await (await import('node:fs/promises')).readFile(await nodes.path(), 'utf8'), /\nl4-edge-0000,edge-stores,[^\n]*supported_branch: R535/);
  await shot(page, 'compliance');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the security page shows the staged exposure; an operator proposes the fix of a pool and starts it', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/security');
  await page.waitForSelector('#sec-cves tr[data-cve]');
  // The page says what the API says; `up` staged one node at CVSS 9.0 and one on an ended branch.
  const v = (await call(fleet.base, fleet.token, 'GET', '/api/v1/vulnerabilities?limit=5000')).body;
  assert.equal(Number(await page.textContent('#sec-exposed')), v.summary.exposed);
  assert.ok(v.summary.exposed > 0);
  assert.equal(Number(await page.textContent('#sec-critical')), 1);
  assert.equal(Number(await page.textContent('#sec-unsupported')), 1);
  assert.ok(await page.$('#sec-cves tr[data-cve="CVE-2025-23266"]'));
  assert.match(await page.textContent('#sec-note'), /simulated/);
  // What to fix, by cause: one row per driver and verdict, as the API groups them; and the
  // forbidden miner as a critical finding (issue 51).
  assert.ok(v.causes.length > 0);
  assert.equal(await page.$$eval('#sec-causes tr[data-cause-driver]', (r) => r.length), v.causes.length);
  assert.ok(v.causes.every((c) => c.summary.startsWith(`${c.nodes} node`)));
  await page.waitForSelector('#sec-forbidden-table tr[data-package="xmrig"]');
  assert.equal(Number(await page.textContent('#sec-forbidden-total')), 1);
  await page.fill('#sec-nodes input[type=search]', 'l4-edge-0000');
  assert.match(await page.textContent('#sec-nodes tbody'), /unsupported branch/);
  // The fix of the development pool: the proposal and its plan, then the rollout.
  await page.click('#sec-pools button[data-fix="a10-dev"]');
  await page.waitForSelector('#sec-fix-target');
  assert.equal(await page.textContent('#sec-fix-target'), '580.159.03');
  assert.match(await page.textContent('#sec-fix'), /fixes 8 node\(s\)/);
  await shot(page, 'security');
  await page.click('#sec-fix-start');
  await page.waitForFunction(() => /^#\/rollouts\/\d+$/.test(location.hash));
  const id = (await page.evaluate(() => location.hash)).split('/').pop();
  const r = (await call(fleet.base, fleet.token, 'GET', `/api/v1/rollouts/${id}`)).body;
  assert.equal(r.target, '580.159.03');
  assert.equal(r.nodes.length, 8);
  // The node page says it too.
  await page.goto(fleet.base + '/#/node/l40s-serve-0001');
  await page.waitForSelector('#node-security');
  assert.match(await page.textContent('#node-security'), /highest CVSS 9\.0/);
  assert.deepEqual(page.errors, []);
  await page.context().close();
  // A viewer sees the page without the fix button.
  const token = (await call(fleet.base, fleet.token, 'POST', '/api/v1/api-tokens', { name: 'security-viewer', role: 'viewer' })).body.token;
  const viewer = await signedIn(browser, fleet.base, token);
  await viewer.goto(fleet.base + '/#/security');
  await viewer.waitForSelector('#sec-pools tr[data-pool]');
  assert.equal(await viewer.$$eval('#sec-pools button[data-fix]', (b) => b.length), 0);
  assert.deepEqual(viewer.errors, []);
  await viewer.context().close();
});

test('the settings page shows the Prometheus data source and each remote-write receiver, live', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/settings');
  await page.waitForSelector('#rw tr[data-receiver="127.0.0.1:9/api/v1/write"]');
  assert.equal(await page.textContent('#prom-url'), fleet.base + '/prometheus');
  const row = '#rw tr[data-receiver="127.0.0.1:9/api/v1/write"]';
  await page.waitForFunction((sel) => /retrying/.test(document.querySelector(sel).textContent), row);
  assert.match(await page.textContent(row), /Connection refused/);
  // The samples wait, more with each refresh (the page follows the live stream).
  const pending = async () => Number((await page.textContent(`${row} td.pending`)).replace(/[^0-9]/g, ''));
  const first = await pending();
  assert.ok(first > 0);
  await page.waitForFunction(([sel, n]) => Number(document.querySelector(`${sel} td.pending`).textContent.replace(/[^0-9]/g, '')) > n, [row, first]);
  const api = await call(fleet.base, fleet.token, 'GET', '/api/v1/remote-write');
  assert.equal(api.body.items[0].url, NOWHERE);
  assert.equal(api.body.items[0].samples_sent, 0);
  await shot(page, 'settings');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});

test('the live indicator shows a lost stream and the page reconnects by itself', async () => {
  const page = await signedIn(browser, fleet.base, fleet.token);
  await page.goto(fleet.base + '/#/');
  await page.waitForSelector('.card');
  await fleet.stop();
  await page.waitForSelector('#live.down', { timeout: 15000 });
  await shot(page, 'live-lost');
  await fleet.start();
  await page.waitForSelector('#live.up', { timeout: 30000 });
  await page.waitForSelector('.card[data-cluster]');
  assert.deepEqual(page.errors, []);
  await page.context().close();
});
