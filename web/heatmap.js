// The GPU heatmap on one canvas: every GPU a cell, each node a strip of its GPUs in index
// order, nodes grouped by pool. Few nodes: one row per node with its name. Many: the strips
// wrap across the width, so 10,000 GPUs fit on a screen, each line labelled in a gutter with its
// first node's number. Cells are written into an ImageData
// (no per-cell canvas calls), which keeps a redraw of 10,000 GPUs to a few milliseconds.

const VIRIDIS = ['#440154', '#482878', '#3e4989', '#31688e', '#26828e', '#1f9e89', '#35b779', '#6ece58',
  '#b5de2b', '#fde725'];
const HEALTH = ['#22a559', '#f0a020', '#d62728']; // healthy, warning, failed
export const HEALTH_NAMES = ['healthy', 'warning', 'failed'];
const ALLOCATION = ['#dbe4f3', '#2563eb']; // free, running a job
export const ALLOCATION_NAMES = ['free', 'allocated'];
const MISSING = '#d1d5db';
const STATE_MARK = { cordoned: '#b26b00', draining: '#b26b00', drained: '#b26b00', degraded: '#b26b00',
  unhealthy: '#c0262d', unreachable: '#c0262d', provisioning: '#6b7280' };

function rgb(hex) {
  const n = parseInt(hex.slice(1), 16);
  return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
}
// As little-endian RGBA words for a Uint32Array over ImageData.
const word = ([r, g, b]) => (255 << 24) | (b << 16) | (g << 8) | r;

const SCALE = (() => {
  const stops = VIRIDIS.map(rgb);
  const lut = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    const x = (i / 255) * (stops.length - 1);
    const k = Math.min(Math.floor(x), stops.length - 2);
    const t = x - k;
    lut[i] = word(stops[k].map((c, j) => Math.round(c + (stops[k + 1][j] - c) * t)));
  }
  return lut;
})();

export function scaleColor(t) {
  const w = SCALE[Math.max(0, Math.min(255, Math.round(t * 255)))];
  return `rgb(${w & 255},${(w >> 8) & 255},${(w >> 16) & 255})`;
}
export function healthColor(level) { return HEALTH[level] ?? MISSING; }
export function allocationColor(v) { return ALLOCATION[v] ?? MISSING; }

export class Heatmap {
  // onHover(cell or null, mouseEvent), onClick(cell); a cell is {node, pool, model, gpu, value,
  // state, simulated}.
  constructor(box, { onHover, onClick } = {}) {
    this.box = box;
    this.canvas = document.createElement('canvas');
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', 'GPU heatmap');
    box.appendChild(this.canvas);
    this.ctx = this.canvas.getContext('2d');
    this.data = null;
    this.lastDrawMs = 0;
    this.canvas.addEventListener('mousemove', (e) => onHover && onHover(this.cellAt(e), e));
    this.canvas.addEventListener('mouseleave', (e) => onHover && onHover(null, e));
    this.canvas.addEventListener('click', (e) => { const c = this.cellAt(e); if (c && onClick) onClick(c); });
    this.resize = new ResizeObserver(() => { if (this.data && this.box.clientWidth !== this.width) this.draw(); });
    this.resize.observe(box);
  }

  destroy() { this.resize.disconnect(); }

  // data: the /api/v1/heatmap reply. Returns the draw's duration in ms.
  setData(data) {
    this.data = data;
    return this.draw();
  }

  layout() {
    const d = this.data;
    const width = Math.max(this.box.clientWidth - 2, 200);
    const rows = d.nodes.length <= 24; // one labelled row per node while that fits a screen
    const maxGpus = d.nodes.reduce((m, n) => Math.max(m, n[3]), 1);
    // Cell size: as large as fits, 6..22 px.
    let cw, ch, label = 0, gap = 3;
    if (rows) {
      label = Math.min(170, Math.floor(width * 0.4));
      cw = Math.max(8, Math.min(28, Math.floor((width - label - 8) / maxGpus)));
      ch = 18;
    } else {
      // A gutter names each line by its first node's number, so a strip can be found again.
      label = 44;
      const total = d.values.length;
      cw = Math.max(6, Math.min(16, Math.floor(Math.sqrt(((width - label) * 600) / Math.max(total, 1)))));
      ch = cw;
    }
    const strip = maxGpus * cw + (rows ? 0 : gap);
    const perLine = rows ? 1 : Math.max(1, Math.floor((width - label + gap) / strip));
    const head = 20;
    const sections = [];
    let y = 0, first = 0, offset = 0;
    for (let p = 0; p < d.pools.length; p++) {
      let count = 0;
      while (first + count < d.nodes.length && d.nodes[first + count][1] === p) count++;
      if (count === 0) continue;
      const lines = Math.ceil(count / perLine);
      sections.push({ pool: d.pools[p], y, top: y + head, first, count, offset, lines });
      for (let i = 0; i < count; i++) offset += d.nodes[first + i][3];
      y += head + lines * (ch + (rows ? 2 : 1)) + 8;
      first += count;
    }
    return { width, rows, cw, ch, label, gap, strip, perLine, sections, height: Math.max(y, 40), lineH: ch + (rows ? 2 : 1) };
  }

  draw() {
    if (!this.data) return 0;
    const t0 = performance.now();
    const d = this.data;
    const L = (this.L = this.layout());
    this.width = this.box.clientWidth;
    const c = this.canvas;
    if (c.width !== L.width || c.height !== L.height) { c.width = L.width; c.height = L.height; }
    const ctx = this.ctx;
    const img = ctx.createImageData(L.width, L.height);
    const px = new Uint32Array(img.data.buffer);
    px.fill(word([255, 255, 255]));
    // Categorical fields: health (healthy, warning, failed) and allocation (free, allocated).
    const categories = d.field === 'health' ? HEALTH : d.field === 'allocation' ? ALLOCATION : null;
    const span = d.max - d.min || 1;
    const missing = word(rgb(MISSING));
    const categoryWords = (categories || []).map((h) => word(rgb(h)));
    const marks = Object.fromEntries(Object.entries(STATE_MARK).map(([k, v]) => [k, word(rgb(v))]));
    const W = L.width;
    const fill = (x0, y0, w, h, color) => {
      for (let y = y0; y < y0 + h; y++) {
        const row = y * W;
        px.fill(color, row + x0, row + Math.min(x0 + w, W));
      }
    };
    // GPUs the health model finds warning or failed: outlined in every colouring.
    const unhealthy = new Map(d.unhealthy || []);
    const outlineWords = [0, word(rgb(HEALTH[1])), word(rgb(HEALTH[2]))];
    const edge = L.cw >= 10 ? 2 : 1;
    const outline = (x, y, w, h, color) => {
      fill(x, y, w, edge, color);
      fill(x, y + h - edge, w, edge, color);
      fill(x, y, edge, h, color);
      fill(x + w - edge, y, edge, h, color);
    };
    let cells = 0;
    for (const s of L.sections) {
      let v = s.offset;
      for (let i = 0; i < s.count; i++) {
        const n = d.nodes[s.first + i];
        const x0 = L.label + (L.rows ? 0 : (i % L.perLine) * L.strip);
        const y0 = s.top + Math.floor(i / L.perLine) * L.lineH;
        for (let g = 0; g < n[3]; g++, v++) {
          const val = d.values[v];
          let color;
          if (val === null || val === undefined) color = missing;
          else if (categories) color = categoryWords[val] ?? missing;
          else color = SCALE[Math.max(0, Math.min(255, Math.round(((val - d.min) / span) * 255)))];
          fill(x0 + g * L.cw, y0, L.cw - 1, L.ch - 1, color);
          const level = unhealthy.get(v);
          if (level) outline(x0 + g * L.cw, y0, L.cw - 1, L.ch - 1, outlineWords[level]);
          cells++;
        }
        const mark = marks[n[4]];
        if (mark) fill(x0, y0 + L.ch - 3, n[3] * L.cw - 1, 2, mark); // a bar under a node not ready
      }
    }
    ctx.putImageData(img, 0, 0);
    this.cells = cells;
    c.dataset.cells = String(cells);
    ctx.fillStyle = '#1d2330';
    ctx.font = '600 12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const s of L.sections) ctx.fillText(`${s.pool} · ${s.count} nodes`, 0, s.y + 10);
    if (L.rows) {
      ctx.font = '12px system-ui, sans-serif';
      for (const s of L.sections) {
        for (let i = 0; i < s.count; i++) {
          const name = d.nodes[s.first + i][0];
          ctx.fillText(name.length > 24 ? name.slice(0, 23) + '…' : name, 0, s.top + i * L.lineH + L.ch / 2, L.label - 6);
        }
      }
    } else {
      // Each line's first node by its number ("0024"); every k-th line where lines are thin.
      ctx.font = '10px system-ui, sans-serif';
      ctx.fillStyle = '#5b6473';
      const every = Math.ceil(11 / L.lineH);
      let labels = 0;
      for (const s of L.sections) {
        for (let line = 0; line < s.lines; line += every, labels++) {
          const name = d.nodes[s.first + line * L.perLine][0];
          const m = name.match(/(\d+)$/);
          ctx.fillText(m ? m[1] : name.slice(-6), 0, s.top + line * L.lineH + L.ch / 2, L.label - 4);
        }
      }
      c.dataset.lineLabels = String(labels);
    }
    this.lastDrawMs = performance.now() - t0;
    return this.lastDrawMs;
  }

  // Where a GPU's cell is on the canvas ({x, y, w, h} in canvas pixels), or null.
  cellRect(node, gpu) {
    const L = this.L, d = this.data;
    if (!L) return null;
    for (const s of L.sections) {
      for (let i = 0; i < s.count; i++) {
        if (d.nodes[s.first + i][0] !== node) continue;
        const x0 = L.label + (L.rows ? 0 : (i % L.perLine) * L.strip);
        const y0 = s.top + Math.floor(i / L.perLine) * L.lineH;
        return { x: x0 + gpu * L.cw, y: y0, w: L.cw - 1, h: L.ch - 1 };
      }
    }
    return null;
  }

  cellAt(e) {
    if (!this.data || !this.L) return null;
    const r = this.canvas.getBoundingClientRect();
    const x = e.clientX - r.left, y = e.clientY - r.top;
    const L = this.L, d = this.data;
    const s = L.sections.find((s) => y >= s.top && y < s.top + s.lines * L.lineH);
    if (!s) return null;
    const line = Math.floor((y - s.top) / L.lineH);
    let col, gpu;
    if (L.rows) {
      if (x < L.label) return null;
      col = 0;
      gpu = Math.floor((x - L.label) / L.cw);
    } else {
      if (x < L.label) return null;
      col = Math.floor((x - L.label) / L.strip);
      if (col >= L.perLine) return null;
      gpu = Math.floor((x - L.label - col * L.strip) / L.cw);
    }
    const i = line * L.perLine + col;
    if (i >= s.count) return null;
    const n = d.nodes[s.first + i];
    if (gpu < 0 || gpu >= n[3]) return null;
    let v = s.offset;
    for (let k = 0; k < i; k++) v += d.nodes[s.first + k][3];
    return { node: n[0], pool: d.pools[n[1]], model: d.models[n[2]], gpu, value: d.values[v + gpu], state: n[4],
      simulated: !!n[5] };
  }
}
