// "Schemes per tensor": a GGUF-lite encoding for every tensor. The user's choices are rules —
// exact tensor names first (a glob without wildcards matches just that name), then a preset's
// or the user's own patterns, then the default — in exactly the --schemes format the CLI takes,
// so a choice made here is reproduced on the command line byte for byte. The C++ core matches
// the rules, applies SPEC's fallbacks and sizes every tensor (Converter.plan); this module holds
// the choices and draws the table, the prediction and the breakdown.
import { renderBreakdown, formatBytes } from './chart.js';
import { catalog, menuEntries, schemeNames, shortOf } from './catalog.js';

const $ = (id) => document.getElementById(id);

const MIXED_RULES = [
  { pattern: '*mlp*', scheme: 'q4' }, { pattern: '*attn*', scheme: 'q8' },
  { pattern: '*embed*', scheme: 'f32' }, { pattern: '*wte*', scheme: 'f32' }, { pattern: '*wpe*', scheme: 'f32' },
  { pattern: '*norm*', scheme: 'f32' }, { pattern: '*ln_*', scheme: 'f32' },
];
export const PRESETS = {
  none: { label: 'none: the default for every tensor of 2+ dims', rules: [] },
  mixed: { label: 'Q4 MLP + Q8 attention + F32 norms and embeddings', rules: MIXED_RULES },
  'q4-mlp': { label: 'Q4 MLP only', rules: [{ pattern: '*mlp*', scheme: 'q4' }] },
  'f16-ends': { label: 'F16 embeddings and output', rules: [
    { pattern: '*embed*', scheme: 'f16' }, { pattern: '*wte*', scheme: 'f16' }, { pattern: 'lm_head*', scheme: 'f16' }] },
};
// The format that takes scheme rules (GGUF-lite), from the core's table.
const ruleFormat = () => catalog.formats.find((f) => f.scheme_rules);
// The editor state a format menu entry stands for: the core's per-type entries, and the page's
// own mixed preset; null for entries of other formats.
export function formatPreset(value) {
  if (value === 'gguf-mixed') return { scheme: 'q8', preset: 'mixed' };
  const m = menuEntries().find((e) => e.value === value && e.format.scheme_rules);
  return m ? { scheme: m.options.scheme, preset: 'none' } : null;
}

function el(tag, props = {}, ...kids) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
}
function schemeSelect(value, withAuto, label) {
  const s = el('select');
  if (withAuto) s.append(el('option', { value: '', textContent: 'auto' }));
  for (const v of schemeNames()) s.append(el('option', { value: v, textContent: v.toUpperCase() }));
  s.value = value;
  if (label) s.setAttribute('aria-label', label);
  return s;
}

export function createSchemeEditor({ onChange }) {
  const st = { scheme: 'q8', preset: 'none', rules: [], overrides: new Map(), model: null, label: 'model', plan: null };
  const rows = new Map();  // tensor name -> { tr, select, cells }
  const changed = () => { renderExport(); onChange(); };

  // ---- default scheme and rule preset ----
  const def = $('scheme-default'), preset = $('scheme-preset');
  for (const v of schemeNames()) def.append(el('option', { value: v, textContent: v.toUpperCase() }));
  for (const [k, p] of Object.entries(PRESETS)) preset.append(el('option', { value: k, textContent: p.label }));
  preset.append(el('option', { value: 'custom', textContent: 'your own rules (edited below)', disabled: true }));
  def.onchange = () => { st.scheme = def.value; changed(); };
  preset.onchange = () => { applyPreset(preset.value); changed(); };
  $('scheme-add-rule').onclick = () => {
    st.rules.push({ pattern: '*', scheme: st.scheme });
    markCustom();
    renderRules();
    const inputs = $('scheme-rules').querySelectorAll('input');
    inputs[inputs.length - 1].select();
    changed();
  };
  $('scheme-clear').onclick = () => {
    st.overrides.clear();
    for (const r of rows.values()) r.select.value = '';
    changed();
  };
  $('scheme-filter').oninput = () => {
    const f = $('scheme-filter').value.trim().toLowerCase();
    for (const [name, r] of rows) r.tr.hidden = !!f && !name.toLowerCase().includes(f);
  };

  function applyPreset(k) {
    st.preset = k;
    st.rules = PRESETS[k].rules.map((r) => ({ ...r }));
    preset.value = k;
    preset.querySelector('option[value="custom"]').disabled = true;
    renderRules();
  }
  function markCustom() {
    st.preset = 'custom';
    const o = preset.querySelector('option[value="custom"]');
    o.disabled = false;
    preset.value = 'custom';
  }

  function renderRules() {
    const box = $('scheme-rules');
    box.replaceChildren();
    st.rules.forEach((r, i) => {
      const input = el('input', { type: 'text', value: r.pattern, className: 'rule-pattern', spellcheck: false });
      input.setAttribute('aria-label', `rule ${i + 1} pattern`);
      input.oninput = () => { r.pattern = input.value; markCustom(); changed(); };
      const sel = schemeSelect(r.scheme, false, `rule ${i + 1} scheme`);
      sel.className = 'rule-scheme';
      sel.onchange = () => { r.scheme = sel.value; markCustom(); changed(); };
      const rm = el('button', { type: 'button', className: 'rule-remove', textContent: '×', title: 'remove this rule' });
      rm.setAttribute('aria-label', `remove rule ${i + 1}`);
      rm.onclick = () => { st.rules.splice(i, 1); markCustom(); renderRules(); changed(); };
      box.append(el('div', { className: 'rule' }, el('span', { className: 'rule-n', textContent: `${i + 1}.` }), input, ' → ', sel, rm));
    });
    box.hidden = st.rules.length === 0;
  }

  // ---- the table of tensors ----
  function buildTable(model) {
    const table = $('scheme-table');
    table.replaceChildren();
    rows.clear();
    const head = table.createTHead().insertRow();
    for (const h of ['tensor', 'shape', 'source', 'bytes now', 'scheme', 'output', 'bytes after', 'chosen by'])
      head.append(el('th', { textContent: h, scope: 'col' }));
    const body = table.createTBody();
    for (const t of model.tensors) {
      const tr = body.insertRow();
      tr.dataset.tensor = t.name;
      const select = schemeSelect(st.overrides.get(t.name) || '', true, `scheme for ${t.name}`);
      select.className = 'scheme-pick';
      select.dataset.tensor = t.name;
      select.onchange = () => {
        if (select.value) st.overrides.set(t.name, select.value); else st.overrides.delete(t.name);
        changed();
      };
      const cells = {};
      for (const [k, v] of [['name', t.name], ['shape', `[${t.shape.join(', ')}]`], ['src', t.dtype], ['now', formatBytes(t.bytes)]]) {
        cells[k] = tr.insertCell();
        cells[k].textContent = v;
      }
      cells.now.dataset.value = t.bytes;
      tr.insertCell().append(select);
      for (const k of ['dtype', 'after', 'why']) { cells[k] = tr.insertCell(); cells[k].className = 'scheme-' + k; }
      rows.set(t.name, { tr, select, cells });
    }
    const foot = table.createTFoot().insertRow();
    foot.append(el('th', { textContent: 'all tensors', scope: 'row' }), el('td'), el('td'),
      el('td', { id: 'scheme-now-total' }), el('td'), el('td'), el('td', { id: 'scheme-after-total' }), el('td'));
    $('scheme-now-total').textContent = formatBytes(model.tensors.reduce((a, t) => a + t.bytes, 0));
  }

  // ---- the rules as the CLI takes them ----
  function rules() {
    const exact = [];
    if (st.model) for (const t of st.model.tensors) if (st.overrides.has(t.name)) exact.push({ pattern: t.name, scheme: st.overrides.get(t.name) });
    return [...exact, ...st.rules.map((r) => ({ pattern: r.pattern, scheme: r.scheme }))];
  }
  let blobUrl = null;
  function renderExport() {
    const text = JSON.stringify(rules(), null, 2) + '\n';
    $('scheme-json').textContent = text;
    const file = `${st.label.replace(/\.safetensors$/, '').replace(/[^\w.-]+/g, '_') || 'model'}-schemes.json`;
    $('scheme-cli').textContent = `export out${ruleFormat().extension} --model ${st.label || '<checkpoint folder>'} --scheme ${st.scheme} --schemes ${file}`;
    if (blobUrl) URL.revokeObjectURL(blobUrl);
    blobUrl = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const a = $('scheme-download');
    a.href = blobUrl;
    a.download = file;
    a.textContent = `Download ${file}`;
  }

  return {
    // Sets default and preset from a format menu entry; per-tensor choices are dropped.
    reset(format) {
      const f = formatPreset(format);
      st.scheme = f.scheme;
      def.value = f.scheme;
      st.overrides.clear();
      for (const r of rows.values()) r.select.value = '';
      applyPreset(f.preset);
      renderExport();
    },
    setModel(model, label) {
      st.model = model;
      st.label = label || 'model';
      st.overrides.clear();
      $('scheme-filter').value = '';
      buildTable(model);
      renderExport();
    },
    options() { return { format: ruleFormat().id, scheme: st.scheme, rules: rules() }; },
    rules,
    // A fresh plan for the current options: output dtype, bytes and the deciding rule per tensor,
    // the predicted size and the breakdown.
    update(plan) {
      st.plan = plan;
      const used = rules(), nExact = used.length - st.rules.length;
      let after = 0;
      for (const t of plan.tensors) {
        const r = rows.get(t.name);
        after += t.bytes;
        if (!r) continue;
        r.cells.dtype.textContent = shortOf(t.dtype);
        r.cells.dtype.title = t.dtype;
        r.cells.dtype.dataset.value = t.dtype;
        r.cells.after.textContent = formatBytes(t.bytes);
        r.cells.after.dataset.value = t.bytes;
        const rule = t.rule === undefined || t.rule < 0 ? null : t.rule;
        r.cells.why.replaceChildren(rule === null ? (t.shape.length >= 2 ? `default ${st.scheme.toUpperCase()}` : '1-D: F32')
          : rule < nExact ? 'your choice' : el('code', { textContent: used[rule].pattern, title: `rule ${rule - nExact + 1}` }));
        if (t.note) r.cells.why.append(` · ${t.note}`);
        r.cells.why.dataset.rule = rule === null ? -1 : rule;
        r.tr.classList.toggle('fallback', !!t.note);
      }
      $('scheme-after-total').textContent = formatBytes(after);
      const b = plan.breakdown;
      const over = b.header_bytes + b.metadata_bytes + b.descriptor_bytes;
      const total = $('scheme-total');
      total.textContent = `Predicted file: ${formatBytes(plan.total_bytes)} (${plan.total_bytes.toLocaleString('en')} bytes): ` +
        `tensors ${formatBytes(after)}, header + metadata + descriptors ${formatBytes(over)}; ` +
        `${b.ratio_vs_source.toFixed(2)}× smaller than the source, ${b.ratio_vs_fp32.toFixed(2)}× smaller than FP32.`;
      total.dataset.total = plan.total_bytes;
      renderBreakdown($('scheme-chart'), $('scheme-breakdown'), b);
    },
  };
}
