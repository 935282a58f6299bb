// The page's Hub input, below the browser: the range reader (web/remote_file.js, the workers'
// side) against the stand-in Hub (tests/browser/mock_hub.mjs) — the bytes, retries, and every
// answer it must refuse — and a seeded fuzz of what it validates: model ids, the Hub's file
// listings and Content-Range headers, random and hostile (a short fixed number of cases: it
// runs in `npm test`).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import crypto from 'node:crypto';
import { root } from './helpers.mjs';
import { startMockHub } from '../browser/mock_hub.mjs';
import { parseModelId, checkedEntries } from '../../web/hub.js';

// remote_file.js is a worker's classic script: run it in a context of its own, with Node's fetch.
function loadRemoteFile() {
  const ctx = vm.createContext({ fetch, setTimeout, clearTimeout, AbortController, Blob, Uint8Array, ArrayBuffer, Number, Math, Map, Error, Promise, performance,
    SharedArrayBuffer, Atomics, Int32Array, Object, String, console });
  vm.runInContext(fs.readFileSync(path.join(root, 'web', 'remote_file.js'), 'utf8') +
    '\n;globalThis.api = { fetchRange, checkRangeAnswer, isRemote, REMOTE_BACKOFF_MS, stallAfter: (ms) => { REMOTE_STALL_MS = ms; } };', ctx);
  REMOTE_SPEEDUP(ctx.api);
  return ctx.api;
}
// (the backoff's waits and the stall's, shortened: the schedule is the code's, the test need not sleep 7 s)
const REMOTE_SPEEDUP = (api) => { api.REMOTE_BACKOFF_MS.splice(0, 4, 5, 10, 20, 40); api.stallAfter(300); };

let hub, bytes;
const FILE = 'model.safetensors';
before(async () => {
  hub = await startMockHub();
  bytes = crypto.randomBytes(3 << 20);  // any bytes: the reader does not parse them
  hub.addRepo('o/m', { [FILE]: bytes, 'config.json': '{}' });
});
after(() => hub.close());

const desc = (etag = '') => ({ name: FILE, size: bytes.length, remote: { url: `${hub.url}/o/m/resolve/main/${FILE}`, token: '', etag } });
const sha = (b) => `"${crypto.createHash('sha256').update(b).digest('hex')}"`;

test('the range reader: exact bytes through the resolve redirect; a cut connection, a silent one and a 429/503 are retried from where they stopped', async () => {
  const { fetchRange } = loadRemoteFile();
  const at = 1000, n = 2 << 20;
  let got = await fetchRange(desc(sha(bytes)), at, n, new ArrayBuffer(n));
  assert.ok(Buffer.from(got).equals(bytes.subarray(at, at + n)));
  hub.resetCounts();
  hub.faults.cut = { file: FILE, at: at + (n >> 1) };
  got = await fetchRange(desc(), at, n, new ArrayBuffer(n));
  assert.ok(Buffer.from(got).equals(bytes.subarray(at, at + n)), 'after a cut');
  const cdn = hub.log.filter((e) => e.origin === 'cdn');
  assert.ok(cdn[0].cut, 'the cut happened');
  // the retry asks only for what was missing (where the first answer stopped, which the cut bounds)
  const [a, z] = /bytes=(\d+)-(\d+)/.exec(cdn[1].range).slice(1).map(Number);
  assert.ok(a > at && a <= at + (n >> 1) && z === at + n - 1, cdn[1].range);
  for (const code of [429, 503]) {
    hub.faults.status = { on: 'cdn', code, times: 2 };
    got = await fetchRange(desc(), 0, 4096, new ArrayBuffer(4096));
    assert.ok(Buffer.from(got).equals(bytes.subarray(0, 4096)), `after two ${code}s`);
  }
  // a server that goes silent mid-body without closing: dropped after REMOTE_STALL_MS (60 s; 300 ms
  // here), then the rest asked for again
  hub.resetCounts();
  hub.faults.stall = { file: FILE, at: at + 5000 };
  got = await fetchRange(desc(), at, n, new ArrayBuffer(n));
  assert.ok(Buffer.from(got).equals(bytes.subarray(at, at + n)), 'after a stall');
  assert.ok(hub.log.some((e) => e.stalled), 'the stall happened');
});

test('the range reader refuses, naming the file and offset: a changed ETag or size, a body longer than its range, another range, 404, 401, and a 429 that lasts', async () => {
  const { fetchRange } = loadRemoteFile();
  const read = (d = desc()) => fetchRange(d, 100, 5000, new ArrayBuffer(5000));
  await assert.rejects(read(desc('"not-its-etag"')), /cannot read model\.safetensors from the Hub at offset 100: model\.safetensors changed on the Hub while it was read \(its ETag went from "not-its-etag" to "/);
  await assert.rejects(read({ ...desc(), size: bytes.length + 1 }), /changed on the Hub since it was listed: it is \d+ bytes now/);
  hub.faults.lie = { file: FILE, kind: 'long' };
  await assert.rejects(read(), /sent more bytes than its Content-Range says/);
  hub.faults.lie = { file: FILE, kind: 'range' };
  await assert.rejects(read(), /sent bytes 101-5100 when 100-5099 were asked for/);
  await assert.rejects(read({ ...desc(), remote: { url: `${hub.url}/o/m/resolve/main/gone.safetensors` } }), /no longer on the Hub \(HTTP 404\)/);
  hub.addRepo('o/p', { [FILE]: bytes }, { private: true });
  await assert.rejects(read({ ...desc(), remote: { url: `${hub.url}/o/p/resolve/main/${FILE}`, token: '' } }), /refused model\.safetensors \(HTTP 401\)/);
  hub.faults.status = { on: 'cdn', code: 429, times: 10 };
  await assert.rejects(read(), /limiting requests \(HTTP 429\).*wait a minute/);
  hub.faults.status = null;
});

// A seeded generator of hostile strings: path tricks, control characters, unicode, long runs.
function rng(seed) {  // mulberry32
  return () => {
    let t = (seed = (seed + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const PIECES = ['a', 'Z', '0', '-', '_', '.', '..', '/', '\\', '@', ':', '%2F', '\u0000', '\n', '\u007f', '\u202e', 'é', ' ', 'https://huggingface.co/',
  'hf.co/', 'tree/', 'main', 'refs/pr/1', '?x=1', '#', 'x'.repeat(120)];
const hostile = (r, n = 1 + Math.floor(r() * 8)) => Array.from({ length: n }, () => PIECES[Math.floor(r() * PIECES.length)]).join('');

test('fuzz (seeded, 20000 cases each): model ids, the Hub\'s listings and Content-Range headers are accepted only when well-formed; nothing else gets through', () => {
  const r = rng(2026);
  const { checkRangeAnswer } = loadRemoteFile();
  for (let i = 0; i < 20000; i++) {
    const text = hostile(r);
    let id;
    try {
      id = parseModelId(text);
    } catch (e) {
      assert.ok(e instanceof Error && e.message.length < 400, 'one sentence');
      continue;
    }
    const [owner, name] = id.repo.split('/');
    for (const part of [owner, name]) assert.match(part, /^[A-Za-z0-9][A-Za-z0-9._-]*$/, JSON.stringify(text));
    assert.ok(!id.revision.split('/').includes('..') && !/[\u0000-\u001f\u007f-\u009f]/.test(id.revision), JSON.stringify(text));
  }
  for (let i = 0; i < 20000; i++) {
    const entries = Array.from({ length: 1 + Math.floor(r() * 4) }, () => ({
      type: r() < 0.1 ? 'directory' : 'file', path: r() < 0.5 ? 'model.safetensors' : hostile(r),
      size: [0, 1, 2 ** 53, -1, 1.5, '12', NaN, 1e6][Math.floor(r() * 8)],
      ...(r() < 0.3 ? { lfs: { size: r() < 0.5 ? 1e6 : 5, oid: r() < 0.5 ? crypto.randomBytes(32).toString('hex') : hostile(r) } } : {}),
    }));
    let listed;
    try {
      listed = checkedEntries(entries, 'o/m');
    } catch (e) {
      assert.ok(e instanceof Error);
      continue;
    }
    for (const f of listed) {
      assert.ok(!/[/\\]/.test(f.path) && f.path !== '..' && f.path !== '.' && !/[\u0000-\u001f\u007f-\u009f]/.test(f.path), f.path);
      assert.ok(Number.isSafeInteger(f.size) && f.size >= 0);
      assert.ok(f.sha256 === '' || /^[0-9a-f]{64}$/.test(f.sha256), f.sha256);  // (only a sha256 is compared with an ETag)
    }
    assert.equal(new Set(listed.map((f) => f.path)).size, listed.length);
  }
  const d = { name: 'f', size: 1000, remote: { url: 'u', etag: '' } };
  for (let i = 0; i < 20000; i++) {
    // (near misses of the right answer, bytes 10-19/1000, most of the time)
    const pick = (right, spread) => (r() < 0.6 ? right : right + Math.floor(r() * 2 * spread) - spread);
    const a = pick(10, 12), z = pick(19, 12), total = pick(1000, 3);
    const header = r() < 0.7 ? `bytes ${a}-${z}/${total}` : hostile(r);
    const ok = header.trim() === 'bytes 10-19/1000';
    let refused = '';
    try {
      checkRangeAnswer(d, 10, 10, header, '');
    } catch (e) {
      refused = e.message;
    }
    assert.equal(!refused, ok, refused ? `refused the right range: ${refused}` : `accepted ${JSON.stringify(header)} for bytes 10-19 of 1000`);
  }
});
