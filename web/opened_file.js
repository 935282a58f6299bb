// An existing file opened on the page (a GGUF from anywhere, a GGUF-lite, a LEAP .bin): what the
// core read from its header (the worker's openFile: by slices only), drawn in "3. The file":
// the metadata (arrays as their count and first elements), the tensor table and the byte
// breakdown. The core recognises and describes the file; this module only draws what it says.
//
// Hook for a block view: selecting a tensor row dispatches the document event
// 'leapconv:opened-tensor' with detail { file, name, tensor, info } (file: the opened File, to
// read from: a split file's part that holds it; tensor: its row as the core describes it), and
// selectTensor(name) does the same.
import { renderBreakdown, formatBytes } from './chart.js';

const $ = (id) => document.getElementById(id);
let current = null;  // { file, info }

const el = (tag, props = {}) => Object.assign(document.createElement(tag), props);

// A metadata value for people: strings quoted and cut, arrays as "N × type: first, …".
const SHOW_CHARS = 200;
function valueText(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > SHOW_CHARS ? v.slice(0, SHOW_CHARS) + '…' : v) +
    (v.length > SHOW_CHARS ? ` (${v.length.toLocaleString('en')} characters)` : '');
  return String(v);
}
// A key's value as cell content: the value, or an array's count and type and its first items,
// each item on one line (a JSON string like "<0x02>" is not broken after its opening quote).
function keyCell(k) {
  if (!('count' in k)) return [valueText(k.value)];
  const head = `${k.count.toLocaleString('en')} × ${k.type.slice(4, -1)}`;
  if (!k.count) return [head];
  const more = k.count > k.first.length;
  const items = k.first.map((v, i) => el('span', { className: 'item', textContent: valueText(v) + (i + 1 < k.first.length || more ? ',' : '') }));
  return [`${head}: `, ...items.flatMap((s, i) => (i ? [' ', s] : [s])), ...(more ? [' …'] : [])];
}

function factsTable(info) {
  const table = el('table', { className: 'facts' });
  const rows = [];
  if (info.keys) for (const k of info.keys) rows.push([k.key, keyCell(k), k.key]);
  else for (const [k, v] of Object.entries(info.header)) rows.push([k, [typeof v === 'object' ? JSON.stringify(v) : String(v)], k]);
  for (const [k, v, key] of rows) {
    const tr = table.insertRow();
    tr.dataset.key = key;
    tr.append(el('th', { textContent: k, scope: 'row' }));
    tr.insertCell().append(...v);
  }
  return table;
}

function tensorTable(info) {
  const t = el('table', { className: 'tensors opened-tensors' });
  const head = t.createTHead().insertRow();
  for (const h of ['name', 'type', 'shape', 'offset', 'bytes']) head.append(el('th', { textContent: h, scope: 'col' }));
  const body = t.createTBody();
  for (const x of info.tensors) {
    const tr = body.insertRow();
    tr.dataset.tensor = x.name;
    tr.dataset.dtype = x.dtype;
    tr.dataset.offset = x.offset;
    tr.dataset.bytes = x.bytes;
    const type = x.decodable ? x.dtype : `${x.dtype} (cannot decode)`;
    for (const v of [x.name, type, `[${x.shape.join(', ')}]`, x.offset.toLocaleString('en'), formatBytes(x.bytes)]) tr.insertCell().textContent = v;
    if (!x.decodable) tr.classList.add('opaque');
    tr.onclick = () => selectTensor(x.name, { reveal: true });
  }
  // One Tab stop for the table: ↑/↓ move the selected tensor (a row for 128 tensors each would be 128 stops).
  t.tabIndex = 0;
  t.setAttribute('aria-label', 'Tensors; arrow keys select one');
  t.onkeydown = (e) => {
    if (e.key !== 'ArrowDown' && e.key !== 'ArrowUp') return;
    e.preventDefault();
    const names = info.tensors.map((x) => x.name);
    const at = names.indexOf(current && current.selected);
    selectTensor(names[Math.max(0, Math.min(names.length - 1, at + (e.key === 'ArrowDown' ? 1 : -1)))]);
  };
  return t;
}

// reveal: bring the block view into sight (a click; the arrow keys stay in the table).
export function selectTensor(name, { reveal = false } = {}) {
  if (!current) return;
  const tensor = current.info.tensors.find((t) => t.name === name);
  if (!tensor) return;
  current.selected = name;
  for (const tr of document.querySelectorAll('#opened-tensors tr.selected')) tr.classList.remove('selected');
  const row = [...document.querySelectorAll('#opened-tensors tbody tr')].find((r) => r.dataset.tensor === name);
  if (row) {
    row.classList.add('selected');
    row.scrollIntoView({ block: 'nearest' });
  }
  // a split file's tensor is read from its part
  const file = current.files[tensor.file ?? 0];
  document.dispatchEvent(new CustomEvent('leapconv:opened-tensor', { detail: { file, name, tensor, info: current.info, reveal } }));
}

// Draws the opened file into "3. The file" (files: the file, or every part of a split GGUF, in
// the core's part order). sourceBytes: the loaded checkpoint's, for the ratio.
export function showOpened(files, info, sourceBytes) {
  const file = files[0];
  current = { file, files, info };
  const r = info.read;
  const undecodable = info.tensors.filter((t) => !t.decodable);
  const parts = info.parts ? ` (a split file: ${info.parts.length} parts, ${info.parts[0]} … ${info.parts.at(-1)})` : '';
  $('result-text').textContent = `${file.name}${parts}: ${info.format}, ${info.tensors.length} tensors, ` +
    `${formatBytes(r.size)} (${r.size.toLocaleString('en')} bytes). Opened from its header: ${formatBytes(r.bytes)} read ` +
    `(${r.bytes.toLocaleString('en')} bytes in ${r.reads} slices) in ${r.seconds.toFixed(2)} s.` +
    (undecodable.length ? ` ${undecodable.length} tensor${undecodable.length === 1 ? ' is' : 's are'} of types this page cannot decode (${[...new Set(undecodable.map((t) => t.dtype))].join(', ')}): ` +
      'listed and counted, not read.' : '');
  $('result').dataset.file = file.name;
  $('result').dataset.opened = info.format;
  $('opened-facts').replaceChildren(factsTable(info));
  $('opened-tensors').replaceChildren(tensorTable(info));
  $('opened-tensors-summary').textContent = `Every tensor (${info.tensors.length}): type, shape, offset, bytes`;
  $('opened-metadata').hidden = !info.metadata;
  $('opened-metadata').textContent = info.metadata || '';
  $('opened').hidden = false;
  $('run').hidden = true;
  $('download').hidden = true;
  renderBreakdown($('chart'), $('breakdown'), sourceBytes ? { ...info.breakdown, source_bytes: sourceBytes } : info.breakdown);
  $('verify').textContent = 'Verify against the checkpoint';
  $('result').hidden = false;
  $('skip-result').hidden = false;
}

// The result is about to describe something else (a written file, nothing).
export function hideOpened() {
  $('opened').hidden = true;
  $('opened-facts').replaceChildren();
  $('opened-tensors').replaceChildren();
  delete $('result').dataset.opened;
  $('verify').textContent = 'Verify the written file';
}

export function clearOpened() {
  current = null;
  hideOpened();
}

export const opened = () => current;
