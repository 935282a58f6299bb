// Split GGUF on the page, in Debian's Chromium: the demo converted into parts (the page's split
// select, with a size small enough to make several parts of the demo) writes every part, each
// byte-identical to the native CLI's part, each offered as a download; Verify reads them all;
// opening the parts together shows one file (the block view reads a tensor of a later part from
// that part); a missing part is named; Try it lists the parts as one model and llama.cpp (wllama)
// runs it from them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as harness from './harness.mjs';
import { waitState } from './harness.mjs';
import { root, runNative, tempDir } from '../node/helpers.mjs';

const work = tempDir('browser-split');
const demo = path.join(root, 'web', 'demo', 'tiny-llama');
const session = harness.useBrowser(work);
const SIZE = '1000000';  // bytes of tensors a part: several parts of the demo's Q8_0 (3.6 MB)

// The native CLI's parts of the demo: { name: bytes }.
function nativeParts() {
  const dir = tempDir('split-native');
  const r = runNative([path.join(dir, 'demo.gguf'), '--model', demo, '--outtype', 'Q8_0', '--split-max-size', SIZE, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  const parts = {};
  for (const f of fs.readdirSync(dir).sort()) parts[f] = fs.readFileSync(path.join(dir, f));
  return parts;
}

test('the page writes a split GGUF as the CLI does, verifies it, opens it whole, and Try it runs it', async () => {
  const want = nativeParts();
  const n = Object.keys(want).length;
  assert.ok(n >= 3, `${n} parts: the size must cut the demo into several`);
  const { context, page, errors } = await harness.openPage(session.browser, session.url);
  await page.click('#demo');
  await waitState(page, ['ready', 'error']);
  await page.selectOption('#format', 'gguf-q8_0');
  assert.equal(await page.isVisible('#split-options'), true, 'GGUF offers parts');
  // a size of the select's kind (gguf-split's N[M|G]; a bare N is bytes): the demo is small
  await page.evaluate((size) => document.getElementById('split').append(new Option('test', size)), SIZE);
  await page.selectOption('#split', SIZE);
  await page.waitForFunction((k) => new RegExp(`In ${k} parts\\.`).test(document.getElementById('prediction').textContent), n);

  const downloads = [];
  let allIn = null;
  const arrived = new Promise((resolve) => { allIn = resolve; });
  page.on('download', (d) => { downloads.push(d); if (downloads.length === n) allIn(); });
  await page.click('#convert');
  await waitState(page, ['done', 'error'], 120000);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await page.textContent('#error'));
  const s = await page.evaluate(() => window.__leapconv.summary);
  const names = Object.keys(want).map((f) => f.replace(/^demo/, 'tiny-llama-Q8_0'));
  assert.deepEqual(s.outputs, names);
  // every part, offered and downloaded, is the CLI's
  await page.waitForFunction((k) => document.querySelectorAll('#download-parts a').length === k, n);
  // (every part's download event, however slowly the browser hands them out)
  await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 60000))]);
  assert.equal(downloads.length, n);
  for (const d of downloads) {
    const name = d.suggestedFilename();
    const native = want[name.replace(/^tiny-llama-Q8_0/, 'demo')];
    assert.ok(native, name);
    assert.ok(fs.readFileSync(await d.path()).equals(native), `${name}: the page's part differs from the CLI's`);
  }

  // Verify reads every part
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
  assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', await page.textContent('#verify-status'));
  assert.equal(await page.evaluate(() => window.__leapconv.verify.tensors.length), s.tensors.length);

  // the parts opened together are one file: every tensor, each read from its part
  const partFiles = Object.keys(want).map((f) => {
    const p = path.join(work, f.replace(/^demo/, 'tiny-llama-Q8_0'));
    fs.writeFileSync(p, want[f]);
    return p;
  });
  await page.setInputFiles('#open-input', [...partFiles].reverse());  // in any order
  await waitState(page, ['opened', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'opened', await page.textContent('#error'));
  const opened = await page.evaluate(() => window.__leapconv.opened);
  assert.equal(opened.info.parts.length, n);
  assert.deepEqual(opened.names, names, 'the parts in their order');
  assert.equal(opened.info.tensors.length, s.tensors.length);
  assert.match(await page.textContent('#result-text'), new RegExp(`a split file: ${n} parts`));
  const last = opened.info.tensors.filter((t) => t.file === n - 1 && t.decodable && t.dtype === 'Q8_0').at(-1);
  assert.ok(last, 'a Q8_0 tensor in the last part');
  const from = await page.evaluate((name) => new Promise((resolve) => {
    document.addEventListener('leapconv:opened-tensor', (e) => resolve(e.detail.file.name), { once: true });
    document.querySelector(`#opened-tensors tr[data-tensor="${name}"]`).click();
  }), last.name);
  assert.equal(from, names[n - 1], 'the block view reads the tensor from its part');
  await page.waitForFunction(() => document.getElementById('bv-view').dataset.state === 'ready', null, { timeout: 30000 });
  // a part missing: named
  await page.setInputFiles('#open-input', partFiles.filter((_, i) => i !== 1));
  await waitState(page, ['opened', 'error', 'idle', 'ready', 'done']);
  await page.waitForFunction(() => !document.getElementById('error').hidden);
  assert.match(await page.textContent('#error'), new RegExp(`${names[1].replace(/[.]/g, '\\.')}: is missing`));

  // Try it: the kept parts are one model, and llama.cpp runs it from them
  await page.waitForFunction((k) => [...document.querySelectorAll('#try-a option')].some((o) => o.textContent.includes(`(${k} parts)`)), n);
  const value = await page.$eval('#try-a', (sel, k) => [...sel.options].find((o) => o.textContent.includes(`(${k} parts)`)).value, n);
  await page.selectOption('#try-a', value);
  await page.selectOption('#try-b', '');
  await page.fill('#try-n', '4');
  await page.fill('#try-k', '1');
  const runs = await page.$eval('#try', (e) => Number(e.dataset.runs || 0));
  await page.click('#try-run');
  await page.waitForFunction((k) => Number(document.getElementById('try').dataset.runs || 0) > k, runs, { timeout: 180000 });
  assert.equal(await page.evaluate(() => document.getElementById('try').dataset.state), 'done',
    await page.textContent('#try-status'));
  assert.equal(JSON.parse(await page.$eval('#try-out', (e) => e.dataset.ids)).length, 4);
  assert.deepEqual(errors, []);
  await context.close();
});
