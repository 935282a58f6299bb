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

// A size against another, in words people read the same way: "2.0× smaller", "1.1× larger",
// "the same size as" (never "0.50× smaller").
// Within 5%: "about the same size (+0.5%)".
export function ratioWords(other, bytes) {
  if (!(other > 0) || !(bytes > 0)) return '';
  const r = other >= bytes ? other / bytes : bytes / other;
  if (r < 1.05) return other === bytes ? 'the same size' : `about the same size (${other > bytes ? '−' : '+'}${(100 * Math.abs(bytes - other) / other).toFixed(1)}%)`;
  return `${r.toFixed(r < 10 ? 1 : 0)}× ${other >= bytes ? 'smaller' : 'larger'}`;
}
// "2.0× smaller than the source", "1.1× larger than the source", "about the same size as the source (+0.5%)"
export function versus(other, bytes, what) {
  const w = ratioWords(other, bytes);
  const m = w.match(/^(about )?the same size( \(.*\))?$/);
  return m ? `${m[1] || ''}the same size as ${what}${m[2] || ''}` : `${w} than ${what}`;
}

const SVGNS = 'http://www.w3.org/2000/svg';

// The bytes that are not tensor data, by the breakdown's fields; a format shows the parts it has.
const PARTS = [
  ['header_bytes', 'header', '#333333'],
  ['metadata_bytes', 'metadata', '#6b6b6b'],
  ['vocabulary_bytes', 'vocabulary', '#8a6d3b'],
  ['descriptor_bytes', 'tensor descriptors', '#a0a0a0'],
  ['padding_bytes', 'alignment padding', '#d0d0d0'],
];
// LEAP's fixed header is just that: its 256 bytes (config, counts), named as the format's header.
const headerName = (b) => (String(b.format || '').startsWith('leap') ? 'LEAP header' : 'header');
export const overheadParts = (b) =>
  PARTS.filter(([k]) => b[k] > 0).map(([k, label, color]) => ({ key: k, label: k === 'header_bytes' ? headerName(b) : label, bytes: b[k], color }));

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

const pct = (n, total, d = 1) => `${((100 * n) / total).toFixed(d)}%`;
let hatchIds = 0;

// The bar is an SVG (one rect per part, scales hatched); the legend is HTML below it, so it wraps
// and keeps its size on a phone, each swatch drawn as its part is (scales hatched in the legend too).
export function renderBreakdown(chartEl, tableEl, b) {
  const total = b.total_bytes;
  const W = 720, H = 40;
  const segs = segmentsOf(b).filter((s) => s.bytes > 0);
  const svg = document.createElementNS(SVGNS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('preserveAspectRatio', 'none');
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'Output bytes by part: ' + segs.map((s) => `${s.label} ${pct(s.bytes, total)}`).join(', '));
  const id = `hatch${++hatchIds}`;
  const defs = document.createElementNS(SVGNS, 'defs');
  defs.innerHTML = `<pattern id="${id}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
    '<line x1="0" y1="0" x2="0" y2="6" stroke="white" stroke-width="3"/></pattern>';
  svg.append(defs);
  const legend = document.createElement('ul');
  legend.className = 'legend';
  let x = 0;
  for (const s of segs) {
    const w = Math.max(total ? (s.bytes / total) * W : 0, 1);
    const rect = document.createElementNS(SVGNS, 'rect');
    Object.entries({ x, y: 0, width: w, height: H, fill: s.color }).forEach(([k, v]) => rect.setAttribute(k, v));
    rect.dataset.segment = s.label;
    const title = document.createElementNS(SVGNS, 'title');
    title.textContent = `${s.label}: ${formatBytes(s.bytes)} (${pct(s.bytes, total, 2)})`;
    rect.append(title);
    svg.append(rect);
    if (s.kind === 'scales') {
      const h = rect.cloneNode();
      h.setAttribute('fill', `url(#${id})`);
      svg.append(h);
    }
    const li = document.createElement('li');
    li.dataset.segment = s.label;
    const sw = document.createElement('span');
    sw.className = 'swatch' + (s.kind === 'scales' ? ' scales' : '');
    sw.style.backgroundColor = s.color;
    li.append(sw, `${s.label} ${pct(s.bytes, total)}`);
    legend.append(li);
    x += w;
  }
  chartEl.replaceChildren(svg, legend);

  const rows = [[['part', 'tensors', 'values', 'scales', 'share']]];
  for (const r of b.by_dtype) {
    rows.push([[r.dtype, r.tensors, formatBytes(r.values_bytes), r.scales_bytes ? formatBytes(r.scales_bytes) : '–',
      pct(r.values_bytes + r.scales_bytes, total)], { dtype: r.dtype }]);
  }
  for (const p of b.by_part || [])  // a mixture of experts: the tensors' bytes again, by part
    rows.push([[`· ${p.part}`, p.tensors, formatBytes(p.bytes), '', pct(p.bytes, total)], { group: p.part }]);
  for (const p of overheadParts(b))
    rows.push([[p.label, '', formatBytes(p.bytes), '', pct(p.bytes, total, 2)], { part: p.key, bytes: p.bytes }]);
  rows.push([['total', '', formatBytes(total), '', '100%'], { part: 'total_bytes', bytes: total }]);
  rows.push([['vs FP32 baseline (numel × 4)', '', formatBytes(b.fp32_baseline_bytes), '', ratioWords(b.fp32_baseline_bytes, total)], { vs: 'fp32' }]);
  if (b.source_bytes) rows.push([['vs source checkpoint', '', formatBytes(b.source_bytes), '', ratioWords(b.source_bytes, total)], { vs: 'source' }]);
  // the source's bytes by the dtype it stores them in (a quantized checkpoint's scales too)
  for (const d of b.source_by_dtype || []) rows.push([[`source ${d.dtype}`, '', formatBytes(d.bytes), '', ''], { source: d.dtype, bytes: d.bytes }]);
  tableEl.replaceChildren();
  rows.forEach(([cells, data], i) => {
    const tr = tableEl.insertRow();
    if (data) Object.assign(tr.dataset, data);
    cells.forEach((v, j) => {
      const c = document.createElement(i === 0 || j === 0 ? 'th' : 'td');
      if (i === 0) c.scope = 'col'; else if (j === 0) c.scope = 'row';
      c.textContent = String(v);
      tr.append(c);
    });
  });
}
