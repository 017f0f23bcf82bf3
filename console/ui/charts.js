// Hand-drawn SVG charts: a bar chart and a line chart, sized by viewBox so
// they scale with their container. Every value is also in a <title> (the
// browser shows it on hover) and the figures that matter are written as text.
import { s, num } from './dom.js';

// niceMax rounds a maximum up to 1, 2, 4 or 5 times a power of ten, and
// counts (integer) to at least 4, so that the four ticks are whole numbers.
function niceMax(v, integer) {
  if (integer && v <= 4) return 4;
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 4, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// Chart geometry in SVG units (about pixels at the size the CSS gives):
// margins left, right, top, bottom.
const L = 48, R = 12, T = 16, B = 24;

function axes(W, H, max, unit) {
  const g = s('g', { class: 'axes' });
  const ticks = 4;
  for (let i = 0; i <= ticks; i++) {
    const v = max * i / ticks;
    const y = T + (H - T - B) * (1 - i / ticks);
    g.append(s('line', { x1: L, x2: W - R, y1: y, y2: y, class: i ? 'grid' : 'base' }));
    g.append(s('text', { x: L - 6, y: y + 4, class: 'tick', 'text-anchor': 'end' },
      Number.isInteger(v) ? num(v) : v.toFixed(v < 10 ? 2 : 1)));
  }
  if (unit) g.append(s('text', { x: L, y: T - 5, class: 'unit' }, unit));
  return g;
}

// barChart draws bars: [{ label, value, title }]. label is written under a
// bar when there is room (every k-th); a non-zero value is written above it.
export function barChart(bars, { unit = '', empty = 'nothing yet', className = '', W = 1000, H = 240 } = {}) {
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: `chart bars ${className}`, role: 'img' });
  const max = niceMax(Math.max(0, ...bars.map((b) => b.value)), true);
  svg.append(axes(W, H, max, unit));
  if (!bars.length) {
    svg.append(s('text', { x: W / 2, y: H / 2, class: 'empty', 'text-anchor': 'middle' }, empty));
    return svg;
  }
  const span = (W - L - R) / bars.length;
  const bw = Math.max(2, Math.min(40, span * 0.7));
  const every = Math.ceil(bars.length / 12);
  bars.forEach((b, i) => {
    const x = L + span * i + (span - bw) / 2;
    const hgt = (H - T - B) * b.value / max;
    const y = H - B - hgt;
    const g = s('g', { class: 'bar', 'data-value': b.value });
    g.append(s('rect', { x, y, width: bw, height: Math.max(hgt, b.value ? 1 : 0) },
      s('title', null, b.title || `${b.label}: ${num(b.value)}`)));
    if (b.value && bars.length <= 48) {
      g.append(s('text', { x: x + bw / 2, y: y - 3, class: 'value', 'text-anchor': 'middle' }, num(b.value)));
    }
    if (i % every === 0) {
      g.append(s('text', { x: x + bw / 2, y: H - B + 14, class: 'label', 'text-anchor': 'middle' }, b.label));
    }
    svg.append(g);
  });
  return svg;
}

// lineChart draws points [{ t, v }] (t in seconds) as a line over the last
// window seconds; integer says the values are counts.
export function lineChart(points, { unit = '', window = 300, now, integer = false, W = 400, H = 150 } = {}) {
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart line', role: 'img' });
  const end = now ?? (points.length ? points[points.length - 1].t : 0);
  const shown = points.filter((p) => p.t >= end - window);
  const max = niceMax(Math.max(0, ...shown.map((p) => p.v)), integer);
  svg.append(axes(W, H, max, unit));
  const x = (t) => L + (W - L - R) * (1 - (end - t) / window);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  if (shown.length > 1) {
    svg.append(s('polyline', { points: shown.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ') }));
  }
  for (const p of shown.slice(-1)) svg.append(s('circle', { cx: x(p.t), cy: y(p.v), r: 3 }));
  svg.append(s('text', { x: L, y: H - B + 14, class: 'label' }, `−${Math.round(window / 60)} min`));
  svg.append(s('text', { x: W - R, y: H - B + 14, class: 'label', 'text-anchor': 'end' }, 'now'));
  return svg;
}
