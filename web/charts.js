// Charts: uPlot (vendored, web/vendor/uPlot.iife.min.js, MIT) for time series with zoom, and a
// plain canvas sparkline for the cluster cards.

const PALETTE = ['#2563eb', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];

export function sparkline(canvas, values, { max = 100 } = {}) {
  const w = (canvas.width = canvas.clientWidth || 240);
  const h = (canvas.height = canvas.clientHeight || 36);
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, w, h);
  const pts = values.map((v, i) => [i, v]).filter(([, v]) => v !== null && Number.isFinite(v));
  if (pts.length < 2) {
    ctx.fillStyle = '#9aa1ad';
    ctx.font = '11px system-ui';
    ctx.fillText('no data yet', 4, h / 2 + 4);
    return;
  }
  const x = (i) => (i / Math.max(values.length - 1, 1)) * (w - 2) + 1;
  const y = (v) => h - 2 - (Math.min(v, max) / max) * (h - 4);
  ctx.beginPath();
  pts.forEach(([i, v], k) => (k ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
  ctx.strokeStyle = '#2563eb';
  ctx.lineWidth = 1.5;
  ctx.stroke();
  ctx.lineTo(x(pts[pts.length - 1][0]), h);
  ctx.lineTo(x(pts[0][0]), h);
  ctx.fillStyle = '#2563eb22';
  ctx.fill();
}

// A time-series chart. xs: seconds; series: [{label, values}]. Drag to zoom, double-click to
// reset (uPlot's own). Returns the uPlot instance; call .destroy() when the view goes.
// xRange: [from, to] (s): the window asked for. The axis fits the history that exists: from the
// later of `from` and the first point (at least `minSpan` s wide), so ten minutes of data do not
// sit in a corner of a six-hour axis. yRange: [min, max] fixed (utilization: [0, 100]), so noise
// does not look like swings. Each legend entry carries the series' last and highest values.
export function lineChart(el, { title, unit, xs, series, height = 200, xRange, yRange, minSpan = 300 }) {
  const width = Math.max(el.clientWidth - 16, 260);
  const x = { time: true };
  if (xs.length) {
    const to = Math.max(xs[xs.length - 1], xRange ? xRange[1] : xs[xs.length - 1]);
    const from = Math.min(Math.max(xs[0], xRange ? xRange[0] : xs[0]), to - minSpan);
    // From the data itself: uPlot pads a single point by days before it asks.
    x.range = (u, min, max) => (u.zoomed ? [min, max] : [from, to]);
  }
  const scales = { x };
  if (yRange) scales.y = { range: (u, min, max) => [Math.min(yRange[0], min ?? yRange[0]), Math.max(yRange[1], max ?? yRange[1])] };
  const opts = {
    title, width, height,
    cursor: { drag: { x: true, y: false } },
    scales,
    axes: [{}, { label: unit, size: 56 }],
    legend: { show: series.length <= 8 },
    hooks: {
      setSelect: [(u) => { if (u.select.width > 0) u.zoomed = true; }],
      // The axes drawn (on the canvas), for tests and tools to read.
      draw: [(u) => Object.assign(el.dataset, { yMin: u.scales.y.min, yMax: u.scales.y.max, xMin: u.scales.x.min, xMax: u.scales.x.max })],
    },
    series: [{}, ...series.map((s, i) => ({ label: `${s.label}${lastAndMax(s.values)}`, stroke: PALETTE[i % PALETTE.length], width: 1.5,
      spanGaps: false, points: { show: xs.length < 3 } }))],
  };
  // eslint-disable-next-line no-undef
  const u = new uPlot(opts, [xs, ...series.map((s) => s.values)], el);
  u.resizeObserver = new ResizeObserver(() => {
    const w = Math.max(el.clientWidth - 16, 260);
    if (Math.abs(w - u.width) > 4) u.setSize({ width: w, height });
  });
  u.resizeObserver.observe(el);
  return u;
}

// " (last 87, max 94)": a series' newest and highest values, to three significant digits.
export function lastAndMax(values) {
  let last = null, max = null;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    last = v;
    max = max === null ? v : Math.max(max, v);
  }
  if (last === null) return '';
  const f = (v) => (Math.abs(v) >= 100 ? Math.round(v).toString() : Number(v.toPrecision(3)).toString());
  return ` (last ${f(last)}, max ${f(max)})`;
}

// A relative start as the range selectors give it ('-15m', '-24h', '-7d') in seconds.
export function spanSeconds(start) {
  const m = /^-(\d+)([smhd])$/.exec(start);
  return m ? Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[m[2]] : 0;
}

export function destroyChart(u) {
  if (!u) return;
  u.resizeObserver?.disconnect();
  u.destroy();
}

// /api/v1/query_range series -> {xs (s), values per series}, on the union of their timestamps.
export function toColumns(series) {
  const times = new Set();
  for (const s of series) for (const [t] of s.points) times.add(t);
  const xs = [...times].sort((a, b) => a - b);
  const at = new Map(xs.map((t, i) => [t, i]));
  const cols = series.map((s) => {
    const v = new Array(xs.length).fill(null);
    for (const [t, y] of s.points) v[at.get(t)] = y;
    return v;
  });
  return { xs: xs.map((t) => t / 1000), cols };
}
