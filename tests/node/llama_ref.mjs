// Shared by the Node tests that hold llama.cpp to the project's reference forward pass: the
// next-token log-probs from each side, for a GGUF file.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { root, runNative } from './helpers.mjs';

const forwardTool = path.join(root, 'build', 'native', 'gguf_forward');

// log p(next | prefix) from the reference forward pass on the file's weights: [T][V].
// ggmlGelu: GELU as llama.cpp's CPU backend computes it (through f16: its lookup table).
// jitter: GELU's inputs times (1 + jitter) first (gguf_forward --gelu-jitter), to see how far the
// reference moves when they move by a few float ulps.
export function referenceLogProbs(work, file, tokens, ggmlGelu = false, jitter = 0) {
  const out = path.join(work, 'ref.f32');
  const r = spawnSync(forwardTool, [file, out, tokens.join(','), ...(ggmlGelu ? ['--ggml-gelu'] : []),
    ...(jitter ? ['--gelu-jitter', String(jitter)] : [])], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const all = new Float32Array(fs.readFileSync(out).buffer.slice(0));
  const V = all.length / tokens.length;
  const rows = tokens.map((_, t) => all.subarray(t * V, (t + 1) * V));
  // a mixture of experts' closest router call (ForwardTrace::router_margin), when it has one
  const m = /router margin (\S+)/.exec(r.stdout);
  rows.routerMargin = m ? Number(m[1]) : Infinity;
  return rows;
}

// llama.cpp's next-token probabilities at every position of `text`, tokenized by llama.cpp with
// the file's BOS first (node-llama-cpp's tokenize() adds none): an F32 KV cache, flash attention
// off, one thread. lora: a GGUF LoRA adapter loaded beside the model (scale 1).
export async function llamaCppLogProbs(llama, file, text, { lora } = {}) {
  const model = await llama.loadModel({ modelPath: file });
  try {
    const ctx = await model.createContext({ contextSize: 64, flashAttention: false, threads: 1,
      experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
      ...(lora ? { lora: { adapters: [{ filePath: lora, scale: 1 }] } } : {}) });
    try {
      const bos = model.tokens.bos;
      const tokens = [...(bos != null ? [bos] : []), ...model.tokenize(text)];
      const seq = ctx.getSequence();
      const res = await seq.controlledEvaluate(tokens.map((t) => [t, { generateNext: { probabilities: true } }]));
      return { tokens, probs: res.map((r) => r.next.probabilities) };
    } finally {
      await ctx.dispose();
    }
  } finally {
    await model.dispose();
  }
}

// The native CLI's GGUF of a checkpoint folder, into work/<folder>-<type>.gguf.
export function convertGguf(work, dir, type, args = []) {
  const out = path.join(work, `${path.basename(dir)}-${type}.gguf`);
  // F32, F16, BF16, Q8_0: the converter's file (--outtype); the others llama-quantize's (--type)
  const flag = ['F32', 'F16', 'BF16', 'Q8_0'].includes(type) ? '--outtype' : '--type';
  const r = runNative([out, '--model', dir, flag, type, '--quiet', ...args]);
  assert.equal(r.code, 0, r.stderr);
  return out;
}

// `--inspect --json` of a written file.
export function inspectJson(file) {
  const r = runNative(['--inspect', file, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// An importance matrix in llama-imatrix's legacy .dat format (i32 n; per entry i32 len, name,
// i32 ncall, i32 nval, f32 values; then i32 chunks, i32 len, dataset), written here from the
// format's description for every weight of the GGUF file `like` that llama-imatrix would see (2+
// dims, not token_embd): per column a mean square spanning orders of magnitude (seeded), as
// squared activations do. For tests and benchmarks without llama-imatrix.
export function writeImatrixDat(file, like, seed = 7) {
  const parts = [];
  const i32 = (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); };
  const weights = inspectJson(like).tensors.filter((t) => t.shape.length >= 2 && t.name !== 'token_embd.weight');
  i32(weights.length);
  for (const t of weights) {
    const name = Buffer.from(t.name);
    i32(name.length); parts.push(name); i32(10);
    const cols = t.shape[t.shape.length - 1], experts = t.shape.length >= 3 ? t.shape[0] : 1;
    i32(cols * experts);
    const v = Buffer.alloc(4 * cols * experts);
    for (let c = 0; c < cols * experts; c++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      v.writeFloatLE(10 * Math.exp(6 * (seed / 2 ** 32) - 3), 4 * c);  // (ncall 10: the values are 10 x the mean)
    }
    parts.push(v);
  }
  i32(4); i32(4); parts.push(Buffer.from('test'));
  fs.writeFileSync(file, Buffer.concat(parts));
  return file;
}
