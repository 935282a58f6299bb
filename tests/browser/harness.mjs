// Shared by the browser tests and the browser benchmark: how to start Debian's Chromium here
// (playwright-core, no browser download) and how to wait for the page's state.
import fs from 'node:fs';
import path from 'node:path';
import { root } from '../node/helpers.mjs';

export const launchOptions = {
  executablePath: '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
};

export const outDir = path.join(root, 'test-output');
fs.mkdirSync(outDir, { recursive: true });

// The page sets document.body.dataset.state: idle, opening, ready, converting, done, error, cancelled.
export const waitState = (page, states, timeout = 60000) =>
  page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

// A fresh browser context (its own OPFS, service worker, downloads) on the page at url, once
// the converter has loaded. errors collects uncaught page errors.
export async function openPage(browser, url, { initScript, viewport } = {}) {
  const context = await browser.newContext({ acceptDownloads: true, ...(viewport ? { viewport } : {}) });
  if (initScript) await context.addInitScript(initScript);
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url);
  await waitState(page, ['idle', 'error']);
  return { context, page, errors };
}
