// "Try it in the tab": runs a GGUF kept in this browser (or picked from disk) in llama.cpp compiled
// to WebAssembly (npm @wllama/wllama 3.8.1, served from the page's own origin, loaded only when
// asked for), shows the generated text and the next-token top-k at each step, and puts two files
// side by side (top-1 agreement and KL divergence). The figures' definitions: web/try_math.js.
import * as storage from './storage.js';
import { formatBytes } from './chart.js';
import { HEAP_MAX, RESERVE, CTX, fitsInTab, stepsOf, compareRuns, chatPrompt, tokenText, promptCuts, utf8 } from './try_math.js';
import { rpc } from './rpc.js';

const $ = (id) => document.getElementById(id);
const picked = new Map();  // name -> File picked from disk this session

// ---- the engine: one wllama instance at a time (one file in the heap) ----

let lib = null;            // the wllama module, imported on first use
let engine = null;         // { w, file, key, info, threads }: file is a model (modelOf)
const nativeLog = [];      // llama.cpp's last lines: the only account of a C++ exception

const keep = (...a) => {
  nativeLog.push(a.map(String).join(' '));
  if (nativeLog.length > 40) nativeLog.shift();
};
const logger = { debug() {}, log: keep, warn: keep, error: keep };

// An error from inside wllama, as one line that says what happened.
function explain(e, what) {
  const bad = nativeLog.find((l) => l.includes('type_error.316'));
  if (bad) {
    return `${what}: a token that is not valid UTF-8 on its own (a lone byte of a character) was taken or among ` +
      'the top k, and llama.cpp\'s server code in wllama 3.8.1 cannot write it out (its JSON writer refuses it: ' +
      `"${bad.replace(/^.*?\[json/, '[json').trim()}"). Try a smaller top-k or another prompt; llama.cpp was restarted.`;
  }
  if (nativeLog.some((l) => l.includes('bad_alloc'))) {
    return `${what}: llama.cpp ran out of its WebAssembly heap (${formatBytes(HEAP_MAX)} for the weights, the KV cache ` +
      'and the compute buffers); it was stopped.';
  }
  if (e && (e.name === 'RuntimeError' || e instanceof WebAssembly.RuntimeError)) {
    const last = [...nativeLog].reverse().find((l) => /error|exception|failed|abort/i.test(l));
    return `${what}: llama.cpp stopped inside (${last || e.message}); it was restarted.`;
  }
  return `${what}: ${e && e.message ? e.message : e}`;
}

async function closeEngine() {
  const e = engine;
  engine = null;
  if (e) await e.w.exit().catch(() => {});
}

// The same file again (a kept file is a new File object each time it is asked for) stays loaded.
const keyOf = (m) => m.parts.map((f) => `${f.name}\u0000${f.size}\u0000${f.lastModified}`).join('\u0001');
async function openEngine(file) {
  if (engine && engine.key === keyOf(file)) return engine;
  await closeEngine();
  if (!fitsInTab(file.size)) throw new Error(tooBig(file));
  lib ??= await import('./vendor/wllama.js');
  nativeLog.length = 0;
  const w = new lib.Wllama({ default: new URL('vendor/wllama.wasm', document.baseURI).href }, { logger, suppressNativeLog: false });
  // Threads only on a cross-origin-isolated page (shared memory), and only when asked for.
  // (The page is idle while it runs: one thread a core, up to 4.)
  const threads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
  try {
    // Batches of 64 tokens keep llama.cpp's logits and compute buffers small (they grow with
    // n_batch x n_vocab), so that RESERVE holds them next to the KV cache even for 128k-token vocabularies.
    await w.loadModel(file.parts, {  // a split file: every part, in order
      n_ctx: CTX, n_batch: 64, n_ubatch: 64, n_threads: threads, n_gpu_layers: 0, n_parallel: 1, flash_attn: false,
      cache_type_k: 'f32', cache_type_v: 'f32', log_level: 3,
    });
  } catch (e) {
    await w.exit().catch(() => {});
    throw new Error(explain(e, `${file.name} did not load`));
  }
  engine = { w, file, key: keyOf(file), info: w.getLoadedContextInfo(), threads: w.isMultithread() ? w.getNumThreads() : 1 };
  $('try').dataset.threads = engine.threads;
  return engine;
}

// Stop: ends the run between two of wllama's result chunks (its abortSignal frees llama.cpp's
// slot, so the loaded engine stays usable) or between two positions.
let stopper = null;  // the running run's AbortController
const stopped = () => Object.assign(new Error('stopped'), { stopped: true });
function checkStop() {
  if (stopper?.signal.aborted) throw stopped();
}

// One greedy completion, streamed (each chunk a token with its top-k): { text, steps,
// promptTokens }; onStep(steps, text) after each token. A C++ exception leaves the wasm unusable,
// so the engine is dropped; the error carries what came before it (err.partial).
async function complete(params, what, onStep = null) {
  checkStop();
  const got = { text: '', steps: [], promptTokens: null };
  try {
    const chunks = await engine.w.createCompletion({ temperature: 0, ...params, stream: true, abortSignal: stopper?.signal });
    for await (const c of chunks) {
      const choice = c.choices[0];
      const steps = stepsOf(choice);
      got.text += choice.text;
      got.steps.push(...steps);
      if (c.usage) got.promptTokens = c.usage.prompt_tokens;
      if (steps.length && onStep) onStep(got.steps, got.text);
    }
    return got;
  } catch (e) {
    if (stopper?.signal.aborted) throw Object.assign(stopped(), { partial: got });
    const err = new Error(explain(e, what));
    err.utf8 = nativeLog.some((l) => l.includes('type_error.316'));
    err.partial = got;
    await closeEngine();
    throw err;
  }
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
  for (const [id, none] of [['try-a', null], ['try-b', 'none: one file']]) {
    const sel = $(id), was = sel.value;
    sel.replaceChildren(...(none ? [new Option(none, '')] : []),
      ...entries.map((e) => Object.assign(new Option(e.label + (fitsInTab(e.size) ? '' : ': too big for this tab'), e.value),
        { disabled: !fitsInTab(e.size) || e.missing.length > 0 })));
    if ([...sel.options].some((o) => o.value === was)) sel.value = was;
  }
  $('try').dataset.files = entries.length;
  $('try-run').disabled = entries.length === 0;
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

const pct = (lp) => `${(100 * Math.exp(lp)).toFixed(2)}%`;

// The prompt as sent: the text, or in chat mode the file's template's rendering of it.
async function promptFor(e, text) {
  const template = e.info.metadata['tokenizer.chat_template'];
  const box = $('try-rendered');
  box.hidden = !$('try-chat').checked;
  if (!$('try-chat').checked) return text;
  if (!template) {
    box.textContent = `${e.file.name} has no chat template (tokenizer.chat_template): the prompt goes as plain text.`;
    box.dataset.rendered = '';
    return text;
  }
  const { Template } = await import('./vendor/jinja.js');
  let r;
  try {
    r = chatPrompt(Template, template, [{ role: 'user', content: text }]);
  } catch (err) {
    throw new Error(`${e.file.name}: its chat template does not render (@huggingface/jinja: ${err.message})`);
  }
  box.textContent = r.text + (r.bosFirst && !e.info.add_bos_token ? '\n\n(The template begins with BOS, which this file ' +
    'does not add by itself (tokenizer.ggml.add_bos_token) and wllama takes no token ids: it runs without.)' : '');
  box.dataset.rendered = r.text;
  return r.text;
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
  cap.textContent = 'At each step, the next-token probabilities (top-k of the full softmax, before sampling; greedy: the first is taken)';
  table.createTHead().insertRow().append(...['step', 'taken', 'top-k'].map((t) => Object.assign(document.createElement('th'), { textContent: t, scope: 'col' })));
  const body = table.createTBody();
  steps.forEach((s, i) => {
    const row = body.insertRow();
    row.dataset.id = s.id;
    row.dataset.top = JSON.stringify(s.top.map((t) => [t.id, t.logprob]));
    row.insertCell().textContent = i + 1;
    row.insertCell().textContent = JSON.stringify(tokenText(s.bytes));
    row.insertCell().textContent = s.top.map((t) => `${JSON.stringify(tokenText(t.bytes))} ${pct(t.logprob)}`).join('  ·  ');
  });
  box.append(h, text, table);
  return box;
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
    setStatus(`Loading ${fileA.name} into llama.cpp (WebAssembly)…`, 'loading');
    let e = await openEngine(fileA);
    const prompt = await promptFor(e, $('try-prompt').value);
    const threads = `${e.threads} thread${e.threads > 1 ? 's' : ''}`;
    setStatus(`Running ${fileA.name} (${threads})…`, 'running');
    // the text as it comes; the steps' table once A has finished (or failed, or was stopped)
    const out = $('try-out');
    const live = Object.assign(document.createElement('p'), { className: 'try-text' });
    out.append(live);
    let a;
    try {
      a = await complete({ prompt, max_tokens: n, n_probs: k }, `${fileA.name}`, (steps, text) => {
        live.textContent = text;
        setStatus(`Running ${fileA.name} (${threads}): token ${steps.length} of ${n}…`, 'running');
      });
    } catch (err) {
      if (err.partial?.steps.length) {
        out.replaceChildren(drawSteps(`${fileA.name} (the first ${err.partial.steps.length} tokens)`, err.partial.text, err.partial.steps));
        if (!err.stopped) err.message += ` (after ${err.partial.steps.length} token${err.partial.steps.length === 1 ? '' : 's'}, shown)`;
      }
      throw err;
    }
    const stepsA = a.steps, promptTokens = a.promptTokens;
    out.replaceChildren(drawSteps(fileA.name, a.text, stepsA));
    Object.assign(out.dataset, { prompt, promptTokens, ids: JSON.stringify(stepsA.map((s) => s.id)) });
    const bValue = $('try-b').value;
    if (bValue && stepsA.length) {
      const fileB = await fileOf(bValue);
      // Every position is a context both files read, as text (wllama takes no token ids), and is
      // kept only when llama.cpp makes exactly the tokens meant of it: first the prompt cut after
      // each of its tokens, then the prompt plus A's first i generated tokens.
      setStatus(`Tokenizing the prompt with the files' vocabularies…`, 'running');
      const cut = await promptPositions(fileA, fileB, prompt, promptTokens);
      const rows = [...(cut.cuts ?? []).map((c) => ({ where: 'prompt', read: c.read, piece: c.piece, text: c.text, why: c.why })),
        ...stepsA.map((s, i) => ({ where: 'generated', read: promptTokens + i, step: i, topA: s.top }))];
      const at = async (row, file, what) => {
        try {
          const c = await complete({ prompt: row.text, max_tokens: 1, n_probs: k }, `${file.name} at ${what}`);
          // (no step: llama.cpp ended the text there, its next token end-of-generation, and listed none)
          if (c.promptTokens === row.read && c.steps.length) return c.steps[0].top;
          row.why = c.promptTokens !== row.read ? `llama.cpp reads this text as ${c.promptTokens} tokens, not ${row.read}`
            : `llama.cpp ended the text here and listed no next tokens`;
        } catch (err) {
          if (!err.utf8) throw err;
          row.why = `a token that is not valid UTF-8 alone is in ${file.name}'s top-k (wllama cannot report it)`;
          await openEngine(file);
        }
        return null;
      };
      // A at the prompt's cuts (A is loaded), then B everywhere
      const promptRows = rows.filter((r) => r.where === 'prompt' && !r.why);
      for (const [j, row] of promptRows.entries()) {
        setStatus(`${fileA.name}: the prompt after token ${row.read} (${j + 1} of ${promptRows.length})…`, 'running');
        row.topA = await at(row, fileA, `the prompt's token ${row.read}`);
      }
      setStatus(`Loading ${fileB.name}…`, 'loading');
      e = await openEngine(fileB);
      // B at every position; stopped (or failed) half way, what was compared so far is drawn
      let ended = null;
      try {
        let bytes = [];
        for (const row of rows) {
          if (row.where === 'generated') {
            if (row.step) bytes = bytes.concat(stepsA[row.step - 1].bytes);
            const text = utf8(bytes);
            if (text === null) row.why = 'the text so far ends inside a character';
            else row.text = prompt + text;
          }
          if (row.why) continue;
          setStatus(`${fileB.name}: position ${rows.indexOf(row) + 1} of ${rows.length}…`, 'running');
          row.topB = await at(row, fileB, row.where === 'prompt' ? `the prompt's token ${row.read}` : `generated step ${row.step + 1}`);
        }
      } catch (err) {
        ended = err;
      }
      for (const row of rows) if (!row.why && !row.topB) row.why = `not reached: ${ended?.stopped ? 'stopped' : 'the run failed'}`;
      drawCompare(fileA.name, fileB.name, rows, k, cut);
      if (ended) throw ended;
    }
    setStatus(`Done: ${stepsA.length} token${stepsA.length === 1 ? '' : 's'}, top-${k} at each.`, 'done');
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

// The prompt's tokens as llama.cpp makes them from each file's vocabulary (the core's tokenizer,
// in a worker of its own), and where to cut the prompt after each: { tokens, cuts } or { why }
// when the prompt's own positions cannot be compared.
let tokenizer = null;
// (a split file's vocabulary is in its first part, with every other key)
const tokenize = (model, texts, pieces = false) =>
  (tokenizer ??= rpc(new Worker('worker.js?tokenize')))('tokenize', { file: model.parts[0], texts, pieces });
// For the tests (and the curious): llama.cpp's tokens of texts with a file picked in this tab.
window.__leapconv.tryIt = { tokenize: (name, texts) => tokenize({ parts: [picked.get(name)] }, texts) };
async function promptPositions(fileA, fileB, prompt, promptTokens) {
  try {
    const a = await tokenize(fileA, [prompt], true);
    const spans = a.tokens[0], ids = spans.map((t) => t[0]);
    if (ids.length !== promptTokens) {
      return { why: `the page's tokenizer makes ${ids.length} tokens of the prompt where llama.cpp made ${promptTokens}` };
    }
    const cuts = promptCuts(prompt, spans);
    // a cut text must read back as the prompt's first tokens (a merge can reach across a cut)
    const whole = cuts.filter((c) => !c.why);
    const back = (await tokenize(fileA, whole.map((c) => c.text))).tokens;
    whole.forEach((c, j) => {
      const got = back[j].map((t) => t[0]);
      if (got.length !== c.read || got.some((id, x) => id !== ids[x])) {
        c.why = `the prompt up to here, ${JSON.stringify(c.text)}, is ${got.length} token${got.length === 1 ? '' : 's'} on its own`;
      }
    });
    const b = await tokenize(fileB, [prompt]);
    const idsB = b.tokens[0].map((t) => t[0]);
    if (idsB.length !== ids.length || idsB.some((id, x) => id !== ids[x])) {
      return { why: `${fileA.name} and ${fileB.name} tokenize the prompt differently (${ids.length} and ${idsB.length} tokens): their vocabularies differ` };
    }
    cuts.forEach((c) => { c.piece = tokenText(a.pieces[c.read - 1]); });
    return { tokens: ids, cuts, pieces: a.pieces };
  } catch (err) {
    return { why: `its tokens are not known here (${err.message})` };
  }
}

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
    `after each of the first ${rows.filter((x) => x.where === 'generated').length - 1} tokens A generated (greedy): the same context for both files, ` +
    'sent as text (wllama takes no token ids) and kept when llama.cpp reads it as exactly those tokens. ' +
    `wllama gives only the top-${k} of each distribution (log p under the full ` +
    `softmax), so the KL is that of the two distributions coarsened to {each token in both top-${k} lists} and ` +
    '{every other token}: Σ pA ln(pA/pB) over the shared tokens plus rA ln(rA/rB) for the rest (r = 1 − their mass). ' +
    'It is a lower bound of the full KL, and equals it when k covers the vocabulary.';
  const table = document.createElement('table');
  table.className = 'try-steps';
  table.createTHead().insertRow().append(...['position', 'read so far', 'A: top-1', 'B: top-1', 'agree', 'shared of top-k', 'KL(A‖B)']
    .map((t) => Object.assign(document.createElement('th'), { textContent: t, scope: 'col' })));
  const body = table.createTBody();
  const show = (t) => `${JSON.stringify(tokenText(t.bytes))} ${pct(t.logprob)}`;
  for (const x of rows) {
    const row = body.insertRow();
    row.dataset.where = x.where;
    const label = x.where === 'prompt' ? `prompt token ${x.read} ${JSON.stringify(x.piece)}` : `generated ${x.step + 1}`;
    const read = `${x.read} token${x.read === 1 ? '' : 's'}`;
    const cells = x.cmp ? [show(x.topA[0]), show(x.topB[0]), x.cmp.agree ? 'yes' : 'no', `${x.cmp.shared}/${k}`, x.cmp.kl.toExponential(3)]
      : [`not compared: ${x.why}`];
    for (const v of [label, read, ...cells]) row.insertCell().textContent = v;
    if (!x.cmp) row.cells[2].colSpan = 5;
  }
  box.append(p, how, table);
}

// ---- wiring ----

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
