// The converting worker's side of streamed reads. The C++ core says in which order it will
// read the shards (its read order: [shard, offset, size] ranges); a reader worker (reader.js)
// streams exactly those bytes into a ring of shared memory, and read() hands them to the core
// (wasm/streamed_source.h) as it asks, checking that each request is the next in the order.
'use strict';

const RING_BYTES = 32 << 20;  // a power of two (positions are 32-bit counters modulo its size)
const STALL_MS = 120000;      // no byte for this long: report it instead of waiting for ever
// Where the byte counters start: 64 KiB before they turn negative as int32, so that every
// conversion crosses the wrap-around that only multi-GiB models would otherwise reach.
const COUNTER_START = 0x7fff0000;

// The control block both workers share: Int32 words [0] bytes written, [1] bytes consumed
// (both modulo 2^32; the ring's size is a power of two, so they also give ring positions),
// [2] the reader's state (0 reading, 1 finished, 2 failed), [3] the error message's length;
// two doubles: the reader's milliseconds waiting for the file and for room in the ring; then
// the UTF-8 error message.
const CONTROL_BYTES = 32 + 1024;
function controlViews(control) {
  return { ctl: new Int32Array(control, 0, 4), times: new Float64Array(control, 16, 2),
           message: new Uint8Array(control, 32) };
}

// The reader worker, started before the conversion plans its reads: resolves to it once it has
// loaded, or to null when it has not within ms (Firefox ESR now and then never loads a nested
// worker; the converter then reads the files itself). A nested worker starts only while its
// parent's event loop runs: await this before the core blocks this thread waiting for bytes.
function startReader(ms) {
  const worker = new Worker(new URL('reader.js', self.location.href));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { worker.terminate(); resolve(null); }, ms);
    worker.onmessage = () => { clearTimeout(timer); resolve(worker); };
    worker.onerror = (e) => {
      clearTimeout(timer);
      worker.terminate();
      reject(new Error(`the reader worker failed to start: ${e.message || 'reader.js'}`));
    };
  });
}

class SourceStream {
  // worker: a started reader (startReader); files: File per shard, in the core's shard order;
  // memory: the module's WebAssembly.Memory.
  constructor(worker, files, order, memory) {
    this.order = order;
    this.memory = memory;
    this.ring = new Uint8Array(new SharedArrayBuffer(RING_BYTES));
    this.control = new SharedArrayBuffer(CONTROL_BYTES);
    ({ ctl: this.ctl, times: this.times, message: this.message } = controlViews(this.control));
    this.range = 0;     // index in order of the next read
    this.within = 0;    // bytes of that range already handed over
    this.consumed = COUNTER_START;  // bytes taken from the ring, modulo 2^32
    Atomics.store(this.ctl, 0, COUNTER_START);
    Atomics.store(this.ctl, 1, COUNTER_START);
    this.waitMs = 0;    // time the core waited for the reader
    this.worker = worker;
    this.worker.postMessage({ files, order, ring: this.ring.buffer, control: this.control });
  }

  get ringBytes() { return RING_BYTES; }
  // The reader's time: [waiting for the file, waiting for room in the ring], in seconds.
  get readerSeconds() { return [this.times[0] / 1000, this.times[1] / 1000]; }

  // Copies the next n bytes into wasm memory at dst. Returns '' or what went wrong.
  // Resolves once the reader has put its first bytes in the ring, or ended, or after ms (the
  // core's own stall check says the rest): the converting thread may then block on the ring.
  async firstBytes(ms) {
    for (const t0 = performance.now(); Atomics.load(this.ctl, 0) === COUNTER_START && Atomics.load(this.ctl, 2) === 0;) {
      if (performance.now() - t0 > ms) return;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  read(shard, offset, dst, n) {
    const r = this.order[this.range];
    if (!r || r[0] !== shard || r[1] + this.within !== offset || this.within + n > r[2])
      return `internal error: a read of ${n} bytes at offset ${offset} is not the next in the read order`;
    const heap = new Uint8Array(this.memory.buffer);  // after any growth of the heap
    let lastByte = performance.now();
    for (let done = 0; done < n;) {
      const written = Atomics.load(this.ctl, 0);
      const avail = (written - this.consumed) >>> 0;
      if (avail === 0) {
        const state = Atomics.load(this.ctl, 2);
        if (state === 2) return this.failure();
        if (state === 1) return 'internal error: the reader finished before the converter';
        const t = performance.now();
        Atomics.wait(this.ctl, 0, written, 1000);
        const now = performance.now();
        this.waitMs += now - t;
        if (now - lastByte > STALL_MS) return `no bytes could be read for ${STALL_MS / 1000} s`;
        continue;
      }
      const pos = this.consumed & (RING_BYTES - 1);
      const k = Math.min(avail, n - done, RING_BYTES - pos);
      heap.set(this.ring.subarray(pos, pos + k), dst + done);
      done += k;
      this.consumed = (this.consumed + k) | 0;
      Atomics.store(this.ctl, 1, this.consumed);
      Atomics.notify(this.ctl, 1);
      lastByte = performance.now();
    }
    this.within += n;
    if (this.within === r[2]) {
      this.range++;
      this.within = 0;
    }
    return '';
  }

  failure() {
    const len = Atomics.load(this.ctl, 3);
    return new TextDecoder().decode(this.message.slice(0, len));
  }

  close() { this.worker.terminate(); }
}
