// A copy of a checkpoint folder whose first shard is larger than 4 GiB: its data starts with
// PAD_BYTES of a tensor every converter skips (rotary_emb.inv_freq, left as a hole on disk, so
// it costs no space and no time to write), and every real tensor lies past it, so a reader that
// loses the offset's high bits reads the wrong bytes. For BENCH=large (scripts/bench.sh).
//   node tests/bench/pad_checkpoint.mjs <checkpoint folder> <new folder> [PAD_BYTES, default 4 GiB]
import fs from 'node:fs';
import path from 'node:path';

const [src, dst, padArg] = process.argv.slice(2);
if (!src || !dst) {
  console.error('usage: node tests/bench/pad_checkpoint.mjs <checkpoint folder> <new folder> [PAD_BYTES]');
  process.exit(2);
}
const pad = Number(padArg || 2 ** 32);
const PAD_NAME = 'model.layers.0.self_attn.rotary_emb.inv_freq';
if (!Number.isSafeInteger(pad) || pad <= 0 || pad % 2) throw new Error(`PAD_BYTES ${padArg}: a positive even byte count`);

fs.rmSync(dst, { recursive: true, force: true });
fs.mkdirSync(dst, { recursive: true });
const shards = fs.readdirSync(src).filter((f) => f.endsWith('.safetensors')).sort();
for (const f of fs.readdirSync(src)) if (!f.endsWith('.safetensors')) fs.copyFileSync(path.join(src, f), path.join(dst, f));

// the first shard, rewritten: header (the pad tensor first, the rest moved past it), a hole, the data
const first = path.join(src, shards[0]);
const fd = fs.openSync(first, 'r');
const len = Buffer.alloc(8);
fs.readSync(fd, len, 0, 8, 0);
const n = Number(len.readBigUInt64LE());
const hbuf = Buffer.alloc(n);
fs.readSync(fd, hbuf, 0, n, 8);
const header = JSON.parse(hbuf.toString('utf8'));
const moved = { [PAD_NAME]: { dtype: 'BF16', shape: [pad / 2], data_offsets: [0, pad] } };
for (const [k, v] of Object.entries(header)) {
  moved[k] = k === '__metadata__' ? v : { ...v, data_offsets: v.data_offsets.map((o) => o + pad) };
}
let json = JSON.stringify(moved);
json += ' '.repeat((8 - (json.length % 8)) % 8);  // (as safetensors pads it)
const out = fs.openSync(path.join(dst, shards[0]), 'w');
const newLen = Buffer.alloc(8);
newLen.writeBigUInt64LE(BigInt(json.length));
fs.writeSync(out, newLen, 0, 8, 0);
fs.writeSync(out, Buffer.from(json), 0, json.length, 8);
const dataSize = fs.fstatSync(fd).size - 8 - n;
const buf = Buffer.alloc(64 << 20);
for (let at = 0; at < dataSize;) {
  const got = fs.readSync(fd, buf, 0, Math.min(buf.length, dataSize - at), 8 + n + at);
  fs.writeSync(out, buf, 0, got, 8 + json.length + pad + at);
  at += got;
}
fs.ftruncateSync(out, 8 + json.length + pad + dataSize);
fs.closeSync(out);
fs.closeSync(fd);
for (const s of shards.slice(1)) fs.linkSync(path.join(src, s), path.join(dst, s));
const index = path.join(dst, 'model.safetensors.index.json');
if (fs.existsSync(index)) {
  const j = JSON.parse(fs.readFileSync(index, 'utf8'));
  j.weight_map[PAD_NAME] = shards[0];
  fs.writeFileSync(index, JSON.stringify(j, null, 2));
}
console.log(`${path.join(dst, shards[0])}: ${8 + json.length + pad + dataSize} bytes, its first real tensor at ${8 + json.length + pad}`);
