// The page as a product, in Debian's Chromium: one state machine (nothing that would change or
// lose running work stays live), storage that keeps no partial file and lists what it keeps,
// the scheme editor's order and validation, presets that say when they are larger than the
// source, real-world folders, axe-core on every view (light and dark), the phone layout, and the
// headers npm start serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { startServer, HUB_ORIGINS } from '../../scripts/serve.mjs';
import * as harness from './harness.mjs';
import { outDir, waitState } from './harness.mjs';
import { editConfig, generate, nativeCli, root, tempDir } from '../node/helpers.mjs';

const work = tempDir('page');
const demo = path.join(root, 'web', 'demo', 'tiny-llama');
const session = harness.useBrowser(work);
const axeSource = fs.readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

// Records CSP violations the page meets (there should be none).
function watchCsp() {
  window.__csp = [];
  document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
}
const openPage = ({ url = session.url, viewport, initScript } = {}) =>
  harness.openPage(session.browser, url, { viewport, initScript: initScript || watchCsp });
const planSettled = (page) => page.waitForFunction(() => window.__leapconv.planPending === 0);
const stateOf = (page) => page.evaluate(() => document.body.dataset.state);

async function loadDemo(page) {
  await page.click('#demo');
  await waitState(page, ['ready', 'error']);
  assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
  await planSettled(page);
}
async function loadFolder(page, dir) {
  // not the last load's 'error' or 'ready': wait for this load's own outcome
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.setInputFiles('#folder-input', dir);
  await waitState(page, ['ready', 'error']);
  await planSettled(page);
}
async function convert(page, format) {
  if (format) await page.selectOption('#format', format);
  await planSettled(page);
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  const download = page.waitForEvent('download', { timeout: 120000 });
  await page.click('#convert');
  const d = await download;
  await waitState(page, ['done', 'error'], 120000);
  assert.equal(await stateOf(page), 'done', await page.textContent('#error'));
  return { bytes: fs.readFileSync(await d.path()), name: d.suggestedFilename() };
}
const opfs = (page) => page.evaluate(async () => {
  const out = {};
  const rootDir = await navigator.storage.getDirectory();
  for await (const [name, h] of rootDir.entries()) {
    if (h.kind !== 'directory') continue;
    for await (const [k, f] of h.entries()) out[`${name}/${k}`] = (await f.getFile()).size;
  }
  return out;
});

async function axeCheck(page, view) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(axeSource);
  const bad = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 4).map((n) => `${n.target.join(' ')}: ${n.failureSummary}`) })));
  assert.deepEqual(bad, [], `${view}: ${JSON.stringify(bad, null, 1)}`);
}

// A clone without git-lfs: the shard is a pointer file.
function lfsFolder() {
  const lfs = path.join(work, 'lfs');
  if (fs.existsSync(lfs)) return lfs;
  fs.mkdirSync(lfs);
  fs.copyFileSync(path.join(demo, 'config.json'), path.join(lfs, 'config.json'));
  fs.writeFileSync(path.join(lfs, 'model.safetensors'),
    'version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 2200119864\n');
  return lfs;
}

// A checkpoint big enough that its conversion and verify take a while (161 MB of bf16).
let bigModel = null;
const big = () => bigModel || (bigModel = generate(path.join(work, 'big'), ['--dim', '1024', '--hidden', '2816', '--layers', '6',
  '--heads', '16', '--kv-heads', '4', '--vocab', '8000', '--dtype', 'bf16']));

test('state: while a conversion runs, format, schemes, loading and Verify are off; the result describes the file written', async () => {
  const { context, page, errors } = await openPage();
  await loadFolder(page, big());
  await page.selectOption('#format', 'gguf-lite-q4');
  await planSettled(page);
  const predicted = Number(await page.getAttribute('#prediction', 'data-total'));
  // Click Convert, then at once try what used to break a running conversion: another format,
  // another checkpoint (the demo button, a drop), Convert again.
  const during = await page.evaluate(async () => {
    const $ = (id) => document.getElementById(id);
    $('convert').click();
    const snap = {
      state: document.body.dataset.state,
      off: Object.fromEntries(['format', 'seq-len', 'demo', 'pick-folder', 'pick-files', 'convert', 'save-as', 'verify',
        'scheme-default', 'scheme-preset', 'scheme-add-rule'].map((id) => [id, $(id).disabled])),
      schemeSelectsLive: [...document.querySelectorAll('#scheme-table select')].filter((s) => !s.disabled).length,
      dropTarget: $('drop-target').getAttribute('aria-disabled'),
      busyNote: $('busy-note').hidden ? '' : $('busy-note').textContent,
      progressRole: $('progress-bar').getAttribute('role'),
    };
    // the select is off for the user; a change event anyway must not touch the running conversion
    $('format').value = 'leap-1';
    $('format').dispatchEvent(new Event('change'));
    $('demo').click();
    const dt = new DataTransfer();
    dt.items.add(new File(['{}'], 'config.json'));
    $('dropzone').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    $('convert').click();
    return snap;
  });
  assert.equal(during.state, 'converting');
  for (const [id, off] of Object.entries(during.off)) assert.equal(off, true, `#${id} is live during a conversion`);
  assert.equal(during.schemeSelectsLive, 0);
  assert.equal(during.dropTarget, 'true');
  assert.match(during.busyNote, /^Converting: loading another checkpoint, changing the output and Verify are off/);
  assert.equal(during.progressRole, 'progressbar');
  await waitState(page, ['done', 'error'], 120000);
  assert.equal(await stateOf(page), 'done', await page.textContent('#error'));
  // the result is the file that was written, whatever the menu says now
  const file = Object.entries(await opfs(page)).find(([k]) => k.startsWith('leapconv-output/'));
  assert.deepEqual(file, ['leapconv-output/big-q4.gguf-lite', predicted]);
  assert.match(await page.textContent('#result-text'), /^big-q4\.gguf-lite: GGUF-lite, Q4 per group of 64\. /);
  assert.equal(await page.evaluate(() => window.__leapconv.summary.total_bytes), predicted);
  assert.equal(await page.evaluate(() => window.__leapconv.model.label), 'big', 'the demo did not replace the checkpoint');
  assert.equal(await page.getAttribute('#progress-bar', 'aria-valuenow'), '100');
  assert.match(await page.textContent('#progress-live'), /^Done: big-q4\.gguf-lite/);
  // and after it everything is live again
  for (const id of ['format', 'demo', 'convert', 'verify', 'scheme-preset']) assert.equal(await page.isDisabled(`#${id}`), false, id);
  assert.ok(await page.isHidden('#busy-note'));
  // the result is in view, its heading focused
  const r = await page.evaluate(() => ({ top: document.getElementById('result-title').getBoundingClientRect().top, h: innerHeight,
    focus: document.activeElement.id }));
  // (scrolled to its top: within a pixel of the window's, as layout may put it at a half pixel)
  assert.ok(r.top > -1 && r.top < r.h, `the result is at ${r.top} px, the window ${r.h} px high`);
  assert.equal(r.focus, 'result-title');
  assert.deepEqual(errors, []);
  await context.close();
});

test('state: Convert and loading are off while Verify runs, Verify shows progress and can be cancelled; its bars are named', async () => {
  const { context, page, errors } = await openPage();
  await loadFolder(page, big());
  await convert(page, 'leap-2');
  const during = await page.evaluate(() => {
    const $ = (id) => document.getElementById(id);
    $('verify').click();
    $('convert').click();  // off: must not start a conversion that would replace the file being verified
    return { state: document.body.dataset.state, convert: $('convert').disabled, demo: $('demo').disabled, verify: $('verify').disabled,
      progress: !$('verify-progress').hidden, cancel: !$('verify-cancel').hidden, format: $('format').disabled };
  });
  assert.deepEqual(during, { state: 'verifying', convert: true, demo: true, verify: true, progress: true, cancel: true, format: false });
  // the page stays responsive while it verifies: a plan for another format comes back meanwhile
  await page.selectOption('#format', 'gguf-lite-q8');
  await planSettled(page);
  assert.equal(await stateOf(page), 'verifying');
  await page.click('#verify-cancel');
  await page.waitForFunction(() => document.body.dataset.verify === 'cancelled');
  assert.equal(await stateOf(page), 'done');
  assert.equal(await page.textContent('#verify-status'), 'Verify cancelled.');
  assert.ok(await page.isHidden('#verify-progress'));
  assert.equal(await page.isDisabled('#convert'), false);
  // the result still describes the LEAP file, not the menu's GGUF-lite entry
  assert.match(await page.textContent('#result-text'), /^big-leap-v2\.bin: LEAP \.bin, version 2/);

  // a whole verify: PASS, each column held to the bar it says
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 180000 });
  assert.equal(await page.evaluate(() => document.body.dataset.verify), 'pass', await page.textContent('#verify-status'));
  assert.match(await page.textContent('#verify-status'), /^PASS: \d+ of \d+ tensors read back exactly \(bar: difference 0\); .*\(bar: ≤ 1e-3 per layer\)/);
  const heads = await page.$$eval('#verify-table thead th', (t) => t.map((e) => e.textContent));
  assert.deepEqual(heads, ['layer', 'max |file − source as written| (bar: ≤ 1e-3)', 'file vs as written',
    'max |as written − unquantized source| (what quantization costs; no bar)']);
  const verdicts = await page.$$eval('#verify-table tbody tr', (r) => r.map((e) => e.cells[2].textContent));
  assert.ok(verdicts.length > 0 && verdicts.every((v) => v === 'pass: ≤ 1e-3'), verdicts.join());
  assert.ok(!(await page.textContent('#verify-table')).includes('ok'), 'no bare "ok" beside the cost column');
  assert.deepEqual(errors, []);
  await context.close();
});

test('state: loading another checkpoint clears the previous one\'s progress, warnings, result and verify', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);
  await convert(page, 'gguf-lite-q4');
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
  assert.equal(await page.isDisabled('#nv-source option[value="file"]'), false);
  const other = generate(path.join(work, 'other'), ['--dim', '64', '--layers', '2']);
  await loadFolder(page, other);
  assert.equal(await stateOf(page), 'ready');
  for (const hidden of ['#result', '#progress', '#verify-table', '#skip-result']) assert.ok(await page.isHidden(hidden), hidden);
  assert.equal(await page.textContent('#verify-status'), '');
  assert.equal(await page.evaluate(() => window.__leapconv.written), null);
  assert.equal(await page.isDisabled('#nv-source option[value="file"]'), true, 'the nibble view no longer offers the old file');
  assert.equal(await page.isDisabled('#verify'), true);
  await context.close();
});

test('metadata: a model name and a metadata file (the converter\'s --model-name and --metadata) give the CLI\'s bytes; a bad file is one line naming it and the key, and no Convert; another model starts without them', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);
  await page.selectOption('#format', 'gguf-q8_0');
  const meta = path.join(work, 'meta.json'), bad = path.join(work, 'bad-meta.json');
  fs.writeFileSync(meta, JSON.stringify({ 'general.author': 'Someone', 'general.version': 'v2', 'general.tags': ['tiny', 'test'] }));
  fs.writeFileSync(bad, JSON.stringify({ 'general.name': 5 }));
  await page.fill('#model-name', 'My Tiny Model');
  await page.dispatchEvent('#model-name', 'change');
  await page.setInputFiles('#meta-input', meta);
  await page.waitForFunction(() => document.getElementById('meta-file').textContent === 'meta.json');
  await planSettled(page);
  const got = await convert(page);
  const want = path.join(work, 'meta-native.gguf');
  const r = spawnSync(nativeCli, [want, '--model', demo, '--outtype', 'Q8_0', '--metadata', meta, '--model-name', 'My Tiny Model', '--quiet'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(got.bytes.equals(fs.readFileSync(want)), 'the file differs from the CLI\'s with --metadata and --model-name');
  // a name that is not text: the converter stops there, the page says so in one line
  await page.setInputFiles('#meta-input', bad);
  await page.waitForFunction(() => document.body.dataset.plan === 'error');
  assert.match(await page.textContent('#error'), /bad-meta\.json.*general\.name/);
  assert.equal(await page.evaluate(() => document.getElementById('convert').disabled), true);
  await page.click('#clear-meta');
  await page.waitForFunction(() => document.body.dataset.plan === 'ok');
  // the next model starts without the last one's name
  await loadDemo(page);
  assert.equal(await page.inputValue('#model-name'), '');
  assert.equal(await page.evaluate(() => document.getElementById('meta-file').hidden), true);
  await context.close();
});

test('storage: where the browser keeps no files, a large file streams to the downloads front to back (the service worker): the native CLI\'s bytes, where it went said, Verify off; a cancel fails the download; GGUF-lite is built in memory', async () => {
  const { context, page } = await openPage();
  await page.evaluate(() => navigator.serviceWorker.ready);
  await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
  // as WebKit in a private session: no OPFS; and every file "large"
  await page.evaluate(() => { const s = window.__leapconv; s.caps = { ...s.caps, opfs: false }; s.streamAboveBytes = 0; });
  await loadDemo(page);
  for (const [format, flag, type] of [['gguf-q8_0', '--outtype', 'Q8_0'], ['gguf-q4_k_m', '--type', 'Q4_K_M']]) {
    const got = await convert(page, format);
    assert.equal(await page.evaluate(() => window.__leapconv.written.kind), 'stream');
    const want = path.join(work, `stream-${type}.gguf`);
    const r = spawnSync(nativeCli, [want, '--model', demo, flag, type, '--quiet'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(got.name, `tiny-llama-${type}.gguf`);
    assert.ok(got.bytes.equals(fs.readFileSync(want)), `${type}: the streamed file differs from the CLI's`);
  }
  assert.match(await page.textContent('#result-text'), /Streamed to your downloads as it was written/);
  assert.equal(await page.evaluate(() => document.getElementById('verify').disabled), true);
  assert.equal(await page.evaluate(() => document.getElementById('download').hidden), true);
  // GGUF-lite keeps a tensor's values and scales apart: it cannot be given front to back
  await page.selectOption('#format', 'gguf-lite-q4');
  await convert(page);
  assert.equal(await page.evaluate(() => window.__leapconv.written.kind), 'memory');
  // cancelled mid-way, the download fails: no file lands in the downloads (~180 MB of F32)
  const larger = generate(path.join(work, 'stream-larger'), ['--dim', '512', '--layers', '4', '--vocab', '32000', '--dtype', 'bf16']);
  fs.copyFileSync(path.join(demo, 'tokenizer.model'), path.join(larger, 'tokenizer.model'));
  await loadFolder(page, larger);
  await page.selectOption('#format', 'gguf-f32');
  await planSettled(page);
  const download = page.waitForEvent('download');
  await page.click('#convert');
  const d = await download;
  await page.waitForFunction(() => Number(document.getElementById('progress-bar').getAttribute('aria-valuenow')) > 0 ||
    document.body.dataset.state !== 'converting');
  await page.click('#cancel');
  await waitState(page, ['cancelled', 'error', 'done']);
  assert.equal(await stateOf(page), 'cancelled');
  assert.ok(await d.failure(), 'the cancelled download failed');
  await context.close();
});

test('storage: a reload mid-conversion leaves no partial file; kept files are listed, downloaded again and deleted', async () => {
  // the single-threaded page converts slowly enough to reload it halfway
  const plain = await startServer(0, { isolate: false });
  try {
    const url = `http://127.0.0.1:${plain.address().port}/`;
    const { context, page } = await openPage({ url });
    await loadFolder(page, big());
    await page.selectOption('#format', 'leap-1');
    await planSettled(page);
    await page.click('#convert');
    await page.waitForFunction(async () => {
      const d = await (await navigator.storage.getDirectory()).getDirectoryHandle('leapconv-output').catch(() => null);
      if (!d) return false;
      for await (const k of d.keys()) if (k.endsWith('.partial')) return true;
      return false;
    }, null, { polling: 20 });
    assert.equal(await stateOf(page), 'converting');
    // leaving mid-conversion asks first; the user goes ahead
    const asked = [];
    page.once('dialog', (dlg) => { asked.push(dlg.type()); dlg.accept(); });
    await page.reload();
    await waitState(page, ['idle', 'error']);
    await page.waitForFunction(() => document.body.dataset.storage === 'clean', null, { timeout: 30000 });
    assert.deepEqual(await opfs(page), {}, 'the partial output is gone after the reload');
    assert.deepEqual(asked, ['beforeunload']);
    assert.ok(await page.isHidden('#kept'), 'nothing kept, nothing listed');

    // two finished files: listed with their sizes, downloaded again, deleted one by one or all
    await loadDemo(page);
    const a = await convert(page, 'gguf-q8_0');
    const b = await convert(page, 'leap-2');
    await page.waitForFunction(() => document.getElementById('kept').dataset.files === '2');
    const listed = await page.$$eval('#kept-table tbody tr', (r) => r.map((e) => [e.dataset.file, Number(e.cells[1].dataset.bytes)]));
    assert.deepEqual(Object.fromEntries(listed), { [a.name]: a.bytes.length, [b.name]: b.bytes.length });
    assert.deepEqual(await opfs(page), { [`leapconv-output/${a.name}`]: a.bytes.length, [`leapconv-output/${b.name}`]: b.bytes.length },
      'no partial files, one copy of each output');
    assert.match(await page.textContent('#kept-summary'), /^2 files, [\d.]+ (KiB|MiB) in all, kept in this browser's storage for this page/);
    const again = page.waitForEvent('download');
    await page.click(`#kept-table tr[data-file="${a.name}"] .kept-download`);
    const d = await again;
    assert.equal(d.suggestedFilename(), a.name);
    assert.ok(fs.readFileSync(await d.path()).equals(a.bytes), 'downloaded again: the same bytes');
    // deleting the file the result shows: the result says so, Verify is off
    await page.click(`#kept-table tr[data-file="${b.name}"] .kept-delete`);
    await page.waitForFunction(() => document.getElementById('kept').dataset.files === '1');
    assert.deepEqual(Object.keys(await opfs(page)), [`leapconv-output/${a.name}`]);
    assert.match(await page.textContent('#result-text'), /\(Deleted from this browser since\.\)$/);
    assert.equal(await page.isDisabled('#verify'), true);
    assert.ok(await page.isHidden('#download'));
    page.once('dialog', (dlg) => dlg.accept());
    await page.click('#kept-clear');
    await page.waitForFunction(() => document.getElementById('kept').hidden);
    assert.deepEqual(await opfs(page), {});
    await context.close();
  } finally {
    plain.close();
  }
});

test('scheme editor: a new rule goes first, rules move, shadowed / no-match / invalid rules are marked, choices survive a format switch, the command runs as pasted', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  await page.selectOption('#format', 'gguf-mixed');
  await planSettled(page);
  const rulesShown = () => page.$$eval('#scheme-rules .rule', (r) => r.map((e) => [e.querySelector('.rule-n').textContent,
    e.querySelector('input').value, e.querySelector('select').value, e.querySelector('.rule-count').textContent]));
  assert.deepEqual(await rulesShown(), [['1.', 'blk.*.ffn_gate.weight', 'q4_0', 'decides 4 tensors'],
    ['2.', 'blk.*.ffn_up.weight', 'q4_0', 'decides 4 tensors'], ['3.', 'blk.*.ffn_down.weight', 'q4_0', 'decides 4 tensors']]);
  // a new rule is rule 1 (first match wins), with a pattern to type
  await page.click('#scheme-add-rule');
  assert.equal(await page.evaluate(() => document.activeElement.getAttribute('aria-label')), 'rule 1 pattern');
  assert.match(await page.textContent('#scheme-rules .rule:first-child .rule-problem'), /type a pattern/);
  await page.fill('#scheme-rules .rule:first-child input', 'blk.*.ffn_down.weight');
  await page.selectOption('#scheme-rules .rule:first-child select', 'q5_0');
  await planSettled(page);
  let shown = await rulesShown();
  assert.deepEqual(shown[0], ['1.', 'blk.*.ffn_down.weight', 'q5_0', 'decides 4 tensors']);
  assert.deepEqual(shown[3], ['4.', 'blk.*.ffn_down.weight', 'q4_0', 'shadowed by rule 1: it takes the 4 tensors first']);
  assert.ok(await page.$eval('#scheme-rules .rule:nth-child(4)', (e) => e.classList.contains('shadowed')));
  assert.equal(await page.getAttribute('#scheme-table tr[data-tensor="blk.2.ffn_down.weight"] .scheme-dtype', 'data-value'), 'Q5_0');
  // move it to the end: now the preset's rule decides, and the moved one is shadowed
  for (let i = 0; i < 3; i++) {
    await page.click(`#scheme-rules .rule:nth-child(${i + 1}) .rule-down`);
    await planSettled(page);
  }
  shown = await rulesShown();
  assert.deepEqual(shown.map((r) => r[1]), ['blk.*.ffn_gate.weight', 'blk.*.ffn_up.weight', 'blk.*.ffn_down.weight', 'blk.*.ffn_down.weight']);
  assert.deepEqual(shown[3], ['4.', 'blk.*.ffn_down.weight', 'q5_0', 'shadowed by rule 3: it takes the 4 tensors first']);
  assert.equal(await page.getAttribute('#scheme-table tr[data-tensor="blk.2.ffn_down.weight"] .scheme-dtype', 'data-value'), 'Q4_0');
  assert.equal(await page.isDisabled('#scheme-rules .rule:nth-child(4) .rule-down'), true, 'the last rule cannot go down');
  assert.equal(await page.isDisabled('#scheme-rules .rule:nth-child(1) .rule-up'), true, 'the first cannot go up');
  // invalid patterns are refused where they are typed, and left out of the rules
  for (const [pattern, why] of [['blk.[0-3].*', /no \[ \] or \{ \}/], ['blk.* ffn', /no spaces/], ['  ', /type a pattern/]]) {
    await page.fill('#scheme-rules .rule:nth-child(4) input', pattern);
    await planSettled(page);
    assert.equal(await page.getAttribute('#scheme-rules .rule:nth-child(4) input', 'aria-invalid'), 'true', pattern);
    assert.match(await page.textContent('#scheme-rules .rule:nth-child(4) .rule-problem'), why);
    assert.equal(await page.evaluate(() => document.body.dataset.plan), 'ok', 'the plan goes on without the rule');
    assert.equal(JSON.parse(await page.textContent('#scheme-json')).length, 3);
  }
  await page.fill('#scheme-rules .rule:nth-child(4) input', 'model.layers.*');
  await planSettled(page);
  assert.equal(await page.textContent('#scheme-rules .rule:nth-child(4) .rule-count'), 'matches no tensor');
  assert.ok(await page.$eval('#scheme-rules .rule:nth-child(4)', (e) => e.classList.contains('nomatch')));
  await page.click('#scheme-rules .rule:nth-child(4) .rule-remove');
  await planSettled(page);
  // a per-tensor choice, then another format and back: every choice is kept
  await page.click('#scheme-tensors-summary');
  await page.selectOption('#scheme-table select[data-tensor="blk.0.attn_v.weight"]', 'q6_k');
  await page.selectOption('#scheme-default', 'q5_1');
  await planSettled(page);
  const before = { total: await page.getAttribute('#scheme-total', 'data-total'), json: await page.textContent('#scheme-json') };
  assert.match(await page.textContent('#scheme-tensors-summary'), /; 1 chosen by you$/);
  await page.selectOption('#format', 'leap-2');
  await planSettled(page);
  await page.selectOption('#format', 'gguf-lite-q4');
  await planSettled(page);
  await page.selectOption('#format', 'gguf-custom');
  await planSettled(page);
  assert.equal(await page.inputValue('#scheme-table select[data-tensor="blk.0.attn_v.weight"]'), 'q6_k');
  assert.equal(await page.inputValue('#scheme-default'), 'q5_1');
  assert.deepEqual({ total: await page.getAttribute('#scheme-total', 'data-total'), json: await page.textContent('#scheme-json') }, before);

  // the command, pasted as shown into a shell in the folder above the checkpoint, writes the page's file
  const { bytes, name } = await convert(page);
  await page.click('#scheme-export summary');
  const cmd = await page.textContent('#scheme-cli');
  assert.equal(cmd, `build/native/export ${name} --model tiny-llama --scheme q5_1 --schemes tiny-llama-schemes.json`);
  const dir = path.join(work, 'cli');
  fs.cpSync(demo, path.join(dir, 'tiny-llama'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'build', 'native'), { recursive: true });
  fs.symlinkSync(nativeCli, path.join(dir, 'build', 'native', 'export'));
  fs.writeFileSync(path.join(dir, 'tiny-llama-schemes.json'), await page.textContent('#scheme-json'));
  const r = spawnSync('bash', ['-c', cmd + ' --quiet'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.ok(fs.readFileSync(path.join(dir, name)).equals(bytes), 'the pasted command writes the page\'s bytes');
  // one breakdown: the scheme editor's gives way to the written file's while they are the same
  const visible = await page.$$eval('table.breakdown', (t) => t.filter((e) => e.offsetParent !== null).map((e) => e.id));
  assert.deepEqual(visible, ['breakdown']);
  assert.ok(await page.isVisible('#scheme-same'));
  await page.selectOption('#scheme-default', 'q8_0');
  await planSettled(page);
  assert.ok(await page.isVisible('#scheme-breakdown'), 'another choice: its own prediction again');
  assert.deepEqual(errors, []);
  await context.close();
});

test('words: ratios read as smaller or larger, presets never larger than the source without saying so, lossless says so', async () => {
  const { context, page } = await openPage();
  await loadDemo(page);  // bf16
  const source = await page.evaluate(() => window.__leapconv.model.source_bytes);
  const values = await page.$$eval('#format option', (o) => o.filter((e) => !e.disabled).map((e) => e.value));
  for (const v of values) {
    await page.selectOption('#format', v);
    await planSettled(page);
    const total = Number(await page.getAttribute('#prediction', 'data-total'));
    const text = await page.textContent('#prediction');
    assert.doesNotMatch(text, /0\.\d+× smaller/, v);
    assert.ok(!/mixed/.test(v) || total < source, `${v}: a mixed preset is not smaller than its source`);
    if (total > source * 1.05) {
      assert.match(text, /[\d.]+× larger than the source/, v);
      assert.match(text, /Larger than the checkpoint: F32 stores 4 bytes a weight/, v);
      assert.ok(await page.$eval('#prediction', (e) => e.classList.contains('larger')), v);
    } else if (total > source) {
      assert.match(text, /about the same size as the source \(\+\d\.\d%\)/, v);
    } else {
      assert.match(text, /[\d.]+× smaller than the source|the same size as the source/, v);
    }
  }
  // the mixed presets quantize the embeddings
  await page.selectOption('#format', 'gguf-lite-mixed');
  await planSettled(page);
  await page.click('#scheme-tensors-summary');
  assert.equal(await page.getAttribute('#scheme-table tr[data-tensor="model.embed_tokens.weight"] .scheme-dtype', 'data-value'), 'Q8_per_channel');
  // a lossless file says so instead of "error 0.00"; the breakdown names LEAP's header
  await convert(page, 'gguf-lite-f32');
  assert.match(await page.textContent('#result-text'), /2\.0× larger than the source; .*Lossless: every weight is stored exactly as in the source\.$/);
  assert.doesNotMatch(await page.textContent('#result-text'), /error/);
  // the time written counts the first seconds too, and says how many they were
  const [, total, setup] = /written in (\d+\.\d+) s, the first (\d+\.\d+) s planning and opening the files /.exec(await page.textContent('#result-text'));
  assert.ok(Number(setup) > 0 && Number(setup) <= Number(total), `${setup} of ${total} s`);
  await convert(page, 'leap-2');
  assert.match(await page.textContent('#result-text'), /Largest quantization error of a weight: [\d.e-]+\.$/);
  assert.equal(await page.textContent('#breakdown tr[data-part="header_bytes"] th'), 'LEAP header');
  assert.match(await page.textContent('#breakdown tr[data-vs="source"]'), /1\.9× smaller$/);
  // the legend is HTML, whole, and tells scales from values
  const legend = await page.$$eval('#chart .legend li', (l) => l.map((e) => ({ text: e.textContent, scales: e.querySelector('.swatch').classList.contains('scales'),
    fits: e.scrollWidth <= e.clientWidth + 1, size: parseFloat(getComputedStyle(e).fontSize) })));
  assert.ok(legend.some((l) => /INT8 scales/.test(l.text) && l.scales) && legend.some((l) => /INT8 values/.test(l.text) && !l.scales), JSON.stringify(legend));
  assert.ok(legend.every((l) => l.fits && l.size >= 12), JSON.stringify(legend));
  // the nibble view counts rows and groups from 1
  assert.match(await page.textContent('#nv-where'), / · row 1 of \d+ · group 1 of \d+ /);
  await context.close();
});

test('real-world folders: a Git LFS pointer, PyTorch pickles, a GGUF and a cut-off shard are named, with what to do; formats a GPT-2 model cannot take are off with the core\'s reason', async () => {
  const { context, page } = await openPage();
  await loadFolder(page, lfsFolder());
  assert.equal(await stateOf(page), 'error');
  assert.match(await page.textContent('#error'), /^model\.safetensors is a Git LFS pointer \(\d+ bytes\), not the file itself \(2\.05 GiB\): .*git lfs pull/);
  const pickle = path.join(work, 'pickle');
  fs.mkdirSync(pickle);
  fs.copyFileSync(path.join(demo, 'config.json'), path.join(pickle, 'config.json'));
  fs.writeFileSync(path.join(pickle, 'pytorch_model.bin'), Buffer.alloc(64));
  await loadFolder(page, pickle);
  assert.match(await page.textContent('#error'), /^pickle: pytorch_model\.bin holds PyTorch pickle weights; this page reads only \*\.safetensors/);
  const gguf = path.join(work, 'gguf-only');
  fs.mkdirSync(gguf);
  fs.writeFileSync(path.join(gguf, 'model-Q4_K_M.gguf'), Buffer.from('GGUF'));
  await loadFolder(page, gguf);
  // a folder of only a GGUF opens it (the core recognises the magic), and this one is cut short
  assert.match(await page.textContent('#error .error-detail'), /^model-Q4_K_M\.gguf: truncated: version \(4 bytes at offset 4\) runs past the end/);
  assert.match(await page.textContent('#error .error-what'), /^model-Q4_K_M\.gguf is not as the converter expects, for the reason below\. If it came from the Hub, download it again/);
  assert.ok(await page.isHidden('#output'));

  // a shard cut off in the download: what happened and what to do first, the core's line under it
  const cut = path.join(work, 'cut');
  fs.cpSync(demo, cut, { recursive: true });
  fs.truncateSync(path.join(cut, 'model.safetensors'), fs.statSync(path.join(cut, 'model.safetensors')).size >> 1);
  await loadFolder(page, cut);
  assert.equal(await stateOf(page), 'error');
  assert.equal(await page.textContent('#error .error-what'), 'model.safetensors is shorter than its own header says: the download was cut off. Download it again.');
  assert.match(await page.textContent('#error .error-detail'), /^model\.safetensors: tensor '[^']+': data_offsets \d+ lie outside the file \(\d+ data bytes\): truncated shard\?$/);

  // a folder without config.json: GGUF stays chosen and says what is missing and what takes it
  const bare = path.join(work, 'bare');
  fs.mkdirSync(bare, { recursive: true });
  fs.copyFileSync(path.join(demo, 'model.safetensors'), path.join(bare, 'model.safetensors'));
  await loadFolder(page, bare);
  assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
  await page.waitForFunction(() => document.body.dataset.plan === 'error');
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0');
  assert.match(await page.textContent('#error .error-what'), /^GGUF cannot be written for this checkpoint\. The folder has no config\.json, the file that says which model this is and its shape\. Put the repository's config\.json .* GGUF-lite \(.*\) takes it: choose it in the menu above if that is what you want\.$/);
  assert.equal(await page.textContent('#error .error-detail'), 'bare: no config.json: cannot tell the model\'s architecture and shape');
  assert.equal(await page.isDisabled('#convert'), true);

  const gpt2 = generate(path.join(work, 'gpt2'), ['--arch', 'gpt2', '--dim', '64', '--layers', '2']);
  await loadFolder(page, gpt2);
  assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
  const off = await page.$$eval('#format option', (o) => o.filter((e) => e.disabled).map((e) => e.value));
  assert.ok(off.includes('leap-1') && off.includes('leap-2') && off.includes('gguf-q8_0'), off.join());
  assert.ok(!off.some((v) => v.startsWith('gguf-lite-')), off.join());
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0', 'GGUF stays chosen: another format is the user\'s choice');
  await page.waitForFunction(() => document.body.dataset.plan === 'error');
  assert.match(await page.textContent('#error .error-what'), /^GGUF cannot be written for this checkpoint\. The folder has no tokenizer .* GGUF-lite \(.*\) takes it: /);
  const why = await page.textContent('#format-off');
  assert.match(why, /LEAP \.bin: config\.json: architecture 'GPT2LMHeadModel' is not supported for LEAP export/);
  assert.match(why, /GGUF: no tokenizer: /);  // GPT-2 itself GGUF takes; this folder has no tokenizer
  assert.match(await page.getAttribute('#format option[value="leap-2"]', 'title'), /^config\.json: architecture 'GPT2LMHeadModel'/);
  assert.match(await page.textContent('#format option[value="leap-2"]'), /\(not for this checkpoint\)$/);
  await convert(page, 'gguf-lite-q8');
  assert.ok(await page.isHidden('#error'));
  await context.close();
});

// Drops `folders` on the drop zone as Chromium gives a dropped folder: each folder's files go
// into an origin-private folder of its name, whose FileSystemDirectoryHandle the drop hands over.
// With `entries`, the same files through stand-ins for the FileSystemDirectoryEntry reader that
// Firefox and Safari give instead (two entries a batch, then an empty one).
async function dropFolders(page, folders, { entries = false } = {}) {
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  for (const dir of folders) {
    await page.evaluate(() => {
      const i = Object.assign(document.createElement('input'), { type: 'file', multiple: true, id: 'test-drop-input' });
      document.body.append(i);
    });
    await page.setInputFiles('#test-drop-input', fs.readdirSync(dir).map((f) => path.join(dir, f)));
    await page.evaluate(async (name) => {
      const input = document.getElementById('test-drop-input');
      const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('test-drop', { create: true });
      const d = await top.getDirectoryHandle(name, { create: true });
      for (const f of input.files) {
        const w = await (await d.getFileHandle(f.name, { create: true })).createWritable();
        await w.write(f);
        await w.close();
      }
      input.remove();
    }, path.basename(dir));
  }
  await page.evaluate(async ({ names, entries }) => {
    const top = await (await navigator.storage.getDirectory()).getDirectoryHandle('test-drop');
    const dirs = await Promise.all(names.map((n) => top.getDirectoryHandle(n)));
    const entryOf = (d) => ({
      isDirectory: true, name: d.name,
      createReader() {
        let list = null;
        return { readEntries: async (resolve) => {
          list ??= await (async () => { const a = []; for await (const h of d.values()) a.push(h); return a; })();
          resolve(list.splice(0, 2).map((h) => ({ isFile: true, name: h.name, file: (ok, fail) => h.getFile().then(ok, fail) })));
        } };
      },
    });
    const items = dirs.map((d) => entries ? { kind: 'file', webkitGetAsEntry: () => entryOf(d) }
      : { kind: 'file', getAsFileSystemHandle: async () => d });
    const e = new Event('drop', { cancelable: true });
    Object.defineProperty(e, 'dataTransfer', { value: { items, files: [] } });
    document.getElementById('dropzone').dispatchEvent(e);
  }, { names: folders.map((d) => path.basename(d)), entries });
  await waitState(page, ['ready', 'error']);
  await planSettled(page);
}

test('drop: a LoRA adapter dropped together with its base model\'s folder converts to the GGUF adapter the CLI writes (folder handles, and the entries reader); with two models beside it, the one it names', async () => {
  const shape = ['--dim', '64', '--layers', '2', '--vocab', '400', '--dtype', 'bf16'];
  const base = generate(path.join(work, 'drop', 'tiny-base'), shape);
  const other = generate(path.join(work, 'drop', 'other-model'), [...shape, '--seed', '5']);
  const adapter = generate(path.join(work, 'drop', 'tiny-adapter'), ['--lora-base', base, '--lora-r', '4']);
  // (the base's config.json gives the adapter its shape, not its name: the page keeps it apart)
  editConfig(base, (c) => { c._name_or_path = 'someone/Base-Model-7B'; });
  const want = path.join(work, 'drop', 'native.gguf');
  const r = spawnSync(nativeCli, [want, '--lora', adapter, '--model', base, '--outtype', 'Q8_0', '--quiet'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const { context, page } = await openPage();
  for (const [folders, entries] of [[[base, adapter], false], [[adapter, other, base], true]]) {
    await dropFolders(page, folders, { entries });
    assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
    const got = await convert(page, 'gguf-q8_0');
    assert.equal(got.name, 'tiny-adapter-Q8_0.gguf');
    assert.ok(got.bytes.equals(fs.readFileSync(want)), `${entries ? 'entries' : 'handles'}: the adapter GGUF differs from the CLI's`);
  }
  // two models and an adapter that names neither: said, nothing opened
  editConfig(adapter, (c) => { c.base_model_name_or_path = 'someone/elsewhere'; }, 'adapter_config.json');
  await dropFolders(page, [adapter, other, base]);
  assert.equal(await stateOf(page), 'error');
  assert.equal(await page.textContent('#error'), 'tiny-adapter is a LoRA adapter and other-model, tiny-base are models: drop the ' +
    'adapter with its base model\'s folder only (its adapter_config.json names elsewhere).');
  // alone, it says what it needs
  await dropFolders(page, [adapter]);
  assert.match(await page.textContent('#error .error-what'), /^GGUF cannot be written for this checkpoint\. This folder is a LoRA adapter \(adapter_config\.json\) without its base model's config\.json\. Drop it together with its base model's folder/);
  await page.evaluate(async () => (await navigator.storage.getDirectory()).removeEntry('test-drop', { recursive: true }));
  await context.close();
});

test('accessibility: no serious or critical axe-core violation on any view, light and dark; skip link, drop zone keys, progress bar', async () => {
  for (const colorScheme of ['light', 'dark']) {
    const stub = () => {
      window.__pickerCalls = 0;
      window.showDirectoryPicker = async () => { window.__pickerCalls++; throw new DOMException('closed', 'AbortError'); };
    };
    const { context, page } = await openPage({ initScript: stub });
    await page.emulateMedia({ colorScheme });
    await axeCheck(page, `${colorScheme}: start`);
    // keyboard: with nothing open the first Tab stop is the drop zone, which opens the picker on Enter
    // and Space; once a checkpoint is open, the first is the skip link to the output
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'drop-target');
    await page.keyboard.press('Enter');
    await page.keyboard.press(' ');
    assert.equal(await page.evaluate(() => window.__pickerCalls), 2);
    await loadDemo(page);
    await page.evaluate(() => {  // back to the top of the page, as a keyboard user arriving
      document.body.tabIndex = -1;
      document.body.focus();
      document.body.removeAttribute('tabindex');
    });
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'skip-output');
    await page.click('#scheme-tensors-summary');
    await axeCheck(page, `${colorScheme}: the demo open, GGUF and its scheme editor`);
    await page.selectOption('#format', 'leap-2');
    await planSettled(page);
    await axeCheck(page, `${colorScheme}: LEAP`);
    await convert(page, 'gguf-lite-q4');
    await axeCheck(page, `${colorScheme}: the result and the kept files`);
    await page.selectOption('#nv-source', 'file');
    await page.waitForFunction(() => document.getElementById('nv-view').dataset.state === 'ready');
    await page.click('#nv-grid .nv-byte[data-byte="3"]');
    await axeCheck(page, `${colorScheme}: the nibble view, a byte selected`);
    await page.click('#verify');
    await page.waitForFunction(() => ['pass', 'fail', 'error'].includes(document.body.dataset.verify), null, { timeout: 120000 });
    await axeCheck(page, `${colorScheme}: verify`);
    await page.click('#nv-present');
    assert.ok(await page.evaluate(() => document.body.classList.contains('presenting')));
    await axeCheck(page, `${colorScheme}: presenting`);
    await page.keyboard.press('Escape');
    assert.ok(!(await page.evaluate(() => document.body.classList.contains('presenting'))));
    // the skip link to the result, once there is one
    await page.focus('#skip-output');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement.id), 'skip-result');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => location.hash), '#result');
    await page.setInputFiles('#folder-input', lfsFolder());
    await waitState(page, ['error']);
    await axeCheck(page, `${colorScheme}: an error`);
    if (colorScheme === 'dark') {
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const [r, g, b] = bg.match(/\d+/g).map(Number);
      assert.ok(r + g + b < 120, `dark mode background ${bg}`);
    }
    await page.screenshot({ path: path.join(outDir, `page-${colorScheme}.png`), fullPage: true });
    await context.close();
  }
});

test('dark mode: every text on every panel has contrast ≥ 4.5:1 (axe color-contrast, no exceptions)', async () => {
  const { context, page } = await openPage();
  await page.emulateMedia({ colorScheme: 'dark' });
  await loadDemo(page);
  await convert(page, 'gguf-lite-q4');
  await page.click('#scheme-tensors-summary');
  await page.evaluate(axeSource);
  const bad = await page.evaluate(async () => (await window.axe.run(document, { runOnly: ['color-contrast'] })).violations
    .flatMap((v) => v.nodes.map((n) => `${n.target.join(' ')}: ${n.any.map((a) => a.message).join(' ')}`)));
  assert.deepEqual(bad, []);
  await context.close();
});

// Every table cell's words, each on one line: [where: word] for each word the layout breaks
// inside (a table that is too narrow squeezes its cells; it must scroll in its own box instead).
function brokenWords() {
  const out = [];
  for (const cell of document.querySelectorAll('td, th, caption')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (const m of n.data.matchAll(/\S+/g)) {
        const r = document.createRange();
        r.setStart(n, m.index);
        r.setEnd(n, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top)));
        if (lines.size > 1) out.push(`${cell.closest('[id]')?.id}: ${m[0]}`);
      }
    }
  }
  return out;
}

// (a GGUF on disk to open, the demo's as the native CLI writes it)
let demoQ4;
const demoGguf = () => {
  demoQ4 ??= (() => {
    const out = path.join(work, 'demo-Q4_K_M.gguf');
    const r = spawnSync(nativeCli, [out, '--model', demo, '--type', 'Q4_K_M', '--quiet'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return out;
  })();
  return demoQ4;
};

for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
  test(`tables at ${viewport.width} px: no cell breaks a word, no horizontal page scroll; wide grids scroll inside their box`, async () => {
    const { context, page, errors } = await openPage({ viewport });
    const W = viewport.width;
    const width = () => page.evaluate(() => ({ page: document.documentElement.scrollWidth, body: document.body.scrollWidth }));
    const check = async (what) => {
      assert.deepEqual(await width(), { page: W, body: W }, what);
      assert.deepEqual(await page.evaluate(brokenWords), [], what);
    };
    await check('empty');
    await loadDemo(page);
    await page.click('#scheme-tensors-summary');
    await page.click('#model details summary');
    await check('the demo open, tensors listed');
    const fmt = await page.$eval('#format', (e) => e.getBoundingClientRect().right);
    assert.ok(fmt <= W, `the format select ends at ${fmt} px`);
    await convert(page, 'gguf-q4_k_m');
    await check('after converting');
    await page.selectOption('#bv-source', 'file');
    await page.waitForFunction(() => document.getElementById('bv-view').dataset.state === 'ready');
    await convert(page, 'gguf-lite-q4');
    await page.selectOption('#nv-source', 'file');
    await page.waitForFunction(() => document.getElementById('nv-view').dataset.state === 'ready');
    await page.waitForFunction(() => document.getElementById('bv-view').dataset.state === 'ready');
    await check('the nibble and block views');
    if (W < 600) {
      const grid = await page.$eval('#nv-q4', (e) => ({ scrolls: e.scrollWidth > e.clientWidth, overflow: getComputedStyle(e).overflowX }));
      assert.equal(grid.overflow, 'auto');
      const legend = await page.$$eval('#chart .legend li', (l) => l.map((e) => parseFloat(getComputedStyle(e).fontSize)));
      assert.ok(legend.every((sz) => sz >= 12), `legend text ${legend.join()} px`);
    }
    // Try it on the kept file, and an opened GGUF's keys and tensors
    await page.waitForFunction(() => [...document.querySelectorAll('#try-a option')].some((o) => o.value === 'kept:tiny-llama-Q4_K_M.gguf'));
    await page.selectOption('#try-a', 'kept:tiny-llama-Q4_K_M.gguf');
    await page.fill('#try-n', '4');
    await page.click('#try-run');
    await page.waitForFunction(() => ['done', 'error'].includes(document.getElementById('try').dataset.state), null, { timeout: 120000 });
    assert.equal(await page.$eval('#try', (e) => e.dataset.state), 'done', await page.textContent('#try-status'));
    await page.setInputFiles('#open-input', demoGguf());
    await page.waitForSelector('#opened-tensors tbody tr');
    await check('Try it\'s steps, an opened GGUF');
    await page.screenshot({ path: path.join(outDir, `page-${W}.png`), fullPage: true });
    assert.deepEqual(errors, []);
    await context.close();
  });
}

test('small things: loose files named after their model, tokenizer.model offered, a tap on a phone, Convert in sight after loading, why Verify is off, Try it before any file', async () => {
  const { context, page, errors } = await openPage({ viewport: { width: 1280, height: 800 } });
  // the file picker offers what the core reads (tokenizer.model too)
  const accept = (await page.getAttribute('#files-input', 'accept')).split(',');
  for (const ext of ['.safetensors', '.json', '.model']) assert.ok(accept.includes(ext), accept.join());
  // Try it with nothing to run: its one entry says so, and its status line shows nothing
  assert.deepEqual(await page.$$eval('#try-a option', (o) => o.map((e) => e.textContent)), ['no GGUF yet']);
  assert.deepEqual(await page.$eval('#try-status', (e) => [e.textContent, e.getBoundingClientRect().height, getComputedStyle(e).backgroundColor]),
    ['', 0, 'rgba(0, 0, 0, 0)']);
  // loose files: the model is named after config.json's _name_or_path
  const loose = path.join(work, 'loose');
  fs.mkdirSync(loose, { recursive: true });
  for (const f of ['model.safetensors', 'tokenizer.model']) fs.copyFileSync(path.join(demo, f), path.join(loose, f));
  fs.writeFileSync(path.join(loose, 'config.json'),
    JSON.stringify({ ...JSON.parse(fs.readFileSync(path.join(demo, 'config.json'), 'utf8')), _name_or_path: 'someone/Tiny-Story-7' }));
  await page.setInputFiles('#files-input', ['config.json', 'model.safetensors', 'tokenizer.model'].map((f) => path.join(loose, f)));
  await waitState(page, ['ready', 'error']);
  assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
  assert.equal(await page.evaluate(() => window.__leapconv.model.label), 'Tiny-Story-7');
  assert.match(await page.textContent('#model'), /tokenizer\.model/);
  // loaded: Convert is in sight
  await planSettled(page);
  const bottom = await page.$eval('#convert', (b) => b.getBoundingClientRect().bottom);
  assert.ok(bottom <= 800 && bottom > 0, `Convert ends at ${bottom} px`);
  // another type: the size shown is said to be recomputed until the new plan is in
  await page.evaluate(() => {
    window.__pending = [];
    const el = document.getElementById('plan-pending');
    new MutationObserver(() => window.__pending.push(el.hidden)).observe(el, { attributes: true, attributeFilter: ['hidden'] });
  });
  await page.selectOption('#format', 'gguf-q4_k_m');
  await page.waitForFunction(() => document.body.dataset.plan === 'ok' && window.__leapconv.planPending === 0);
  assert.deepEqual(await page.evaluate(() => window.__pending), [false, true]);
  assert.equal(await page.textContent('#plan-pending'), 'Recomputing the size for this choice…');
  await context.close();

  // an opened GGUF and no checkpoint: Verify is off, and says what it needs
  const second = await openPage();
  await second.page.setInputFiles('#open-input', demoGguf());
  await second.page.waitForSelector('#opened-tensors tbody tr');
  assert.equal(await second.page.isDisabled('#verify'), true);
  assert.match(await second.page.textContent('#verify-why'), /^Verify compares the file with the checkpoint it was made from: load that checkpoint above/);
  assert.deepEqual(second.errors, []);
  await second.context.close();

  // a phone (touch, no mouse): the drop zone asks for a tap, not a key
  const phone = await session.browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const p = await phone.newPage();
  await p.goto(session.url);
  await waitState(p, ['idle', 'error']);
  assert.equal(await p.isVisible('#drop-target .on-touch'), true);
  assert.equal(await p.isVisible('#drop-target .on-desk'), false);
  assert.doesNotMatch(await p.innerText('#drop-target'), /Enter/);
  await phone.close();
  assert.deepEqual(errors, []);
});

test('headers: CSP (own origin only; the Hub\'s for input from it), nosniff, Referrer-Policy, validators and 304s; favicon and manifest icons; no CSP violation', async () => {
  const get = (p, headers = {}) => fetch(new URL(p, session.url), { headers });
  const r = await get('/');
  const csp = r.headers.get('content-security-policy');
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self' 'wasm-unsafe-eval'(;|$)/, 'the page gets no unsafe-eval');
  // the Hub's domains for input from it (connect-src only), nothing else from anywhere
  assert.match(csp, new RegExp(`connect-src 'self' ${HUB_ORIGINS.join(' ').replace(/[.*]/g, '\\$&')}(;|$)`));
  assert.deepEqual(HUB_ORIGINS, ['https://huggingface.co', 'https://*.huggingface.co', 'https://*.hf.co']);
  assert.doesNotMatch(csp.replace(/connect-src [^;]*/, ''), /\*|https?:|unsafe-inline/);
  // The core's workers too: Embind without new Function (-sDYNAMIC_EXECUTION=0), so no 'unsafe-eval' anywhere.
  for (const w of ['/worker.js', '/dist/converter-mt.worker.js', '/dist/converter-mt.js']) {
    assert.equal((await get(w)).headers.get('content-security-policy'), csp, w);
  }
  assert.ok(!fs.readFileSync(path.join(root, 'web', 'dist', 'converter-mt.js'), 'latin1').includes('new Function('));
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
  const etag = r.headers.get('etag'), modified = r.headers.get('last-modified');
  assert.ok(etag && modified);
  assert.equal((await get('/', { 'If-None-Match': etag })).status, 304);
  assert.equal((await get('/app.js', { 'If-Modified-Since': (await get('/app.js')).headers.get('last-modified') })).status, 304);
  assert.equal((await get('/', { 'If-None-Match': '"other"' })).status, 200);
  const manifest = await (await get('/manifest.webmanifest')).json();
  const pngs = manifest.icons.filter((i) => i.type === 'image/png');
  assert.deepEqual(pngs.map((i) => i.sizes).sort(), ['192x192', '512x512']);
  for (const icon of pngs) {
    const b = Buffer.from(await (await get('/' + icon.src)).arrayBuffer());
    assert.equal(b.subarray(1, 4).toString(), 'PNG');
    assert.equal(`${b.readUInt32BE(16)}x${b.readUInt32BE(20)}`, icon.sizes);
  }
  // the page: no 404 (favicon), no CSP violation, while it loads and converts
  const { context, page, errors } = await openPage();
  const missing = [];
  page.on('response', (res) => { if (res.status() >= 400) missing.push(`${res.status()} ${res.url()}`); });
  await page.reload();
  await waitState(page, ['idle', 'error']);
  await loadDemo(page);
  await convert(page, 'gguf-q8_0');
  assert.deepEqual(missing, []);
  assert.deepEqual(await page.evaluate(() => window.__csp), []);
  assert.equal(await page.getAttribute('link[rel="icon"]', 'href'), 'favicon.svg');
  assert.deepEqual(errors, []);
  await context.close();
});

test('presentation mode (1024×768): the nibble view alone, values ≥ 20 px, the explanation beside the grid, no scrolling, keys page and move, axe in light and dark, Escape ends it', async () => {
  for (const colorScheme of ['light', 'dark']) {
    const { context, page, errors } = await openPage({ viewport: { width: 1024, height: 768 } });
    await page.emulateMedia({ colorScheme });
    const at = (want) => page.waitForFunction((w) => Object.entries(w).every(([k, x]) => document.getElementById('nv-view').dataset[k] === String(x)), want);
    await at({ state: 'ready' });
    await page.click('#nv-present');
    assert.equal(await page.getAttribute('#nv-present', 'aria-pressed'), 'true');
    assert.ok(await page.isHidden('#input') && await page.isHidden('header') && await page.isHidden('#blocks'), 'the rest of the page steps aside');
    await page.click('#nv-grid .nv-byte[data-byte="1"]');
    const m = await page.evaluate(() => {
      const r = (sel) => document.querySelector(sel).getBoundingClientRect().toJSON();
      const font = (sel) => parseFloat(getComputedStyle(document.querySelector(sel)).fontSize);
      const shown = [...document.querySelectorAll('#nv-grid button.nv-idx')].filter((e) => e.offsetParent).map((e) => Number(e.dataset.weight));
      return { w: font('#nv-grid td.nv-w'), q: font('#nv-grid td.nv-q'), nib: font('#nv-grid td.nv-nib'), deq: font('#nv-grid td.nv-deq'),
        byte: font('.nv-byte'), idx: font('button.nv-idx'), explain: font('#nv-explain'), scale: font('.nv-scale'), shown,
        grid: r('#nv-grid'), side: r('#nv-explain'), scaleBox: r('.nv-scale'), text: document.getElementById('nv-explain').textContent,
        scrollW: document.scrollingElement.scrollWidth, scrollH: document.scrollingElement.scrollHeight };
    });
    const sizes = `w ${m.w}, q ${m.q}, nibble ${m.nib}, q × s ${m.deq}, byte ${m.byte}, index ${m.idx} px`;
    assert.ok([m.w, m.q, m.nib, m.deq, m.byte, m.idx].every((x) => x >= 20), sizes);
    assert.ok(m.explain >= 16 && m.scale >= 16, `explanation ${m.explain} px, scale ${m.scale} px`);
    assert.deepEqual(m.shown, [0, 1, 2, 3, 4, 5, 6, 7], 'a page of 8 weights fills the screen');
    assert.match(m.text, /^Byte 1 = 0x/);
    // beside the grid, not above or below it: to its right, and level with it
    for (const [name, box] of [['the explanation', m.side], ['the scale', m.scaleBox]]) {
      assert.ok(box.left >= m.grid.right - 1 && box.top < m.grid.bottom && box.bottom > m.grid.top, `${name} beside the grid: ${JSON.stringify(m)}`);
      assert.ok(box.right <= 1024 && box.bottom <= 768, `${name} on screen: ${JSON.stringify(box)}`);
    }
    assert.ok(m.grid.top >= 0 && m.grid.bottom <= 768, `the grid on screen: ${JSON.stringify(m.grid)}`);
    assert.ok(m.scrollW <= 1024 && m.scrollH <= 768, `no scrolling: ${m.scrollW}×${m.scrollH}`);
    await axeCheck(page, `${colorScheme}: presenting the nibble view`);
    await page.screenshot({ path: path.join(outDir, `nibbles-present-${colorScheme}.png`) });
    // keys: ←/→ pages, running on into the next group and back; PgUp/PgDn groups on the same columns
    await page.focus('#nv-view');
    await page.keyboard.press('ArrowRight');
    await at({ group: 0, page: 1 });
    assert.match(await page.textContent('#nv-where'), /weights 8–15 of 64/);
    await page.keyboard.press('PageDown');
    await at({ state: 'ready', group: 1, page: 1 });
    await page.keyboard.press('ArrowLeft');
    await at({ group: 1, page: 0 });
    await page.keyboard.press('ArrowLeft');
    await at({ state: 'ready', group: 0, page: 7 });
    await page.keyboard.press('ArrowDown');
    await at({ state: 'ready', row: 1, group: 0, page: 7 });
    // a byte moved off the page by the keys brings its page
    await page.click('#nv-grid .nv-byte[data-byte="31"]');
    await page.keyboard.press('Home');
    await at({ page: 0 });
    assert.equal(await page.evaluate(() => document.activeElement.dataset.byte), '0');
    // every group of the classroom example (the longest story, the widest values) fits unscrolled
    await page.focus('#nv-view');
    await page.keyboard.press('ArrowUp');
    for (let row = 0; row < 4; row++) {
      for (const group of [0, 1]) {
        await page.keyboard.press(group ? 'PageDown' : 'Home');
        await at({ state: 'ready', row, group, page: 0 });
        const h = await page.evaluate(() => [document.scrollingElement.scrollWidth, document.scrollingElement.scrollHeight]);
        assert.ok(h[0] <= 1024 && h[1] <= 768, `row ${row + 1}, group ${group + 1}: ${h.join('×')}`);
      }
      if (row < 3) await page.keyboard.press('ArrowDown');
    }
    await page.keyboard.press('Escape');
    assert.equal(await page.evaluate(() => document.body.classList.contains('presenting')), false);
    assert.ok(await page.isVisible('#input'));
    assert.equal(await page.evaluate(() => document.activeElement.id), 'nv-present', 'the keys go on from the button');
    assert.equal(await page.locator('#nv-grid button.nv-idx:visible').count(), 64, 'the whole group again');
    assert.deepEqual(errors, []);
    await context.close();
  }
});
