// The output in the tab's memory, for browsers that let the page keep no files (WebKit in a
// private or automated session): loaded by worker.js with importScripts (and by
// tests/node/memory_sink.test.mjs). A sink: write(file, offset, data), close, abort, files().
// Each output file held as pieces of MEMORY_PIECE bytes, allocated before the first byte (the
// core says each file's size up front), and handed over as a File of those pieces: no buffer of a
// whole file, whose largest size differs by browser (and a file > 4 GiB passes it in some).
const MEMORY_PIECE = 256 << 20;
function openMemory(names, sizes, piece = MEMORY_PIECE) {
  let pieces;
  try {
    pieces = sizes.map((n) => Array.from({ length: Math.ceil(n / piece) },
      (_, i) => new Uint8Array(Math.min(piece, n - i * piece))));
  } catch {
    const total = sizes.reduce((a, b) => a + b, 0);
    throw new Error(`the output (${total.toLocaleString('en')} bytes) does not fit in this tab's memory, and this ` +
      'browser lets the page keep no files: convert to a smaller type, or use a browser with an origin-private file system');
  }
  return {
    write: (file, offset, data) => {  // (a write may span pieces)
      for (let at = 0; at < data.length;) {
        const k = Math.floor((offset + at) / piece), o = (offset + at) % piece;
        const n = Math.min(data.length - at, piece - o);
        pieces[file][k].set(data.subarray(at, at + n), o);
        at += n;
      }
    },
    close: async () => {},
    abort: async () => { pieces = []; },
    files: () => {  // (the browser copies the pieces into the Files: they go now)
      const out = names.map((n, i) => new File(pieces[i], n));
      pieces = [];
      return out;
    },
  };
}
