// The page: gathers the user's files, talks to the conversion worker, draws progress and the
// byte breakdown. Decisions (validation, sizes, encodings) come from the C++ core via the worker.
import { renderBreakdown, formatBytes } from './chart.js';
import { createNibbleView } from './nibbles.js';
import { createSchemeEditor, formatPreset } from './schemes.js';
import { catalog, setCatalog, menuEntries, wantedFile } from './catalog.js';

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
function showError(msg) {
  const el = $('error');
  el.textContent = msg;
  el.hidden = !msg;
  if (msg) setState('error');
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
  buildFormatMenu();
  schemes = createSchemeEditor({
    onChange() {
      if ($('format').value !== 'gguf-custom') $('format').value = 'gguf-custom';
      updatePlan();
    },
  });
  schemes.reset($('format').value);
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

// The format menu comes from the core's format table; the page adds two scheme-editor entries
// for the format that takes scheme rules. Those options always come from the scheme editor:
// the menu's entries set its default and preset, and editing it switches the menu to
// "schemes per tensor".
const PAGE_CHOICES = [
  { value: 'gguf-mixed', label: ', Q4 MLP + Q8 attention + F32 norms/embeddings', file_suffix: 'mixed' },
  { value: 'gguf-custom', label: ', schemes per tensor (as edited below)', file_suffix: 'custom' },
];
let schemes = null, nibbles = null;
function choices() {
  const rf = catalog.formats.find((f) => f.scheme_rules);
  return [...menuEntries(), ...PAGE_CHOICES.map((c) => ({ ...c, label: rf.name + c.label, format: rf }))];
}
const choiceOf = (v) => choices().find((c) => c.value === v);
function buildFormatMenu() {
  const sel = $('format');
  sel.replaceChildren(...choices().map((c) => Object.assign(document.createElement('option'), { value: c.value, textContent: c.label })));
  const rf = catalog.formats.find((f) => f.scheme_rules);
  sel.value = choices().find((c) => c.format === rf && c.options && c.options.scheme === rf.default_scheme).value;
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
  const gguf = choiceOf($('format').value).format.scheme_rules;  // the scheme editor applies
  $('schemes').hidden = !gguf;
  const seq = ++planSeq;
  state.planPending++;
  try {
    const plan = await call('plan', { options: currentOptions() });
    if (seq !== planSeq) return;  // a newer choice is on its way
    showError('');
    if (gguf) schemes.update(plan);
    const b = plan.breakdown;
    $('prediction').textContent = `Output: ${formatBytes(plan.total_bytes)} (${plan.total_bytes.toLocaleString('en')} bytes), ` +
      `${plan.tensors.length} tensors; ${(b.source_bytes / plan.total_bytes).toFixed(2)}× smaller than the source, ` +
      `${(b.fp32_baseline_bytes / plan.total_bytes).toFixed(2)}× smaller than FP32.`;
    state.plan = plan;
    // What the target engine makes of the file (LEAP: its KV caches' size for the seq_len).
    $('engine-options').hidden = !plan.engine;
    $('engine').hidden = !plan.engine;
    $('engine').textContent = plan.engine ? plan.engine.summary + '.' : '';
    if (plan.engine && !$('seq-len').value) $('seq-len').placeholder = String(plan.engine.seq_len);
    showWarnings(plan.warnings);
    $('convert').disabled = $('save-as').disabled = state.converting;
  } catch (e) {
    if (seq !== planSeq) return;
    state.plan = null;
    $('prediction').textContent = '';
    $('convert').disabled = true;
    $('save-as').disabled = true;
    showError(e.message);
  } finally {
    state.planPending--;
  }
}
$('seq-len').oninput = () => updatePlan();
$('format').onchange = () => {
  const v = $('format').value;
  if (formatPreset(v)) schemes.reset(v);
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
    await call('convert', { options, target, threads: state.threads });
    const s = state.summary;
    await showResult(s, target);
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
    for (const h of ['', 'max |file − source as written|', 'max |as written − unquantized source|', ''])
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

async function showResult(s, target) {
  $('verify-status').textContent = '';
  $('verify-table').hidden = true;
  $('verify-engine').hidden = true;
  delete document.body.dataset.verify;
  const mbs = s.seconds > 0 ? s.breakdown.source_bytes / 1e6 / s.seconds : 0;
  $('result-text').textContent = `${target.name}: ${formatBytes(s.total_bytes)} written in ${s.seconds.toFixed(2)} s ` +
    `(${mbs.toFixed(1)} MB/s of source, ${s.worker_threads_used ?? 0} worker threads). ` +
    `Max quantization error ${Number(s.max_quant_error).toPrecision(3)}.`;
  renderBreakdown($('chart'), $('breakdown'), s.breakdown);
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
