// Writer worker: owns the output files in the origin private file system (one, or every part of a
// split GGUF) and writes the pieces the converting worker puts into a ring of shared memory
// (write_ring.js is the other side), at their files' offsets, in the order they were put.
'use strict';

importScripts('write_ring.js');  // the shared control block's layout (writeControlViews), sizeOutputFile

self.onmessage = async ({ data: { handles, sizes, ring, control } }) => {
  const access = [];
  const closeAll = () => { for (const a of access) try { a.close(); } catch {} };
  try {
    for (const [i, handle] of handles.entries()) {
      access.push(await handle.createSyncAccessHandle());
      sizeOutputFile(access[i], sizes[i]);
    }
  } catch (e) {
    closeAll();
    self.postMessage({ error: `cannot open the output file: ${e && e.message || e}` });
    return;
  }
  self.postMessage({});

  const bytes = new Uint8Array(ring);
  const { ctl, times, parts, message } = writeControlViews(control);
  let written = Atomics.load(ctl, 1);
  let partsWritten = 0;
  try {
    for (;;) {
      const partsPut = Atomics.load(ctl, 2);
      const state = Atomics.load(ctl, 4);
      if (state === WriterState.ABORT) break;
      if (partsPut === partsWritten) {
        if (state === WriterState.CLOSE) break;
        Atomics.wait(ctl, 2, partsPut, 1000);
        continue;
      }
      const p = (partsWritten & (WRITE_PARTS - 1)) * 3;
      const file = access[parts[p]], at = parts[p + 1], n = parts[p + 2];
      const pos = written & (WRITE_RING_BYTES - 1);
      const view = bytes.subarray(pos, pos + n);
      const t = performance.now();
      for (let done = 0; done < n;) {
        const k = file.write(view.subarray(done), { at: at + done });
        if (!(k > 0)) throw new Error(`the browser wrote no bytes at offset ${at + done}`);
        done += k;
      }
      times[0] += performance.now() - t;
      written = (written + n) | 0;
      partsWritten = (partsWritten + 1) | 0;
      Atomics.store(ctl, 1, written);
      Atomics.store(ctl, 3, partsWritten);
      Atomics.notify(ctl, 3);
    }
    closeAll();
    Atomics.store(ctl, 4, WriterState.CLOSED);
  } catch (e) {
    closeAll();
    const msg = new TextEncoder().encode(String(e && e.message || e)).subarray(0, message.length);
    message.set(msg);
    Atomics.store(ctl, 5, msg.length);
    Atomics.store(ctl, 4, WriterState.FAILED);
  }
  Atomics.notify(ctl, 4);
  Atomics.notify(ctl, 3);  // a converter waiting for room sees the failure
};
