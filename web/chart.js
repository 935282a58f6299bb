// The byte breakdown: a stacked bar (SVG) of output bytes by dtype, values and scales apart,
// then each part of the rest the format has (header, metadata, vocabulary, tensor descriptors,
// alignment padding: the breakdown's fields), and a table with the ratios to the source and to FP32.
import { colorOf } from './catalog.js';

export function formatBytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

const SVGNS = 'http://www.w3.org/2000/svg';

// The bytes that are not tensor data, by the breakdown's fields; a format shows the parts it has.
const PARTS = [
  ['header_bytes', 'header', '#333'],
  ['metadata_bytes', 'metadata', '#6b6b6b'],
  ['vocabulary_bytes', 'vocabulary', '#8a6d3b'],
  ['descriptor_bytes', 'tensor descriptors', '#a0a0a0'],
  ['padding_bytes', 'alignment padding', '#d0d0d0'],
];
export const overheadParts = (b) =>
  PARTS.filter(([k]) => b[k] > 0).map(([k, label, color]) => ({ key: k, label, bytes: b[k], color }));

function segmentsOf(b) {
  const segs = [];
  for (const r of b.by_dtype) {
    const color = colorOf(r.dtype);  // the quant-type table's colour
    segs.push({ label: `${r.dtype} values`, bytes: r.values_bytes, color, kind: 'values' });
    if (r.scales_bytes) segs.push({ label: `${r.dtype} scales`, bytes: r.scales_bytes, color, kind: 'scales' });
  }
  for (const p of overheadParts(b)) segs.push({ ...p, kind: 'overhead' });
  return segs;
}

export function renderBreakdown(chartEl, tableEl, b) {
  const total = b.total_bytes;
  const W = 720, H = 56;
  const segs = segmentsOf(b).filter((s) => s.bytes > 0);
  const svg = document.createElementNS(SVGNS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H + 16 + 18 * Math.ceil(segs.length / 3)}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'Output bytes by dtype');
  const defs = document.createElementNS(SVGNS, 'defs');
  defs.innerHTML = '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">' +
    '<rect width="6" height="6" fill="white" fill-opacity="0.0"/><line x1="0" y1="0" x2="0" y2="6" stroke="white" stroke-width="3"/></pattern>';
  svg.append(defs);
  let x = 0;
  segs.forEach((s, i) => {
    const w = Math.max(total ? (s.bytes / total) * W : 0, 1);
    const rect = document.createElementNS(SVGNS, 'rect');
    Object.entries({ x, y: 0, width: w, height: H, fill: s.color }).forEach(([k, v]) => rect.setAttribute(k, v));
    rect.dataset.segment = s.label;
    const title = document.createElementNS(SVGNS, 'title');
    title.textContent = `${s.label}: ${formatBytes(s.bytes)} (${((100 * s.bytes) / total).toFixed(2)}%)`;
    rect.append(title);
    svg.append(rect);
    if (s.kind === 'scales') {
      const h = rect.cloneNode();
      h.setAttribute('fill', 'url(#hatch)');
      svg.append(h);
    }
    // legend
    const lx = (i % 3) * 240, ly = H + 16 + Math.floor(i / 3) * 18;
    const sw = document.createElementNS(SVGNS, 'rect');
    Object.entries({ x: lx, y: ly - 10, width: 12, height: 12, fill: s.color }).forEach(([k, v]) => sw.setAttribute(k, v));
    const t = document.createElementNS(SVGNS, 'text');
    Object.entries({ x: lx + 16, y: ly, 'font-size': 12 }).forEach(([k, v]) => t.setAttribute(k, v));
    t.textContent = `${s.label} ${((100 * s.bytes) / total).toFixed(1)}%`;
    svg.append(sw, t);
    x += w;
  });
  chartEl.replaceChildren(svg);

  const rows = [[['dtype', 'tensors', 'values', 'scales', 'share']]];
  for (const r of b.by_dtype) {
    rows.push([[r.dtype, r.tensors, formatBytes(r.values_bytes), formatBytes(r.scales_bytes),
      `${((100 * (r.values_bytes + r.scales_bytes)) / total).toFixed(1)}%`], { dtype: r.dtype }]);
  }
  for (const p of overheadParts(b))
    rows.push([[p.label, '', formatBytes(p.bytes), '', `${((100 * p.bytes) / total).toFixed(2)}%`], { part: p.key, bytes: p.bytes }]);
  rows.push([['total', '', formatBytes(total), '', '100%'], { part: 'total_bytes', bytes: total }]);
  rows.push([['vs FP32 baseline (numel × 4)', '', formatBytes(b.fp32_baseline_bytes), '', `${b.ratio_vs_fp32.toFixed(2)}× smaller`]]);
  if (b.source_bytes) rows.push([['vs source checkpoint', '', formatBytes(b.source_bytes), '', `${b.ratio_vs_source.toFixed(2)}× smaller`]]);
  tableEl.replaceChildren();
  rows.forEach(([cells, data], i) => {
    const tr = tableEl.insertRow();
    if (data) Object.assign(tr.dataset, data);
    for (const v of cells) {
      const c = document.createElement(i === 0 ? 'th' : 'td');
      c.textContent = String(v);
      tr.append(c);
    }
  });
}
