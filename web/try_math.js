// The arithmetic of "Try it" (web/try_model.js), without the DOM or wllama, so that the page and
// the tests compute the same figures from the same definitions.

// wllama 3.8.1's heap: one WebAssembly.Memory of at most 65536 pages of 64 KiB (the maximum its
// memory64 build declares, -sMAXIMUM_MEMORY=4096MB). It reads the model file by slices, but
// llama.cpp keeps every tensor in that heap, next to the KV cache, the compute buffers and the
// runtime: RESERVE is what the tab keeps for those (n_ctx = CTX, F32 KV cache).
export const HEAP_MAX = 2 ** 32;
export const RESERVE = 512 * 2 ** 20;
export const CTX = 512;
export const fitsInTab = (bytes) => bytes + RESERVE <= HEAP_MAX;

// One generated step of a wllama completion (choices[0].logprobs.content[i], llama-server's
// format): the token taken and the k most likely next tokens, log p under the full softmax
// (before sampling), highest first.
export const stepsOf = (choice) => (choice.logprobs?.content ?? []).map((s) => ({
  id: s.id, bytes: s.bytes, logprob: s.logprob,
  top: s.top_logprobs.map((t) => ({ id: t.id, bytes: t.bytes, logprob: t.logprob })),
}));

// Side by side at one position, from the two files' top-k lists (ids and log p):
//  - agree: the most likely next token is the same;
//  - kl: KL(A || B) of the two distributions coarsened to the partition {each token in both
//    lists} + {every other token}: sum over s in S of pA(s) ln(pA(s)/pB(s)) + rA ln(rA/rB), with
//    S = topA ∩ topB and r = 1 - sum over S of p. By the data-processing inequality this never
//    exceeds the full KL, and equals it when k covers the vocabulary.
export function comparePosition(topA, topB) {
  const pB = new Map(topB.map((t) => [t.id, t.logprob]));
  let kl = 0, massA = 0, massB = 0, shared = 0;
  for (const { id, logprob } of topA) {
    if (!pB.has(id)) continue;
    const a = Math.exp(logprob), lb = pB.get(id);
    kl += a * (logprob - lb);
    massA += a;
    massB += Math.exp(lb);
    shared++;
  }
  const rA = 1 - massA, rB = 1 - massB;
  if (rA > 1e-12) kl += rA * Math.log(rA / Math.max(rB, 1e-30));
  return { agree: topA[0].id === topB[0].id, kl: Math.max(kl, 0), shared };
}

export function compareRuns(topsA, topsB) {
  const positions = topsA.map((a, i) => comparePosition(a, topsB[i]));
  const agree = positions.filter((p) => p.agree).length;
  const meanKl = positions.reduce((s, p) => s + p.kl, 0) / positions.length;
  return { positions, agree, meanKl, maxKl: Math.max(...positions.map((p) => p.kl)) };
}

// Chat mode: one user message through the file's chat template (tokenizer.chat_template), rendered
// by @huggingface/jinja's Template, ready for the assistant's answer. wllama 3.8.1 takes the prompt
// as text only and gives no way to learn a special token's text (it writes them as ""), so
// bos_token and eos_token render empty: llama.cpp puts BOS before the prompt itself when the file
// asks for it (tokenizer.ggml.add_bos_token), and special tokens the template writes by name
// (<|start_header_id|>, [INST]) are read as the special tokens they are.
// bosFirst: the template begins with bos_token.
export function chatPrompt(Template, template, messages) {
  const marked = new Template(template).render({ messages, add_generation_prompt: true, bos_token: '\u0000', eos_token: '' });
  return { text: marked.replaceAll('\u0000', ''), bosFirst: marked.startsWith('\u0000') };
}

// Bytes (an array or a Uint8Array) as text when they are whole UTF-8, else null.
export function utf8(bytes) {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return null;
  }
}

// A token's bytes as text: valid UTF-8 as it reads, any other byte as \xNN.
export const tokenText = (bytes) => utf8(bytes) ??
  [...bytes].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('');

// The prompt cut after each of its first P - 1 tokens (P = all of them; after the last one is
// where generation starts): tokens are [[id, begin, end], ...] with byte offsets into the
// prompt's UTF-8, as the core's tokenizer gives them. { read: i, text } for the prompt up to the
// end of token i, or { read: i, why } when that cut falls inside a character.
export function promptCuts(prompt, tokens) {
  const bytes = new TextEncoder().encode(prompt);
  const cuts = [];
  for (let i = 1; i < tokens.length; i++) {
    const text = utf8(bytes.subarray(0, tokens[i - 1][2]));
    cuts.push(text === null ? { read: i, why: 'the prompt so far ends inside a character' } : { read: i, text });
  }
  return cuts;
}
