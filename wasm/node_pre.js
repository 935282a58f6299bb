// Node 20 has a global fetch, and Emscripten 3.1.6's loader then tries fetch("/abs/x.wasm"),
// which fails for a file path. Under Node, hand it the binary from disk instead.
if (typeof process === 'object' && process.versions && process.versions.node &&
    !Module['wasmBinary'] && !Module['ENVIRONMENT_IS_PTHREAD']) {
  Module['wasmBinary'] = require('fs').readFileSync(__filename.replace(/\.c?js$/, '.wasm'));
}

// The output lock of the WebAssembly CLI. Node cannot flock, so <out>.partial.lock, created
// with O_EXCL (written under a name of its own, then hard-linked into place: it never shows
// half-written), names the writer: its pid, the pid's start time (/proc: a reused pid has
// another) and the host. A live writer's lock refuses a second conversion; a dead one's is
// moved aside and removed (the rename takes exactly the file judged stale, or puts it back).
// Never follows a link. acquire: 0 locked, 3 locked after removing a stale lock, 1 a live
// conversion holds it, 2 the name is something else, -1 no lock could be made (the caller's
// own open of <out>.partial then reports why).
if (typeof process === 'object' && process.versions && process.versions.node) {
  globalThis.leapconvOutputLock = (function () {
    var fs = require('fs'), os = require('os');
    function procStat(pid) {
      try {
        var s = fs.readFileSync('/proc/' + pid + '/stat', 'utf8');
        var f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        return { state: f[0], start: f[19] };
      } catch (e) { return null; }
    }
    function identity() {
      var st = procStat(process.pid);
      return JSON.stringify({ pid: process.pid, start: st ? st.start : null, host: os.hostname() }) + '\n';
    }
    function alive(owner) {
      if (owner.host !== os.hostname()) return true;  // another machine's: cannot tell, assume it runs
      try { process.kill(owner.pid, 0); } catch (e) { if (e.code === 'ESRCH') return false; }
      var st = procStat(owner.pid);
      if (st && (st.state === 'Z' || (owner.start && st.start !== owner.start))) return false;  // dead, or the pid reused
      return true;
    }
    function readLock(file) {
      var fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
      try { return fs.readFileSync(fd, 'utf8'); } finally { fs.closeSync(fd); }
    }
    function parse(text) {
      try {
        var o = JSON.parse(text);
        return Number.isSafeInteger(o.pid) && o.pid > 0 && typeof o.host === 'string' ? o : null;
      } catch (e) { return null; }
    }
    function acquire(lock) {
      var me = identity(), mine = lock + '.' + process.pid + '.' + require('crypto').randomBytes(4).toString('hex');
      var linkable = true;
      try { fs.writeFileSync(mine, me, { flag: 'wx', mode: 420 }); } catch (e) { linkable = false; }
      var took = false;
      try {
        for (var attempt = 0; attempt < 3; ++attempt) {
          try {
            if (linkable) fs.linkSync(mine, lock); else fs.writeFileSync(lock, me, { flag: 'wx', mode: 420 });
            return took ? 3 : 0;
          } catch (e) {
            if (e.code !== 'EEXIST') {
              if (!linkable) return -1;
              linkable = false;  // no hard links here: create it in place
              continue;
            }
          }
          var st;
          try { st = fs.lstatSync(lock, { bigint: true }); } catch (e) { if (e.code === 'ENOENT') continue; return -1; }
          if (!st.isFile()) return 2;
          var text;
          try { text = readLock(lock); } catch (e) { if (e.code === 'ENOENT') continue; return 2; }
          var owner = parse(text);
          if (!owner) return text === '' ? 1 : 2;  // '' : a writer between create and write
          if (alive(owner)) return 1;
          var aside = mine + '.stale';
          try { fs.renameSync(lock, aside); } catch (e) { if (e.code === 'ENOENT') continue; return -1; }
          var moved = fs.lstatSync(aside, { bigint: true });
          if (moved.ino !== st.ino || moved.dev !== st.dev) {  // a new writer's, taken meanwhile: give it back
            try { fs.linkSync(aside, lock); } catch (e) { /* another lock is there again */ }
            fs.unlinkSync(aside);
            return 1;
          }
          fs.unlinkSync(aside);
          took = true;
        }
        return 1;
      } catch (e) {
        return -1;
      } finally {
        try { fs.unlinkSync(mine); } catch (e) { /* never made, or gone */ }
      }
    }
    // Removes the lock if it is this process's.
    function release(lock) {
      try { if (readLock(lock) === identity()) fs.unlinkSync(lock); } catch (e) { /* not there, or not ours */ }
    }
    return { acquire: acquire, release: release };
  })();
}

// Models on the Hugging Face Hub for the CLI (--model hf://owner/name[@revision]:
// platform/posix/hub_folder.h). The converting thread cannot wait for a promise, so a worker of its
// own (wasm/hub_fetcher.mjs, started on first use) does the HTTP, and this thread sleeps on a
// shared flag until the answer is posted (Atomics.wait, then receiveMessageOnPort).
// open(spec, wanted) -> JSON text; read(file, offset, n) -> the bytes, or a message.
if (typeof process === 'object' && process.versions && process.versions.node && process.env.LEAPCONV_HUB_FETCHER) {
  globalThis.leapconvHub = (function () {
    var wt = require('worker_threads');
    var worker = null, port = null, flag = null;
    function call(request) {
      if (!worker) {
        var channel = new wt.MessageChannel();
        flag = new Int32Array(new SharedArrayBuffer(4));
        worker = new wt.Worker(process.env.LEAPCONV_HUB_FETCHER,
                               { workerData: { port: channel.port2, flag: flag }, transferList: [channel.port2] });
        worker.unref();
        port = channel.port1;
      }
      while (wt.receiveMessageOnPort(port)) { /* (a stale answer: none is expected) */ }
      Atomics.store(flag, 0, 0);
      worker.postMessage(request);
      Atomics.wait(flag, 0, 0);
      var got = wt.receiveMessageOnPort(port);
      return got ? got.message : { error: 'the Hub reader stopped without an answer' };
    }
    return {
      open: function (spec, wanted) {
        var a = call({ op: 'open', spec: spec, wanted: wanted });
        return a.error ? JSON.stringify({ error: a.error }) : a.json;
      },
      read: function (file, offset, n) {
        var a = call({ op: 'read', file: file, offset: offset, length: n });
        return a.error ? a.error : a.bytes;
      },
    };
  })();
}
