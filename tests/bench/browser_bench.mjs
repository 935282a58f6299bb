// Browser half of scripts/bench.sh: converts a checkpoint folder (LEAP v2, or FORMAT) in headless
// Chromium through the OPFS path and prints MB/s, memory and CPU; compares with a native output.
// Environment: FORMAT (a value of the format menu, default leap-2), BENCH_RUNS (conversions in the tab, default 3), THREADS, CHUNK_MB,
// BENCH_SINK=picked (the "Convert and save to…" path instead), BENCH_CONSOLE (print the page's console).
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
  return `CPU ${total.toFixed(2)} s: ` + top.map(([g, s]) => `${g} ${s.toFixed(2)}`).join(', ');
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
    console.log(`browser run #${run} ${cpuSplit(cpuBefore, cpuAfter)}`);
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
} finally {
  await context.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
