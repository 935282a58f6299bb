// "Look inside a block": one block of any quant type the core lays open — its stored bytes,
// each field in its own colour, the integers they hold, the scale arithmetic, the dequantized
// values and (with a source) the errors. Every number and every bit position comes from the
// core's description (Converter.groupView with view "block"); this module draws whatever it is
// given and handles the selection and the keys. It names no type.
import { num, hex2, el } from './dom.js';

const $ = (id) => document.getElementById(id);
const bin = (v, w) => v.toString(2).padStart(w, '0');
const PER_LINE = 16;  // bytes a line

// Presentation mode, shared by the teaching views: the one section alone in large type
// (body.presenting, style.css), the button says how to end it, Escape ends it. before() runs
// while the old mode still holds (what is in view), after(on, kept) redraws for the new one.
export function presentation({ section, button, view, before = () => null, after }) {
  const set = (on) => {
    const kept = before();
    document.body.classList.toggle('presenting', on);
    section.classList.toggle('presented', on);
    button.setAttribute('aria-pressed', String(on));
    button.textContent = on ? 'End presentation (Esc)' : 'Present';
    after(on, kept);
    (on ? view : button).focus();  // after: the keys go on from the button, in the page's flow
  };
  button.onclick = () => set(!section.classList.contains('presented'));
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && section.classList.contains('presented')) set(false);
  });
  return { on: () => section.classList.contains('presented') };
}

// A teaching view's loading, shared by both: the latest request wins (the answer to an older one
// is dropped), view.dataset.state says loading / ready, and a failure goes to status(message).
// fetch() asks the core; show(v) keeps and draws its answer.
export function latestLoader({ cur, view, fetch, show, status }) {
  return async (patch = {}) => {
    Object.assign(cur, patch);
    const seq = ++cur.seq;
    view.dataset.state = 'loading';
    try {
      const v = await fetch();
      if (seq !== cur.seq) return;
      status('');
      show(v);
      view.dataset.state = 'ready';
    } catch (e) {
      if (seq === cur.seq) status(e.message);
    }
  };
}

// Weights drawn at once (a block of 256 is shown a page at a time), and a line of the grid; fewer
// when presenting, so that a page in large type and its arithmetic share a projector's 1024×768.
const presenting = () => $('blocks').classList.contains('presented');
const pageSize = () => (presenting() ? 8 : 32);
const perLine = () => (presenting() ? 4 : 16);
const width = (slices) => slices.reduce((a, s) => a + s.width, 0);
const bitRange = (s) => (s.width === 1 ? `bit ${s.shift}` : `bits ${s.shift}–${s.shift + s.width - 1}`);
// the bytes of the block's scale fields (d, dmin: an f16 is 2 bytes, an E8M0 exponent 1)
const scaleBytes = (v) => v.scale_fields.flatMap((h) => Array.from({ length: h.bytes }, (_, k) => h.offset + k));

export function createBlockView(call) {
  const view = $('bv-view');
  const cur = { source: 'example', type: '', tensor: '', row: 0, block: 0, page: 0, rows: 1, blocks: 1, seq: 0,
                data: null, sel: null, types: [], model: null, output: null, opened: null, converting: false };
  const sourceSel = $('bv-source'), typeSel = $('bv-type'), tensorSel = $('bv-tensor'), rowIn = $('bv-row'), blockIn = $('bv-block');

  // ---- selection: a byte lights the weights it holds (and those it scales), a weight its bytes ----
  function holders(v) {  // byte -> [{what, elem | sub, slice}]
    const by = v.bytes.map(() => []);
    // (a codebook block: the bits of a grid index stand for its 8 or 4 weights at once)
    if (v.codebook) for (const g of v.sub_blocks) v.elements[g.first].bits.forEach((s) => by[s.byte].push({ elems: Array.from({ length: g.size }, (_, j) => g.first + j),
      slice: s, what: `grid index ${g.index} (weights ${g.first}–${g.first + g.size - 1})` }));
    else v.elements.forEach((e, i) => e.bits.forEach((s) => by[s.byte].push({ elem: i, slice: s, what: `element ${i}'s q` })));
    for (const s of v.sub_blocks) {
      for (const [key, name] of [['sc_bits', v.codebook ? 'signs or scale' : 'sc'], ['m_bits', 'm']])
        for (const b of s[key] || []) by[b.byte].push({ sub: s.index, slice: b, what: `${name} of ${v.codebook ? 'grid index' : 'sub-block'} ${s.index}` });
    }
    for (const h of v.scale_fields) for (let k = 0; k < h.bytes; k++) by[h.offset + k].push({ all: true, bytes: h.bytes, slice: { shift: 0, width: 8 }, what: `${h.format} ${h.name}` });
    return by;
  }
  const subOf = (v, i) => v.sub_blocks.find((s) => s.index === v.elements[i].sub);
  function bytesOfElement(v, i) {  // [its q bytes], [the bytes that scale it]
    const s = subOf(v, i);
    const scaling = [...(s ? [...(s.sc_bits || []), ...(s.m_bits || [])].map((b) => b.byte) : []),
      ...scaleBytes(v)];
    return [v.elements[i].bits.map((b) => b.byte), scaling];
  }

  function select(sel, focus = false) {
    cur.sel = sel;
    view.querySelectorAll('[data-hl], [data-sel], [data-scales]').forEach((e) => {
      delete e.dataset.hl; delete e.dataset.sel; delete e.dataset.scales;
    });
    view.querySelectorAll('[aria-pressed="true"]').forEach((e) => { if (e.id !== 'bv-present') e.setAttribute('aria-pressed', 'false'); });
    const v = cur.data;
    if (!v || !sel) { $('bv-explain').textContent = 'Select a byte to see the weights it holds, or a weight to see its bytes.'; return; }
    const byteEl = (k) => view.querySelector(`.bv-byte[data-byte="${k}"]`);
    const elems = (i) => view.querySelectorAll(`[data-elem="${i}"]`);
    const mark = (e, k) => { if (e) e.dataset[k] = '1'; };
    if (sel.kind === 'byte') {
      const b = byteEl(sel.index);
      mark(b, 'sel');
      b.setAttribute('aria-pressed', 'true');
      for (const h of holders(v)[sel.index]) {
        if (h.elem !== undefined) elems(h.elem).forEach((e) => mark(e, 'hl'));
        else if (h.elems) h.elems.forEach((i) => elems(i).forEach((e) => mark(e, 'hl')));
        else v.elements.forEach((e, i) => { if (h.all || e.sub === h.sub) elems(i).forEach((x) => mark(x, 'scales')); });
      }
      if (focus) b.focus();
    } else {
      const [own, scaling] = bytesOfElement(v, sel.index);
      elems(sel.index).forEach((e) => mark(e, 'sel'));
      const button = view.querySelector(`.bv-idx[data-elem="${sel.index}"]`);
      if (button) button.setAttribute('aria-pressed', 'true');
      own.forEach((k) => mark(byteEl(k), 'hl'));
      scaling.forEach((k) => mark(byteEl(k), 'scales'));
      if (focus && button) button.focus();
    }
    explain();
  }

  function explain() {
    const v = cur.data, sel = cur.sel;
    const field = (k) => v.fields.find((f) => k >= f.offset && k < f.offset + f.bytes);
    if (sel.kind === 'byte') {
      const k = sel.index, b = v.bytes[k], f = field(k);
      const parts = holders(v)[k].filter((h) => !h.all).map((h) => `${bitRange(h.slice)} → ${h.what}`);
      const whole = holders(v)[k].find((h) => h.all);
      $('bv-explain').textContent = `Byte ${k} (${f.name}, ${f.role}) = 0x${hex2(b)} = ${bin(b, 8)}: ` +
        (whole ? `${whole.bytes === 2 ? 'half of ' : whole.bytes > 2 ? 'part of ' : ''}${whole.what} (all ${v.values} weights).` : parts.join('; ') + '.');
      return;
    }
    const i = sel.index, e = v.elements[i], s = subOf(v, i);
    const bits = e.bits.map((x) => `byte ${x.byte} ${bitRange(x)} (${field(x.byte).name})`).join(' + ');
    const stored = bin(e.raw, width(e.bits));
    let t = `Element ${i} (column ${v.first_col + i}): ${bits} = ${stored} → ` +
      (v.codebook ? `grid index ${e.raw}, its coordinate with its sign q = ${e.q}. ` : v.q_table ? `entry ${e.raw} of the level table: q = ${e.q}. ` : `q = ${e.q}. `);
    if (s) t += `${s.scale_text}${s.min_text ? '; ' + s.min_text : ''}. `;
    t += `${v.formula}: ${e.text}`;
    if (v.source_values) t += `; source w = ${num(v.source_values[i], 5)}, |error| = ${num(v.errors[i], 3)}`;
    $('bv-explain').textContent = t + '.';
  }

  view.addEventListener('click', (e) => {
    const t = e.target.closest('[data-byte], [data-elem]');
    if (!t || !cur.data) return;
    if (t.dataset.byte !== undefined) select({ kind: 'byte', index: Number(t.dataset.byte) }, true);
    else select({ kind: 'elem', index: Number(t.dataset.elem) }, true);
  });

  // ---- keys: ←/→ pages and blocks (or bytes and weights when one has focus), ↑/↓ rows,
  // PgUp/PgDn blocks, Home/End the row's first and last block ----
  view.addEventListener('keydown', (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || !cur.data) return;
    const t = e.target;
    if (t.matches && t.matches('.bv-byte, .bv-idx') && ['ArrowLeft', 'ArrowRight', 'Home', 'End'].includes(e.key)) {
      const isByte = t.classList.contains('bv-byte');
      const ids = [...view.querySelectorAll(isByte ? (presenting() ? '.bv-byte:not(.off)' : '.bv-byte') : '.bv-idx')].map((x) => Number(isByte ? x.dataset.byte : x.dataset.elem));
      const at = ids.indexOf(Number(isByte ? t.dataset.byte : t.dataset.elem));
      const to = e.key === 'Home' ? 0 : e.key === 'End' ? ids.length - 1 : Math.max(0, Math.min(ids.length - 1, at + (e.key === 'ArrowLeft' ? -1 : 1)));
      select({ kind: isByte ? 'byte' : 'elem', index: ids[to] }, true);
      e.preventDefault();
      return;
    }
    const pages = Math.ceil(cur.data.values / pageSize());
    const keys = {
      ArrowLeft: () => (cur.page > 0 ? show(cur.row, cur.block, cur.page - 1) : step(-1, true)),
      ArrowRight: () => (cur.page < pages - 1 ? show(cur.row, cur.block, cur.page + 1) : step(1, false)),
      ArrowUp: () => go(cur.row - 1, cur.block), ArrowDown: () => go(cur.row + 1, cur.block),
      PageUp: () => step(-1, false), PageDown: () => step(1, false),
      Home: () => go(cur.row, 0), End: () => go(cur.row, cur.blocks - 1),
    };
    if (!keys[e.key]) return;
    keys[e.key]();
    e.preventDefault();
  });
  // The previous / next block, running on into the next row and back into the previous one.
  function step(d, lastPage) {
    let row = cur.row, block = cur.block + d;
    if (block < 0) { if (row === 0) return; row--; block = cur.blocks - 1; }
    if (block >= cur.blocks) { if (row === cur.rows - 1) return; row++; block = 0; }
    go(row, block, lastPage ? Math.ceil(cur.data.values / pageSize()) - 1 : 0);
  }
  $('bv-prev').onclick = () => step(-1, false);
  $('bv-next').onclick = () => step(1, false);
  $('bv-up').onclick = () => go(cur.row - 1, cur.block);
  $('bv-down').onclick = () => go(cur.row + 1, cur.block);
  function go(row, block, page = 0) {
    row = Math.max(0, Math.min(cur.rows - 1, row));
    block = Math.max(0, Math.min(cur.blocks - 1, block));
    // unchanged (a field's change event on blur, ↑ on the first row): no redraw under the pointer
    if (row === cur.row && block === cur.block && cur.data) return page === cur.page ? undefined : show(row, block, page);
    load({ row, block, page });
  }
  function show(row, block, page) {  // another page of the block in hand
    cur.page = page;
    render(cur.data);
  }

  // ---- controls ----
  sourceSel.onchange = () => setSource(sourceSel.value);
  typeSel.onchange = () => load({ type: typeSel.value, row: 0, block: 0, page: 0 });
  tensorSel.onchange = () => setSource(cur.source, { tensor: tensorSel.value });  // a file's tensor brings its type
  rowIn.onchange = () => go((Number(rowIn.value) || 1) - 1, cur.block);
  blockIn.onchange = () => go(cur.row, (Number(blockIn.value) || 1) - 1);
  presentation({
    section: $('blocks'), button: $('bv-present'), view,
    before: () => cur.page * pageSize(),  // the same weights stay in view
    after: (on, first) => {
      cur.page = Math.floor(first / pageSize());
      if (cur.data) render(cur.data);
    },
  });

  const typeNames = () => new Set(cur.types.map((t) => t.name));
  const fileTensors = () => (cur.output ? cur.output.tensors.filter((t) => typeNames().has(t.dtype)) : []);
  const matrices = () => (cur.model ? cur.model.tensors.filter((t) => t.shape.length === 2) : []);
  function fill(sel, items, value) {
    sel.replaceChildren(...items.map(([v, text]) => el('option', { value: v, textContent: text })));
    if (items.length && !items.some(([v]) => v === value)) value = items[0][0];
    sel.value = value;
    return value;
  }
  function fillControls() {
    const src = cur.source;
    const tensors = src === 'checkpoint' ? matrices().map((t) => [t.name, `${t.name} [${t.shape.join(', ')}] ${t.dtype}`])
      : src === 'file' ? fileTensors().map((t) => [t.name, `${t.name} [${t.shape.join(', ')}] ${t.dtype}`])
      : src === 'opened' ? [[cur.opened.tensor.name, `${cur.opened.tensor.name} [${cur.opened.tensor.shape.join(', ')}] ${cur.opened.tensor.dtype}`]]
      : [['', 'built-in example [2, 512]']];
    cur.tensor = fill(tensorSel, tensors, cur.tensor);
    tensorSel.disabled = tensors.length < 2;
    const fixed = src === 'file' ? (fileTensors().find((t) => t.name === cur.tensor) || {}).dtype
      : src === 'opened' ? cur.opened.tensor.dtype : null;
    cur.type = fill(typeSel, fixed ? [[fixed, fixed]] : cur.types.map((t) => [t.name, t.label]), fixed || cur.type);
    typeSel.disabled = !!fixed;
    const opt = (v) => sourceSel.querySelector(`option[value="${v}"]`);
    opt('checkpoint').disabled = !matrices().length;
    opt('file').disabled = cur.converting || !fileTensors().length;
    opt('file').textContent = cur.output && fileTensors().length ? `Written file: ${cur.output.name || 'the file just written'} (bytes read back)` : 'Written file (convert first)';
    opt('opened').disabled = !cur.opened;
    opt('opened').hidden = !cur.opened;
    if (cur.opened) opt('opened').textContent = `Opened file: ${cur.opened.label || cur.opened.tensor.name}`;
    sourceSel.value = src;
  }
  function setSource(source, patch = {}) {
    cur.source = source;
    Object.assign(cur, { row: 0, block: 0, page: 0 }, patch);
    fillControls();
    load();
  }

  // A refusal replaces the view: the header names the tensor asked for, and no grid of the
  // previous one stays under it.
  function status(msg) {
    $('bv-status').textContent = msg;
    $('bv-status').hidden = !msg;
    view.querySelector('.bv-body').hidden = !!msg;
    if (msg) {
      view.dataset.state = 'error';
      $('bv-where').textContent = cur.source === 'opened' ? `${cur.opened.tensor.dtype} · ${cur.opened.tensor.name}` : '';
    }
  }

  // ---- loading: the core describes the block; an opened file's bytes are read here ----
  function entry() {
    if (cur.source === 'file') return cur.output.tensors.find((t) => t.name === cur.tensor);
    return cur.opened.tensor;
  }
  async function fetchView() {
    const base = { view: 'block', row: cur.row, block: cur.block };
    if (cur.source === 'example') return call('groupView', { request: { ...base, source: 'example', type: cur.type } });
    if (cur.source === 'checkpoint') return call('groupView', { request: { ...base, source: 'checkpoint', type: cur.type, tensor: cur.tensor } });
    if (cur.source === 'file') return call('groupView', { request: { ...base, source: 'file', tensor: entry() } });
    // an opened file: ask where the block is, read those bytes, hand them to the core
    const tensor = entry();
    const { pieces } = await call('groupView', { request: { ...base, op: 'pieces', tensor } });
    const bytes = [];
    for (const p of pieces) bytes.push(...await cur.opened.readAt(p.offset, p.size));
    return call('groupView', { request: { ...base, source: 'bytes', tensor, bytes } });
  }
  const load = latestLoader({ cur, view, status, fetch: fetchView, show: (v) => {
    Object.assign(cur, { data: v, rows: v.rows, blocks: v.blocks });
    window.__leapconv.block = v;
    render(v);
  } });

  // ---- drawing ----
  function render(v) {
    // the grid is rebuilt: a byte or weight that had focus gets it back (or the view does)
    const had = view.contains(document.activeElement) && document.activeElement.dataset;
    const refocus = had && (had.byte !== undefined ? `.bv-byte[data-byte="${had.byte}"]` : had.elem !== undefined ? `.bv-idx[data-elem="${had.elem}"]` : null);
    const size = pageSize(), pages = Math.ceil(v.values / size);
    cur.page = Math.max(0, Math.min(pages - 1, cur.page));
    const first = cur.page * size, last = Math.min(v.values, first + size);
    Object.assign(view.dataset, { source: cur.source, type: v.type, tensor: v.tensor, row: v.row, block: v.block, page: cur.page });
    rowIn.max = v.rows;
    blockIn.max = v.blocks;
    if (document.activeElement !== rowIn) rowIn.value = v.row + 1;
    if (document.activeElement !== blockIn) blockIn.value = v.block + 1;
    $('bv-where').textContent = `${v.type} · ${v.tensor} · row ${v.row + 1} of ${v.rows}` +
      ('expert' in v ? ` (expert ${v.expert + 1} of ${v.experts}, its row ${v.expert_row + 1})` : '') + ` · block ${v.block + 1} of ${v.blocks}` +
      (pages > 1 ? ` · weights ${first}–${last - 1} of ${v.values}` : '') + ` (columns ${v.first_col + first}–${v.first_col + last - 1})`;
    // which bytes this page needs: its weights' bits, their sub-blocks' scales, the scale fields
    const on = new Set(scaleBytes(v));
    const subs = new Set();
    for (let i = first; i < last; i++) {
      v.elements[i].bits.forEach((b) => on.add(b.byte));
      subs.add(v.elements[i].sub);
    }
    const pageSubs = v.sub_blocks.filter((s) => subs.has(s.index));
    pageSubs.forEach((s) => [...(s.sc_bits || []), ...(s.m_bits || [])].forEach((b) => on.add(b.byte)));

    // the fields, each in its colour, with the scale fields' values
    const fieldOf = (k) => v.fields.findIndex((f) => k >= f.offset && k < f.offset + f.bytes);
    $('bv-fields').replaceChildren(...v.fields.map((f, n) => {
      const h = v.scale_fields.find((x) => x.offset === f.offset);
      return el('li', { className: `bv-f${n}` }, el('span', { className: 'bv-swatch' }), el('strong', { textContent: f.name }),
        ` ${f.role}, ${f.bytes > 1 ? `bytes ${f.offset}–${f.offset + f.bytes - 1}` : `byte ${f.offset}`}` + (h ? `: ${h.format} ${h.hex} = ${num(h.value, 5)}` : ''));
    }));
    Object.assign($('bv-fields').dataset, Object.fromEntries(v.scale_fields.map((h) => ['scale' + h.name, h.value])));
    // the bytes, 16 a line
    const bytes = $('bv-bytes');
    bytes.replaceChildren();
    const focusByte = cur.sel && cur.sel.kind === 'byte' ? cur.sel.index : [...on][0];
    v.bytes.forEach((b, k) => {
      const button = el('button', { type: 'button', className: `bv-byte bv-f${fieldOf(k)}${on.has(k) ? '' : ' off'}`, textContent: hex2(b),
        tabIndex: k === focusByte ? 0 : -1, title: `byte ${k} (${v.fields[fieldOf(k)].name}) = 0x${hex2(b)} = ${bin(b, 8)}` });
      Object.assign(button.dataset, { byte: k, value: b });
      button.setAttribute('aria-label', `${hex2(b)}: byte ${k}, ${v.fields[fieldOf(k)].name}`);
      button.setAttribute('aria-pressed', 'false');
      bytes.append(button);
      if (k % PER_LINE === PER_LINE - 1) bytes.append(el('br'));
    });
    // the weights of this page: index, stored bits, q, value, source, error
    const grid = $('bv-grid');
    grid.replaceChildren();
    const rows = [['idx', '#', 'weight index in the block'],
      ['bits', 'stored', v.codebook ? 'the bits of the grid index that gives it' : 'the bits stored for q'],
      ['q', 'q', v.codebook ? 'its coordinate of the grid point, signed' : 'the integer'],
      ['deq', 'value', `dequantized: ${v.formula}`]];
    if (v.source_values) rows.push(['w', 'w', 'source value'], ['err', '|error|', '|w − value|']);
    for (let line = first; line < last; line += perLine()) {
      const tb = grid.createTBody();
      for (const [kind, label, title] of rows) {
        const tr = tb.insertRow();
        tr.className = `bv-${kind}-row`;
        tr.append(el('th', { textContent: label, title, scope: 'row' }));
        for (let i = line; i < Math.min(last, line + perLine()); i++) {
          const td = tr.insertCell();
          const e = v.elements[i];
          td.className = kind === 'idx' ? 'bv-idx-cell' : `bv-${kind}`;
          td.dataset.elem = i;
          if (kind === 'idx') {
            const b = el('button', { type: 'button', className: 'bv-idx', textContent: String(i), tabIndex: i === first ? 0 : -1 });
            b.dataset.elem = i;
            b.setAttribute('aria-label', `weight ${i}`);
            b.setAttribute('aria-pressed', 'false');
            td.append(b);
            delete td.dataset.elem;
          } else if (kind === 'bits') {
            td.textContent = bin(e.raw, width(e.bits));
            td.dataset.value = e.raw;
          } else if (kind === 'q') {
            td.textContent = String(e.q);
            td.dataset.value = e.q;
          } else {
            const x = kind === 'deq' ? v.dequant[i] : kind === 'w' ? v.source_values[i] : v.errors[i];
            td.textContent = num(x);
            td.dataset.value = x;
            td.title = kind === 'deq' ? e.text : String(x);
          }
        }
      }
    }
    // beside the grid: the arithmetic
    $('bv-formula').textContent = `value = ${v.formula}` + (v.q_table ? `; q from the level table (${v.q_table.join(', ')})` : '');
    // (a codebook type's "sub-blocks" are its grid indices: the point each picks and its values)
    $('bv-subs').replaceChildren(...pageSubs.map((s) => {
      const li = el('li', { textContent: `${v.codebook ? 'grid index' : 'sub-block'} ${s.index}: ${s.scale_text}${s.min_text ? '; ' + s.min_text : ''}` });
      if (v.codebook) Object.assign(li.dataset, { group: s.index, gridIndex: s.grid_index, grid: s.grid.join(' '), values: s.values.join(' ') });
      return li;
    }));
    $('bv-subs').setAttribute('aria-label', v.codebook ? 'grid indices: the point each picks and the values it stands for' : 'sub-block scales');
    $('bv-subs').hidden = !pageSubs.length;
    $('bv-error').textContent = v.max_error !== undefined ? `Largest |error| in this block: ${num(v.max_error, 4)}.` : '';
    $('bv-pieces').textContent = v.pieces ? 'Read from the file at ' + v.pieces.map((p) => `bytes ${p.offset.toLocaleString('en')}–${(p.offset + p.size - 1).toLocaleString('en')}`).join(' and ') + '.' : '';
    if (v.pieces) view.dataset.pieces = JSON.stringify(v.pieces); else delete view.dataset.pieces;
    const keep = cur.sel && (cur.sel.kind === 'byte' ? cur.sel.index < v.bytes.length : cur.sel.index >= first && cur.sel.index < last);
    select(keep ? cur.sel : null);
    if (refocus) (view.querySelector(refocus) || view).focus();
  }

  call('groupView', { request: { view: 'block', op: 'types' } }).then((types) => {
    cur.types = types;
    cur.type = types[0].name;
    setSource('example');
  }).catch((e) => status(e.message));

  const api = {
    setModel(model) {
      cur.model = model;
      cur.output = null;
      if (cur.source === 'checkpoint' || cur.source === 'file') setSource(matrices().length ? 'checkpoint' : 'example');
      else fillControls();
    },
    setOutput(summary) {
      cur.output = summary;
      if (!summary && cur.source === 'file') setSource(matrices().length ? 'checkpoint' : 'example');
      else fillControls();
    },
    converting(on) {
      cur.converting = on;
      if (on && cur.source === 'file') setSource(matrices().length ? 'checkpoint' : 'example');
      else fillControls();
    },
    // The hook for an opened file: readAt(offset, size) -> bytes (Uint8Array or array), the
    // tensor {name, dtype, shape, offset (its data's first byte in the file)}, a label for people.
    showTensor({ readAt, tensor, label }) {
      cur.opened = { readAt, tensor, label };
      setSource('opened', { tensor: tensor.name });
    },
    show(source, patch = {}) { setSource(source, patch); },
  };
  window.__leapconv.blocks = api;  // the open-file module (and the tests) reach the hook here
  return api;
}
