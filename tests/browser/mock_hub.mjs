// A stand-in for the Hugging Face Hub, for the tests (no network here): two origins on
// 127.0.0.1, the Hub (its API and `resolve` URLs) and its CDN (the files' bytes, by range), answering
// the calls the page makes (through the Hub's own client, npm @huggingface/hub, and by range
// requests) as the Hub answers them. Which behaviour follows which documentation: README.md,
// "Input from the Hugging Face Hub".
//
//   const hub = await startMockHub();
//   hub.addRepo('owner/name', folder, { gated, private, revision })   the folder's top-level files
//   hub.url, hub.cdnUrl, hub.origins (for the page's CSP), hub.log (every request), hub.faults
//   await hub.close()
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const TOKEN = 'hf_testtokenthatreads';        // a token with access to every repository
export const NO_ACCESS_TOKEN = 'hf_validbutnotgranted';  // a valid token not granted the gated ones

// The headers the Hub exposes to scripts on other origins (its CORS answer).
const EXPOSE = 'X-Repo-Commit,X-Request-Id,X-Error-Code,X-Error-Message,X-Total-Count,ETag,Link,Accept-Ranges,Content-Range,X-Linked-Size,X-Linked-ETag,X-Xet-Hash';
const cors = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSE };
const hashes = new WeakMap();  // (each file's, once: hashing a large file on every range request would time the mock, not the reader)
const sha256 = (b) => {
  if (!hashes.has(b)) hashes.set(b, crypto.createHash('sha256').update(b).digest('hex'));
  return hashes.get(b);
};
const LFS = (name) => /\.(safetensors|bin|gguf|pt|pth)$/.test(name);  // stored in LFS (as the Hub's .gitattributes does)
const PAGE = 3;  // tree entries per page (the Hub pages its listings with a Link header; small here so paging is used)

export async function startMockHub() {
  const repos = new Map();  // 'owner/name' -> { files: Map name -> Buffer, gated, private, revisions: Set }
  const log = [];           // { origin: 'hub'|'cdn', method, url, range, auth, status }
  // Faults for the next requests (each consumed as it fires):
  //   cut:    { file, at }        the CDN closes the connection after sending the bytes before `at`
  //   stall:  { file, at }        the CDN sends the bytes before `at`, then nothing, never closing
  //   change: { file, after, bytes }  after `after` range requests of the file, it holds `bytes`
  //   status: { on: 'cdn'|'hub', code, times, retryAfter, after }  answer with this status `times` times
//                               (on the CDN: after `after` requests answered as usual)
  //   lie:    { file, kind: 'long'|'range' }  a body longer than its Content-Range / another range
  //   redirect: { file, to }      resolve redirects the file to `to` (another origin)
  const faults = { cut: null, stall: null, change: null, status: null, lie: null, redirect: null };
  const counts = new Map();

  const auth = (req) => (req.headers.authorization || '').replace(/^Bearer /, '');
  const json = (res, status, body, headers = {}) => {
    res.writeHead(status, { ...cors, 'Content-Type': 'application/json; charset=utf-8', 'X-Request-Id': 'Root=mock', ...headers });
    res.end(JSON.stringify(body));
  };
  // The Hub's answers for a repository the request may not see: 401 RepoNotFound (it does not
  // say whether a private repository exists), 401/403 GatedRepo, 401 for a token it rejects.
  function refuse(res, repo, id, token, forFile) {
    if (token && token !== TOKEN && token !== NO_ACCESS_TOKEN)
      return json(res, 401, { error: 'Invalid credentials in Authorization header' }, { 'X-Error-Code': 'RepoNotFound' }), true;
    if (!repo || (repo.private && token !== TOKEN))
      return json(res, 401, { error: 'Repository not found' }, { 'X-Error-Code': 'RepoNotFound', 'X-Error-Message': 'Repository not found' }), true;
    if (repo.gated && forFile && token !== TOKEN) {
      const msg = token ? `Access to model ${id} is restricted and you are not in the authorized list. Visit https://huggingface.co/${id} to ask for access.`
        : `Access to model ${id} is restricted. You must have access to it and be authenticated to access it. Please log in.`;
      return json(res, token ? 403 : 401, { error: msg }, { 'X-Error-Code': 'GatedRepo', 'X-Error-Message': msg }), true;
    }
    return false;
  }

  const hub = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    const entry = { origin: 'hub', method: req.method, url: u.pathname + u.search, range: req.headers.range || '', auth: !!req.headers.authorization };
    log.push(entry);
    if (req.method === 'OPTIONS') {  // CORS preflight (Authorization, Range with a non-simple value)
      res.writeHead(204, { ...cors, 'Access-Control-Allow-Headers': 'authorization, range, accept, content-type', 'Access-Control-Allow-Methods': 'GET, HEAD', 'Access-Control-Max-Age': '600' });
      return res.end();
    }
    if (faults.status && faults.status.on === 'hub' && faults.status.times > 0) {
      faults.status.times--;
      entry.status = faults.status.code;
      return json(res, faults.status.code, { error: 'You have been rate-limited; you can retry this action later.' },
        faults.status.retryAfter ? { 'Retry-After': String(faults.status.retryAfter) } : {});
    }
    const token = auth(req);
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)(\/.*)?$/.exec(u.pathname);
    if (m) {
      const id = decodeURIComponent(m[1]), rev = decodeURIComponent(m[2]);
      const repo = repos.get(id);
      if (refuse(res, repo, id, token, false)) return;
      if (!repo.revisions.has(rev)) return json(res, 404, { error: `Invalid rev id: ${rev}` }, { 'X-Error-Code': 'RevisionNotFound' });
      const all = [...repo.files.entries()].map(([name, b]) => ({
        type: 'file', oid: sha256(b).slice(0, 40), size: b.length, path: name,
        ...(LFS(name) && !repo.notLfs?.has(name) ? { lfs: { oid: sha256(b), size: b.length, pointerSize: 134 } } : {}),
      }));
      if (repo.extraEntries) all.push(...repo.extraEntries);
      const from = Number(u.searchParams.get('cursor') || 0);
      const page = all.slice(from, from + PAGE);
      const headers = {};
      if (from + PAGE < all.length) {
        const next = new URL(u.href.replace('http://x', hubUrl));
        next.searchParams.set('cursor', String(from + PAGE));
        headers.Link = `<${next.href}>; rel="next"`;
      }
      return json(res, 200, page, headers);
    }
    m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(u.pathname);
    if (m) {
      const id = decodeURIComponent(m[1]), rev = decodeURIComponent(m[2]), name = decodeURIComponent(m[3]);
      const repo = repos.get(id);
      if (refuse(res, repo, id, token, true)) return;
      if (!repo.revisions.has(rev)) return json(res, 404, { error: `Invalid rev id: ${rev}` }, { 'X-Error-Code': 'RevisionNotFound' });
      const b = repo.files.get(name);
      if (!b) return json(res, 404, { error: 'Entry not found' }, { 'X-Error-Code': 'EntryNotFound' });
      const etag = `"${sha256(b)}"`;
      if (LFS(name) && !repo.notLfs?.has(name)) {
        // an LFS file: a redirect to the CDN (a signed URL there), with its size and sha256
        const to = faults.redirect && faults.redirect.file === name ? faults.redirect.to
          : `${cdnUrl}/repos/${encodeURIComponent(id)}/${encodeURIComponent(name)}?X-Amz-Signature=mock`;
        res.writeHead(302, { ...cors, Location: to, 'X-Linked-Size': String(b.length), 'X-Linked-ETag': etag, ETag: etag,
          'X-Repo-Commit': 'c0ffee'.padEnd(40, '0'), 'Content-Length': '0' });
        return res.end();
      }
      return sendRange(req, res, b, etag, entry);
    }
    json(res, 404, { error: 'Not found' });
  });

  // Bytes of b as the Hub and its CDN send them: 206 with Content-Range for a single range, 200
  // for the whole file, 416 past the end.
  function sendRange(req, res, b, etag, entry, name = '') {
    const headers = { ...cors, ETag: etag, 'Accept-Ranges': 'bytes', 'Content-Type': 'application/octet-stream' };
    const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
    if (!r) {
      headers['Content-Length'] = String(b.length);
      res.writeHead(200, headers);
      entry.status = 200;
      return res.end(req.method === 'HEAD' ? undefined : b);
    }
    const a = Number(r[1]), z = Math.min(r[2] === '' ? b.length - 1 : Number(r[2]), b.length - 1);
    if (a >= b.length || z < a) {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${b.length}` });
      entry.status = 416;
      return res.end();
    }
    let body = b.subarray(a, z + 1), range = `bytes ${a}-${z}/${b.length}`;
    if (faults.lie && faults.lie.file === name) {
      if (faults.lie.kind === 'long') body = Buffer.concat([body, Buffer.alloc(100)]);
      if (faults.lie.kind === 'range') range = `bytes ${a + 1}-${z + 1}/${b.length}`;
      faults.lie = null;
    }
    headers['Content-Range'] = range;
    entry.status = 206;
    const cut = faults.cut && faults.cut.file === name && faults.cut.at > a && faults.cut.at <= z ? faults.cut : null;
    if (cut) {
      faults.cut = null;
      entry.cut = true;
      headers['Content-Length'] = String(body.length);
      res.writeHead(206, headers);
      res.write(body.subarray(0, cut.at - a), () => setTimeout(() => res.socket.destroy(), 20));
      return;
    }
    const stall = faults.stall && faults.stall.file === name && faults.stall.at > a && faults.stall.at <= z ? faults.stall : null;
    if (stall) {  // the bytes before `at`, then nothing, the connection left open (until the hub closes)
      faults.stall = null;
      entry.stalled = true;
      headers['Content-Length'] = String(body.length);
      res.writeHead(206, headers);
      res.write(body.subarray(0, stall.at - a));
      return;
    }
    headers['Content-Length'] = String(body.length);
    res.writeHead(206, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  const cdn = http.createServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    const entry = { origin: 'cdn', method: req.method, url: u.pathname, range: req.headers.range || '', auth: !!req.headers.authorization };
    log.push(entry);
    if (req.method === 'OPTIONS') {
      res.writeHead(204, { ...cors, 'Access-Control-Allow-Headers': 'range, accept', 'Access-Control-Allow-Methods': 'GET, HEAD' });
      return res.end();
    }
    const m = /^\/repos\/([^/]+)\/([^/]+)$/.exec(u.pathname);
    const repo = m && repos.get(decodeURIComponent(m[1]));
    const name = m && decodeURIComponent(m[2]);
    if (!repo || !repo.files.has(name)) {
      res.writeHead(404, cors);
      return res.end('NoSuchKey');
    }
    if (faults.status && faults.status.on === 'cdn' && faults.status.times > 0 && !(faults.status.after > 0 && faults.status.after--)) {
      faults.status.times--;
      entry.status = faults.status.code;
      res.writeHead(faults.status.code, { ...cors, ...(faults.status.retryAfter ? { 'Retry-After': String(faults.status.retryAfter) } : {}) });
      return res.end('SlowDown');
    }
    const n = (counts.get(name) || 0) + 1;
    counts.set(name, n);
    if (faults.change && faults.change.file === name && n > faults.change.after) {
      repo.files.set(name, faults.change.bytes);
      faults.change = null;
    }
    const b = repo.files.get(name);
    sendRange(req, res, b, `"${sha256(b)}"`, entry, name);
  });

  const listen = (s) => new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${s.address().port}`)));
  const hubUrl = await listen(hub), cdnUrl = await listen(cdn);
  return {
    url: hubUrl, cdnUrl, origins: [hubUrl, cdnUrl], log, faults,
    // A repository holding the top-level files of folder (or { name: Buffer }).
    addRepo(id, folder, { gated = false, private: priv = false, revisions = ['main'], notLfs = [], extraEntries = null } = {}) {
      const files = new Map();
      if (typeof folder === 'string') {
        for (const n of fs.readdirSync(folder)) if (fs.statSync(path.join(folder, n)).isFile()) files.set(n, fs.readFileSync(path.join(folder, n)));
      } else for (const [n, b] of Object.entries(folder)) files.set(n, Buffer.from(b));
      repos.set(id, { files, gated, private: priv, revisions: new Set(revisions), notLfs: new Set(notLfs), extraEntries });
    },
    resetCounts() { counts.clear(); log.length = 0; },
    close: () => Promise.all([hub, cdn].map((s) => new Promise((r) => { s.closeAllConnections?.(); s.close(r); }))),
  };
}

// The stand-in Hub the Hub tests open (page and CLI), its repositories all of the checkpoint in
// `dir` (given a real SentencePiece tokenizer first): REPO (with a revision v1), a gated and a private
// copy, one with only pickle weights, one whose shard is a Git LFS pointer, and one whose listing
// names a file outside the repository.
export const REPO = 'test-org/tiny-llama';
export async function startTestHub(dir) {
  fs.copyFileSync(new URL('../data/tiny_sp_bpe.model', import.meta.url), path.join(dir, 'tokenizer.model'));
  const hub = await startMockHub();
  const config = fs.readFileSync(path.join(dir, 'config.json'));
  hub.addRepo(REPO, dir, { revisions: ['main', 'v1'] });
  hub.addRepo('test-org/gated', dir, { gated: true });
  hub.addRepo('test-org/private', dir, { private: true });
  hub.addRepo('test-org/pickles', { 'config.json': config, 'pytorch_model.bin': Buffer.alloc(2000) });
  hub.addRepo('test-org/pointer', { 'config.json': config,
    'model.safetensors': 'version https://git-lfs.github.com/spec/v1\noid sha256:' + 'ab'.repeat(32) + '\nsize 123456789\n' },
  { notLfs: ['model.safetensors'] });
  hub.addRepo('test-org/escape', dir, { extraEntries: [{ type: 'file', oid: '0', size: 10, path: '../../evil.safetensors' }] });
  return hub;
}
