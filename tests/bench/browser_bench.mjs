// Browser half of scripts/bench.sh: converts a checkpoint folder (LEAP v2, or FORMAT) in headless
// Chromium through the OPFS path and prints MB/s, memory and CPU; compares with a native output.
// Environment: FORMAT (a value of the format menu, default leap-2), BENCH_RUNS (conversions in the tab, default 3), THREADS, CHUNK_MB,
// BENCH_SINK=picked (the "Convert and save to…" path instead), BENCH_CONSOLE (print the page's console),
// BENCH_FLOORS=1 (then also what the browser's own reading and writing cost alone: see floors()).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';

// Two files byte for byte, 64 MiB at a time (a file may pass Node's 2 GiB Buffer limit).
function sameBytes(a, b) {
  if (fs.statSync(a).size !== fs.statSync(b).size) return false;
  const fa = fs.openSync(a, 'r'), fb = fs.openSync(b, 'r');
  const x = Buffer.alloc(64 << 20), y = Buffer.alloc(64 << 20);
  try {
    for (;;) {
      const n = fs.readSync(fa, x, 0, x.length, null), m = fs.readSync(fb, y, 0, y.length, null);
      if (n !== m || !x.subarray(0, n).equals(y.subarray(0, m))) return false;
      if (n === 0) return true;
    }
  } finally {
    fs.closeSync(fa);
    fs.closeSync(fb);
  }
}
import { launchOptions, savePickerIntoOpfs } from '../browser/harness.mjs';

const [model, nativeOut] = process.argv.slice(2);
if (!model || !fs.existsSync(path.join(model, 'config.json'))) {
  console.error('usage: node tests/bench/browser_bench.mjs <checkpoint folder> [native output to compare]');
  process.exit(2);
}

// Chromium's processes, from Linux's /proc: [{ pid, type }] (type: browser, renderer, gpu-process, ...).
function chromiumProcesses() {
  const out = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes('chrom')) out.push({ pid, type: (cmd.match(/--type=([a-z-]+)/) || [, 'browser'])[1] });
    } catch {}  // gone meanwhile
  }
  return out;
}

// Peak resident memory of the busiest Chromium renderer (the tab and its workers): what
// converting costs the tab, whatever the page itself reports.
function rendererPeakMiB() {
  let peak = 0;
  for (const { pid } of chromiumProcesses().filter((p) => p.type === 'renderer')) {
    try {
      const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
      if (m) peak = Math.max(peak, Number(m[1]) / 1024);
    } catch {}  // gone meanwhile
  }
  return peak;
}
// CPU seconds (user + system) of Chromium's processes, split by process type and thread name:
// where a conversion's CPU goes (the tab's workers, the browser process reading the files).
// Threads that ended during the run (workers the page terminated) count under "ended threads".
const TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
function cpuSeconds(statPath) {
  const stat = fs.readFileSync(statPath, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), seconds: (Number(f[11]) + Number(f[12])) / TICKS };
}
function chromiumCpu() {
  const threads = new Map();    // "pid/tid" -> { pid, group, seconds }
  const processes = new Map();  // pid -> { type, seconds } (ended threads included)
  for (const { pid, type } of chromiumProcesses()) {
    try {
      processes.set(pid, { type, seconds: cpuSeconds(`/proc/${pid}/stat`).seconds });
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
        const { name, seconds } = cpuSeconds(`/proc/${pid}/task/${tid}/stat`);
        threads.set(`${pid}/${tid}`, { pid, group: `${type}:${name}`, seconds });
      }
    } catch {}  // gone meanwhile
  }
  return { threads, processes };
}
function cpuSplit(before, after) {
  const groups = new Map();
  const add = (g, d) => groups.set(g, (groups.get(g) || 0) + d);
  let total = 0;
  const live = new Map();  // pid -> CPU of its threads still alive
  for (const [key, { pid, group, seconds }] of after.threads) {
    const d = seconds - (before.threads.get(key)?.seconds || 0);
    live.set(pid, (live.get(pid) || 0) + d);
    if (d > 0) add(group, d);
  }
  for (const [pid, { type, seconds }] of after.processes) {
    const d = seconds - (before.processes.get(pid)?.seconds || 0);
    total += d;
    const ended = d - (live.get(pid) || 0);
    if (ended > 0.005) add(`${type}:ended threads`, ended);
  }
  const top = [...groups].sort((a, b) => b[1] - a[1]).filter(([, s]) => s >= 0.05);
  return { total, text: `CPU ${total.toFixed(2)} s: ` + top.map(([g, s]) => `${g} ${s.toFixed(2)}`).join(', ') };
}
// The browser's floors, measured in the same tab with nothing converting: reading every shard the
// way reader.js reads them (32 MiB BYOB segments, four at once) and writing `outBytes` into an
// OPFS file the way writer.js writes (a sync access handle, 4 MiB writes into a file sized
// first), the latter twice: after a pause, when this VM has taken the memory of the last run's
// files back (free page reporting: fresh pages are slow to touch, as a conversion meets them),
// and at once after another write (the pages still warm, as on a machine without that).
// Returns { read, fresh, warm }, each { seconds, cpu } (CPU of all Chromium's processes).
const floorWriter = `onmessage = async ({ data: size }) => {
  const root = await navigator.storage.getDirectory();
  const h = await root.getFileHandle('bench-floor', { create: true });
  const a = await h.createSyncAccessHandle();
  a.truncate(0);
  a.truncate(size);
  const buf = new Uint8Array(4 << 20).map((_, i) => i * 7);
  const t = performance.now();
  for (let at = 0; at < size; at += buf.length) a.write(buf.subarray(0, Math.min(buf.length, size - at)), { at });
  const seconds = (performance.now() - t) / 1000;
  a.close();
  await root.removeEntry('bench-floor');
  postMessage(seconds);
};`;
async function floors(page, model, outBytes) {
  // The shards as a fresh input's Files (the page lets go of the folder it was given).
  await page.evaluate(() => {
    const input = Object.assign(document.createElement('input'), { type: 'file', multiple: true, id: 'bench-floor-files', hidden: true });
    document.body.append(input);
  });
  await page.setInputFiles('#bench-floor-files', fs.readdirSync(model).filter((f) => f.endsWith('.safetensors')).map((f) => path.join(model, f)));
  const cpuOf = (c) => [...c.processes.values()].reduce((t, p) => t + p.seconds, 0);
  const timed = async (f) => {
    execFileSync('sync');
    const before = cpuOf(chromiumCpu());
    const seconds = await f();
    return { seconds, cpu: cpuOf(chromiumCpu()) - before };
  };
  const read = await timed(() => page.evaluate(async () => {
    const files = [...document.getElementById('bench-floor-files').files];
    const SEGMENT = 32 << 20, LANES = 4, READ = 4 << 20;
    const segments = [];
    for (const [i, f] of files.entries()) for (let at = 0; at < f.size; at += SEGMENT) segments.push([i, at, Math.min(SEGMENT, f.size - at)]);
    const reading = new Set();  // (a stream reachable only from its pending read can be collected)
    const readSegment = async ([i, at, n], buffer) => {
      const reader = files[i].slice(at, at + n).stream().getReader({ mode: 'byob' });
      reading.add(reader);
      for (let got = 0; got < n;) {
        const { value } = await reader.read(new Uint8Array(buffer, got, Math.min(READ, n - got)));
        buffer = value.buffer;
        got += value.byteLength;
      }
      reading.delete(reader);
      return buffer;
    };
    const t = performance.now();
    const spare = [], inFlight = [];
    let next = 0;
    const launch = () => { if (next < segments.length) inFlight.push(readSegment(segments[next++], spare.pop() || new ArrayBuffer(SEGMENT))); };
    for (let i = 0; i < LANES; ++i) launch();
    while (inFlight.length) {
      spare.push(await inFlight.shift());
      launch();
    }
    return (performance.now() - t) / 1000;
  }));
  const write = () => page.evaluate(async ({ src, size }) => {
    const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
    try {
      return await new Promise((resolve, reject) => {
        w.onmessage = ({ data }) => resolve(data);
        w.onerror = (e) => reject(new Error(e.message));
        w.postMessage(size);
      });
    } finally {
      w.terminate();
    }
  }, { src: floorWriter, size: outBytes });
  await new Promise((r) => setTimeout(r, 8000));
  const fresh = await timed(write);
  const warm = await timed(write);
  return { read, fresh, warm };
}

const server = await startServer(0);
// A persistent profile, as a real user has: an incognito-style context keeps OPFS in memory,
// which Chromium writes here at ~60 MB/s against ~400 MB/s for the disk-backed one.
const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'leapconv-bench-profile-'));
const context = await chromium.launchPersistentContext(profile, {
  ...launchOptions,
  acceptDownloads: true,
});
try {
  // BENCH_SINK=picked: "Convert and save to…" instead of the OPFS path, on a file in OPFS handed
  // to the page as the picked one (as the end-to-end test does).
  const picked = process.env.BENCH_SINK === 'picked';
  if (picked) await context.addInitScript(savePickerIntoOpfs);
  const page = await context.newPage();
  if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.log('console:', m.text()));
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  await page.waitForFunction(() => document.body.dataset.state === 'idle', null, { timeout: 60000 });
  await page.setInputFiles('#folder-input', model);
  await page.waitForFunction(() => ['ready', 'error'].includes(document.body.dataset.state), null, { timeout: 60000 });
  if (process.env.CHUNK_MB) await page.evaluate((c) => { window.__leapconv.chunkMb = c; }, Number(process.env.CHUNK_MB));
  if (process.env.THREADS) await page.evaluate((t) => { window.__leapconv.threads = t; }, Number(process.env.THREADS));
  await page.selectOption('#format', process.env.FORMAT || 'leap-2');  // a value of the format menu
  // Several conversions in the same tab, each printed: the first also pays for compiling the
  // module's hot code and, on a fresh VM, for the first touch of guest memory.
  const runs = Number(process.env.BENCH_RUNS || 3);
  const rates = [];
  const cpus = [];
  let outBytes = 0, sourceBytes = 0;
  for (let run = 1; run <= runs; ++run) {
    await page.waitForFunction(() => !document.getElementById('convert').disabled);
    const download = picked ? null : page.waitForEvent('download', { timeout: 600000 });
    await page.evaluate(() => { document.body.dataset.state = 'starting'; });  // not the last run's 'done'
    const cpuBefore = chromiumCpu();
    await page.click(picked ? '#save-as' : '#convert');
    await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 600000, polling: 50 });
    const cpuAfter = chromiumCpu();
    const d = await download;
    const s = await page.evaluate(() => window.__leapconv.summary);
    if (!s) throw new Error(await page.textContent('#error'));
    const src = s.breakdown.source_bytes;
    rates.push(src / 1e6 / s.seconds);
    cpus.push({ total: cpuSplit(cpuBefore, cpuAfter).total, writes: s.writer_seconds || 0 });
    sourceBytes = src;
    if (d) outBytes = fs.statSync(await d.path()).size;
    console.log(`${`browser ${process.env.FORMAT || 'leap-2'} (${picked ? 'picked file' : 'OPFS'}, ${s.worker_threads_used} thr) #${run}`.padEnd(28)} ${s.seconds.toFixed(2).padStart(6)} s  ` +
      `${(src / 1e6 / s.seconds).toFixed(0).padStart(7)} MB/s  wasm heap ${(s.wasm_heap_bytes / 2 ** 20).toFixed(0)} MiB ` +
      `(ceiling 2048 MiB), pipeline buffers ${(s.pipeline_buffer_bytes / 2 ** 20).toFixed(0)} MiB, ` +
      `${s.worker_threads_used} worker threads` +
      (s.streamed_reads ? `, read ring ${(s.read_ring_bytes / 2 ** 20).toFixed(0)} MiB` : '') +
      `, renderer peak RSS ${rendererPeakMiB().toFixed(0)} MiB` +
      `; ${s.core_seconds.toFixed(2)} s in the core, ${s.write_seconds.toFixed(2)} s writing, ` +
      `${s.close_seconds.toFixed(2)} s closing` +
      (s.write_ring_bytes ? ` (a writer worker, ${(s.write_ring_bytes / 2 ** 20).toFixed(0)} MiB ring, spent ` +
        `${s.writer_seconds.toFixed(2)} s in the browser's writes; the core waited ${s.write_wait_seconds.toFixed(2)} s for room)` : '') +
      `; of the first: ${s.read_seconds.toFixed(2)} s taking source bytes` +
      (s.streamed_reads ? ` (${s.reader_wait_seconds.toFixed(2)} s of it waiting for the reader worker, which ` +
        `waited ${s.reader_file_seconds.toFixed(2)} s for the file and ${s.reader_full_seconds.toFixed(2)} s for room)` : ' (reading files)') +
      `, ${s.wait_seconds.toFixed(2)} s waiting for worker threads`);
    console.log(`browser run #${run} ${cpuSplit(cpuBefore, cpuAfter).text}`);
    if (!picked && nativeOut && fs.existsSync(nativeOut)) {  // (the e2e test compares the picked path's bytes)
      const same = sameBytes(await d.path(), nativeOut);
      console.log(`browser output #${run}: ${same ? 'byte-identical to native' : 'DIFFERS from native'}`);
    }
    // The next run starts as this one did: its output gone and nothing left to write back
    // (an OPFS run leaves 2.2 GB of dirty pages: the OPFS file and the download's copy).
    if (picked) await page.evaluate(async () => (await navigator.storage.getDirectory()).removeEntry('picked', { recursive: true }));
    else await d.delete();
    execFileSync('sync');
  }
  rates.sort((a, b) => a - b);
  console.log(`browser ${process.env.FORMAT || 'leap-2'} over ${runs} runs: median ${rates[runs >> 1].toFixed(0)} MB/s ` +
    `(min ${rates[0].toFixed(0)}, max ${rates[runs - 1].toFixed(0)})`);
  if (process.env.BENCH_FLOORS === '1' && !picked) {
    const f = await floors(page, model, outBytes);
    const line = (what, x) => `${what} ${x.seconds.toFixed(2)} s, ${x.cpu.toFixed(2)} CPU-s`;
    const cores = os.cpus().length;
    // A bound, not a prediction. What converting itself costs is a run's CPU less the read floor
    // and the time its writer spent inside the browser's writes (system time, nearly all CPU),
    // at its least over the runs; with the floors, spread evenly over `cores` cores, nothing
    // faster is possible.
    const converting = Math.min(...cpus.map((c) => c.total - f.read.cpu - c.writes));
    console.log(`browser floors, nothing converting: ${line(`reading the ${(sourceBytes / 1e6).toFixed(0)} MB of shards`, f.read)}; ` +
      `${line(`writing the ${(outBytes / 1e6).toFixed(0)} MB output after a pause (fresh memory)`, f.fresh)}, ${line('right after (warm)', f.warm)}; ` +
      `converting (a run's CPU less the read floor and its writes) at least ${converting.toFixed(2)} CPU-s`);
    for (const [label, w] of [['fresh', f.fresh], ['warm', f.warm]]) {
      const cpu = f.read.cpu + w.cpu + converting;
      console.log(`browser bound with ${label} write pages: ${f.read.cpu.toFixed(2)} + ${w.cpu.toFixed(2)} + ${converting.toFixed(2)} = ` +
        `${cpu.toFixed(2)} CPU-s on ${cores} cores: at most ${(sourceBytes / 1e6 / (cpu / cores)).toFixed(0)} MB/s`);
    }
  }
} finally {
  await context.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
