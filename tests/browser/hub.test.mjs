// Input from the Hugging Face Hub, against a stand-in that answers as the Hub does
// (mock_hub.mjs: its API, `resolve` redirects to a second origin serving ranges with the Hub's CORS
// headers, ETags, 401/403/404/429): a model typed by id converts to the native CLI's bytes of the
// same folder, its shards read by range, never whole; a connection cut mid-shard and a 429 are
// retried; a shard that changes between requests, and every refusal a user meets, is one sentence.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';
import { convertDownload, launchOptions, openPage, waitState } from './harness.mjs';
import { generate, readShard, runNative, tempDir } from '../node/helpers.mjs';
import { showGroup, showBlock, blockValues } from './views.mjs';
import { referenceLogProbs } from '../node/llama_ref.mjs';
import { startTestHub, REPO, TOKEN, NO_ACCESS_TOKEN } from './mock_hub.mjs';

const work = tempDir('hub');
let hub, server, plain, browser, dir;

before(async () => {
  // three shards of ~8 MB (rows of 512 and 1536: K-quants write their own blocks), a real
  // SentencePiece tokenizer
  dir = generate(path.join(work, 'tiny-llama'), ['--dim', '512', '--hidden', '1536', '--layers', '4', '--heads', '8', '--kv-heads', '4',
    '--vocab', '400', '--seq-len', '256', '--dtype', 'bf16', '--shards', '3', '--seed', '11']);
  hub = await startTestHub(dir);
  server = await startServer(0, { hubOrigins: hub.origins });
  plain = await startServer(0, { isolate: false, hubOrigins: hub.origins });
  browser = await chromium.launch(launchOptions);
});
after(async () => {
  await browser?.close();
  server?.close();
  plain?.close();
  await hub?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

const urlOf = (s) => `http://127.0.0.1:${s.address().port}/`;
const hubPage = (s = server) => openPage(browser, urlOf(s), { initScript: { content: `globalThis.LEAPCONV_HUB_URL = ${JSON.stringify(hub.url)};` } });

async function openFromHub(page, id, token = '') {
  await page.fill('#hub-id', id);
  await page.evaluate(() => { document.getElementById('hub-token-box').open = true; });
  await page.fill('#hub-token', token);
  // (a state of the test's own first: the page's answer is the next state it sets)
  await page.evaluate(() => { document.body.dataset.state = 'test-waits'; });
  await page.click('#hub-open');
  await waitState(page, ['ready', 'error']);
  return page.evaluate(() => document.body.dataset.state);
}
const errorText = (page) => page.textContent('#error');

const convert = async (page, format) => (await convertDownload(page, format)).bytes;

function native(type) {
  const out = path.join(work, `native-${type}.gguf`);
  const r = runNative([out, '--model', dir, ['Q8_0', 'F32'].includes(type) ? '--outtype' : '--type', type, '--quiet']);  // (the page's Q8_0 and F32: the converter's)
  assert.equal(r.code, 0, r.stderr);
  return fs.readFileSync(out);
}
const shardNames = () => fs.readdirSync(dir).filter((n) => n.endsWith('.safetensors')).sort();
// What the CDN was asked for, per shard: [start, end] of each range.
const cdnRanges = () => hub.log.filter((e) => e.origin === 'cdn' && e.method === 'GET').map((e) => {
  const m = /^bytes=(\d+)-(\d+)$/.exec(e.range);
  return { file: decodeURIComponent(e.url.split('/').pop()), a: m ? Number(m[1]) : -1, z: m ? Number(m[2]) : -1, cut: !!e.cut, status: e.status };
});

test('a model typed by id converts from the Hub to the native CLI\'s bytes, its shards read by range, never whole; verify reads it again; Try it runs the result', async () => {
  const { context, page, errors } = await hubPage();
  hub.resetCounts();
  assert.equal(await openFromHub(page, `https://huggingface.co/${REPO}/tree/v1`), 'ready', await errorText(page));
  const facts = await page.textContent('#model');
  assert.match(facts, new RegExp(`the Hugging Face Hub: ${REPO}@v1`));
  for (const s of shardNames()) assert.ok(facts.includes(s), `${s} in the facts`);
  // listing and resolving read no shard's data: each shard cost its header (a first small range)
  const sizes = Object.fromEntries(shardNames().map((n) => [n, fs.statSync(path.join(dir, n)).size]));
  const opened = cdnRanges();
  for (const r of opened) assert.ok(r.z - r.a + 1 <= 64 << 10, `opening read ${r.z - r.a + 1} bytes of ${r.file}`);
  hub.resetCounts();
  assert.ok((await convert(page, 'gguf-q8_0')).equals(native('Q8_0')), 'Q8_0 from the Hub = the native CLI\'s');
  const ranges = cdnRanges();
  assert.ok(ranges.every((r) => r.a >= 0 && r.status === 206), 'every byte by range request');
  for (const [n, size] of Object.entries(sizes)) {
    const mine = ranges.filter((r) => r.file === n);
    assert.ok(mine.length && mine.every((r) => r.z - r.a + 1 < size), `${n}: read in parts, never whole`);
    const got = mine.reduce((k, r) => k + r.z - r.a + 1, 0);
    assert.ok(got >= size * 0.95 && got <= size, `${n}: ${got} bytes fetched of ${size}`);
  }
  assert.match(await page.textContent('#progress-text'), /MB\/s from the Hub \([\d.]+ \w+ read\)/);
  assert.ok((await convert(page, 'gguf-q4_k_m')).equals(native('Q4_K_M')), 'Q4_K_M from the Hub = the native CLI\'s');
  assert.ok((await convert(page, 'gguf-f32')).equals(native('F32')), 'F32 from the Hub = the native CLI\'s');
  // verify re-reads the source by range
  hub.resetCounts();
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
  assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', await page.textContent('#verify-status'));
  assert.ok(cdnRanges().length > 0 && cdnRanges().every((r) => r.status === 206));
  // Try it on what the Hub's model became: llama.cpp in the tab, against the reference forward pass
  // on the native CLI's file
  const kept = await page.$$eval('#try-a option', (os) => os.map((o) => o.value).filter((v) => /^kept:.*F32\.gguf$/.test(v)));
  assert.equal(kept.length, 1, 'the Hub model\'s F32 file is offered to Try it');
  await page.selectOption('#try-a', kept[0]);
  await page.selectOption('#try-b', '');
  await page.fill('#try-prompt', 'Once upon a time');
  await page.fill('#try-n', '3');
  await page.fill('#try-k', '3');
  await page.click('#try-run');
  await page.waitForFunction(() => Number(document.getElementById('try').dataset.runs || 0) > 0, null, { timeout: 180000 });
  const run = await page.evaluate(() => {
    const out = document.getElementById('try-out');
    return { state: document.getElementById('try').dataset.state, status: document.getElementById('try-status').textContent,
      promptIds: JSON.parse(out.dataset.promptIds || '[]'), ids: JSON.parse(out.dataset.ids || '[]'),
      top: [...out.querySelectorAll('tr[data-top]')].map((r) => JSON.parse(r.dataset.top)) };
  });
  assert.equal(run.state, 'done', run.status);
  assert.equal(run.ids.length, 3);
  const ref = referenceLogProbs(work, path.join(work, 'native-F32.gguf'), [...run.promptIds, ...run.ids.slice(0, -1)]);
  run.top.forEach((list, i) => {
    const row = ref[run.promptIds.length - 1 + i];
    for (const [id, lp] of list) assert.ok(Math.abs(lp - row[id]) <= 1e-4, `step ${i + 1}: token ${id}: log p ${lp}, the reference's ${row[id]}`);
  });
  assert.deepEqual(errors, []);
  await context.close();
});

test('from the Hub: a connection cut mid-shard and a 429 are retried (same bytes); a shard changed between requests is an error naming it, nothing kept', async () => {
  const { context, page, errors } = await hubPage();
  assert.equal(await openFromHub(page, REPO), 'ready', await errorText(page));
  const [, second] = shardNames();
  const size = fs.statSync(path.join(dir, second)).size;
  hub.resetCounts();
  hub.faults.cut = { file: second, at: Math.floor(size / 2) };
  hub.faults.status = { on: 'cdn', code: 429, times: 1, retryAfter: 1 };
  const expected = native('Q8_0');
  assert.ok((await convert(page, 'gguf-q8_0')).equals(expected), 'the same bytes after a cut and a 429');
  const ranges = cdnRanges();
  assert.ok(ranges.some((r) => r.cut), 'the cut happened');
  assert.ok(ranges.some((r) => r.status === 429), 'the 429 happened');
  // a shard replaced on the Hub mid-conversion (same size, one byte changed)
  const changed = Buffer.from(fs.readFileSync(path.join(dir, second)));
  changed[size - 10] ^= 0x55;
  hub.faults.change = { file: second, after: 1, bytes: changed };
  try {
  await page.selectOption('#format', 'gguf-q8_0');
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  await page.click('#convert');
  await waitState(page, ['converting']);
  await waitState(page, ['done', 'error']);
  const err = await errorText(page);
  assert.match(err, new RegExp(`${second.replace(/\./g, '\\.')} changed on the Hub while it was read`), err);
  const kept = await page.evaluate(async () => {
    const names = [];
    for await (const [n, h] of (await navigator.storage.getDirectory()).entries())
      if (h.kind === 'directory') for await (const k of h.keys()) names.push(n + '/' + k);
    return names;
  });
  assert.ok(kept.every((n) => !n.endsWith('.partial')) && kept.length <= 2, `kept: ${kept}`);  // the two earlier files at most
  } finally {
    hub.faults.change = null;
    hub.addRepo(REPO, dir, { revisions: ['main', 'v1'] });  // the original bytes back
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test('from the Hub, single-threaded (no cross-origin isolation: the core reads through synchronous range requests): the same bytes', async () => {
  const { context, page, errors } = await hubPage(plain);
  assert.equal(await page.evaluate(() => crossOriginIsolated), false);
  assert.equal(await openFromHub(page, REPO), 'ready', await errorText(page));
  hub.resetCounts();
  assert.ok((await convert(page, 'gguf-q8_0')).equals(native('Q8_0')));
  assert.ok(cdnRanges().every((r) => r.a >= 0 && r.status === 206));
  assert.deepEqual(errors, []);
  await context.close();
});

test('from the Hub, what a user meets is one sentence saying what to do: not found, gated, token rejected, no safetensors, an LFS pointer, a bad name, rate-limited, a redirect elsewhere', async () => {
  const { context, page } = await hubPage();
  const cases = [
    ['not a model id', '', /is not a model id: it is "owner\/name"/],
    ['https://example.com/a/b', '', /Only models on huggingface\.co/],
    ['nobody/nothing', '', /No model nobody\/nothing on the Hub \(or it is private\).*paste an access token/],
    ['test-org/private', '', /No model test-org\/private on the Hub \(or it is private\)/],
    ['test-org/private', 'hf_wrong', /rejected the access token/],
    [`${REPO}@nope`, '', /has no branch, tag or commit "nope"/],
    ['test-org/gated', '', /test-org\/gated is gated: open .*accept its conditions, then paste an access token/],
    ['test-org/gated', NO_ACCESS_TOKEN, /gated and this token's account has not been granted access/],
    ['test-org/pickles', '', /only PyTorch pickle weights \(pytorch_model\.bin\)/],
    ['test-org/pointer', '', /model\.safetensors in test-org\/pointer is a Git LFS pointer/],
    ['test-org/escape', '', /names a file "\.\.\/\.\.\/evil\.safetensors", which is not a plain file name: refused/],
  ];
  for (const [id, token, want] of cases) {
    assert.equal(await openFromHub(page, id, token), 'error', id);
    assert.match(await errorText(page), want, id);
  }
  hub.faults.status = { on: 'hub', code: 429, times: 1 };
  assert.equal(await openFromHub(page, REPO), 'error');
  assert.match(await errorText(page), /limiting requests .*wait a minute/);
  const [first] = shardNames();
  hub.faults.redirect = { file: first, to: 'http://127.0.0.1:9/elsewhere' };
  assert.equal(await openFromHub(page, REPO), 'error');
  assert.match(await errorText(page), new RegExp(`The Hub redirected ${first.replace(/\./g, '\\.')} to an address outside its own: refused`));
  hub.faults.redirect = null;
  // with the token, the gated model opens; it was not remembered
  assert.equal(await openFromHub(page, 'test-org/gated', TOKEN), 'ready', await errorText(page));
  assert.equal(await page.evaluate(() => localStorage.getItem('leapconv-hub-token')), null);
  await context.close();
});

// A tensor's values on disk (the test's own reading of the shards: bf16 -> float): n from index at.
function diskValues(tensor, at, n) {
  for (const name of shardNames()) {
    const { b, header, data } = readShard(path.join(dir, name));
    const t = header[tensor];
    if (!t) continue;
    assert.equal(t.dtype, 'BF16');
    const f = new Float32Array(1), u = new Uint32Array(f.buffer);
    return Array.from({ length: n }, (_, i) => { u[0] = b.readUInt16LE(data + t.data_offsets[0] + 2 * (at + i)) << 16; return f[0]; });
  }
  throw new Error(`${tensor} is in no shard`);
}

test('from the Hub, the nibble and block views show a tensor read by range: its values are the shard\'s on disk', async () => {
  const { context, page, errors } = await openPage(browser, urlOf(server), {
    viewport: { width: 1480, height: 1000 }, initScript: { content: `globalThis.LEAPCONV_HUB_URL = ${JSON.stringify(hub.url)};` } });
  assert.equal(await openFromHub(page, REPO), 'ready', await errorText(page));
  hub.resetCounts();
  const tensor = 'model.layers.1.mlp.down_proj.weight', cols = 1536;  // [512, 1536]
  const g = await showGroup(page, { source: 'checkpoint', tensor, row: 37, group: 4 });
  assert.deepEqual(g.w, diskValues(tensor, 37 * cols + 4 * 64, 64), 'the nibble view\'s source values');
  await showBlock(page, { source: 'checkpoint', type: 'Q4_K', tensor, row: 5, block: 1 });
  const b = await blockValues(page, 256);
  assert.deepEqual(b.w, diskValues(tensor, 5 * cols + 256, 256), 'the block view\'s source values');
  const ranges = cdnRanges();
  assert.ok(ranges.length > 0 && ranges.every((r) => r.a >= 0 && r.status === 206), 'read by range');
  assert.deepEqual(errors, []);
  await context.close();
});
