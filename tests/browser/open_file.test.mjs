// Opening existing files in the page, in Debian's Chromium: a GGUF this test builds byte by byte
// from the spec (several types, a K-quant, a type the project cannot decode (Q8_1), a 5000-token
// vocabulary), a GGUF-lite and a LEAP file: what the page shows equals what readers written
// here from the spec read, and what the CLI's --inspect --json says. A 40 GB sparse GGUF opens by
// its header only. Verify of an opened file against the loaded checkpoint passes and fails (a
// corrupted byte) as the CLI's does, with progress k of N, one-based, to the end; Cancel stops it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import * as harness from './harness.mjs';
import { outDir, waitState } from './harness.mjs';
import { readGguf } from './gguf_read.mjs';
import { execFileSync } from 'node:child_process';
import { generate, root, runNative, tempDir } from '../node/helpers.mjs';

const work = tempDir('openfile');
const session = harness.useBrowser(work);
const openPage = () => harness.openPage(session.browser, session.url);
const stateOf = (page) => page.evaluate(() => document.body.dataset.state);

// ggml's type traits (ggml.c type_traits: blck_size, type_size) for the types used here.
const GGML = { F32: [0, 1, 4], F16: [1, 1, 2], Q8_0: [8, 32, 34], Q4_K: [12, 256, 144], Q6_K: [14, 256, 210], Q8_1: [9, 32, 36],
  IQ2_XXS: [16, 256, 66] };
const typeName = (id) => Object.entries(GGML).find(([, [i]]) => i === id)[0];
const nbytes = (type, dims) => dims.reduce((a, b) => a * b, 1) / GGML[type][1] * GGML[type][2];

// A GGUF v3 file as gguf.cpp lays it out: kv pairs, tensor infos, data aligned to 32. Tensor
// data are pseudo-random bytes (inspect never reads them); `dataBytes` false writes only the
// header and leaves the rest a hole (truncate).
function buildGguf(file, { kv, tensors, dataBytes = true }) {
  const parts = [];
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
  const scalar = { 4: u32, 6: (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); parts.push(b); }, 8: str,
    5: (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); }, 7: (v) => parts.push(Buffer.from([v ? 1 : 0])) };
  parts.push(Buffer.from('GGUF'));
  u32(3);
  u64(tensors.length);
  u64(kv.length);
  for (const [key, type, v, elem] of kv) {
    str(key);
    u32(type);
    if (type === 9) { u32(elem); u64(v.length); for (const x of v) scalar[elem](x); } else scalar[type](v);
  }
  let off = 0;
  const placed = [];
  for (const t of tensors) {
    str(t.name);
    u32(t.dims.length);
    for (const d of t.dims) u64(d);
    u32(GGML[t.type][0]);
    u64(off);
    placed.push({ ...t, offset: off, bytes: nbytes(t.type, t.dims) });
    off += Math.ceil(nbytes(t.type, t.dims) / 32) * 32;
  }
  let head = Buffer.concat(parts);
  head = Buffer.concat([head, Buffer.alloc(Math.ceil(head.length / 32) * 32 - head.length)]);
  const total = head.length + off;
  if (dataBytes) {
    const data = Buffer.alloc(off);
    let x = 12345;
    for (let i = 0; i < off; i++) { x = (x * 1103515245 + 12345) >>> 0; data[i] = x >>> 24; }
    fs.writeFileSync(file, Buffer.concat([head, data]));
  } else {
    fs.writeFileSync(file, head);
    fs.truncateSync(file, total);  // a hole: no disk blocks, reads as zeros
  }
  return { total, headerBytes: head.length, placed };
}

// A vocabulary of n tokens, as tokenizer.ggml.* keys.
const vocabKv = (n) => [
  ['tokenizer.ggml.model', 8, 'llama'],
  ['tokenizer.ggml.tokens', 9, Array.from({ length: n }, (_, i) => (i < 3 ? ['<unk>', '<s>', '</s>'][i] : `tok${i}`)), 8],
  ['tokenizer.ggml.scores', 9, Array.from({ length: n }, (_, i) => -i / 2), 6],
  ['tokenizer.ggml.token_type', 9, Array.from({ length: n }, (_, i) => (i < 3 ? 3 : 1)), 5],
];

// GGUF-lite, from SPEC.md: header, metadata lines, descriptors (PyTorch dims), data.
const LITE_TYPES = { 0: 'F32', 1: 'F16', 2: 'Q8_per_channel', 3: 'Q4_per_group_64' };
function readGgufLite(buf) {
  assert.equal(buf.readUInt32LE(0), 0x474C4654, 'GGUF-lite magic');
  const n = buf.readUInt32LE(8), metaLen = buf.readUInt32LE(12);
  let p = 16 + metaLen;
  const metadata = buf.toString('utf8', 16, p);
  const tensors = [];
  for (let i = 0; i < n; i++) {
    const len = buf.readUInt16LE(p); p += 2;
    const name = buf.toString('utf8', p, p + len); p += len;
    const nd = buf[p++];
    const shape = [];
    for (let d = 0; d < nd; d++) { shape.push(buf.readUInt32LE(p)); p += 4; }
    const code = buf[p++];
    const offset = Number(buf.readBigUInt64LE(p)); p += 8;
    const numel = shape.reduce((a, b) => a * b, 1), out = shape[0];
    const bytes = { 0: numel * 4, 1: numel * 2, 2: out * 2 + numel, 3: (numel / 64) * 2 + numel / 2 }[code];
    tensors.push({ name, dtype: LITE_TYPES[code], shape, offset, bytes });
  }
  for (const t of tensors) t.offset += p;  // offsets count from the data section
  return { metadata, tensors, metadataBytes: metaLen, descriptorBytes: p - 16 - metaLen };
}

// LEAP, from SPEC.md: the 256-byte header, then the weights grouped by kind.
function readLeap(buf) {
  assert.equal(buf.readUInt32LE(0), 0x616B3432, 'LEAP magic');
  const version = buf.readInt32LE(4);
  const [dim, hidden, layers, heads, kvHeads, vocabSigned] = [8, 12, 16, 20, 24, 28].map((o) => buf.readInt32LE(o));
  const vocab = Math.abs(vocabSigned), shared = buf[0x24] === 1, gs = version === 2 ? buf.readInt32LE(0x25) : 0;
  const kvDim = (dim / heads) * kvHeads;
  const w = [];
  const per = (name, shape) => { for (let l = 0; l < layers; l++) w.push([`layers.${l}.${name}`, shape, l === -1]); };
  per('attention_norm', [dim]); per('ffn_norm', [dim]);
  w.push(['norm', [dim]], ['tok_embeddings', [vocab, dim]]);
  per('wq', [dim, dim]); per('wk', [kvDim, dim]); per('wv', [kvDim, dim]); per('wo', [dim, dim]);
  per('w1', [hidden, dim]); per('w2', [dim, hidden]); per('w3', [hidden, dim]);
  if (!shared) w.push(['output', [vocab, dim]]);
  let offset = 256;
  return w.map(([name, shape]) => {
    const numel = shape.reduce((a, b) => a * b, 1);
    const int8 = version === 2 && shape.length === 2;
    const bytes = int8 ? numel + (numel / gs) * 4 : numel * 4;
    const t = { name, dtype: int8 ? 'INT8' : 'F32', shape, offset, bytes };
    offset += bytes;
    return t;
  });
}

// What the page shows of the opened file: the core's description and the tables drawn from it.
async function openInPage(page, file) {
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.setInputFiles('#open-input', file);
  await waitState(page, ['opened', 'error'], 120000);
  assert.equal(await stateOf(page), 'opened', await page.textContent('#error'));
  const info = await page.evaluate(() => window.__leapconv.opened.info);
  const rows = await page.$$eval('#opened-tensors tbody tr', (trs) => trs.map((r) => [...r.cells].map((c) => c.textContent)));
  const byDtype = await page.$$eval('#breakdown tr[data-dtype]', (trs) => Object.fromEntries(trs.map((r) => [r.dataset.dtype, Number(r.cells[1].textContent)])));
  return { info, rows, byDtype };
}
const bySum = (tensors) => {
  const m = {};
  for (const t of tensors) { m[t.dtype] ??= { tensors: 0, bytes: 0 }; m[t.dtype].tensors++; m[t.dtype].bytes += t.bytes; }
  return m;
};
const coreBySum = (b) => Object.fromEntries(b.by_dtype.map((d) => [d.dtype, { tensors: d.tensors, bytes: d.values_bytes + d.scales_bytes }]));
const cliInspect = (file) => {
  const r = runNative(['--inspect', file, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const j = JSON.parse(r.stdout);
  delete j.file;
  return j;
};
const withoutRead = (info) => { const { read, ...rest } = info; return rest; };
const fmt = (n) => n.toLocaleString('en');

test('a GGUF built here from the spec opens: metadata (the vocabulary summarized), tensor table and breakdown equal an independent reader\'s and the CLI\'s', async () => {
  const file = path.join(work, 'handmade.gguf');
  const tensors = [
    { name: 'token_embd.weight', type: 'Q4_K', dims: [256, 40] },
    { name: 'blk.0.attn_norm.weight', type: 'F32', dims: [256] },
    { name: 'blk.0.attn_q.weight', type: 'Q8_0', dims: [256, 256] },
    { name: 'blk.0.ffn_down.weight', type: 'Q6_K', dims: [512, 256] },
    { name: 'blk.0.ffn_up.weight', type: 'Q8_1', dims: [256, 512] },
    { name: 'blk.0.attn_k.weight', type: 'F16', dims: [256, 64] },
    { name: 'output.weight', type: 'Q4_K', dims: [256, 40] },
  ];
  const kv = [['general.architecture', 8, 'llama'], ['general.name', 8, 'hand-built'], ['llama.block_count', 4, 1],
    ['llama.rope.freq_base', 6, 10000], ['general.flag', 7, true], ...vocabKv(5000)];
  const built = buildGguf(file, { kv, tensors });
  const bytes = fs.readFileSync(file);
  const ref = readGguf(bytes);
  const nameOf = (type) => (GGML[type] ? type : typeName(Number(type.slice(5))));  // (types gguf_read.mjs does not name)
  const expect = [...ref.tensors].map(([name, t]) => ({ name, dtype: nameOf(t.type), shape: [...t.dims].reverse(),
    offset: ref.dataStart + t.offset, bytes: nbytes(nameOf(t.type), t.dims) }));

  const { page, context, errors } = await openPage();
  const { info, rows, byDtype } = await openInPage(page, file);
  assert.equal(info.format, 'gguf');
  // the tensor table: the reader's, in file order; Q8_1 named and marked undecodable
  assert.deepEqual(info.tensors.map(({ decodable, ...t }) => t), expect);
  assert.deepEqual(info.tensors.map((t) => t.decodable), expect.map((t) => t.dtype !== 'Q8_1'));
  assert.deepEqual(rows.map((r) => [r[0], r[1], r[2], r[3]]), expect.map((t) => [t.name,
    t.dtype === 'Q8_1' ? 'Q8_1 (cannot decode)' : t.dtype, `[${t.shape.join(', ')}]`, fmt(t.offset)]));
  // metadata: every key with the reader's value; arrays as their count and first 8 elements
  assert.deepEqual(info.keys.map((k) => k.key), [...ref.kv.keys()]);
  for (const k of info.keys) {
    const r = ref.kv.get(k.key);
    assert.equal(k.bytes, r.bytes, k.key);
    if (Array.isArray(r.value)) {
      assert.equal(k.count, r.value.length, k.key);
      assert.deepEqual(k.first, r.value.slice(0, 8), k.key);
    } else {
      assert.deepEqual(k.value, r.value, k.key);
    }
  }
  const tokensRow = await page.textContent('#opened-facts tr[data-key="tokenizer.ggml.tokens"] td');
  assert.equal(tokensRow, '5,000 × str: "<unk>", "<s>", "</s>", "tok3", "tok4", "tok5", "tok6", "tok7", …');
  assert.ok(!(await page.textContent('#opened-facts')).includes('tok100'), 'the vocabulary is summarized, not listed');
  // the breakdown: bytes by type as the reader sums them; the rest is header, keys, infos, padding
  const b = info.breakdown;
  assert.deepEqual(coreBySum(b), bySum(expect));
  const kvBytes = [...ref.kv.values()].reduce((a, k) => a + k.bytes, 0);
  assert.equal(b.header_bytes, ref.headerBytes);
  assert.equal(b.metadata_bytes + b.vocabulary_bytes, kvBytes);
  assert.equal(b.descriptor_bytes, ref.infoBytes);
  assert.equal(b.total_bytes, built.total);
  assert.equal(b.total_bytes, bytes.length);
  assert.deepEqual(byDtype, Object.fromEntries(Object.entries(bySum(expect)).map(([d, v]) => [d, v.tensors])), 'the breakdown drawn');
  // the CLI's --inspect reads the same file the same way
  assert.deepEqual(withoutRead(info), cliInspect(file));
  // opened from its header only
  assert.ok(info.read.bytes < built.headerBytes + 65536, `read ${info.read.bytes} bytes`);
  assert.match(await page.textContent('#result-text'), /^handmade\.gguf: gguf, 7 tensors, .*1 tensor is of types this page cannot decode \(Q8_1\)/);
  // the hook a block view attaches to: the opened file and the tensor
  const hook = await page.evaluate(() => new Promise((resolve) => {
    document.addEventListener('leapconv:opened-tensor', (e) => resolve({ file: e.detail.file.name, size: e.detail.file.size,
      name: e.detail.name, dtype: e.detail.tensor.dtype }), { once: true });
    document.querySelector('#opened-tensors tr[data-tensor="blk.0.ffn_down.weight"]').click();
  }));
  assert.deepEqual(hook, { file: 'handmade.gguf', size: bytes.length, name: 'blk.0.ffn_down.weight', dtype: 'Q6_K' });
  // the block view takes it: the bytes it shows are the file's, where it says it read them
  await page.waitForFunction(() => {
    const v = document.getElementById('bv-view').dataset;
    return v.state === 'error' || (v.state === 'ready' && v.source === 'opened' && v.tensor === 'blk.0.ffn_down.weight');
  }, null, { timeout: 30000 });
  const shown = await page.evaluate(() => {
    const v = document.getElementById('bv-view').dataset;
    return { state: v.state, status: document.getElementById('bv-status').textContent, pieces: v.pieces ? JSON.parse(v.pieces) : [],
      bytes: [...document.querySelectorAll('#bv-bytes .bv-byte')].sort((a, b) => a.dataset.byte - b.dataset.byte).map((e) => Number(e.dataset.value)) };
  });
  assert.equal(shown.state, 'ready', shown.status);
  const q6 = expect.find((t) => t.name === 'blk.0.ffn_down.weight');
  assert.ok(shown.pieces.length > 0 && shown.pieces.every((p) => p.offset >= q6.offset && p.offset + p.size <= q6.offset + q6.bytes), JSON.stringify(shown.pieces));
  assert.deepEqual(shown.bytes, shown.pieces.flatMap((p) => [...bytes.subarray(p.offset, p.offset + p.size)]));
  // and from the keyboard: the table is one Tab stop, arrow keys move the selection
  const next = page.evaluate(() => new Promise((resolve) => {
    document.addEventListener('leapconv:opened-tensor', (e) => resolve(e.detail.name), { once: true });
  }));
  await page.focus('#opened-tensors table');
  await page.keyboard.press('ArrowDown');
  assert.equal(await next, 'blk.0.ffn_up.weight');
  // no serious or critical axe-core violation on the opened file's view
  await page.evaluate(fs.readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8'));
  const axe = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')}`));
  assert.deepEqual(axe, []);
  // without a checkpoint there is nothing to verify against
  assert.equal(await page.isDisabled('#verify'), true);
  await page.screenshot({ path: path.join(outDir, 'open-gguf.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

// llama.cpp's own iq2xxs_grid (ggml-common.h, checked out of node-llama-cpp's bundle by the
// build): grid point k's 8 coordinates, a byte each.
function iq2xxsGrid() {
  const src = fs.readFileSync(path.join(root, 'build', 'native', 'llama.cpp-ref', 'ggml', 'src', 'ggml-common.h'), 'utf8');
  const body = src.slice(src.indexOf('GGML_TABLE_BEGIN(uint64_t, iq2xxs_grid, 256)'));
  const words = body.slice(body.indexOf(')') + 1, body.indexOf('GGML_TABLE_END')).match(/0x[0-9a-f]{16}/g);
  assert.equal(words.length, 256);
  return words.map((w) => Array.from({ length: 8 }, (_, j) => Number((BigInt(w) >> BigInt(8 * j)) & 0xffn)));
}

test('block view of an opened IQ2_XXS tensor: each grid index, the grid point it picks (llama.cpp\'s table) and the values (ggml\'s dequantize)', async () => {
  const file = path.join(work, 'iq2xxs.gguf');
  const built = buildGguf(file, { kv: [['general.architecture', 8, 'llama']],
    tensors: [{ name: 'blk.0.ffn_up.weight', type: 'IQ2_XXS', dims: [512, 2] }, { name: 'blk.0.attn_norm.weight', type: 'F32', dims: [512] }] });
  // every block's f16 d a small normal number (random bytes could make it Inf or NaN)
  const bytes = fs.readFileSync(file);
  const at = built.headerBytes + built.placed[0].offset;
  for (let k = 0; k < 4; k++) { bytes[at + 66 * k] = 0x00; bytes[at + 66 * k + 1] = 0x2c; }
  fs.writeFileSync(file, bytes);
  const grid = iq2xxsGrid();
  let blkLast = null;

  const { page, context, errors } = await openPage();
  await openInPage(page, file);
  // a click on a row brings the block view into sight
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.click('#opened-tensors tr[data-tensor="blk.0.ffn_up.weight"]');
  const inSight = () => page.evaluate(() => { const r = document.getElementById('blocks').getBoundingClientRect(); return r.top >= -1 && r.top < innerHeight / 2; });
  assert.ok(await inSight(), 'the block view is in sight');
  for (const [row, block] of [[0, 0], [1, 1]]) {
    if (row || block) {  // row 2, block 2: the view's controls
      await page.fill('#bv-row', String(row + 1));
      await page.$eval('#bv-row', (e) => e.dispatchEvent(new Event('change')));
      await page.fill('#bv-block', String(block + 1));
      await page.$eval('#bv-block', (e) => e.dispatchEvent(new Event('change')));
    }
    await page.waitForFunction(([r, b]) => {
      const v = document.getElementById('bv-view').dataset;
      return v.state === 'error' || (v.state === 'ready' && v.tensor === 'blk.0.ffn_up.weight' && v.row === String(r) && v.block === String(b));
    }, [row, block], { timeout: 30000 });
    assert.equal(await page.evaluate(() => document.getElementById('bv-view').dataset.state), 'ready', await page.textContent('#bv-status'));
    const offset = at + 66 * (2 * row + block);
    const want = JSON.parse(execFileSync(path.join(root, 'build', 'native', 'ggml_dequant'), [file, String(offset), '16', '1'], { encoding: 'utf8' }));
    const blk = bytes.subarray(offset, offset + 66);
    blkLast = blk;
    // the first page: 32 weights, 4 grid indices (ggml's block_iq2_xxs: d, then per 32 values 4 index bytes, then signs and scale)
    const shown = await page.$$eval('#bv-subs li', (lis) => lis.map((li) => ({ group: Number(li.dataset.group), index: Number(li.dataset.gridIndex),
      grid: li.dataset.grid.split(' ').map(Number), values: li.dataset.values.split(' ').map(Number), text: li.textContent })));
    assert.deepEqual(shown.map((g) => g.group), [0, 1, 2, 3]);
    const q = await page.$$eval('#bv-grid td.bv-q', (c) => c.map((e) => Number(e.dataset.value)));
    for (const g of shown) {
      assert.equal(g.index, blk[2 + g.group], `group ${g.group}: the index byte`);
      assert.deepEqual(g.grid, grid[g.index], `group ${g.group}: grid point ${g.index} of llama.cpp's iq2xxs_grid`);
      assert.deepEqual(g.values.map(Math.fround), want.slice(8 * g.group, 8 * g.group + 8).map(Math.fround), `group ${g.group}: ggml's values`);
      assert.match(g.text, new RegExp(`^grid index ${g.group}: values ${8 * g.group}–${8 * g.group + 7}: index ${g.index} \\(8 bits\\) → grid point \\(${grid[g.index].join(', ')}\\), signs [+−]{8}, scale `));
      // each weight's q: its coordinate of the point, with the sign its value has
      for (let j = 0; j < 8; j++) assert.equal(q[8 * g.group + j], Math.sign(want[8 * g.group + j]) * grid[g.index][j]);
    }
    const deq = await page.$$eval('#bv-grid td.bv-deq', (c) => c.map((e) => Number(e.dataset.value)));
    assert.deepEqual(deq.map(Math.fround), want.slice(0, 32).map(Math.fround));
  }
  // a byte of an index lights its 8 weights; no serious or critical axe-core violation
  await page.click('#bv-bytes .bv-byte[data-byte="2"]');
  assert.deepEqual(await page.$$eval('#bv-grid td.bv-deq[data-hl]', (c) => c.map((e) => Number(e.dataset.elem))), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(await page.textContent('#bv-explain'), `Byte 2 (qs, per 32 values: 4 grid indices, then 4 × 7 sign bits and a 4-bit scale) = 0x${blkLast[2].toString(16).padStart(2, '0').toUpperCase()} = ${blkLast[2].toString(2).padStart(8, '0')}: bits 0–7 → grid index 0 (weights 0–7).`);
  await page.evaluate(fs.readFileSync(path.join(root, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8'));
  const axe = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join('; ')}`));
  assert.deepEqual(axe, []);
  await page.locator('#blocks').screenshot({ path: path.join(outDir, 'block-iq2_xxs.png') });
  // an unquantized tensor: said plainly, under its own name, and no grid of the previous one
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.click('#opened-tensors tr[data-tensor="blk.0.attn_norm.weight"]');
  await page.waitForFunction(() => document.getElementById('bv-view').dataset.state === 'error');
  assert.equal(await page.textContent('#bv-status'), 'tensor \'blk.0.attn_norm.weight\': F32 is not quantized: each value is a plain ' +
    '32-bit float, stored as it is, with no blocks or scales to lay open. Pick a quantized tensor (Q8_0, Q4_K, ...)');
  assert.equal(await page.textContent('#bv-where'), 'F32 · blk.0.attn_norm.weight');
  assert.ok(await page.isHidden('#bv-view .bv-body'));
  assert.ok(await inSight());
  await page.click('#opened-tensors tr[data-tensor="blk.0.ffn_up.weight"]');
  await page.waitForFunction(() => document.getElementById('bv-view').dataset.state === 'ready');
  assert.ok(await page.isVisible('#bv-view .bv-body'));
  assert.ok(await page.isHidden('#bv-status'));
  assert.deepEqual(errors, []);
  await context.close();
});

test('a 40 GB GGUF (a real header, then a hole) opens by its header only, as fast as a small one', async () => {
  const file = path.join(work, 'huge.gguf');
  const tensors = Array.from({ length: 10 }, (_, i) => ({ name: `blk.${i}.ffn_up.weight`, type: 'Q4_K', dims: [65536, 108544] }));
  const built = buildGguf(file, { kv: [['general.architecture', 8, 'llama'], ...vocabKv(32000)], tensors, dataBytes: false });
  assert.ok(built.total > 40e9, String(built.total));
  const { page, context } = await openPage();
  const t0 = Date.now();
  const { info } = await openInPage(page, file);
  const ms = Date.now() - t0;
  assert.equal(info.read.size, built.total);
  assert.equal(info.breakdown.total_bytes, built.total);
  assert.equal(info.tensors.length, 10);
  // what the page read: at most the header's bytes (in 64 KiB windows; the unshown vocabulary
  // strings are skipped by their lengths), not the 40 GB behind it
  assert.ok(info.read.bytes > 0 && info.read.bytes < built.headerBytes + 65536,
    `read ${info.read.bytes} bytes of a ${built.headerBytes}-byte header`);
  console.log(`# 40 GB GGUF: opened in ${ms} ms (core ${(info.read.seconds * 1000).toFixed(0)} ms), ` +
    `${info.read.bytes} bytes read in ${info.read.reads} slices, header ${built.headerBytes} bytes, file ${built.total} bytes`);
  assert.deepEqual(withoutRead(info), cliInspect(file));
  await context.close();
});

test('a GGUF-lite and a LEAP file open: their tensor tables and breakdowns equal readers written from the spec and the CLI\'s', async () => {
  const ck = generate(path.join(work, 'ck'), ['--dim', '128', '--hidden', '256', '--layers', '2', '--vocab', '256']);
  const lite = path.join(work, 'm.gguf-lite'), leap = path.join(work, 'm.bin');
  assert.equal(runNative([lite, '--model', ck, '--scheme', 'q4', '--quiet']).code, 0);
  assert.equal(runNative([leap, '--meta-llama', ck, '--version', '2', '--quiet']).code, 0);
  const { page, context } = await openPage();

  const l = await openInPage(page, lite);
  const lr = readGgufLite(fs.readFileSync(lite));
  assert.equal(l.info.format, 'gguf-lite');
  assert.deepEqual(l.info.tensors.map(({ decodable, ...t }) => t), lr.tensors);
  assert.equal(l.info.metadata, lr.metadata);
  assert.equal(await page.textContent('#opened-metadata'), lr.metadata);
  assert.deepEqual(coreBySum(l.info.breakdown), bySum(lr.tensors));
  assert.equal(l.info.breakdown.metadata_bytes, lr.metadataBytes);
  assert.equal(l.info.breakdown.descriptor_bytes, lr.descriptorBytes);
  assert.equal(l.rows.length, lr.tensors.length);
  assert.deepEqual(withoutRead(l.info), cliInspect(lite));

  const b = await openInPage(page, leap);
  const br = readLeap(fs.readFileSync(leap));
  assert.equal(b.info.format, 'leap-v2');
  assert.deepEqual(b.info.tensors.map(({ decodable, ...t }) => t), br);
  assert.deepEqual(coreBySum(b.info.breakdown), bySum(br));
  assert.equal(b.info.breakdown.total_bytes, fs.statSync(leap).size);
  assert.equal(b.rows.length, br.length);
  assert.deepEqual(withoutRead(b.info), cliInspect(leap));
  // one thing at a time: the GGUF-lite file's rows are gone
  assert.ok(!(await page.textContent('#opened-tensors')).includes('model.layers.0'), 'the previous file\'s table is cleared');
  await context.close();
});

// The CLI's verdict and numbers for a file, for the page to equal.
function cliVerify(file, ck) {
  const r = runNative(['--verify', file, '--model', ck, '--json', '--verify-params', String(64 * 2 ** 20)]);
  assert.ok(r.code === 0 || r.code === 1, r.stderr);
  return JSON.parse(r.stdout);
}
const numbers = (rep) => ({ ok: rep.ok, tensors: rep.tensors.map((t) => [t.name, t.max_abs_vs_fake_quant, t.max_abs_vs_source]),
  layers: rep.forward.layers.map((l) => [l.name, l.max_abs_file_vs_reference, l.max_abs_quantized_vs_source]) });

async function verifyInPage(page) {
  await page.click('#verify');
  await page.waitForFunction(() => ['pass', 'fail', 'error', 'cancelled'].includes(document.body.dataset.verify), null, { timeout: 180000 });
  return page.evaluate(() => ({ verdict: document.body.dataset.verify, report: window.__leapconv.verify,
    progress: window.__leapconv.verifyProgress, state: document.body.dataset.state }));
}
function assertProgress(progress, nTensors) {
  assert.ok(progress.length > 0, 'progress reported');
  const n = progress[0].n_steps;
  assert.equal(n, nTensors + 3, 'a step per tensor, then the three runs of the forward check');
  let prev = 0;
  for (const p of progress) {
    assert.equal(p.n_steps, n);
    assert.ok(p.step > prev && p.step >= 1 && p.step <= n, `monotone, one-based: ${JSON.stringify(progress)}`);
    prev = p.step;
  }
  assert.equal(prev, n, 'reaches the end');
}

test('verify of an opened GGUF against the loaded checkpoint passes, and fails on a corrupted byte, as the CLI\'s does; progress k of N to the end', async () => {
  const ck = path.join(work, 'ck');
  if (!fs.existsSync(ck)) generate(ck, ['--dim', '128', '--hidden', '256', '--layers', '2', '--vocab', '256']);
  const good = path.join(work, 'v.gguf');
  assert.equal(runNative([good, '--model', ck, '--type', 'Q4_K_M', '--no-vocab', '--quiet']).code, 0);
  const { page, context, errors } = await openPage();
  // the file first: nothing to verify against; then its checkpoint: the file stays shown, Verify is on
  const { info } = await openInPage(page, good);
  assert.equal(await page.isDisabled('#verify'), true);
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.setInputFiles('#folder-input', ck);
  await waitState(page, ['ready', 'error']);
  assert.equal(await stateOf(page), 'ready', await page.textContent('#error'));
  assert.ok(await page.isVisible('#opened'), 'the opened file stays when a checkpoint is loaded');
  assert.match(await page.textContent('#result-text'), /^v\.gguf: gguf, /);
  assert.ok(await page.$('#breakdown tr[data-vs="source"]'), 'its breakdown against the checkpoint now');
  assert.equal(await page.isDisabled('#verify'), false);
  assert.equal(await page.textContent('#verify'), 'Verify against the checkpoint');
  const pass = await verifyInPage(page);
  assert.equal(pass.verdict, 'pass', await page.textContent('#verify-status'));
  assert.equal(pass.state, 'opened');
  assert.deepEqual(numbers(pass.report), numbers(cliVerify(good, ck)));
  assertProgress(pass.progress, info.tensors.length);

  // one byte of blk.0.attn_q.weight's data changed
  const bad = path.join(work, 'v-bad.gguf');
  const bytes = fs.readFileSync(good);
  const q = info.tensors.find((t) => t.name === 'blk.0.attn_q.weight');
  bytes[q.offset + Math.floor(q.bytes / 2)] ^= 0x5a;
  fs.writeFileSync(bad, bytes);
  await openInPage(page, bad);
  assert.equal(await page.isHidden('#verify-table'), true, 'the previous file\'s verify is cleared');
  const fail = await verifyInPage(page);
  const cli = cliVerify(bad, ck);
  assert.equal(cli.ok, false);
  assert.equal(fail.verdict, 'fail');
  assert.deepEqual(numbers(fail.report), numbers(cli));
  assert.ok(fail.report.tensors.find((t) => t.name === 'blk.0.attn_q.weight').max_abs_vs_fake_quant > 0);
  assertProgress(fail.progress, info.tensors.length);
  assert.match(await page.textContent('#verify-status'), /^FAIL/);
  // a conversion: the result describes the written file, the opened one is gone (this
  // checkpoint has no tokenizer, so GGUF is refused: GGUF-lite, chosen)
  await page.selectOption('#format', 'gguf-lite-q8');
  await page.waitForFunction(() => window.__leapconv.planPending === 0 && !document.getElementById('convert').disabled);
  const download = page.waitForEvent('download', { timeout: 120000 });
  await page.click('#convert');
  await download;
  await waitState(page, ['done', 'error'], 120000);
  assert.equal(await stateOf(page), 'done', await page.textContent('#error'));
  assert.ok(await page.isHidden('#opened'));
  assert.equal(await page.evaluate(() => window.__leapconv.opened), null);
  assert.ok(await page.isHidden('#verify-table'), 'the opened file\'s verify is gone');
  assert.equal(await page.textContent('#verify'), 'Verify the written file');
  assert.deepEqual(errors, []);
  await context.close();
});

test('verify progress is a determinate bar, and Cancel stops it', async () => {
  const ck = generate(path.join(work, 'big'), ['--dim', '1024', '--hidden', '2816', '--layers', '6', '--heads', '16',
    '--kv-heads', '4', '--vocab', '8000', '--dtype', 'bf16']);
  const file = path.join(work, 'big.gguf');
  assert.equal(runNative([file, '--model', ck, '--outtype', 'Q8_0', '--no-vocab', '--quiet']).code, 0);
  const { page, context } = await openPage();
  await page.evaluate(() => { document.body.dataset.state = 'test-loading'; });
  await page.setInputFiles('#folder-input', ck);
  await waitState(page, ['ready', 'error']);
  await openInPage(page, file);
  await page.click('#verify');
  await page.waitForFunction(() => (window.__leapconv.verifyProgress || []).length > 0, null, { timeout: 120000 });
  const bar = await page.evaluate(() => {
    const b = document.getElementById('verify-progress');
    return { role: b.getAttribute('role') || b.tagName, max: b.max, value: b.value, text: b.getAttribute('aria-valuetext'), state: document.body.dataset.state };
  });
  assert.equal(bar.role, 'PROGRESS');  // the <progress> element: role progressbar
  assert.ok(bar.value >= 1 && bar.value <= bar.max, JSON.stringify(bar));
  assert.match(bar.text, /^step \d+ of \d+: /);
  assert.equal(bar.state, 'verifying');
  await page.click('#verify-cancel');
  await page.waitForFunction(() => document.body.dataset.verify === 'cancelled');
  const after = await page.evaluate(() => ({ state: document.body.dataset.state, n: window.__leapconv.verifyProgress.length,
    last: window.__leapconv.verifyProgress.at(-1) }));
  assert.equal(after.state, 'opened');
  assert.ok(after.last.step < after.last.n_steps, `cancelled before the end: ${JSON.stringify(after.last)}`);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await page.evaluate(() => window.__leapconv.verifyProgress.length), after.n, 'no progress after Cancel');
  assert.equal(await page.textContent('#verify-status'), 'Verify cancelled.');
  await context.close();
});
