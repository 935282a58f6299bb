// Shared by the Node and browser tests: run the native and WebAssembly CLIs, make checkpoints.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const nativeCli = path.join(root, 'build', 'native', 'export');
export const wasmCli = path.join(root, 'wasm', 'cli.mjs');
export const makeCheckpoint = path.join(root, 'build', 'native', 'make_checkpoint');

// A scratch folder, removed when the test file's process ends (node --test runs each file in a
// process of its own), pass or fail; KEEP_TEST_DIRS=1 keeps them for a look.
const scratch = [];
process.on('exit', () => {
  if (process.env.KEEP_TEST_DIRS === '1') return;
  for (const d of scratch) fs.rmSync(d, { recursive: true, force: true });
});
export function tempDir(prefix) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `leapconv-${prefix}-`));
  scratch.push(d);
  return d;
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}
export const runNative = (args) => run(nativeCli, args);
export const runWasm = (args) => run(process.execPath, [wasmCli, ...args]);

export function generate(dir, args = []) {
  const r = run(makeCheckpoint, [dir, ...args]);
  if (r.code !== 0) throw new Error(`make_checkpoint failed: ${r.stderr}`);
  return dir;
}

// Hand-made inputs for the error tests (hardening, page faults).
// A safetensors file from [{name, dtype, shape, data}], or from a raw header text.
export function writeShard(file, tensors, rawHeader = null) {
  const header = {}, parts = [];
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
    parts.push(t.data);
  }
  const text = Buffer.from(rawHeader ?? JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(text.length));
  fs.writeFileSync(file, Buffer.concat([len, text, ...parts]));
}
// A safetensors file's bytes, parsed header and where its data starts.
export function readShard(file) {
  const b = fs.readFileSync(file);
  const n = Number(b.readBigUInt64LE(0));
  return { b, header: JSON.parse(b.subarray(8, 8 + n).toString()), data: 8 + n };
}
export const f32 = (values) => Buffer.from(new Float32Array(values).buffer);
// Writes one F32 value into a tensor of a checkpoint folder's model.safetensors (element `index`).
export function setWeight(dir, tensor, index, value) {
  const shard = path.join(dir, 'model.safetensors');
  const { b, header, data } = readShard(shard);
  b.writeFloatLE(value, data + header[tensor].data_offsets[0] + 4 * index);
  fs.writeFileSync(shard, b);
  return dir;
}
export function editConfig(dir, fn, file = 'config.json') {
  const p = path.join(dir, file);
  const c = JSON.parse(fs.readFileSync(p, 'utf8'));
  fn(c);
  fs.writeFileSync(p, JSON.stringify(c));
}

// Gemma 4's tokenizer (none on npm): Gemma 3's pieces, which it shares (the same 262144 ids for
// ordinary text), with Gemma 4's special tokens where Gemma 3 has its own or unused ones, no
// <image_soft_token> past them, and tokenizer_config.json's named tokens as Gemma 4's has them.
export function gemma4Tokenizer(dir) {
  const src = path.join(root, 'node_modules', '@lenml', 'tokenizer-gemma3', 'models');
  for (const f of fs.readdirSync(src)) fs.copyFileSync(path.join(src, f), path.join(dir, f));
  const f = path.join(dir, 'tokenizer.json'), c = path.join(dir, 'tokenizer_config.json');
  const tj = JSON.parse(fs.readFileSync(f, 'utf8')), tc = JSON.parse(fs.readFileSync(c, 'utf8'));
  const renamed = { 46: '<|tool>', 47: '<tool|>', 48: '<|tool_call>', 49: '<tool_call|>', 50: '<|tool_response>',
    51: '<tool_response|>', 52: '<|"|>', 98: '<|think|>', 100: '<|channel>', 101: '<channel|>', 105: '<|turn>', 106: '<turn|>' };
  const vocab = {};
  const byId = Object.fromEntries(Object.entries(tj.model.vocab).map(([t, i]) => [i, t]));
  for (const [id, t] of Object.entries(byId)) vocab[renamed[id] ?? t] = Number(id);
  tj.model.vocab = vocab;
  tj.added_tokens = tj.added_tokens.filter((a) => a.id < 262144).map((a) => ({ ...a, content: renamed[a.id] ?? a.content }));
  for (const k of ['boi_token', 'eoi_token', 'image_token']) delete tc[k];
  Object.assign(tc, { eos_token: '<eos>', mask_token: '<mask>', sot_token: '<|turn>', eot_token: '<turn|>',
    soc_token: '<|channel>', eoc_token: '<channel|>', think_token: '<|think|>', escape_token: '<|"|>',
    str_token: '<|tool_response>', etr_token: '<tool_response|>', stc_token: '<|tool_call>', etc_token: '<tool_call|>',
    std_token: '<|tool>', etd_token: '<tool|>', extra_special_tokens: [] });
  fs.writeFileSync(f, JSON.stringify(tj));
  fs.writeFileSync(c, JSON.stringify(tc));
}
