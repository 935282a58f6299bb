// Shared by the browser tests and the browser benchmark: how to start Debian's Chromium here
// (playwright-core, no browser download) and how to wait for the page's state.
import fs from 'node:fs';
import { after, before } from 'node:test';
import { chromium } from 'playwright-core';
import { startServer } from '../../scripts/serve.mjs';
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

// Converts to a menu entry through the OPFS path; returns the downloaded bytes and the name the
// page gave the download.
export async function convertDownload(page, format) {
  await page.selectOption('#format', format);
  await page.waitForFunction(() => !document.getElementById('convert').disabled);
  const download = page.waitForEvent('download', { timeout: 120000 });
  await page.click('#convert');
  const d = await download;
  await waitState(page, ['done', 'error']);
  return { bytes: fs.readFileSync(await d.path()), name: d.suggestedFilename() };
}

// An init script standing in for the save picker, which cannot be driven headless: it hands the
// page a file in OPFS folder 'picked', which takes the same FileSystemWritableFileStream path
// as a file the user picks.
export function savePickerIntoOpfs() {
  window.showSaveFilePicker = async ({ suggestedName }) => {
    const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle('picked', { create: true });
    return dir.getFileHandle(suggestedName, { create: true });
  };
}

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

// For a test file: serve web/ and start Chromium before its tests, stop both (and remove the
// file's scratch folder) after them. The returned object is filled in by `before`.
export function useBrowser(scratchDir) {
  const session = { browser: null, server: null, url: '' };
  before(async () => {
    session.server = await startServer(0);
    session.url = `http://127.0.0.1:${session.server.address().port}/`;
    session.browser = await chromium.launch(launchOptions);
  });
  after(async () => {
    await session.browser?.close();
    session.server?.close();
    if (scratchDir) fs.rmSync(scratchDir, { recursive: true, force: true });
  });
  return session;
}
