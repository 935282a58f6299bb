// "Schemes per tensor": a type for every tensor of the selected format that takes scheme rules
// (GGUF, GGUF-lite: the catalog's scheme_rules). The user's choices are rules — exact tensor
// names first (a glob without wildcards matches just that name), then a preset's or the user's
// own patterns, then the default — in exactly the --schemes format the CLI takes, so a choice
// made here is reproduced on the command line byte for byte. Rules match the names the tensors
// have in the output file (GGUF: token_embd.weight, blk.0.attn_q.weight, ...; GGUF-lite: the
// Hugging Face names), which the plan gives; the types are the format's (its rule_types). The C++
// core matches the rules, applies the fallbacks and sizes every tensor (Converter.plan); this
// module holds the choices and draws the table, the prediction and the breakdown.
import { renderBreakdown, formatBytes, overheadParts, versus } from './chart.js';
import { catalog, fileTypesOf, menuEntries, ruleTypesOf, shortOf, typeByShort } from './catalog.js';

const $ = (id) => document.getElementById(id);

// Rule presets, by format: the core's table has none yet (wanted: formats[].presets, a list of
// {id, label, scheme, rules, menu}); until it has, the page's own stand in. Their patterns are the
// output's tensor names, their types the format's. A preset whose types the format does not take
// is not offered (see presetsOf), so none can silently do nothing. The mixed presets quantize
// the embeddings too (as llama.cpp's presets do): F32 embeddings made a bf16 model's "mixed" file
// larger than its source. 1-D tensors (norms, biases) stay F32 in every format whatever a rule says.
const PAGE_PRESETS = {
  'gguf-lite': [
    { id: 'mixed', label: 'Q4 MLP + Q8 attention and embeddings (norms F32)', scheme: 'q8',
      menu: { label: 'Q4 MLP + Q8 attention and embeddings', file_suffix: 'mixed' },
      rules: [{ pattern: '*mlp*', scheme: 'q4' }, { pattern: '*attn*', scheme: 'q8' }] },
    { id: 'q4-mlp', label: 'Q4 MLP only', rules: [{ pattern: '*mlp*', scheme: 'q4' }] },
    { id: 'f16-ends', label: 'F16 embeddings and output', rules: [
      { pattern: '*embed*', scheme: 'f16' }, { pattern: '*wte*', scheme: 'f16' }, { pattern: 'lm_head*', scheme: 'f16' }] },
  ],
  gguf: [
    { id: 'mixed', label: 'Q4_0 feed-forward + Q8_0 attention, embeddings and output', scheme: 'q8_0',
      menu: { label: 'Q4_0 feed-forward + Q8_0 attention, embeddings and output', file_suffix: 'mixed' },
      rules: [{ pattern: 'blk.*.ffn_gate.weight', scheme: 'q4_0' }, { pattern: 'blk.*.ffn_up.weight', scheme: 'q4_0' },
        { pattern: 'blk.*.ffn_down.weight', scheme: 'q4_0' }] },
    { id: 'q8-ends', label: 'Q8_0 token embeddings and output (with a smaller default)', rules: [
      { pattern: 'token_embd.weight', scheme: 'q8_0' }, { pattern: 'output.weight', scheme: 'q8_0' }] },
    { id: 'f16-ends', label: 'F16 token embeddings and output', rules: [
      { pattern: 'token_embd.weight', scheme: 'f16' }, { pattern: 'output.weight', scheme: 'f16' }] },
  ],
};
const NONE = { id: 'none', label: 'none: the default for every tensor of 2+ dims', rules: [] };
export function presetsOf(format) {
  const own = format.presets || PAGE_PRESETS[format.id] || [];
  const types = new Set(ruleTypesOf(format)), files = new Set(fileTypesOf(format));
  return [NONE, ...own.filter((p) => p.rules.every((r) => types.has(r.scheme)) && (!p.scheme || files.has(p.scheme)))];
}

// The page's own menu entries for each format that takes rules: its presets that have a menu
// entry, and "schemes per tensor (as edited below)". Values are the format's id + "-" + the
// preset's ("gguf-lite-mixed", "gguf-custom").
export function pageChoices(format) {
  if (!format.scheme_rules) return [];
  return [
    ...presetsOf(format).filter((p) => p.menu).map((p) => ({
      value: `${format.id}-${p.id}`, label: `${format.name}, ${p.menu.label}`, file_suffix: p.menu.file_suffix,
      format, preset: p.id, scheme: p.scheme || format.default_scheme })),
    { value: `${format.id}-custom`, label: `${format.name}, schemes per tensor (as edited below)`, file_suffix: 'custom',
      format, custom: true },
  ];
}
const pageChoice = (value) => catalog.formats.flatMap(pageChoices).find((c) => c.value === value);

// The editor state a format menu entry stands for: the core's per-type entries and the page's
// presets; null for "schemes per tensor" (it keeps what is edited) and for other formats.
export function formatPreset(value) {
  const p = pageChoice(value);
  if (p) return p.custom ? null : { format: p.format, scheme: p.scheme, preset: p.preset };
  const m = menuEntries().find((e) => e.value === value && e.format.scheme_rules);
  return m ? { format: m.format, scheme: m.options.scheme, preset: 'none' } : null;
}

function el(tag, props = {}, ...kids) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
}
// reason(v): why type v is off ('' when on), shown in its option.
function fillTypes(s, types, withAuto, reason = () => '') {
  s.replaceChildren();
  if (withAuto) s.append(el('option', { value: '', textContent: 'auto' }));
  for (const v of types) s.append(el('option', { value: v }));
  markOptions(s, reason);
}
function markOptions(s, reason) {
  for (const o of s.options) {
    if (!o.value) continue;
    const why = reason(o.value);
    o.disabled = !!why;
    o.textContent = o.value.toUpperCase() + (why ? ` (${why})` : '');
  }
}

// The core's glob (src/plan/schemes.cpp glob_match): * any run, ? one character.
export function globMatch(p, s) {
  let pi = 0, si = 0, star = -1, mark = 0;
  while (si < s.length) {
    if (pi < p.length && (p[pi] === '?' || p[pi] === s[si])) { pi++; si++; }
    else if (pi < p.length && p[pi] === '*') { star = pi++; mark = si; }
    else if (star >= 0) { pi = star + 1; si = ++mark; }
    else return false;
  }
  while (pi < p.length && p[pi] === '*') pi++;
  return pi === p.length;
}
// Why a pattern cannot be a rule, or '' when it can. Tensor names are letters, digits, '.', '_'
// and '-'; the core's globs know * and ? only.
export function patternProblem(p) {
  if (!p.trim()) return 'type a pattern';
  if (/\s/.test(p)) return 'no spaces: tensor names have none';
  if (/[[\]{}]/.test(p)) return 'no [ ] or { }: only * (any run) and ? (one character)';
  if (/[^\w.*?-]/.test(p)) return 'only letters, digits, . _ - and the wildcards * and ?';
  return '';
}

const shellWord = (w) => (/^[\w.\/+=:@%-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`);

// llamaQuantize(): the core's translation of the current options' rules into llama-quantize's
// --tensor-type words ({type, lines, text} or {why}); imatrixName(): the importance matrix in use, or ''.
export function createSchemeEditor({ onChange, outputName, llamaQuantize, imatrixName = () => '' }) {
  const st = { format: null, scheme: '', preset: 'none', rules: [], overrides: new Map(), order: [], model: null, label: 'model',
               plan: null, names: '', locked: false };
  // Each format's editor state while another format is chosen: switching format and back keeps
  // the default, the preset, the rules and every per-tensor choice.
  const memory = new Map();  // format id -> { scheme, preset, rules, overrides }
  const rows = new Map();  // output tensor name -> { tr, select, cells, source }
  const changed = () => { renderExport(); onChange(); };
  const ruleTypes = () => ruleTypesOf(st.format);
  function typeSelect(value, withAuto, label) {
    const s = el('select');
    fillTypes(s, ruleTypes(), withAuto, typeReason);
    s.value = value;
    s.disabled = st.locked;
    if (label) s.setAttribute('aria-label', label);
    return s;
  }

  // ---- default scheme and rule preset ----
  // Entries off for a reason, as the format menu's: the default's (reason(scheme)) and the rules'
  // and per-tensor choices' types (typeReason(type)); '' when on.
  let defaultReason = () => '', typeReason = () => '';
  function markDefaults(reason, types = typeReason) {
    defaultReason = reason;
    typeReason = types;
    markOptions(def, reason);
    for (const s of document.querySelectorAll('#schemes select.scheme-pick, #schemes select.rule-scheme')) markOptions(s, types);
  }
  const def = $('scheme-default'), preset = $('scheme-preset');
  def.onchange = () => { st.scheme = def.value; changed(); };
  preset.onchange = () => { applyPreset(preset.value); changed(); };
  // A new rule goes first (first match wins: last, it would be shadowed by the rules above it),
  // with an empty pattern to type: it decides nothing until it has one.
  // A new rule's type: the default's (a preset's: the type of most of its weights, the core's menu
  // says which), one the rules take.
  const ruleTypeOf = (scheme) => {
    const m = st.format.menu.find((e) => e.options && e.options.scheme === scheme);
    const t = (m && m.type) || scheme;
    return ruleTypes().includes(t) ? t : ruleTypes()[0];
  };
  $('scheme-add-rule').onclick = () => {
    st.rules.unshift({ pattern: '', scheme: ruleTypeOf(st.scheme) });
    markCustom();
    renderRules();
    $('scheme-rules').querySelector('input').focus();
    changed();
  };
  $('scheme-clear').onclick = () => {
    st.overrides.clear();
    for (const r of rows.values()) r.select.value = '';
    changed();
  };
  $('scheme-filter').oninput = filter;
  function filter() {
    const f = $('scheme-filter').value.trim().toLowerCase();
    for (const [name, r] of rows) r.tr.hidden = !!f && !name.toLowerCase().includes(f) && !r.source.toLowerCase().includes(f);
  }

  // A format's types and presets, when the editor moves to it.
  function setFormat(format) {
    if (st.format === format) return;
    if (st.format) memory.set(st.format.id, { scheme: st.scheme, preset: st.preset, rules: st.rules, overrides: st.overrides,
      order: rows.size ? [...rows.keys()] : st.order });
    st.format = format;
    fillTypes(def, fileTypesOf(format), false);
    markDefaults(defaultReason);
    preset.replaceChildren(...presetsOf(format).map((p) => el('option', { value: p.id, textContent: p.label })),
      el('option', { value: 'custom', textContent: 'your own rules (edited below)', disabled: true }));
    $('schemes-title').textContent = `Schemes per tensor: ${format.name}`;
    st.names = '';  // the table is rebuilt from the next plan: the tensors' names are the format's
    $('scheme-table').replaceChildren();
    rows.clear();
  }

  function applyPreset(k) {
    const p = presetsOf(st.format).find((x) => x.id === k) || NONE;
    st.preset = p.id;
    st.rules = p.rules.map((r) => ({ ...r }));
    preset.value = p.id;
    preset.querySelector('option[value="custom"]').disabled = true;
    renderRules();
  }
  function markCustom() {
    st.preset = 'custom';
    const o = preset.querySelector('option[value="custom"]');
    o.disabled = false;
    preset.value = 'custom';
  }

  // ---- the rules, in order: first match wins ----
  const valid = (r) => !patternProblem(r.pattern);
  function renderRules() {
    const box = $('scheme-rules');
    box.replaceChildren();
    const n = st.rules.length;
    st.rules.forEach((r, i) => {
      const input = el('input', { type: 'text', value: r.pattern, className: 'rule-pattern', spellcheck: false, disabled: st.locked });
      input.setAttribute('aria-label', `rule ${i + 1} pattern`);
      input.setAttribute('autocomplete', 'off');
      const msg = el('span', { className: 'rule-problem', id: `rule-problem-${i}` });
      input.setAttribute('aria-describedby', msg.id);
      const check = () => {
        const problem = patternProblem(input.value);
        input.setAttribute('aria-invalid', String(!!problem));
        msg.textContent = problem ? `not a rule: ${problem}` : '';
        li.classList.toggle('invalid', !!problem);
      };
      input.oninput = () => { r.pattern = input.value; check(); markCustom(); changed(); };
      const sel = typeSelect(r.scheme, false, `rule ${i + 1} scheme`);
      sel.className = 'rule-scheme';
      sel.onchange = () => { r.scheme = sel.value; markCustom(); changed(); };
      const button = (cls, text, label, disabled, f) => {
        const b = el('button', { type: 'button', className: cls, textContent: text, title: label, disabled: st.locked || disabled });
        b.setAttribute('aria-label', label);
        b.onclick = f;
        return b;
      };
      const move = (to) => () => {
        st.rules.splice(to, 0, st.rules.splice(i, 1)[0]);
        markCustom();
        renderRules();
        const again = $('scheme-rules').children[to].querySelector(to < i ? '.rule-up' : '.rule-down');
        (again && !again.disabled ? again : $('scheme-rules').children[to].querySelector('input')).focus();
        changed();
      };
      const up = button('rule-up', '↑', `move rule ${i + 1} up`, i === 0, move(i - 1));
      const down = button('rule-down', '↓', `move rule ${i + 1} down`, i === n - 1, move(i + 1));
      const rm = button('rule-remove', '×', `remove rule ${i + 1}`, false, () => {
        st.rules.splice(i, 1); markCustom(); renderRules(); changed();
      });
      const count = el('span', { className: 'rule-count' });
      count.dataset.rule = i;
      const li = el('li', { className: 'rule' }, el('span', { className: 'rule-n', textContent: `${i + 1}.` }), input, ' → ', sel,
        up, down, rm, count, msg);
      li.dataset.rule = i;
      check();
      box.append(li);
    });
    box.hidden = n === 0;
    if (st.plan) countRules(st.plan);
  }
  // How many tensors each rule decides, from the last plan; a rule that decides none says why:
  // it matches no tensor, or the tensors it matches are taken by an earlier rule (shadowed).
  function countRules(plan) {
    const used = rules(), nExact = used.length - st.rules.filter(valid).length;
    let k = nExact;
    for (const c of $('scheme-rules').querySelectorAll('.rule-count')) {
      const r = st.rules[Number(c.dataset.rule)];
      const li = c.closest('.rule');
      li.classList.remove('shadowed', 'nomatch');
      delete c.dataset.count;
      delete c.dataset.shadowedBy;
      if (!r || !valid(r)) { c.textContent = ''; continue; }
      const index = k++;
      const n = plan.tensors.filter((t) => t.rule === index).length;
      c.dataset.count = n;
      c.classList.toggle('none', n === 0);
      if (n) { c.textContent = `decides ${n} tensor${n > 1 ? 's' : ''}`; continue; }
      const matched = plan.tensors.filter((t) => globMatch(r.pattern, t.name));
      if (!matched.length) {
        c.textContent = 'matches no tensor';
        li.classList.add('nomatch');
        continue;
      }
      const by = Math.min(...matched.map((t) => t.rule).filter((x) => x >= 0 && x < index));
      li.classList.add('shadowed');
      if (by < nExact) c.textContent = `shadowed: your per-tensor choices decide its ${matched.length} tensor${matched.length > 1 ? 's' : ''}`;
      else {
        const shown = st.rules.indexOf(st.rules.filter(valid)[by - nExact]) + 1;
        c.textContent = `shadowed by rule ${shown}: it takes the ${matched.length} tensor${matched.length > 1 ? 's' : ''} first`;
        c.dataset.shadowedBy = shown;
      }
    }
  }

  // ---- the table of tensors: the plan's, by their names in the output ----
  function buildTable(plan) {
    const table = $('scheme-table');
    table.replaceChildren();
    rows.clear();
    const byName = new Map((st.model ? st.model.tensors : []).map((t) => [t.name, t]));
    const head = table.createTHead().insertRow();
    for (const h of ['tensor', 'shape', 'source', 'bytes now', 'scheme', 'output', 'bytes after', 'chosen by'])
      head.append(el('th', { textContent: h, scope: 'col' }));
    const body = table.createTBody();
    let now = 0;
    for (const t of plan.tensors) {
      const src = byName.get(t.source) || {};
      const tr = body.insertRow();
      tr.dataset.tensor = t.name;
      const select = typeSelect(st.overrides.get(t.name) || '', true, `scheme for ${t.name}`);
      select.className = 'scheme-pick';
      select.dataset.tensor = t.name;
      select.onchange = () => {
        if (select.value) st.overrides.set(t.name, select.value); else st.overrides.delete(t.name);
        changed();
      };
      const cells = {};
      cells.name = tr.insertCell();
      cells.name.append(t.name);
      if (t.source && t.source !== t.name) cells.name.append(el('span', { className: 'src-name', textContent: t.source }));
      for (const [k, v] of [['shape', `[${t.shape.join(', ')}]`], ['src', t.source_dtype || src.dtype || ''],
        ['now', src.bytes === undefined ? '' : formatBytes(src.bytes)]]) {
        cells[k] = tr.insertCell();
        cells[k].textContent = v;
      }
      if (src.bytes !== undefined) { cells.now.dataset.value = src.bytes; now += src.bytes; }
      tr.insertCell().append(select);
      for (const k of ['dtype', 'after', 'why']) { cells[k] = tr.insertCell(); cells[k].className = 'scheme-' + k; }
      rows.set(t.name, { tr, select, cells, source: t.source || '' });
    }
    const foot = table.createTFoot().insertRow();
    foot.append(el('th', { textContent: 'all tensors', scope: 'row' }), el('td'), el('td'),
      el('td', { id: 'scheme-now-total' }), el('td'), el('td'), el('td', { id: 'scheme-after-total' }), el('td'));
    $('scheme-now-total').textContent = formatBytes(now);
    filter();
  }

  // ---- the rules as the CLI takes them (a rule whose pattern is not valid is left out) ----
  // Per-tensor choices in the tensors' order (the last plan's; kept with the format's choices, so
  // a format picked up again plans with them before its table is rebuilt).
  function rules() {
    const order = rows.size ? [...rows.keys()] : st.order;
    const exact = order.filter((n) => st.overrides.has(n)).map((n) => ({ pattern: n, scheme: st.overrides.get(n) }));
    for (const [n, scheme] of st.overrides) if (!order.includes(n)) exact.push({ pattern: n, scheme });
    return [...exact, ...st.rules.filter(valid).map((r) => ({ pattern: r.pattern, scheme: r.scheme }))];
  }
  let blobUrl = null;
  // The command that writes the same file, runnable as pasted from the repository's folder (the
  // native CLI is build/native/export; `node wasm/cli.mjs` takes the same arguments).
  function renderExport() {
    if (!st.format) return;
    const text = JSON.stringify(rules(), null, 2) + '\n';
    $('scheme-json').textContent = text;
    const file = `${st.label.replace(/\.safetensors$/, '').replace(/[^\w.-]+/g, '_') || 'model'}-schemes.json`;
    const out = (outputName && outputName()) || `out${st.format.extension}`;
    const im = imatrixName();
    $('scheme-cli').textContent = ['build/native/export', out, '--model', st.label || 'checkpoint-folder', '--scheme', st.scheme,
      '--schemes', file, ...(im ? ['--imatrix', im] : [])].map(shellWord).join(' ');
    if (blobUrl) URL.revokeObjectURL(blobUrl);
    blobUrl = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
    const a = $('scheme-download');
    a.href = blobUrl;
    a.download = file;
    a.textContent = `Download ${file}`;
  }
  // The same choices in llama-quantize's words (GGUF): the core translates the rules and checks
  // that llama-quantize's file types every tensor alike, or says why not.
  let quantizeSeq = 0, quantizeUrl = null;
  async function renderQuantize() {
    const box = $('scheme-quantize');
    if (!llamaQuantize || !st.plan) { box.hidden = true; return; }
    const seq = ++quantizeSeq;
    let r;
    try {
      r = await llamaQuantize();
    } catch (e) {
      r = { why: e.message };
    }
    if (seq !== quantizeSeq) return;
    box.hidden = !r.why && !r.type;  // (a format llama-quantize does not write: the core says nothing)
    if (box.hidden) return;
    box.dataset.state = r.why ? 'off' : 'ok';
    $('scheme-quantize-why').textContent = r.why || '';
    $('scheme-quantize-why').hidden = !r.why;
    for (const id of ['scheme-tensor-types', 'scheme-quantize-commands']) $(id).hidden = !!r.why;
    if (r.why) return;
    const base = st.label.replace(/\.safetensors$/, '').replace(/[^\w.-]+/g, '_') || 'model';
    const file = `${base}-tensor-types.txt`, out = (outputName && outputName()) || 'out.gguf', im = imatrixName();
    $('scheme-tensor-types').textContent = r.text || '(no rules: the preset alone)\n';
    $('scheme-quantize-cli').textContent = ['build/native/export', out, '--model', st.label || 'checkpoint-folder', '--type', r.type,
      ...(r.lines.length ? ['--tensor-type-file', file] : []), ...(im ? ['--imatrix', im] : [])].map(shellWord).join(' ');
    $('scheme-llama-quantize').textContent = ['llama-quantize', ...(im ? ['--imatrix', im] : []),
      ...(r.lines.length ? ['--tensor-type-file', file] : []), `${base}-BF16.gguf`, out, r.type].map(shellWord).join(' ');
    if (quantizeUrl) URL.revokeObjectURL(quantizeUrl);
    quantizeUrl = URL.createObjectURL(new Blob([r.text], { type: 'text/plain' }));
    const a = $('scheme-tensor-type-download');
    a.href = quantizeUrl;
    a.download = file;
    a.textContent = `Download ${file}`;
    a.hidden = !r.lines.length;
  }
  function summarize() {
    const n = rows.size, picked = [...rows.keys()].filter((k) => st.overrides.has(k)).length;
    $('scheme-tensors-summary').textContent = `Every tensor (${n}): its type, size and the rule that chose it` +
      (picked ? `; ${picked} chosen by you` : '');
  }

  function restore(f, m) {
    setFormat(f);
    st.scheme = m.scheme;
    def.value = m.scheme;
    st.overrides = m.overrides;
    st.order = m.order || [];
    st.preset = m.preset;
    st.rules = m.rules;
    if (m.preset === 'custom') markCustom(); else { preset.value = m.preset; preset.querySelector('option[value="custom"]').disabled = true; }
    renderRules();
    renderExport();
  }

  return {
    // Sets format, default and preset from a format menu entry ("schemes per tensor" of another
    // format: that format's default); the format's per-tensor choices are dropped.
    reset(value) {
      const f = formatPreset(value) || (() => {
        const c = pageChoice(value);
        return { format: c.format, scheme: c.format.default_scheme, preset: 'none' };
      })();
      setFormat(f.format);
      st.scheme = f.scheme;
      def.value = f.scheme;
      st.overrides = new Map();
      st.order = [];
      for (const r of rows.values()) r.select.value = '';
      applyPreset(f.preset);
      renderExport();
    },
    // "Schemes per tensor" of another format: that format as it was left, or its default.
    resume(format) {
      const m = memory.get(format.id);
      if (m) restore(format, m);
      else this.reset(`${format.id}-custom`);
    },
    formatId: () => st.format && st.format.id,
    markDefaults,
    setModel(model, label) {
      st.model = model;
      st.label = label || 'model';
      st.overrides = new Map();
      for (const m of memory.values()) m.overrides = new Map();  // another checkpoint's tensors
      st.names = '';
      st.plan = null;
      $('scheme-filter').value = '';
      $('scheme-table').replaceChildren();
      rows.clear();
      renderExport();
    },
    // While a conversion runs nothing here changes what it writes.
    setLocked(on) {
      st.locked = on;
      for (const c of document.querySelectorAll('#schemes select, #schemes input:not([type=search]), #schemes button')) {
        if (on) { if (c.dataset.wasDisabled === undefined) c.dataset.wasDisabled = c.disabled ? '1' : ''; c.disabled = true; }
        else if (c.dataset.wasDisabled !== undefined) { c.disabled = c.dataset.wasDisabled === '1'; delete c.dataset.wasDisabled; }
      }
    },
    options() { return { format: st.format.id, scheme: st.scheme, rules: rules() }; },
    rules,
    // A fresh plan for the current options: output dtype, bytes and the deciding rule per tensor,
    // the predicted size and the breakdown.
    update(plan) {
      st.plan = plan;
      const names = plan.tensors.map((t) => t.name).join('\n');
      if (names !== st.names) { st.names = names; buildTable(plan); }
      const used = rules(), nExact = used.length - st.rules.filter(valid).length;
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
        const shown = rule === null || rule < nExact ? 0 : st.rules.indexOf(st.rules.filter(valid)[rule - nExact]) + 1;
        r.cells.why.replaceChildren(rule === null ? (t.shape.length >= 2 ? `default ${st.scheme.toUpperCase()}` : `1-D: ${shortOf(t.dtype)}`)
          : rule < nExact ? 'your choice' : el('code', { textContent: used[rule].pattern, title: `rule ${shown}` }));
        // What was asked for and not given: the core's reason when it gives one, otherwise the
        // type the tensor keeps (GGUF keeps 1-D tensors and norms in F32 whatever a rule says).
        const asked = rule === null ? (t.shape.length >= 2 ? st.scheme : null) : used[rule].scheme;
        const askedType = asked && typeByShort(asked);
        const kept = !t.note && askedType && askedType.name !== t.dtype;
        if (t.note) r.cells.why.append(` · ${t.note}`);
        else if (kept) r.cells.why.append(` · stays ${shortOf(t.dtype)}`);
        r.cells.why.dataset.rule = rule === null ? -1 : rule;
        r.tr.classList.toggle('fallback', !!t.note || kept);
      }
      countRules(plan);
      summarize();
      $('scheme-after-total').textContent = formatBytes(after);
      const b = plan.breakdown;
      const typed = b.by_dtype.reduce((a, d) => a + d.values_bytes + d.scales_bytes, 0);
      const total = $('scheme-total');
      // tensors the plan lists, tensors the format adds itself (GGUF: rope_freqs), the rest part by part
      const extra = typed - after;
      total.textContent = `Predicted file: ${formatBytes(plan.total_bytes)} (${plan.total_bytes.toLocaleString('en')} bytes): ` +
        `tensors ${formatBytes(after)}` + (extra > 0 ? `, tensors the format adds ${formatBytes(extra)}` : '') +
        overheadParts(b).map((p) => `, ${p.label} ${formatBytes(p.bytes)}`).join('') + '; ' +
        `${versus(b.source_bytes, plan.total_bytes, 'the source')}, ${versus(b.fp32_baseline_bytes, plan.total_bytes, 'FP32')}.`;
      total.dataset.total = plan.total_bytes;
      renderBreakdown($('scheme-chart'), $('scheme-breakdown'), b);
      renderExport();  // (its name and --imatrix follow the plan)
      renderQuantize();
      if (st.locked) this.setLocked(true);
    },
  };
}
