#!/usr/bin/env node
// Serves web/ on 127.0.0.1 with the headers pthreads need (cross-origin isolation:
// COOP same-origin + COEP require-corp), a Content-Security-Policy that lets the page load only
// from its own origin (plus what WebAssembly and the workers need), and validators (ETag,
// Last-Modified) so that an unchanged file is answered 304 instead of sent again.
// `node scripts/serve.mjs [--port N]`; PORT works too.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
// "Try it" runs llama.cpp in the tab (npm @wllama/wllama) and renders chat templates (npm
// @huggingface/jinja): their files are served from node_modules under the page's own origin.
const modules = path.resolve(root, '..', 'node_modules');
export const VENDOR = {
  '/vendor/wllama.js': path.join(modules, '@wllama', 'wllama', 'esm', 'index.js'),
  '/vendor/wllama-st.wasm': path.join(modules, '@wllama', 'wllama', 'esm', 'single-thread', 'wllama.wasm'),
  '/vendor/wllama-mt.wasm': path.join(modules, '@wllama', 'wllama', 'esm', 'multi-thread', 'wllama.wasm'),
  '/vendor/jinja.js': path.join(modules, '@huggingface', 'jinja', 'dist', 'index.js'),
};
const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm', '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.safetensors': 'application/octet-stream',
  '.webmanifest': 'application/manifest+json', '.ico': 'image/x-icon', '.model': 'application/octet-stream',
};

// Only the page's own origin. 'wasm-unsafe-eval' lets the core's WebAssembly compile (no JS
// eval anywhere, the workers' included: the core is linked with -sDYNAMIC_EXECUTION=0); blob: is
// for the downloads the page offers (object URLs of the written file); workers (conversion,
// reader, writer, pthreads) load from the origin itself, but wllama builds its worker and its
// pthreads' script as blob: URLs of code it holds (nothing fetched from elsewhere).
// Input from the Hugging Face Hub (web/hub.js) connects to the Hub: huggingface.co (its API and
// `resolve` URLs) and the hosts those redirect to for the files' bytes (its CDNs, under
// *.huggingface.co and *.hf.co, e.g. cdn-lfs.hf.co, cas-bridge.xethub.hf.co): the Hub's own domains
// and nothing else. hubOrigins: the tests' stand-in Hub (and its CDN) in place of them.
export const HUB_ORIGINS = ['https://huggingface.co', 'https://*.huggingface.co', 'https://*.hf.co'];
export const cspOf = (hubOrigins = HUB_ORIGINS) => [
  "default-src 'self'", "script-src 'self' 'wasm-unsafe-eval'", "worker-src 'self' blob:", `connect-src 'self' ${hubOrigins.join(' ')}`,
  "img-src 'self' data: blob:", "style-src 'self'", "font-src 'self'", "object-src 'none'", "base-uri 'none'",
  "form-action 'none'", "frame-ancestors 'none'", "manifest-src 'self'",
].join('; ');
export const CSP = cspOf();
export const SECURITY_HEADERS = {
  'Content-Security-Policy': CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
};

// isolate: false serves without COOP/COEP (to test the single-threaded fallback).
// hubOrigins: the origins the page may fetch a Hub's files from, in place of the Hub's (tests).
export function startServer(port = 0, { host = '127.0.0.1', isolate = true, hubOrigins = null } = {}) {
  const security = hubOrigins ? { ...SECURITY_HEADERS, 'Content-Security-Policy': cspOf(hubOrigins) } : SECURITY_HEADERS;
  const server = http.createServer((req, res) => {
    // no-cache: always asked again, answered 304 when unchanged (a rebuilt app is seen at once)
    const headers = { 'Cache-Control': 'no-cache', ...security };
    if (isolate) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
      headers['Cross-Origin-Resource-Policy'] = 'same-origin';
    }
    let rel;
    try {
      rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      res.writeHead(400, headers).end('bad request');
      return;
    }
    if (rel.endsWith('/')) rel += 'index.html';
    const file = VENDOR[rel] || path.join(root, path.normalize(rel));
    if (!VENDOR[rel] && !file.startsWith(root + path.sep)) {
      res.writeHead(403, headers).end('forbidden');
      return;
    }
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) {
        res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' }).end('not found');
        return;
      }
      const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
      const modified = new Date(Math.floor(st.mtimeMs / 1000) * 1000);
      Object.assign(headers, { ETag: etag, 'Last-Modified': modified.toUTCString(),
        'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
      const inm = req.headers['if-none-match'], ims = req.headers['if-modified-since'];
      const fresh = inm ? inm.split(',').some((t) => t.trim().replace(/^W\//, '') === etag)
        : ims && !Number.isNaN(Date.parse(ims)) ? modified <= new Date(ims) : false;
      if (fresh && (req.method === 'GET' || req.method === 'HEAD')) {
        res.writeHead(304, headers).end();
        return;
      }
      res.writeHead(200, { ...headers, 'Content-Length': st.size });
      if (req.method === 'HEAD') res.end();
      else fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const i = process.argv.indexOf('--port');
  const port = Number(i > 0 ? process.argv[i + 1] : process.env.PORT || 8080);
  if (!fs.existsSync(path.join(root, 'dist', 'converter-mt.js'))) {
    console.error('web/dist is missing: run `npm run build` (or `npm start`) first');
    process.exit(1);
  }
  const server = await startServer(port).catch((e) => {
    console.error(`error: cannot serve on 127.0.0.1:${port}: ${e.code === 'EADDRINUSE' ? 'the port is in use (try PORT=8081 npm start)' : e.message}`);
    process.exit(1);
  });
  const { port: p } = server.address();
  console.log(`leapconv is served at http://127.0.0.1:${p}/  (Ctrl-C to stop)`);
}
