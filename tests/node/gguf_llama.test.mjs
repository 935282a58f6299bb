// The real consumer: llama.cpp (npm node-llama-cpp, prebuilt) loads every GGUF type we write
// from a Llama-family checkpoint with a real tokenizer and evaluates a token sequence; its
// next-token distribution at every position must equal the project's reference forward pass
// (src/check/forward.h, run by build/native/gguf_forward) on the file's dequantized weights.
// F32: within 1e-4 in log p (an F32 KV cache, flash attention off). Quantized types: llama.cpp
// also rounds the activations (to Q8 blocks for its dot products), so the bar there is looser
// and the measured gap is printed. Also: the WebAssembly CLI writes the same bytes, tied
// classifiers, Llama 3.1's rope scaling (the rope_freqs tensor, checked against the formula of
// llama.cpp's converter computed here in float64) and clear refusals.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { referenceLogProbs, llamaCppLogProbs, convertGguf, inspectJson, writeImatrixDat } from './llama_ref.mjs';
import { root, tempDir, generate, runNative, runWasm } from './helpers.mjs';

const mistralTokenizer = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama2', 'models');
const work = tempDir('gguf-llama');
const text = 'The quick brown fox jumps over the lazy dog. Once upon a time, 42 llamas';

// A small Llama with Mistral-7B's real tokenizer (32000 tokens): vocab_size = the tokenizer's.
function checkpoint(name, extra = [], config = {}) {
  const dir = path.join(work, name);
  generate(dir, ['--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--kv-heads', '2',
    '--vocab', '32000', '--seq-len', '256', '--dtype', 'bf16', ...extra]);
  for (const f of fs.readdirSync(mistralTokenizer)) fs.copyFileSync(path.join(mistralTokenizer, f), path.join(dir, f));
  const cfgPath = path.join(dir, 'config.json');
  fs.writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(fs.readFileSync(cfgPath, 'utf8')), ...config }, null, 2));
  return dir;
}

const convert = (dir, type, args = []) => convertGguf(work, dir, type, args);
const inspect = inspectJson;

let llama;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
});
after(async () => {
  await llama?.dispose();
});

// Max |log p_llama.cpp - log p_reference| over every token with p > 1e-6, and how often the
// most likely next token is the same.
async function compare(file) {
  const { tokens, probs } = await llamaCppLogProbs(llama, file, text);
  const ref = referenceLogProbs(work, file, tokens);
  let worst = 0, top1 = 0;
  for (let t = 0; t < tokens.length; t++) {
    assert.equal(probs[t].size, ref[t].length, 'llama.cpp gives the full distribution');
    let best = -1, bestP = -1;
    for (const [tok, p] of probs[t]) {
      if (p > bestP) { bestP = p; best = tok; }
      if (p > 1e-6) worst = Math.max(worst, Math.abs(Math.log(p) - ref[t][tok]));
    }
    let refBest = 0;
    for (let v = 1; v < ref[t].length; v++) if (ref[t][v] > ref[t][refBest]) refBest = v;
    top1 += best === refBest;
  }
  return { worst, top1, positions: tokens.length, tokens };
}

const untied = checkpoint('untied');

// bar: max |Δ log p|. F16/BF16 round the weights only (llama.cpp's F16 matmul rounds the
// activations to F16 too); the block types also quantize the activations to Q8 blocks.
const bars = { F32: 1e-4, F16: 5e-3, BF16: 5e-2, Q8_0: 0.1, Q5_1: 0.1, Q5_0: 0.1, Q4_1: 0.1, Q4_0: 0.1 };
for (const [type, bar] of Object.entries(bars)) {
  test(`llama.cpp runs a ${type} GGUF as the reference forward pass predicts`, async () => {
    const file = convert(untied, type);
    const info = inspect(file);
    assert.equal(info.header.file_type, type);
    const { worst, top1, positions, tokens } = await compare(file);
    assert.ok(tokens.length >= 10 && tokens[0] === 1, `Mistral's BOS is <s> = 1: ${tokens}`);
    console.log(`# ${type}: max |Δ log p| ${worst.toExponential(2)} over ${positions} positions x 32000; top-1 agrees at ${top1}/${positions}`);
    assert.ok(worst <= bar, `${type}: max |Δ log p| ${worst} > ${bar}`);
    if (type === 'F32') assert.equal(top1, positions);
  });
}

// The K-quant presets on rows of 256 and 512 (their 256-value super-blocks, no fallback):
// llama.cpp decodes the blocks as the reference forward does (activations again in Q8 blocks).
const kCheckpoint = checkpoint('kquants', ['--dim', '256', '--hidden', '512', '--layers', '2', '--heads', '4', '--kv-heads', '2']);
for (const [type, bar] of Object.entries({ Q6_K: 0.2, Q5_K_M: 0.2, Q4_K_M: 0.2, Q3_K_M: 0.2, Q2_K: 0.3 })) {
  test(`llama.cpp runs a ${type} GGUF as the reference forward pass predicts`, async () => {
    const file = convert(kCheckpoint, type);
    const info = inspect(file);
    assert.equal(info.header.file_type, type);
    const kinds = new Set(info.tensors.map((t) => t.dtype));
    assert.ok([...kinds].some((k) => k.endsWith('_K')), `K-quant blocks written: ${[...kinds]}`);
    const { worst, top1, positions } = await compare(file);
    console.log(`# ${type} (${[...kinds].join(', ')}): max |Δ log p| ${worst.toExponential(2)} over ${positions} positions; top-1 agrees at ${top1}/${positions}`);
    assert.ok(worst <= bar, `${type}: max |Δ log p| ${worst} > ${bar}`);
  });
}

// The other llama-quantize types and presets (i-quants: non-linear levels and codebooks; ternary,
// 1- and 2-bit), with and without an importance matrix: llama.cpp decodes every block as the
// reference does.
const kImatrix = writeImatrixDat(path.join(work, 'k.imatrix.dat'), convert(kCheckpoint, 'BF16'));
for (const [type, bar, args] of [['IQ4_XS', 0.2, []], ['IQ4_NL', 0.2, []], ['IQ4_XS', 0.2, ['--imatrix', kImatrix]],
  ['Q2_K_S', 0.3, ['--imatrix', kImatrix]], ['Q4_0', 0.2, ['--imatrix', kImatrix]], ['TQ2_0', 0.3, []], ['TQ1_0', 0.3, []],
  ['Q2_0', 0.3, []], ['Q1_0', 0.3, []], ['IQ3_M', 0.3, []], ['IQ3_XXS', 0.3, ['--imatrix', kImatrix]],
  ['IQ3_XS', 0.3, ['--imatrix', kImatrix]], ['IQ2_M', 0.3, ['--imatrix', kImatrix]], ['IQ2_S', 0.3, ['--imatrix', kImatrix]],
  ['IQ2_XS', 0.3, ['--imatrix', kImatrix]], ['IQ2_XXS', 0.3, ['--imatrix', kImatrix]], ['IQ1_M', 0.3, ['--imatrix', kImatrix]],
  ['IQ1_S', 0.3, ['--imatrix', kImatrix]]]) {
  test(`llama.cpp runs a ${type} GGUF${args.length ? ' made with an importance matrix' : ''} as the reference forward pass predicts`, async () => {
    const file = convertGguf(work, kCheckpoint, type, args);
    const info = inspect(file);
    assert.equal(info.header.file_type, type);
    const kinds = new Set(info.tensors.map((t) => t.dtype));
    const { worst, top1, positions } = await compare(file);
    console.log(`# ${type}${args.length ? ' (imatrix)' : ''} (${[...kinds].join(', ')}): max |Δ log p| ${worst.toExponential(2)} over ${positions} positions; top-1 agrees at ${top1}/${positions}`);
    assert.ok(worst <= bar, `${type}: max |Δ log p| ${worst} > ${bar}`);
  });
}

test('the WebAssembly CLI writes the same GGUF bytes as the native one', () => {
  for (const [dir, type] of [[untied, 'Q8_0'], [untied, 'Q4_1'], [kCheckpoint, 'Q4_K_M'], [kCheckpoint, 'IQ4_XS'], [kCheckpoint, 'IQ3_M'], [kCheckpoint, 'TQ1_0']]) {
    const native = convert(dir, type);
    const wasmOut = path.join(work, `wasm-${type}.gguf`);
    const flag = ['F32', 'F16', 'BF16', 'Q8_0'].includes(type) ? '--outtype' : '--type';  // (as convert)
    const r = runWasm([wasmOut, '--model', dir, flag, type, '--quiet']);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.readFileSync(wasmOut).equals(fs.readFileSync(native)), `${type}: wasm and native bytes differ`);
  }
});

test('a tied classifier writes no output.weight, and llama.cpp runs it', async () => {
  const dir = checkpoint('tied', ['--tied']);
  const file = convert(dir, 'F32');
  const names = inspect(file).tensors.map((t) => t.name);
  assert.ok(names.includes('token_embd.weight') && !names.includes('output.weight'), names.join(' '));
  const { worst } = await compare(file);
  assert.ok(worst <= 1e-4, `tied F32: ${worst}`);
});

test('llama.cpp loads a split GGUF from its first part, and runs it as the single file', async () => {
  const dir = checkpoint('split');
  const single = convert(dir, 'Q8_0');
  const partsDir = path.join(work, 'split-parts');
  fs.mkdirSync(partsDir, { recursive: true });
  const r = runNative([path.join(partsDir, 'm.gguf'), '--model', dir, '--outtype', 'Q8_0', '--split-max-tensors', '7', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  const parts = fs.readdirSync(partsDir).sort();
  assert.ok(parts.length >= 3, parts.join());
  const a = await llamaCppLogProbs(llama, single, text);
  const b = await llamaCppLogProbs(llama, path.join(partsDir, parts[0]), text);
  assert.deepEqual(b.tokens, a.tokens);
  for (let t = 0; t < a.tokens.length; t++)
    for (const [tok, p] of a.probs[t]) assert.equal(b.probs[t].get(tok), p, `position ${t}, token ${tok}`);
});

// convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors, in float64 here.
function llama3Factors(theta, dim, { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: old }) {
  const out = [];
  for (let i = 0; i < dim; i += 2) {
    const wavelen = (2 * Math.PI) / (1 / theta ** (i / dim));
    if (wavelen < old / high) out.push(1);
    else if (wavelen > old / low) out.push(factor);
    else {
      const smooth = (old / wavelen - low) / (high - low);
      out.push(1 / ((1 - smooth) / factor + smooth));
    }
  }
  return out;
}

test("Llama 3.1's rope scaling becomes the rope_freqs tensor, and llama.cpp applies it as the reference does", async () => {
  // head_dim 16, theta 500000: wavelengths from 6 to ~1.7e5 positions, so with an original
  // context of 64 the three branches (1, factor, smoothed) all occur.
  const scaling = { rope_type: 'llama3', factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0,
    original_max_position_embeddings: 64 };
  const dir = checkpoint('llama31', [], { rope_scaling: scaling });
  const file = convert(dir, 'F32');
  const info = inspect(file);
  const t = info.tensors.find((x) => x.name === 'rope_freqs.weight');
  assert.ok(t, 'rope_freqs.weight is written');
  assert.equal(info.tensors[0].name, 'rope_freqs.weight', 'first, as the converter writes it');
  assert.deepEqual(t.shape, [8]);
  const bytes = fs.readFileSync(file).subarray(t.offset, t.offset + t.bytes);
  const got = Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)));
  const want = llama3Factors(500000, 16, scaling);
  assert.ok(new Set(want.map((x) => (x === 1 ? 'one' : x === 8 ? 'factor' : 'smooth'))).size === 3, 'all three branches');
  for (let i = 0; i < want.length; i++)
    assert.ok(Math.abs(got[i] - want[i]) <= 1e-6 * want[i], `factor ${i}: ${got[i]} vs ${want[i]}`);
  const { worst } = await compare(file);
  assert.ok(worst <= 1e-4, `rope-scaled F32: ${worst}`);
  // and the factors matter: the same weights without them give other probabilities
  const plain = convert(checkpoint('llama31-plain', [], {}), 'F32');
  const a = await llamaCppLogProbs(llama, file, text), b = await llamaCppLogProbs(llama, plain, text);
  let diff = 0;
  for (let p = 1; p < a.tokens.length; p++)
    for (const [tok, pr] of a.probs[p]) if (pr > 1e-6) diff = Math.max(diff, Math.abs(Math.log(pr) - Math.log(b.probs[p].get(tok))));
  assert.ok(diff > 1e-3, `rope_freqs changed nothing (${diff})`);
});

test('linear and yarn rope scaling are written as llama.cpp keys; other kinds are refused by name', () => {
  const lin = inspect(convert(checkpoint('linear', [], { rope_scaling: { rope_type: 'linear', factor: 2.0 } }), 'Q8_0'));
  assert.equal(lin.header.metadata['llama.rope.scaling.type'], '"linear"');
  assert.equal(lin.header.metadata['llama.rope.scaling.factor'], '2');
  const yarn = inspect(convert(checkpoint('yarn', [], { rope_scaling: { type: 'yarn', factor: 4.0,
    original_max_position_embeddings: 64, beta_fast: 32 } }), 'Q8_0'));
  assert.equal(yarn.header.metadata['llama.rope.scaling.type'], '"yarn"');
  assert.equal(yarn.header.metadata['llama.rope.scaling.original_context_length'], '64');
  assert.equal(yarn.header.metadata['llama.rope.scaling.yarn_beta_fast'], '32');
  const dyn = checkpoint('dynamic', [], { rope_scaling: { rope_type: 'dynamic', factor: 2.0 } });
  const out = path.join(work, 'dynamic.gguf');
  const r = runNative([out, '--model', dyn, '--quiet']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error: config\.json: key 'rope_scaling\.rope_type': 'dynamic' is not a rope scaling llama\.cpp's llama architecture runs/);
  assert.ok(!fs.existsSync(out) && !fs.existsSync(out + '.partial'), 'no partial output');
});

test('no tokenizer: a clear error naming the files looked for, or --no-vocab', () => {
  const dir = path.join(work, 'novocab');
  generate(dir, ['--dim', '64', '--hidden', '128', '--layers', '1', '--heads', '4', '--vocab', '300', '--seq-len', '64']);
  const out = path.join(work, 'novocab.gguf');
  const r = runNative([out, '--model', dir, '--quiet']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /tokenizer\.json/);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  assert.ok(!fs.existsSync(out));
  const ok = runNative([out, '--model', dir, '--quiet', '--no-vocab', '--json']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(JSON.parse(ok.stdout).warnings.join('\n'), /no tokenizer/);
  // never loaded in llama.cpp: tokenizer.ggml.model "none" aborts the Node process
  assert.equal(inspect(out).header.metadata['tokenizer.ggml.model'], '"none"');
});

// The SIMD block quantizers (SSE2 natively, simd128 in wasm) on weights made to hit their
// edges: x / d exactly n + 1/2, ties between +a and -a for Q4_0's signed maximum, subnormal
// blocks whose 1/d overflows, zeros and -0, large magnitudes. Native and wasm must agree.
test('native and wasm write the same GGUF bytes on rounding-edge weights', () => {
  const dir = path.join(work, 'edges');
  generate(dir, ['--dim', '256', '--hidden', '512', '--layers', '1', '--heads', '4', '--kv-heads', '2',
    '--vocab', '400', '--seq-len', '64', '--dtype', 'f32']);  // (rows of 256: the K-quants' blocks)
  fs.copyFileSync(path.join(root, 'tests', 'data', 'tiny_sp_bpe.model'), path.join(dir, 'tokenizer.model'));
  const file = path.join(dir, 'model.safetensors');
  const buf = fs.readFileSync(file);
  const hlen = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  const sub = new Float32Array(1);
  new Uint32Array(sub.buffer)[0] = 1;  // the smallest subnormal
  const blocks = [
    (j) => (j - 16) * 0.5, (j) => (j === 0 ? 127 : j + 0.5), (j) => (j === 3 ? -8 : j === 9 ? 8 : (j % 7) - 3),
    (j) => (j === 5 ? 8 : j === 9 ? -8 : 0.25 * (j % 5)), (j) => sub[0] * (j + 1), (j) => (j % 2 ? sub[0] : 0),
    () => -0, () => 0, (j) => 1e-30 * (j - 10), (j) => (j % 3 ? 3e4 : -3e4), (j) => Math.sin(j) * 0.02,
  ];
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const [a, b] = t.data_offsets;
    const v = new Float32Array(buf.buffer, buf.byteOffset + 8 + hlen + a, (b - a) / 4);
    for (let i = 0; i < v.length; i++) v[i] = blocks[Math.floor(i / 32 + name.length) % blocks.length](i % 32);
  }
  fs.writeFileSync(file, buf);
  for (const type of ['Q8_0', 'Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q2_K', 'Q3_K_S', 'Q4_K_M', 'Q6_K', 'IQ4_XS']) {
    const native = path.join(work, `edges-${type}.gguf`), wasmOut = path.join(work, `edges-wasm-${type}.gguf`);
    const flag = ['F32', 'F16', 'BF16', 'Q8_0'].includes(type) ? '--outtype' : '--type';
    const a = runNative([native, '--model', dir, flag, type, '--quiet']);
    assert.equal(a.code, 0, a.stderr);
    const w = runWasm([wasmOut, '--model', dir, flag, type, '--quiet']);
    assert.equal(w.code, 0, w.stderr);
    assert.ok(fs.readFileSync(wasmOut).equals(fs.readFileSync(native)), `${type}: wasm and native bytes differ`);
  }
});
