// "Try it in the tab": runs a GGUF kept in this browser (or picked from disk) in llama.cpp compiled
// to WebAssembly (npm @wllama/wllama 3.8.1, served from the page's own origin, loaded only when
// asked for), shows the generated text and the next-token top-k at each step, and puts two files
// side by side (top-1 agreement and KL divergence). The figures' definitions: web/try_math.js.
import * as storage from './storage.js';
import { formatBytes } from './chart.js';
import { HEAP_MAX, RESERVE, CTX, fitsInTab, stepsOf, compareRuns, chatPrompt, tokenText } from './try_math.js';

const $ = (id) => document.getElementById(id);
const picked = new Map();  // name -> File picked from disk this session

// ---- the engine: one wllama instance at a time (one file in the heap) ----

let lib = null;            // the wllama module, imported on first use
let engine = null;         // { w, file, key, info, threads }
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
const keyOf = (f) => `${f.name}\u0000${f.size}\u0000${f.lastModified}`;
async function openEngine(file) {
  if (engine && engine.key === keyOf(file)) return engine;
  await closeEngine();
  if (!fitsInTab(file.size)) throw new Error(tooBig(file));
  lib ??= await import('./vendor/wllama.js');
  nativeLog.length = 0;
  const w = new lib.Wllama({ default: new URL('vendor/wllama.wasm', document.baseURI).href }, { logger, suppressNativeLog: false });
  // Threads only on a cross-origin-isolated page (shared memory), and only when asked for.
  const threads = self.crossOriginIsolated ? Math.max(1, Math.min(4, (navigator.hardwareConcurrency || 2) >> 1)) : 1;
  try {
    // Batches of 64 tokens keep llama.cpp's logits and compute buffers small (they grow with
    // n_batch x n_vocab), so that RESERVE holds them next to the KV cache even for 128k-token vocabularies.
    await w.loadModel([file], {
      n_ctx: CTX, n_batch: 64, n_ubatch: 64, n_threads: threads, n_gpu_layers: 0, n_parallel: 1, flash_attn: false,
      cache_type_k: 'f32', cache_type_v: 'f32', log_level: 3,
    });
  } catch (e) {
    await w.exit().catch(() => {});
    throw new Error(explain(e, `${file.name} did not load`));
  }
  engine = { w, file, key: keyOf(file), info: w.getLoadedContextInfo(), threads };
  return engine;
}

// One greedy completion: { text, steps, promptTokens }. A C++ exception leaves the wasm
// unusable, so the engine is dropped.
async function complete(params, what) {
  try {
    const r = await engine.w.createCompletion({ temperature: 0, ...params });
    return { text: r.choices[0].text, steps: stepsOf(r.choices[0]), promptTokens: r.usage.prompt_tokens };
  } catch (e) {
    const err = new Error(explain(e, what));
    err.utf8 = nativeLog.some((l) => l.includes('type_error.316'));
    await closeEngine();
    throw err;
  }
}

// ---- the files ----

const tooBig = (f) => `${f.name} (${formatBytes(f.size)}) is too big for this tab: llama.cpp's WebAssembly heap ` +
  `holds at most ${formatBytes(HEAP_MAX)} (wllama's memory64 build), and the weights, the KV cache and the ` +
  `compute buffers must all fit there (${formatBytes(RESERVE)} kept for the latter): files up to ` +
  `${formatBytes(HEAP_MAX - RESERVE)} run. Use llama.cpp natively (llama-cli -m ${f.name}).`;

async function fileOf(value) {
  if (value.startsWith('picked:')) return picked.get(value.slice(7));
  return storage.keptFile(value.slice(5));
}

async function refresh() {
  let kept = [];
  try {
    kept = (await storage.keptFiles()).filter((f) => /\.gguf$/i.test(f.name));
  } catch (e) {
    console.warn('try it: kept files:', e.message);
  }
  const entries = [...kept.map((f) => ({ value: 'kept:' + f.name, label: `${f.name} (${formatBytes(f.size)}, kept)`, size: f.size })),
    ...[...picked.values()].map((f) => ({ value: 'picked:' + f.name, label: `${f.name} (${formatBytes(f.size)}, from disk)`, size: f.size }))];
  for (const [id, none] of [['try-a', null], ['try-b', 'none: one file']]) {
    const sel = $(id), was = sel.value;
    sel.replaceChildren(...(none ? [new Option(none, '')] : []),
      ...entries.map((e) => Object.assign(new Option(e.label + (fitsInTab(e.size) ? '' : ': too big for this tab'), e.value), { disabled: !fitsInTab(e.size) })));
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
  $('try-run').disabled = true;
  $('try-out').replaceChildren();
  $('try-compare').replaceChildren();
  const n = Math.max(1, Math.min(256, Number($('try-n').value) || 16));
  const k = Math.max(1, Math.min(100, Number($('try-k').value) || 5));
  try {
    const fileA = await fileOf($('try-a').value);
    setStatus(`Loading ${fileA.name} into llama.cpp (WebAssembly)…`, 'loading');
    let e = await openEngine(fileA);
    const prompt = await promptFor(e, $('try-prompt').value);
    setStatus(`Running ${fileA.name} (${e.threads} thread${e.threads > 1 ? 's' : ''})…`, 'running');
    const a = await complete({ prompt, max_tokens: n, n_probs: k }, `${fileA.name}`);
    const stepsA = a.steps, promptTokens = a.promptTokens;
    const out = $('try-out');
    out.append(drawSteps(fileA.name, a.text, stepsA));
    Object.assign(out.dataset, { prompt, promptTokens, ids: JSON.stringify(stepsA.map((s) => s.id)) });
    const bValue = $('try-b').value;
    if (bValue && stepsA.length) {
      const fileB = await fileOf(bValue);
      setStatus(`Loading ${fileB.name}…`, 'loading');
      e = await openEngine(fileB);
      // B reads what A read at each position: the prompt, then A's first i tokens. wllama takes
      // text only, so that is the prompt plus those tokens' bytes as text; a position is kept when
      // they are whole UTF-8 and B's llama.cpp makes of it exactly promptTokens + i tokens.
      const tops = [];
      let bytes = [];
      for (let i = 0; i < stepsA.length; i++) {
        if (i) bytes = bytes.concat(stepsA[i - 1].bytes);
        const text = utf8(bytes);
        let top = null, why = 'the text so far ends inside a character';
        if (text !== null) {
          setStatus(`${fileB.name}: position ${i + 1} of ${stepsA.length}…`, 'running');
          try {
            const c = await complete({ prompt: prompt + text, max_tokens: 1, n_probs: k }, `${fileB.name} at position ${i + 1}`);
            if (c.promptTokens === promptTokens + i) top = c.steps[0].top;
            else why = `the text reads as ${c.promptTokens - promptTokens} tokens, not ${i}`;
          } catch (err) {
            if (!err.utf8) throw err;
            why = 'a token that is not valid UTF-8 alone is in B\'s top-k (wllama cannot report it)';
            e = await openEngine(fileB);
          }
        }
        tops.push(top ? { top } : { why });
      }
      drawCompare(fileA.name, fileB.name, stepsA, tops, k);
    }
    setStatus(`Done: ${stepsA.length} token${stepsA.length === 1 ? '' : 's'}, top-${k} at each.`, 'done');
  } catch (err) {
    setStatus(err.message, 'error');
  } finally {
    running = false;
    $('try-run').disabled = false;
    $('try').dataset.runs = Number($('try').dataset.runs || 0) + 1;
  }
}

function utf8(bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return null;
  }
}

function drawCompare(nameA, nameB, stepsA, tops, k) {
  const kept = tops.map((t, i) => (t.top ? i : -1)).filter((i) => i >= 0);
  const r = compareRuns(kept.map((i) => stepsA[i].top), kept.map((i) => tops[i].top));
  const box = $('try-compare');
  Object.assign(box.dataset, { agree: r.agree, positions: JSON.stringify(kept), meanKl: r.meanKl,
    kl: JSON.stringify(r.positions.map((p) => p.kl)), topB: JSON.stringify(tops.map((t) => t.top && t.top.map((x) => [x.id, x.logprob]))) });
  const sum = document.createElement('p');
  sum.className = 'try-summary';
  sum.textContent = kept.length ? `${nameA} vs ${nameB}: the most likely next token agrees at ${r.agree} of ${kept.length} positions; ` +
    `KL(A‖B) mean ${r.meanKl.toExponential(3)} nats, max ${r.maxKl.toExponential(3)}.` : 'No position could be compared.';
  const how = document.createElement('p');
  how.className = 'hint';
  how.textContent = `Positions: after the prompt and after each of the first ${stepsA.length - 1} tokens A generated (greedy), ` +
    `the same context for both files. wllama gives only the top-${k} of each distribution (log p under the full ` +
    `softmax), so the KL is that of the two distributions coarsened to {each token in both top-${k} lists} and ` +
    '{every other token}: Σ pA ln(pA/pB) over the shared tokens plus rA ln(rA/rB) for the rest (r = 1 − their mass). ' +
    'It is a lower bound of the full KL, and equals it when k covers the vocabulary.';
  const table = document.createElement('table');
  table.className = 'try-steps';
  table.createTHead().insertRow().append(...['position', 'A: top-1', 'B: top-1', 'agree', 'shared of top-k', 'KL(A‖B)']
    .map((t) => Object.assign(document.createElement('th'), { textContent: t, scope: 'col' })));
  const body = table.createTBody();
  const show = (t) => `${JSON.stringify(tokenText(t.bytes))} ${pct(t.logprob)}`;
  tops.forEach((t, i) => {
    const row = body.insertRow();
    const p = t.top && r.positions[kept.indexOf(i)];
    const cells = p ? [show(stepsA[i].top[0]), show(t.top[0]), p.agree ? 'yes' : 'no', `${p.shared}/${k}`, p.kl.toExponential(3)]
      : [show(stepsA[i].top[0]), `not compared: ${t.why}`, '', '', ''];
    for (const v of [i + 1, ...cells]) row.insertCell().textContent = v;
  });
  box.append(sum, how, table);
}

// ---- wiring ----

$('try-run').onclick = run;
$('try-a').onchange = $('try-b').onchange = () => describe();
$('try-pick').onchange = async () => {
  for (const f of $('try-pick').files) picked.set(f.name, f);
  $('try-pick').value = '';
  await refresh();
};
document.addEventListener('kept-changed', () => { if (!running) refresh(); });
refresh();
