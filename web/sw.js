// Service worker: keeps the app (page, worker, WebAssembly, demo model) in a cache so it loads
// and converts offline after one visit, and adds the cross-origin isolation headers to what it
// serves, so pthreads also work on static hosts that cannot set COOP/COEP themselves; and the same
// Content-Security-Policy, nosniff and Referrer-Policy as `npm start` (scripts/serve.mjs).
const CACHE = 'leapconv-v16';
const APP = [
  './', 'index.html', 'app.js', 'chart.js', 'nibbles.js', 'block_view.js', 'dom.js', 'schemes.js', 'catalog.js', 'storage.js', 'opened_file.js', 'rpc.js', 'capabilities.js', 'worker.js', 'source_stream.js', 'reader.js', 'write_ring.js', 'writer.js', 'style.css', 'manifest.webmanifest',
  'favicon.svg', 'icon-192.png', 'icon-512.png',
  'dist/converter-mt.js', 'dist/converter-mt.wasm', 'dist/converter-mt.worker.js',
  'dist/converter-st.js', 'dist/converter-st.wasm',
  'try_model.js', 'try_math.js', 'hub.js', 'hub_xet_stub.js', 'remote_file.js', 'stream_save.js',
  'demo/manifest.json', 'demo/tiny-llama/config.json', 'demo/tiny-llama/model.safetensors', 'demo/tiny-llama/tokenizer.model',
  'demo/tiny-llama-fp8/config.json', 'demo/tiny-llama-fp8/model.safetensors', 'demo/tiny-llama-fp8/tokenizer.model',
];

// Try it: wllama (llama.cpp in wasm) and jinja, which npm start serves from node_modules; a static
// host without them still gets the rest of the app offline.
const VENDOR = ['vendor/wllama.js', 'vendor/wllama-st.wasm', 'vendor/wllama-mt.wasm', 'vendor/jinja.js', 'vendor/hub.js'];

self.addEventListener('install', (e) => {
  e.waitUntil(caches.open(CACHE).then((c) => c.addAll(APP).then(() => c.addAll(VENDOR).catch(() => {})))
    .then(() => self.skipWaiting()));
});

self.addEventListener('activate', (e) => {
  e.waitUntil((async () => {
    for (const k of await caches.keys()) if (k !== CACHE) await caches.delete(k);
    await self.clients.claim();
  })());
});

// As scripts/serve.mjs sends it (only the origin itself, and the Hub's for input from it; WebAssembly may compile).
const CSP = ["default-src 'self'", "script-src 'self' 'wasm-unsafe-eval'", "worker-src 'self' blob:",
  "connect-src 'self' https://huggingface.co https://*.huggingface.co https://*.hf.co",
  "img-src 'self' data: blob:", "style-src 'self'", "font-src 'self'", "object-src 'none'", "base-uri 'none'",
  "form-action 'none'", "frame-ancestors 'none'", "manifest-src 'self'"].join('; ');

function isolated(resp) {
  if (!resp || resp.status === 0 || resp.type === 'opaque') return resp;
  const h = new Headers(resp.headers);
  h.set('Cross-Origin-Opener-Policy', 'same-origin');
  h.set('Cross-Origin-Embedder-Policy', 'require-corp');
  h.set('Cross-Origin-Resource-Policy', 'same-origin');
  if (!h.has('Content-Security-Policy')) h.set('Content-Security-Policy', CSP);
  h.set('X-Content-Type-Options', 'nosniff');
  h.set('Referrer-Policy', 'no-referrer');
  return new Response(resp.body, { status: resp.status, statusText: resp.statusText, headers: h });
}

// Streamed downloads (web/stream_save.js): the page registers one, { type: 'download', id,
// name, size, port }, then asks for download/<id>; the answer is an attachment whose bytes are
// what the converting worker sends on the port ({ type: 'bytes', buffer }, then 'end', or
// 'abort'), as it writes them. The worker learns 'started', and 'taken' (bytes the download has
// taken), so it stays at most a window ahead; 'cancelled' when the user stops the download.
const downloads = new Map();  // id -> the registration, until its request comes
self.addEventListener('message', (e) => {
  const d = e.data;
  if (d && d.type === 'download' && d.port) {
    downloads.set(d.id, d);
    d.port.postMessage({ type: 'registered' });
  }  // (and { type: 'ping' }: the page keeps this worker awake while a file streams)
});

const STREAM_QUEUE_BYTES = 8 << 20;
function streamedDownload(id) {
  const d = downloads.get(id);
  if (!d) return new Response('This download has ended or never began: convert again.', { status: 404, headers: { 'Content-Type': 'text/plain' } });
  downloads.delete(id);
  let received = 0, reported = 0;
  const report = (c) => {
    if (c.desiredSize > 0 && received !== reported) d.port.postMessage({ type: 'taken', bytes: (reported = received) });
  };
  const body = new ReadableStream({
    start(c) {
      d.port.onmessage = ({ data }) => {
        if (data.type === 'bytes') {
          c.enqueue(new Uint8Array(data.buffer));
          received += data.buffer.byteLength;
          report(c);
        } else if (data.type === 'end') c.close();
        else if (data.type === 'abort') c.error(new Error(data.reason || 'the conversion stopped'));
      };
      d.port.postMessage({ type: 'started' });
    },
    pull(c) { report(c); },
    cancel() { d.port.postMessage({ type: 'cancelled' }); },
  }, new ByteLengthQueuingStrategy({ highWaterMark: STREAM_QUEUE_BYTES }));
  return new Response(body, { headers: {
    'Content-Type': 'application/octet-stream',
    'Content-Length': String(d.size),
    'Content-Disposition': `attachment; filename*=UTF-8''${encodeURIComponent(d.name)}`,
    'Cross-Origin-Embedder-Policy': 'require-corp', 'Cross-Origin-Resource-Policy': 'same-origin',
    'X-Content-Type-Options': 'nosniff',
  } });
}

// Network first (so a rebuilt app is picked up at once), the cache when offline.
self.addEventListener('fetch', (e) => {
  const req = e.request;
  if (req.method !== 'GET' || new URL(req.url).origin !== self.location.origin) return;
  const download = new URL('download/', self.registration.scope).pathname;
  const path = new URL(req.url).pathname;
  if (path.startsWith(download)) return e.respondWith(streamedDownload(path.slice(download.length)));
  e.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const resp = await fetch(req);
      if (resp.ok) cache.put(req, resp.clone()).catch(() => {});
      return isolated(resp);
    } catch (err) {
      const hit = await cache.match(req, { ignoreSearch: true });
      if (hit) return isolated(hit);
      throw err;
    }
  })());
});
