// The teaching and editing views in Debian's Chromium (playwright-core): the nibble-packing view
// shows the very bytes the writer puts in the file (checked against the downloaded file with this
// test's own GGUF-lite parsing), its numbers agree with each other, keys and selection work; the
// scheme editor's prediction is the written file's size, and its exported rules reproduce the
// page's file byte for byte with the native CLI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as harness from './harness.mjs';
import { outDir, waitState } from './harness.mjs';
import { execFileSync } from 'node:child_process';
import { generate, root, runNative, tempDir } from '../node/helpers.mjs';
import { readGguf } from './gguf_read.mjs';
import { waitView, readView, showGroup, waitBlock, readBlock, showBlock, blockValues } from './views.mjs';

const demo = path.join(root, 'web', 'demo', 'tiny-llama');
const work = tempDir('teach');
const session = harness.useBrowser(work);

// wide enough for the Q8 row view to sit beside the Q4 grid
const openPage = () => harness.openPage(session.browser, session.url, { viewport: { width: 1480, height: 1000 } });

async function loadDemo(page) {
  await page.click('#demo');
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  await planSettled(page);
}
const planSettled = (page) => page.waitForFunction(() => window.__leapconv.planPending === 0);

// Converts with whatever the page has chosen, through the OPFS path; returns the download's bytes.
async function convert(page) {
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  const download = page.waitForEvent('download', { timeout: 120000 });
  await page.click('#convert');
  const d = await download;
  await waitState(page, ['done', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'done', await page.textContent('#error'));
  return fs.readFileSync(await d.path());
}


// ---- this test's own GGUF-lite reading and number checks ----
function parseGgufLite(buf) {
  let p = 0;
  const u32 = () => { const v = buf.readUInt32LE(p); p += 4; return v; };
  assert.equal(u32(), 0x474c4654, 'magic');
  assert.equal(u32(), 1, 'version');
  const n = u32(), metaLen = u32();
  p += metaLen;
  const tensors = new Map();
  for (let i = 0; i < n; i++) {
    const len = buf.readUInt16LE(p); p += 2;
    const name = buf.toString('utf8', p, p + len); p += len;
    const nd = buf[p++];
    const dims = [];
    for (let d = 0; d < nd; d++) dims.push(u32());
    const dtype = buf[p++];
    const offset = Number(buf.readBigUInt64LE(p)); p += 8;
    tensors.set(name, { dims, dtype, offset });
  }
  return { tensors, dataStart: p };
}
// Q4_per_group_64: rows x cols/64 f16 scales (row-major), then rows x cols/2 packed bytes.
function q4GroupInFile(buf, name, row, group) {
  const { tensors, dataStart } = parseGgufLite(buf);
  const t = tensors.get(name);
  assert.ok(t, `${name} not in the file`);
  assert.equal(t.dtype, 3, `${name} is not Q4_per_group_64 in the file`);
  const [rows, cols] = t.dims, base = dataStart + t.offset;
  const scaleAt = base + 2 * (row * (cols / 64) + group);
  const packedAt = base + 2 * rows * (cols / 64) + (row * cols + group * 64) / 2;
  return { scaleAt, packedAt, scale: buf.readUInt16LE(scaleAt), bytes: [...buf.subarray(packedAt, packedAt + 32)] };
}

function f16(h) {
  const sign = h & 0x8000 ? -1 : 1, e = (h >> 10) & 31, m = h & 1023;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}
const roundHalfEven = (x) => {
  const f = Math.floor(x), d = x - f;
  return d > 0.5 ? f + 1 : d < 0.5 ? f : (f % 2 === 0 ? f : f + 1);
};

// The shown integers, nibbles, dequantized values and errors follow from the shown scale and
// bytes; with source values, the scale is f16(max|w| / 7) and q = clamp(round(w / s), -8, 7).
function checkConsistent(v) {
  const bits = parseInt(v.scaleHex, 16);
  const s = f16(bits);
  assert.equal(v.scale, s, 'decimal scale = the f16 in hex');
  assert.equal(v.bytes.length, 32);
  for (let i = 0; i < 64; i++) {
    const b = v.bytes[i >> 1], n = i % 2 ? b >> 4 : b & 15, q = n >= 8 ? n - 16 : n;
    assert.equal(v.q[i], q, `q[${i}] from byte ${i >> 1}`);
    assert.equal(v.nib[i], n.toString(2).padStart(4, '0'), `nibble bits of ${i}`);
    assert.equal(v.deq[i], Math.fround(q * s), `dequantized ${i}`);
    if (v.w[0] === null) continue;
    assert.equal(v.err[i], Math.abs(Math.fround(v.w[i] - v.deq[i])), `error ${i}`);
    const want = s === 0 ? 0 : Math.min(7, Math.max(-8, roundHalfEven(Math.fround(v.w[i] / s))));
    assert.equal(v.q[i], want, `q[${i}] = clamp(round(w / s))`);
  }
  if (v.w[0] === null) return;
  const target = Math.fround(Math.max(...v.w.map(Math.abs)) / 7);
  for (const other of [bits - 1, bits + 1]) {
    if (other < 0 || other > 0x7bff) continue;
    assert.ok(Math.abs(f16(other) - target) >= Math.abs(s - target), `the scale ${v.scaleHex} is the f16 nearest ${target}`);
  }
}

test('nibble view: the bytes shown for a group are the written file\'s bytes, and its numbers agree', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  const cases = [
    { tensor: 'model.layers.1.mlp.down_proj.weight', row: 37, group: 4 },  // [256, 768]: 12 groups a row
    { tensor: 'model.layers.3.self_attn.q_proj.weight', row: 255, group: 3 },  // the last group of the last row
  ];
  // before converting: the checkpoint, quantized by the writer's own code
  const fromCheckpoint = [];
  for (const c of cases) {
    const v = await showGroup(page, { source: 'checkpoint', ...c });
    assert.equal(v.w.length, 64);
    assert.ok(v.w.every((x) => Number.isFinite(x)));
    checkConsistent(v);
    fromCheckpoint.push(v);
  }
  await page.selectOption('#format', 'gguf-lite-q4');
  const file = await convert(page);
  for (const [i, c] of cases.entries()) {
    const v = await showGroup(page, { source: 'file', ...c });
    const g = q4GroupInFile(file, c.tensor, c.row, c.group);
    assert.deepEqual(v.bytes, g.bytes, `${c.tensor} row ${c.row} group ${c.group}: packed bytes`);
    assert.equal(parseInt(v.scaleHex, 16), g.scale, 'f16 scale');
    assert.deepEqual(v.offsets, { scale: g.scaleAt, packed: g.packedAt }, 'offsets shown');
    checkConsistent(v);
    // and the checkpoint view predicted exactly these bytes
    assert.deepEqual(fromCheckpoint[i].bytes, g.bytes);
    assert.equal(fromCheckpoint[i].scaleHex, v.scaleHex);
    assert.deepEqual(fromCheckpoint[i].w, v.w);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test('nibble view: keys move between groups and rows; a byte lights its two weights and back', async () => {
  const { context, page, errors } = await openPage();
  // the classroom example works with no checkpoint at all
  await waitView(page, { source: 'example' });
  let v = await showGroup(page, { source: 'example', row: 1, group: 1 });
  checkConsistent(v);
  assert.ok(v.q.includes(-8), 'the example reaches -8');
  assert.deepEqual(new Set(v.q).size, 16, 'every 4-bit code appears');
  v = await showGroup(page, { source: 'example', row: 1, group: 0 });
  assert.equal(v.scaleHex, '0x0000');
  assert.ok(v.bytes.every((b) => b === 0) && v.q.every((q) => q === 0), 'a zero group packs to zero bytes');
  v = await showGroup(page, { source: 'example', row: 0, group: 0 });
  checkConsistent(v);
  assert.ok(v.w.some((x) => x < 0));

  await loadDemo(page);
  const tensor = 'model.layers.1.mlp.down_proj.weight';  // 256 rows, 12 groups a row
  await showGroup(page, { source: 'checkpoint', tensor, row: 37, group: 10 });
  await page.focus('#nv-view');
  const steps = [['ArrowRight', 37, 11], ['ArrowRight', 38, 0], ['ArrowLeft', 37, 11], ['ArrowDown', 38, 11],
    ['ArrowUp', 37, 11], ['Home', 37, 0], ['End', 37, 11], ['PageDown', 47, 11], ['ArrowUp', 46, 11]];
  for (const [key, row, group] of steps) {
    await page.keyboard.press(key);
    await waitView(page, { tensor, row, group });
  }

  const lit = () => page.evaluate(() => ({
    weights: [...document.querySelectorAll('#nv-grid .nv-idx[data-hl]')].map((e) => Number(e.dataset.weight)),
    weight: [...document.querySelectorAll('#nv-grid .nv-idx[data-sel]')].map((e) => Number(e.dataset.weight)),
    bytes: [...document.querySelectorAll('#nv-grid .nv-byte[data-hl]')].map((e) => Number(e.dataset.byte)),
    byte: [...document.querySelectorAll('#nv-grid .nv-byte[data-sel]')].map((e) => Number(e.dataset.byte)),
    focus: document.activeElement.dataset.byte ?? document.activeElement.dataset.weight ?? null,
    cols: [...document.querySelectorAll('#nv-grid td.nv-q.hl, #nv-grid td.nv-q.sel')].map((e) => Number(e.dataset.weight)),
  }));
  await page.click('#nv-grid .nv-byte[data-byte="5"]');
  assert.deepEqual(await lit(), { weights: [10, 11], weight: [], bytes: [], byte: [5], focus: '5', cols: [10, 11] });
  // the byte's hex digits are its two weights' nibbles: high = element 11, low = element 10
  v = await readView(page);
  assert.equal(v.bytes[5], ((v.q[11] & 15) << 4) | (v.q[10] & 15));
  const [hi, lo] = await page.$$eval('#nv-grid .nv-byte[data-byte="5"] span', (s) => s.map((e) => [e.className, e.textContent]));
  assert.deepEqual([hi[0], lo[0]], ['hi', 'lo']);
  assert.equal(parseInt(hi[1], 16), v.q[11] & 15);
  assert.equal(parseInt(lo[1], 16), v.q[10] & 15);
  await page.keyboard.press('ArrowRight');  // with a byte focused, arrows move along the bytes
  assert.deepEqual(await lit(), { weights: [12, 13], weight: [], bytes: [], byte: [6], focus: '6', cols: [12, 13] });
  await page.keyboard.press('ArrowDown');  // rows still move, the selection stays
  await waitView(page, { tensor, row: 47, group: 11 });
  assert.deepEqual((await lit()).weights, [12, 13]);
  // and the reverse: a weight lights its byte
  await page.click('#nv-grid .nv-idx[data-weight="7"]');
  assert.deepEqual(await lit(), { weights: [], weight: [7], bytes: [3], byte: [], focus: '7', cols: [7] });
  await page.keyboard.press('ArrowLeft');
  assert.deepEqual(await lit(), { weights: [], weight: [6], bytes: [3], byte: [], focus: '6', cols: [6] });
  await page.click('#nv-grid td.nv-deq[data-weight="40"]');  // any cell of a column selects its weight
  assert.deepEqual((await lit()).bytes, [20]);
  assert.match(await page.textContent('#nv-explain'), /Byte 20 = 0x[0-9A-F]{2}: high nibble .* weight 41.*low nibble .* weight 40/);

  // the classroom example, one byte selected, for a look
  await showGroup(page, { source: 'example', row: 0, group: 0 });
  await page.click('#nv-grid .nv-byte[data-byte="6"]');
  await page.locator('#nibbles').screenshot({ path: path.join(outDir, 'nibbles.png') });
  assert.deepEqual(errors, []);
  await context.close();
});

test('scheme editor (GGUF-lite): the live prediction is the written size, and its rules reproduce the file with the CLI', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  await page.selectOption('#format', 'gguf-lite-q8');
  await planSettled(page);
  assert.ok(await page.isVisible('#schemes'));
  const total = async () => Number(await page.getAttribute('#scheme-total', 'data-total'));
  const dtypeOf = (name) => page.getAttribute(`#scheme-table tr[data-tensor="${name}"] .scheme-dtype`, 'data-value');
  const before = await total();
  assert.equal(before, await page.evaluate(() => window.__leapconv.plan.total_bytes));
  await page.click('#scheme-tensors-summary');  // the per-tensor table is folded away until asked for

  // per-tensor choices, then a preset and a default
  const choices = { 'model.layers.0.mlp.down_proj.weight': 'f16', 'model.layers.2.self_attn.q_proj.weight': 'q4',
    'model.norm.weight': 'f16' };
  for (const [name, scheme] of Object.entries(choices)) {
    await page.selectOption(`#scheme-table select[data-tensor="${name}"]`, scheme);
    await planSettled(page);
  }
  assert.notEqual(await total(), before, 'the prediction follows the choices');
  assert.equal(await page.inputValue('#format'), 'gguf-lite-custom');
  await page.selectOption('#scheme-preset', 'mixed');
  await page.selectOption('#scheme-default', 'f16');
  await planSettled(page);
  // first match wins: a per-tensor choice beats the preset's rules, which beat the default
  assert.equal(await dtypeOf('model.layers.0.mlp.down_proj.weight'), 'F16');
  assert.equal(await dtypeOf('model.layers.1.mlp.down_proj.weight'), 'Q4_per_group_64');
  assert.equal(await dtypeOf('model.layers.2.self_attn.q_proj.weight'), 'Q4_per_group_64');
  assert.equal(await dtypeOf('model.layers.0.self_attn.q_proj.weight'), 'Q8_per_channel');
  assert.equal(await dtypeOf('model.norm.weight'), 'F16');
  assert.equal(await dtypeOf('model.layers.0.input_layernorm.weight'), 'F32');
  assert.equal(await dtypeOf('lm_head.weight'), 'F16');
  const predicted = await total();
  // the table's bytes add up to the prediction less the header, metadata and descriptors
  const after = await page.$$eval('#scheme-table tbody .scheme-after', (c) => c.reduce((a, e) => a + Number(e.dataset.value), 0));
  const b = await page.evaluate(() => window.__leapconv.plan.breakdown);
  assert.equal(b.vocabulary_bytes + b.padding_bytes, 0, 'GGUF-lite has no vocabulary and no padding');
  assert.equal(after + b.header_bytes + b.metadata_bytes + b.descriptor_bytes, predicted);
  assert.match(await page.textContent('#scheme-total'), /, header 16 B, metadata \d+ B, tensor descriptors [\d.]+ KiB;/);
  // the breakdown chart was redrawn for the mix
  const segs = await page.$$eval('#scheme-chart svg rect[data-segment]', (r) => r.map((e) => e.dataset.segment));
  for (const s of ['F16 values', 'F32 values', 'Q8_per_channel values', 'Q4_per_group_64 values', 'Q4_per_group_64 scales'])
    assert.ok(segs.includes(s), `${s} in ${segs.join(', ')}`);

  await page.locator('#schemes').screenshot({ path: path.join(outDir, 'schemes.png') });
  const file = await convert(page);
  assert.equal(file.length, predicted, 'the written file has the predicted size');
  assert.equal(await page.evaluate(() => window.__leapconv.summary.total_bytes), predicted);

  // the exported rules, with the default, give the same file from the native CLI
  await page.click('#scheme-export summary');
  const dl = page.waitForEvent('download');
  await page.click('#scheme-download');
  const rulesFile = path.join(work, 'rules.json');
  fs.copyFileSync(await (await dl).path(), rulesFile);
  const rules = JSON.parse(fs.readFileSync(rulesFile, 'utf8'));
  assert.ok(Array.isArray(rules) && rules.every((r) => Object.keys(r).sort().join() === 'pattern,scheme'));
  // exact names first (a glob without wildcards matches just that name), then the preset's rules
  assert.deepEqual(Object.fromEntries(rules.slice(0, 3).map((x) => [x.pattern, x.scheme])), choices);
  assert.deepEqual(rules.slice(3, 5), [{ pattern: '*mlp*', scheme: 'q4' }, { pattern: '*attn*', scheme: 'q8' }]);
  assert.equal(await page.textContent('#scheme-json'), fs.readFileSync(rulesFile, 'utf8'));
  assert.match(await page.textContent('#scheme-cli'), /--scheme f16 --schemes \S+\.json/);
  const out = path.join(work, 'cli.gguf-lite');
  const r = runNative([out, '--model', demo, '--scheme', 'f16', '--schemes', rulesFile, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.readFileSync(out).equals(file), 'the CLI with the exported rules writes the page\'s bytes');

  // a format menu entry starts over: no per-tensor choices left
  await page.selectOption('#format', 'gguf-lite-q4');
  await planSettled(page);
  assert.deepEqual(await page.$$eval('#scheme-table select.scheme-pick', (s) => s.filter((e) => e.value).length), 0);
  assert.equal(await dtypeOf('model.layers.0.mlp.down_proj.weight'), 'Q4_per_group_64');
  assert.deepEqual(errors, []);
  await context.close();
});

test('scheme editor (GGUF): GGUF tensor names and types, its own presets, rules that do nothing say so; the CLI reproduces the file', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);  // GGUF Q8_0 is the default
  assert.equal(await page.inputValue('#format'), 'gguf-q8_0');
  assert.ok(await page.isVisible('#schemes'));
  assert.equal(await page.textContent('#schemes-title'), 'Schemes per tensor: GGUF');
  const catalog = await page.evaluate(async () => (await import('./catalog.js')).catalog);
  const gguf = catalog.formats.find((f) => f.id === 'gguf');
  const total = async () => Number(await page.getAttribute('#scheme-total', 'data-total'));
  const dtypeOf = (name) => page.getAttribute(`#scheme-table tr[data-tensor="${name}"] .scheme-dtype`, 'data-value');
  const whyOf = (name) => page.textContent(`#scheme-table tr[data-tensor="${name}"] .scheme-why`);
  await page.click('#scheme-tensors-summary');

  // the rows are the file's tensors by their GGUF names, each with the checkpoint tensor it comes from
  const plan = await page.evaluate(() => window.__leapconv.plan);
  const names = await page.$$eval('#scheme-table tbody tr', (r) => r.map((e) => e.dataset.tensor));
  assert.deepEqual(names, plan.tensors.map((t) => t.name));
  for (const n of ['token_embd.weight', 'blk.0.attn_q.weight', 'blk.3.ffn_down.weight', 'output_norm.weight', 'output.weight'])
    assert.ok(names.includes(n), n);
  assert.ok(!names.some((n) => n.startsWith('model.')), 'no Hugging Face names as rule targets');
  assert.equal(await page.textContent('#scheme-table tr[data-tensor="blk.0.attn_q.weight"] .src-name'), 'model.layers.0.self_attn.q_proj.weight');
  // the types: the default takes the format's file types, the rules its rule_types
  assert.deepEqual(await page.$$eval('#scheme-default option', (o) => o.map((e) => e.value)),
    [...new Set(gguf.menu.map((m) => m.options.scheme))]);
  assert.deepEqual(await page.$$eval('#scheme-table tr[data-tensor="blk.0.attn_q.weight"] select option', (o) => o.map((e) => e.value)),
    ['', ...gguf.rule_types]);
  // GGUF's presets, not GGUF-lite's (whose HF patterns would match nothing here)
  const presets = await page.$$eval('#scheme-preset option', (o) => o.map((e) => e.value));
  assert.deepEqual(presets, ['none', 'mixed', 'q8-ends', 'f16-ends', 'custom']);

  // per-tensor choices: one applied, one that falls back (the core says why), one GGUF keeps in F32
  const choices = { 'blk.1.ffn_down.weight': 'q4_0', 'output.weight': 'q6_k', 'blk.0.attn_norm.weight': 'f16' };
  for (const [name, scheme] of Object.entries(choices)) {
    await page.selectOption(`#scheme-table select[data-tensor="${name}"]`, scheme);
    await planSettled(page);
  }
  assert.equal(await page.inputValue('#format'), 'gguf-custom');
  assert.equal(await dtypeOf('blk.1.ffn_down.weight'), 'Q4_0');
  // Q6_K on rows of 256 (the demo is 256 wide): taken as chosen, no fallback
  const head = (await page.evaluate(() => window.__leapconv.plan)).tensors.find((t) => t.name === 'output.weight');
  assert.equal(head.note, undefined);
  assert.equal(await dtypeOf('output.weight'), 'Q6_K');
  assert.equal(await whyOf('output.weight'), 'your choice');
  assert.ok(!(await page.$eval('#scheme-table tr[data-tensor="output.weight"]', (e) => e.classList.contains('fallback'))));
  assert.equal(await dtypeOf('blk.0.attn_norm.weight'), 'F32');
  assert.match(await whyOf('blk.0.attn_norm.weight'), /^your choice · stays F32/);  // with the core's note when it gives one
  assert.ok(await page.$eval('#scheme-table tr[data-tensor="blk.0.attn_norm.weight"]', (e) => e.classList.contains('fallback')));

  // GGUF's mixed preset, a smaller default, and a rule with Hugging Face names that matches nothing
  await page.selectOption('#scheme-preset', 'mixed');
  await planSettled(page);
  assert.deepEqual(await page.$$eval('#scheme-rules .rule-count', (c) => c.map((e) => e.textContent)), ['decides 4 tensors', 'decides 4 tensors', 'decides 3 tensors'],
    'blk.1.ffn_down.weight is decided by the per-tensor choice, before the rules');
  await page.click('#scheme-add-rule');
  // a new rule is rule 1: first match wins
  await page.fill('#scheme-rules .rule:first-child input', 'model.layers.*');
  await planSettled(page);
  assert.equal(await page.textContent('#scheme-rules .rule:first-child .rule-count'), 'matches no tensor');
  await page.selectOption('#scheme-default', 'q5_0');
  await planSettled(page);
  assert.equal(await dtypeOf('blk.2.ffn_gate.weight'), 'Q4_0');
  assert.equal(await dtypeOf('blk.2.attn_q.weight'), 'Q5_0');
  assert.equal(await whyOf('blk.2.attn_q.weight'), 'default Q5_0');
  assert.equal(await dtypeOf('token_embd.weight'), 'Q5_0');
  const predicted = await total();
  const b = await page.evaluate(() => window.__leapconv.plan.breakdown);
  assert.ok(b.vocabulary_bytes > 0);
  assert.match(await page.textContent('#scheme-total'), /, metadata \d+ B, vocabulary [\d.]+ KiB, tensor descriptors [\d.]+ KiB, alignment padding \d+ B;/);
  const after = await page.$$eval('#scheme-table tbody .scheme-after', (c) => c.reduce((a, e) => a + Number(e.dataset.value), 0));
  assert.equal(after + b.header_bytes + b.metadata_bytes + b.vocabulary_bytes + b.descriptor_bytes + b.padding_bytes, predicted);

  const file = await convert(page);
  assert.equal(file.length, predicted, 'the written file has the predicted size');
  const { tensors } = readGguf(file);
  const types = Object.fromEntries([...tensors].map(([n, t]) => [n, t.type]));
  assert.equal(types['blk.1.ffn_down.weight'], 'Q4_0');
  assert.equal(types['blk.2.ffn_up.weight'], 'Q4_0');
  assert.equal(types['blk.2.attn_v.weight'], 'Q5_0');
  assert.equal(types['output.weight'], 'Q6_K');
  assert.equal(types['blk.0.attn_norm.weight'], 'F32');
  assert.equal(types['output_norm.weight'], 'F32');

  // the exported rules give the same file from the native CLI
  await page.click('#scheme-export summary');
  assert.match(await page.textContent('#scheme-cli'), /^build\/native\/export tiny-llama-custom\.gguf --model tiny-llama --scheme q5_0 --schemes tiny-llama-schemes\.json$/);
  const dl = page.waitForEvent('download');
  await page.click('#scheme-download');
  const rulesFile = path.join(work, 'gguf-rules.json');
  fs.copyFileSync(await (await dl).path(), rulesFile);
  const rules = JSON.parse(fs.readFileSync(rulesFile, 'utf8'));
  assert.deepEqual(Object.fromEntries(rules.slice(0, 3).map((x) => [x.pattern, x.scheme])), choices);
  assert.deepEqual(rules.slice(3), [{ pattern: 'model.layers.*', scheme: 'q8_0' },  // added first, while the default was Q8_0
    { pattern: 'blk.*.ffn_gate.weight', scheme: 'q4_0' }, { pattern: 'blk.*.ffn_up.weight', scheme: 'q4_0' },
    { pattern: 'blk.*.ffn_down.weight', scheme: 'q4_0' }]);
  const out = path.join(work, 'cli.gguf');
  const r = runNative([out, '--model', demo, '--type', 'Q5_0', '--schemes', rulesFile, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.readFileSync(out).equals(file), 'the CLI with the exported rules writes the page\'s bytes');

  // the menu's GGUF-lite entries move the editor to GGUF-lite: its names, types and presets
  await page.selectOption('#format', 'gguf-lite-mixed');
  await planSettled(page);
  assert.equal(await page.textContent('#schemes-title'), 'Schemes per tensor: GGUF-lite');
  assert.equal(await page.inputValue('#scheme-preset'), 'mixed');
  assert.equal(await page.inputValue('#scheme-default'), 'q8');
  assert.ok(await page.isVisible('#scheme-table tr[data-tensor="model.layers.0.mlp.up_proj.weight"]'));
  assert.equal(await dtypeOf('model.layers.0.mlp.up_proj.weight'), 'Q4_per_group_64');
  assert.deepEqual(await page.$$eval('#scheme-rules .rule:first-child select option', (o) => o.map((e) => e.value)), ['f32', 'f16', 'q8', 'q4']);
  assert.deepEqual(await page.$$eval('#scheme-preset option', (o) => o.map((e) => e.value)), ['none', 'mixed', 'q4-mlp', 'f16-ends', 'custom']);
  // "schemes per tensor" of GGUF picks GGUF up where it was left: default, rules, per-tensor choices
  await page.selectOption('#format', 'gguf-custom');
  await planSettled(page);
  assert.equal(await page.textContent('#schemes-title'), 'Schemes per tensor: GGUF');
  assert.equal(await page.inputValue('#scheme-default'), 'q5_0');
  assert.equal(await page.$$eval('#scheme-rules .rule', (r) => r.length), 4);
  assert.equal(await dtypeOf('blk.1.ffn_down.weight'), 'Q4_0');
  assert.equal(await page.evaluate(() => window.__leapconv.plan.total_bytes), predicted, 'the edited size again');
  // and a GGUF menu entry starts GGUF over at its type
  await page.selectOption('#format', 'gguf-q8_0');
  await planSettled(page);
  assert.equal(await page.inputValue('#scheme-default'), 'q8_0');
  assert.equal(await page.$$eval('#scheme-rules .rule', (r) => r.length), 0);
  assert.equal(await dtypeOf('blk.0.ffn_up.weight'), 'Q8_0');
  assert.equal(await page.evaluate(() => window.__leapconv.plan.total_bytes), plan.total_bytes, 'the plain Q8_0 size again');
  assert.deepEqual(errors, []);
  await context.close();
});

test('scheme editor (GGUF) in llama-quantize\'s words: the choices as --tensor-type lines; the downloaded --tensor-type-file gives the CLI the page\'s bytes', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  // GGUF-lite: nothing in llama-quantize's words
  await page.selectOption('#format', 'gguf-lite-q8');
  await planSettled(page);
  await page.waitForFunction(() => document.getElementById('scheme-quantize').hidden);
  await page.selectOption('#format', 'gguf-q8_0');
  await planSettled(page);
  // the converter's Q8_0 (the default) is not llama-quantize's file: the core says so
  await page.click('#scheme-export summary');
  await page.waitForFunction(() => document.getElementById('scheme-quantize').dataset.state === 'off');
  assert.match(await page.textContent('#scheme-quantize-why'), /Q8_0 is the converter's file .*--schemes/);
  assert.ok(await page.isHidden('#scheme-tensor-type-download'));
  // a llama-quantize preset, a per-tensor choice, and two rules (one with ?, one shadowing its mixture's attn_v)
  await page.selectOption('#format', 'gguf-q4_k_m');
  await planSettled(page);
  await page.click('#scheme-tensors-summary');
  await page.selectOption('#scheme-table select[data-tensor="blk.1.ffn_down.weight"]', 'q8_0');
  await planSettled(page);
  for (const [pattern, scheme] of [['blk.*.attn_v.weight', 'q4_0'], ['blk.?.ffn_up.weight', 'q5_1']]) {
    await page.click('#scheme-add-rule');
    // a new rule starts at the preset's own type (Q4_K_M: most weights Q4_K), a type rules take
    assert.equal(await page.inputValue('#scheme-rules .rule:first-child select'), 'q4_k');
    await page.fill('#scheme-rules .rule:first-child input', pattern);
    await page.selectOption('#scheme-rules .rule:first-child select', scheme);
    await planSettled(page);
  }
  assert.equal(await page.inputValue('#format'), 'gguf-custom');
  await page.click('#scheme-quantize summary');
  await page.waitForFunction(() => document.getElementById('scheme-quantize').dataset.state === 'ok' &&
    document.getElementById('scheme-tensor-types').textContent.includes('ffn_up'));
  const lines = (await page.textContent('#scheme-tensor-types')).trim().split('\n');
  assert.deepEqual(lines, ['^blk\\.1\\.ffn_down\\.weight$=Q8_0', '^blk\\..\\.ffn_up\\.weight$=Q5_1', '^blk\\..*\\.attn_v\\.weight$=Q4_0']);
  assert.equal(await page.textContent('#scheme-quantize-cli'),
    'build/native/export tiny-llama-custom.gguf --model tiny-llama --type Q4_K_M --tensor-type-file tiny-llama-tensor-types.txt');
  assert.match(await page.textContent('#scheme-llama-quantize'),
    /^llama-quantize --tensor-type-file tiny-llama-tensor-types\.txt tiny-llama-BF16\.gguf tiny-llama-custom\.gguf Q4_K_M$/);
  const dl = page.waitForEvent('download');
  await page.click('#scheme-tensor-type-download');
  const typesFile = path.join(work, 'tensor-types.txt');
  fs.copyFileSync(await (await dl).path(), typesFile);
  assert.equal(fs.readFileSync(typesFile, 'utf8'), lines.join('\n') + '\n');

  const file = await convert(page);
  const types = Object.fromEntries([...readGguf(file).tensors].map(([n, t]) => [n, t.type]));
  assert.equal(types['blk.1.ffn_down.weight'], 'Q8_0');
  assert.equal(types['blk.3.ffn_up.weight'], 'Q5_1');
  assert.equal(types['blk.0.attn_v.weight'], 'Q4_0');
  const out = path.join(work, 'cli-tensor-types.gguf');
  const r = runNative([out, '--model', demo, '--type', 'Q4_K_M', '--tensor-type-file', typesFile, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.readFileSync(out).equals(file), 'the CLI with the downloaded --tensor-type-file writes the page\'s bytes');
  // and without it, the plain preset differs (the file says something)
  const plain = path.join(work, 'cli-plain.gguf');
  assert.equal(runNative([plain, '--model', demo, '--type', 'Q4_K_M', '--quiet']).code, 0);
  assert.ok(!fs.readFileSync(plain).equals(file));
  assert.deepEqual(errors, []);
  await context.close();
});

test('format menu: the presets llama-quantize refuses without an importance matrix are off, saying why (the core\'s list)', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  const catalog = await page.evaluate(async () => (await import('./catalog.js')).catalog);
  const needs = catalog.formats.find((f) => f.id === 'gguf').menu.filter((m) => m.needs_imatrix).map((m) => m.file_suffix);
  assert.deepEqual(needs, ['Q2_K_S', 'IQ3_XS', 'IQ3_XXS', 'IQ2_M', 'IQ2_S', 'IQ2_XS', 'IQ2_XXS', 'IQ1_M', 'IQ1_S']);
  for (const suffix of needs) {
    const o = await page.$eval(`#format option[value="gguf-${suffix.toLowerCase()}"]`, (e) => ({ disabled: e.disabled, text: e.textContent }));
    assert.deepEqual(o, { disabled: true, text: `GGUF, ${suffix} (needs an importance matrix)` });
    assert.ok(await page.$eval(`#scheme-default option[value="${suffix.toLowerCase()}"]`, (e) => e.disabled), suffix);
  }
  for (const v of ['gguf-iq3_s', 'gguf-iq4_xs', 'gguf-q2_k', 'gguf-q4_k_m'])
    assert.equal(await page.$eval(`#format option[value="${v}"]`, (e) => e.disabled), false, v);
  assert.ok(await page.isVisible('#format-needs'));
  assert.match(await page.textContent('#format-needs'), /^Q2_K_S, IQ3_XS, .*IQ1_S: needs an importance matrix .*imatrix\.gguf/);
  // and the types a weight takes only with importance weights, in the per-tensor choices (the core's needs_imatrix)
  const pick = (type) => page.$eval(`#scheme-table select[data-tensor="blk.0.ffn_up.weight"] option[value="${type}"]`, (e) => [e.disabled, e.textContent]);
  for (const t of ['iq2_xxs', 'iq2_xs', 'iq2_s', 'iq3_xxs', 'iq1_s', 'iq1_m']) assert.deepEqual(await pick(t), [true, `${t.toUpperCase()} (needs an importance matrix)`]);
  for (const t of ['iq3_s', 'iq4_xs', 'q2_k', 'q4_k']) assert.deepEqual(await pick(t), [false, t.toUpperCase()]);
  assert.deepEqual(errors, []);
  await context.close();
});

test('nibble view with GGUF selected: the checkpoint view works, the written GGUF is not offered as Q4_per_group_64', async () => {
  const { context, page, errors } = await openPage();
  await loadDemo(page);
  await page.selectOption('#format', 'gguf-q4_0');
  await convert(page);
  const file = await page.$eval('#nv-source option[value="file"]', (o) => ({ disabled: o.disabled, text: o.textContent }));
  assert.deepEqual(file, { disabled: true, text: 'Written file (convert to GGUF-lite, Q4 per group of 64 first)' });
  const v = await showGroup(page, { source: 'checkpoint', tensor: 'model.layers.1.mlp.down_proj.weight', row: 3, group: 2 });
  checkConsistent(v);
  assert.deepEqual(errors, []);
  await context.close();
});

// ---- the block view: any block type, drawn from the core's description ----
const axeSource = fs.readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');
const ggmlDequant = path.join(root, 'build', 'native', 'ggml_dequant');
// ggml's block geometry (ggml-common.h), the test's own: values, bytes, type id.
const GGML = { Q8_0: [32, 34, 8], Q5_0: [32, 22, 6], Q4_K: [256, 144, 12], Q6_K: [256, 210, 14] };

async function axeCheck(page, what) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(axeSource);
  const bad = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, nodes: v.nodes.slice(0, 4).map((n) => `${n.target.join(' ')}: ${n.failureSummary}`) })));
  assert.deepEqual(bad, [], `${what}: ${JSON.stringify(bad, null, 1)}`);
}
const ggmlValues = (file, offset, type) =>
  JSON.parse(execFileSync(ggmlDequant, [file, String(offset), String(GGML[type][2]), '1'], { encoding: 'utf8' }));
const sameFloats = (a, b, what) => {
  assert.equal(a.length, b.length, what);
  // (the page shows −0 as 0)
  a.forEach((x, i) => assert.ok(Math.fround(x) === Math.fround(b[i]), `${what}: value ${i}: ${x} vs ${b[i]}`));
};

test('block view: for written Q4_K, Q6_K, Q5_0, Q8_0 and GGUF-lite Q4 files, the bytes shown are the file\'s, the values ggml\'s', async () => {
  // a model whose rows of 256 and 512 take K-quant blocks, with the demo's tokenizer
  const dir = generate(path.join(work, 'k256'), ['--dim', '256', '--hidden', '512', '--layers', '1', '--heads', '4',
    '--kv-heads', '2', '--vocab', '400', '--dtype', 'bf16', '--seed', '3']);
  fs.copyFileSync(path.join(root, 'tests', 'data', 'tiny_sp_bpe.model'), path.join(dir, 'tokenizer.model'));
  const { context, page, errors } = await openPage();
  await page.setInputFiles('#folder-input', dir);
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  await planSettled(page);
  const seen = new Set();
  for (const format of ['gguf-q4_k_m', 'gguf-q5_0', 'gguf-q8_0']) {
    await page.selectOption('#format', format);
    await planSettled(page);
    const buf = await convert(page);
    const file = path.join(work, `${format}.gguf`);
    fs.writeFileSync(file, buf);
    const { tensors, dataStart } = readGguf(buf);
    for (const [name, t] of tensors) {
      if (!GGML[t.type] || t.dims.length !== 2 || seen.has(t.type + (name.includes('ffn_down') ? 'down' : ''))) continue;
      seen.add(t.type + (name.includes('ffn_down') ? 'down' : ''));
      const [values, bytes] = GGML[t.type], [cols, rows] = t.dims;  // ggml's order: ne0 = columns
      const row = rows - 1, block = cols / values - 1;  // the last block of the last row
      await showBlock(page, { source: 'file', tensor: name, row, block });
      const v = await blockValues(page, values);
      assert.equal(v.type, t.type, name);
      const at = dataStart + t.offset + row * (cols / values) * bytes + block * bytes;
      assert.deepEqual(v.pieces, [{ offset: at, size: bytes }], `${name}: where the block is`);
      assert.deepEqual(v.bytes, [...buf.subarray(at, at + bytes)], `${name}: the bytes shown are the file's`);
      sameFloats(v.deq, ggmlValues(file, at, t.type), `${name} (${t.type}): the values shown are ggml's`);
      // a tensor the file holds as the checkpoint has it: its source values and errors too, and
      // the checkpoint view of the same block (the type's encoder in the page) predicted these bytes
      if (name.includes('ffn_down')) {
        assert.ok(v.w.every(Number.isFinite), `${name}: source values shown`);
        v.err.forEach((e, i) => assert.equal(e, Math.fround(Math.abs(Math.fround(v.w[i] - v.deq[i])))));
        const c = await showBlock(page, { source: 'checkpoint', type: t.type, tensor: 'model.layers.0.mlp.down_proj.weight', row, block });
        assert.deepEqual(c.bytes, v.bytes, `${name}: the checkpoint view's ${t.type} bytes are the file's`);
      }
      // the hook for an opened file: the page reads the bytes where the core says, the core describes them
      if (!seen.has('opened')) {
        seen.add('opened');
        const shape = [...t.dims].reverse();
        await page.evaluate(({ bytes, tensor }) => {
          const file = new Uint8Array(bytes);
          window.__leapconv.blocks.showTensor({ readAt: async (o, n) => file.subarray(o, o + n), tensor, label: 'a test file' });
        }, { bytes: [...buf], tensor: { name, dtype: t.type, shape, offset: dataStart + t.offset } });
        await waitBlock(page, { source: 'opened', tensor: name });
        await showBlock(page, { source: 'opened', row, block });
        const o = await blockValues(page, values);
        assert.deepEqual(o.bytes, v.bytes, `${name}, opened: the bytes`);
        sameFloats(o.deq, v.deq, `${name}, opened: the values`);
        assert.deepEqual(o.pieces, v.pieces);
      }
    }
  }
  for (const t of ['Q4_K', 'Q6_K', 'Q5_0', 'Q8_0']) assert.ok(seen.has(t), `a ${t} tensor was checked (${[...seen]})`);

  // GGUF-lite Q4: the block as shown is the group's scale (scales region) and its 32 packed bytes
  await page.selectOption('#format', 'gguf-lite-q4');
  await planSettled(page);
  const lite = await convert(page);
  const name = 'model.layers.0.mlp.down_proj.weight', row = 255, group = 7;
  const g = q4GroupInFile(lite, name, row, group);
  await showBlock(page, { source: 'file', tensor: name, row, block: group });
  const v = await blockValues(page, 64);
  assert.deepEqual(v.pieces, [{ offset: g.scaleAt, size: 2 }, { offset: g.packedAt, size: 32 }]);
  assert.deepEqual(v.bytes, [g.scale & 255, g.scale >> 8, ...g.bytes]);
  const s = f16(g.scale);
  sameFloats(v.deq, Array.from({ length: 64 }, (_, i) => {
    const n = i % 2 ? g.bytes[i >> 1] >> 4 : g.bytes[i >> 1] & 15;
    return (n >= 8 ? n - 16 : n) * s;
  }), 'GGUF-lite Q4 values');
  assert.ok(v.w.every(Number.isFinite));
  assert.deepEqual(errors, []);
  await context.close();
});

test('block view: a mixture\'s stacked experts (gpt-oss\'s MXFP4, kept as it ships): any expert\'s row opens, the bytes the file\'s, the values ggml\'s', async () => {
  const dir = generate(path.join(work, 'gptoss'), ['--arch', 'gpt-oss', '--dim', '64', '--hidden', '64', '--layers', '1',
    '--heads', '4', '--kv-heads', '2', '--head-dim', '16', '--experts', '4', '--experts-used', '2', '--expert-hidden', '64',
    '--vocab', '400', '--dtype', 'bf16', '--seed', '5']);
  fs.copyFileSync(path.join(root, 'tests', 'data', 'tiny_sp_bpe.model'), path.join(dir, 'tokenizer.model'));
  const { context, page, errors } = await openPage();
  await page.setInputFiles('#folder-input', dir);
  await waitState(page, ['ready', 'error']);
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  await planSettled(page);
  await page.selectOption('#format', 'gguf-f16');
  await planSettled(page);
  const buf = await convert(page);
  const file = path.join(work, 'gptoss.gguf');
  fs.writeFileSync(file, buf);
  const { tensors, dataStart } = readGguf(buf);
  const name = 'blk.0.ffn_up_exps.weight', t = tensors.get(name);
  assert.equal(t.type, 'MXFP4');
  const [cols, rows, experts] = t.dims;  // ggml's order: [64 values, 64 rows, 4 experts]
  assert.equal(experts, 4);
  const expert = 2, expertRow = 5, row = expert * rows + expertRow, block = 1;
  await showBlock(page, { source: 'file', tensor: name, row, block });
  const v = await blockValues(page, 32);
  assert.equal(v.type, 'MXFP4');
  assert.match(await page.textContent('#bv-where'), /expert 3 of 4, its row 6/);
  const at = dataStart + t.offset + row * (cols / 32) * 17 + block * 17;
  assert.deepEqual(v.pieces, [{ offset: at, size: 17 }], 'where the block is');
  assert.deepEqual(v.bytes, [...buf.subarray(at, at + 17)], "the bytes shown are the file's");
  sameFloats(v.deq, JSON.parse(execFileSync(ggmlDequant, [file, String(at), '39', '1'], { encoding: 'utf8' })),
    "the values shown are ggml's");
  assert.deepEqual(errors, []);
  await context.close();
});

test('block view: a byte lights the weights it holds and those it scales, a weight its bytes; keys move through pages, blocks and rows', async () => {
  const { context, page, errors } = await openPage();
  await waitBlock(page, { source: 'example' });
  const lit = () => page.evaluate(() => {
    const ids = (sel, key) => [...document.querySelectorAll(sel)].map((e) => Number(e.dataset[key])).sort((a, b) => a - b);
    return { weights: ids('.bv-idx[data-hl]', 'elem'), scaled: ids('.bv-idx[data-scales]', 'elem'), weight: ids('.bv-idx[data-sel]', 'elem'),
      bytes: ids('.bv-byte[data-hl]', 'byte'), scales: ids('.bv-byte[data-scales]', 'byte'), byte: ids('.bv-byte[data-sel]', 'byte') };
  });
  // Q4_0 {d, qs[16]}: byte 2 + j holds element j (low nibble) and j + 16 (high); d scales all 32
  let v = await showBlock(page, { source: 'example', type: 'Q4_0', row: 0, block: 3 });
  assert.equal(v.bytes.length, 18);
  await page.click('.bv-byte[data-byte="7"]');
  assert.deepEqual(await lit(), { weights: [5, 21], scaled: [], weight: [], bytes: [], scales: [], byte: [7] });
  await page.click('.bv-byte[data-byte="1"]');
  assert.equal((await lit()).scaled.length, 32, 'd scales every weight');
  await page.click('.bv-idx[data-elem="21"]');
  assert.deepEqual(await lit(), { weights: [], scaled: [], weight: [21], bytes: [7], scales: [0, 1], byte: [] });
  assert.equal(v.q[21], (v.bytes[7] >> 4) - 8, 'q = high nibble − 8');
  // Q5_0 {d, qh[4], qs[16]}: element 20's fifth bit is bit 20 of qh (byte 4), its low four in qs[4] (byte 10)
  v = await showBlock(page, { source: 'example', type: 'Q5_0', row: 1, block: 2 });
  await page.click('.bv-idx[data-elem="20"]');
  assert.deepEqual((await lit()).bytes, [4, 10]);
  assert.equal(v.q[20], ((v.bytes[10] >> 4) | (((v.bytes[4] >> 4) & 1) << 4)) - 16);
  // Q4_K {d, dmin, scales[12], qs[128]}: element 40 (page 2) in the high nibble of qs[8] (byte 24);
  // sub-block 1's 6-bit scale and min in bytes 5 and 9; d and dmin in bytes 0-3
  await showBlock(page, { source: 'example', type: 'Q4_K', row: 0, block: 0 });
  await page.focus('#bv-view');
  await page.keyboard.press('ArrowRight');
  await waitBlock(page, { type: 'Q4_K', row: 0, block: 0, page: 1 });
  await page.click('.bv-idx[data-elem="40"]');
  assert.deepEqual(await lit(), { weights: [], scaled: [], weight: [40], bytes: [24], scales: [0, 1, 2, 3, 5, 9], byte: [] });
  assert.match(await page.textContent('#bv-explain'), /^Element 40 \(column 40\): byte 24 bits 4–7 \(qs\) = [01]{4} → q = \d+\. d·sc = .* dmin·m = .*: .* − .* = /);
  await page.click('.bv-byte[data-byte="5"]');  // sub-block 1's scale: its 32 weights (the page's)
  assert.deepEqual((await lit()).scaled, Array.from({ length: 32 }, (_, i) => 32 + i));
  await page.keyboard.press('ArrowRight');  // with a byte focused, arrows move along the bytes
  assert.deepEqual((await lit()).byte, [6]);
  // keys: pages of 32, then the next block, on into the next row; back to the last page
  await page.focus('#bv-view');
  for (let p = 2; p < 8; p++) {
    await page.keyboard.press('ArrowRight');
    await waitBlock(page, { row: 0, block: 0, page: p });
  }
  const steps = [['ArrowRight', 0, 1, 0], ['PageDown', 1, 0, 0], ['ArrowLeft', 0, 1, 7], ['ArrowDown', 1, 1, 0],
    ['PageUp', 1, 0, 0], ['End', 1, 1, 0], ['Home', 1, 0, 0], ['ArrowUp', 0, 0, 0]];
  for (const [key, row, block, p] of steps) {
    await page.keyboard.press(key);
    await waitBlock(page, { row, block, page: p });
  }
  // every type the core lays open has a built-in example the view draws
  const types = await page.$$eval('#bv-type option', (o) => o.map((e) => e.value));
  for (const t of ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K', 'Q8_per_channel', 'Q4_per_group_64'])
    assert.ok(types.includes(t), `${t} in ${types}`);
  for (const t of types) {
    v = await showBlock(page, { source: 'example', type: t, row: 1, block: 1 });
    assert.ok(v.bytes.length > 0 && Object.values(v.deq).every(Number.isFinite), t);
    Object.keys(v.err).forEach((i) => assert.equal(v.err[i], Math.fround(Math.abs(Math.fround(v.w[i] - v.deq[i]))), `${t} error ${i}`));
  }
  await page.locator('#blocks').screenshot({ path: path.join(outDir, 'blocks.png') });
  assert.deepEqual(errors, []);
  await context.close();
});

test('block view presentation at 1024×768: large type, the arithmetic beside the grid, keys, contrast (axe) in light and dark', async () => {
  for (const colorScheme of ['light', 'dark']) {
    const { context, page, errors } = await harness.openPage(session.browser, session.url, { viewport: { width: 1024, height: 768 } });
    await page.emulateMedia({ colorScheme });
    await waitBlock(page, { source: 'example' });
    await showBlock(page, { source: 'example', type: 'Q6_K', row: 0, block: 0 });
    await page.click('.bv-byte[data-byte="193"]');
    await axeCheck(page, `${colorScheme}, the page with the block view`);
    await page.click('#bv-present');
    assert.equal(await page.getAttribute('#bv-present', 'aria-pressed'), 'true');
    await page.click('.bv-idx[data-elem="3"]');
    const m = await page.evaluate(() => {
      const r = (sel) => document.querySelector(sel).getBoundingClientRect();
      const font = (sel) => parseFloat(getComputedStyle(document.querySelector(sel)).fontSize);
      return { value: font('#bv-grid td.bv-deq'), byte: font('.bv-byte'), explain: font('#bv-explain'), grid: r('#bv-grid').toJSON(),
        side: r('.bv-side').toJSON(), bytes: r('#bv-bytes').toJSON(), shown: document.querySelectorAll('.bv-idx').length,
        scrollW: document.scrollingElement.scrollWidth, scrollH: document.scrollingElement.scrollHeight };
    });
    assert.ok(m.value >= 20 && m.byte >= 20, `values ${m.value} px, bytes ${m.byte} px`);
    assert.ok(m.explain >= 16, `explanation ${m.explain} px`);
    assert.equal(m.shown, 8, 'a page of 8 weights fills the screen');
    assert.ok(m.side.left >= m.grid.right - 1 && m.side.top < m.grid.bottom, `the explanation beside the grid: ${JSON.stringify(m)}`);
    assert.ok(m.grid.bottom <= 768 && m.bytes.top >= 0 && m.side.right <= 1024, `all on one screen: ${JSON.stringify(m)}`);
    assert.ok(m.scrollW <= 1024 && m.scrollH <= 768, `no scrolling: ${m.scrollW}×${m.scrollH}`);
    await axeCheck(page, `${colorScheme}, presenting`);
    await page.click('.bv-byte[data-byte="130"]');
    assert.deepEqual(await page.$$eval('.bv-idx[data-hl]', (e) => e.map((x) => Number(x.dataset.elem))), [2],
      'qh[2] holds the high bits of weights 2, 34, 66, 98: weight 2 is on the page');
    await page.screenshot({ path: path.join(outDir, `blocks-present-${colorScheme}.png`) });
    await page.focus('#bv-view');
    await page.keyboard.press('PageDown');
    await waitBlock(page, { row: 0, block: 1, page: 0 });
    await page.keyboard.press('Escape');
    assert.equal(await page.evaluate(() => document.body.classList.contains('presenting')), false);
    assert.deepEqual(errors, []);
    await context.close();
  }
});
