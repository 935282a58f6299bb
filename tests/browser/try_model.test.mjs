// "Try it in the tab" in Debian's Chromium: llama.cpp compiled to WebAssembly (npm @wllama/wllama,
// served by the page's origin) runs GGUF files the native CLI wrote from generated checkpoints with
// Mistral-7B's real tokenizer (32000 tokens), one kept in the origin-private file system as
// "Convert" leaves it, one picked from disk; then the page's own demo (a SentencePiece vocabulary
// of mostly byte tokens) and a byte-level BPE (Llama 3's tokenizer) on a prompt of emoji and CJK,
// whose tokens are pieces of characters. Held to the project's reference forward pass
// (build/native/gguf_forward on the files' weights, through tests/node/llama_ref.mjs):
//  - the page's next-token top-k log p at every generated step equal the reference (F32 files, F32
//    KV cache, flash attention off: ≤ 1e-4), and the token taken is the reference's argmax;
//  - the side-by-side figures (top-1 agreement, the coarsened KL of web/try_math.js) equal those
//    computed from the reference's log p of both files at the ids the page lists;
//  - chat mode sends the file's chat template as @huggingface/jinja renders it (and llama.cpp ran
//    that text: its top-k is the reference's on its tokens);
//  - byte tokens (in the top-k, in the prompt) are listed as the bytes they are, and held to the
//    reference like any other;
//  - a file too big for wllama's heap is refused before anything loads, wllama loads only on Run,
//    and no request leaves the origin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { isUtf8 } from 'node:buffer';
import { getLlama } from 'node-llama-cpp';
import { Template } from '@huggingface/jinja';
import * as harness from './harness.mjs';
import { generate, root, tempDir } from '../node/helpers.mjs';
import { referenceLogProbs, convertGguf } from '../node/llama_ref.mjs';
import { HEAP_MAX, RESERVE } from '../../web/try_math.js';

const work = tempDir('try-model');
const session = harness.useBrowser(work);
const mistral = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama2', 'models');
const prompt = 'Once upon a time, 42 llamas';
const N = 8, K = 5;
const template = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}" +
  "{% else %}{{ message['content'] + eos_token }}{% endif %}{% endfor %}";

// A small Llama in F32 (with a chat template), and B: the same weights cut to 4 mantissa bits (so
// the two differ a little, as a quantized file does, while both are F32 files that llama.cpp runs
// as exactly as the reference).
const dirA = path.join(work, 'A');
generate(dirA, ['--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--kv-heads', '2', '--vocab', '32000',
  '--seq-len', '256', '--dtype', 'f32', '--tied', '--seed', '11']);
for (const f of fs.readdirSync(mistral)) fs.copyFileSync(path.join(mistral, f), path.join(dirA, f));
const cfg = path.join(dirA, 'tokenizer_config.json');
fs.writeFileSync(cfg, JSON.stringify({ ...JSON.parse(fs.readFileSync(cfg, 'utf8')), chat_template: template }));
// The F32 values of one tensor of a safetensors file, or all of them, to edit in place.
function values(st, name) {
  const n = Number(st.readBigUInt64LE(0));
  const start = 8 + n, header = JSON.parse(st.toString('utf8', 8, start));
  const [a, b] = name ? header[name].data_offsets : [0, st.length - start];
  return new Float32Array(st.buffer, st.byteOffset + start + a, (b - a) / 4);
}
const stA = fs.readFileSync(path.join(dirA, 'model.safetensors'));
const embed = values(stA, 'model.embed_tokens.weight');
embed.forEach((v, i) => { embed[i] = 4 * v; });  // (tied) larger logits: peaked next-token distributions
fs.writeFileSync(path.join(dirA, 'model.safetensors'), stA);
const dirB = path.join(work, 'B');
fs.cpSync(dirA, dirB, { recursive: true });
const stB = fs.readFileSync(path.join(dirB, 'model.safetensors'));
const all = values(stB), bits = new Uint32Array(all.buffer, all.byteOffset, all.length);
for (let i = 0; i < bits.length; i++) bits[i] &= 0xfff80000;  // sign, exponent, 4 mantissa bits
fs.writeFileSync(path.join(dirB, 'model.safetensors'), stB);
const fileA = convertGguf(work, dirA, 'F32');
const demo = convertGguf(work, path.join(root, 'web', 'demo', 'tiny-llama'), 'F32');
const fileB = convertGguf(work, dirB, 'F32');
// byte-level BPE: Llama 3's tokenizer (128256 tokens)
const dirL3 = path.join(work, 'L3');
generate(dirL3, ['--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--kv-heads', '2', '--vocab', '128256',
  '--seq-len', '256', '--dtype', 'f32', '--tied', '--seed', '5']);
const llama3 = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama3', 'models');
for (const f of fs.readdirSync(llama3)) fs.copyFileSync(path.join(llama3, f), path.join(dirL3, f));
const fileL3 = convertGguf(work, dirL3, 'F32');

// The reference's tokens of a text as llama.cpp reads the prompt: BOS, then the text with special
// tokens parsed (llama-server's tokenize(add_special, parse_special)).
let llama, model;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
  model = await llama.loadModel({ modelPath: fileA });
});
after(async () => {
  await model?.dispose();
  await llama?.dispose();
});
const tokensOf = (text) => [model.tokens.bos, ...model.tokenize(text, true)];

const readRun = (page) => page.evaluate(() => {
  const out = document.getElementById('try-out'), cmp = document.getElementById('try-compare');
  return {
    state: document.getElementById('try').dataset.state, status: document.getElementById('try-status').textContent,
    promptTokens: Number(out.dataset.promptTokens), promptIds: JSON.parse(out.dataset.promptIds || '[]'), ids: JSON.parse(out.dataset.ids || '[]'),
    shown: [...out.querySelectorAll('tr[data-top] bdi')].map((b) => b.textContent),
    topA: [...out.querySelectorAll('tr[data-top]')].map((r) => JSON.parse(r.dataset.top)),
    rendered: document.getElementById('try-rendered').dataset.rendered,
    compare: cmp.dataset.rows ? { rows: JSON.parse(cmp.dataset.rows), promptIds: JSON.parse(cmp.dataset.promptIds),
      promptPieces: JSON.parse(cmp.dataset.promptPieces),
      agree: Number(cmp.dataset.agree) } : null,
  };
});

async function run(page, { b = '', chat = false, expect = 'done' } = {}) {
  await page.setChecked('#try-chat', chat);
  await page.selectOption('#try-b', b);
  const runs = await page.$eval('#try', (e) => Number(e.dataset.runs || 0));
  await page.click('#try-run');
  await page.waitForFunction((n) => Number(document.getElementById('try').dataset.runs || 0) > n, runs, { timeout: 180000 });
  const r = await readRun(page);
  assert.equal(r.state, expect, r.status);
  return r;
}

// What the page says it shows, from the reference's full rows (log p) of both files at the ids the
// page lists: KL(A||B) over the partition {ids in both lists} + {the rest}, in float64; top-1 agreement.
function coarseKl(idsA, idsB, rowA, rowB) {
  const shared = idsA.filter((id) => idsB.includes(id));
  const pa = shared.map((id) => Math.exp(rowA[id])), pb = shared.map((id) => Math.exp(rowB[id]));
  const restA = 1 - pa.reduce((x, y) => x + y, 0), restB = 1 - pb.reduce((x, y) => x + y, 0);
  const kl = shared.reduce((sum, id, j) => sum + pa[j] * (rowA[id] - rowB[id]), 0) + (restA > 0 ? restA * Math.log(restA / restB) : 0);
  return { kl, agree: idsA[0] === idsB[0] };
}

// Each listed (id, log p) against the reference's row: the same value, and the k most likely.
function assertTopK(list, row, what) {
  const sorted = Float32Array.from(row).sort().reverse();
  for (const [id, lp] of list) {
    assert.ok(Math.abs(lp - row[id]) <= 1e-4, `${what}: token ${id}: log p ${lp} vs the reference's ${row[id]}`);
    assert.ok(row[id] >= sorted[list.length - 1] - 1e-4, `${what}: token ${id} is not among the reference's top ${list.length}`);
  }
}

test('wllama in the tab gives the reference forward pass\'s top-k; side by side and chat mode agree with it', async () => {
  const { context, page, errors } = await harness.openPage(session.browser, session.url);
  const requests = [];
  const pageRequests = [];  // what the page itself asks for (the service worker precaches everything)
  context.on('request', (r) => { requests.push(r.url()); if (!r.serviceWorker()) pageRequests.push(r.url()); });
  // A as "Convert" leaves it (OPFS, leapconv-output), B and a sparse 4 GiB file picked from disk
  await page.evaluate(async ({ name, b64 }) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('leapconv-output', { create: true });
    const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
    await w.write(bytes);
    await w.close();
  }, { name: 'A-F32.gguf', b64: fs.readFileSync(fileA).toString('base64') });
  const big = path.join(work, 'Big-Q8_0.gguf');
  fs.writeFileSync(big, '');
  fs.truncateSync(big, HEAP_MAX - RESERVE + 1);
  await page.reload();
  await harness.waitState(page, ['idle', 'error']);
  await page.setInputFiles('#try-pick', [fileB, big]);
  await page.waitForFunction(() => document.getElementById('try').dataset.files === '3');

  // too big: said before loading, and not offered; nothing of wllama fetched yet
  assert.equal(await page.$eval('#try-b option[value="picked:Big-Q8_0.gguf"]', (o) => o.disabled), true);
  await page.evaluate(() => { const s = document.getElementById('try-b'); s.value = 'picked:Big-Q8_0.gguf'; s.dispatchEvent(new Event('change')); });
  await page.waitForFunction(() => /too big for this tab/.test(document.getElementById('try-size').textContent));
  assert.ok(!pageRequests.some((u) => u.includes('/vendor/')), 'wllama loads only when asked for');

  await page.selectOption('#try-a', 'kept:A-F32.gguf');
  await page.fill('#try-prompt', prompt);
  await page.fill('#try-n', String(N));
  await page.fill('#try-k', String(K));
  const r = await run(page, { b: 'picked:' + path.basename(fileB) });

  // threads: the page is cross-origin isolated (npm start's COOP/COEP), so wllama runs one a core
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  assert.equal(Number(await page.$eval('#try', (e) => e.dataset.threads)), Math.min(4, cores));
  const tokens = tokensOf(prompt);
  const P = tokens.length;
  assert.equal(r.promptTokens, P, 'llama.cpp in the tab reads the prompt as the reference tokenizes it');
  assert.deepEqual(r.promptIds, tokens);
  assert.equal(r.ids.length, N);
  const seq = [...tokens, ...r.ids.slice(0, -1)];
  const refA = referenceLogProbs(work, fileA, seq), refB = referenceLogProbs(work, fileB, seq);
  let worst = 0;
  for (let i = 0; i < N; i++) {
    const row = refA[P - 1 + i];
    assertTopK(r.topA[i], row, `A step ${i + 1}`);
    assert.equal(r.topA[i].length, K);
    assert.equal(r.ids[i], r.topA[i][0][0], 'greedy: the token taken is the most likely');
    for (const [id, lp] of r.topA[i]) worst = Math.max(worst, Math.abs(lp - row[id]));
  }
  // side by side: both files at each position the page compared (after each of the prompt's
  // tokens, cut where llama.cpp's tokens of it end, then after each generated one), and the
  // figures from the reference
  const { compare } = r;
  assert.deepEqual(compare.promptIds, tokens, 'the page cuts the prompt at llama.cpp\'s own tokens of it');
  // the pieces it labels them with: BOS's text, then the prompt's bytes with SentencePiece's space prefix
  assert.equal(Buffer.from(compare.promptPieces[0]).toString(), '<s>');
  assert.deepEqual(Buffer.concat(compare.promptPieces.slice(1).map((p) => Buffer.from(p))), Buffer.from(' ' + prompt));
  const promptRows = compare.rows.filter((x) => x.where === 'prompt'), genRows = compare.rows.filter((x) => x.where === 'generated');
  assert.deepEqual(promptRows.map((x) => x.read), tokens.slice(1).map((_, i) => i + 1));
  assert.deepEqual(genRows.map((x) => x.read), r.ids.map((_, i) => P + i));
  const compared = compare.rows.filter((x) => x.kl !== null);
  const promptCompared = compared.filter((x) => x.where === 'prompt').length;
  assert.equal(promptCompared, P - 1, `prompt positions compared: ${JSON.stringify(promptRows.map((x) => x.why))}`);
  assert.equal(compared.length - promptCompared, N, `generated positions compared: ${JSON.stringify(genRows.map((x) => x.why))}`);
  let agree = 0, klGap = 0;
  for (const x of compared) {
    const at = x.read - 1;  // the reference's row after x.read tokens
    if (x.where === 'prompt') assertTopK(x.topA, refA[at], `A after prompt token ${x.read}`);
    else assert.deepEqual(x.topA, r.topA[x.read - P]);
    assertTopK(x.topB, refB[at], `B after ${x.read} tokens`);
    const ref = coarseKl(x.topA.map(([id]) => id), x.topB.map(([id]) => id), refA[at], refB[at]);
    assert.ok(Math.abs(ref.kl - x.kl) <= 1e-3 * ref.kl + 1e-7, `after ${x.read} tokens: KL ${x.kl} vs the reference's ${ref.kl}`);
    assert.equal(x.agree, ref.agree);
    agree += ref.agree;
    klGap = Math.max(klGap, Math.abs(ref.kl - x.kl) / ref.kl);
  }
  assert.equal(compare.agree, agree);
  console.log(`# wllama vs reference: max |Δ log p| ${worst.toExponential(2)} over ${N} steps x top-${K}; ` +
    `side by side: ${promptCompared}/${P - 1} prompt positions and ${compared.length - promptCompared}/${N} generated, ` +
    `top-1 agrees at ${agree}, KL ${compared.map((x) => x.kl.toExponential(2)).join(' ')} ` +
    `(max relative gap to the reference's ${klGap.toExponential(1)})`);

  // each token's text isolated in its own direction (<bdi>), each probability to three significant
  // digits (a flat distribution is not "0.00%")
  const cells = await page.$$eval('#try-out tr[data-top]', (rows) => rows.map((r) => ({ top: JSON.parse(r.dataset.top),
    tokens: [...r.cells[2].querySelectorAll('.try-token')].map((t) => ({ bdi: t.querySelectorAll('bdi').length, text: t.textContent })) })));
  for (const c of cells) {
    assert.equal(c.tokens.length, K);
    c.tokens.forEach((t, j) => {
      assert.equal(t.bdi, 1);
      const pc = Number(/ (\d+(?:\.\d+)?)%$/.exec(t.text)[1]), want = 100 * Math.exp(c.top[j][1]);
      assert.equal(pc, Number(want.toPrecision(3)), t.text);
    });
  }

  // the results drawn: no serious or critical axe-core violation
  await page.evaluate(fs.readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8'));
  const axe = await page.evaluate(async () => (await window.axe.run(document.getElementById('try'), { resultTypes: ['violations'] }))
    .violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes[0].target}`));
  assert.deepEqual(axe, []);

  // Stop, half way through B's positions: what was compared is drawn, the rest is marked as not
  // reached, and the next run works on the engine that was stopped
  await page.fill('#try-n', '200');
  const before = await page.$eval('#try', (e) => Number(e.dataset.runs || 0));
  const loads = await page.$eval('#try', (e) => Number(e.dataset.loads));
  // (Stop is clicked as the third of B's positions is announced, before the page goes on: two have
  // been compared, whatever the machine's speed)
  await page.evaluate(() => {
    const status = document.getElementById('try-status');
    const watch = new MutationObserver(() => {
      if (Number((/: position (\d+) of/.exec(status.textContent) || [])[1]) >= 3) {
        watch.disconnect();
        document.getElementById('try-stop').click();
      }
    });
    watch.observe(status, { childList: true, characterData: true, subtree: true });
  });
  await page.click('#try-run');
  await page.waitForFunction((n) => Number(document.getElementById('try').dataset.runs || 0) > n, before, { timeout: 180000 });
  const halted = await readRun(page);
  assert.equal(halted.state, 'stopped', halted.status);
  assert.equal(await page.$eval('#try-stop', (b) => b.disabled), true);
  assert.equal(await page.$eval('#try', (e) => Number(e.dataset.loads)), loads, 'A and B stay loaded between runs');
  const notReached = halted.compare.rows.filter((x) => x.why === 'not reached: stopped').length;
  assert.equal(notReached, halted.compare.rows.length - 2, 'stopped after two of B\'s positions');
  await page.fill('#try-n', String(N));

  // chat mode: the file's template as @huggingface/jinja renders it, and llama.cpp ran that text
  const c = await run(page, { chat: true });
  const rendered = new Template(template).render({ messages: [{ role: 'user', content: prompt }], add_generation_prompt: true, bos_token: '', eos_token: '' });
  assert.equal(c.rendered, rendered);
  const chatTokens = tokensOf(rendered);
  assert.equal(c.promptTokens, chatTokens.length);
  assertTopK(c.topA[0], referenceLogProbs(work, fileA, chatTokens)[chatTokens.length - 1], 'chat step 1');

  // the page's demo model (a 400-piece SentencePiece vocabulary, most of it bytes): lone bytes
  // land in its top-k and are taken; each listed as its byte, every step the reference's
  await page.setInputFiles('#try-pick', [demo, fileL3]);
  await page.selectOption('#try-a', 'picked:' + path.basename(demo));
  await page.fill('#try-prompt', 'Once upon a time');
  const d = await run(page);
  assert.equal(d.ids.length, N);
  const refDemo = referenceLogProbs(work, demo, [...d.promptIds, ...d.ids.slice(0, -1)]);
  d.topA.forEach((top, i) => assertTopK(top, refDemo[d.promptIds.length - 1 + i], `demo step ${i + 1}`));
  assert.ok(d.shown.some((t) => /\\\\x[89a-f][0-9a-f]/.test(t)), `a lone byte among the listed tokens: ${d.shown.join(' ')}`);

  // byte-level BPE, a prompt of emoji and CJK (tokens that are pieces of a character), side by
  // side with itself: every prompt position compared, its pieces the prompt's bytes
  const emoji = 'Llamas 🦙🦙 日本語 ok';
  await page.selectOption('#try-a', 'picked:' + path.basename(fileL3));
  await page.fill('#try-prompt', emoji);
  const l = await run(page, { b: 'picked:' + path.basename(fileL3) });
  const P3 = l.promptIds.length;
  const m3 = await llama.loadModel({ modelPath: fileL3 });
  const bos3 = m3.tokens.shouldPrependBosToken ? [m3.tokens.bos] : [];
  assert.deepEqual(l.promptIds, [...bos3, ...m3.tokenize(emoji, true)], 'the prompt\'s ids: the reference tokenizer\'s');
  await m3.dispose();
  const pieces = l.compare.promptPieces.map((p) => Buffer.from(p));
  assert.deepEqual(Buffer.concat(pieces.slice(bos3.length)), Buffer.from(emoji));
  assert.ok(pieces.some((p) => !isUtf8(p)), 'a prompt token that is part of a character');
  const refL3 = referenceLogProbs(work, fileL3, [...l.promptIds, ...l.ids.slice(0, -1)]);
  for (const x of l.compare.rows) {
    assert.equal(x.why, null, `after ${x.read} tokens: ${x.why}`);
    assertTopK(x.topA, refL3[x.read - 1], `Llama 3 vocabulary after ${x.read} tokens`);
    assert.deepEqual(x.topB, x.topA);
    assert.equal(x.kl, 0);
  }
  assert.equal(l.compare.rows.length, P3 - 1 + N);
  await page.fill('#try-prompt', prompt);

  // offline: the service worker has wllama's files, and the kept file runs again
  await page.evaluate(() => navigator.serviceWorker.ready);
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  await context.setOffline(true);
  await page.reload();
  await harness.waitState(page, ['idle', 'error']);
  await page.waitForFunction(() => document.getElementById('try').dataset.files === '1');  // picked files are gone
  await page.selectOption('#try-a', 'kept:A-F32.gguf');
  await page.fill('#try-prompt', prompt);
  await page.fill('#try-n', '2');
  const off = await run(page);
  assert.deepEqual(off.ids, r.ids.slice(0, 2));
  await context.setOffline(false);

  const origin = new URL(session.url).origin;
  const away = requests.filter((u) => !u.startsWith(origin + '/') && !/^(blob|data):/.test(u));
  assert.deepEqual(away, [], 'no request leaves the origin');
  assert.ok(requests.some((u) => u.endsWith('/vendor/wllama-mt.wasm')));
  assert.deepEqual(errors, []);
  await context.close();
});
