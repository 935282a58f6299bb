// Compares the tensors of two GGUF files by name: same ggml type, same dims, same bytes. Prints
// one line per difference and a summary; exit 1 if any tensor differs or is missing on one side.
// Reads the tensor tables with the project's own CLI (--inspect --json).
//   node scripts/compare_gguf_tensors.mjs ours.gguf theirs.gguf
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = path.join(root, 'build', 'native', 'export');
const [a, b] = process.argv.slice(2);
if (!a || !b) {
  console.error('usage: node scripts/compare_gguf_tensors.mjs ours.gguf theirs.gguf');
  process.exit(2);
}

function table(file) {
  const r = spawnSync(cli, ['--inspect', file, '--json'], { encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.status !== 0) throw new Error(`${file}: ${r.stderr}`);
  return new Map(JSON.parse(r.stdout).tensors.map((t) => [t.name, t]));
}

function bytes(fd, t) {
  const buf = Buffer.alloc(t.bytes);
  fs.readSync(fd, buf, 0, t.bytes, t.offset);
  return buf;
}

const ta = table(a), tb = table(b);
const fa = fs.openSync(a, 'r'), fb = fs.openSync(b, 'r');
let same = 0, differ = 0;
for (const [name, x] of ta) {
  const y = tb.get(name);
  if (!y) { console.log(`${name}: only in ${a}`); differ++; continue; }
  if (x.dtype !== y.dtype || JSON.stringify(x.shape) !== JSON.stringify(y.shape)) {
    console.log(`${name}: ${x.dtype} ${JSON.stringify(x.shape)} vs ${y.dtype} ${JSON.stringify(y.shape)}`);
    differ++;
    continue;
  }
  const p = bytes(fa, x), q = bytes(fb, y);
  if (p.equals(q)) { same++; continue; }
  let i = 0;
  while (p[i] === q[i]) i++;
  console.log(`${name} (${x.dtype}): bytes differ from offset ${i} of ${x.bytes}`);
  differ++;
}
for (const name of tb.keys()) if (!ta.has(name)) { console.log(`${name}: only in ${b}`); differ++; }
console.log(`${same} tensors identical (type, shape, bytes), ${differ} differ`);
process.exit(differ ? 1 : 0);
