// The CLI's Hub reader (`--model hf://owner/name[@revision]`): lists, resolves and reads a model on
// the Hugging Face Hub for the core (platform/posix/hub_folder.h), as a worker thread of the Node
// CLI (its converting thread sleeps until each answer is posted: wasm/node_pre.js, leapconvHub) or
// as a process the native CLI starts (`node wasm/hub_fetcher.mjs`, over stdin and stdout). It runs
// the page's own code: web/hub.js (the id, the listing, resolving each file, its checks and its
// sentences) and web/remote_file.js (range reads: 206, the exact Content-Range, the listed size,
// one ETag throughout; retries with backoff). Node's fetch is made to follow redirects only to the
// Hub's own addresses, as the page's Content-Security-Policy makes the browser's.
//
// Environment: HF_TOKEN (an access token, as the Hub's own tools read it; never an argument, which
// other users of the machine can see), HF_ENDPOINT (another Hub, as huggingface_hub reads it) and
// LEAPCONV_HUB_ORIGINS (space-separated origins that Hub redirects to, besides its own).
import { workerData } from 'node:worker_threads';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { fileURLToPath } from 'node:url';

const web = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
const endpoint = (process.env.HF_ENDPOINT || '').replace(/\/+$/, '');
if (endpoint) globalThis.LEAPCONV_HUB_URL = endpoint;
const token = process.env.HF_TOKEN || '';

// Where the Hub's answers may send the reader: huggingface.co and its CDNs over https, and the
// endpoint the user chose (with the origins it redirects to).
const HUB_HOST = /^(?:[a-z0-9-]+\.)*(?:huggingface\.co|hf\.co)$/i;
const extraOrigins = new Set([endpoint, ...(process.env.LEAPCONV_HUB_ORIGINS || '').split(/\s+/)].filter(Boolean).map((o) => new URL(o).origin));
const allowed = (u) => (u.protocol === 'https:' && HUB_HOST.test(u.hostname)) || extraOrigins.has(u.origin);

const nodeFetch = globalThis.fetch;
globalThis.fetch = async function hubOnlyFetch(input, init = {}) {
  let url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  const first = url, headers = new Headers(init.headers || {});
  for (let hop = 0; ; ++hop) {
    if (!allowed(url)) {
      const what = decodeURIComponent(first.pathname.split('/').pop() || '') || 'a request';
      throw Object.assign(new Error(hop
        ? `The Hub redirected ${what} to ${url.origin}, an address outside its own: refused (this CLI fetches only from huggingface.co and its CDNs).`
        : `${url.origin} is not one of the Hub's own addresses: refused.`), { refused: true, hubSentence: true });
    }
    const resp = await nodeFetch(url, { ...init, headers, redirect: 'manual' });
    const to = resp.headers.get('location');
    if (![301, 302, 303, 307, 308].includes(resp.status) || !to) return resp;
    if (hop >= 5) throw new Error(`the Hub redirected ${url.pathname} more than 5 times`);
    await resp.body?.cancel();
    const next = new URL(to, url);
    if (next.origin !== url.origin) headers.delete('authorization');  // (as browsers do: the token stays with the Hub)
    url = next;
  }
};

// fetchRange, the checks and the retries: the workers' classic script, run here as it is.
vm.runInThisContext(fs.readFileSync(path.join(web, 'remote_file.js'), 'utf8'), { filename: path.join(web, 'remote_file.js') });
const { parseModelId, openFromHub } = await import('../web/hub.js');

// The model's files, by index: a shard's descriptor ({ name, size, remote }), read by range, or a
// small file's bytes ({ name, size, bytes }), fetched whole when the model was opened.
const files = [];

// Each shard is read front to back, as the local reader reads it: a read near where the last one
// ended takes the file's 8 MiB segments, and the next IN_FLIGHT segments are fetched meanwhile
// (several requests in flight while the core converts); a read elsewhere (a header, verify's
// jumps) fetches just what it asks, at least MIN_FETCH, kept until the next.
const SEGMENT = 8 << 20, IN_FLIGHT = 4, MIN_FETCH = 64 << 10;
const state = new Map();  // file -> { window: { at, bytes }, end: where the last read ended, segments: Map k -> Promise }

function fetchPart(d, at, n) {
  const p = fetchRange(d, at, n, new ArrayBuffer(n));
  p.catch(() => {});  // (a segment fetched ahead and never used must not be an unhandled rejection)
  return p;
}

async function read(i, offset, length) {
  const d = files[i];
  if (!d) throw new Error(`no file ${i}`);
  if (d.bytes) return d.bytes.slice(offset, offset + length);
  const s = state.get(i) || { window: null, end: -1, segments: new Map() };
  state.set(i, s);
  const w = s.window, last = s.end;
  s.end = offset + length;
  if (w && offset >= w.at && offset + length <= w.at + w.bytes.length) return w.bytes.slice(offset - w.at, offset - w.at + length);
  if (last < 0 || offset < last - SEGMENT || offset > last + SEGMENT) {  // not where the last read ended
    s.segments.clear();
    const n = Math.min(Math.max(length, MIN_FETCH), d.size - offset);
    s.window = { at: offset, bytes: await fetchPart(d, offset, n) };
    return s.window.bytes.slice(0, length);
  }
  s.window = null;
  const first = Math.floor(offset / SEGMENT), lastSeg = Math.floor((offset + length - 1) / SEGMENT);
  for (const k of s.segments.keys()) if (k < first) s.segments.delete(k);
  for (let k = first; k <= lastSeg + IN_FLIGHT && k * SEGMENT < d.size; ++k)
    if (!s.segments.has(k)) s.segments.set(k, fetchPart(d, k * SEGMENT, Math.min(SEGMENT, d.size - k * SEGMENT)));
  const out = new Uint8Array(length);
  for (let k = first; k <= lastSeg; ++k) {
    const seg = await s.segments.get(k), at = k * SEGMENT;
    const from = Math.max(offset, at), to = Math.min(offset + length, at + seg.length);
    out.set(seg.subarray(from - at, to - at), from - offset);
  }
  return out;
}

async function open(spec, wanted) {
  const id = parseModelId(spec.replace(/^hf:\/\//, ''));
  const names = new Set(JSON.parse(wanted));
  const got = await openFromHub({ ...id, token }, (name) => name.endsWith('.safetensors') || names.has(name));
  const listing = [];
  for (const f of got.files) {
    listing.push({ name: f.name, size: f.size, index: files.length, whole: !f.remote });
    files.push(f.remote ? f : { name: f.name, size: f.size, bytes: new Uint8Array(await f.arrayBuffer()) });
  }
  return { label: got.label, files: listing };
}

// One request at a time: { op: 'open', spec, wanted } -> { json } (JSON text); { op: 'read', file,
// offset, length } -> { bytes }; a failure -> { error } (one sentence).
async function serve(m) {
  try {
    if (m.op === 'open') return { json: JSON.stringify(await open(m.spec, m.wanted)) };
    return { bytes: await read(m.file, m.offset, m.length) };
  } catch (e) {
    return { error: String(e && e.message || e) };
  }
}

// Two ways to be asked. As a worker of the Node CLI's converting thread (workerData: a port and a
// flag): the answer is posted, then the flag wakes the thread. As a process of the native CLI's
// (no workerData): requests are lines of JSON on stdin; each answer is a line of JSON on stdout,
// a read's { bytes: n } followed by its n bytes; the end of stdin ends it.
let answer;
if (workerData) {
  const { port, flag } = workerData;
  answer = (message) => {
    port.postMessage(message, message.bytes ? [message.bytes.buffer] : []);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  };
  (await import('node:worker_threads')).parentPort.on('message', async (m) => answer(await serve(m)));
} else {
  answer = (message) => {
    if (!message.bytes) return process.stdout.write(JSON.stringify(message) + '\n');
    process.stdout.write(JSON.stringify({ bytes: message.bytes.length }) + '\n');
    process.stdout.write(message.bytes);
  };
  let pending = '', queue = Promise.resolve();
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', (text) => {
    pending += text;
    for (let nl; (nl = pending.indexOf('\n')) >= 0;) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      queue = queue.then(async () => answer(await serve(JSON.parse(line))));
    }
  });
  process.stdin.on('end', () => process.exit(0));
}
process.on('uncaughtException', (e) => answer({ error: `the Hub reader failed: ${e && e.message}` }));
process.on('unhandledRejection', (e) => answer({ error: `the Hub reader failed: ${e && e.message}` }));
