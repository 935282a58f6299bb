// A checkpoint file on the Hugging Face Hub (or any server that answers HTTP range requests as the
// Hub does), read by byte ranges: the workers' side of Hub input (web/hub.js lists the files and
// makes the descriptors). Loaded with importScripts by worker.js (the core's synchronous reads:
// headers, and whole conversions where reads are not streamed) and reader.js (streamed reads,
// several ranges in flight).
//
// A descriptor (structured-cloned from the page): { name, size, remote: { url, token, etag } }
//   url    the file's `resolve` URL (the Hub redirects it to its CDN, which serves the range)
//   token  the access token, sent as Authorization (browsers drop it on the redirect to the CDN)
//   etag   the ETag its bytes came with when the page opened it ('' if none)
//
// What comes back is untrusted: every answer must be 206 with a Content-Range of exactly the bytes
// asked for and the size the Hub listed, and a body of exactly that length; the file's ETag must
// stay the same from one range to the next (a file replaced on the Hub mid-conversion is an error,
// not a model made of two versions). A dropped connection, a 5xx or a 429 is tried again with
// backoff, REMOTE_TRIES times in all, then fails naming the file and offset.
'use strict';

const REMOTE_TRIES = 5;
const REMOTE_BACKOFF_MS = [500, 1000, 2000, 4000];  // before the 2nd..5th try (a 429's Retry-After if longer, up to 30 s)
const REMOTE_RETRY_AFTER_MAX_MS = 30000;
let REMOTE_STALL_MS = 60000;  // a connection that sends nothing for this long is dropped (and tried again)

const isRemote = (f) => !!(f && f.remote && typeof f.remote.url === 'string');

// The ETag each file answered first, by URL: a later range with another one means the file changed.
const remoteEtags = new Map();

class RemoteError extends Error {
  constructor(message, retry = false, waitMs = 0) {
    super(message);
    this.retry = retry;    // worth trying again (a dropped connection, a 5xx, a 429)
    this.waitMs = waitMs;  // at least this long first (a 429's Retry-After)
  }
}

function remoteHeaders(desc, offset, length) {
  const h = { Range: `bytes=${offset}-${offset + length - 1}` };
  if (desc.remote.token) h.Authorization = `Bearer ${desc.remote.token}`;
  return h;
}

// What an HTTP status means for this read.
function statusError(desc, status, retryAfter) {
  const where = `${desc.name}`;
  if (status === 429) {
    const s = Number(retryAfter);
    return new RemoteError(`the Hub is limiting requests (HTTP 429) while reading ${where}: wait a minute and try again`, true,
      Number.isFinite(s) && s > 0 ? Math.min(s * 1000, REMOTE_RETRY_AFTER_MAX_MS) : 0);
  }
  if (status >= 500) return new RemoteError(`the Hub answered HTTP ${status} for ${where}`, true);
  if (status === 401 || status === 403)
    return new RemoteError(`the Hub refused ${where} (HTTP ${status}): the access token is missing, expired or without access to this repository`);
  if (status === 404) return new RemoteError(`${where} is no longer on the Hub (HTTP 404): it was removed or renamed since it was listed`);
  if (status === 200) return new RemoteError(`the server sent the whole of ${where} instead of the range asked for: it does not answer range requests`);
  return new RemoteError(`the Hub answered HTTP ${status} for ${where}`);
}

// Checks a 206 answer's Content-Range and ETag against what was asked and listed.
function checkRangeAnswer(desc, offset, length, contentRange, etag) {
  if (contentRange != null) {
    const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(contentRange.trim());
    if (!m) throw new RemoteError(`${desc.name}: the server's Content-Range "${contentRange.slice(0, 80)}" is not a byte range`);
    const [a, b, total] = [Number(m[1]), Number(m[2]), m[3] === '*' ? NaN : Number(m[3])];
    if (total !== desc.size)
      throw new RemoteError(`${desc.name} changed on the Hub since it was listed: it is ${m[3]} bytes now, ${desc.size} then (nothing was kept: open the model again)`);
    if (a !== offset || b !== offset + length - 1)
      throw new RemoteError(`${desc.name}: the server sent bytes ${a}-${b} when ${offset}-${offset + length - 1} were asked for`);
  }
  if (etag) {
    const first = desc.remote.etag || remoteEtags.get(desc.remote.url);  // (the page's, from when it opened the model)
    if (!first) remoteEtags.set(desc.remote.url, etag);
    else if (first !== etag)
      throw new RemoteError(`${desc.name} changed on the Hub while it was read (its ETag went from ${first} to ${etag}): nothing was kept; convert again to read the new version`);
  }
}

const remoteFailure = (desc, offset, e) => {
  const err = new Error(`cannot read ${desc.name} from the Hub at offset ${offset}: ${e.message}`);
  err.remote = true;
  return err;
};

// Asynchronous: bytes [offset, offset + length) into buffer (an ArrayBuffer of at least length
// bytes), trying again where a connection drops (from where it stopped). Returns a view of them.
async function fetchRange(desc, offset, length, buffer) {
  const out = new Uint8Array(buffer, 0, length);
  let got = 0;
  for (let attempt = 1; ; ++attempt) {
    try {
      const at = offset + got, want = length - got;
      // (a server that stops sending without closing is dropped after REMOTE_STALL_MS of silence)
      const abort = new AbortController();
      let stall = setTimeout(() => abort.abort(), REMOTE_STALL_MS);
      const alive = () => { clearTimeout(stall); stall = setTimeout(() => abort.abort(), REMOTE_STALL_MS); };
      const silent = () => (abort.signal.aborted ? `nothing came for ${REMOTE_STALL_MS / 1000} s` : '');
      let resp;
      try {
        resp = await fetch(desc.remote.url, { headers: remoteHeaders(desc, at, want), cache: 'no-store', referrerPolicy: 'no-referrer', signal: abort.signal });
      } catch (e) {
        clearTimeout(stall);
        // (refused: a redirect away from the Hub's addresses, where no policy of the page's stops it; not worth trying again)
        throw new RemoteError(e.refused ? e.message : `the connection failed (${silent() || e.message})`, !e.refused);
      }
      try {
        if (resp.status !== 206) throw statusError(desc, resp.status, resp.headers.get('Retry-After'));
        checkRangeAnswer(desc, at, want, resp.headers.get('Content-Range'), resp.headers.get('ETag'));
        const reader = resp.body.getReader();
        try {
          for (;;) {
            let r;
            try {
              r = await reader.read();
            } catch (e) {
              throw new RemoteError(`the connection dropped (${silent() || e.message})`, true);
            }
            if (r.done) break;
            alive();
            if (got + r.value.byteLength > length)
              throw new RemoteError(`${desc.name}: the server sent more bytes than its Content-Range says`);
            out.set(r.value, got);
            got += r.value.byteLength;
          }
        } finally {
          reader.releaseLock();
        }
      } finally {
        clearTimeout(stall);
      }
      if (got < length) throw new RemoteError(`the connection dropped ${length - got} bytes short`, true);
      return out;
    } catch (e) {
      if (!(e instanceof RemoteError) || !e.retry || attempt >= REMOTE_TRIES) throw remoteFailure(desc, offset + got, e);
      await new Promise((r) => setTimeout(r, Math.max(REMOTE_BACKOFF_MS[attempt - 1], e.waitMs)));
    }
  }
}

// Synchronous (a worker's XMLHttpRequest): for the core's reads through the file system.
function sleepSync(ms) {
  if (typeof SharedArrayBuffer !== 'undefined') Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  else for (const end = performance.now() + ms; performance.now() < end;);  // (no SharedArrayBuffer: rare, bounded)
}
function fetchRangeSync(desc, offset, length) {
  for (let attempt = 1; ; ++attempt) {
    try {
      const xhr = new XMLHttpRequest();
      xhr.open('GET', desc.remote.url, false);
      xhr.responseType = 'arraybuffer';
      for (const [k, v] of Object.entries(remoteHeaders(desc, offset, length))) xhr.setRequestHeader(k, v);
      try {
        xhr.send();
      } catch (e) {
        throw new RemoteError(`the connection failed (${e.message})`, true);
      }
      if (xhr.status === 0) throw new RemoteError('the connection failed', true);
      if (xhr.status !== 206) throw statusError(desc, xhr.status, xhr.getResponseHeader('Retry-After'));
      checkRangeAnswer(desc, offset, length, xhr.getResponseHeader('Content-Range'), xhr.getResponseHeader('ETag'));
      const body = xhr.response;
      if (!body || body.byteLength < length) throw new RemoteError(`the connection dropped ${length - (body ? body.byteLength : 0)} bytes short`, true);
      if (body.byteLength > length) throw new RemoteError(`${desc.name}: the server sent more bytes than its Content-Range says`);
      return body;
    } catch (e) {
      if (!(e instanceof RemoteError) || !e.retry || attempt >= REMOTE_TRIES) throw remoteFailure(desc, offset, e);
      sleepSync(Math.max(REMOTE_BACKOFF_MS[attempt - 1], e.waitMs));
    }
  }
}

// A remote file as Emscripten's WORKERFS and FileReaderSync want a File: name, size and
// slice(a, b) -> a Blob of those bytes, fetched at once. The core reads a header in small pieces,
// then tensors front to back: a read where the last one ended fetches ahead, twice as far each
// time (up to MAX_AHEAD), one elsewhere just what it asks (at least MIN_FETCH); the last range
// fetched is kept.
class RemoteFile {
  static MIN_FETCH = 64 << 10;
  static MAX_AHEAD = 8 << 20;
  constructor(desc) {
    this.desc = desc;
    this.name = desc.name;
    this.size = desc.size;
    this.window = null;  // { at, bytes: Uint8Array }
    this.ahead = RemoteFile.MIN_FETCH;
    this.fetched = 0;    // bytes fetched
  }
  slice(a = 0, b = this.size) {
    a = Math.max(0, Math.min(a, this.size));
    b = Math.max(a, Math.min(b, this.size));
    const w = this.window;
    if (!w || a < w.at || b > w.at + w.bytes.length) {
      const sequential = w && a >= w.at && a <= w.at + w.bytes.length;
      this.ahead = sequential ? Math.min(this.ahead * 2, RemoteFile.MAX_AHEAD) : RemoteFile.MIN_FETCH;
      const n = Math.min(Math.max(b - a, this.ahead), this.size - a);
      const bytes = n ? new Uint8Array(fetchRangeSync(this.desc, a, n)) : new Uint8Array(0);
      this.fetched += n;
      this.window = { at: a, bytes };
    }
    const { at, bytes } = this.window;
    return new Blob([bytes.subarray(a - at, b - at)]);
  }
}
