// The WebAssembly CLI under Node must write byte-identical files to the native CLI, for every
// output format, and fail the same way on bad input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { generate, runNative, runWasm, tempDir } from './helpers.mjs';

const work = tempDir('node');
const llama = generate(path.join(work, 'llama'), ['--dim', '128', '--hidden', '320', '--layers', '2', '--heads', '4',
  '--kv-heads', '2', '--vocab', '200', '--shards', '2', '--dtype', 'bf16']);
const tied = generate(path.join(work, 'tied'), ['--dim', '96', '--hidden', '256', '--heads', '3', '--kv-heads', '1',
  '--tied', '--dtype', 'f16']);
const gpt2 = generate(path.join(work, 'gpt2'), ['--arch', 'gpt2', '--dim', '128', '--layers', '2', '--vocab', '300',
  '--seq-len', '64', '--dtype', 'f32']);

const cases = [
  ['LEAP v1', llama, 'out.bin', ['--version', '1']],
  ['LEAP v2', llama, 'out.bin', ['--version', '2']],
  ['LEAP v1 tied f16', tied, 'out.bin', ['--version', '1']],
  ['LEAP v2 tied f16 (group 32)', tied, 'out.bin', ['--version', '2']],
  ['GGUF-lite q8', llama, 'out.gguf-lite', ['--scheme', 'q8']],
  ['GGUF-lite q4', llama, 'out.gguf-lite', ['--scheme', 'q4']],
  ['GGUF-lite f16', gpt2, 'out.gguf-lite', ['--scheme', 'f16']],
  ['GGUF-lite q4 gpt2', gpt2, 'out.gguf-lite', ['--scheme', 'q4']],
];

for (const [name, model, file, extra] of cases) {
  test(`wasm CLI output is byte-identical to native: ${name}`, () => {
    const dir = tempDir('case');
    const a = path.join(dir, 'native-' + file), b = path.join(dir, 'wasm-' + file);
    const flag = file.endsWith('.bin') ? '--meta-llama' : '--model';
    const rn = runNative([a, flag, model, ...extra, '--quiet']);
    assert.equal(rn.code, 0, rn.stderr);
    const rw = runWasm([b, flag, model, ...extra, '--quiet']);
    assert.equal(rw.code, 0, rw.stderr);
    const na = fs.readFileSync(a), wb = fs.readFileSync(b);
    assert.ok(na.length > 256);
    assert.ok(na.equals(wb), `${name}: files differ (${na.length} vs ${wb.length} bytes)`);
    // and the wasm build's own reader agrees that the round trip is exact
    const v = runWasm(['--verify', b, '--model', model, '--json']);
    assert.equal(v.code, 0, v.stderr);
    const report = JSON.parse(v.stdout);
    assert.equal(report.ok, true);
    assert.ok(report.tensors.every((t) => t.max_abs_vs_fake_quant === 0));
    fs.rmSync(dir, { recursive: true, force: true });
  });
}

// Quantized checkpoints and LoRA adapters decode in wasm as natively: FP8 blocks, GPTQ
// (act-order), compressed-tensors int4 with zero points; an adapter written as a GGUF adapter and
// merged into its base.
test('wasm CLI decodes quantized checkpoints and LoRA adapters to the native bytes', () => {
  const dir = tempDir('quantized');
  const runs = [];
  for (const kind of ['fp8-block', 'gptq4', 'ct-int4-zp']) {
    const ck = generate(path.join(dir, kind), ['--arch', 'qwen3moe', '--hf-init', '--quant', kind, '--quant-block', '32', '--quant-ref', '']);
    runs.push([`${kind} Q4_K_M`, 'out.gguf', ['--model', ck, '--type', 'Q4_K_M', '--no-vocab']]);
  }
  const base = generate(path.join(dir, 'base'), ['--hf-init']);
  const adapter = generate(path.join(dir, 'adapter'), ['--lora-base', base]);
  runs.push(['LoRA adapter', 'adapter.gguf', ['--lora', adapter, '--model', base, '--outtype', 'F16']]);
  runs.push(['--merge-lora', 'merged.gguf', ['--model', base, '--merge-lora', adapter, '--outtype', 'Q8_0', '--no-vocab']]);
  for (const [name, file, args] of runs) {
    const a = path.join(dir, 'native-' + file), b = path.join(dir, 'wasm-' + file);
    const rn = runNative([a, ...args, '--quiet']);
    assert.equal(rn.code, 0, rn.stderr);
    const rw = runWasm([b, ...args, '--quiet']);
    assert.equal(rw.code, 0, `${name}: ${rw.stderr}`);
    assert.ok(fs.readFileSync(a).equals(fs.readFileSync(b)), `${name}: files differ`);
    fs.rmSync(a);
    fs.rmSync(b);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('wasm CLI --json summary matches native', () => {
  const dir = tempDir('json');
  const rn = runNative([path.join(dir, 'a.bin'), '--meta-llama', llama, '--version', '2', '--json', '--quiet']);
  const rw = runWasm([path.join(dir, 'b.bin'), '--meta-llama', llama, '--version', '2', '--json', '--quiet']);
  assert.equal(rn.code, 0);
  assert.equal(rw.code, 0);
  const jn = JSON.parse(rn.stdout), jw = JSON.parse(rw.stdout);
  assert.deepEqual(jw.header, jn.header);
  assert.deepEqual(jw.tensors, jn.tensors);
  assert.equal(jw.total_bytes, fs.statSync(path.join(dir, 'b.bin')).size);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('wasm CLI fails like native on a truncated shard and leaves no file', () => {
  const dir = tempDir('bad');
  const model = path.join(dir, 'm');
  fs.cpSync(llama, model, { recursive: true });
  const shard = path.join(model, 'model-00002-of-00002.safetensors');
  fs.truncateSync(shard, fs.statSync(shard).size - 1000);
  for (const [who, runner] of [['native', runNative], ['wasm', runWasm]]) {
    const out = path.join(dir, `${who}.bin`);
    const r = runner([out, '--meta-llama', model, '--quiet']);
    assert.equal(r.code, 1, `${who}: ${r.stderr}`);
    const errors = r.stderr.split('\n').filter((l) => l.startsWith('error:'));
    assert.equal(errors.length, 1, r.stderr);
    assert.match(errors[0], /model-00002-of-00002\.safetensors/);
    assert.match(errors[0], /tensor '/);
    assert.ok(!fs.existsSync(out) && !fs.existsSync(out + '.partial'), `${who} left a file behind`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
});

test('wasm CLI writes the same parts of a split GGUF as native, and reads them back from one name', () => {
  const dir = tempDir('split');
  for (const who of ['native', 'wasm']) fs.mkdirSync(path.join(dir, who));
  const args = (who) => [path.join(dir, who, 'm.gguf'), '--model', llama, '--outtype', 'Q8_0', '--no-vocab',
    '--split-max-tensors', '5', '--quiet'];
  assert.equal(runNative(args('native')).code, 0);
  const rw = runWasm(args('wasm'));
  assert.equal(rw.code, 0, rw.stderr);
  const names = fs.readdirSync(path.join(dir, 'native')).sort();
  assert.deepEqual(fs.readdirSync(path.join(dir, 'wasm')).sort(), names);
  assert.ok(names.length > 2 && names.every((n) => /^m-\d{5}-of-\d{5}\.gguf$/.test(n)), names.join());
  for (const n of names)
    assert.ok(fs.readFileSync(path.join(dir, 'native', n)).equals(fs.readFileSync(path.join(dir, 'wasm', n))), n);
  const v = runWasm(['--verify', path.join(dir, 'wasm', names[1]), '--model', llama, '--json']);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(JSON.parse(v.stdout).ok, true);
  fs.rmSync(dir, { recursive: true, force: true });
});
