// The quality table of docs/quality.md (by hand, not a test): a generated Llama (transformers'
// initialisation, --hf-init; Mistral-7B's real tokenizer) written as F32 and in the types below,
// each run by llama.cpp (npm node-llama-cpp) over the same text; per type the mean and the 99th
// percentile of KL(F32 || type) over every position, and how often the most likely next token is
// F32's. The importance matrix is llama-imatrix's on the BF16 file when PEER names a llama-peer
// build (../shared/tools/llama-peer/build.sh; cmake --build ... --target llama-imatrix), else a
// generated one (scripts/make_imatrix.mjs).
//   PEER=/tmp/peer node scripts/quality_table.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { llamaCppLogProbs, convertGguf, writeImatrixDat } from '../tests/node/llama_ref.mjs';
import { root, tempDir, generate } from '../tests/node/helpers.mjs';

const work = tempDir('quality');
const dir = path.join(work, 'model');
generate(dir, ['--dim', '512', '--hidden', '1536', '--layers', '8', '--heads', '8', '--kv-heads', '2', '--vocab', '32000',
  '--seq-len', '512', '--dtype', 'bf16', '--hf-init', '--seed', '5']);
const tok = path.join(root, 'node_modules', '@lenml', 'tokenizer-llama2', 'models');
for (const f of fs.readdirSync(tok)) fs.copyFileSync(path.join(tok, f), path.join(dir, f));
const text = fs.readFileSync(path.join(root, 'README.md'), 'utf8').slice(2000, 2600);

const bf16 = convertGguf(work, dir, 'BF16');
let imatrix = path.join(work, 'm.imatrix.gguf'), made = 'llama-imatrix (README.md, 8 chunks of 128)';
const tool = process.env.PEER && path.join(process.env.PEER, 'llama.cpp', 'build', 'bin', 'llama-imatrix');
if (tool && fs.existsSync(tool)) {
  const r = spawnSync(tool, ['-m', bf16, '-f', path.join(root, 'README.md'), '-c', '128', '--chunks', '8', '-o', imatrix], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
} else {
  imatrix = writeImatrixDat(path.join(work, 'm.imatrix.dat'), bf16);
  made = 'generated (no llama-imatrix)';
}

const rows = [['Q8_0', []], ['Q6_K', []], ['Q4_K_M', []], ['Q4_K_M', ['--imatrix', imatrix]], ['IQ4_XS', []],
  ['IQ4_XS', ['--imatrix', imatrix]], ['Q3_K_M', ['--imatrix', imatrix]], ['Q2_K_S', ['--imatrix', imatrix]],
  ['IQ3_M', ['--imatrix', imatrix]], ['IQ2_M', ['--imatrix', imatrix]]];
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
const dist = async (file) => (await llamaCppLogProbs(llama, file, text)).probs.map((m) => {
  let s = 0;
  for (const p of m.values()) s += p;
  return new Map([...m].map(([t, p]) => [t, p / s]));  // (renormalised in double)
});
const f32 = convertGguf(work, dir, 'F32');
const ref = await dist(f32);
console.log(`importance matrix: ${made}; ${ref.length} positions\n`);
console.log('| type | imatrix | bits/weight | mean KL | 99% KL | top-1 same |');
console.log('|---|---|---|---|---|---|');
for (const [type, args] of rows) {
  let file;
  try {
    file = convertGguf(work, dir, type, args);
  } catch (e) {
    console.log(`| ${type} | ${args.length ? 'yes' : 'no'} | — | not written: ${String(e.message).split('\n').find((l) => l.startsWith('error')) || e.message} | | |`);
    continue;
  }
  const got = await dist(file);
  const kl = [];
  let same = 0;
  for (let t = 0; t < ref.length; t++) {
    let k = 0, a = -1, b = -1, pa = -1, pb = -1;
    for (const [tok, p] of ref[t]) {
      const q = Math.max(got[t].get(tok) ?? 0, 1e-30);
      if (p > 0) k += p * Math.log(p / q);
      if (p > pa) { pa = p; a = tok; }
    }
    for (const [tok, q] of got[t]) if (q > pb) { pb = q; b = tok; }
    kl.push(k);
    same += a === b;
  }
  kl.sort((x, y) => x - y);
  const mean = kl.reduce((s, x) => s + x, 0) / kl.length;
  const bits = 32 * fs.statSync(file).size / fs.statSync(f32).size;  // (of the whole file, norms and header too)
  console.log(`| ${type} | ${args.length ? 'yes' : 'no'} | ${bits.toFixed(2)} | ${mean.toExponential(2)} | ${kl[Math.floor(0.99 * (kl.length - 1))].toExponential(2)} | ${same}/${ref.length} |`);
}
await llama.dispose();
