// The page: gathers the user's files, talks to the conversion worker, draws progress and the
// byte breakdown. Decisions (validation, sizes, encodings) come from the C++ core via the worker.
import { renderBreakdown, formatBytes, versus } from './chart.js';
import { createNibbleView } from './nibbles.js';
import { createSchemeEditor, formatPreset, pageChoices } from './schemes.js';
import { catalog, setCatalog, useOf, wantedFile, maybeImatrix, typeByShort } from './catalog.js';
import * as storage from './storage.js';
import * as openedFile from './opened_file.js';
import { rpc } from './rpc.js';
import * as capabilities from './capabilities.js';
import { startStreamedDownload, streamSaveReady } from './stream_save.js';

const $ = (id) => document.getElementById(id);
// chunkMb: the working set of one chunk; the tab's memory is about chunkMb x 3 x (threads + 2).
const state = { phase: 'starting', model: null, files: [], label: '', threads: 0, threaded: false, summary: null,
                chunkMb: 8, streamAboveBytes: capabilities.STREAM_ABOVE_BYTES, planPending: 0, converting: false, plan: null, written: null, refused: new Map(),
                // the existing file open in "3. The file" (web/opened_file.js holds it): { name, info } or null
                get opened() { const o = openedFile.opened(); return o ? { name: o.file.name, names: o.files.map((f) => f.name), info: o.info } : null; } };
window.__leapconv = state;  // for the end-to-end tests and the curious

// ---- worker RPC: web/rpc.js ----
const worker = new Worker('worker.js');
const listeners = { progress: [], started: [], done: [], phase: [] };
const call = rpc(worker, listeners);
worker.onerror = (e) => showError('The conversion worker failed to start: ' + (e.message || e));

// The converter starts in 1-3 s. Firefox ESR now and then never starts it: its thread pool's
// nested workers never load, and the tab is stuck (1-4 launches in 40 here, with or without the
// service worker or OPFS; a new worker in the same tab stalls too, and so does a reload; a new
// tab opened once the stuck one is closed starts, the first one opened at once may not). The
// cause is not found; the page says what to do if it has not started in SLOW_START_SECONDS
// (and goes on as usual if it starts after all).
const SLOW_START_SECONDS = 20;
function startConverter() {
  const slow = setTimeout(() => {
    state.slowStart = true;  // (for the tests)
    $('status').textContent = `The converter has not started in ${SLOW_START_SECONDS} s. If this stays, close this tab and ` +
      'open the page in a new one (if that one hangs too, close it and try once more): some browsers (Firefox here) ' +
      'now and then never start its worker threads in a tab.';
    $('status').classList.add('warn');
  }, SLOW_START_SECONDS * 1000);
  return call('init').finally(() => clearTimeout(slow));
}

// ---- the page's one state ----
// starting   the converter loads
// idle       no checkpoint open (error: the same, with the reason shown)
// opening    a checkpoint is being read
// ready      a checkpoint is open (cancelled, error: the same after a conversion that did not finish)
// converting a file is being written
// done       a file was written: "3. The file" describes it
// verifying  the written or opened file is being verified (in a worker of its own)
// inspecting an existing file (GGUF, GGUF-lite, LEAP) is being opened: its header, by slices
// opened     an existing file is open: "3. The file" describes it (a checkpoint may be open too)
// While work runs, whatever would change or lose it is off (applyLocks); the busy note says why.
const WORKING = new Set(['starting', 'opening', 'inspecting', 'converting']);
const busy = () => WORKING.has(state.phase) || state.phase === 'verifying';
function setState(s) {
  state.phase = s;
  document.body.dataset.state = s;
  applyLocks();
}
const BUSY_NOTES = {
  opening: 'Reading the checkpoint…',
  inspecting: 'Opening the file (its header only)…',
  converting: 'Converting: loading another checkpoint, changing the output and Verify are off until it finishes or you cancel it.',
  verifying: 'Verifying the file: Convert and loading another checkpoint or file are off until it finishes or you cancel it.',
};
function applyLocks() {
  const s = state.phase, working = WORKING.has(s), b = busy();
  for (const id of ['pick-folder', 'pick-files', 'demo', 'demo-fp8', 'pick-open', 'hub-open']) $(id).disabled = b;
  $('drop-target').setAttribute('aria-disabled', String(b));
  $('format').disabled = working;
  $('seq-len').disabled = working;
  $('split').disabled = $('model-name').disabled = $('pick-meta').disabled = $('clear-meta').disabled = working;
  if (schemes) schemes.setLocked(working);
  $('convert').disabled = $('save-as').disabled = b || !state.plan;
  $('verify').disabled = b || !verifyTarget();
  // (disabled for want of a checkpoint or of the file: said beside the button)
  const why = b ? '' : openedFile.opened() && !state.model ? 'Verify compares the file with the checkpoint it was made from: load that ' +
    'checkpoint above (its folder), then verify.' : state.written?.deleted ? 'The written file was deleted from this browser.' : '';
  $('verify-why').textContent = why;
  $('verify-why').hidden = !why;
  for (const btn of document.querySelectorAll('#kept button')) btn.disabled = b;
  // the skip links go to what is there: the output once a checkpoint is open, the result once written
  $('skip-output').hidden = $('output').hidden;
  $('skip-result').hidden = $('result').hidden;
  const note = BUSY_NOTES[s] || '';
  $('busy-note').textContent = note;
  $('busy-note').hidden = !note;
}

// keepState: an error that leaves the page's state as it is (a plan the chosen output refuses:
// the checkpoint stays open and another choice may do).
// from: 'plan' for a refused plan, which the next plan that succeeds takes away.
// err: a line, or an Error whose advice (the core's, in the user's terms: what happened and what
// to do) goes first, with the exact technical line under it.
function showError(err, { keepState = false, from = '' } = {}) {
  const el = $('error');
  const msg = typeof err === 'string' ? err : err.message, advice = typeof err === 'string' ? '' : err.advice || '';
  const line = (className, textContent) => Object.assign(document.createElement('p'), { className, textContent });
  el.replaceChildren(...(advice ? [line('error-what', advice)] : []), ...(msg ? [line('error-detail', msg)] : []));
  el.hidden = !msg;
  el.dataset.from = msg ? from : '';
  if (msg && !keepState) setState('error');
}
// The core's warnings (something may be off) and notes (what the file holds that is worth knowing).
function showWarnings(list, notes = []) {
  const el = $('warnings');
  const line = (mark, text) => Object.assign(document.createElement('p'), { textContent: `${mark} ${text}` });
  el.replaceChildren(...(list || []).map((w) => line('⚠', w)), ...(notes || []).map((n) => line('ℹ', n)));
  el.hidden = el.childElementCount === 0;
}

// What this browser can do (capabilities.js), and a sentence for each thing it cannot.
const can = capabilities.detectNow();
const caps = capabilities.detect().then((c) => {
  state.caps = c;
  const list = $('browser-limits');
  list.replaceChildren(...capabilities.limits(c).map((t) => Object.assign(document.createElement('li'), { textContent: t })));
  list.hidden = list.children.length === 0;
  return c;
});

const ready = Promise.all([startConverter(), caps]).then(([info]) => {  // (idle only once state.caps is known)
  state.threads = info.maxThreads;
  state.threaded = info.threaded;
  setCatalog(info.catalog);
  $('open-input').accept = catalog.formats.map((f) => f.extension).join(',');  // the core's formats
  // the files of a checkpoint the core reads: its shards, config.json, the tokenizer's files
  $('files-input').accept = [...new Set([catalog.shard_extension, ...catalog.checkpoint_files.map((n) => n.slice(n.lastIndexOf('.')))])].join(',');
  $('tagline-formats').textContent = catalog.formats.map((f) => f.name).join(', ').replace(/, ([^,]*)$/, ' or $1');
  buildFormatMenu();
  schemes = createSchemeEditor({
    onChange() {  // an edit: the menu says "schemes per tensor" of the editor's format
      const custom = `${schemes.formatId()}-custom`;
      if ($('format').value !== custom) $('format').value = custom;
      showChoice();
      updatePlan();
    },
    outputName: () => outputName(),
    llamaQuantize: () => call('tensorTypeFile', { options: currentOptions() }),
    imatrixName: () => (state.plan && state.plan.header && state.plan.header.imatrix) || '',  // (the core: when its type took it)
  });
  markMenu();
  const first = choices().find((c) => c.value === $('format').value && c.format.scheme_rules) ||
    choices().find((c) => c.format.scheme_rules && formatPreset(c.value));
  if (first) schemes.reset(first.value);
  showChoice();
  nibbles = createNibbleView(call);
  const why = self.crossOriginIsolated ? 'this browser gives the page no SharedArrayBuffer' : 'this page is not cross-origin isolated';
  $('status').textContent = info.threaded
    ? `Ready: WebAssembly SIMD with ${info.maxThreads} worker threads.`
    : `Ready, single-threaded: ${why}, so WebAssembly threads are off (conversion still works, only slower).`;
  $('status').classList.remove('ok', 'warn');
  $('status').classList.add(info.threaded ? 'ok' : 'warn');
  setState('idle');
}).catch((e) => showError('Could not load the converter: ' + e.message));

// Partial outputs left by a reload or a closed tab mid-conversion go at start-up; then the list
// of kept files. body[data-storage] = clean once done.
(async () => {
  await refreshKept();
  try {
    await storage.removePartials();
  } catch (e) {
    console.warn('storage clean-up:', e.message);
  }
  document.body.dataset.storage = 'clean';
  await refreshKept();
})();

// ---- gathering files ----
const wanted = (name) => wantedFile(name);  // the files the core reads (its catalog)

// Every file of the folder (its names say what kind of checkpoint it is), read or not.
async function filesFromDirectory(dir) {
  const files = [];
  for await (const entry of dir.values()) if (entry.kind === 'file') files.push(await entry.getFile());
  return files;
}

// The same from a dropped folder where the drop gives no handles (Firefox, Safari): the
// FileSystemDirectoryEntry reader, which hands its entries over in batches until an empty one.
async function filesFromEntry(dir) {
  const reader = dir.createReader(), files = [];
  for (;;) {
    const batch = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!batch.length) return files;
    for (const e of batch) if (e.isFile) files.push(await new Promise((resolve, reject) => e.file(resolve, reject)));
  }
}

// The last part of the model path a JSON file names under `key` (config.json's _name_or_path,
// adapter_config.json's base_model_name_or_path), as a folder of that name would be called; ''
// without one (the core reports a file that does not parse).
async function lastPartNamed(file, key) {
  try {
    const n = file && JSON.parse(await file.text())[key];
    return typeof n === 'string' ? n.split(/[\\/]/).filter(Boolean).pop() || '' : '';
  } catch {
    return '';
  }
}

// Folders dropped together, each { name, files }: a LoRA adapter's folder (adapter_config.json,
// no config.json of its own) takes its base model's config.json from the folder its
// base_model_name_or_path names, else from the one other folder with a config.json (the CLI's
// --lora ADAPTER --model BASE); without an adapter, the first folder opens, as one dropped alone.
async function openFolders(folders) {
  const has = (folder, name) => folder.files.find((f) => f.name === name);
  const adapter = folders.find((d) => has(d, 'adapter_config.json') && !has(d, 'config.json'));
  const bases = folders.filter((d) => d !== adapter && has(d, 'config.json'));
  if (!adapter) return openFiles(folders[0].files, folders[0].name);
  if (!bases.length) return openFiles(adapter.files, adapter.name);  // (the core says what it lacks)
  const named = await lastPartNamed(has(adapter, 'adapter_config.json'), 'base_model_name_or_path');
  const base = bases.find((d) => d.name === named) || (bases.length === 1 ? bases[0] : null);
  if (!base) {
    clearModel();
    showError(`${adapter.name} is a LoRA adapter and ${bases.map((d) => d.name).join(', ')} are models: drop the adapter ` +
      `with its base model's folder only${named ? ` (its adapter_config.json names ${named})` : ''}.`);
    return;
  }
  return openFiles(adapter.files, adapter.name, null, has(base, 'config.json'));
}

// Loose files have no folder to name the model after: config.json's _name_or_path (its last
// part, as a folder of that name would be), else the shard's name when there is one (as the CLI
// labels a lone file).
async function singleLabel(files) {
  const last = await lastPartNamed(files.find((f) => f.name === 'config.json'), '_name_or_path');
  if (last) return last;
  const shards = files.filter((f) => f.name.endsWith('.safetensors'));
  return shards.length === 1 ? shards[0].name : 'checkpoint';
}

// What people drop that is not a safetensors checkpoint, said before the core is asked. The Git
// LFS pointer is recognised by its first bytes (a byte check only: the core would read it as a
// safetensors header and report an impossible header length).
const LFS_MAGIC = 'version https://git-lfs.github.com/spec/';
async function inputProblem(all, label) {
  const names = all.map((f) => f.name);
  const list = (xs) => xs.slice(0, 3).join(', ') + (xs.length > 3 ? ` and ${xs.length - 3} more` : '');
  for (const f of all.filter((x) => wanted(x.name) && x.size < 1024 && x instanceof Blob)) {  // (a Hub shard: hub.js checked it)
    const head = await f.slice(0, 200).text();
    if (head.startsWith(LFS_MAGIC)) {
      const size = Number((head.match(/\nsize (\d+)/) || [])[1]);
      return `${f.name} is a Git LFS pointer (${f.size} bytes), not the file itself` +
        (size ? ` (${formatBytes(size)})` : '') + ': the folder was cloned without Git LFS. ' +
        'Run "git lfs install" and "git lfs pull" in it (or download the file itself), then load the folder again.';
    }
  }
  if (names.some((n) => n.endsWith('.safetensors'))) return '';
  const pickles = names.filter((n) => /\.(bin|pt|pth|ckpt)$/i.test(n) && !/\.gguf/i.test(n));
  const ggufs = names.filter((n) => /\.gguf$/i.test(n));
  if (ggufs.length)
    return `${label}: ${list(ggufs)} does not start as a GGUF file does (its first bytes are not "GGUF"): not a GGUF file, ` +
      'or not the whole of one. This page converts Hugging Face checkpoints (*.safetensors) and opens GGUF, GGUF-lite and LEAP files.';
  if (pickles.length)
    return `${label}: ${list(pickles)} holds PyTorch pickle weights; this page reads only *.safetensors shards ` +
      '(a pickle can run code when it is loaded, and needs PyTorch to read). Most models on the Hugging Face Hub also ' +
      'have *.safetensors files: download those, or save the model once with save_pretrained(folder, safe_serialization=True).';
  return `${label}: no .safetensors files found (drop a checkpoint folder or its .safetensors files).`;
}

// A new checkpoint: nothing of the previous one stays on screen (its progress, warnings, result,
// verify, the nibble view's written file).
let namePlanned = '', nameTimer = 0;  // the model name the plan has, and its replan's timer
function clearModel() {
  showError('');
  showWarnings([]);
  state.model = null;
  $('model-name').value = namePlanned = '';  // (--model-name and --metadata are the model's: not carried to the next)
  state.metadataFile = null;
  showMetadataFile();
  state.imatrix = null;
  $('imatrix').hidden = true;
  state.refused = new Map();
  markMenu();
  state.plan = null;
  state.summary = null;
  state.written = null;
  state.verify = null;
  state.refused = new Map();
  $('result').hidden = true;
  $('skip-result').hidden = true;
  $('progress').hidden = true;
  $('model').hidden = true;
  $('output').hidden = true;
  $('schemes').hidden = true;
  $('format-off').hidden = true;
  clearVerify();
  if (nibbles) nibbles.setModel(null);
  if (openedFile.opened()) showOpenedFile();  // a file opened stays: it is not the checkpoint's result
}

// ---- an existing file (GGUF, GGUF-lite, LEAP) ----
// Files dropped or picked that are not a checkpoint's: the core says whether one is a file it
// reads (its magic); that one opens, by its header only.
async function openIfExistingFile(all) {
  if (all.some((f) => f.name.endsWith(catalog.shard_extension))) return false;
  const candidates = all.filter((f) => !wanted(f.name));
  if (!candidates.length) return false;
  const hits = await call('recognize', { files: candidates });
  if (!hits.length) return false;
  // GGUF files dropped together are the parts of one split file (the core checks that they are)
  const gguf = hits.filter((h) => h.format === 'gguf');
  await openExisting(gguf.length > 1 ? gguf.map((h) => candidates[h.index]) : [candidates[hits[0].index]]);
  return true;
}
async function openExisting(files) {
  if (busy()) return;
  showError('');
  clearVerify();
  state.written = null;
  $('progress').hidden = true;
  $('result').hidden = true;
  openedFile.clearOpened();
  setState('inspecting');
  try {
    const info = await call('openFile', { files });
    // the parts in the core's order (split.no), whatever order they were picked in
    const ordered = info.parts ? info.parts.map((n) => files.find((f) => f.name === n)) : files;
    openedFile.showOpened(ordered, info, state.model && state.model.source_bytes);
    if (nibbles) nibbles.setOutput(null);  // the written file is not what "3. The file" shows any more
    setState('opened');
    revealResult();
  } catch (e) {
    openedFile.clearOpened();
    showError(e);  // the core names the file
  } finally {
    applyLocks();
    syncBreakdowns();
  }
}
function showOpenedFile() {
  const o = openedFile.opened();
  openedFile.showOpened(o.files, o.info, state.model && state.model.source_bytes);
}
// What Verify reads: the written file, or the opened one when a checkpoint is loaded to check it against.
function verifyTarget() {
  // (a streamed file is in the downloads, where the page cannot read it: opened from there, it verifies)
  if (state.written && !state.written.deleted && state.written.kind !== 'stream') return { kind: 'written' };
  if (openedFile.opened() && state.model) return { kind: 'opened' };
  return null;
}
// A tensor selected in the opened file's table goes to the block view (block_view.js's hook): it
// says where a block is, and these bytes are read from the File, a slice at a time.
document.addEventListener('leapconv:opened-tensor', (e) => {
  const { file, tensor, reveal } = e.detail;
  const blocks = window.__leapconv.blocks;
  if (!tensor.decodable || !blocks) return;
  blocks.showTensor({ readAt: async (o, n) => new Uint8Array(await file.slice(o, o + n).arrayBuffer()), tensor, label: file.name });
  if (reveal) $('blocks').scrollIntoView({ block: 'start' });
});
$('pick-open').onclick = () => { if (!refuseWhileBusy()) $('open-input').click(); };
$('open-input').onchange = () => {
  const files = [...$('open-input').files];  // one file, or every part of a split GGUF
  $('open-input').value = '';
  if (files.length) openExisting(files);
};

// hub: the model on the Hub the files come from ({ repo, revision }, web/hub.js), or null; baseConfig: a LoRA
// adapter's base model's config.json (a File from the folder dropped with it), or null.
async function openFiles(all, label, hub = null, baseConfig = null) {
  if (busy() && !(hub && state.phase === 'opening')) return;  // (a Hub model: its listing set 'opening')
  await ready;
  if (await openIfExistingFile(all)) return;
  clearModel();
  const problem = await inputProblem(all, label);
  if (problem) {
    showError(problem);
    return;
  }
  const files = all.filter((f) => wanted(f.name));
  setState('opening');
  try {
    state.model = await call('open', { files, label, baseConfig });
    state.model.hub = hub;
    state.files = files;
    state.label = label;
    state.baseConfig = baseConfig;  // a LoRA adapter's base model's config.json, from another folder
    renderModel(state.model);
    schemes.setModel(state.model, label);
    nibbles.setModel(state.model);
    $('output').hidden = false;
    if (openedFile.opened()) showOpenedFile();  // its breakdown against this checkpoint now
    await openImatrixBeside(all.filter((f) => !wanted(f.name) && maybeImatrix(f.name)));
    await probeFormats();
    setState('ready');
    await updatePlan();
    // Convert in sight: the model's facts can push it below the fold
    if ($('convert').getBoundingClientRect().bottom > innerHeight) $('output').scrollIntoView({ block: 'start' });
  } catch (e) {
    clearModel();
    showError(e);
  }
}

// ---- an importance matrix (llama-imatrix's) beside the checkpoint ----
// The first file the core reads as one; llama-quantize's types use it while "use it" is ticked.
async function openImatrixBeside(files) {
  state.imatrix = null;
  let refused = '';
  await call('closeImatrix', {});
  for (const file of files) {
    try {
      state.imatrix = { file, info: await call('openImatrix', { file }) };
      break;
    } catch (e) {
      refused = e.message;  // (named by the core)
    }
  }
  renderImatrix(refused);
}
function renderImatrix(refused = '') {
  markMenu();
  const box = $('imatrix');
  box.hidden = !state.imatrix && !refused;
  if (!state.imatrix) {
    $('imatrix-text').textContent = refused ? `Not an importance matrix: ${refused}` : '';
    $('imatrix-use-row').hidden = true;
    return;
  }
  const i = state.imatrix.info;
  const cover = i.weights != null ? `; weights for ${i.covered} of the ${i.weights} weights llama-quantize quantizes` +
    (i.missing && i.missing.length ? ` (none for ${i.missing.join(', ')})` : '') : '';
  $('imatrix-text').textContent = `Importance matrix ${state.imatrix.file.name} (llama-imatrix, ${i.format}): ${i.entries} entries` +
    (i.chunks ? ` from ${i.chunks} chunks` : '') + (i.datasets.length ? ` of ${i.datasets.join(', ')}` : '') + cover +
    '. llama-quantize\'s types (Q4_K_M, IQ4_XS, ...) are quantized with its weights; Q2_K_S needs one.';
  $('imatrix-use-row').hidden = false;
}
$('imatrix-use').onchange = () => { markMenu(); updatePlan(); };

// A load asked for while work runs is refused with the reason (the buttons are off; a drop is not).
function refuseWhileBusy() {
  if (!busy()) return false;
  $('busy-note').classList.remove('flash');
  void $('busy-note').offsetWidth;
  $('busy-note').classList.add('flash');
  return true;
}

$('pick-folder').onclick = async () => {
  if (refuseWhileBusy()) return;
  if (can.folderPicker) {
    try {
      const dir = await window.showDirectoryPicker();
      await openFiles(await filesFromDirectory(dir), dir.name);
    } catch (e) {
      if (e.name !== 'AbortError') showError(e);
    }
  } else {
    $('folder-input').click();
  }
};
$('pick-files').onclick = () => { if (!refuseWhileBusy()) $('files-input').click(); };
async function fromInput(input) {
  const files = [...input.files];
  if (!files.length) return;
  input.value = '';
  // webkitdirectory gives every file below the folder: keep the folder's own files
  const top = files.filter((f) => !f.webkitRelativePath || f.webkitRelativePath.split('/').length <= 2);
  const label = files[0].webkitRelativePath ? files[0].webkitRelativePath.split('/')[0] : await singleLabel(files);
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
  if (refuseWhileBusy()) return;
  const items = [...e.dataTransfer.items].filter((i) => i.kind === 'file');
  if (items.length && items[0].getAsFileSystemHandle) {
    const handles = await Promise.all(items.map((i) => i.getAsFileSystemHandle()));
    const dirs = handles.filter((h) => h && h.kind === 'directory');
    if (dirs.length) return openFolders(await Promise.all(dirs.map(async (d) => ({ name: d.name, files: await filesFromDirectory(d) }))));
    const files = await Promise.all(handles.filter(Boolean).map((h) => h.getFile()));
    return openFiles(files, await singleLabel(files));
  }
  const dirs = items.map((i) => i.webkitGetAsEntry?.()).filter((en) => en && en.isDirectory);
  if (dirs.length) return openFolders(await Promise.all(dirs.map(async (d) => ({ name: d.name, files: await filesFromEntry(d) }))));
  const files = [...e.dataTransfer.files];
  openFiles(files, await singleLabel(files));
};
// The drop zone's own button: Enter or Space opens the folder picker, as a click does.
$('drop-target').onclick = () => $('pick-folder').click();
$('drop-target').onkeydown = (e) => {
  if (e.key !== 'Enter' && e.key !== ' ') return;
  e.preventDefault();
  $('pick-folder').click();
};

// A model on the Hugging Face Hub (web/hub.js, loaded on first use): its files listed and
// resolved, then opened as a folder is. The token stays in this tab's memory unless "remember" is
// ticked (then in this browser's localStorage, until unticked).
const TOKEN_KEY = 'leapconv-hub-token';
try {
  const kept = localStorage.getItem(TOKEN_KEY);
  if (kept) [$('hub-token').value, $('hub-remember').checked] = [kept, true];
} catch { /* no storage: nothing remembered */ }
$('hub-form').onsubmit = async (e) => {
  e.preventDefault();
  if (refuseWhileBusy()) return;
  await ready;
  let hub, id;
  try {
    hub = await import('./hub.js');
    id = hub.parseModelId($('hub-id').value);
  } catch (err) {
    showError(hub ? err.message : `Could not load the page's Hub client (${err.message}): reload the page while online.`);
    return;
  }
  const token = $('hub-token').value.trim();
  try {
    if ($('hub-remember').checked && token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* no storage */ }
  clearModel();
  setState('opening');
  try {
    const got = await hub.openFromHub({ ...id, token }, wanted, (text) => { $('busy-note').textContent = text; });
    await openFiles(got.files, got.label, { repo: got.repo, revision: got.revision });
  } catch (err) {
    clearModel();
    showError(err.message);
  }
};

// The demo checkpoints (web/demo/manifest.json, made by scripts/build.sh): one button each.
async function loadDemo(button) {
  if (refuseWhileBusy()) return;
  try {
    const manifest = await (await fetch('demo/manifest.json')).json();
    const demo = manifest.demos.find((d) => d.button === button);
    if (!demo) throw new Error(`no demo for ${button} in demo/manifest.json`);
    const files = await Promise.all(demo.files.map(async (name) => {
      const r = await fetch('demo/' + demo.folder + '/' + name);
      if (!r.ok) throw new Error(`demo file ${name}: HTTP ${r.status}`);
      return new File([await r.blob()], name);
    }));
    await openFiles(files, demo.folder);
  } catch (e) {
    showError('Could not load the demo model: ' + e.message);
  }
}
$('demo').onclick = () => loadDemo('demo');
$('demo-fp8').onclick = () => loadDemo('demo-fp8');

// ---- model and plan ----
function renderModel(m) {
  const el = $('model');
  const cfg = m.config || {};
  // every stored tensor (a quantized checkpoint's scales and packed codes too): values and bytes by dtype
  const dtypes = (m.source_by_dtype || []).map((d) => `${d.dtype} (${(m.dtypes[d.dtype] / 1e6).toFixed(2)} M values, ${formatBytes(d.bytes)})`).join(', ');
  const rows = [
    ['Checkpoint', m.label],
    ...(m.hub ? [['From', `the Hugging Face Hub: ${m.hub.repo}@${m.hub.revision}, its shards read by range as they are converted`]] : []),
    ['Architecture', (m.architecture || 'unknown (no config.json / params.json)') + (m.family ? ` (family: ${m.family})` : '')],
    ...(m.scope ? [['Converted', m.scope]] : []),
    ['Formats', (m.formats || []).map((f) => (f.ok ? `${f.name}: yes` : `${f.name}: no (${f.reason})`)).join('; ')],
    ['Parameters', m.parameters.toLocaleString('en')],
    ['Dtypes', dtypes],
    ['Shards', m.shards.map((s) => `${s.name.split('/').pop()} (${formatBytes(s.bytes)})`).join(', ')],
    ['Tensors', String(m.tensors.length)],
    ['Other files', (m.side_files || []).map((f) => `${f.name} (${formatBytes(f.bytes)})`).join(', ') || 'none (no tokenizer files)'],
  ];
  if (m.quantization) rows.push(['Quantized', `${m.quantization.summary}: ` + (m.quantization.nvfp4_weights
    ? "NVFP4 weights kept as ggml's NVFP4 blocks in GGUF, as llama.cpp's converter keeps them (decoded for LEAP and GGUF-lite)"
    : "decoded as llama.cpp's converter decodes it")]);
  if (m.experts) rows.push(['Experts', `${m.experts.count} a layer, ${m.experts.used} used per token` +
    (m.experts.shared ? `, ${m.experts.shared} shared (every token)` : '')]);
  if (cfg.hidden_size) rows.push(['Shape', `hidden ${cfg.hidden_size}, layers ${cfg.num_hidden_layers}, heads ${cfg.num_attention_heads}/${cfg.num_key_value_heads ?? cfg.num_attention_heads}, vocab ${cfg.vocab_size}`]);
  const table = document.createElement('table');
  table.className = 'facts';
  for (const [k, v] of rows) {
    const tr = table.insertRow();
    tr.append(Object.assign(document.createElement('th'), { textContent: k, scope: 'row' }));
    tr.insertCell().textContent = v;
  }
  const details = document.createElement('details');
  details.innerHTML = '<summary>All tensors</summary>';
  const wrap = Object.assign(document.createElement('div'), { className: 'scroll-x' });
  const tt = document.createElement('table');
  tt.className = 'tensors';
  const head = tt.createTHead().insertRow();
  for (const h of ['name', 'dtype', 'shape', 'bytes']) head.append(Object.assign(document.createElement('th'), { textContent: h, scope: 'col' }));
  const body = tt.createTBody();
  for (const t of m.tensors) {
    const tr = body.insertRow();
    for (const v of [t.name, t.dtype, `[${t.shape.join(', ')}]`, formatBytes(t.bytes)]) tr.insertCell().textContent = v;
  }
  wrap.append(tt);
  details.append(wrap);
  el.replaceChildren(Object.assign(document.createElement('div'), { className: 'scroll-x' }), details);
  el.firstChild.append(table);
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
  markMenu();
}

// Formats that cannot take the open checkpoint: each format's first menu entry is planned, and
// one the core refuses is off in the menu with the core's reason beside it.
async function probeFormats() {
  state.refused = new Map();
  for (const f of catalog.formats) {
    try {
      await call('plan', { options: f.menu[0].options });
    } catch (e) {
      state.refused.set(f.id, e.message);
    }
  }
  markMenu();
  const off = [...state.refused].map(([id, why]) => `${catalog.formats.find((f) => f.id === id).name}: ${why}`);
  $('format-off').textContent = off.length ? 'Not for this checkpoint. ' + off.join(' ') : '';
  $('format-off').hidden = !off.length;
  $('format-off').dataset.formats = [...state.refused.keys()].join(' ');
  // (the chosen entry stays chosen, refused or not: its plan says why and what else takes the
  // checkpoint; another format is the user's choice, never made for them)
  showChoice();
}

// The plan's error when the chosen format refuses the checkpoint: one sentence in the user's
// terms, the formats that take it, and the core's line under them.
function refusal(e) {
  const f = choiceOf($('format').value).format;
  if (!state.refused.has(f.id)) return e;
  const others = catalog.formats.filter((x) => !state.refused.has(x.id));
  const take = others.length ? ` ${others.map((x) => `${x.name} (${x.runs_in})`).join(' and ')} ${others.length > 1 ? 'take' : 'takes'} ` +
    'it: choose it in the menu above if that is what you want.' : ' No format here takes it.';
  return Object.assign(new Error(e.message), { advice: `${f.name} cannot be written for this checkpoint.${e.advice ? ` ${e.advice}` : ''}` + take });
}

// The menu's entries off for a reason: the format refuses the checkpoint (probeFormats), or a
// preset llama-quantize writes only with an importance matrix (the core's needs_imatrix) while
// none is in use. The reason is in the entry's text and in a line under the menu; a chosen entry
// stays chosen (its plan names what is missing).
const NEEDS_IMATRIX = 'needs an importance matrix';
const imatrixInUse = () => !!state.imatrix && $('imatrix-use').checked;
function markMenu() {
  const needs = (c) => !!c.needs_imatrix && !imatrixInUse();
  for (const o of $('format').options) {
    const c = choiceOf(o.value), why = state.refused.get(c.format.id);
    o.disabled = !!why || needs(c);
    o.textContent = c.label + (why ? ' (not for this checkpoint)' : needs(c) ? ` (${NEEDS_IMATRIX})` : '');
    o.title = why || (needs(c) ? `llama-quantize writes ${c.file_suffix} only with an importance matrix (--imatrix)` : '');
  }
  const off = choices().filter((c) => needs(c) && !state.refused.has(c.format.id));
  $('format-needs').textContent = off.length ? `${off.map((c) => c.file_suffix).join(', ')}: ${NEEDS_IMATRIX} ` +
    (state.imatrix ? '(tick "use it" above).' : '(llama-quantize refuses them without one): drop llama-imatrix\'s file ' +
      '(imatrix.gguf, or a legacy .dat) with the checkpoint.') : '';
  $('format-needs').hidden = !off.length;
  if (schemes) schemes.markDefaults((scheme) => off.some((c) => c.options && c.options.scheme === scheme) ? NEEDS_IMATRIX : '',
    (type) => (!imatrixInUse() && (typeByShort(type) || {}).needs_imatrix ? NEEDS_IMATRIX : ''));
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
  let o = c.format.scheme_rules ? schemes.options() : c.options;
  const seq = parseInt($('seq-len').value, 10);  // taken by formats whose plan has an engine (LEAP)
  if (seq > 0) o = { ...o, seq_len: seq };
  if (c.format.id === 'gguf' && $('split').value) o = { ...o, split_max_size: $('split').value };  // parts, as gguf-split
  if (c.format.id === 'gguf' && state.imatrix && $('imatrix-use').checked) o = { ...o, imatrix: true };  // (the core: llama-quantize's types)
  if (c.format.id === 'gguf' && $('model-name').value.trim()) o = { ...o, model_name: $('model-name').value.trim() };  // --model-name
  if (c.format.id === 'gguf' && state.metadataFile) o = { ...o, metadata_text: state.metadataFile.text, metadata_file: state.metadataFile.name };  // --metadata
  return o;
}
// A file made with the importance matrix is named apart from the plain one of the same type, so
// that both are kept side by side (and "Try it" can compare them).
function outputName() {
  const c = choiceOf($('format').value);
  const base = state.label.replace(/\.safetensors$/, '').replace(/[^\w.-]+/g, '_') || 'model';
  const weighted = state.plan && state.plan.header && state.plan.header.imatrix;  // (the core: only llama-quantize's types take it)
  return `${base}-${c.file_suffix}${weighted ? '-imatrix' : ''}${c.format.extension}`;
}

// The prediction's line: size, and against the source and FP32 in words; a file larger than the
// source says so, and why.
function predictionText(plan) {
  const b = plan.breakdown, total = plan.total_bytes;
  let s = `Output: ${formatBytes(total)} (${total.toLocaleString('en')} bytes), ${b.by_dtype.reduce((a, d) => a + d.tensors, 0)} tensors; ` +
    `${versus(b.source_bytes, total, 'the source')}, ${versus(b.fp32_baseline_bytes, total, 'FP32')}.`;
  if (b.source_bytes && total > b.source_bytes * 1.05) {  // what ratioWords calls larger
    const wide = b.by_dtype.filter((d) => d.dtype === 'F32' && d.values_bytes > 0.05 * total);
    s += ' Larger than the checkpoint' + (wide.length ? `: F32 stores 4 bytes a weight (${formatBytes(wide[0].values_bytes)} here)` +
      ' where the source has fewer' : '') + '.';
  }
  return s;
}

let planSeq = 0;
async function updatePlan() {
  if (!state.model) return;
  const rules = choiceOf($('format').value).format.scheme_rules;  // the scheme editor applies
  const seq = ++planSeq;
  state.planPending++;
  document.body.dataset.plan = 'pending';
  $('plan-pending').hidden = !$('prediction').textContent;  // (the size shown is the previous choice's)
  try {
    const plan = await call('plan', { options: currentOptions() });
    if (seq !== planSeq) return;  // a newer choice is on its way
    if ($('error').dataset.from === 'plan') showError('');
    state.plan = plan;  // (before the editor draws: its file name and --imatrix follow the plan)
    $('schemes').hidden = !rules;
    if (rules) schemes.update(plan);
    $('prediction').textContent = predictionText(plan);
    $('prediction').dataset.total = plan.total_bytes;
    $('prediction').classList.toggle('larger', plan.breakdown.source_bytes > 0 && plan.total_bytes > plan.breakdown.source_bytes * 1.05);
    showVocabulary(plan.header && plan.header.tokenizer);
    document.body.dataset.plan = 'ok';
    $('split-options').hidden = $('meta-options').hidden = choiceOf($('format').value).format.id !== 'gguf';
    if (plan.header && plan.header.split) $('prediction').textContent += ` In ${plan.header.split.count} parts.`;
    // What the target engine makes of the file (LEAP: its KV caches' size for the seq_len).
    $('engine-options').hidden = !plan.engine;
    $('engine').hidden = !plan.engine;
    $('engine').textContent = plan.engine ? plan.engine.summary + '.' : '';
    if (plan.engine && !$('seq-len').value) $('seq-len').placeholder = String(plan.engine.seq_len);
    if (!state.converting) showWarnings(plan.warnings, plan.notes);
  } catch (e) {
    if (seq !== planSeq) return;
    // nothing half-done: no size, no tokenizer facts, no scheme table, no Convert
    state.plan = null;
    $('prediction').textContent = '';
    delete $('prediction').dataset.total;
    $('engine').hidden = true;  // (its seq_len input stays: a refused seq_len is fixed there)
    $('schemes').hidden = true;
    showVocabulary(null);
    document.body.dataset.plan = 'error';
    showError(refusal(e), { keepState: true, from: 'plan' });
  } finally {
    state.planPending--;
    if (seq === planSeq) $('plan-pending').hidden = true;
    applyLocks();
    syncBreakdowns();
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
$('split').onchange = () => updatePlan();
// --model-name and --metadata: the core checks the file (one line naming it and the key) when it plans
// (replanned as it is typed, not when it loses focus: the replan's "Recomputing…" line would move
// Convert under a click that took the focus away, and the click would be lost)
function planName() {
  clearTimeout(nameTimer);
  const v = $('model-name').value.trim();
  if (v === namePlanned) return;
  namePlanned = v;
  updatePlan();
}
$('model-name').oninput = () => { clearTimeout(nameTimer); nameTimer = setTimeout(planName, 300); };
$('model-name').onchange = planName;
$('pick-meta').onclick = () => $('meta-input').click();
$('meta-input').onchange = async () => {
  const f = $('meta-input').files[0];
  $('meta-input').value = '';
  if (!f) return;
  state.metadataFile = { name: f.name, text: await f.text() };
  showMetadataFile();
  updatePlan();
};
$('clear-meta').onclick = () => {
  state.metadataFile = null;
  showMetadataFile();
  updatePlan();
};
function showMetadataFile() {
  const m = state.metadataFile;
  $('meta-file').textContent = m ? m.name : '';
  $('meta-file').hidden = $('clear-meta').hidden = !m;
}
$('format').onchange = () => {
  if (WORKING.has(state.phase)) return;  // the select is off then; never change a running conversion
  const v = $('format').value, c = choiceOf(v);
  // a menu entry sets the editor; "schemes per tensor" of another format picks that format up
  // where it was left (its choices are kept per format)
  if (c.format.scheme_rules) {
    if (formatPreset(v)) schemes.reset(v);
    else if (schemes.formatId() !== c.format.id) schemes.resume(c.format);
  }
  showChoice();
  updatePlan();
};

// One breakdown at a time: while the scheme editor's choices are the written file's, its
// predicted breakdown (the same) gives way to the written file's in "3. The file".
function syncBreakdowns() {
  const same = !!state.written && !$('result').hidden && !$('schemes').hidden &&
    state.written.optionsKey === JSON.stringify(currentOptions());
  $('scheme-chart').hidden = same;
  $('scheme-breakdown').hidden = same;
  $('scheme-same').hidden = !same;
}

// ---- converting ----
$('save-as').hidden = !can.savePicker;
let lastAnnounced = 0;
listeners.started.push((m) => { state.started = m; });
// The first seconds, before a tensor is done: what the worker is doing, counted as they pass.
const clock = { timer: null, what: '', since: 0 };
function stopClock() {
  clearInterval(clock.timer);
  clock.timer = null;
}
listeners.phase.push((m) => {
  clock.what = m.what;
  clock.since = performance.now() - m.seconds * 1000;
  const draw = () => { $('progress-text').textContent = `Starting: ${clock.what}… ${((performance.now() - clock.since) / 1000).toFixed(1)} s`; };
  draw();
  clock.timer ??= setInterval(draw, 200);
});
// The rate, smoothed (an exponential moving average over about 2 s of progress), and no time
// left until it has 3 samples over at least a second: a first figure from one early burst is wrong.
const rate = { t: 0, done: 0, bps: 0, n: 0 };
listeners.progress.push((m) => {
  stopClock();
  const dt = m.seconds - rate.t;
  if (dt > 0) {
    const now = (m.source_done - rate.done) / dt;
    rate.bps = rate.n ? rate.bps + (1 - Math.exp(-dt / 2)) * (now - rate.bps) : now;
    Object.assign(rate, { t: m.seconds, done: m.source_done, n: rate.n + 1 });
  }
  const pct = m.source_total ? (100 * m.source_done) / m.source_total : 100;
  const settled = rate.n >= 3 && m.seconds >= 1 && rate.bps > 0;
  const left = settled ? `${((m.source_total - m.source_done) / rate.bps).toFixed(0)} s left` : 'estimating the time left';
  $('progress-fill').style.transform = `scaleX(${(pct / 100).toFixed(4)})`;
  $('progress-bar').setAttribute('aria-valuenow', pct.toFixed(0));
  $('progress-bar').setAttribute('aria-valuetext', `${pct.toFixed(0)}%, tensor ${m.items_done} of ${m.n_items}`);
  $('progress-text').textContent = `${pct.toFixed(1)}% · ${m.items_done} of ${m.n_items} tensors · ${m.item_name} · ` +
    `${(rate.bps / 1e6).toFixed(1)} MB/s${state.model?.hub ? ` from the Hub (${formatBytes(m.source_done)} read)` : ''} · ${m.done ? 'done' : left}`;
  // for screen readers: every quarter, not every redraw
  const q = Math.floor(pct / 25) * 25;
  if (q > lastAnnounced && q < 100) { lastAnnounced = q; $('progress-live').textContent = `Converting: ${q}% done.`; }
});
// The bar from empty: a new conversion, or one cancelled or failed (nothing was kept).
function resetBar() {
  stopClock();
  Object.assign(rate, { t: 0, done: 0, bps: 0, n: 0 });
  $('progress-fill').style.transform = 'scaleX(0)';
  $('progress-bar').setAttribute('aria-valuenow', '0');
  $('progress-bar').removeAttribute('aria-valuetext');
}
listeners.done.push((m) => {
  state.summary = m.summary;
});

function choiceLabel(c) {
  if (c.custom) return `${c.format.name}, schemes per tensor (default ${schemes.options().scheme.toUpperCase()})`;
  return c.label;
}

async function runConversion(target) {
  if (busy() || !state.plan) return;
  const choice = choiceOf($('format').value);
  const chosen = currentOptions();
  const options = { ...chosen, chunk_mb: state.chunkMb };
  showError('');
  $('result').hidden = true;
  $('skip-result').hidden = true;
  clearVerify();
  state.written = null;
  if (openedFile.opened()) {  // the result will describe the written file
    openedFile.clearOpened();
    call('closeFile').catch(() => {});
  }
  $('progress').hidden = false;
  resetBar();
  $('progress-text').textContent = 'Starting…';
  lastAnnounced = 0;
  $('progress-live').textContent = `Converting to ${target.name}${options.split_max_size ? ' (in parts)' : ''}.`;
  $('cancel').hidden = false;
  state.converting = true;
  nibbles.converting(true);
  nibbles.setOutput(null);  // the previous output is replaced
  setState('converting');
  let download = null;
  try {
    if (target.kind === 'stream') {  // the download starts now and takes the bytes as they come
      download = await startStreamedDownload(target.name, state.plan.total_bytes);
      target = { ...target, port: download.port, size: state.plan.total_bytes };
    }
    await call('convert', { options, target, threads: state.threads }, download ? [download.port] : []);
    const s = state.summary;
    state.written = { name: s.outputs[0], names: s.outputs, kind: target.kind, handle: target.handle, files: s.files, format: choice.format,
                      choice: choiceLabel(choice), optionsKey: JSON.stringify(chosen), summary: s, deleted: false };
    await showResult(s, state.written);
    nibbles.setOutput(target.kind === 'stream' ? null : s);  // (a streamed file is out of the page's reach)
    $('progress-live').textContent = `Done: ${s.outputs.length > 1 ? `${s.outputs.length} parts, ` : ''}${s.outputs[0]}, ` +
      `${formatBytes(s.total_bytes)}.`;
    setState('done');
    revealResult();
  } catch (e) {
    resetBar();
    $('progress-text').textContent = e.cancelled ? 'Cancelled: no output file was kept.' : 'Failed: no output file was kept.';
    $('progress-live').textContent = $('progress-text').textContent;
    if (e.cancelled) setState('cancelled'); else showError(e);
  } finally {
    download?.done();
    state.converting = false;
    nibbles.converting(false);
    $('cancel').hidden = true;
    applyLocks();
    syncBreakdowns();
    refreshKept();
  }
}

// The result in view, and the keyboard there (its heading takes focus).
function revealResult() {
  const r = $('result-title');
  r.scrollIntoView({ block: 'start' });
  r.focus({ preventScroll: true });
}

// Into the browser's private storage where it opens; else into the worker's memory, or, for a
// file larger than state.streamAboveBytes that the core can give front to back, straight to the
// downloads (web/stream_save.js).
function sinkKind() {
  if (state.caps.opfs) return 'opfs';
  const large = state.plan.total_bytes > state.streamAboveBytes;
  return large && state.caps.streamSave && state.plan.in_order && streamSaveReady() ? 'stream' : 'memory';
}
$('convert').onclick = () => {
  if (busy() || !state.plan) return;  // (nothing loaded yet: no name, no sink to choose)
  runConversion({ kind: sinkKind(), name: outputName() });
};
$('save-as').onclick = async () => {
  if (busy() || !state.plan) return;
  const split = Boolean(state.plan.header && state.plan.header.split);
  if (split && !can.folderPicker) {
    showError('This browser cannot save several files to a folder: use Convert, then download each part.', { keepState: true });
    return;
  }
  let handle;
  try {  // a split file's parts go into a folder the user picks
    handle = split ? await window.showDirectoryPicker({ mode: 'readwrite' })
      : await window.showSaveFilePicker({ suggestedName: outputName() });
  } catch (e) {
    if (e.name !== 'AbortError') showError(e, { keepState: true });
    return;
  }
  runConversion(split ? { kind: 'directory', handle, name: outputName() } : { kind: 'handle', handle, name: handle.name });
};
$('cancel').onclick = () => worker.postMessage({ type: 'cancel' });

// ---- verify ----
// In a worker of its own (worker.js?verify), in the core's steps with progress: Cancel ends that
// worker. The converting worker stays free for plans meanwhile.
const VERIFY_PARAM_BUDGET = 64 * 2 ** 20;  // parameters the forward check may read in the tab
let verifyRun = null;  // { worker, call }
function clearVerify() {
  if (verifyRun) stopVerify();
  $('verify-status').textContent = '';
  $('verify-status').className = 'verify-status';
  $('verify-table').hidden = true;
  $('verify-engine').hidden = true;
  $('verify-progress').hidden = true;
  $('verify-cancel').hidden = true;
  delete document.body.dataset.verify;
}
function stopVerify() {
  const v = verifyRun;
  verifyRun = null;
  v.worker.terminate();
  v.call.failAll(Object.assign(new Error('cancelled'), { cancelled: true }));
}
$('verify-cancel').onclick = () => { if (verifyRun) stopVerify(); };

// 1.0000000474974513e-3 (a float's 1e-3) -> "1e-3"
const tol = (x) => { const v = Number(Number(x).toPrecision(2)); return v > 0 && v < 0.01 ? v.toExponential() : String(v); };
$('verify').onclick = async () => {
  const target = verifyTarget();
  if (busy() || !target) return;
  const written = state.written, opened = openedFile.opened();
  const status = $('verify-status'), table = $('verify-table'), bar = $('verify-progress');
  setState('verifying');
  status.textContent = 'Verifying…';
  status.className = 'verify-status';
  table.hidden = true;
  $('verify-engine').hidden = true;
  bar.removeAttribute('value');  // indeterminate until the core says how many steps
  bar.removeAttribute('aria-valuetext');
  bar.hidden = false;
  $('verify-cancel').hidden = false;
  document.body.dataset.verify = 'running';
  state.verifyProgress = [];  // every step the worker reported: { step, n_steps }
  const w = new Worker('worker.js?verify');
  // The core verifies in steps: a tensor each, then the forward check; k of N is one-based.
  const onProgress = (m) => {
    if (verifyRun !== run) return;
    state.verifyProgress.push({ step: m.step, n_steps: m.n_steps });
    bar.max = m.n_steps;
    bar.value = m.step;
    const text = `step ${m.step} of ${m.n_steps}: ${m.what}`;
    bar.setAttribute('aria-valuetext', text);
    status.textContent = `Verifying: ${text} · ${m.seconds.toFixed(0)} s`;
  };
  const run = { worker: w, call: rpc(w, { 'verify-progress': [onProgress] }) };
  verifyRun = run;
  try {
    const output = target.kind === 'opened' ? opened.files
      : written.kind === 'memory' ? written.files
      : written.kind === 'opfs' ? await Promise.all(written.names.map((n) => storage.keptFile(n)))
      : written.kind === 'directory' ? await Promise.all(written.names.map(async (n) => (await written.handle.getFileHandle(n)).getFile()))
      : [await written.handle.getFile()];
    await run.call('init');
    const r = await run.call('verifyFile', { files: state.files, label: state.label, baseConfig: state.baseConfig, output, paramBudget: VERIFY_PARAM_BUDGET });
    state.verify = r;
    showVerify(r);
  } catch (e) {
    if (e.cancelled) {
      status.textContent = 'Verify cancelled.';
      document.body.dataset.verify = 'cancelled';
    } else {
      status.textContent = 'Verify failed: ' + e.message;
      status.classList.add('fail');
      document.body.dataset.verify = 'error';
    }
  } finally {
    if (verifyRun === run) stopVerify();
    bar.hidden = true;
    $('verify-cancel').hidden = true;
    if (state.phase === 'verifying') setState(state.written ? 'done' : openedFile.opened() ? 'opened' : state.model ? 'ready' : 'idle');
  }
};

// Each column says which bar it is held to: the tensors to difference 0, the file's model to the
// source model as written within the tolerance; what quantization costs is held to none.
function showVerify(r) {
  const status = $('verify-status'), table = $('verify-table');
  const exact = r.tensors.filter((t) => t.max_abs_vs_fake_quant === 0).length;
  const f = r.forward, bar = tol(f.tolerance ?? 1e-3);
  status.textContent = `${r.ok ? 'PASS' : 'FAIL'}: ${exact} of ${r.tensors.length} tensors read back exactly (bar: difference 0); ` +
    (f.ran ? `forward pass (${f.architecture}, ${f.tokens.length} tokens) ${f.note} (bar: ≤ ${bar} per layer).` : `forward pass: ${f.note}.`) +
    ` ${r.seconds.toFixed(2)} s.`;
  status.classList.add(r.ok ? 'pass' : 'fail');
  table.replaceChildren();
  const head = table.createTHead().insertRow();
  for (const h of ['layer', `max |file − source as written| (bar: ≤ ${bar})`, `file vs as written`,
    'max |as written − unquantized source| (what quantization costs; no bar)'])
    head.append(Object.assign(document.createElement('th'), { textContent: h, scope: 'col' }));
  const body = table.createTBody();
  for (const l of f.layers) {
    const tr = body.insertRow();
    tr.dataset.layer = l.name;
    const bad = l.max_abs_file_vs_reference > (f.tolerance ?? 1e-3);
    tr.append(Object.assign(document.createElement('th'), { textContent: l.name, scope: 'row' }));
    for (const v of [l.max_abs_file_vs_reference.toPrecision(3), bad ? `FAIL: > ${bar}` : `pass: ≤ ${bar}`,
      l.max_abs_quantized_vs_source.toPrecision(3)]) tr.insertCell().textContent = v;
    if (bad) tr.classList.add('fail');
  }
  table.hidden = f.layers.length === 0;
  showEngineCheck(r.w8a8);
  document.body.dataset.verify = r.ok ? 'pass' : 'fail';
}

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

// A helper thread the browser did not start in time (Firefox ESR now and then never loads a
// nested worker): the converter did its work itself. Said, since it is slower, with what helps.
function lateThreads(s) {
  const late = [s.reader_late && 'reading the files', s.writer_late && 'writing the file'].filter(Boolean);
  return late.length ? ` The browser did not start the thread for ${late.join(' or ')} in time, so the converter did it ` +
    'itself: the same bytes, more slowly (a new tab usually helps).' : '';
}

// The result describes the file that was written: its name, the choice it was written with, its
// size against the source, and its breakdown.
async function showResult(s, written) {
  clearVerify();
  openedFile.hideOpened();
  const b = s.breakdown;
  const mbs = s.seconds > 0 ? b.source_bytes / 1e6 / s.seconds : 0;
  const parts = written.names.length > 1 ? ` (${written.names.length} parts: ${written.names[0]} … ${written.names.at(-1)})` : '';
  $('result-text').textContent = `${written.name}${parts}: ${written.choice}. ${formatBytes(s.total_bytes)} ` +
    `(${s.total_bytes.toLocaleString('en')} bytes), ${versus(b.source_bytes, s.total_bytes, 'the source')}; ` +
    `written in ${s.seconds.toFixed(2)} s, the first ${s.setup_seconds.toFixed(2)} s planning and opening the files ` +
    `(${mbs.toFixed(1)} MB/s of source, ${s.worker_threads_used ?? 0} worker threads). ` +
    (Number(s.max_quant_error) === 0 ? 'Lossless: every weight is stored exactly as in the source.'
      : `Largest quantization error of a weight: ${Number(s.max_quant_error).toPrecision(3)}.`) +
    lateThreads(s) +
    (written.kind === 'stream' ? ' Streamed to your downloads as it was written (this browser keeps no files for the page): ' +
      'to look inside it or verify it, open it from there with “Open a GGUF, GGUF-lite or LEAP file…”.' : '');
  $('result').dataset.file = written.name;
  renderBreakdown($('chart'), $('breakdown'), b);
  // what the file is for, and how to run it, with its real name
  const use = useOf(written.format);
  $('run').hidden = !use.runs_in && !use.run_command;
  $('run-for').textContent = use.runs_in ? `${written.name}: ${written.format.name}, ${use.runs_in}.` : '';
  $('run-how').hidden = !use.run_command;
  const quoted = /^[\w.+-]+$/.test(written.name) ? written.name : `'${written.name.replace(/'/g, "'\\''")}'`;
  $('run-command').textContent = use.run_command.split('{file}').join(quoted);
  const a = $('download'), list = $('download-parts');
  for (const old of list.querySelectorAll('a')) URL.revokeObjectURL(old.href);
  list.replaceChildren();
  list.hidden = true;
  a.hidden = true;
  const fileOf = (name) => (written.kind === 'memory' ? written.files[written.names.indexOf(name)] : storage.keptFile(name));
  const offered = written.kind === 'opfs' || written.kind === 'memory';  // (a picked file is already where the user wanted it)
  if (offered && written.names.length === 1) {
    const file = await fileOf(written.name);
    if (a.href) URL.revokeObjectURL(a.href);
    a.href = URL.createObjectURL(file);
    a.download = written.name;
    a.textContent = `Download ${written.name} (${formatBytes(file.size)})`;
    a.hidden = false;
    a.click();
  } else if (offered) {  // a split file: every part, each its own download
    for (const name of written.names) {
      const file = await fileOf(name);
      const link = Object.assign(document.createElement('a'), { href: URL.createObjectURL(file), download: name,
        className: 'download', textContent: `Download ${name} (${formatBytes(file.size)})` });
      const li = document.createElement('li');
      li.append(link);
      list.append(li);
    }
    list.hidden = false;
    for (const link of list.querySelectorAll('a')) link.click();
  }
  $('result').hidden = false;
  $('skip-result').hidden = false;
}

// ---- files kept in this browser ----
const dateOf = (ms) => new Date(ms).toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' });
function downloadFile(file, name) {
  const a = Object.assign(document.createElement('a'), { href: URL.createObjectURL(file), download: name });
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}
// A kept file deleted while it is the result: the result says so, and nothing reads it any more.
function forget(name) {
  const w = state.written;
  if (!w || w.kind !== 'opfs' || !w.names.includes(name)) return;
  w.deleted = true;
  $('download').hidden = true;
  $('download-parts').hidden = true;
  $('result-text').textContent += ` (Deleted from this browser since.)`;
  nibbles.setOutput(null);
  clearVerify();
  applyLocks();
}
async function refreshKept() {
  let files = [];
  try {
    files = await storage.keptFiles();
  } catch (e) {
    console.warn('kept files:', e.message);
  }
  const total = files.reduce((a, f) => a + f.size, 0);
  const est = await storage.estimate();
  $('kept').hidden = files.length === 0;
  $('kept').dataset.files = files.length;
  $('kept').dataset.bytes = total;
  document.dispatchEvent(new Event('kept-changed'));  // web/try_model.js lists them too
  $('kept-summary').textContent = `${files.length} file${files.length === 1 ? '' : 's'}, ${formatBytes(total)} in all, ` +
    'kept in this browser\'s storage for this page (a download is a second copy, in your Downloads folder)' +
    (est && est.quota ? `; the browser lets this page keep up to ${formatBytes(est.quota)}` : '') +
    '. A file stays here until you delete it (or clear this site\'s data).';
  const table = $('kept-table');
  table.replaceChildren();
  if (!files.length) return;
  const head = table.createTHead().insertRow();
  for (const h of ['file', 'size', 'written', 'actions']) head.append(Object.assign(document.createElement('th'), { textContent: h, scope: 'col' }));
  const body = table.createTBody();
  for (const f of files) {
    const tr = body.insertRow();
    tr.dataset.file = f.name;
    tr.append(Object.assign(document.createElement('th'), { textContent: f.name, scope: 'row' }));
    tr.insertCell().textContent = formatBytes(f.size);
    tr.cells[1].dataset.bytes = f.size;
    tr.insertCell().textContent = dateOf(f.lastModified);
    const acts = tr.insertCell();
    const dl = Object.assign(document.createElement('button'), { type: 'button', textContent: 'Download', className: 'kept-download' });
    dl.setAttribute('aria-label', `Download ${f.name}`);
    dl.onclick = async () => downloadFile(await storage.keptFile(f.name), f.name);
    const rm = Object.assign(document.createElement('button'), { type: 'button', textContent: 'Delete', className: 'kept-delete' });
    rm.setAttribute('aria-label', `Delete ${f.name}`);
    rm.onclick = async () => {
      if (busy()) return;
      await storage.removeKept(f.name);
      forget(f.name);
      await refreshKept();
    };
    acts.append(dl, ' ', rm);
  }
  applyLocks();
}
$('kept-clear').onclick = async () => {
  if (busy()) return;
  const files = await storage.keptFiles();
  if (!files.length || !window.confirm(`Delete the ${files.length} file${files.length === 1 ? '' : 's'} kept in this browser ` +
    `(${formatBytes(files.reduce((a, f) => a + f.size, 0))})? Downloaded copies stay.`)) return;
  await storage.removeAllKept();
  for (const f of files) forget(f.name);
  await refreshKept();
};

// Leaving or reloading the page mid-conversion or mid-verify loses that work: the browser asks
// first (a partial output left behind goes at the next start-up).
window.addEventListener('beforeunload', (e) => {
  if (state.phase !== 'converting' && state.phase !== 'verifying') return;
  e.preventDefault();
  e.returnValue = '';
});

if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('sw.js').catch((e) => console.warn('service worker:', e.message));
}
