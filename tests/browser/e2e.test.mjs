// End-to-end in Debian's Chromium (playwright-core, no browser download): the page converts
// real generated checkpoints with the threaded WebAssembly core and its downloads are
// byte-identical to the native CLI's; bad input, cancel, offline and fallbacks behave.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startServer } from '../../scripts/serve.mjs';
import * as harness from './harness.mjs';
import { convertDownload, outDir, savePickerIntoOpfs, waitState } from './harness.mjs';
import { generate, nativeCli, root, runNative, tempDir } from '../node/helpers.mjs';
import { writeImatrixDat } from '../node/llama_ref.mjs';
import { spawnSync } from 'node:child_process';
import { getLlama } from 'node-llama-cpp';
import { readGguf } from './gguf_read.mjs';

const work = tempDir('browser');
const demo = path.join(root, 'web', 'demo', 'tiny-llama');
const session = harness.useBrowser(work);

const openPage = ({ initScript, pageUrl = session.url } = {}) => harness.openPage(session.browser, pageUrl, { initScript });

async function loadDemo(page) {
  await page.click('#demo');
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
}

// The folder input (<input webkitdirectory>), as a user picking the checkpoint folder.
async function loadFolder(page, dir) {
  await page.setInputFiles('#folder-input', dir);
  await waitState(page, ['ready', 'error']);
}

const convertAndDownload = async (page, format) => (await convertDownload(page, format)).bytes;
const planSettled = (page) => page.waitForFunction(() => window.__leapconv.planPending === 0);

// The native CLI's file for a menu value: leap-N, gguf-lite-SCHEME, gguf-TYPE (llama.cpp's name).
function nativeBytes(model, format) {
  const dir = tempDir('native');
  let out, args;
  if (format.startsWith('leap-')) {
    out = path.join(dir, 'out.bin');
    args = [out, '--meta-llama', model, '--version', format.slice(5)];
  } else if (format.startsWith('gguf-lite-')) {
    out = path.join(dir, 'out.gguf-lite');
    args = [out, '--model', model, '--scheme', format.slice(10)];
  } else {
    assert.match(format, /^gguf-[a-z0-9_]+$/);
    out = path.join(dir, 'out.gguf');
    // the page's F32, F16, BF16 and Q8_0 are the converter's (--outtype), the rest llama-quantize's (--type)
    const type = format.slice(5).toUpperCase();
    args = [out, '--model', model, ['F32', 'F16', 'BF16', 'Q8_0'].includes(type) ? '--outtype' : '--type', type];
  }
  const r = runNative([...args, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  const bytes = fs.readFileSync(out);
  fs.rmSync(dir, { recursive: true, force: true });
  return bytes;
}

const opfsFiles = (page) => page.evaluate(async () => {
  const rootDir = await navigator.storage.getDirectory();
  const names = [];
  for await (const [name, h] of rootDir.entries()) {
    if (h.kind === 'directory') for await (const k of h.keys()) names.push(name + '/' + k);
    else names.push(name);
  }
  return names;
});

test('isolated page converts the demo with several worker threads; bytes equal the native CLI', async () => {
  const { context, page, errors } = await openPage();
  assert.equal(await page.evaluate(() => crossOriginIsolated), true);
  await loadDemo(page);
  for (const format of ['leap-1', 'leap-2', 'gguf-lite-q8', 'gguf-lite-q4']) {
    const got = await convertAndDownload(page, format);
    assert.ok(got.equals(nativeBytes(demo, format)), `${format}: browser output differs from native`);
    const s = await page.evaluate(() => window.__leapconv.summary);
    assert.ok(s.worker_threads_used > 1, `only ${s.worker_threads_used} worker thread(s) took part`);
  }
  // the demo is 256 wide: every K-quant preset writes its own blocks (no fallback to Q5_0 / Q8_0)
  for (const format of ['gguf-q4_k_m', 'gguf-q2_k', 'gguf-q6_k']) {
    await page.selectOption('#format', format);
    await planSettled(page);
    const plan = await page.evaluate(() => window.__leapconv.plan);
    assert.deepEqual(plan.warnings.filter((w) => /fallback/.test(w)), [], format);
    const types = new Set(plan.tensors.filter((t) => t.shape.length === 2).map((t) => t.dtype));
    assert.ok([...types].every((t) => /^Q\d_K$/.test(t)), `${format}: ${[...types]}`);
  }
  // the breakdown chart is drawn: one segment per dtype part, and a table with the ratios
  const segments = await page.$$eval('#chart svg rect[data-segment]', (r) => r.map((e) => e.dataset.segment));
  assert.ok(segments.includes('Q4_per_group_64 values') && segments.includes('Q4_per_group_64 scales'), segments.join());
  assert.match(await page.textContent('#breakdown'), /vs FP32 baseline/);
  await page.screenshot({ path: path.join(outDir, 'breakdown.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// Firefox ESR now and then never loads a nested worker: the writer (web/writer.js) and the reader
// (web/reader.js) stand for it here as scripts that never answer. After HELPER_START_MS
// (web/worker.js) the converter writes the file itself (sync access handles, as the
// single-threaded page does) or reads the files itself (on demand, as without BYOB streams): the
// same bytes, said in the summary and in the page.
for (const [script, late, absent, said] of [['writer.js', 'writer_late', 'write_ring_bytes', 'writing the file'],
  ['reader.js', 'reader_late', 'read_ring_bytes', 'reading the files']]) {
  test(`the ${script.slice(0, -3)} thread not starting: the converter does its work itself, the native CLI's bytes`, async () => {
    // (a proxy of the page's server: the browser's request interception does not see a worker's worker)
    const proxy = http.createServer((req, res) => {
      if (new URL(req.url, 'http://x').pathname.endsWith(`/${script}`)) {
        res.writeHead(200, { 'Content-Type': 'text/javascript', 'Cache-Control': 'no-store',
          'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin' });
        return res.end(`// a ${script} that never starts\n`);
      }
      req.pipe(http.request(new URL(req.url, session.url), { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode, up.headers);
        up.pipe(res);
      }).on('error', (e) => res.destroy(e)));  // (the page then fails: said by the test, not a crash)
    });
    await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const context = await session.browser.newContext({ acceptDownloads: true, serviceWorkers: 'block' });
    try {  // (closed whatever happens: a server left listening would keep this test file from ending)
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`http://127.0.0.1:${proxy.address().port}/`);
      await waitState(page, ['idle', 'error']);
      assert.equal(await page.evaluate(() => crossOriginIsolated), true);
      await loadDemo(page);
      const got = await convertAndDownload(page, 'gguf-q8_0');
      const s = await page.evaluate(() => window.__leapconv.summary);
      assert.equal(s[late], true, JSON.stringify(s));
      assert.equal(s[absent], undefined, `${absent}: the ${script.slice(0, -3)}'s ring was not used`);
      if (script === 'reader.js') assert.equal(s.streamed_reads, false);
      assert.ok(got.equals(nativeBytes(demo, 'gguf-q8_0')), 'the file differs from the native CLI\'s');
      assert.match(await page.textContent('#result-text'), new RegExp(`did not start the thread for ${said} in time`));
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
      proxy.closeAllConnections();
      proxy.close();
    }
  });
}

test('GGUF is the first format and the default; Q8_0 and Q4_0 are the native CLI\'s bytes, of the predicted size, named and explained', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  await planSettled(page);
  const catalog = await page.evaluate(async () => (await import('./catalog.js')).catalog);
  const gguf = catalog.formats[0];
  assert.equal(gguf.id, 'gguf');
  const options = await page.$$eval('#format option', (o) => o.map((e) => e.value));
  assert.equal(options[0], 'gguf-q8_0', options.join());
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0', 'the default choice');
  for (const old of ['gguf-q8', 'gguf-q4']) assert.ok(!options.includes(old), old);  // now gguf-lite-q8, gguf-lite-q4
  for (const v of ['gguf-mixed', 'gguf-custom', 'gguf-lite-q4', 'gguf-lite-mixed', 'gguf-lite-custom', 'leap-2']) assert.ok(options.includes(v), v);
  for (const type of ['Q8_0', 'Q4_0']) {
    const value = `gguf-${type.toLowerCase()}`;
    await page.selectOption('#format', value);
    await planSettled(page);
    // the catalog's plain line for the type, and what the file is for
    const entry = gguf.menu.find((m) => m.value === value);
    assert.equal(await page.textContent('#choice-summary'), `${type}: ${entry.summary}.`);
    assert.match(await page.textContent('#choice-summary'), type === 'Q8_0' ? /near-lossless/ : /smallest of the legacy types/);
    assert.match(await page.textContent('#format-use'), /^GGUF: loads in llama\.cpp, Ollama, LM Studio and wllama\.$/);
    const predicted = Number(await page.getAttribute('#prediction', 'data-total'));
    assert.match(await page.textContent('#prediction'), new RegExp(`\\(${predicted.toLocaleString('en')} bytes\\)`));
    const { bytes, name } = await convertDownload(page, value);
    assert.equal(name, `tiny-llama-${type}.gguf`);
    assert.ok(bytes.equals(nativeBytes(demo, value)), `${type}: the page's GGUF differs from the native CLI's`);
    assert.equal(bytes.length, predicted, `${type}: the predicted size is the written size`);
    const file = readGguf(bytes);
    assert.equal(file.version, 3);
    assert.equal(file.kv.get('general.file_type').value, { Q8_0: 7, Q4_0: 2 }[type]);
    assert.equal(file.tensors.get('blk.0.ffn_down.weight').type, type);
    assert.equal(file.tensors.get('blk.0.attn_norm.weight').type, 'F32');
    // how to run it, with the real name, near the download (not 2000 px down the page)
    assert.equal(await page.textContent('#run-command'), `llama-cli -m tiny-llama-${type}.gguf -p "Once upon a time"`);
    assert.match(await page.textContent('#run-for'), /^tiny-llama-\w+\.gguf: GGUF, loads in llama\.cpp, Ollama, LM Studio and wllama\.$/);
    assert.ok(await page.isVisible('#run-command'));
    const top = await page.$eval('#run-command', (e) => e.getBoundingClientRect().top + window.scrollY);
    assert.ok(top < 2000, `the run command is ${top} px down the page`);
    assert.match(await page.textContent('#download'), new RegExp(`^Download tiny-llama-${type}\\.gguf `));

    // the breakdown: per type, then metadata, the vocabulary and the padding, each as the file has them
    const b = await page.evaluate(() => window.__leapconv.summary.breakdown);
    let vocabulary = 0, metadata = 0;
    for (const [k, v] of file.kv) if (k.startsWith('tokenizer.')) vocabulary += v.bytes; else metadata += v.bytes;
    assert.ok(vocabulary > 400 * 8, `${vocabulary} bytes of tokenizer keys`);
    const parts = Object.fromEntries(await page.$$eval('#breakdown tr[data-part]', (r) => r.map((e) => [e.dataset.part, Number(e.dataset.bytes)])));
    assert.deepEqual(parts, { header_bytes: 24, metadata_bytes: metadata, vocabulary_bytes: vocabulary,
      descriptor_bytes: file.infoBytes, padding_bytes: b.padding_bytes, total_bytes: bytes.length });
    const tensorBytes = b.by_dtype.reduce((a, d) => a + d.values_bytes + d.scales_bytes, 0);
    assert.equal(file.dataStart - 24 - metadata - vocabulary - file.infoBytes + (bytes.length - file.dataStart - tensorBytes), b.padding_bytes,
      'padding: before the data and between tensors');
    const rowsText = await page.textContent('#breakdown');
    assert.doesNotMatch(rowsText, /header \+ metadata \+ descriptors/);
    const segments = await page.$$eval('#chart svg rect[data-segment]', (r) => r.map((e) => e.dataset.segment));
    for (const want of [`${type} values`, `${type} scales`, 'F32 values', 'metadata', 'vocabulary', 'tensor descriptors'])
      assert.ok(segments.includes(want), `${want} in ${segments.join(', ')}`);
  }
  await page.screenshot({ path: path.join(outDir, 'gguf.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the FP8 demo: the facts say how it is quantized; its GGUF Q8_0 is the native CLI\'s bytes', async () => {
  const { context, page, errors } = await openPage();
  await page.click('#demo-fp8');
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  const facts = await page.textContent('#model');
  assert.match(facts, /Quantizedfp8 \(blocks of 128 x 128, 28 scaled weights\): decoded as llama\.cpp's converter decodes it/);
  assert.match(facts, /F8_E4M3 \(\d+\.\d+ M values, [\d.]+ (KiB|MiB)\)/);  // the stored bytes per dtype, scales too
  assert.match(facts, /F32 \(0\.\d+ M values, /);
  await planSettled(page);
  const { bytes, name } = await convertDownload(page, 'gguf-q8_0');
  assert.equal(name, 'tiny-llama-fp8-Q8_0.gguf');
  assert.ok(bytes.equals(nativeBytes(path.join(root, 'web', 'demo', 'tiny-llama-fp8'), 'gguf-q8_0')), 'the page\'s GGUF differs from the native CLI\'s');
  // the breakdown gives the source's bytes by the dtype it stores them in: its FP8 weights and their F32 scales
  const source = Object.fromEntries(await page.$$eval('#breakdown tr[data-source]', (r) => r.map((e) => [e.dataset.source, Number(e.dataset.bytes)])));
  const shard = fs.readFileSync(path.join(root, 'web', 'demo', 'tiny-llama-fp8', 'model.safetensors'));
  const header = JSON.parse(shard.subarray(8, 8 + Number(shard.readBigUInt64LE(0))).toString());
  const want = {};
  for (const [name, t] of Object.entries(header)) if (name !== '__metadata__') want[t.dtype] = (want[t.dtype] || 0) + t.data_offsets[1] - t.data_offsets[0];
  assert.deepEqual(source, want);
  assert.deepEqual(errors, []);
  await context.close();
});

test('GGUF: the page lists the tokenizer files and what goes into the file, as the plan and the file have it; llama.cpp loads it', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);
  await planSettled(page);
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0');
  const tk = await page.evaluate(() => window.__leapconv.plan.header.tokenizer);
  assert.equal(tk.kind, 'SentencePiece');
  assert.equal(tk.tokens, 400);
  const facts = Object.fromEntries(await page.$$eval('#vocab-facts tr', (r) => r.map((e) => [e.dataset.fact, e.cells[1].textContent])));
  const size = fs.statSync(path.join(demo, 'tokenizer.model')).size;
  assert.equal(facts.files, `tokenizer.model (${(size / 1024).toFixed(2)} KiB)`);
  assert.equal(facts.kind, 'SentencePiece from tokenizer.model (tokenizer.ggml.model llama, pre default)');
  assert.equal(facts.tokens, '400 tokens');
  assert.equal(facts.special, 'bos 1 "<s>", eos 2 "</s>", unk 0 "<unk>"');
  assert.equal(facts.adds_bos, 'yes');
  assert.equal(facts.chat_template, 'no');
  // and the written file holds just that
  const { bytes } = await convertDownload(page, 'gguf-q8_0');
  const kv = readGguf(bytes).kv;
  assert.equal(kv.get('tokenizer.ggml.model').value, 'llama');
  assert.equal(kv.get('tokenizer.ggml.tokens').value.length, 400);
  assert.equal(kv.get('tokenizer.ggml.scores').value.length, 400);
  const tokens = kv.get('tokenizer.ggml.tokens').value;
  for (const [key, id, text] of [['bos', 1, '<s>'], ['eos', 2, '</s>'], ['unknown', 0, '<unk>']]) {
    assert.equal(kv.get(`tokenizer.ggml.${key}_token_id`).value, id);
    assert.equal(tokens[id], text);
  }
  assert.equal(kv.has('tokenizer.chat_template'), false);
  await context.close();
  // what the page says the file is for: llama.cpp loads the page's file, with this vocabulary
  const file = path.join(work, 'page-Q8_0.gguf');
  fs.writeFileSync(file, bytes);
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
  try {
    const model = await llama.loadModel({ modelPath: file });
    const text = 'The page converts a checkpoint.';
    const ids = model.tokenize(text);
    assert.ok(ids.length > 3 && ids.every((i) => i >= 3 && i < 400), ids.join());
    assert.equal(model.detokenize(ids), text);
    assert.equal(model.tokens.bos, 1);
    const ctx = await model.createContext({ contextSize: 32, threads: 1 });
    const res = await ctx.getSequence().controlledEvaluate([1, ...ids].map((t) => [t, { generateNext: { probabilities: true } }]));
    assert.equal(res.length, ids.length + 1);
    assert.equal(res[0].next.probabilities.size, 400, 'a distribution over the 400 tokens');
    await ctx.dispose();
    await model.dispose();
  } finally {
    await llama.dispose();
  }
});

test('GGUF without a tokenizer: GGUF stays chosen and says plainly why it cannot be written and what takes the model; nothing half-done is offered; another format is the user\'s choice', async () => {
  const model = generate(path.join(work, 'no-vocab'), ['--dim', '64', '--layers', '2']);
  const { context, page, errors } = await openPage();
  let downloads = 0;
  page.on('download', () => downloads++);
  await loadFolder(page, model);
  await planSettled(page);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', 'the checkpoint is open');
  // every GGUF entry is off, with the core's refusal beside the menu
  const off = await page.$$eval('#format option', (o) => o.filter((e) => e.disabled).map((e) => e.value));
  assert.ok(off.length > 0 && off.every((v) => v.startsWith('gguf-') && !v.startsWith('gguf-lite-')), off.join());
  assert.ok(off.includes('gguf-q8_0') && off.includes('gguf-custom'));
  assert.match(await page.textContent('#format-off'), /^Not for this checkpoint\. GGUF: no tokenizer: the folder has neither tokenizer\.json nor tokenizer\.model/);
  assert.match(await page.getAttribute('#format option[value="gguf-q8_0"]', 'title'), /^no tokenizer: /);
  // GGUF stays chosen: the error says so in one sentence, then what takes the model, the core's line under it
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0');
  await page.waitForFunction(() => document.body.dataset.plan === 'error');
  assert.match(await page.textContent('#error .error-what'),
    /^GGUF cannot be written for this checkpoint\. The folder has no tokenizer \(tokenizer\.json or tokenizer\.model\), which a GGUF carries\. Put the repository's tokenizer files in the folder and load it again\. LEAP \.bin \(for the LEAP inference engine\) and GGUF-lite \(a teaching format that no runtime reads: .*\) take it: choose it in the menu above if that is what you want\.$/);
  assert.match(await page.textContent('#error .error-detail'), /^no tokenizer: the folder has neither tokenizer\.json nor tokenizer\.model/);
  assert.match(await page.textContent('#model'), /none \(no tokenizer files\)/);
  // the model facts name the family and what each format can do with it, in the core's words
  const facts = await page.textContent('#model');
  assert.match(facts, /LlamaForCausalLM \(family: llama\)/);
  assert.match(facts, /GGUF: no \(no tokenizer: the folder has neither tokenizer\.json nor tokenizer\.model/);
  assert.match(facts, /LEAP \.bin: yes; GGUF-lite: yes/);
  // nothing half-done: no Convert, no size, no tokenizer facts
  assert.equal(await page.isDisabled('#convert'), true);
  assert.equal(await page.isDisabled('#save-as'), true);
  for (const hidden of ['#vocab', '#schemes', '#result']) assert.ok(await page.isHidden(hidden), hidden);
  assert.equal(await page.textContent('#prediction'), '');
  assert.equal(downloads, 0);
  // another format, chosen, plans and converts, and the refusal goes
  const got = await convertAndDownload(page, 'leap-2');
  assert.ok(got.equals(nativeBytes(model, 'leap-2')));
  assert.equal(await page.isHidden('#error'), true);
  assert.equal(downloads, 1);
  // a fresh page: the refused model, then one GGUF takes: GGUF, no error
  const fresh = await openPage();
  await loadFolder(fresh.page, model);
  await fresh.page.waitForFunction(() => document.body.dataset.plan === 'error');
  await fresh.page.click('#demo');
  await fresh.page.waitForFunction(() => document.body.dataset.plan === 'ok');
  assert.equal(await fresh.page.inputValue('#format'), 'gguf-q8_0');
  assert.equal(await fresh.page.isHidden('#error'), true);
  assert.equal(await fresh.page.isDisabled('#convert'), false);
  await fresh.context.close();
  assert.deepEqual(errors, []);
  await context.close();
});

test('a multimodal checkpoint (Gemma 3 with its vision tower): the page names the family, says what is converted and what is left out; GGUF is the native CLI\'s bytes and verifies', async () => {
  // (the demo's 400-token tokenizer: Gemma's real one is in the node suite's test of this layout)
  const model = generate(path.join(work, 'gemma3-vision'), ['--arch', 'gemma3', '--vision', '--dim', '64', '--hidden', '128',
    '--layers', '6', '--heads', '4', '--kv-heads', '2', '--head-dim', '32', '--vocab', '400', '--dtype', 'bf16']);
  fs.copyFileSync(path.join(demo, 'tokenizer.model'), path.join(model, 'tokenizer.model'));
  const { context, page, errors } = await openPage();
  await loadFolder(page, model);
  await planSettled(page);
  const facts = await page.textContent('#model');
  assert.match(facts, /Gemma3ForConditionalGeneration \(family: gemma3\)/);
  const scope = /the language model; (\d+) tensors of the vision tower and projector are left out/.exec(facts);
  assert.ok(scope, facts);
  const m = await page.evaluate(() => window.__leapconv.model);
  const vision = m.tensors.filter((t) => !t.name.startsWith('model.language_model.') && t.name !== 'lm_head.weight');
  assert.equal(Number(scope[1]), vision.length);
  assert.match(facts, /LEAP \.bin: no \(.*LEAP's engine has no post-norms, q\/k norms, sliding window or GELU/);
  assert.match(facts, /GGUF-lite: yes/);
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0');
  assert.match(await page.textContent('#warnings'), /ℹ .*vision.*mmproj/);
  const got = await convertAndDownload(page, 'gguf-q8_0');
  assert.ok(got.equals(nativeBytes(model, 'gguf-q8_0')), 'the page\'s GGUF is the native CLI\'s');
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
  assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', await page.textContent('#verify-status'));
  const r = await page.evaluate(() => window.__leapconv.verify);
  assert.equal(r.forward.ran, true);
  assert.equal(r.forward.architecture, 'gemma3');
  assert.deepEqual(errors, []);
  await context.close();
});

test('each family added since the first six converts in the page to the native CLI\'s bytes and passes the page\'s verify', async () => {
  // each with the demo's SentencePiece tokenizer (400 tokens), small, with what makes it that family
  // (the first six: the node suite's page-vs-native tests and the demo's verify)
  const families = {
    gemma: ['--arch', 'gemma', '--head-dim', '32'],
    gemma3: ['--arch', 'gemma3', '--head-dim', '32', '--layers', '6'],
    smollm3: ['--arch', 'smollm3', '--layers', '4'],
    granite: ['--arch', 'granite'],
    olmo2: ['--arch', 'olmo2'],
    glm4: ['--arch', 'glm4'],
    // Gemma 4's multimodal layout (per-layer inputs, shared KV); its vocabulary is a byte-fallback
    // BPE tokenizer.json: Mistral's 32000 pieces
    gemma4: ['--arch', 'gemma4', '--vision', '--head-dim', '16', '--layers', '6', '--vocab', '32000'],
    phi3: ['--arch', 'phi3', '--kv-heads', '4', '--config', JSON.stringify({ partial_rotary_factor: 0.5,
      original_max_position_embeddings: 4096, max_position_embeddings: 131072,
      rope_scaling: { type: 'longrope', long_factor: [1, 2, 4, 8], short_factor: [1, 1.25, 1.5, 2] } })],
  };
  // one page for all of them, one checkpoint after another, as a user converts several
  const { context, page, errors } = await openPage();
  for (const [family, args] of Object.entries(families)) {
    const model = generate(path.join(work, `family-${family}`), ['--dim', '64', '--hidden', '128', '--layers', '2',
      '--heads', '4', '--kv-heads', '2', '--vocab', '400', '--dtype', 'bf16', ...args]);
    if (family === 'gemma4') {
      const llama2 = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama2', 'models');
      for (const f of fs.readdirSync(llama2)) fs.copyFileSync(path.join(llama2, f), path.join(model, f));
    } else {
      fs.copyFileSync(path.join(demo, 'tokenizer.model'), path.join(model, 'tokenizer.model'));
    }
    await loadFolder(page, model);
    await planSettled(page);
    assert.match(await page.textContent('#model'), new RegExp(`\\(family: ${family}\\)`));
    const got = await convertAndDownload(page, 'gguf-q8_0');
    assert.ok(got.equals(nativeBytes(model, 'gguf-q8_0')), `${family}: the page's GGUF is the native CLI's`);
    await page.click('#verify');
    await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
    assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', `${family}: ${await page.textContent('#verify-status')}`);
    const r = await page.evaluate(() => window.__leapconv.verify);
    assert.equal(r.forward.ran, true, family);
    assert.equal(r.forward.architecture, family);
    assert.deepEqual(errors, [], family);
  }
  await context.close();
});

test('mixtures of experts in the page: the facts name the experts, Qwen3-MoE (Q4_K_M) and gpt-oss (its MXFP4 experts kept, MXFP4_MOE) convert to the native CLI\'s bytes of the predicted size, the breakdown by part, verify passes', async () => {
  // Mistral's 32000-piece tokenizer.json (the tokenizer is beside the point); rows of 64 (MXFP4's
  // blocks of 32 fit; the K-quants fall back as llama-quantize does)
  const llama2 = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama2', 'models');
  const cases = {
    qwen3moe: { args: ['--arch', 'qwen3moe', '--head-dim', '16', '--experts', '16', '--experts-used', '4', '--expert-hidden', '64'],
      format: 'gguf-q4_k_m', facts: /Experts\s*16 a layer, 4 used per token/, parts: ['dense', 'experts', 'router'] },
    'gpt-oss': { args: ['--arch', 'gpt-oss', '--head-dim', '16', '--experts', '8', '--experts-used', '2', '--expert-hidden', '64'],
      format: 'gguf-mxfp4_moe', facts: /Experts\s*8 a layer, 2 used per token/, parts: ['experts', 'dense', 'router'] },
  };
  const { context, page, errors } = await openPage();  // (one page, one checkpoint after the other)
  for (const [family, c] of Object.entries(cases)) {
    const model = generate(path.join(work, `moe-${family}`), ['--dim', process.env.MOE_DIM ?? '256', '--hidden', '256', '--layers', '2',
      '--heads', '4', '--kv-heads', '2', '--vocab', '32000', '--dtype', 'bf16', ...c.args]);
    for (const f of fs.readdirSync(llama2)) fs.copyFileSync(path.join(llama2, f), path.join(model, f));
    await loadFolder(page, model);
    await planSettled(page);
    const facts = await page.textContent('#model');
    assert.match(facts, new RegExp(`\\(family: ${family}\\)`));
    assert.match(facts, c.facts);
    await page.selectOption('#format', c.format);
    await planSettled(page);
    const predicted = Number(await page.getAttribute('#prediction', 'data-total'));
    const got = await convertAndDownload(page, c.format);
    assert.ok(got.equals(nativeBytes(model, c.format)), `${family}: the page's GGUF is the native CLI's`);
    assert.equal(got.length, predicted, `${family}: the predicted size is the written size`);
    const file = readGguf(got);
    assert.equal(file.tensors.get('blk.1.ffn_down_exps.weight').type, family === 'gpt-oss' ? 'MXFP4' : 'Q8_0');  // (Q6_K's fallback)
    // the breakdown tells the experts' bytes apart
    const parts = await page.$$eval('#breakdown tr[data-group]', (rows) => rows.map((r) => r.dataset.group));
    for (const p of c.parts) assert.ok(parts.includes(p), `${family}: breakdown parts ${parts}`);
    await page.click('#verify');
    await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
    assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', `${family}: ${await page.textContent('#verify-status')}`);
    const r = await page.evaluate(() => window.__leapconv.verify);
    assert.equal(r.forward.ran, true, family);
    assert.deepEqual(errors, [], family);
  }
  await context.close();
});

test('an importance matrix dropped with the checkpoint: the page says what it covers; Q4_K_M and Q2_K_S are the native CLI\'s bytes with --imatrix, named apart; unticked, the plain Q4_K_M, and Q2_K_S asks for one; Try it compares the two Q4_K_M', async () => {
  const model = generate(path.join(work, 'imatrix-model'), ['--dim', '256', '--hidden', '512', '--layers', '2',
    '--heads', '4', '--kv-heads', '2', '--vocab', '400', '--dtype', 'bf16', '--hf-init']);
  fs.copyFileSync(path.join(demo, 'tokenizer.model'), path.join(model, 'tokenizer.model'));
  const bf16 = path.join(work, 'imatrix-model.gguf');
  assert.equal(runNative([bf16, '--model', model, '--outtype', 'BF16', '--quiet']).code, 0);
  writeImatrixDat(path.join(model, 'imatrix.dat'), bf16);
  // the native CLI's file, the matrix named as the page names it (its file name)
  const native = (type, withImatrix) => {
    const out = path.join(work, `imatrix-native-${type}-${withImatrix}.gguf`);
    const r = spawnSync(nativeCli, [out, '--model', model, '--type', type, '--quiet', ...(withImatrix ? ['--imatrix', 'imatrix.dat'] : [])],
      { cwd: model, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return fs.readFileSync(out);
  };
  const { context, page, errors } = await openPage();
  await loadFolder(page, model);
  await planSettled(page);
  // with a matrix in use the presets that need one are on
  for (const v of ['gguf-q2_k_s', 'gguf-iq2_xxs', 'gguf-iq1_s'])
    assert.deepEqual(await page.$eval(`#format option[value="${v}"]`, (e) => [e.disabled, /importance/.test(e.textContent)]), [false, false], v);
  assert.ok(await page.isHidden('#format-needs'));
  assert.equal(await page.$eval('#scheme-table select[data-tensor="blk.0.ffn_up.weight"] option[value="iq2_xxs"]', (e) => e.disabled), false);
  const text = await page.textContent('#imatrix-text');
  assert.match(text, /^Importance matrix imatrix\.dat \(llama-imatrix, legacy \.dat\): 15 entries from 4 chunks of test; weights for 15 of the 15 weights/);
  for (const type of ['Q4_K_M', 'Q2_K_S']) {
    const { bytes: got, name } = await convertDownload(page, `gguf-${type.toLowerCase()}`);
    assert.ok(got.equals(native(type, true)), `${type}: the page's file is the native CLI's with --imatrix`);
    assert.equal(readGguf(got).kv.get('quantize.imatrix.file').value, 'imatrix.dat');
    assert.equal(name, `imatrix-model-${type}-imatrix.gguf`, 'named apart from the plain file');
  }

  // unticked: Q2_K_S (still chosen) is off in the menu, saying why, and its plan asks for a matrix
  await page.uncheck('#imatrix-use');
  await planSettled(page);
  assert.deepEqual(await page.$eval('#format option[value="gguf-q2_k_s"]', (e) => [e.disabled, e.textContent]),
    [true, 'GGUF, Q2_K_S (needs an importance matrix)']);
  assert.match(await page.textContent('#format-needs'), /Q2_K_S, .*needs an importance matrix \(tick "use it" above\)/);
  assert.equal(await page.$eval('#scheme-table select[data-tensor="blk.0.ffn_up.weight"] option[value="iq2_xxs"]', (e) => e.disabled), true);
  await page.waitForFunction(() => document.getElementById('convert').disabled);
  assert.match(await page.textContent('#error'), /importance matrix/);
  const plain = await convertDownload(page, 'gguf-q4_k_m');
  assert.ok(plain.bytes.equals(native('Q4_K_M', false)), 'unticked: the plain Q4_K_M');
  assert.equal(plain.name, 'imatrix-model-Q4_K_M.gguf');
  await page.check('#imatrix-use');
  assert.equal(await page.$eval('#format option[value="gguf-q2_k_s"]', (e) => e.disabled), false, 'ticked again: on');
  // the converter's own Q8_0 takes no matrix (its plan says none, its name has none)
  await page.selectOption('#format', 'gguf-q8_0');
  await planSettled(page);
  assert.equal(await page.evaluate(() => window.__leapconv.plan.header.imatrix), undefined);
  await page.selectOption('#format', 'gguf-q4_k_m');
  await planSettled(page);
  assert.equal(await page.evaluate(() => window.__leapconv.plan.header.imatrix), 'imatrix.dat');
  // the command lines that reproduce it name the matrix (and the file's name says it)
  assert.equal(await page.textContent('#scheme-cli'),
    'build/native/export imatrix-model-Q4_K_M-imatrix.gguf --model imatrix-model --scheme q4_k_m --schemes imatrix-model-schemes.json --imatrix imatrix.dat');
  await page.waitForFunction(() => document.getElementById('scheme-quantize').dataset.state === 'ok' &&
    / --imatrix imatrix\.dat$/.test(document.getElementById('scheme-quantize-cli').textContent));
  assert.equal(await page.textContent('#scheme-quantize-cli'),
    'build/native/export imatrix-model-Q4_K_M-imatrix.gguf --model imatrix-model --type Q4_K_M --imatrix imatrix.dat');
  // both Q4_K_M files are kept, and "Try it" puts them side by side (llama.cpp in the tab)
  await page.waitForFunction(() => ['imatrix-model-Q4_K_M-imatrix.gguf', 'imatrix-model-Q4_K_M.gguf']
    .every((n) => document.querySelector(`#try-b option[value="kept:${n}"]`)));
  await page.selectOption('#try-a', 'kept:imatrix-model-Q4_K_M-imatrix.gguf');
  await page.selectOption('#try-b', 'kept:imatrix-model-Q4_K_M.gguf');
  await page.fill('#try-n', '2');
  await page.fill('#try-k', '5');
  const runs = await page.$eval('#try', (e) => Number(e.dataset.runs || 0));
  await page.click('#try-run');
  await page.waitForFunction((n) => Number(document.getElementById('try').dataset.runs || 0) > n, runs, { timeout: 180000 });
  assert.equal(await page.$eval('#try', (e) => e.dataset.state), 'done', await page.textContent('#try-status'));
  assert.match(await page.textContent('#try-compare .try-summary'),
    /^imatrix-model-Q4_K_M-imatrix\.gguf vs imatrix-model-Q4_K_M\.gguf\. Over the prompt's tokens: /);
  // (both read the same token ids: every position is compared)
  const rows = JSON.parse(await page.$eval('#try-compare', (e) => e.dataset.rows));
  assert.deepEqual(rows.filter((x) => x.kl === null), [], JSON.stringify(rows.map((x) => x.why)));
  console.log(`# imatrix vs plain Q4_K_M in the tab: ${rows.filter((x) => x.kl !== null).length} of ${rows.length} positions compared, ` +
    `top-1 agrees at ${rows.filter((x) => x.agree).length}`);
  assert.deepEqual(errors, []);
  await context.close();
});

test('a generated sharded checkpoint loads through the file input and converts via OPFS', async () => {
  const model = generate(path.join(work, 'sharded'), ['--dim', '128', '--hidden', '384', '--layers', '3',
    '--heads', '8', '--kv-heads', '2', '--vocab', '320', '--shards', '3', '--dtype', 'bf16']);
  const { context, page } = await openPage();
  await loadFolder(page, model);
  assert.match(await page.textContent('#model'), /model-00003-of-00003\.safetensors/);
  for (const format of ['leap-2', 'gguf-lite-q4']) {
    const got = await convertAndDownload(page, format);
    assert.ok(got.equals(nativeBytes(model, format)), `${format}: browser output differs from native`);
    // the threaded page's bytes came through the reader worker's stream, not WORKERFS
    assert.equal(await page.evaluate(() => window.__leapconv.summary.streamed_reads), true);
  }
  // the predicted size shown before converting is the size written
  const { plan, summary } = await page.evaluate(() => ({ plan: window.__leapconv.plan, summary: window.__leapconv.summary }));
  assert.equal(plan.total_bytes, summary.total_bytes);
  await context.close();
});

test('a corrupt shard shows an error naming file and tensor, and no file is produced', async () => {
  const model = generate(path.join(work, 'corrupt'), ['--dim', '64', '--layers', '1']);
  const shard = path.join(model, 'model.safetensors');
  fs.truncateSync(shard, fs.statSync(shard).size - 100);
  const { context, page } = await openPage();
  let downloads = 0;
  page.on('download', () => downloads++);
  await loadFolder(page, model);
  const err = await page.textContent('#error');
  assert.match(err, /model\.safetensors/);
  assert.match(err, /tensor 'lm_head\.weight'/);
  assert.ok(await page.isHidden('#output'));
  assert.deepEqual(await opfsFiles(page), []);
  assert.equal(downloads, 0);
  await context.close();
});

test('a shard changed on disk after it was picked: the error names file and tensor, no file is left', async () => {
  // Both read paths: the threaded page's reader worker (streams) and the single-threaded
  // page's WORKERFS reads. The browser's File is a snapshot: once the file changes, reads fail.
  const plain = await startServer(0, { isolate: false });
  try {
    for (const pageUrl of [session.url, `http://127.0.0.1:${plain.address().port}/`]) {
      const model = generate(path.join(work, 'changed-' + (pageUrl === session.url ? 'mt' : 'st')),
        ['--dim', '128', '--hidden', '384', '--layers', '2', '--shards', '2']);
      const { context, page, errors } = await openPage({ pageUrl });
      await loadFolder(page, model);
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
      fs.appendFileSync(path.join(model, 'model-00001-of-00002.safetensors'), Buffer.alloc(16));
      await page.selectOption('#format', 'leap-2');
      await page.waitForFunction(() => !document.getElementById('convert').disabled);
      await page.click('#convert');
      await waitState(page, ['done', 'error']);
      assert.equal(await page.evaluate(() => document.body.dataset.state), 'error', pageUrl);
      const err = await page.textContent('#error .error-detail');
      assert.match(err, /^model-00001-of-00002\.safetensors: tensor '[^']+': (cannot read the file|read failed)/, `${pageUrl}: ${err}`);
      // (the reader worker names the file; the single-threaded page's WORKERFS read knows only that one failed)
      assert.match(await page.textContent('#error .error-what'), /^(model-00001-of-00002\.safetensors|A file of the checkpoint) could not be read any more: a file changed, moved or removed after it was picked cannot be read\. Pick the files again\.$/);
      assert.deepEqual(await opfsFiles(page), []);
      assert.deepEqual(errors, []);
      await context.close();
    }
  } finally {
    plain.close();
  }
});

test('an error during conversion (NaN weights, int8) leaves no file in OPFS', async () => {
  const model = generate(path.join(work, 'nan'), ['--dim', '64', '--layers', '2', '--dtype', 'f32']);
  const shard = path.join(model, 'model.safetensors');
  const bytes = fs.readFileSync(shard);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString());
  const t = header['model.layers.1.mlp.up_proj.weight'];
  bytes.writeUInt32LE(0x7fc00000, 8 + n + t.data_offsets[0] + 40);  // one NaN
  fs.writeFileSync(shard, bytes);
  const { context, page } = await openPage();
  await loadFolder(page, model);
  await page.selectOption('#format', 'leap-2');
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  await page.click('#convert');
  await waitState(page, ['done', 'error']);
  const err = await page.textContent('#error');
  assert.match(err, /model\.safetensors: tensor 'model\.layers\.1\.mlp\.up_proj\.weight': holds NaN or Inf/);
  assert.deepEqual(await opfsFiles(page), []);
  await context.close();
});

test('cancel stops the conversion and leaves no file; the progress says what the first seconds are, estimates the time left only once the rate settles, and empties on cancel', async () => {
  const model = generate(path.join(work, 'big'), ['--dim', '1024', '--hidden', '2816', '--layers', '6',
    '--heads', '16', '--kv-heads', '4', '--vocab', '8000', '--dtype', 'bf16']);
  const { context, page } = await openPage();
  let downloads = 0;
  page.on('download', () => downloads++);
  await loadFolder(page, model);
  await page.selectOption('#format', 'leap-2');
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  // every text the progress line shows
  await page.evaluate(() => {
    const el = document.getElementById('progress-text');
    window.__progress = [];
    new MutationObserver(() => window.__progress.push(el.textContent)).observe(el, { childList: true, characterData: true, subtree: true });
  });
  await page.click('#convert');
  await page.waitForFunction(() => /%/.test(document.getElementById('progress-text').textContent));
  await page.click('#cancel');
  await waitState(page, ['cancelled', 'done', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'cancelled');
  const texts = await page.evaluate(() => window.__progress);
  assert.ok(texts.some((t) => /^Starting: planning and opening the shards… \d+\.\d s$/.test(t)), texts.slice(0, 8).join(' | '));
  // no time left from the first two figures of the rate (one early burst is no estimate)
  const pct = texts.filter((t) => /%/.test(t));
  assert.ok(pct.length >= 1, texts.join(' | '));
  pct.slice(0, 2).forEach((t) => assert.match(t, / · (estimating the time left|done)$/));
  assert.ok(pct.every((t) => / · (estimating the time left|\d+ s left|done)$/.test(t)), pct.join(' | '));
  // the bar empties: nothing was kept
  assert.equal(await page.$eval('#progress-fill', (e) => e.style.transform), 'scaleX(0)');
  assert.equal(await page.getAttribute('#progress-bar', 'aria-valuenow'), '0');
  assert.equal(await page.textContent('#progress-text'), 'Cancelled: no output file was kept.');
  assert.deepEqual(await opfsFiles(page), []);
  assert.equal(downloads, 0);
  await context.close();
});

test('after one visit the page loads and converts with the network off', async () => {
  const { context, page } = await openPage();
  await page.evaluate(() => navigator.serviceWorker.ready);
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  await context.setOffline(true);
  await page.reload();
  await waitState(page, ['idle', 'error']);
  assert.match(await page.textContent('#status'), /Ready/);
  await loadDemo(page);  // its tokenizer.model too, which the default GGUF plan needs
  for (const format of ['leap-2', 'gguf-q8_0']) {
    const got = await convertAndDownload(page, format);
    assert.ok(got.equals(nativeBytes(demo, format)), format);
  }
  await context.close();
});

test('without the File System Access API the input and download fallbacks work', async () => {
  const hide = () => {
    delete window.showDirectoryPicker;
    delete window.showSaveFilePicker;
    delete window.showOpenFilePicker;
    if (window.DataTransferItem) delete DataTransferItem.prototype.getAsFileSystemHandle;
  };
  const { context, page } = await openPage({ initScript: hide });
  assert.equal(await page.evaluate(() => typeof window.showDirectoryPicker), 'undefined');
  assert.ok(await page.isHidden('#save-as'));
  const model = generate(path.join(work, 'fallback'), ['--dim', '64', '--layers', '2', '--dtype', 'f16', '--tied']);
  // "Choose folder…" falls back to <input webkitdirectory>
  const chooser = page.waitForEvent('filechooser');
  await page.click('#pick-folder');
  await (await chooser).setFiles(model);
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  const got = await convertAndDownload(page, 'gguf-lite-q8');
  assert.ok(got.equals(nativeBytes(model, 'gguf-lite-q8')));
  await context.close();
});

test('a page that is not cross-origin isolated converts single-threaded and says so', async () => {
  const plain = await startServer(0, { isolate: false });
  try {
    const { context, page } = await openPage({ pageUrl: `http://127.0.0.1:${plain.address().port}/` });
    assert.equal(await page.evaluate(() => crossOriginIsolated), false);
    assert.match(await page.textContent('#status'), /single-threaded/);
    await loadDemo(page);
    const got = await convertAndDownload(page, 'leap-2');
    assert.ok(got.equals(nativeBytes(demo, 'leap-2')));
    assert.equal(await page.evaluate(() => window.__leapconv.summary.streamed_reads), false);  // WORKERFS
    await context.close();
  } finally {
    plain.close();
  }
});

test('LEAP: the page says what the KV caches take for the seq_len, which it lets the user choose', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);  // 4 layers, kv_dim 128, max_position_embeddings 256
  await page.selectOption('#format', 'leap-2');
  await page.waitForFunction(() => /KV caches/.test(document.getElementById('engine').textContent));
  assert.equal(await page.isVisible('#seq-len'), true);
  assert.match(await page.textContent('#engine'), /2 × 4 layers × 256 positions × 128 × 4 bytes = 1\.0 MiB \(seq_len 256, the model's own maximum\)/);
  await page.fill('#seq-len', '1000');
  await page.waitForFunction(() => /1000 positions/.test(document.getElementById('engine').textContent));
  assert.match(await page.textContent('#engine'), /= 3\.9 MiB \(seq_len 1000, as chosen\)/);
  const got = await convertAndDownload(page, 'leap-2');
  assert.equal(got.readInt32LE(0x20), 1000);
  const dir = tempDir('native');
  const r = runNative([path.join(dir, 'o.bin'), '--meta-llama', demo, '--version', '2',
    '--seq-len', '1000', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(got.equals(fs.readFileSync(path.join(dir, 'o.bin'))));
  fs.rmSync(dir, { recursive: true, force: true });
  await page.selectOption('#format', 'gguf-q8_0');
  await page.waitForFunction(() => document.getElementById('engine').hidden);
  assert.equal(await page.isVisible('#seq-len'), false);
  await context.close();
});

test('verify in the page: the written file reads back exactly and its model matches per layer', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);
  for (const format of ['leap-2', 'gguf-lite-q4', 'gguf-q4_0', 'gguf-q8_0']) {
    await convertAndDownload(page, format);
    await page.click('#verify');
    await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
    assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', await page.textContent('#verify-status'));
    const r = await page.evaluate(() => window.__leapconv.verify);
    assert.ok(r.tensors.length > 0 && r.tensors.every((t) => t.max_abs_vs_fake_quant === 0));
    assert.equal(r.forward.ran, true);
    assert.equal(r.forward.layers_run, 4);  // the demo has 4 layers: all fit the budget
    const rows = await page.$$eval('#verify-table tr[data-layer]', (trs) => trs.map((t) => t.dataset.layer));
    assert.deepEqual(rows, ['layer 0', 'layer 1', 'layer 2', 'layer 3', 'logits']);
    for (const l of r.forward.layers) {
      assert.ok(l.max_abs_file_vs_reference <= 1e-3, JSON.stringify(l));
      assert.ok(l.max_abs_quantized_vs_source > 0, JSON.stringify(l));  // int8/q4 cost something
    }
    assert.match(await page.textContent('#verify-status'), /^PASS/);
    // LEAP v2: what LEAP's engine computes (W8A8), for information; nothing for GGUF-lite and GGUF
    const engine = await page.$eval('#verify-engine', (e) => (e.hidden ? null : e.textContent));
    if (format === 'leap-2') {
      assert.equal(r.w8a8.ran, true);
      assert.ok(r.w8a8.layers.at(-1).max_abs_vs_as_written > 0, JSON.stringify(r.w8a8));
      assert.match(engine || '', /^What LEAP's engine computes \(W8A8.*groups of 64\): logits within .*not part of PASS\/FAIL/);
    } else {
      assert.equal(r.w8a8.ran, false);
      assert.equal(engine, null);
    }
  }
  await page.screenshot({ path: path.join(outDir, 'verify.png'), fullPage: true });
  await context.close();
});

test('"Convert and save to…" streams into the picked file; cancel there leaves no file', async () => {
  // the files in OPFS folder 'picked', as base64 (an array of numbers takes the driver seconds a MB)
  const picked = (page) => page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const out = {};
    try {
      const dir = await root.getDirectoryHandle('picked');
      for await (const [name, h] of dir.entries()) {
        const file = await h.getFile();
        out[name] = await new Promise((resolve, reject) => {
          const r = new FileReader();
          r.onload = () => resolve(r.result.slice(r.result.indexOf(',') + 1));
          r.onerror = () => reject(r.error);
          r.readAsDataURL(file);
        });
      }
    } catch { /* no directory: nothing picked */ }
    return out;
  });
  const { context, page } = await openPage({ initScript: savePickerIntoOpfs });
  await loadDemo(page);
  assert.ok(await page.isVisible('#save-as'));
  await page.selectOption('#format', 'leap-2');
  await page.waitForFunction(() => !document.getElementById('save-as').disabled);
  await page.click('#save-as');
  await waitState(page, ['done', 'error']);
  const files = await picked(page);
  assert.deepEqual(Object.keys(files), ['tiny-llama-leap-v2.bin']);
  const native = nativeBytes(demo, 'leap-2');
  assert.ok(Buffer.from(files['tiny-llama-leap-v2.bin'], 'base64').equals(native));
  // the written file is what the nibble view / verify read back
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
  assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass');
  await context.close();

  // cancel while streaming into a picked file: nothing is kept
  const model = generate(path.join(work, 'big-picked'), ['--dim', '1024', '--hidden', '2816', '--layers', '6',
    '--heads', '16', '--kv-heads', '4', '--vocab', '8000', '--dtype', 'bf16']);
  const second = await openPage({ initScript: savePickerIntoOpfs });
  await loadFolder(second.page, model);
  await second.page.selectOption('#format', 'leap-1');
  await second.page.waitForFunction(() => !document.getElementById('save-as').disabled);
  await second.page.click('#save-as');
  await second.page.waitForFunction(() => /%/.test(document.getElementById('progress-text').textContent));
  await second.page.click('#cancel');
  await waitState(second.page, ['cancelled', 'done', 'error']);
  assert.equal(await second.page.evaluate(() => document.body.dataset.state), 'cancelled');
  assert.deepEqual(Object.keys(await picked(second.page)), []);
  await second.context.close();
});
