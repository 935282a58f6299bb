// Faults in the page (issue 18): the crash-class inputs of tests/node/hardening.test.mjs give the
// CLI's own error line, never a RuntimeError; a source file that changes on disk after it was
// picked (before or during a conversion) gives one clear line naming it; no partial output is
// kept, and the page goes on to convert the next checkpoint.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as harness from './harness.mjs';
import { startServer } from '../../scripts/serve.mjs';
import { waitState } from './harness.mjs';
import { editConfig, f32, generate, readShard, root, runNative, setWeight, tempDir, writeShard } from '../node/helpers.mjs';

const work = tempDir('faults');
const session = harness.useBrowser(work);
const RAW = /RuntimeError|unreachable|memory access out of bounds|Aborted|remainder by zero|divide by zero/i;

// With a real SentencePiece tokenizer, so that the page offers GGUF.
const llama = generate(path.join(work, 'llama'), ['--dim', '64', '--hidden', '256', '--layers', '1', '--heads', '2',
  '--kv-heads', '1', '--vocab', '400', '--dtype', 'f32']);
fs.copyFileSync(path.join(root, 'tests', 'data', 'tiny_sp_bpe.model'), path.join(llama, 'tokenizer.model'));
const copy = (name) => { const to = path.join(work, name); fs.cpSync(llama, to, { recursive: true }); return to; };
const hugeWeight = (name, value) => setWeight(copy(name), 'model.layers.0.mlp.down_proj.weight', 5, value);

// [name, () => ({ input: folder or file, format: the page's choice, args: the CLI's output options })]
const cases = [
  ['an embedding with no rows', () => {
    const m = copy('no-rows');
    const shard = path.join(m, 'model.safetensors');
    const { b, header, data } = readShard(shard);
    const tensors = Object.entries(header).filter(([k]) => k !== '__metadata__' && k !== 'lm_head.weight')
      .map(([name, e]) => ({ name, dtype: e.dtype, shape: e.shape, data: b.subarray(data + e.data_offsets[0], data + e.data_offsets[1]) }));
    const emb = tensors.find((t) => t.name === 'model.embed_tokens.weight');
    emb.shape = [0, 64];
    emb.data = Buffer.alloc(0);
    writeShard(shard, tensors);
    editConfig(m, (c) => { delete c.vocab_size; c.tie_word_embeddings = true; });
    return { input: m, format: 'leap-1', args: ['o.bin'] };
  }],
  ['num_local_experts: 1e20', () => {
    const m = copy('experts');
    fs.writeFileSync(path.join(m, 'config.json'),
      fs.readFileSync(path.join(m, 'config.json'), 'utf8').replace('{', '{"num_local_experts": 1e20, '));
    return { input: m, format: 'leap-1', args: ['o.bin'] };
  }],
  ['hidden_size: 1e300', () => {
    const m = copy('hidden');
    fs.writeFileSync(path.join(m, 'config.json'),
      fs.readFileSync(path.join(m, 'config.json'), 'utf8').replace(/"hidden_size": *64/, '"hidden_size": 1e300'));
    return { input: m, format: 'gguf-q8_0', args: ['o.gguf', '--outtype', 'Q8_0'] };
  }],
  ['a weight too large for Q8_0', () => ({ input: hugeWeight('huge', 1e10), format: 'gguf-q8_0', args: ['o.gguf', '--outtype', 'Q8_0'] })],
  ['a weight past where Q6_K\'s search overflows', () => ({ input: hugeWeight('huge-q6', 1e20), format: 'gguf-q6_k', args: ['o.gguf', '--type', 'Q6_K'] })],
  ['duplicate keys in a safetensors header', () => {
    const f = path.join(work, 'dup.safetensors');
    const e = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [1], data: f32([1]) }], `{"w":${e},"w":${e}}`);
    return { input: f, format: 'gguf-lite-q8', args: ['o.gguf-lite', '--scheme', 'q8'] };
  }],
  ['a 9-D tensor', () => {
    const f = path.join(work, 'nine.safetensors');
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [1, 1, 1, 1, 1, 1, 1, 1, 2], data: f32([1, 2]) }]);
    return { input: f, format: 'gguf-lite-q8', args: ['o.gguf-lite', '--scheme', 'q8'] };
  }],
  ['dims whose product overflows', () => {
    const f = path.join(work, 'overflow.safetensors');
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [2 ** 40, 2 ** 40, 0], data: Buffer.alloc(0) }]);
    return { input: f, format: 'gguf-lite-q8', args: ['o.gguf-lite', '--scheme', 'q8'] };
  }],
];

const stateOf = (page) => page.evaluate(() => document.body.dataset.state);
const planSettled = (page) => page.waitForFunction(() => window.__leapconv.planPending === 0);
async function load(page, input) {
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.setInputFiles(fs.statSync(input).isDirectory() ? '#folder-input' : '#files-input', input);
  await waitState(page, ['ready', 'error']);
  await planSettled(page);
}
// The page goes on after a failure: the demo model loads and converts. The state is 'error'
// already, so wait for the demo's own 'ready' (a sentinel first, as load() does).
async function convertsDemo(page) {
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.click('#demo');
  await waitState(page, ['ready', 'error']);
  await planSettled(page);
  await page.selectOption('#format', 'gguf-q8_0');
  await planSettled(page);
  assert.equal((await tryConvert(page)).state, 'done');
}
// Converts with the current choice; the state it ends in and the error shown.
// The error's technical line ('' when none is shown).
const errorLine = (page) => page.$eval('#error', (e) => (e.querySelector('.error-detail')?.textContent ?? '').trim());
async function tryConvert(page, timeout = 120000) {
  await page.waitForFunction(() => !document.getElementById('convert').disabled || document.body.dataset.plan === 'error');
  if (await page.evaluate(() => !document.getElementById('convert').disabled)) {
    await page.click('#convert');
    await waitState(page, ['done', 'error'], timeout);
  }
  // (the error's technical line: the CLI's; the page's first line, when it gives one, is advice)
  return { state: await stateOf(page), error: await errorLine(page),
    advice: (await page.$eval('#error', (e) => e.querySelector('.error-what')?.textContent ?? '')) };
}
const partials = (page) => page.evaluate(async () => {
  const out = [];
  const rootDir = await navigator.storage.getDirectory();
  for await (const [name, h] of rootDir.entries())
    if (h.kind === 'directory') for await (const [k] of h.entries()) if (k.endsWith('.partial')) out.push(`${name}/${k}`);
  return out;
});

test('the crash-class inputs give the page the CLI\'s error line, and the page goes on', async () => {
  const { context, page, errors } = await harness.openPage(session.browser, session.url);
  for (const [name, setup] of cases) {
    const { input, format, args } = setup();
    const cli = runNative([path.join(work, args[0]), '--model', input, '--quiet', ...args.slice(1)]);
    assert.equal(cli.code, 1, `${name}: native exit ${cli.code}\n${cli.stderr}`);
    const line = cli.stderr.split('\n').find((l) => l.startsWith('error: '));
    const dir = fs.statSync(input).isDirectory() ? input : path.dirname(input);
    const expected = line.slice('error: '.length).split(dir + '/').join('');
    await load(page, input);
    let shown = await errorLine(page);
    if ((await stateOf(page)) === 'ready') {
      // a format the core refuses for this checkpoint is off in the menu, with its reason
      const refused = await page.$eval('#format', (sel, v) => [...sel.options].find((o) => o.value === v)?.title || '', format);
      if (refused) {
        shown = refused;
      } else {
        await page.selectOption('#format', format);
        await planSettled(page);
        shown = (await tryConvert(page)).error;
      }
    }
    assert.doesNotMatch(shown, RAW, name);
    assert.equal(shown, expected, name);
    assert.deepEqual(await partials(page), [], `${name}: a partial output was kept`);
  }
  // and the page still converts
  await convertsDemo(page);
  assert.deepEqual(errors, []);
  await context.close();
});

// A real fault: the shard truncated, or removed, on disk after it was picked and before Convert
// (the browser then refuses to read the File: NotReadableError).
test('a source file changed or removed on disk after it was picked: one clear line, nothing kept, the page goes on', async () => {
  const { context, page, errors } = await harness.openPage(session.browser, session.url);
  for (const fault of ['truncated', 'removed']) {
    const m = copy(`fault-${fault}`);
    const shard = path.join(m, 'model.safetensors');
    await load(page, m);
    assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
    await page.selectOption('#format', 'gguf-q8_0');
    await planSettled(page);
    await page.waitForFunction(() => !document.getElementById('convert').disabled);
    if (fault === 'truncated') fs.truncateSync(shard, fs.statSync(shard).size >> 1);
    else fs.rmSync(shard);
    const { state, error, advice } = await tryConvert(page);
    assert.equal(state, 'error', `${fault}: the conversion ended in ${state}`);
    assert.doesNotMatch(error, RAW, fault);
    assert.match(error, /^model\.safetensors: tensor '[^']+': cannot read the file: it was changed, moved or removed after it was picked/,
      `${fault}: ${error}`);
    assert.equal(error.split('\n').length, 1, error);
    assert.equal(advice, 'model.safetensors could not be read any more: a file changed, moved or removed after it was picked cannot be read. Pick the files again.');
    assert.deepEqual(await partials(page), [], `${fault}: a partial output was kept`);
  }
  // usable: the demo converts
  await convertsDemo(page);
  assert.deepEqual(errors, []);
  await context.close();
});

// The single-threaded page (not cross-origin isolated) reads through WORKERFS, not the reader
// worker: the same fault is named the same way.
test('single-threaded page: a source file changed after it was picked is named as such', async () => {
  const server = await startServer(0, { isolate: false });
  try {
    const { context, page, errors } = await harness.openPage(session.browser, `http://127.0.0.1:${server.address().port}/`);
    assert.equal(await page.evaluate(() => window.__leapconv.threaded), false);
    const m = copy('fault-st');
    await load(page, m);
    await page.selectOption('#format', 'gguf-q8_0');
    await planSettled(page);
    await page.waitForFunction(() => !document.getElementById('convert').disabled);
    fs.truncateSync(path.join(m, 'model.safetensors'), 1000);
    const { state, error, advice } = await tryConvert(page);
    assert.equal(state, 'error');
    assert.doesNotMatch(error, RAW);
    assert.match(error, /^model\.safetensors: .*changed, moved or removed after it was picked/, error);
    assert.match(advice, /^A file of the checkpoint could not be read any more: .* Pick the files again\.$/);
    assert.deepEqual(await partials(page), []);
    assert.deepEqual(errors, []);
    await context.close();
  } finally {
    server.close();
  }
});
