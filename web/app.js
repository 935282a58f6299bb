// The page: gathers the user's files, talks to the conversion worker, draws progress and the
// byte breakdown. Decisions (validation, sizes, encodings) come from the C++ core via the worker.
import { renderBreakdown, formatBytes } from './chart.js';
import { createNibbleView } from './nibbles.js';
import { createSchemeEditor, formatPreset, pageChoices } from './schemes.js';
import { catalog, setCatalog, useOf, wantedFile } from './catalog.js';

const $ = (id) => document.getElementById(id);
// chunkMb: the working set of one chunk; the tab's memory is about chunkMb x 3 x (threads + 2).
const state = { model: null, label: '', threads: 0, threaded: false, summary: null, chunkMb: 8,
                planPending: 0, converting: false };
window.__leapconv = state;  // for the end-to-end tests and the curious

// ---- worker RPC ----
const worker = new Worker('worker.js');
let nextId = 1;
const pending = new Map();
const listeners = { progress: [], started: [], done: [] };
worker.onmessage = (e) => {
  const m = e.data;
  if (listeners[m.type]) return listeners[m.type].forEach((f) => f(m));
  const p = pending.get(m.id);
  if (!p) return;
  pending.delete(m.id);
  if (m.type.endsWith(':ok')) p.resolve(m.result);
  else p.reject(Object.assign(new Error(m.error), { cancelled: m.cancelled }));
};
worker.onerror = (e) => showError('The conversion worker failed to start: ' + (e.message || e));
function call(type, payload = {}) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ type, id, ...payload });
  });
}

// ---- status ----
function setState(s) { document.body.dataset.state = s; }
// keepState: an error that leaves the page's state as it is (a plan the chosen output refuses:
// the checkpoint stays open and another choice may do).
function showError(msg, { keepState = false } = {}) {
  const el = $('error');
  el.textContent = msg;
  el.hidden = !msg;
  if (msg && !keepState) setState('error');
}
function showWarnings(list) {
  const el = $('warnings');
  el.replaceChildren(...(list || []).map((w) => Object.assign(document.createElement('p'), { textContent: '⚠ ' + w })));
  el.hidden = !list || list.length === 0;
}

const ready = call('init').then((info) => {
  state.threads = info.maxThreads;
  state.threaded = info.threaded;
  setCatalog(info.catalog);
  $('tagline-formats').textContent = catalog.formats.map((f) => f.name).join(', ').replace(/, ([^,]*)$/, ' or $1');
  buildFormatMenu();
  schemes = createSchemeEditor({
    onChange() {  // an edit: the menu says "schemes per tensor" of the editor's format
      const custom = `${schemes.formatId()}-custom`;
      if ($('format').value !== custom) $('format').value = custom;
      showChoice();
      updatePlan();
    },
  });
  const first = choices().find((c) => c.value === $('format').value && c.format.scheme_rules) ||
    choices().find((c) => c.format.scheme_rules && formatPreset(c.value));
  if (first) schemes.reset(first.value);
  showChoice();
  nibbles = createNibbleView(call);
  $('status').textContent = info.threaded
    ? `Ready: WebAssembly SIMD with ${info.maxThreads} worker threads.`
    : 'Ready, single-threaded: this page is not cross-origin isolated, so WebAssembly threads are off (conversion still works, only slower).';
  $('status').classList.add(info.threaded ? 'ok' : 'warn');
  setState('idle');
}).catch((e) => showError('Could not load the converter: ' + e.message));

// ---- gathering files ----
const wanted = (name) => wantedFile(name);  // the files the core reads (its catalog)

async function filesFromDirectory(dir) {
  const files = [];
  for await (const entry of dir.values()) {
    if (entry.kind === 'file' && wanted(entry.name)) files.push(await entry.getFile());
  }
  return files;
}

// Loose files are labelled like the CLI labels them: by the shard's name when there is one.
function singleLabel(files) {
  const shards = files.filter((f) => f.name.endsWith('.safetensors'));
  return shards.length === 1 ? shards[0].name : 'checkpoint';
}

async function openFiles(files, label) {
  showError('');
  showWarnings([]);
  $('result').hidden = true;
  await ready;
  files = files.filter((f) => wanted(f.name));
  if (!files.some((f) => f.name.endsWith('.safetensors'))) {
    showError(`${label}: no .safetensors files found (drop a checkpoint folder or its .safetensors files).`);
    return;
  }
  setState('opening');
  try {
    state.model = await call('open', { files, label });
    state.label = label;
    renderModel(state.model);
    schemes.setModel(state.model, label);
    nibbles.setModel(state.model);
    $('output').hidden = false;
    setState('ready');
    await updatePlan();
  } catch (e) {
    state.model = null;
    $('model').hidden = true;
    $('output').hidden = true;
    $('schemes').hidden = true;
    nibbles.setModel(null);
    showError(e.message);
  }
}

$('pick-folder').onclick = async () => {
  if (window.showDirectoryPicker) {
    try {
      const dir = await window.showDirectoryPicker();
      await openFiles(await filesFromDirectory(dir), dir.name);
    } catch (e) {
      if (e.name !== 'AbortError') showError(e.message);
    }
  } else {
    $('folder-input').click();
  }
};
$('pick-files').onclick = () => $('files-input').click();
function fromInput(input) {
  const files = [...input.files];
  if (!files.length) return;
  // webkitdirectory gives every file below the folder: keep the folder's own files
  const top = files.filter((f) => !f.webkitRelativePath || f.webkitRelativePath.split('/').length <= 2);
  const label = files[0].webkitRelativePath ? files[0].webkitRelativePath.split('/')[0] : singleLabel(files);
  input.value = '';
  openFiles(top, label);
}
$('folder-input').onchange = () => fromInput($('folder-input'));
$('files-input').onchange = () => fromInput($('files-input'));

const dz = $('dropzone');
dz.ondragover = (e) => { e.preventDefault(); dz.classList.add('over'); };
dz.ondragleave = () => dz.classList.remove('over');
dz.ondrop = async (e) => {
  e.preventDefault();
  dz.classList.remove('over');
  const items = [...e.dataTransfer.items].filter((i) => i.kind === 'file');
  if (items.length && items[0].getAsFileSystemHandle) {
    const handles = await Promise.all(items.map((i) => i.getAsFileSystemHandle()));
    const dirs = handles.filter((h) => h && h.kind === 'directory');
    if (dirs.length) return openFiles(await filesFromDirectory(dirs[0]), dirs[0].name);
    const files = await Promise.all(handles.filter(Boolean).map((h) => h.getFile()));
    return openFiles(files, singleLabel(files));
  }
  const files = [...e.dataTransfer.files];
  openFiles(files, singleLabel(files));
};

$('demo').onclick = async () => {
  try {
    const manifest = await (await fetch('demo/manifest.json')).json();
    const files = await Promise.all(manifest.files.map(async (name) => {
      const r = await fetch('demo/' + manifest.folder + '/' + name);
      if (!r.ok) throw new Error(`demo file ${name}: HTTP ${r.status}`);
      return new File([await r.blob()], name);
    }));
    await openFiles(files, manifest.folder);
  } catch (e) {
    showError('Could not load the demo model: ' + e.message);
  }
};

// ---- model and plan ----
function renderModel(m) {
  const el = $('model');
  const cfg = m.config || {};
  const dtypes = Object.entries(m.dtypes).map(([d, n]) => `${d} (${(n / 1e6).toFixed(2)} M)`).join(', ');
  const rows = [
    ['Checkpoint', m.label],
    ['Architecture', m.architecture || 'unknown (no config.json / params.json)'],
    ['Parameters', m.parameters.toLocaleString('en')],
    ['Dtypes', dtypes],
    ['Shards', m.shards.map((s) => `${s.name.split('/').pop()} (${formatBytes(s.bytes)})`).join(', ')],
    ['Tensors', String(m.tensors.length)],
    ['Other files', (m.side_files || []).map((f) => `${f.name} (${formatBytes(f.bytes)})`).join(', ') || 'none (no tokenizer files)'],
  ];
  if (cfg.hidden_size) rows.push(['Shape', `hidden ${cfg.hidden_size}, layers ${cfg.num_hidden_layers}, heads ${cfg.num_attention_heads}/${cfg.num_key_value_heads ?? cfg.num_attention_heads}, vocab ${cfg.vocab_size}`]);
  const table = document.createElement('table');
  table.className = 'facts';
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  }
  const details = document.createElement('details');
  details.innerHTML = '<summary>All tensors</summary>';
  const tt = document.createElement('table');
  tt.className = 'tensors';
  tt.innerHTML = '<tr><th>name</th><th>dtype</th><th>shape</th><th>bytes</th></tr>';
  for (const t of m.tensors) {
    const tr = tt.insertRow();
    for (const v of [t.name, t.dtype, `[${t.shape.join(', ')}]`, formatBytes(t.bytes)]) tr.insertCell().textContent = v;
  }
  details.append(tt);
  el.replaceChildren(table, details);
  el.hidden = false;
}

// The format menu comes from the core's format table, in its order (the first format is the
// default, at its default type); for each format that takes scheme rules the page adds its
// preset entries and "schemes per tensor". Those formats' options always come from the scheme
// editor: the menu's entries set its format, default and preset, and editing it switches the
// menu to "schemes per tensor".
let schemes = null, nibbles = null;
const choices = () => catalog.formats.flatMap((f) => [...f.menu.map((m) => ({ ...m, format: f })), ...pageChoices(f)]);
const choiceOf = (v) => choices().find((c) => c.value === v);
function buildFormatMenu() {
  const sel = $('format');
  sel.replaceChildren(...choices().map((c) => Object.assign(document.createElement('option'), { value: c.value, textContent: c.label })));
  const f = catalog.formats[0];
  sel.value = (f.menu.find((m) => m.options && m.options.scheme === f.default_scheme) || f.menu[0]).value;
}
// What the chosen entry costs (the catalog's line for its type) and what its file is for.
function showChoice() {
  const c = choiceOf($('format').value);
  const preset = formatPreset(c.value);
  const line = c.summary ? `${c.file_suffix}: ${c.summary}.` : c.custom ? 'Every tensor as chosen in "Schemes per tensor" below.'
    : preset && preset.preset !== 'none' ? `${c.label.slice(c.format.name.length + 2)}: set in "Schemes per tensor" below.` : '';
  $('choice-summary').textContent = line;
  $('choice-summary').hidden = !line;
  const use = useOf(c.format).runs_in;
  $('format-use').textContent = use ? `${c.format.name}: ${use}.` : '';
  $('format-use').hidden = !use;
}

function currentOptions() {
  const c = choiceOf($('format').value);
  const o = c.format.scheme_rules ? schemes.options() : c.options;
  const seq = parseInt($('seq-len').value, 10);  // taken by formats whose plan has an engine (LEAP)
  return seq > 0 ? { ...o, seq_len: seq } : o;
}
function outputName() {
  const c = choiceOf($('format').value);
  const base = state.label.replace(/\.safetensors$/, '').replace(/[^\w.-]+/g, '_') || 'model';
  return `${base}-${c.file_suffix}${c.format.extension}`;
}

let planSeq = 0;
async function updatePlan() {
  if (!state.model) return;
  const rules = choiceOf($('format').value).format.scheme_rules;  // the scheme editor applies
  const seq = ++planSeq;
  state.planPending++;
  document.body.dataset.plan = 'pending';
  try {
    const plan = await call('plan', { options: currentOptions() });
    if (seq !== planSeq) return;  // a newer choice is on its way
    showError('');
    $('schemes').hidden = !rules;
    if (rules) schemes.update(plan);
    const b = plan.breakdown;
    $('prediction').textContent = `Output: ${formatBytes(plan.total_bytes)} (${plan.total_bytes.toLocaleString('en')} bytes), ` +
      `${b.by_dtype.reduce((a, d) => a + d.tensors, 0)} tensors; ${(b.source_bytes / plan.total_bytes).toFixed(2)}× smaller than the source, ` +
      `${(b.fp32_baseline_bytes / plan.total_bytes).toFixed(2)}× smaller than FP32.`;
    $('prediction').dataset.total = plan.total_bytes;
    showVocabulary(plan.header && plan.header.tokenizer);
    state.plan = plan;
    document.body.dataset.plan = 'ok';
    // What the target engine makes of the file (LEAP: its KV caches' size for the seq_len).
    $('engine-options').hidden = !plan.engine;
    $('engine').hidden = !plan.engine;
    $('engine').textContent = plan.engine ? plan.engine.summary + '.' : '';
    if (plan.engine && !$('seq-len').value) $('seq-len').placeholder = String(plan.engine.seq_len);
    showWarnings(plan.warnings);
    $('convert').disabled = $('save-as').disabled = state.converting;
  } catch (e) {
    if (seq !== planSeq) return;
    // nothing half-done: no size, no tokenizer facts, no scheme table, no Convert
    state.plan = null;
    $('prediction').textContent = '';
    delete $('prediction').dataset.total;
    $('engine').hidden = true;  // (its seq_len input stays: a refused seq_len is fixed there)
    $('schemes').hidden = true;
    showVocabulary(null);
    $('convert').disabled = true;
    $('save-as').disabled = true;
    document.body.dataset.plan = 'error';
    showError(e.message, { keepState: true });
  } finally {
    state.planPending--;
  }
}
// The plan's tokenizer (formats that put a vocabulary into the file): the files found, and what
// goes in.
function showVocabulary(tk) {
  const box = $('vocab');
  box.hidden = !tk;
  if (!tk) return;
  const files = (state.model.side_files || []).map((f) => `${f.name} (${formatBytes(f.bytes)})`).join(', ') || 'none';
  const special = Object.entries(tk.special || {}).map(([k, s]) => `${k} ${s.id} ${JSON.stringify(s.text)}`).join(', ') || 'none';
  const none = tk.kind === 'none';
  const rows = [
    ['files', 'Tokenizer files found', files],
    ['kind', 'Kind', none ? 'none: the file gets no vocabulary' : `${tk.kind} from ${tk.source} (tokenizer.ggml.model ${tk.model}` +
      (tk.pre ? `, pre ${tk.pre}` : '') + ')'],
    ['tokens', 'Vocabulary', `${tk.tokens.toLocaleString('en')} tokens` + (tk.merges ? `, ${tk.merges.toLocaleString('en')} merges` : '')],
    ['special', 'Special tokens', special],
    ['adds_bos', 'Adds BOS', tk.adds_bos ? 'yes' : 'no'],
    ['chat_template', 'Chat template', tk.chat_template ? 'yes' : 'no'],
  ];
  const table = $('vocab-facts');
  table.replaceChildren();
  for (const [key, k, v] of rows) {
    const tr = table.insertRow();
    tr.dataset.fact = key;
    tr.append(Object.assign(document.createElement('th'), { textContent: k, scope: 'row' }));
    tr.insertCell().textContent = v;
  }
  Object.assign(box.dataset, { kind: tk.kind, tokens: tk.tokens, chatTemplate: tk.chat_template });
}

$('seq-len').oninput = () => updatePlan();
$('format').onchange = () => {
  const v = $('format').value, c = choiceOf(v);
  // a menu entry sets the editor; "schemes per tensor" of another format starts it over there
  if (c.format.scheme_rules && (formatPreset(v) || schemes.formatId() !== c.format.id)) schemes.reset(v);
  showChoice();
  updatePlan();
};

// ---- converting ----
$('save-as').hidden = !window.showSaveFilePicker;
listeners.started.push((m) => { state.started = m; });
listeners.progress.push((m) => {
  const pct = m.source_total ? (100 * m.source_done) / m.source_total : 100;
  const mbs = m.seconds > 0 ? m.source_done / 1e6 / m.seconds : 0;
  const eta = m.source_done > 0 ? (m.seconds * (m.source_total - m.source_done)) / m.source_done : 0;
  $('progress-fill').style.transform = `scaleX(${(pct / 100).toFixed(4)})`;
  $('progress-text').textContent = `${pct.toFixed(1)}% · ${m.items_done}/${m.n_items} tensors · ${m.item_name} · ` +
    `${mbs.toFixed(1)} MB/s · ETA ${eta.toFixed(1)} s`;
});
listeners.done.push((m) => {
  state.summary = m.summary;
});

async function runConversion(target) {
  showError('');
  $('result').hidden = true;
  $('progress').hidden = false;
  $('progress-fill').style.transform = 'scaleX(0)';
  $('progress-text').textContent = 'Starting…';
  $('cancel').hidden = false;
  $('convert').disabled = $('save-as').disabled = true;
  state.converting = true;
  nibbles.converting(true);
  nibbles.setOutput(null);  // the previous output is replaced
  setState('converting');
  try {
    const options = { ...currentOptions(), chunk_mb: state.chunkMb };
    const format = choiceOf($('format').value).format;
    await call('convert', { options, target, threads: state.threads });
    const s = state.summary;
    await showResult(s, target, format);
    nibbles.setOutput(s);
    setState('done');
  } catch (e) {
    $('progress-text').textContent = e.cancelled ? 'Cancelled: no output file was kept.' : 'Failed: no output file was kept.';
    if (e.cancelled) setState('cancelled'); else showError(e.message);
  } finally {
    state.converting = false;
    nibbles.converting(false);
    $('cancel').hidden = true;
    $('convert').disabled = $('save-as').disabled = !state.plan;
  }
}

$('convert').onclick = () => runConversion({ kind: 'opfs', name: outputName() });
$('save-as').onclick = async () => {
  let handle;
  try {
    handle = await window.showSaveFilePicker({ suggestedName: outputName() });
  } catch (e) {
    if (e.name !== 'AbortError') showError(e.message);
    return;
  }
  runConversion({ kind: 'handle', handle, name: handle.name });
};
$('cancel').onclick = () => worker.postMessage({ type: 'cancel' });

// ---- verify ----
const VERIFY_PARAM_BUDGET = 64 * 2 ** 20;  // parameters the forward check may read in the tab
$('verify').onclick = async () => {
  const status = $('verify-status'), table = $('verify-table');
  status.textContent = 'Verifying…';
  status.className = 'verify-status';
  table.hidden = true;
  $('verify-engine').hidden = true;
  document.body.dataset.verify = 'running';
  try {
    const r = await call('verify', { paramBudget: VERIFY_PARAM_BUDGET });
    state.verify = r;
    const exact = r.tensors.filter((t) => t.max_abs_vs_fake_quant === 0).length;
    const f = r.forward;
    status.textContent = `${r.ok ? 'PASS' : 'FAIL'}: ${exact}/${r.tensors.length} tensors read back exactly; ` +
      (f.ran ? `forward pass (${f.architecture}, ${f.tokens.length} tokens) ${f.note}.` : `forward pass: ${f.note}.`) +
      ` ${r.seconds.toFixed(2)} s.`;
    status.classList.add(r.ok ? 'pass' : 'fail');
    table.replaceChildren();
    const head = table.insertRow();
    for (const h of ['layer', 'max |file − source as written|', 'max |as written − unquantized source|', 'within 1e-3'])
      head.append(Object.assign(document.createElement('th'), { textContent: h }));
    for (const l of f.layers) {
      const tr = table.insertRow();
      tr.dataset.layer = l.name;
      const bad = l.max_abs_file_vs_reference > f.tolerance;
      for (const v of [l.name, l.max_abs_file_vs_reference.toPrecision(3), l.max_abs_quantized_vs_source.toPrecision(3),
        bad ? '> 1e-3' : 'ok']) tr.insertCell().textContent = v;
      if (bad) tr.classList.add('fail');
    }
    table.hidden = f.layers.length === 0;
    showEngineCheck(r.w8a8);
    document.body.dataset.verify = r.ok ? 'pass' : 'fail';
  } catch (e) {
    status.textContent = 'Verify failed: ' + e.message;
    status.classList.add('fail');
    document.body.dataset.verify = 'error';
  }
};

// LEAP v2: what LEAP's engine computes with the file (its W8A8 arithmetic, emulated).
function showEngineCheck(w) {
  const el = $('verify-engine');
  el.hidden = !(w && w.ran);
  if (el.hidden) return;
  const logits = w.layers.find((l) => l.name === 'logits');
  const last = logits || w.layers[w.layers.length - 1];
  const broken = w.note.startsWith('this file breaks') ? 'T' + w.note.slice(1, w.note.indexOf('); ') + 1) + '. ' : '';
  el.textContent = `What LEAP's engine computes (W8A8: int8 activations too, groups of ${w.group_size}): ` + broken +
    (last ? `${last.name} within ${last.max_abs_vs_as_written.toPrecision(3)} of the fp32 model from this file ` +
      `(${last.max_abs_vs_source.toPrecision(3)} of the unquantized source` +
      (logits ? `; largest |logit| ${w.max_abs_logit_as_written.toPrecision(3)}), the same most likely next token at ` +
        `${w.top1_same_as_written} of ${w.positions} positions.` : ').') : '') +
    ' For information: not part of PASS/FAIL.';
  el.classList.toggle('fail', broken !== '');
}

async function showResult(s, target, format) {
  $('verify-status').textContent = '';
  $('verify-table').hidden = true;
  $('verify-engine').hidden = true;
  delete document.body.dataset.verify;
  const mbs = s.seconds > 0 ? s.breakdown.source_bytes / 1e6 / s.seconds : 0;
  $('result-text').textContent = `${target.name}: ${formatBytes(s.total_bytes)} written in ${s.seconds.toFixed(2)} s ` +
    `(${mbs.toFixed(1)} MB/s of source, ${s.worker_threads_used ?? 0} worker threads). ` +
    `Max quantization error ${Number(s.max_quant_error).toPrecision(3)}.`;
  renderBreakdown($('chart'), $('breakdown'), s.breakdown);
  // what the file is for, and how to run it, with its real name
  const use = useOf(format);
  $('run').hidden = !use.runs_in && !use.run_command;
  $('run-for').textContent = use.runs_in ? `${target.name}: ${format.name}, ${use.runs_in}.` : '';
  $('run-how').hidden = !use.run_command;
  const quoted = /^[\w.+-]+$/.test(target.name) ? target.name : `'${target.name.replace(/'/g, "'\\''")}'`;
  $('run-command').textContent = use.run_command.split('{file}').join(quoted);
  const a = $('download');
  if (target.kind === 'opfs') {
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle('leapconv-output');
    const file = await (await dir.getFileHandle(target.name)).getFile();
    if (a.href) URL.revokeObjectURL(a.href);
    a.href = URL.createObjectURL(file);
    a.download = target.name;
    a.textContent = `Download ${target.name} (${formatBytes(file.size)})`;
    a.hidden = false;
    a.click();
  } else {
    a.hidden = true;
  }
  $('result').hidden = false;
}

if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('sw.js').catch((e) => console.warn('service worker:', e.message));
}
