// "Try it in the tab": runs a GGUF kept in this browser (or picked from disk) in llama.cpp compiled
// to WebAssembly (npm @wllama/wllama 2.4.0, served from the page's own origin, loaded only when
// asked for), shows the generated text and the next-token top-k at each step, and puts two files
// side by side (top-1 agreement and KL divergence). The figures' definitions: web/try_math.js.
//
// wllama's low-level calls only: token ids in (tokenize, decode), ids and probabilities out
// (getLogits), a token's bytes as bytes (detokenize). Nothing of a model's output goes through
// text or JSON, so a byte token (SentencePiece's <0xA8>, half of a character in a byte-level BPE)
// is shown as the byte it is, never an error. (wllama 3's completion API writes its results as
// JSON with nlohmann's strict UTF-8 check and throws on such a token.)
import * as storage from './storage.js';
import { formatBytes } from './chart.js';
import { HEAP_MAX, RESERVE, CTX, fitsInTab, compareRuns, chatPrompt, tokenText, probText } from './try_math.js';
import { rpc } from './rpc.js';
import { detectNow, NO_MEMORY64 } from './capabilities.js';

const $ = (id) => document.getElementById(id);
const picked = new Map();  // name -> File picked from disk this session

// ---- the engines: one wllama instance a file (its own worker and heap) ----

let lib = null;              // the wllama module, imported on first use
const engines = new Map();   // key -> { w, file, key, info, threads, pieces }: file is a model (modelOf)
// A and B of a side by side stay loaded between runs while both fit in this much (each file's
// weights sit in its own heap, next to RESERVE for the KV cache and compute buffers).
const KEEP_LOADED = 2 * 2 ** 30;
const nativeLog = [];        // llama.cpp's last lines: the only account of a C++ exception

const keep = (...a) => {
  nativeLog.push(a.map(String).join(' '));
  if (nativeLog.length > 40) nativeLog.shift();
};
const logger = { debug() {}, log: keep, info: keep, warn: keep, error: keep };

// An error from inside wllama, as one line that says what happened.
function explain(e, what) {
  if (nativeLog.some((l) => l.includes('bad_alloc')) || /out of memory|Cannot enlarge memory/i.test(e?.message ?? '')) {
    return `${what}: llama.cpp ran out of its WebAssembly heap (${formatBytes(HEAP_MAX)} for the weights, the KV cache ` +
      'and the compute buffers); it was stopped.';
  }
  if (e && (e.name === 'RuntimeError' || e instanceof WebAssembly.RuntimeError)) {
    const last = [...nativeLog].reverse().find((l) => /error|exception|failed|abort/i.test(l));
    return `${what}: llama.cpp stopped inside (${last || e.message}); it was restarted.`;
  }
  return `${what}: ${e && e.message ? e.message : e}`;
}

async function closeEngine(e) {
  engines.delete(e.key);
  await e.w.exit().catch(() => {});
}

// The same file again (a kept file is a new File object each time it is asked for) stays loaded;
// another one is loaded next to those in `stay` when they fit together, else alone.
const keyOf = (m) => m.parts.map((f) => `${f.name}\u0000${f.size}\u0000${f.lastModified}`).join('\u0001');
async function openEngine(file, stay = []) {
  const key = keyOf(file);
  if (engines.has(key)) return engines.get(key);
  if (!fitsInTab(file.size)) throw new Error(tooBig(file));
  let room = KEEP_LOADED - file.size;
  for (const e of [...engines.values()]) {
    if (stay.includes(e.key) && e.file.size <= room) room -= e.file.size;
    else await closeEngine(e);
  }
  lib ??= await import('./vendor/wllama.js');
  nativeLog.length = 0;
  const w = new lib.Wllama({
    'single-thread/wllama.wasm': new URL('vendor/wllama-st.wasm', document.baseURI).href,
    'multi-thread/wllama.wasm': new URL('vendor/wllama-mt.wasm', document.baseURI).href,
  }, { logger, suppressNativeLog: false });
  // Threads only on a cross-origin-isolated page (shared memory). (The page is idle while it
  // runs: one thread a core, up to 4.)
  const threads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
  try {
    // Batches of 64 tokens keep llama.cpp's logits and compute buffers small (they grow with
    // n_batch x n_vocab), so that RESERVE holds them next to the KV cache even for 128k-token vocabularies.
    await w.loadModel(file.parts, {  // a split file: every part, in order
      n_ctx: CTX, n_batch: 64, n_threads: threads, flash_attn: false, cache_type_k: 'f32', cache_type_v: 'f32',
    });
  } catch (e) {
    await w.exit().catch(() => {});
    throw new Error(explain(e, `${file.name} did not load`));
  }
  $('try').dataset.loads = Number($('try').dataset.loads || 0) + 1;
  const e = { w, file, key, info: w.getLoadedContextInfo(), threads: w.isMultithread() ? w.getNumThreads() : 1, pieces: new Map() };
  engines.set(key, e);
  return e;
}

// Stop: ends the run between two positions.
let stopper = null;  // the running run's AbortController
const stopped = () => Object.assign(new Error('stopped'), { stopped: true });
function checkStop() {
  if (stopper?.signal.aborted) throw stopped();
}

// A call into llama.cpp. A C++ exception leaves that wasm instance unusable: it is dropped.
async function call(e, what, fn) {
  try {
    return await fn(e.w);
  } catch (err) {
    await closeEngine(e);
    throw new Error(explain(err, what));
  }
}

// A token's bytes, as llama.cpp writes it (special tokens by their text), asked once per file.
async function pieceOf(e, id) {
  if (!e.pieces.has(id)) e.pieces.set(id, await call(e, `${e.file.name}: token ${id}`, (w) => w.detokenize([id])));
  return e.pieces.get(id);
}

// The k most likely next tokens after what was decoded: [{ id, bytes, logprob }], highest first.
// (wllama's getLogits: a float softmax over the whole vocabulary.)
async function topK(e, k, what) {
  const top = await call(e, what, (w) => w.getLogits(k));
  if (!top.length || top.some((t) => !(t.p >= 0))) {
    throw new Error(`${what}: llama.cpp's next-token probabilities are not numbers (a logit too large for its float softmax)`);
  }
  return Promise.all(top.map(async (t) => ({ id: t.token, bytes: await pieceOf(e, t.token), logprob: Math.log(t.p) })));
}

// One pass over ids from an empty KV cache: the first `batch` decoded at once, then one at a time,
// the top-k after each (tops[i]: after ids[0..batch + i]); next(tops) gives the next id to decode,
// or null to end (greedy generation), when ids run out. onPos(tops) after each position.
async function pass(e, ids, { batch, k, next = () => null, onPos = () => {} }) {
  const what = e.file.name;
  await call(e, what, (w) => w.kvClear());
  const tops = [];
  let at = Math.max(1, batch);
  await call(e, what, (w) => w.decode(ids.slice(0, at), {}));
  for (;;) {
    checkStop();
    tops.push(await topK(e, k, `${what} after ${at} tokens`));
    onPos(tops);
    const id = at < ids.length ? ids[at] : next(tops);
    if (id === null || at >= CTX) return tops;
    checkStop();
    await call(e, what, (w) => w.decode([id], {}));
    at++;
  }
}

// The prompt's token ids as llama.cpp reads it: special tokens parsed, BOS first when the file asks
// for it (tokenizer.ggml.add_bos_token) or the chat template begins with it.
async function promptIds(e, text, bosFirst) {
  const ids = await call(e, `${e.file.name}: the prompt`, (w) => w.tokenize(text, true));
  const bos = e.info.token_bos;
  if ((e.info.add_bos_token || bosFirst) && bos >= 0 && ids[0] !== bos) ids.unshift(bos);
  if (!ids.length) throw new Error('The prompt is empty: type a few words.');
  return ids;
}

// ---- the files ----

const tooBig = (f) => `${f.name} (${formatBytes(f.size)}) is too big for this tab: llama.cpp's WebAssembly heap ` +
  `holds at most ${formatBytes(HEAP_MAX)} (wllama's memory64 build), and the weights, the KV cache and the ` +
  `compute buffers must all fit there (${formatBytes(RESERVE)} kept for the latter): files up to ` +
  `${formatBytes(HEAP_MAX - RESERVE)} run. Use llama.cpp natively (llama-cli -m ${f.name}).`;

// A model Try it runs: one GGUF, or the parts of a split one (llama-gguf-split's names,
// <base>-00001-of-00003.gguf, ...), which load together and read as one file: { name, size, parts,
// missing } (missing: names of absent parts). Its name is the first part's.
const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;
function modelsOf(files) {
  const models = new Map();
  for (const f of files) {
    const m = SPLIT.exec(f.name);
    const key = m ? `${m[1]}\u0000${m[3]}` : f.name;
    if (!models.has(key)) {
      const names = m ? Array.from({ length: Number(m[3]) }, (_, k) => `${m[1]}-${String(k + 1).padStart(5, '0')}-of-${m[3]}.gguf`)
        : [f.name];
      models.set(key, { name: names[0], names, byName: new Map() });
    }
    models.get(key).byName.set(f.name, f);
  }
  return [...models.values()].map((m) => ({ name: m.name, parts: m.names.map((n) => m.byName.get(n)).filter(Boolean),
    missing: m.names.filter((n) => !m.byName.has(n)), size: [...m.byName.values()].reduce((n, f) => n + f.size, 0) }));
}
const modelLabel = (m) => (m.parts.length > 1 || m.missing.length ? `${m.name} … (${m.parts.length + m.missing.length} parts)` : m.name);

async function fileOf(value) {
  const [where, name] = [value.slice(0, value.indexOf(':')), value.slice(value.indexOf(':') + 1)];
  const files = where === 'picked' ? [...picked.values()] : await storage.keptFiles();
  const m = modelsOf(files.filter((f) => /\.gguf$/i.test(f.name))).find((x) => x.name === name);
  if (!m) throw new Error(`${name} is gone`);
  if (m.missing.length) throw new Error(`${m.missing[0]} is missing: a split model's parts load together`);
  const parts = where === 'picked' ? m.parts : await Promise.all(m.parts.map((f) => storage.keptFile(f.name)));
  return { name: m.name, size: m.size, parts };
}

async function refresh() {
  let kept = [];
  try {
    kept = (await storage.keptFiles()).filter((f) => /\.gguf$/i.test(f.name));
  } catch (e) {
    console.warn('try it: kept files:', e.message);
  }
  const entry = (where, m) => ({ value: `${where}:${m.name}`, size: m.size, missing: m.missing,
    label: `${modelLabel(m)} (${formatBytes(m.size)}, ${where === 'kept' ? 'kept' : 'from disk'})` +
      (m.missing.length ? `: ${m.missing.length} part${m.missing.length > 1 ? 's' : ''} missing` : '') });
  const entries = [...modelsOf(kept).map((m) => entry('kept', m)),
    ...modelsOf([...picked.values()].filter((f) => /\.gguf$/i.test(f.name))).map((m) => entry('picked', m))];
  // (A with nothing to run says so in its one entry rather than being an empty box)
  for (const [id, none] of [['try-a', entries.length ? null : 'no GGUF yet'], ['try-b', 'none: one file']]) {
    const sel = $(id), was = sel.value;
    sel.replaceChildren(...(none ? [new Option(none, '')] : []),
      ...entries.map((e) => Object.assign(new Option(e.label + (fitsInTab(e.size) ? '' : ': too big for this tab'), e.value),
        { disabled: !fitsInTab(e.size) || e.missing.length > 0 })));
    if ([...sel.options].some((o) => o.value === was)) sel.value = was;
  }
  $('try').dataset.files = entries.length;
  $('try-run').disabled = entries.length === 0 || !(await runnable);
  $('try-empty').hidden = entries.length > 0;
  await describe();
}

// Before anything loads: whether each chosen file fits in wllama's heap.
async function describe() {
  const lines = [];
  for (const id of ['try-a', 'try-b']) {
    if (!$(id).value) continue;
    const f = await fileOf($(id).value).catch(() => null);
    if (!f) continue;
    lines.push(fitsInTab(f.size) ? `${f.name}: ${formatBytes(f.size)}, fits in the tab's ${formatBytes(HEAP_MAX)} heap.` : tooBig(f));
  }
  $('try-size').textContent = lines.join(' ');
}

// ---- running ----

let running = false;
function setStatus(text, state) {
  $('try-status').textContent = text;
  $('try').dataset.state = state;
}

// A token's text in a cell of its own direction (an Arabic token does not reorder its row).
const tokenCell = (bytes) => Object.assign(document.createElement('bdi'), { textContent: JSON.stringify(tokenText(bytes)) });
const tokenWithP = (t) => {
  const span = document.createElement('span');
  span.className = 'try-token';
  span.append(tokenCell(t.bytes), ` ${probText(t.logprob)}`);
  return span;
};

// The prompt as sent: the text, or in chat mode the file's template's rendering of it:
// { text, bosFirst }.
async function promptFor(e, text) {
  const template = e.w.getChatTemplate();
  const box = $('try-rendered');
  box.hidden = !$('try-chat').checked;
  if (!$('try-chat').checked) return { text, bosFirst: false };
  if (!template) {
    box.textContent = `${e.file.name} has no chat template (tokenizer.chat_template): the prompt goes as plain text.`;
    box.dataset.rendered = '';
    return { text, bosFirst: false };
  }
  const { Template } = await import('./vendor/jinja.js');
  let r;
  try {
    r = chatPrompt(Template, template, [{ role: 'user', content: text }]);
  } catch (err) {
    throw new Error(`${e.file.name}: its chat template does not render (@huggingface/jinja: ${err.message})`);
  }
  box.textContent = r.text;
  box.dataset.rendered = r.text;
  return r;
}

function drawSteps(name, generated, steps) {
  const box = document.createElement('div');
  box.className = 'try-run';
  const h = document.createElement('h3');
  h.textContent = name;
  const text = document.createElement('p');
  text.className = 'try-text';
  text.textContent = generated;
  const table = document.createElement('table');
  table.className = 'try-steps';
  const cap = table.createCaption();
  cap.textContent = 'At each step, the next-token probabilities (top-k of the full softmax; greedy: the first is taken)';
  table.createTHead().insertRow().append(...['step', 'taken', 'top-k'].map((t) => Object.assign(document.createElement('th'), { textContent: t, scope: 'col' })));
  const body = table.createTBody();
  steps.forEach((s, i) => {
    const row = body.insertRow();
    row.dataset.id = s.id;
    row.dataset.top = JSON.stringify(s.top.map((t) => [t.id, t.logprob]));
    row.insertCell().textContent = i + 1;
    row.insertCell().append(tokenCell(s.bytes));
    const cell = row.insertCell();
    s.top.forEach((t, j) => cell.append(...(j ? ['  ·  '] : []), tokenWithP(t)));
  });
  box.append(h, text, table);
  return box;
}

// The text of generated bytes so far: whole characters as they read, a byte that does not begin
// or continue one as U+FFFD (an unfinished character at the end waits for its next byte).
const textOf = (bytes) => new TextDecoder().decode(Uint8Array.from(bytes.slice(0, bytes.length - unfinished(bytes))));
function unfinished(bytes) {
  for (let i = 1; i <= Math.min(3, bytes.length); i++) {
    const b = bytes[bytes.length - i];
    if ((b & 0xc0) !== 0x80) return (b >= 0xc0 && i < (b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2)) ? i : 0;
  }
  return 0;
}

async function run() {
  if (running) return;
  running = true;
  stopper = new AbortController();
  $('try-run').disabled = true;
  $('try-stop').disabled = false;
  $('try-out').replaceChildren();
  $('try-compare').replaceChildren();
  const n = Math.max(1, Math.min(256, Number($('try-n').value) || 16));
  const k = Math.max(1, Math.min(100, Number($('try-k').value) || 5));
  try {
    const fileA = await fileOf($('try-a').value);
    const fileB = $('try-b').value ? await fileOf($('try-b').value) : null;
    const keyB = fileB && keyOf(fileB);
    setStatus(`Loading ${fileA.name} into llama.cpp (WebAssembly)…`, 'loading');
    const a = await openEngine(fileA, [keyB]);
    $('try').dataset.threads = a.threads;
    const prompt = await promptFor(a, $('try-prompt').value);
    const ids = await promptIds(a, prompt.text, prompt.bosFirst);
    const P = ids.length;
    if (P >= CTX) throw new Error(`The prompt is ${P} tokens: Try it reads at most ${CTX - 1} (n_ctx ${CTX}). Shorten it.`);
    const threads = `${a.threads} thread${a.threads > 1 ? 's' : ''}`;
    setStatus(`Running ${fileA.name} (${threads})…`, 'running');
    const out = $('try-out');
    Object.assign(out.dataset, { promptTokens: P, promptIds: JSON.stringify(ids) });
    const live = Object.assign(document.createElement('p'), { className: 'try-text' });
    out.append(live);
    // A: greedy from the prompt; with a B, one position at a time through the prompt too (the
    // prompt's positions are compared), else the prompt in one batch.
    const first = fileB ? 1 : P;
    const steps = [];
    const gen = () => steps.flatMap((s) => [...s.bytes]);
    const took = (tops) => {
      const top = tops[tops.length - 1];
      if (first + tops.length - 1 < P) return;
      steps.push({ id: top[0].id, bytes: top[0].bytes, logprob: top[0].logprob, top });
      live.textContent = textOf(gen());
      setStatus(`Running ${fileA.name} (${threads}): token ${steps.length} of ${n}…`, 'running');
    };
    const next = () => {
      const last = steps[steps.length - 1];
      return steps.length < n && !a.w.isTokenEOG(last.id) && P + steps.length < CTX ? last.id : null;
    };
    let topsA;
    try {
      topsA = await pass(a, ids, { batch: first, k, next, onPos: took });
    } catch (err) {
      if (steps.length) {
        out.replaceChildren(drawSteps(`${fileA.name} (the first ${steps.length} tokens)`, textOf(gen()), steps));
        if (!err.stopped) err.message += ` (after ${steps.length} token${steps.length === 1 ? '' : 's'}, shown)`;
      }
      throw err;
    }
    out.replaceChildren(drawSteps(fileA.name, textOf(gen()), steps));
    Object.assign(out.dataset, { prompt: prompt.text, ids: JSON.stringify(steps.map((s) => s.id)) });
    if (fileB) {
      // B reads the same token ids, the prompt and then A's generated tokens, one at a time.
      const rows = [...ids.slice(1).map((id, i) => ({ where: 'prompt', read: i + 1, topA: topsA[i] })),
        ...steps.map((s, i) => ({ where: 'generated', read: P + i, step: i, topA: s.top }))];
      const pieces = await Promise.all(ids.map((id) => pieceOf(a, id)));
      setStatus(`Loading ${fileB.name}…`, 'loading');
      const b = await openEngine(fileB, [a.key]);
      const same = await sameVocabulary(a, b, prompt.text, ids);
      let ended = null;
      if (same.why) {
        for (const r of rows) r.why = same.why;
      } else {
        const seq = [...ids, ...steps.slice(0, -1).map((s) => s.id)];
        try {
          await pass(b, seq, { batch: 1, k, onPos: (tops) => {
            rows[tops.length - 1].topB = tops[tops.length - 1];
            setStatus(`${fileB.name}: position ${tops.length + 1} of ${rows.length}…`, 'running');
          } });
        } catch (err) {
          ended = err;
        }
      }
      for (const row of rows) if (!row.why && !row.topB) row.why = `not reached: ${ended?.stopped ? 'stopped' : 'the run failed'}`;
      drawCompare(fileA.name, fileB.name, rows, k, { tokens: ids, pieces: pieces.map((p) => [...p]), why: same.why });
      if (ended) throw ended;
    }
    setStatus(`Done: ${steps.length} token${steps.length === 1 ? '' : 's'}, top-${k} at each.`, 'done');
  } catch (err) {
    if (err.stopped) setStatus('Stopped: what was done so far is shown.', 'stopped');
    else setStatus(err.message, 'error');
  } finally {
    running = false;
    stopper = null;
    $('try-run').disabled = false;
    $('try-stop').disabled = true;
    $('try').dataset.runs = Number($('try').dataset.runs || 0) + 1;
  }
}

// Token ids mean the same in both files when their vocabularies are the same: the same size, and
// the prompt read as the same ids. { why } when not.
async function sameVocabulary(a, b, text, ids) {
  if (a.info.n_vocab !== b.info.n_vocab) {
    return { why: `${a.file.name} and ${b.file.name} have different vocabularies (${a.info.n_vocab} and ${b.info.n_vocab} tokens)` };
  }
  const idsB = await promptIds(b, text, ids[0] === a.info.token_bos && ids[0] === b.info.token_bos);
  if (idsB.length !== ids.length || idsB.some((id, i) => id !== ids[i])) {
    return { why: `${a.file.name} and ${b.file.name} read the prompt as different tokens (${ids.length} and ${idsB.length}): their vocabularies differ` };
  }
  return {};
}

// The core's tokenizer in the page (worker.js?tokenize), for the tests that hold it to llama.cpp's:
// llama.cpp's tokens of texts with a file picked in this tab.
let tokenizer = null;
window.__leapconv.tryIt = {
  tokenize: (name, texts) => (tokenizer ??= rpc(new Worker('worker.js?tokenize')))('tokenize', { file: picked.get(name), texts }),
};

function drawCompare(nameA, nameB, rows, k, cut) {
  const kept = rows.filter((r) => r.topA && r.topB);
  const r = compareRuns(kept.map((x) => x.topA), kept.map((x) => x.topB));
  kept.forEach((x, j) => { x.cmp = r.positions[j]; });
  const box = $('try-compare');
  const sum = (where) => {
    const list = kept.filter((x) => x.where === where);
    const of = rows.filter((x) => x.where === where).length;
    if (!list.length) return `no position of ${of} compared`;
    const kl = list.map((x) => x.cmp.kl);
    return `the most likely next token agrees at ${list.filter((x) => x.cmp.agree).length} of ${list.length} positions` +
      (list.length < of ? ` (of ${of})` : '') + `; KL(A‖B) mean ${(kl.reduce((a, b) => a + b, 0) / kl.length).toExponential(3)} nats, ` +
      `max ${Math.max(...kl).toExponential(3)}`;
  };
  Object.assign(box.dataset, {
    agree: r.agree, meanKl: r.meanKl, promptIds: JSON.stringify(cut.tokens ?? null), promptPieces: JSON.stringify(cut.pieces ?? null),
    rows: JSON.stringify(rows.map((x) => ({ where: x.where, read: x.read, why: x.why ?? null, kl: x.cmp?.kl ?? null, agree: x.cmp?.agree ?? null,
      topA: x.topA && x.topA.map((t) => [t.id, t.logprob]), topB: x.topB && x.topB.map((t) => [t.id, t.logprob]) }))),
  });
  const p = document.createElement('p');
  p.className = 'try-summary';
  p.textContent = `${nameA} vs ${nameB}. Over the prompt's tokens: ${cut.why ? `not compared: ${cut.why}` : sum('prompt')}. ` +
    `Over A's continuation: ${sum('generated')}.`;
  const how = document.createElement('p');
  how.className = 'hint';
  how.textContent = 'Positions: after each of the prompt\'s tokens (llama.cpp\'s tokens of it, from the file\'s vocabulary), then ' +
    `after each of the first ${rows.filter((x) => x.where === 'generated').length - 1} tokens A generated (greedy): both files read the ` +
    'same token ids, one at a time. ' +
    `The page asks llama.cpp for the top-${k} of each distribution (log p under the full ` +
    `softmax), so the KL is that of the two distributions coarsened to {each token in both top-${k} lists} and ` +
    '{every other token}: Σ pA ln(pA/pB) over the shared tokens plus rA ln(rA/rB) for the rest (r = 1 − their mass). ' +
    'It is a lower bound of the full KL, and equals it when k covers the vocabulary.';
  const table = document.createElement('table');
  table.className = 'try-steps';
  table.createTHead().insertRow().append(...['position', 'read so far', 'A: top-1', 'B: top-1', 'agree', 'shared of top-k', 'KL(A‖B)']
    .map((t) => Object.assign(document.createElement('th'), { textContent: t, scope: 'col' })));
  const body = table.createTBody();
  for (const x of rows) {
    const row = body.insertRow();
    row.dataset.where = x.where;
    const label = x.where === 'prompt' ? [`prompt token ${x.read} `, tokenCell(cut.pieces[x.read - 1])] : [`generated ${x.step + 1}`];
    row.insertCell().append(...label);
    row.insertCell().textContent = `${x.read} token${x.read === 1 ? '' : 's'}`;
    if (!x.cmp) {
      Object.assign(row.insertCell(), { textContent: `not compared: ${x.why}`, colSpan: 5 });
      continue;
    }
    row.insertCell().append(tokenWithP(x.topA[0]));
    row.insertCell().append(tokenWithP(x.topB[0]));
    for (const v of [x.cmp.agree ? 'yes' : 'no', `${x.cmp.shared}/${k}`, x.cmp.kl.toExponential(3)]) row.insertCell().textContent = v;
  }
  box.append(p, how, table);
}

// ---- wiring ----

// wllama's build needs 64-bit WebAssembly memory: without it Try it says so and stays off.
// (detectNow: memory64 is known at once; the page's detect() opens OPFS, which this does not need)
const runnable = Promise.resolve(detectNow().memory64).then((ok) => {
  if (!ok) {
    $('try-unavailable').textContent = NO_MEMORY64;
    $('try-unavailable').hidden = false;
  }
  return ok;
});

$('try-run').onclick = run;
$('try-stop').onclick = () => stopper?.abort();
$('try-a').onchange = $('try-b').onchange = () => describe();
$('try-pick').onchange = async () => {
  for (const f of $('try-pick').files) picked.set(f.name, f);
  $('try-pick').value = '';
  await refresh();
};
document.addEventListener('kept-changed', () => { if (!running) refresh(); });
refresh();
