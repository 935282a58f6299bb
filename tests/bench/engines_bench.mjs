// Benchmark (not a test), part of scripts/bench.sh (BENCH=browsers): the same checkpoint folder
// converted by the page in each browser engine on Debian (tests/browser/engines.mjs: Chromium,
// Firefox ESR, WebKitGTK), BENCH_RUNS times each: MB/s of source, where the output went (OPFS,
// the tab's memory or a streamed download), worker threads, and the peak resident memory of the engine's processes
// (the sum of their VmHWM: an upper bound, pages shared between them counted in each) and the
// converter's own WebAssembly heap (it only grows: its size at the end is its peak). The last
// run's file is hashed in the page and compared with the native output when one is given.
// Environment: FORMAT (a value of the format menu, default gguf-q8_0), BENCH_RUNS (default 2),
// ENGINES (default chromium,firefox,webkit).
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer } from '../../scripts/serve.mjs';
import { ENGINES, missing, openPage, waitFor, waitState, writtenDigests } from '../browser/engines.mjs';

const [model, nativeOut] = process.argv.slice(2);
if (!model || !fs.existsSync(path.join(model, 'config.json'))) {
  console.error('usage: node tests/bench/engines_bench.mjs <checkpoint folder> [native output to compare]');
  process.exit(2);
}
const format = process.env.FORMAT || 'gguf-q8_0';
const runs = Number(process.env.BENCH_RUNS || 2);
const engines = (process.env.ENGINES || ENGINES.join(',')).split(',');
// Firefox's and WebKit's drivers cannot put a folder in a file input: those two get its files
// through "Choose files…", which names the model after config.json's _name_or_path. So the page
// reads a folder of the same name whose config.json says that name (the shards linked, not copied;
// no organisation before it, which general.* would take in as the folder name gives none)
// and the file is named as the native CLI names it.
const named = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'leapconv-engines-')), path.basename(path.resolve(model)));
fs.mkdirSync(named);
for (const f of fs.readdirSync(model)) {
  if (f === 'config.json') {
    const config = JSON.parse(fs.readFileSync(path.join(model, f), 'utf8'));
    fs.writeFileSync(path.join(named, f), JSON.stringify({ ...config, _name_or_path: path.basename(named) }));
  } else {
    fs.symlinkSync(path.resolve(model, f), path.join(named, f));
  }
}
process.on('exit', () => fs.rmSync(path.dirname(named), { recursive: true, force: true }));
const files = fs.readdirSync(named).map((f) => path.join(named, f));
const sourceBytes = files.filter((f) => f.endsWith('.safetensors')).reduce((a, f) => a + fs.statSync(f).size, 0);

// This process's descendants (the driver, the browser and its content processes), from /proc.
function descendants() {
  const children = new Map();
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(pid);
    } catch { /* gone meanwhile */ }
  }
  const out = [], todo = [String(process.pid)];
  while (todo.length) for (const c of children.get(todo.pop()) || []) { out.push(c); todo.push(c); }
  return out;
}
// VmHWM of every descendant seen so far (a process's own peak), summed at the end.
function sampler() {
  const peaks = new Map();
  const sample = () => {
    for (const pid of descendants()) {
      try {
        const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
        if (m) peaks.set(pid, Math.max(peaks.get(pid) || 0, Number(m[1]) / 1024));
      } catch { /* gone meanwhile */ }
    }
  };
  const timer = setInterval(sample, 250);
  return { stop: () => { clearInterval(timer); sample(); return [...peaks.values()].reduce((a, b) => a + b, 0); } };
}

const stateIn = (page, states) => waitState(page, states, 1800000);
// A streamed download (where the page keeps no files: WebKit here) lands in the home folder
// (WebKitGTK's MiniBrowser's download folder): waited for until complete.
const downloaded = (name) => path.join(os.homedir(), name);
async function landed(file, bytes, since) {
  for (const end = Date.now() + 600000; ;) {
    const st = fs.existsSync(file) ? fs.statSync(file) : null;
    if (st && st.size === bytes && st.mtimeMs >= since - 1000) return;
    if (Date.now() > end) throw new Error(`the streamed download did not land in ${file}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const server = await startServer(0);
const url = `http://127.0.0.1:${server.address().port}/`;
// The output compared a PIECE at a time (its SHA-256 each): a file > 4 GiB is never one buffer.
const PIECE = 256 << 20;
function nativeDigests(file) {
  const fd = fs.openSync(file, 'r'), buf = Buffer.alloc(PIECE), out = [];
  for (let at = 0, n; (n = fs.readSync(fd, buf, 0, PIECE, at)) > 0; at += n) out.push(crypto.createHash('sha256').update(buf.subarray(0, n)).digest('hex'));
  fs.closeSync(fd);
  return out;
}
const nativeHash = nativeOut && nativeDigests(nativeOut).join();
console.log(`browsers: ${model}, ${sourceBytes} bytes of source, ${format}, ${runs} run(s) each`);
for (const engine of engines) {
  if (missing(engine)) { console.log(`${engine}: skipped (${missing(engine)})`); continue; }
  const mem = sampler();
  const page = await openPage(engine, url, { timeout: 1800000 });
  try {
    await page.setFiles(engine === 'chromium' ? '#folder-input' : '#files-input', engine === 'chromium' ? [model] : files);  // (playwright does not follow the links)
    if (await stateIn(page, ['ready', 'error']) !== 'ready') throw new Error(await page.evaluate(() => document.getElementById('error').textContent));
    await page.evaluate((v) => { const s = document.getElementById('format'); s.value = v; s.dispatchEvent(new Event('change')); }, format);
    const rates = [];
    let last = null;
    for (let i = 0; i < runs; i++) {
      await waitFor(page, () => window.__leapconv.planPending === 0 && !document.getElementById('convert').disabled, null, { timeout: 600000 });
      const clicked = Date.now();
      await page.evaluate(() => document.getElementById('convert').click());
      if (await stateIn(page, ['done', 'error']) !== 'done') throw new Error(await page.evaluate(() => document.getElementById('error').textContent));
      last = await page.evaluate(() => { const s = window.__leapconv.summary; return { ...s, sink: window.__leapconv.written.kind }; });
      if (last.sink === 'stream') await landed(downloaded(last.name), last.total_bytes, clicked);
      rates.push(sourceBytes / 1e6 / last.seconds);
      const t = (x) => (x ?? 0).toFixed(2);
      console.log(`  ${engine} run ${i + 1}: ${last.seconds.toFixed(2)} s, ${rates.at(-1).toFixed(0)} MB/s of source; ${t(last.core_seconds)} s in ` +
        `the core (${t(last.reader_wait_seconds)} s of it waiting for the reader), ${t(last.write_seconds)} s handing pieces to the sink ` +
        `(${t(last.write_wait_seconds)} s waiting for room), ${t(last.close_seconds)} s closing`);
    }
    const peak = mem.stop();  // (before hashing, which reads the whole file into the tab)
    let same = '';
    if (nativeHash) {
      const got = last.sink === 'stream' ? nativeDigests(downloaded(last.name)) : await writtenDigests(page, PIECE);
      same = got.join() === nativeHash ? ', byte-identical to native' : ', DIFFERS from native';
    }
    if (last.sink === 'stream') fs.rmSync(downloaded(last.name), { force: true });
    const sorted = [...rates].sort((a, b) => a - b);
    console.log(`${engine}: median ${sorted[Math.floor(sorted.length / 2)].toFixed(0)} MB/s (${sorted[0].toFixed(0)}–${sorted.at(-1).toFixed(0)}), ` +
      `${last.worker_threads_used} worker threads, output in ${{ memory: "the tab's memory", stream: 'a streamed download' }[last.sink] || 'OPFS'} (${last.total_bytes} bytes)${same}, ` +
      `peak memory of its processes ${peak.toFixed(0)} MiB, the converter's WebAssembly heap ${(last.wasm_heap_bytes / 2 ** 20).toFixed(0)} MiB`);
  } catch (e) {
    mem.stop();
    console.log(`${engine}: failed: ${e.message}`);
    if (process.env.BENCH_DEBUG) console.log(e.stack);
  } finally {
    await page.close();
  }
}
server.close();
