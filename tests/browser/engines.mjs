// The three browser engines on Debian, each behind the same four calls, for the tests that run in
// every browser (every_browser.test.mjs) and the benchmark:
//   chromium  Debian's Chromium through playwright-core (as the rest of the browser suite)
//   firefox   firefox-esr through WebDriver BiDi (puppeteer-core)
//   webkit    WebKitGTK's MiniBrowser through WebKitWebDriver (selenium-webdriver), under Xvfb
//             (MiniBrowser has no headless mode), with SharedArrayBuffer on as Safari has it on
//             isolated pages, and the File System Access features it has behind flags
// A page: { goto(url), evaluate(fn, arg) (fn may be async; its value comes back as JSON),
// setFiles(selector, paths), close() }. Everything else the tests do inside the page, with the
// helpers at the end.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { launchOptions } from './harness.mjs';

export const ENGINES = ['chromium', 'firefox', 'webkit'];

// Why an engine cannot run here (its binary or its driver is missing), or null.
export function missing(engine) {
  const need = { chromium: ['/usr/bin/chromium'], firefox: ['/usr/bin/firefox-esr'],
    webkit: ['/usr/bin/WebKitWebDriver', '/usr/bin/xvfb-run', WEBKIT_BROWSER] }[engine];
  const absent = need.filter((f) => !fs.existsSync(f));
  return absent.length ? `${engine}: ${absent.join(', ')} not installed (scripts/setup.sh installs them)` : null;
}
const WEBKIT_BROWSER = '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';

// options.sharedArrayBuffer: false starts WebKit without it (as WebKitGTK is by default).
export async function launch(engine, options = {}) {
  if (engine === 'chromium') return chromium();
  if (engine === 'firefox') return firefox();
  if (engine === 'webkit') return webkit(options);
  throw new Error(`unknown engine ${engine}`);
}

// A profile on disk, as the other two have and a user has (an incognito-style context keeps
// OPFS in memory, which Chromium writes at ~60 MB/s here).
async function chromium() {
  const { chromium: pw } = await import('playwright-core');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'leapconv-chromium-'));
  const context = await pw.launchPersistentContext(profile, launchOptions);
  const page = context.pages()[0] ?? await context.newPage();
  return {
    goto: (url) => page.goto(url),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    setFiles: (selector, paths) => page.setInputFiles(selector, paths),
    close: async () => {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

async function firefox() {
  const { default: puppeteer } = await import('puppeteer-core');
  const browser = await puppeteer.launch({ browser: 'firefox', executablePath: '/usr/bin/firefox-esr', headless: true });
  // The tab Firefox opens with, not a new one: in a second tab here the page's workers now and
  // then never started (2 to 6 of 14 runs; in the first tab 2 of 42 failed, one a page error)
  const page = (await browser.pages())[0];
  return {
    goto: (url) => page.goto(url),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    setFiles: async (selector, paths) => (await page.$(selector)).uploadFile(...paths),
    close: () => browser.close(),
  };
}

const freePort = () => new Promise((resolve, reject) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  }).on('error', reject);
});

async function waitForPort(port, child, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the driver exited (${child.exitCode})`);
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.end(); resolve(true); }).on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`the driver did not listen on ${port} in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function webkit({ sharedArrayBuffer = true } = {}) {
  const { Builder, By } = await import('selenium-webdriver');
  const port = await freePort();
  // xvfb-run gives the driver (and the MiniBrowser it starts) a display of its own.
  const driverProcess = spawn('xvfb-run', ['-a', '/usr/bin/WebKitWebDriver', `--port=${port}`], {
    env: { ...process.env, JSC_useSharedArrayBuffer: String(sharedArrayBuffer) }, stdio: 'ignore', detached: true });
  const stopDriver = () => { try { process.kill(-driverProcess.pid, 'SIGTERM'); } catch { /* gone */ } };
  try {
    await waitForPort(port, driverProcess);
    const driver = await new Builder().usingServer(`http://127.0.0.1:${port}`).withCapabilities({
      browserName: 'MiniBrowser',
      'webkitgtk:browserOptions': { binary: WEBKIT_BROWSER,
        args: ['--automation', '--features=+FileSystem,+StorageAPI,+FileSystemWritableStream,+AccessHandle'] },
    }).build();
    await driver.manage().setTimeouts({ script: 600000 });
    return {
      goto: (url) => driver.get(url),
      // (WebDriver classic: the function goes as its source; a rejection comes back as an error)
      evaluate: async (fn, arg) => {
        const r = await driver.executeAsyncScript(`const done = arguments[arguments.length - 1];
          Promise.resolve().then(() => (${fn})(arguments[0])).then((value) => done({ value }), (e) => done({ error: String(e && e.stack || e) }));`, arg);
        if (r.error) throw new Error(r.error);
        return r.value;
      },
      // a file input the page hides cannot take keys: shown for the moment
      setFiles: async (selector, paths) => {
        await driver.executeScript('const e = document.querySelector(arguments[0]); e.dataset.wasHidden = e.hidden; e.hidden = false;', selector);
        await driver.findElement(By.css(selector)).sendKeys(paths.join('\n'));
        await driver.executeScript('const e = document.querySelector(arguments[0]); e.hidden = e.dataset.wasHidden === "true";', selector);
      },
      close: async () => {
        await driver.quit().catch(() => {});
        stopDriver();
      },
    };
  } catch (e) {
    stopDriver();
    throw e;
  }
}

// A browser with the page at `url` loaded and its converter started (state idle or error), and
// the launches it took. Firefox ESR here now and then never starts the page's converter: the
// nested workers of the core's thread pool never load, and that tab is stuck (a new worker in it
// stalls too, and a reload does not finish). Measured: 1-4 of 40 fresh launches, with or without
// the service worker or OPFS; blob workers nested the same way start at once. Not found to be
// the page's doing. The page says so after its SLOW_START_SECONDS (web/app.js): that sentence
// is checked, the browser closed and another launched (at most `tries`, each said in the log).
// A page that starts in none of them, or stalls without the sentence, fails.
export const RELAUNCHES = { firefox: 3 };
export async function openPage(engine, url, { tries = RELAUNCHES[engine] || 1, launchOptions = {}, timeout = 120000 } = {}) {
  return withRelaunches(tries, async (attempt) => {
    const page = await launch(engine, launchOptions);
    try {
      await page.goto(url);
      await waitState(page, ['idle', 'error'], attempt < tries ? 30000 : timeout);
      return Object.assign(page, { launches: attempt });
    } catch (e) {
      e.said = await page.evaluate(() => [window.__leapconv?.slowStart === true, document.getElementById('status').textContent])
        .catch((err) => [false, `(the page did not answer: ${err.message})`]);
      await page.close();
      throw e;
    }
  }, (e, attempt) => {
    if (!e.said?.[0] || !/close this tab and open the page in a new one/.test(e.said[1])) {
      throw new Error(`${engine}: the converter did not start and the page did not say what to do (status: ${e.said?.[1]})`);
    }
    return `# ${engine}: the converter did not start in launch ${attempt} (${e.message}); the page said so; launching again`;
  });
}

// fn(attempt) run up to `tries` times, each in a new browser: after a failure, again(error,
// attempt) either throws (not a stall worth a new browser) or returns the line that says it;
// the last attempt's failure is thrown as it is.
export async function withRelaunches(tries, fn, again) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (e) {
      if (attempt >= tries) throw e;
      console.log(await again(e, attempt));
    }
  }
}

// Polls fn(arg) in the page until it returns something truthy, and returns that.
export async function waitFor(page, fn, arg, { timeout = 120000, what = String(fn) } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await page.evaluate(fn, arg);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${JSON.stringify(v)})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
// The page sets document.body.dataset.state (idle, ready, converting, done, error, ...): waits
// for one of `states` and returns it.
export const waitState = (page, states, timeout) => waitFor(page, (s) => s.includes(document.body.dataset.state) && document.body.dataset.state,
  states, { timeout, what: `state ${states.join('|')}` });

// The SHA-256 of the file the page wrote last (kept in OPFS, or held in the tab's memory), hashed
// in the page a piece of `piece` bytes at a time (hex each): a file past what one ArrayBuffer
// holds is never read whole.
export const writtenDigests = (page, piece = Number.MAX_SAFE_INTEGER) => page.evaluate(async (piece) => {
  const w = window.__leapconv.written;
  const file = w.kind === 'memory' ? w.files[0] : await (await import('./storage.js')).keptFile(w.name);
  const out = [];
  let at = 0;
  do {  // (an empty file: one digest, of nothing)
    const d = new Uint8Array(await crypto.subtle.digest('SHA-256', await file.slice(at, at + piece).arrayBuffer()));
    out.push([...d].map((b) => b.toString(16).padStart(2, '0')).join(''));
  } while ((at += piece) < file.size);
  return out;
}, piece);
export const writtenSha256 = async (page) => (await writtenDigests(page))[0];
