// The arithmetic of "Try it" (web/try_model.js), without the DOM or wllama, so that the page and
// the tests compute the same figures from the same definitions.

// wllama 2.4.0's heap: one WebAssembly.Memory of at most 65536 pages of 64 KiB (the maximum its
// memory64 build declares, -sMAXIMUM_MEMORY=4096MB). The model file is copied into that heap,
// where llama.cpp keeps every tensor, next to the KV cache, the compute buffers and the runtime:
// RESERVE is what the tab keeps for those (n_ctx = CTX, F32 KV cache).
export const HEAP_MAX = 2 ** 32;
export const RESERVE = 512 * 2 ** 20;
export const CTX = 512;
export const fitsInTab = (bytes) => bytes + RESERVE <= HEAP_MAX;

// A probability from its log: as a percentage with three significant digits (a 128k vocabulary
// spreads its mass thin: 0.00131%, not 0.00%), or log p itself below 1e-6 %.
export function probText(logprob) {
  const pc = 100 * Math.exp(logprob);
  return pc >= 1e-6 ? `${pc.toPrecision(3)}%` : `log p ${logprob.toFixed(1)}`;
}

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
// by @huggingface/jinja's Template, ready for the assistant's answer. bos_token renders empty and
// bosFirst says whether the template begins with it: the page then puts BOS's id first itself (a
// BOS written as text would be read as text by a vocabulary without it as a special token).
// Special tokens the template writes by name (<|start_header_id|>, [INST]) are read as the special
// tokens they are.
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
