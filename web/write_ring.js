// The output files' sinks besides OPFS's own: the in-memory one (openMemory, at the end), and
// the converting worker's side of the output files on the threaded page (one, or every part of a
// split GGUF). Pieces of the files are copied into a ring of shared memory, and a writer worker
// (writer.js) writes them into the origin private file system, so that writing overlaps reading and converting instead of
// stopping both while the browser writes (and while the system finds fresh memory for the file
// cache, which is what a slow write mostly is on the benchmark machine).
'use strict';

const WRITE_RING_BYTES = 32 << 20;  // a power of two (positions are 32-bit counters modulo it)
const WRITE_PARTS = 4096;           // a power of two: (file, offset, length) of each piece in the ring
const WRITE_STALL_MS = 120000;      // no byte written for this long: report it, do not hang
// Where the byte counters start: just before they turn negative as int32, so every conversion
// crosses the wrap-around that only multi-GiB outputs would otherwise reach.
const WRITE_COUNTER_START = 0x7fff0000;
const WriterState = { OPEN: 0, CLOSE: 1, ABORT: 2, CLOSED: 3, FAILED: 4 };

// The control block both workers share. Int32 words: [0] bytes put, [1] bytes written (both
// modulo 2^32), [2] parts put, [3] parts written, [4] the writer's state (WriterState), [5] the
// error message's length; a double at 24: the writer's milliseconds inside the browser's write;
// from 32 the pieces ring (which file, its offset, length as doubles), then the UTF-8 error message.
const WRITE_CONTROL_BYTES = 32 + WRITE_PARTS * 24 + 1024;
function writeControlViews(control) {
  return { ctl: new Int32Array(control, 0, 6), times: new Float64Array(control, 24, 1),
           parts: new Float64Array(control, 32, WRITE_PARTS * 3),
           message: new Uint8Array(control, 32 + WRITE_PARTS * 24) };
}

// Gives a freshly opened output file (a FileSystemSyncAccessHandle) its final size in one step:
// a write that grows the file asks the browser process for quota each time, which took ~4 s of
// 1.1 GB here while the reader kept that process busy. Only a file holding bytes is emptied
// first: on ext4 a file truncated to 0 is flushed to disk when closed (auto_da_alloc, the
// replace-by-truncate guard), which made closing a 1.1 GB output take 0.3 s.
function sizeOutputFile(access, size) {
  if (access.getSize() !== 0) access.truncate(0);
  access.truncate(size);
}

class WriteRing {
  // handles: the FileSystemFileHandles (OPFS) to write; sizes: their final sizes.
  constructor(handles, sizes) {
    this.ring = new Uint8Array(new SharedArrayBuffer(WRITE_RING_BYTES));
    this.control = new SharedArrayBuffer(WRITE_CONTROL_BYTES);
    ({ ctl: this.ctl, times: this.times, parts: this.parts, message: this.message } = writeControlViews(this.control));
    this.put = WRITE_COUNTER_START;
    this.partsPut = 0;
    Atomics.store(this.ctl, 0, WRITE_COUNTER_START);
    Atomics.store(this.ctl, 1, WRITE_COUNTER_START);
    this.waitMs = 0;  // time the converter waited for room
    this.opened = false;  // the writer has the file open
    this.worker = new Worker(new URL('writer.js', self.location.href));
    // The writer opens the file (asynchronously): wait for it before the core blocks this thread.
    this.ready = new Promise((resolve, reject) => {
      this.worker.onmessage = ({ data }) => {
        if (data && data.error) return reject(new Error(data.error));
        this.opened = true;
        resolve();
      };
      this.worker.onerror = (e) => reject(new Error(`the writer worker failed to start: ${e.message || 'writer.js'}`));
    });
    this.worker.postMessage({ handles, sizes, ring: this.ring.buffer, control: this.control });
  }

  get ringBytes() { return WRITE_RING_BYTES; }
  get writerSeconds() { return this.times[0] / 1000; }

  // Copies data (a view of wasm memory) for file `file` at `offset` into the ring for the writer;
  // blocks while it is full.
  write(file, offset, data) {
    let lastProgress = performance.now();
    for (let done = 0; done < data.byteLength;) {
      this.throwIfFailed();
      const partsWritten = Atomics.load(this.ctl, 3);
      const room = WRITE_RING_BYTES - ((this.put - Atomics.load(this.ctl, 1)) >>> 0);
      if (room === 0 || ((this.partsPut - partsWritten) >>> 0) === WRITE_PARTS) {
        const t = performance.now();
        Atomics.wait(this.ctl, 3, partsWritten, 1000);
        const now = performance.now();
        this.waitMs += now - t;
        if (Atomics.load(this.ctl, 3) !== partsWritten) lastProgress = now;
        else if (now - lastProgress > WRITE_STALL_MS) throw new Error(`the output file could not be written for ${WRITE_STALL_MS / 1000} s`);
        continue;
      }
      const pos = this.put & (WRITE_RING_BYTES - 1);
      const k = Math.min(room, data.byteLength - done, WRITE_RING_BYTES - pos);
      this.ring.set(data.subarray(done, done + k), pos);
      const p = (this.partsPut & (WRITE_PARTS - 1)) * 3;
      this.parts[p] = file;
      this.parts[p + 1] = offset + done;
      this.parts[p + 2] = k;
      done += k;
      this.put = (this.put + k) | 0;
      this.partsPut = (this.partsPut + 1) | 0;
      Atomics.store(this.ctl, 0, this.put);
      Atomics.store(this.ctl, 2, this.partsPut);
      Atomics.notify(this.ctl, 2);
    }
  }

  // Waits until everything put is written and the files are closed.
  close() {
    this.finish(WriterState.CLOSE);
    this.throwIfFailed();
    if (Atomics.load(this.ctl, 4) !== WriterState.CLOSED)
      throw new Error(`the output file could not be finished in ${WRITE_STALL_MS / 1000} s`);
  }

  // Stops writing and closes the files (the caller then removes them). Never throws.
  abort() {
    try {
      this.finish(WriterState.ABORT);
    } catch {}
  }

  finish(request) {
    if (!this.opened) return this.worker.terminate();
    Atomics.compareExchange(this.ctl, 4, WriterState.OPEN, request);
    Atomics.notify(this.ctl, 2);  // the writer waits there for parts
    const t0 = performance.now();
    for (let state; (state = Atomics.load(this.ctl, 4)) !== WriterState.CLOSED && state !== WriterState.FAILED;) {
      Atomics.wait(this.ctl, 4, state, 1000);
      if (performance.now() - t0 > WRITE_STALL_MS) break;
    }
    this.worker.terminate();
  }

  throwIfFailed() {
    if (Atomics.load(this.ctl, 4) !== WriterState.FAILED) return;
    const len = Atomics.load(this.ctl, 5);
    throw new Error(`cannot write the output file: ${new TextDecoder().decode(this.message.slice(0, len))}`);
  }
}

// The output in the tab's memory, where the browser lets the page keep no files (WebKit in a
// private or automated session): each output file held as pieces of MEMORY_PIECE bytes, all
// allocated before the first byte (the core says each file's size up front), and handed over as
// a File of those pieces: no buffer of a whole file, whose largest size differs by browser.
const MEMORY_PIECE = 256 << 20;
function openMemory(names, sizes, piece = MEMORY_PIECE) {
  let pieces;
  try {
    pieces = sizes.map((n) => Array.from({ length: Math.ceil(n / piece) },
      (_, i) => new Uint8Array(Math.min(piece, n - i * piece))));
  } catch {
    const total = sizes.reduce((a, b) => a + b, 0);
    throw new Error(`the output (${total.toLocaleString('en')} bytes) does not fit in this tab's memory, and this ` +
      'browser lets the page keep no files: convert to a smaller type, or use a browser with an origin-private file system');
  }
  return {
    write: (file, offset, data) => {  // (a write may span pieces)
      for (let at = 0; at < data.length;) {
        const k = Math.floor((offset + at) / piece), o = (offset + at) % piece;
        const n = Math.min(data.length - at, piece - o);
        pieces[file][k].set(data.subarray(at, at + n), o);
        at += n;
      }
    },
    close: async () => {},
    abort: async () => { pieces = []; },
    // Each piece becomes a Blob of its own (the browser copies it; its buffer is let go at once),
    // and each File is made of those Blobs. WebKit holds the bytes given to one Blob in one buffer
    // of a 32-bit size: making a File of ArrayBuffers of ~3.8 GiB or more kills its tab (measured,
    // WebKitGTK 2.50: 3.75 GiB made, 3.875 GiB not), where a File of Blobs only refers to them.
    files: () => {
      const out = names.map((n, i) => new File(pieces[i].map((p, k) => {
        pieces[i][k] = null;
        return new Blob([p]);
      }), n));
      pieces = [];
      return out;
    },
  };
}
