// Conversion worker: loads the WebAssembly core (threaded when the page is cross-origin
// isolated, single-threaded otherwise), mounts the user's files read-only (WORKERFS reads
// Blob slices on demand, never whole files), and streams output pieces to disk. When threaded,
// a conversion's source bytes come from a reader worker instead (source_stream.js), streamed
// ahead of the core in the order it reads them.
// Thin by design: every decision is made in C++; this file only moves bytes.
'use strict';

// worker.js?verify: a worker of its own for Verify (single-threaded core), so that the page can
// cancel a long verify by ending the worker while the converting worker stays free for plans.
// worker.js?tokenize: the core's tokenizer, in a worker of its own (web/try_model.js offers it to the tests).
const ownWorker = ['verify', 'tokenize'].some((k) => new URLSearchParams(self.location.search).has(k));
const threaded = !ownWorker && self.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined';
const moduleName = threaded ? 'converter-mt.js' : 'converter-st.js';
const moduleUrl = new URL('dist/' + moduleName, self.location.href).href;
importScripts(moduleUrl);
importScripts('write_ring.js');  // the writer ring (threaded), sizeOutputFile, openMemory
importScripts('remote_file.js');  // files on the Hub, read by range (RemoteFile)
if (threaded) importScripts('source_stream.js');
// The reader worker needs BYOB reads of Blob streams; without them the core reads through WORKERFS.
const byobStreams = (() => {
  try {
    new Blob([]).stream().getReader({ mode: 'byob' }).releaseLock();
    return true;
  } catch {
    return false;
  }
})();

let M = null;          // the Emscripten module
let conv = null;       // C++ Converter
let mountCount = 0;
let mounted = null;    // current WORKERFS mount point
let openedImatrix = null;  // the importance matrix's File, opened again after a restart
let mountedFiles = new Map();  // its files by name
let lastOutput = null; // the last file written: { name, getFile }, for the nibble view
let outMount = null;   // its WORKERFS mount: { dir, path }
let cancelRequested = false;
let busy = false;

let opened = null;     // the last open's { files, label }: reopened when the core is reloaded
let ready = load();
function load() {
  return createConverter({
    mainScriptUrlOrBlob: moduleUrl,  // pthread workers load the module from here
    locateFile: (p) => new URL('dist/' + p, self.location.href).href,
    print: (s) => console.log(s),
    printErr: (s) => console.warn(s),
  }).then(started);
}
function started(m) {
  M = m;
  // A File that cannot be read any more (changed or removed after it was picked) makes
  // WORKERFS throw a DOMException through the core; turn it into EIO so that the core reports
  // it like any failed read, naming the file and tensor.
  const workerfs = M.FS.filesystems.WORKERFS.stream_ops;
  const read = workerfs.read;
  workerfs.read = function (...args) {
    try {
      return read.apply(this, args);
    } catch (e) {
      if (e instanceof M.FS.ErrnoError) throw e;
      fileChanged = e && e.remote ? e.message : true;  // said in the error (friendly): a Hub file says what failed
      throw new M.FS.ErrnoError(29);  // EIO
    }
  };
  conv = new M.Converter();
  const hw = self.navigator.hardwareConcurrency || 1;
  const catalog = JSON.parse(conv.catalog());  // the core's tables: quant types, formats, files it reads
  return { threaded, maxThreads: threaded ? Math.min(conv.maxThreads(), hw) : 0, hardwareConcurrency: hw, catalog };
}

// A trap (WebAssembly.RuntimeError: unreachable, memory access out of bounds, an Emscripten
// abort) or an uncaught C++ exception (thrown to JS as a number) leaves the core's memory in an
// unknown state: it is a bug in the converter, said so in one line with what trapped, and the
// core is loaded afresh (the open checkpoint reopened), so the page goes on. Anything else is
// an error the core or the browser described (a file that can no longer be read is named by it).
function describe(err) {
  if (err instanceof WebAssembly.RuntimeError || typeof err === 'number') {
    const what = typeof err === 'number' ? 'an uncaught C++ exception' : err.message;
    return { message: `the converter hit a bug and stopped (${what}); nothing was kept, and it was restarted: ` +
                      'please report this with the checkpoint\'s config.json', fatal: true };
  }
  if (err && err.name === 'NotReadableError')
    return { message: `cannot read a file of the checkpoint: it was changed or removed after it was picked (pick it again)` };
  return { message: friendly(err && err.message || err), advice: err && err.advice };
}
function reload() {
  try { if (M && M.PThread) M.PThread.terminateAllThreads(); } catch { /* the old core is dropped anyway */ }
  M = conv = null;
  mounted = null;
  mountedFiles = new Map();
  outMount = null;
  ready = load().then((info) => {
    if (opened) openMounted(opened.files, opened.label, opened.baseConfig);
    if (openedImatrix) conv.openImatrix(sliceReader(openedImatrix));
    return info;
  });
  ready.catch(() => {});  // the next request reports it
}

// Errors name files by their mount path; the user knows them by their own names. A read that
// failed because the browser would not read a File any more says why.
let fileChanged = false;
const friendly = (msg) => {
  let s = String(msg);
  for (const dir of [mounted, outMount && outMount.dir]) if (dir) s = s.split(dir + '/').join('');
  if (typeof fileChanged === 'string') s += ` (${fileChanged})`;
  else if (fileChanged) s += ' (the file was changed, moved or removed after it was picked: pick it again)';
  fileChanged = false;
  return s;
};

// The core's error: its technical line, and the advice it gives the user (wasm/bindings.cpp advice_of).
// (a read the browser refused: the core only knows that a read failed, this worker knows why)
const coreError = (r, suffix = '') => {
  const changed = fileChanged;
  const e = new Error(friendly(r.error) + suffix);
  e.advice = typeof changed === 'string' ? 'A file of the model could not be read from the Hub (said above): nothing was kept. ' +
    'Check the connection and try again; a file changed on the Hub needs the model opened again.'
    : changed ? 'A file of the checkpoint could not be read any more: a file changed, moved or removed after it was picked ' +
    'cannot be read. Pick the files again.' : r.advice ? friendly(r.advice) : '';
  return e;
};
function parse(json) {
  const r = JSON.parse(json);
  if (r && r.error) throw coreError(r);
  return r;
}

// Mounts a checkpoint's files, and a LoRA adapter's base model's config.json (baseConfig, a File
// from another folder, or null) under .base/ beside them: opens them in the core.
function openMounted(files, label, baseConfig) {
  if (mounted) {
    M.FS.unmount(mounted);
    M.FS.rmdir(mounted);
  }
  mounted = '/in' + ++mountCount;
  M.FS.mkdir(mounted);
  // (a file on the Hub: a RemoteFile, which WORKERFS reads as it reads a File)
  M.FS.mount(M.FS.filesystems.WORKERFS, { files: files.map((f) => isRemote(f) ? new RemoteFile(f) : f),
    blobs: baseConfig ? [{ name: '.base/config.json', data: baseConfig }] : [] }, mounted);
  mountedFiles = new Map(files.map((f) => [f.name, f]));
  return conv.open(mounted, label, baseConfig ? mounted + '/.base/config.json' : '');
}

// The last written file, mounted read-only beside the checkpoint (so the checkpoint stays open):
// the nibble view reads one group's bytes from it. Remounted after every conversion.
function unmountOutput() {
  if (!outMount) return;
  M.FS.unmount(outMount.dir);
  M.FS.rmdir(outMount.dir);
  outMount = null;
}
async function outputPath() {
  const out = lastOutput;
  if (!out) throw new Error('no written file yet: convert first');
  if (!outMount) {
    const file = await out.getFile();
    if (out !== lastOutput) throw new Error('the written file was replaced: try again');
    if (!outMount) {  // another request may have mounted it meanwhile
      const dir = '/out' + ++mountCount;
      M.FS.mkdir(dir);
      M.FS.mount(M.FS.filesystems.WORKERFS, { files: [file] }, dir);
      outMount = { dir, path: dir + '/' + file.name };
    }
  }
  return outMount.path;
}

// A file read by slices only (FileReaderSync of File.slice, on the core's demand): the core's
// JsSliceSource calls read(offset, length). It counts what it reads, so the page can say (and
// the tests check) that a 40 GB file cost its header's bytes. A failed read returns null: the
// core reports it, naming the file.
function sliceReader(file) {
  const fr = new FileReaderSync();
  const r = {
    name: file.name, size: file.size, bytes: 0, reads: 0,
    read(offset, length) {
      r.bytes += length;
      r.reads++;
      try {
        return new Uint8Array(fr.readAsArrayBuffer(file.slice(offset, offset + length)));
      } catch {
        return null;
      }
    },
  };
  return r;
}

// Output sinks: a FileSystemWritableFileStream (a file the user picked), a file in the
// origin private file system (OPFS) that the page then offers as a download, or, where the
// browser will not open its OPFS (WebKit in a private or automated session), the file in this
// worker's memory, handed to the page as a File when complete.
// A file being written is "<name>.partial" and takes its name only once complete, so a partial file
// never passes for an output (the page removes .partial files it finds at start-up: a reload or
// a closed tab mid-conversion). The Web Lock "leapconv-write:<partial name>" is held while it is
// written, so that another tab's clean-up leaves it alone.
const OPFS_DIR = 'leapconv-output';
const PARTIAL = '.partial';
function holdLock(name) {
  if (!self.navigator.locks) return Promise.resolve(() => {});
  return new Promise((resolve) => {
    self.navigator.locks.request('leapconv-write:' + name, () => new Promise((release) => resolve(release)));
  });
}
const PENDING_WRITE_BYTES = 32 << 20;

// The files a conversion writes: one, or the parts of a split GGUF (the core's start() lists them,
// each with its name's suffix, which goes before the extension: Model-00001-of-00003.gguf).
function outputNames(name, files) {
  const dot = name.lastIndexOf('.');
  const [base, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  return files.map((f) => base + f.suffix + ext);
}

// A sink over several files: write(file, offset, data) goes to the file'th; close and abort
// reach all of them.
async function openSink(target, files) {
  const names = outputNames(target.name, files), sizes = files.map((f) => f.bytes);
  if (target.kind === 'handle') {  // a file the user picked (one file)
    if (files.length !== 1) throw new Error('a split file is saved into a folder: pick one (Convert and save to…)');
    return openWritables([target.handle], target.handle.remove ? [() => target.handle.remove()] : []);
  }
  if (target.kind === 'directory') {  // a folder the user picked: the parts are created in it
    const handles = [];
    for (const n of names) handles.push(await target.handle.getFileHandle(n, { create: true }));
    return openWritables(handles, names.map((n) => () => target.handle.removeEntry(n)));
  }
  if (target.kind === 'memory') return openMemory(names, sizes);
  if (target.kind === 'stream') {  // (the download was announced with the plan's size)
    if (sizes[0] !== target.size) throw new Error(`internal error: the download was announced as ${target.size} bytes, the file is ${sizes[0]}`);
    return openStreamed(target.port, sizes);
  }
  return openOpfs(names, sizes);
}

// A streamed download (web/stream_save.js, sw.js): the core gives the file front to back
// (in_order); its bytes are copied out of wasm memory in batches and sent on the port, at most
// STREAM_WINDOW bytes ahead of what the download has taken.
const STREAM_BATCH = 1 << 20, STREAM_WINDOW = 16 << 20;
const STREAM_START_MS = 30000;   // the browser starts the download in well under a second
const STREAM_STALL_MS = 120000;  // nothing taken for this long: say so, do not hang
function openStreamed(port, sizes) {
  if (sizes.length !== 1) throw new Error('a split file is several files: it cannot be streamed to one download');
  let sent = 0, taken = 0, started = false, failed = null, wake = null, expect = 0, filled = 0;
  const batch = new Uint8Array(STREAM_BATCH);
  port.onmessage = ({ data }) => {
    if (data.type === 'started') started = true;
    else if (data.type === 'taken') taken = data.bytes;
    else if (data.type === 'cancelled') failed = 'the download was cancelled in the browser';
    wake?.();
  };
  const until = async (ok, ms, what) => {
    for (let t = performance.now(), last = taken; !ok();) {
      if (failed) throw new Error(failed);
      if (taken !== last) t = performance.now(), last = taken;
      else if (performance.now() - t > ms) throw new Error(what);
      await new Promise((resolve) => { wake = resolve; setTimeout(resolve, 1000); });
    }
    if (failed) throw new Error(failed);
  };
  const flush = async () => {
    await until(() => started, STREAM_START_MS, `the browser did not start the download in ${STREAM_START_MS / 1000} s`);
    await until(() => sent - taken <= STREAM_WINDOW, STREAM_STALL_MS, `the download took nothing for ${STREAM_STALL_MS / 1000} s`);
    const buffer = batch.slice(0, filled).buffer;
    port.postMessage({ type: 'bytes', buffer }, [buffer]);
    sent += filled;
    filled = 0;
  };
  return {
    write: async (file, offset, data) => {
      if (offset !== expect) throw new Error(`internal error: a piece at byte ${offset} of a file streamed front to back, at byte ${expect}`);
      expect += data.byteLength;
      for (let done = 0; done < data.byteLength;) {
        const n = Math.min(data.byteLength - done, STREAM_BATCH - filled);
        batch.set(data.subarray(done, done + n), filled);
        filled += n;
        done += n;
        if (filled === STREAM_BATCH) await flush();
      }
    },
    close: async () => {
      if (filled) await flush();
      if (expect !== sizes[0]) throw new Error(`internal error: ${expect} bytes streamed of ${sizes[0]}`);
      port.postMessage({ type: 'end' });
    },
    abort: async () => { port.postMessage({ type: 'abort', reason: 'the conversion stopped: no file was written' }); },
  };
}

// FileSystemWritableFileStreams: writes queue up in each stream, each with its own copy of the
// bytes (data views wasm memory, which the core reuses): wait only while PENDING_WRITE_BYTES are
// in flight, so the browser writes while the core converts.
async function openWritables(handles, removers) {
  const streams = [];
  for (const h of handles) streams.push(await h.createWritable({ keepExistingData: false }));
  const pending = [];
  let pendingBytes = 0;
  const settleOldest = async () => {
    const [write, n] = pending.shift();
    pendingBytes -= n;
    await write;
  };
  return {
    write: async (file, offset, data) => {
      const write = streams[file].write({ type: 'write', position: offset, data: data.slice() });
      write.catch(() => {});  // its failure is seen when it is awaited
      pending.push([write, data.byteLength]);
      pendingBytes += data.byteLength;
      while (pendingBytes > PENDING_WRITE_BYTES) await settleOldest();
    },
    close: async () => {
      while (pending.length) await settleOldest();
      for (const ws of streams) await ws.close();
    },
    // abort() discards what was written; the picker may have created empty files: remove them
    // too where the browser allows (FileSystemHandle.remove, Chromium).
    abort: async () => {
      for (const ws of streams) await ws.abort().catch(() => {});
      for (const remove of removers) await remove().catch(() => {});
    },
  };
}

// Files in the origin private file system, "<name>.partial" until all are complete.
async function openOpfs(names, sizes) {
  const root = await navigator.storage.getDirectory();
  const dir = await root.getDirectoryHandle(OPFS_DIR, { create: true });
  const partials = names.map((n) => n + PARTIAL);
  const releases = [], handles = [];
  const drop = async () => {
    for (const p of partials) await dir.removeEntry(p).catch(() => {});
    for (const release of releases) release();
  };
  try {
    for (const p of partials) {
      releases.push(await holdLock(p));
      await dir.removeEntry(p).catch(() => {});
      handles.push(await dir.getFileHandle(p, { create: true }));
    }
  } catch (e) {
    await drop();
    throw e;
  }
  // Complete: each partial file takes its output's name (replacing a kept file of that name).
  const commit = async () => {
    try {
      for (const [i, fh] of handles.entries()) {
        await dir.removeEntry(names[i]).catch(() => {});
        await fh.move(names[i]);
      }
    } catch (e) {
      for (const n of [...partials, ...names]) await dir.removeEntry(n).catch(() => {});  // all or none
      throw new Error(`cannot name the written file ${names[0]}: ${e && e.message || e}`);
    } finally {
      for (const release of releases) release();
    }
  };
  let writerLate = false;
  if (threaded) {  // a writer worker writes while this thread goes on converting
    const ring = new WriteRing(handles, sizes);
    try {
      writerLate = !await Promise.race([ring.ready.then(() => true), sleep(HELPER_START_MS).then(() => false)]);
    } catch (e) {
      ring.abort();
      await drop();
      throw e;
    }
    if (writerLate) {  // (said in the summary: writer_late)
      ring.ready.catch(() => {});
      ring.abort();  // (not started: the worker is ended, and the files it may have opened are let go)
    } else return {
      write: (file, offset, data) => ring.write(file, offset, data),
      close: async () => { await ring.close(); await commit(); },
      abort: async () => {
        ring.abort();  // the writer closes the files first: they cannot be removed while open
        await drop();
      },
      stats: () => ({ write_ring_bytes: ring.ringBytes, write_wait_seconds: ring.waitMs / 1000,
                      writer_seconds: ring.writerSeconds }),
    };
  }
  const access = [];
  const closeAll = () => { for (const a of access) a.close(); };
  try {
    for (const [i, fh] of handles.entries()) {
      access.push(await syncAccess(fh, writerLate ? HELPER_START_MS : 0));
      sizeOutputFile(access[i], sizes[i]);
    }
  } catch (e) {
    closeAll();
    await drop();
    throw e;
  }
  return {
    write: (file, offset, data) => {  // straight from wasm memory, no copy
      let done = 0;
      while (done < data.byteLength) done += access[file].write(data.subarray(done), { at: offset + done });
    },
    // No flush(): it is an fsync, waiting for the disk (0.9 s of a 1.1 GB file here), and the
    // written bytes are already the file's for every reader (the download copies them); the
    // native CLI does not fsync either.
    close: async () => { closeAll(); await commit(); },
    abort: async () => { closeAll(); await drop(); },
    ...(writerLate ? { stats: () => ({ writer_late: true }) } : {}),
  };
}

// Firefox ESR now and then never loads a nested worker (the converter's thread pool at start,
// web/app.js; here the writer and the reader: "opening the output file" or "starting the reader"
// for good). Their work is only moved off this thread: when one has not started in
// HELPER_START_MS (they start in well under a second), this worker writes the file or reads the
// files itself, as the single-threaded page does.
const HELPER_START_MS = 10000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
// A file's sync access handle; for up to `patienceMs` while another holder (an ended writer
// worker) still has it: the browser lets it go asynchronously.
async function syncAccess(fh, patienceMs) {
  for (const t0 = performance.now(); ;) {
    try {
      return await fh.createSyncAccessHandle();
    } catch (e) {
      if (e?.name !== 'NoModificationAllowedError' || performance.now() - t0 > patienceMs) throw e;
      await sleep(100);
    }
  }
}

// Lets queued messages ('cancel') in: a message to ourselves, since nested setTimeout(0) waits
// at least 4 ms each time.
const yieldChannel = new MessageChannel();
const yieldToEvents = () => new Promise((resolve) => {
  yieldChannel.port1.onmessage = () => resolve();
  yieldChannel.port2.postMessage(null);
});

// The files behind the core's shards (named by their mount paths), in its shard order.
function shardFiles(names) {
  return names.map((n) => {
    const f = mountedFiles.get(n.slice(mounted.length + 1));
    if (!f) throw new Error(`internal error: ${n} is not mounted`);
    return f;
  });
}

async function convert({ options, target, threads }) {
  cancelRequested = false;
  lastOutput = null;  // about to be replaced (OPFS) or rewritten
  unmountOutput();
  // The clock starts here: the first seconds (planning, opening the shards and the output) are
  // part of the conversion's time, and the page says what they are.
  const t0 = performance.now();
  const phase = (what) => postMessage({ type: 'phase', what, seconds: (performance.now() - t0) / 1000 });
  let streamed = threaded && byobStreams;  // the ring between reader and core is shared memory
  let reader = null, readerLate = false;
  if (streamed) {  // started first: if it does not start, the core reads the files itself (on demand)
    phase('starting the reader');
    reader = await startReader(HELPER_START_MS);
    if (!reader) streamed = false, readerLate = true;
  }
  let sink = null, stream = null, setupSeconds = 0;
  try {
    phase('planning and opening the shards');
    const started = parse(conv.start(JSON.stringify({ ...options, streamed_reads: streamed, in_order: target.kind === 'stream' }), threads));
    const { read_order: readOrder, read_files: readFiles, ...facts } = started;
    if (streamed) {
      stream = new SourceStream(reader, shardFiles(readFiles), readOrder, M.wasmMemory);
      self.leapconvSourceStream = stream;
    }
    postMessage({ type: 'started', ...facts });
    phase('opening the output file');
    sink = await openSink(target, started.files);
    phase('reading the first tensor');
    // (Chromium: the reader, a nested worker, needs this thread's event loop until its first
    // bytes are in: a core that blocked on the ring at once never got one. Measured, with a sink
    // that opens without waiting, as the tab's memory and a streamed download do.)
    if (stream) await stream.firstBytes(HELPER_START_MS);
    setupSeconds = (performance.now() - t0) / 1000;
    let lastPost = 0, lastYield = performance.now();
    let coreMs = 0, writeMs = 0;  // where the time goes, for the summary
    for (;;) {
      if (cancelRequested) throw new Error('cancelled');
      const a = performance.now();
      const r = conv.next();
      if (r.error) throw coreError(r);
      const b = performance.now();
      for (const p of r.pieces) await sink.write(p.file, p.offset, p.data);
      const now = performance.now();
      coreMs += b - a;
      writeMs += now - b;
      if (r.done || now - lastPost > 250) {  // the page redraws on each
        lastPost = now;
        postMessage({ type: 'progress', item: r.item, n_items: r.n_items, items_done: r.items_done, item_name: r.item_name, done: r.done,
                      source_done: r.source_done, source_total: r.source_total, seconds: (now - t0) / 1000 });
      }
      if (r.done) break;
      if (now - lastYield > 50) {  // let 'cancel' messages in
        lastYield = now;
        await yieldToEvents();
      }
    }
    const closeStart = performance.now();
    await sink.close();
    const closeMs = performance.now() - closeStart;
    const summary = parse(conv.finish());
    summary.seconds = (performance.now() - t0) / 1000;
    summary.setup_seconds = setupSeconds;  // of which before the first tensor: planning, opening
    summary.core_seconds = coreMs / 1000;    // reading + converting (C++)
    summary.write_seconds = writeMs / 1000;  // handing pieces to the sink (to the writer ring, if threaded)
    summary.close_seconds = closeMs / 1000;  // closing it (the browser commits the file)
    summary.streamed_reads = streamed;
    if (readerLate) summary.reader_late = true;  // (the page says it)
    if (stream) {
      summary.reader_wait_seconds = stream.waitMs / 1000;  // the core waiting for the reader
      summary.read_ring_bytes = stream.ringBytes;
      [summary.reader_file_seconds, summary.reader_full_seconds] = stream.readerSeconds;
    }
    if (sink.stats) Object.assign(summary, sink.stats());
    summary.wasm_heap_bytes = M.HEAP8.buffer.byteLength;  // memory only grows: this is the peak
    summary.sink = target.kind;
    summary.name = target.name;
    summary.outputs = outputNames(target.name, started.files);  // the files written (a split file: its parts)
    if (sink.files) summary.files = sink.files();  // (File objects: the page keeps them)
    const held = summary.files?.[0];
    lastOutput = target.kind === 'stream' ? null : {  // (a streamed file is in the downloads, out of reach)
      name: target.name,
      getFile: held ? async () => held : target.kind === 'handle' ? () => target.handle.getFile() : async () => {
        const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(OPFS_DIR);
        return (await dir.getFileHandle(target.name)).getFile();
      },
    };
    postMessage({ type: 'done', summary });
  } catch (e) {
    try { conv.cancel(); } catch { /* a core that trapped: reloaded by the caller */ }
    if (sink) await sink.abort().catch(() => {});  // no partial output is kept, whatever failed
    throw e;
  } finally {
    if (stream) stream.close();
    else if (reader) reader.terminate();
    self.leapconvSourceStream = null;
  }
}

// The core's tokenizer calls this to run a pre-tokenizer pattern (JavaScript's RegExp has the
// Unicode classes they use) on UTF-8 bytes: the pieces of their text, matches and what lies
// between them, in order. (A leading U+FEFF is text here: ignoreBOM.)
const patterns = new Map();
const utf8Text = new TextDecoder('utf-8', { ignoreBOM: true });
function splitByPattern(bytes, pattern) {
  const text = utf8Text.decode(bytes.slice());  // a copy: the view may be on shared memory
  let re = patterns.get(pattern);
  if (!re) patterns.set(pattern, (re = new RegExp(pattern, 'gu')));
  const out = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[0]) out.push(m[0]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}
let tokenizerOf = null;  // the file whose vocabulary the core's tokenizer holds: { key, info }

const handlers = {
  async init() { return ready; },
  async open({ files, label, baseConfig = null }) {
    await ready;
    // the core's open drops a running conversion: the page never asks for that, refuse it here too
    if (busy) throw new Error('a conversion is running: cancel it before opening another checkpoint');
    lastOutput = null;
    unmountOutput();
    opened = null;
    const r = parse(openMounted(files, label, baseConfig));
    opened = { files, label, baseConfig };
    return r;
  },
  // Which of these files the core reads as a GGUF / GGUF-lite / LEAP file (by the magic in its
  // first bytes): [{ index, format }] of each.
  async recognize({ files }) {
    await ready;
    const fr = new FileReaderSync();
    const hits = [];
    for (let i = 0; i < files.length; i++) {
      const format = conv.recognize(new Uint8Array(fr.readAsArrayBuffer(files[i].slice(0, 4))));
      if (format) hits.push({ index: i, format });
    }
    return hits;
  },
  // Opens an existing file (its header only, by slices): what the core makes of it, and what
  // reading it cost.
  // files: every part of a split GGUF, together (any order).
  async openFile({ file, files = [file] }) {
    await ready;
    const readers = files.map(sliceReader);
    const t0 = performance.now();
    const info = parse(conv.openFile(readers));
    const sum = (k) => readers.reduce((n, r) => n + r[k], 0);
    info.read = { bytes: sum('bytes'), reads: sum('reads'), seconds: (performance.now() - t0) / 1000,
                  size: files.reduce((n, f) => n + f.size, 0) };
    return info;
  },
  // The tokens llama.cpp makes of each text with this GGUF's vocabulary (the core's tokenizer,
  // opened once per file from its header): what the tokenizer is, and per text [[id, begin,
  // end], ...] with byte offsets into the text's UTF-8.
  async tokenize({ file, texts }) {
    await ready;
    const key = `${file.name}\u0000${file.size}\u0000${file.lastModified}`;
    if (tokenizerOf?.key !== key) {
      tokenizerOf = null;
      tokenizerOf = { key, info: parse(conv.openTokenizer(sliceReader(file))) };
    }
    const tokens = texts.map((t) => parse(conv.tokenize(t, true, true, splitByPattern)).tokens);
    return { ...tokenizerOf.info, tokens };
  },
  // An importance matrix beside the checkpoint: read whole by the core and kept for the
  // conversions asked with {imatrix: true}. What it holds and covers, or its error.
  async openImatrix({ file }) {
    await ready;
    openedImatrix = null;
    const info = parse(conv.openImatrix(sliceReader(file)));
    openedImatrix = file;
    return info;
  },
  async closeImatrix() {
    await ready;
    openedImatrix = null;
    conv.closeImatrix();
  },
  async closeFile() {
    await ready;
    conv.closeFile();
    return null;
  },
  // Verify in a worker of its own (worker.js?verify): the checkpoint's files and the file to
  // verify (written or opened) are handed over. The core verifies in steps (a tensor each, then
  // the forward check); 'verify-progress' says k of N, one-based, at most every 100 ms and at the
  // end. The page ends the worker to cancel.
  async verifyFile({ files, label, baseConfig, output, paramBudget }) {
    await ready;
    parse(openMounted(files, label, baseConfig));
    parse(conv.openFile((Array.isArray(output) ? output : [output]).map(sliceReader)));  // a split file: its parts
    const t0 = performance.now();
    const { n_steps: nSteps } = parse(conv.verifyStart(paramBudget || 0));
    let posted = 0, lastPost = 0, last = '';
    for (;;) {
      const r = conv.verifyStep();
      if (r.error) throw coreError(r, last ? ` (after ${last})` : '');
      last = r.what;
      const now = performance.now();
      if (r.step > posted && (now - lastPost > 100 || r.step === nSteps)) {
        posted = r.step;
        lastPost = now;
        postMessage({ type: 'verify-progress', step: r.step, n_steps: nSteps, what: r.what, seconds: (now - t0) / 1000 });
      }
      if (r.done) break;
    }
    const report = parse(conv.verifyFinish());
    report.seconds = (performance.now() - t0) / 1000;
    return report;
  },
  async plan({ options }) {
    await ready;
    return parse(conv.plan(JSON.stringify(options)));
  },
  // The options' GGUF rules as llama-quantize's --tensor-type-file ({type, lines, text}), or {why}.
  async tensorTypeFile({ options }) {
    await ready;
    return parse(conv.tensorTypeFile(JSON.stringify(options)));
  },
  // Reads the written file back: every tensor against fake-quant(source), then the forward pass
  // (per layer and logits) within a parameter budget, so a 70B model checks a few layers.
  async verify({ paramBudget }) {
    await ready;
    const path = await outputPath();
    const t0 = performance.now();
    const report = parse(conv.verify(path, paramBudget || 0));
    report.seconds = (performance.now() - t0) / 1000;
    return report;
  },
  // One Q4 group laid open: { source: 'example' | 'checkpoint' | 'file', tensor, row, group }.
  async groupView({ request }) {
    await ready;
    const r = { ...request };
    if (r.source === 'file') r.path = await outputPath();
    return parse(conv.groupView(JSON.stringify(r)));
  },
  async convert(msg) {
    await ready;
    if (busy) throw new Error('a conversion is already running');
    busy = true;
    try { await convert(msg); } finally { busy = false; }
    return null;
  },
};

self.onmessage = async (e) => {
  const msg = e.data;
  if (msg.type === 'cancel') { cancelRequested = true; return; }
  const h = handlers[msg.type];
  if (!h) return;
  try {
    const result = await h(msg);
    postMessage({ type: msg.type + ':ok', id: msg.id, result });
  } catch (err) {
    const { message, fatal, advice } = describe(err);
    if (fatal) reload();
    postMessage({ type: msg.type + ':error', id: msg.id, error: message, advice, cancelled: cancelRequested && !fatal });
  }
};
