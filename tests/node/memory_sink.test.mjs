// The page's output in the tab's memory (openMemory in web/write_ring.js, for browsers that let it
// keep no files), run here unchanged with small pieces: writes at any offset and in any order, spanning
// pieces or many at once, give a File of exactly the bytes written; an output that cannot be
// allocated is refused before the first byte, in one line.
import test from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import { root } from './helpers.mjs';

const ctx = vm.createContext({ Blob, File, Uint8Array, Math, Array });
vm.runInContext(fs.readFileSync(path.join(root, 'web', 'write_ring.js'), 'utf8'), ctx);
const openMemory = (...a) => vm.runInContext('openMemory', ctx)(...a);

test('pieces: writes in any order, across pieces, give the file written', async () => {
  const sizes = [10007, 1, 4096, 0];
  const want = sizes.map((n) => crypto.randomBytes(n));
  const sink = openMemory(['a.gguf', 'b', 'c', 'empty'], sizes, 1000);
  for (const [f, bytes] of want.entries()) {
    // cut into writes of 1 to 3000 bytes (many span a piece's end, some several pieces), shuffled
    const cuts = [];
    for (let at = 0; at < bytes.length;) {
      const n = Math.min(bytes.length - at, 1 + crypto.randomInt(3000));
      cuts.push([at, n]);
      at += n;
    }
    for (let i = cuts.length - 1; i > 0; i--) {
      const j = crypto.randomInt(i + 1);
      [cuts[i], cuts[j]] = [cuts[j], cuts[i]];
    }
    for (const [at, n] of cuts) sink.write(f, at, new Uint8Array(bytes.subarray(at, at + n)));
  }
  await sink.close();
  const files = sink.files();
  assert.deepEqual(files.map((f) => [f.name, f.size]), [['a.gguf', 10007], ['b', 1], ['c', 4096], ['empty', 0]]);
  for (const [i, f] of files.entries()) assert.ok(Buffer.from(await f.arrayBuffer()).equals(want[i]), f.name);
});

test('an output that cannot be allocated is refused before the first byte, naming its size', () => {
  assert.throws(() => openMemory(['huge.gguf'], [2 ** 53], 2 ** 52),
    /^Error: the output \(9,007,199,254,740,992 bytes\) does not fit in this tab's memory, and this browser lets the page keep no files: /);
});
