// Reader worker: streams byte ranges of the user's files, in the order the converter will read
// them, into a ring of shared memory that the converting worker drains (source_stream.js is
// the other side). Reading here, not on the converting thread, lets reading overlap converting
// and writing.
//
// How it reads (measured in headless Chromium on the benchmark machine): BYOB stream reads are
// the fastest way to read a File (4x FileReaderSync), one stream is limited by the browser's
// reading thread (~0.5 GB/s) and takes ~15 ms to start, and several streams read in parallel
// (4 streams: ~1.1 GB/s). So the ranges are cut into segments and LANES segments are read at
// once, each into its own buffer; finished segments go into the ring in order. Every stream
// costs the browser a new pipe: 32 MiB segments read a file with about half the CPU time of
// 8 MiB ones (the ranges are long: the core reads each shard front to back).
'use strict';

importScripts('source_stream.js');  // the shared control block's layout (controlViews)
importScripts('remote_file.js');    // a file on the Hub: its segments are range requests (fetchRange)

const SEGMENT_BYTES = 32 << 20;
const LANES = 4;                 // segments being read at once
const READ_BYTES = 4 << 20;      // one stream read

// Streams being read, held from the global scope: a stream reachable only from its own
// pending read can be garbage collected, and that read then never settles (seen here: the
// conversion stalled at a random point, more often with larger segments).
const reading = new Set();

// Reads [offset, offset + size) of file into buffer (BYOB: the buffer moves with each read).
async function readSegment(file, offset, size, buffer) {
  if (isRemote(file)) return fetchRange(file, offset, size, buffer);
  const reader = file.slice(offset, offset + size).stream().getReader({ mode: 'byob' });
  reading.add(reader);
  try {
    return await readInto(reader, offset, size, buffer);
  } finally {
    reading.delete(reader);
  }
}

async function readInto(reader, offset, size, buffer) {
  for (let got = 0; got < size;) {
    const { done, value } = await reader.read(new Uint8Array(buffer, got, Math.min(READ_BYTES, size - got)));
    if (value) buffer = value.buffer;
    if (done) throw new Error(`it ended at offset ${offset + got}, before the bytes its header promises`);
    got += value.byteLength;
  }
  reader.releaseLock();
  return new Uint8Array(buffer, 0, size);
}

function* segments(order) {
  for (const [shard, offset, size] of order)
    for (let at = 0; at < size; at += SEGMENT_BYTES) yield [shard, offset + at, Math.min(SEGMENT_BYTES, size - at)];
}

self.onmessage = async ({ data: { files, order, ring, control } }) => {
  const buf = new Uint8Array(ring);
  const { ctl, times, message } = controlViews(control);
  const cap = buf.length;
  let written = Atomics.load(ctl, 0);  // where source_stream.js started the counters

  // Copies bytes into the ring, waiting (blocking this worker) while it is full.
  const put = (value) => {
    for (let at = 0; at < value.byteLength;) {
      let consumed = Atomics.load(ctl, 1);
      if (((written - consumed) >>> 0) === cap) {
        const t = performance.now();
        do {
          Atomics.wait(ctl, 1, consumed);
          consumed = Atomics.load(ctl, 1);
        } while (((written - consumed) >>> 0) === cap);
        times[1] += performance.now() - t;
      }
      const pos = written & (cap - 1);
      const k = Math.min(cap - ((written - consumed) >>> 0), value.byteLength - at, cap - pos);
      buf.set(value.subarray(at, at + k), pos);
      at += k;
      written = (written + k) | 0;
      Atomics.store(ctl, 0, written);
      Atomics.notify(ctl, 0);
    }
  };

  const todo = segments(order);
  const inFlight = [];  // segment reads, in order
  const spare = [];     // buffers whose bytes are in the ring
  const launch = () => {
    const next = todo.next();
    if (next.done) return;
    const [shard, offset, size] = next.value;
    const read = readSegment(files[shard], offset, size, spare.pop() || new ArrayBuffer(SEGMENT_BYTES));
    read.catch(() => {});  // reported when its turn comes
    inFlight.push(read);
  };
  try {
    for (let i = 0; i < LANES; ++i) launch();
    while (inFlight.length) {
      const t = performance.now();
      const bytes = await inFlight.shift();
      times[0] += performance.now() - t;
      put(bytes);
      spare.push(bytes.buffer);
      launch();
    }
    Atomics.store(ctl, 2, 1);
  } catch (e) {
    const msg = new TextEncoder().encode(e && e.remote ? e.message : `cannot read the file: ${whyNotRead(e)}`).subarray(0, message.length);
    message.set(msg);
    Atomics.store(ctl, 3, msg.length);
    Atomics.store(ctl, 2, 2);
  }
  Atomics.notify(ctl, 0);
};

// Chromium says "network error" (a TypeError) or NotReadableError for a File changed on disk
// after it was picked: say what that means; anything else keeps the browser's words.
function whyNotRead(e) {
  const changed = e && (e.name === 'NotReadableError' || (e.name === 'TypeError' && /network error/i.test(e.message)));
  return changed ? 'it was changed, moved or removed after it was picked (pick it again)'
                 : `was it changed or moved after it was picked? (${e && e.message || e})`;
}

self.postMessage('loaded');  // (startReader in source_stream.js waits for this)
