// "Look inside 4-bit packing": one Q4 group of 64 laid open — source values, the f16 scale,
// the 4-bit integers, the packed bytes (low and high nibble apart), the dequantized values and
// their error — beside the row's Q8 per-channel view. Three sources: the built-in classroom
// example, the open checkpoint (quantized by the same C++ code the writer runs) and a written
// GGUF-lite file (its bytes read back). Every number comes from the C++ core
// (Converter.groupView); this module only draws them and handles the keys.
import { menuEntries, nibbleType } from './catalog.js';
import { createBlockView, presentation, latestLoader } from './block_view.js';
import { num, hex2, el } from './dom.js';

const $ = (id) => document.getElementById(id);
const PER_LINE = 16;
// The 4-bit type this view lays open and its block, from the core's quant-type table (set when
// the view is created, after the worker has sent the catalog).
let Q4 = '', G = 0, Q4_CHOICE = '';

const nib = (q) => (q & 15).toString(2).padStart(4, '0');

export function createNibbleView(call) {
  const t = nibbleType();
  ({ name: Q4, block: G } = t);
  const entry = menuEntries().find((m) => m.options && m.options.scheme === t.short);
  Q4_CHOICE = entry ? entry.label : t.label;  // the menu entry that writes it: "GGUF-lite, Q4 per group of 64"
  const view = $('nv-view');
  const cur = { source: 'example', tensor: '', row: 0, group: 0, page: 0, rows: 1, groups: 1, seq: 0, data: null,
                sel: null, model: null, output: null, converting: false };
  const cells = {};  // row kind -> array of 64 cells
  const bytes = [], idx = [];

  // ---- the grid skeleton: built once, filled per view (so focus survives navigation) ----
  const ROWS = [
    ['idx', '#', 'element index in the group (column = first column + index)'],
    ['w', 'w', 'source value'],
    ['ratio', 'w ÷ s', 'source value divided by the scale, before rounding'],
    ['q', 'q', '4-bit integer: round half to even, clamped to -8..7'],
    ['nib', 'nibble', 'the 4 bits stored (two\'s complement)'],
    ['deq', 'q × s', 'dequantized value: what a reader gets back'],
    ['err', '|error|', '|w − q × s|'],
  ];
  const grid = $('nv-grid');
  // Presenting, the group is shown a page at a time in lines of 4 (as the block view does), so
  // that the large type and the explanation beside it share a projector's 1024×768.
  let shown = null;  // set below: is the view presented
  const perLine = () => (shown && shown.on() ? 4 : PER_LINE);
  const pageSize = () => (shown && shown.on() ? 8 : G);
  function build() {  // the grid's lines for the mode; every cell of the group exists in both
    grid.replaceChildren();
    const n = perLine();
    for (let line = 0; line < G / n; line++) {
      const tb = grid.createTBody();
      tb.dataset.first = line * n;
      for (const [kind, label, title] of ROWS) {
        const tr = tb.insertRow();
        tr.className = 'nv-' + kind + '-row';
        tr.append(el('th', { textContent: label, title, scope: 'row' }));
        for (let c = 0; c < n; c++) {
          const i = line * n + c;
          const td = tr.insertCell();
          td.dataset.col = i;
          td.className = `nv-${kind} ${i % 2 ? 'odd' : 'even'}`;
          if (kind === 'idx') {
            const b = el('button', { type: 'button', className: 'nv-idx', textContent: String(i), tabIndex: i === 0 ? 0 : -1 });
            b.dataset.weight = i;
            b.setAttribute('aria-label', `weight ${i}`);
            td.append(b);
            idx[i] = b;
          } else {
            td.dataset.weight = i;
          }
          (cells[kind] ||= [])[i] = td;
        }
      }
      const tr = tb.insertRow();
      tr.className = 'nv-byte-row';
      tr.append(el('th', { textContent: 'byte', title: 'packed byte: high nibble = element 2k+1, low nibble = element 2k', scope: 'row' }));
      for (let c = 0; c < n / 2; c++) {
        const k = line * (n / 2) + c;
        const td = tr.insertCell();
        td.colSpan = 2;
        const b = el('button', { type: 'button', className: 'nv-byte', tabIndex: k === 0 ? 0 : -1 });
        b.dataset.byte = k;
        td.append(b);
        bytes[k] = b;
      }
    }
  }
  build();
  // The page in view: its lines shown, the others hidden; the roving Tab stops stay on it.
  function showPage() {
    const size = pageSize(), first = cur.page * size;
    const on = (i) => i >= first && i < first + size;
    for (const tb of grid.tBodies) tb.hidden = !on(Number(tb.dataset.first));
    view.dataset.page = cur.page;
    if (!idx.some((b, i) => b.tabIndex === 0 && on(i))) idx.forEach((b, i) => { b.tabIndex = i === first ? 0 : -1; });
    if (!bytes.some((b, k) => b.tabIndex === 0 && on(2 * k))) bytes.forEach((b, k) => { b.tabIndex = 2 * k === first ? 0 : -1; });
  }

  const q8grid = $('nv-q8-grid');
  const q8cells = [];
  for (let r = 0; r < 8; r++) {
    const tr = q8grid.insertRow();
    for (let c = 0; c < 8; c++) {
      const td = tr.insertCell();
      td.dataset.col = r * 8 + c;
      q8cells.push(td);
    }
  }

  // ---- selection: a byte and its two weights, or a weight and its byte ----
  function select(sel, focus = false) {
    cur.sel = sel;
    for (const b of bytes) { delete b.dataset.sel; delete b.dataset.hl; b.setAttribute('aria-pressed', 'false'); }
    for (const b of idx) { delete b.dataset.sel; delete b.dataset.hl; b.setAttribute('aria-pressed', 'false'); }
    grid.querySelectorAll('td.hl, td.sel').forEach((td) => td.classList.remove('hl', 'sel'));
    q8cells.forEach((td) => td.classList.remove('hl'));
    if (!sel) { $('nv-explain').textContent = 'Select a byte to see its two weights, or a weight to see its byte.'; return; }
    const k = sel.kind === 'byte' ? sel.index : sel.index >> 1;
    const weights = sel.kind === 'byte' ? [2 * k, 2 * k + 1] : [sel.index];
    if (Math.floor(weights[0] / pageSize()) !== cur.page) {  // a key moved it off the page: follow it
      cur.page = Math.floor(weights[0] / pageSize());
      drawWhere(cur.data);
      showPage();
    }
    const mark = (b, on) => { b.dataset[on] = '1'; if (on === 'sel') b.setAttribute('aria-pressed', 'true'); };
    if (sel.kind === 'byte') mark(bytes[k], 'sel'); else mark(bytes[k], 'hl');
    for (const i of weights) {
      mark(idx[i], sel.kind === 'byte' ? 'hl' : 'sel');
      for (const kind of Object.keys(cells)) cells[kind][i].classList.add(sel.kind === 'byte' ? 'hl' : 'sel');
      q8cells[i].classList.add('hl');
    }
    bytes.forEach((b, j) => { b.tabIndex = j === k ? 0 : -1; });
    idx.forEach((b, j) => { b.tabIndex = j === (sel.kind === 'byte' ? 2 * k : sel.index) ? 0 : -1; });
    if (focus) (sel.kind === 'byte' ? bytes[k] : idx[sel.index]).focus();
    explain();
  }

  function explain() {
    const v = cur.data, sel = cur.sel;
    if (!v || !v.q4 || !sel) return;
    const k = sel.kind === 'byte' ? sel.index : sel.index >> 1;
    const b = v.q4.packed[k], lo = 2 * k, hi = 2 * k + 1;
    const part = (i, which) => `${which} nibble ${(i % 2 ? b >> 4 : b & 15).toString(16).toUpperCase()} (${nib(v.q4.q[i])}) = q ${v.q4.q[i]}` +
      ` → weight ${i}${v.values ? ` (w ${num(v.values[i], 4)})` : ''}, q × s = ${num(v.q4.dequant[i], 4)}`;
    $('nv-explain').textContent = `Byte ${k} = 0x${hex2(b)}: ${part(hi, 'high')}; ${part(lo, 'low')}.`;
  }

  grid.addEventListener('click', (e) => {
    const t = e.target.closest('[data-byte], [data-col]');
    if (!t || !cur.data || !cur.data.q4) return;
    if (t.dataset.byte !== undefined) select({ kind: 'byte', index: Number(t.dataset.byte) }, true);
    else select({ kind: 'weight', index: Number(t.dataset.col) }, true);
  });

  // ---- keys: ←/→ move the focused byte or weight, else the group; ↑/↓ rows everywhere ----
  view.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const t = e.target;
    const inStrip = t.matches && t.matches('.nv-byte, .nv-idx');
    if (inStrip && (e.key === 'ArrowLeft' || e.key === 'ArrowRight' || e.key === 'Home' || e.key === 'End')) {
      const isByte = t.classList.contains('nv-byte');
      const n = isByte ? G / 2 : G, at = Number(isByte ? t.dataset.byte : t.dataset.weight);
      const to = e.key === 'Home' ? 0 : e.key === 'End' ? n - 1 : Math.max(0, Math.min(n - 1, at + (e.key === 'ArrowLeft' ? -1 : 1)));
      select({ kind: isByte ? 'byte' : 'weight', index: to }, true);
      e.preventDefault();
      return;
    }
    const pages = G / pageSize();
    const moves = pages > 1
      // presenting: ←/→ pages, running on into the next group and back into the previous one;
      // PgUp/PgDn groups and ↑/↓ rows, on the same columns (as in the block view)
      ? { ArrowLeft: () => (cur.page > 0 ? turn(cur.page - 1) : step(-1, pages - 1)),
          ArrowRight: () => (cur.page < pages - 1 ? turn(cur.page + 1) : step(1, 0)),
          ArrowUp: () => go(cur.row - 1, cur.group, cur.page), ArrowDown: () => go(cur.row + 1, cur.group, cur.page),
          PageUp: () => step(-1, cur.page), PageDown: () => step(1, cur.page) }
      : { ArrowLeft: () => move(0, -1), ArrowRight: () => move(0, 1), ArrowUp: () => move(-1, 0), ArrowDown: () => move(1, 0),
          PageUp: () => move(-10, 0), PageDown: () => move(10, 0) };
    if (e.key === 'Home' || e.key === 'End') go(cur.row, e.key === 'Home' ? 0 : cur.groups - 1);
    else if (moves[e.key]) moves[e.key]();
    else return;
    e.preventDefault();
  });
  $('nv-prev').onclick = () => move(0, -1);
  $('nv-next').onclick = () => move(0, 1);
  $('nv-up').onclick = () => move(-1, 0);
  $('nv-down').onclick = () => move(1, 0);

  // Groups run on into the next row and back into the previous one.
  function move(dr, dg) {
    let row = cur.row + dr, group = cur.group + dg;
    if (group < 0) { if (row > 0) { row--; group = cur.groups - 1; } else group = 0; }
    if (group >= cur.groups) { if (row < cur.rows - 1) { row++; group = 0; } else group = cur.groups - 1; }
    go(row, group);
  }
  // The previous / next group on the given page; none before the first or after the last.
  function step(d, page) {
    let row = cur.row, group = cur.group + d;
    if (group < 0) { if (row === 0) return; row--; group = cur.groups - 1; }
    if (group >= cur.groups) { if (row === cur.rows - 1) return; row++; group = 0; }
    go(row, group, page);
  }
  function turn(page) {  // another page of the group in hand
    cur.page = page;
    render(cur.data);
  }

  function go(row, group, page = 0) {
    row = Math.max(0, Math.min(cur.rows - 1, row));
    group = Math.max(0, Math.min(cur.groups - 1, group));
    rowIn.value = row + 1;  // what is shown next, clamped (render leaves an input being typed in alone)
    groupIn.value = group + 1;
    if (row === cur.row && group === cur.group && cur.data) return page === cur.page ? undefined : turn(page);
    load({ row, group, page });
  }

  // ---- controls ----
  const sourceSel = $('nv-source'), tensorSel = $('nv-tensor'), rowIn = $('nv-row'), groupIn = $('nv-group');
  sourceSel.onchange = () => setSource(sourceSel.value);
  tensorSel.onchange = () => load({ tensor: tensorSel.value, row: 0, group: 0, ...shapeOf(tensorSel.value) });
  // The inputs count from 1, as people do ("row 1 of 4"); the core and data-row count from 0.
  rowIn.onchange = () => go((Number(rowIn.value) || 1) - 1, cur.group);
  groupIn.onchange = () => go(cur.row, (Number(groupIn.value) || 1) - 1);
  $('nv-example').onclick = () => setSource('example');
  // Presentation mode: the view alone, in large type, a page of the group at a time (for a
  // projector); Escape or the button ends it. The helper is the block view's.
  shown = presentation({
    section: $('nibbles'), button: $('nv-present'), view,
    before: () => (cur.sel ? (cur.sel.kind === 'byte' ? 2 * cur.sel.index : cur.sel.index) : cur.page * pageSize()),
    after: (on, first) => {  // the same weights stay in view
      view.setAttribute('aria-label', on ? 'One group of 64 weights, 8 at a time; left and right arrows turn the pages, Page Up and Page Down move between groups'
        : 'One group of 64 weights; arrow keys move between groups and rows');
      build();
      cur.page = Math.floor(first / pageSize());
      if (cur.data) render(cur.data); else showPage();
    },
  });

  function shapeOf(name) {
    const t = cur.model && cur.model.tensors.find((x) => x.name === name);
    return t ? { rows: t.shape[0], groups: Math.ceil(t.shape[1] / G) } : {};
  }
  const matrices = () => (cur.model ? cur.model.tensors.filter((t) => t.shape.length === 2) : []);
  const fileDtype = (name) => {
    const t = cur.output && cur.output.tensors.find((x) => x.name === name);
    return t ? t.dtype : null;
  };

  function fillTensors() {
    tensorSel.replaceChildren();
    if (cur.source === 'example') {
      tensorSel.append(el('option', { value: '', textContent: 'classroom example [4, 128]' }));
      tensorSel.disabled = true;
      return;
    }
    tensorSel.disabled = false;
    for (const t of matrices()) {
      const o = el('option', { value: t.name, textContent: `${t.name} [${t.shape.join(', ')}] ${t.dtype}` });
      if (cur.source === 'file') {
        const d = fileDtype(t.name);
        if (d !== Q4) { o.disabled = true; o.textContent += ` — ${d || 'not'} in the file`; }
      }
      tensorSel.append(o);
    }
    const ok = [...tensorSel.options].filter((o) => !o.disabled).map((o) => o.value);
    if (!ok.includes(cur.tensor)) cur.tensor = ok[0] || '';
    tensorSel.value = cur.tensor;
  }

  function setSource(source, extra = {}) {
    const before = cur.data && cur.data.source !== 'example' ? cur.data.tensor : null;
    cur.source = source;
    sourceSel.value = source;
    if (extra.tensor) cur.tensor = extra.tensor;
    fillTensors();
    if (source === 'example') return load({ tensor: '', row: extra.row ?? 0, group: extra.group ?? 0 });
    if (!cur.tensor) {
      status(source === 'file' ? `The written file has no ${Q4} tensor.` : 'This checkpoint has no 2-D tensor.');
      return;
    }
    const same = before === cur.tensor;  // same tensor, other source: stay on the same group
    load({ ...shapeOf(cur.tensor), row: extra.row ?? (same ? cur.row : 0), group: extra.group ?? (same ? cur.group : 0) });
  }

  function updateSources() {
    const opt = (v) => sourceSel.querySelector(`option[value="${v}"]`);
    opt('checkpoint').disabled = !cur.model || matrices().length === 0;
    const hasQ4 = !!cur.output && !cur.converting && cur.output.tensors.some((t) => t.dtype === Q4);
    opt('file').disabled = !hasQ4;
    opt('file').textContent = cur.output && hasQ4 ? `Written file: ${cur.output.name} (bytes read back)` : `Written file (convert to ${Q4_CHOICE} first)`;
  }

  function status(msg) {
    $('nv-status').textContent = msg;
    $('nv-status').hidden = !msg;
    if (msg) view.dataset.state = 'error';
  }

  // ---- loading and drawing ----
  const load = latestLoader({
    cur, view, status,
    fetch: () => call('groupView', { request: { source: cur.source, tensor: cur.tensor, row: cur.row, group: cur.group } }),
    show: (v) => {
      Object.assign(cur, { data: v, rows: v.rows, groups: v.groups });
      window.__leapconv.nibbles = v;
      render(v);
    },
  });

  function render(v) {
    Object.assign(view.dataset, { source: v.source, tensor: v.tensor, row: v.row, group: v.group });
    rowIn.max = v.rows;
    groupIn.max = v.groups;
    // A view that arrives while the user types a row or group leaves that field alone: its
    // change event asks for what was typed.
    if (document.activeElement !== rowIn) rowIn.value = v.row + 1;
    if (document.activeElement !== groupIn) groupIn.value = v.group + 1;
    drawWhere(v);
    $('nv-caption').textContent = v.caption || v.note || '';
    $('nv-caption').hidden = !(v.caption || v.note);
    const q4 = v.q4;
    $('nv-q4').hidden = !q4;
    if (q4) renderQ4(v, q4);
    renderQ8(v, v.q8);
    // a selection off the page in view (another page turned to) is let go
    const size = pageSize(), first = cur.page * size;
    const w0 = cur.sel && (cur.sel.kind === 'byte' ? 2 * cur.sel.index : cur.sel.index);
    select(cur.sel && w0 >= first && w0 < first + size ? cur.sel : null);
    showPage();
  }

  function drawWhere(v) {
    const size = pageSize(), pages = G / size;
    cur.page = Math.max(0, Math.min(pages - 1, cur.page));
    const first = cur.page * size;
    const from = v.first_col + first, last = Math.min(v.cols, v.first_col + first + size) - 1;
    $('nv-where').textContent = `${v.tensor} [${v.shape.join(', ')}]${v.source_dtype ? ' ' + v.source_dtype : ''} · ` +
      `row ${v.row + 1} of ${v.rows} · group ${v.group + 1} of ${v.groups}` +
      (pages > 1 ? ` · weights ${first}–${first + size - 1} of ${G}` : '') + ` (columns ${from}–${last}, counted from 0)`;
  }

  function renderQ4(v, q4) {
    const bits = q4.scale_bits.toString(2).padStart(16, '0');
    const sh = $('nv-scale-hex'), sd = $('nv-scale');
    sh.textContent = q4.scale_hex;
    sd.textContent = String(q4.scale);
    sd.dataset.value = q4.scale;
    $('nv-scale-bits').textContent = `${bits[0]} ${bits.slice(1, 6)} ${bits.slice(6)}`;
    $('nv-scale-from').textContent = q4.amax !== undefined
      ? `max|w| = ${num(q4.amax, 4)}, ÷ 7 = ${num(q4.amax_over_7, 6)}, rounded to f16:`
      : 'scale as stored:';
    $('nv-scale-note').textContent = (q4.scale_subnormal ? 'A subnormal f16. ' : '') + (q4.scale === 0 ? 'A zero scale: every q is 0. ' : '') +
      (q4.max_error !== undefined ? `Largest |error| in this group: ${num(q4.max_error, 4)}.` : '') +
      (q4.clamped && q4.clamped.length ? ` Clamped to -8..7: element${q4.clamped.length > 1 ? 's' : ''} ${q4.clamped.join(', ')}.` : '');
    $('nv-file').hidden = !v.offsets;
    if (v.offsets) {
      $('nv-file').textContent = `Read from the file: scale at byte ${v.offsets.scale.toLocaleString('en')}, ` +
        `packed bytes ${v.offsets.packed.toLocaleString('en')}–${(v.offsets.packed + 31).toLocaleString('en')} ` +
        `(the tensor's scales start at ${v.offsets.tensor.toLocaleString('en')}).`;
      Object.assign($('nv-file').dataset, { scaleOffset: v.offsets.scale, packedOffset: v.offsets.packed });
    }
    const clamped = new Set(q4.clamped || []);
    for (let i = 0; i < G; i++) {
      const w = v.values ? v.values[i] : null, q = q4.q[i], deq = q4.dequant[i];
      const err = q4.error ? q4.error[i] : null;
      const set = (kind, text, value, title) => {
        const td = cells[kind][i];
        td.textContent = text;
        if (value === undefined || value === null) delete td.dataset.value; else td.dataset.value = value;
        td.title = title || '';
      };
      set('w', num(w), w, w === null ? '' : `w = ${w}`);
      set('ratio', w === null || q4.scale === 0 ? '–' : (w / q4.scale).toFixed(2), null,
        clamped.has(i) ? 'outside -8..7: clamped' : '');
      cells.ratio[i].classList.toggle('clamped', clamped.has(i));
      set('q', String(q), q);
      set('nib', nib(q), q & 15, `nibble 0x${(q & 15).toString(16).toUpperCase()} = ${q}`);
      set('deq', num(deq), deq, `q × s = ${deq}`);
      set('err', num(err), err, err === null ? '' : `|error| = ${err}`);
    }
    for (let k = 0; k < G / 2; k++) {
      const b = q4.packed[k];
      bytes[k].replaceChildren(el('span', { className: 'hi', textContent: hex2(b)[0] }), el('span', { className: 'lo', textContent: hex2(b)[1] }));
      bytes[k].dataset.value = b;
      bytes[k].title = `byte ${k} = 0x${hex2(b)}: high nibble → weight ${2 * k + 1}, low nibble → weight ${2 * k}`;
      bytes[k].setAttribute('aria-label', `${hex2(b)}: byte ${k}`);  // the name starts with what it shows
    }
  }

  function renderQ8(v, q8) {
    $('nv-q8').hidden = !q8;
    if (!q8) return;
    $('nv-q8-scale').textContent = `${q8.scale_hex} = ${num(q8.scale, 6)}`;
    $('nv-q8-scale').title = String(q8.scale);
    $('nv-q8-scale').dataset.value = q8.scale;
    $('nv-q8-from').textContent = `One scale for all ${v.cols} columns of row ${v.row}: max|row| = ${num(q8.amax, 4)} ` +
      `(column ${q8.amax_col}), ÷ 127 = ${num(q8.amax_over_127, 6)}, rounded to f16:`;
    for (let i = 0; i < G; i++) {
      const td = q8cells[i];
      if (i < q8.q.length) {
        td.textContent = String(q8.q[i]);
        td.dataset.value = q8.q[i];
        td.title = `column ${q8.first_col + i}: q ${q8.q[i]}, q × s = ${q8.dequant[i]}, |error| = ${q8.error[i]}`;
      } else {
        td.textContent = '';
        td.title = '';
      }
    }
    const q4err = v.q4 && v.q4.max_error !== undefined ? `, Q4 ${num(v.q4.max_error, 3)}` : '';
    const rb = v.row_bytes;
    // the errors apart from the bytes: presenting shows them beside the grid, and only them
    $('nv-q8-errors').textContent = `Largest |error| on this group's columns: Q8 ${num(q8.max_error_window, 3)}${q4err}; ` +
      `on the whole row, Q8 ${num(q8.max_error_row, 3)}.`;
    $('nv-q8-bytes').textContent = ` Bytes for this row: F32 ${rb.f32}, F16 ${rb.f16}, ` +
      `Q8 ${rb.q8} (2 scale + ${v.cols})` + (rb.q4 !== undefined ? `, Q4 ${rb.q4} (${v.groups} × 2 scale + ${v.cols / 2}).` : '.');
  }

  updateSources();
  setSource('example');
  // the block view of every type follows the same model, output and conversion
  const blocks = createBlockView(call);

  return {
    blocks,
    // A checkpoint was opened (or closed): offer its 2-D tensors, and show the first one.
    setModel(model) {
      blocks.setModel(model);
      cur.model = model;
      cur.output = null;
      cur.tensor = '';
      updateSources();
      if (model && matrices().length) setSource('checkpoint');
      else if (cur.source !== 'example') setSource('example');
    },
    // A conversion finished (summary with the output's tensors), or one is starting (null).
    setOutput(summary) {
      blocks.setOutput(summary);
      cur.output = summary && summary.tensors.some((t) => t.dtype === Q4) ? summary : null;
      updateSources();
      if (!cur.output && cur.source === 'file') setSource(cur.model ? 'checkpoint' : 'example');
    },
    converting(on) {
      blocks.converting(on);
      cur.converting = on;
      updateSources();
      if (on && cur.source === 'file') setSource('checkpoint');
    },
    show(source, tensor, row, group) { setSource(source, { tensor, row, group }); },
  };
}
