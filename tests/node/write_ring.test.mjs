// The page's output path on the threaded page: web/write_ring.js (the converting worker's side)
// and web/writer.js (the writer worker), run here unchanged in Node worker threads with the
// browser's file handle replaced by one over a real file. Checks the bytes that reach the file
// (pieces in any order, across the ring's wrap-around and the counters' int32 wrap), a write
// that fails (the error reaches the converter, nothing hangs), abort, and how the file is sized.
import test from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { pathToFileURL } from 'node:url';
import { Worker as NodeWorker } from 'node:worker_threads';
import { root, tempDir } from './helpers.mjs';

const web = path.join(root, 'web');

// What a browser worker has that writer.js uses (self, importScripts, postMessage, onmessage),
// and a FileSystemFileHandle stand-in whose sync access handle writes a real file and can be
// told to fail once a number of bytes have been written (as a full disk or quota would).
const workerBootstrap = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs'), path = require('node:path'), vm = require('node:vm');
globalThis.self = globalThis;
globalThis.importScripts = (...names) => {
  for (const n of names) vm.runInThisContext(fs.readFileSync(path.join(workerData.dir, n), 'utf8'));
};
globalThis.postMessage = (m) => parentPort.postMessage(m);
function fakeHandle({ file, failAfter }) {
  return {
    async createSyncAccessHandle() {
      const fd = fs.openSync(file, 'w+');
      let written = 0;
      return {
        getSize: () => fs.fstatSync(fd).size,
        truncate: (n) => fs.ftruncateSync(fd, n),
        write(view, { at }) {
          if (failAfter >= 0 && written + view.byteLength > failAfter) throw new Error('QuotaExceededError: no room left');
          const k = fs.writeSync(fd, view, 0, view.byteLength, at);
          written += k;
          return k;
        },
        close: () => fs.closeSync(fd),
      };
    },
  };
}
parentPort.on('message', (data) => self.onmessage({ data: { ...data, handles: data.handles.map(fakeHandle) } }));
vm.runInThisContext(fs.readFileSync(workerData.script, 'utf8'));
`;

class BrowserLikeWorker {
  constructor(url) {
    const script = new URL(url).pathname;
    this.worker = new NodeWorker(workerBootstrap, { eval: true, workerData: { script, dir: path.dirname(script) } });
    this.worker.on('message', (data) => this.onmessage && this.onmessage({ data }));
    this.worker.on('error', (e) => this.onerror && this.onerror(e));
  }
  postMessage(m) { this.worker.postMessage(m); }
  terminate() { this.worker.terminate(); }
}

// write_ring.js as the converting worker loads it (a classic script), in a context of its own.
function loadWriteRing() {
  const context = vm.createContext({
    self: { location: { href: pathToFileURL(path.join(web, 'worker.js')).href } },
    Worker: BrowserLikeWorker, URL, SharedArrayBuffer, Atomics, performance, TextDecoder, TextEncoder,
  });
  return vm.runInContext(`${fs.readFileSync(path.join(web, 'write_ring.js'), 'utf8')}\n({ WriteRing, WriterState, sizeOutputFile });`, context);
}

// Deterministic bytes and piece sizes.
function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

// An output file cut into pieces in a shuffled order, like chunks taken in source order: its
// first quarter in pieces of at most 4 KiB (thousands: the parts ring wraps and fills), the
// rest in pieces of up to 5 MiB (the byte ring wraps and fills).
function piecesOf(size, random) {
  const pieces = [];
  for (let at = 0; at < size;) {
    const most = at < size / 4 ? 4096 : 5 << 20;
    const n = Math.min(size - at, 1 + Math.floor(random() * most));
    pieces.push([at, n]);
    at += n;
  }
  for (let i = pieces.length - 1; i > 0; --i) {
    const j = Math.floor(random() * (i + 1));
    [pieces[i], pieces[j]] = [pieces[j], pieces[i]];
  }
  return pieces;
}

// A WriteRing over fresh files (one per size), its writer worker ready.
async function openRing(size, failAfter = -1, more = []) {
  const { WriteRing, WriterState } = loadWriteRing();
  const dir = tempDir('write-ring');
  const files = [size, ...more].map((_, i) => path.join(dir, `out${i}.bin`));
  const ring = new WriteRing(files.map((file) => ({ file, failAfter })), [size, ...more]);
  await ring.ready;
  return { ring, file: files[0], files, WriterState, cleanUp: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

test('the writer worker writes every piece at its offset, across both wrap-arounds', async () => {
  const random = rng(7);
  const expected = new Uint8Array(96 << 20);
  for (let i = 0; i < expected.length; i += 4) expected[i] = random() * 256;
  const pieces = piecesOf(expected.length, random);
  assert.ok(pieces.length > 8192, `${pieces.length} pieces: the parts ring (4096) must wrap`);

  const { ring, file, cleanUp } = await openRing(expected.length);
  for (const [at, n] of pieces) ring.write(0, at, expected.subarray(at, at + n));
  ring.close();
  const got = fs.readFileSync(file);
  assert.equal(got.length, expected.length);
  assert.ok(got.equals(expected), 'the file holds exactly the pieces written');
  cleanUp();
});

test('pieces of several files (the parts of a split GGUF), interleaved, each reach their own file', async () => {
  const random = rng(11);
  const sizes = [9 << 20, 1 << 20, 17 << 20];
  const expected = sizes.map((n) => {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i += 3) b[i] = random() * 256;
    return b;
  });
  const pieces = expected.flatMap((b, file) => piecesOf(b.length, random).map(([at, n]) => [file, at, n]));
  for (let i = pieces.length - 1; i > 0; --i) {
    const j = Math.floor(random() * (i + 1));
    [pieces[i], pieces[j]] = [pieces[j], pieces[i]];
  }
  const { ring, files, cleanUp } = await openRing(sizes[0], -1, sizes.slice(1));
  for (const [file, at, n] of pieces) ring.write(file, at, expected[file].subarray(at, at + n));
  ring.close();
  files.forEach((f, i) => assert.ok(fs.readFileSync(f).equals(expected[i]), `file ${i} holds exactly its pieces`));
  cleanUp();
});

test('a write the browser refuses reaches the converter as an error, without hanging', async () => {
  const data = new Uint8Array(64 << 20).fill(9);
  const { ring, WriterState, cleanUp } = await openRing(data.length, 10 << 20);
  assert.throws(() => {
    for (let at = 0; at < data.length; at += 1 << 20) ring.write(0, at, data.subarray(at, at + (1 << 20)));
    ring.close();
  }, /cannot write the output file: QuotaExceededError: no room left/);
  assert.equal(Atomics.load(ring.ctl, 4), WriterState.FAILED);
  ring.abort();  // what the converter does next: returns at once
  cleanUp();
});

test('abort stops the writer and closes the file', async () => {
  const { ring, file, WriterState, cleanUp } = await openRing(1 << 30);
  ring.write(0, 0, new Uint8Array(8 << 20).fill(5));
  ring.abort();
  assert.equal(Atomics.load(ring.ctl, 4), WriterState.CLOSED);
  fs.rmSync(file);  // closed: removable (a browser refuses to remove an open OPFS file)
  cleanUp();
});

test('the output file is sized in one step, and emptied first only when it holds bytes', () => {
  const { sizeOutputFile } = loadWriteRing();
  const dir = tempDir('size-output');
  const file = path.join(dir, 'out.bin');
  // A sync access handle over a real file that records its truncate calls.
  const handle = () => {
    const fd = fs.openSync(file, 'r+');
    const calls = [];
    return { calls, getSize: () => fs.fstatSync(fd).size, truncate: (n) => { calls.push(n); fs.ftruncateSync(fd, n); },
             close: () => fs.closeSync(fd) };
  };
  // A new, empty file is only given its size: truncating it to 0 would make ext4 flush it on close.
  fs.writeFileSync(file, '');
  let h = handle();
  sizeOutputFile(h, 3 << 20);
  h.close();
  assert.deepEqual(h.calls, [3 << 20]);
  assert.equal(fs.statSync(file).size, 3 << 20);
  // A file left with bytes (a removal that failed) is emptied first: unwritten bytes read as 0.
  fs.writeFileSync(file, Buffer.alloc(5 << 20, 0xee));
  h = handle();
  sizeOutputFile(h, 1 << 20);
  h.close();
  assert.deepEqual(h.calls, [0, 1 << 20]);
  assert.ok(fs.readFileSync(file).equals(Buffer.alloc(1 << 20)), 'no stale byte survives');
  fs.rmSync(dir, { recursive: true, force: true });
});
