#!/usr/bin/env node
// Serves web/ on 127.0.0.1 with the headers pthreads need (cross-origin isolation:
// COOP same-origin + COEP require-corp). `node scripts/serve.mjs [--port N]`; PORT works too.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
const types = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.wasm': 'application/wasm', '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.safetensors': 'application/octet-stream',
  '.webmanifest': 'application/manifest+json',
};

// isolate: false serves without COOP/COEP (to test the single-threaded fallback).
export function startServer(port = 0, { host = '127.0.0.1', isolate = true } = {}) {
  const server = http.createServer((req, res) => {
    const headers = { 'Cache-Control': 'no-cache' };
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
    const file = path.join(root, path.normalize(rel));
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(403, headers).end('forbidden');
      return;
    }
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) {
        res.writeHead(404, { ...headers, 'Content-Type': 'text/plain' }).end('not found');
        return;
      }
      res.writeHead(200, {
        ...headers,
        'Content-Type': types[path.extname(file)] || 'application/octet-stream',
        'Content-Length': st.size,
      });
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
