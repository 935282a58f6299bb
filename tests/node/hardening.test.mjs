// Every crash-class input of the hardening work (issue 18) gives the WebAssembly CLI exactly the
// native CLI's one error line and exit code 1, with no RuntimeError or abort, and no file left;
// interrupting signals remove the temporary output in the WebAssembly CLI as in the native one.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { editConfig, f32, generate, runNative, runWasm, setWeight, tempDir, wasmCli, writeShard } from './helpers.mjs';

const work = tempDir('hardening');
after(() => fs.rmSync(work, { recursive: true, force: true }));

const copy = (from, name) => {
  const to = path.join(work, name);
  fs.cpSync(from, to, { recursive: true });
  return to;
};

const llama = generate(path.join(work, 'llama'), ['--dim', '64', '--hidden', '256', '--layers', '1', '--heads', '2',
  '--kv-heads', '1', '--vocab', '32', '--dtype', 'f32']);
const gpt2 = generate(path.join(work, 'gpt2'), ['--arch', 'gpt2', '--dim', '8', '--heads', '2', '--layers', '1',
  '--vocab', '20', '--seq-len', '16', '--dtype', 'f32']);
assert.equal(runNative([path.join(work, 'gpt2.gguf-lite'), '--model', gpt2, '--quiet']).code, 0);

// [name, () => args]: each setup returns the CLI arguments (the same for both CLIs).
const cases = [
  ['GPT-2 config wider than its tensors (--verify)', () => {
    const m = copy(gpt2, 'gpt2-wide');
    editConfig(m, (c) => { c.n_embd = 64; });
    return ['--verify', path.join(work, 'gpt2.gguf-lite'), '--model', m];
  }],
  ['GPT-2 n_positions -1 (--verify)', () => {
    const m = copy(gpt2, 'gpt2-npos');
    editConfig(m, (c) => { c.n_positions = -1; });
    return ['--verify', path.join(work, 'gpt2.gguf-lite'), '--model', m];
  }],
  ['an embedding with no rows (LEAP)', () => {
    const m = copy(llama, 'no-rows');
    const shard = path.join(m, 'model.safetensors');
    const b = fs.readFileSync(shard);
    const n = Number(b.readBigUInt64LE(0));
    const h = JSON.parse(b.subarray(8, 8 + n).toString());
    const data = b.subarray(8 + n);
    const tensors = Object.entries(h).filter(([k]) => k !== '__metadata__' && k !== 'lm_head.weight')
      .map(([name, e]) => ({ name, dtype: e.dtype, shape: e.shape, data: data.subarray(e.data_offsets[0], e.data_offsets[1]) }));
    const emb = tensors.find((t) => t.name === 'model.embed_tokens.weight');
    emb.shape = [0, 64];
    emb.data = Buffer.alloc(0);
    writeShard(shard, tensors);
    editConfig(m, (c) => { delete c.vocab_size; c.tie_word_embeddings = true; });
    return [path.join(work, 'o.bin'), '--model', m, '--quiet'];
  }],
  ['num_local_experts: 1e20', () => {
    const m = copy(llama, 'experts');
    fs.writeFileSync(path.join(m, 'config.json'),
      fs.readFileSync(path.join(m, 'config.json'), 'utf8').replace('{', '{"num_local_experts": 1e20, '));
    return [path.join(work, 'o.bin'), '--model', m, '--quiet'];
  }],
  ['hidden_size: 1e300', () => {
    const m = copy(llama, 'hidden');
    fs.writeFileSync(path.join(m, 'config.json'),
      fs.readFileSync(path.join(m, 'config.json'), 'utf8').replace(/"hidden_size": *64/, '"hidden_size": 1e300'));
    return [path.join(work, 'o.gguf'), '--model', m, '--no-vocab', '--quiet'];
  }],
  ['a FIFO named like a shard', () => {
    const m = copy(llama, 'fifo');
    assert.equal(spawnSync('mkfifo', [path.join(m, 'zz.safetensors')]).status, 0);
    return [path.join(work, 'o.gguf-lite'), '--model', m, '--quiet'];
  }],
  ['the output is the input shard', () => [path.join(llama, 'model.safetensors'), '--model', llama, '--format', 'gguf-lite', '--quiet']],
  ['a symlinked <out>.partial', () => {
    const out = path.join(work, 'linked.gguf-lite');
    fs.writeFileSync(path.join(work, 'victim'), 'keep');
    fs.rmSync(out + '.partial', { force: true });
    fs.symlinkSync(path.join(work, 'victim'), out + '.partial');
    return [out, '--model', llama, '--quiet'];
  }],
  ['duplicate keys in a safetensors header', () => {
    const f = path.join(work, 'dup.safetensors');
    const e = '{"dtype":"F32","shape":[1],"data_offsets":[0,4]}';
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [1], data: f32([1]) }], `{"w":${e},"w":${e}}`);
    return [path.join(work, 'o.gguf-lite'), '--model', f, '--quiet'];
  }],
  ['a 9-D tensor (GGUF-lite)', () => {
    const f = path.join(work, 'nine.safetensors');
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [1, 1, 1, 1, 1, 1, 1, 1, 2], data: f32([1, 2]) }]);
    return [path.join(work, 'o.gguf-lite'), '--model', f, '--quiet'];
  }],
  ['dims whose product overflows', () => {
    const f = path.join(work, 'overflow.safetensors');
    writeShard(f, [{ name: 'w', dtype: 'F32', shape: [2 ** 40, 2 ** 40, 0], data: Buffer.alloc(0) }]);
    return [path.join(work, 'o.gguf-lite'), '--model', f, '--quiet'];
  }],
  ['a weight too large for Q8_0 (its f16 scale overflows)', () => {
    const m = setWeight(copy(llama, 'huge-weight'), 'model.layers.0.mlp.down_proj.weight', 5, 1e10);
    return [path.join(work, 'o.gguf'), '--model', m, '--no-vocab', '--quiet'];
  }],
  ['a weight of 1e20 in Q6_K (past where ggml\'s search overflows)', () => {
    const m = setWeight(copy(llama, 'search-overflow'), 'model.layers.0.mlp.down_proj.weight', 5, 1e20);
    return [path.join(work, 'o.gguf'), '--model', m, '--no-vocab', '--quiet', '--type', 'Q6_K'];
  }],
  ['a tensor name holding a newline and ESC', () => {
    const f = path.join(work, 'names.safetensors');
    writeShard(f, [{ name: 'w\nerror: forged\u001b[2J', dtype: 'F8_E5M2', shape: [1], data: Buffer.alloc(1) }]);
    return [path.join(work, 'o.gguf-lite'), '--model', f, '--quiet'];
  }],
];

for (const [name, setup] of cases) {
  test(`wasm CLI gives native's error line: ${name}`, () => {
    const args = setup();
    const results = [];
    for (const [who, runner] of [['native', runNative], ['wasm', runWasm]]) {
      const r = runner(args);
      assert.equal(r.signal, null, `${who} died of ${r.signal}\n${r.stderr}`);
      assert.equal(r.code, 1, `${who}: exit ${r.code}\n${r.stderr}`);
      assert.doesNotMatch(r.stderr, /RuntimeError|Aborted|memory access out of bounds|exception/i, `${who}: ${r.stderr}`);
      const errors = r.stderr.split('\n').filter((l) => l.startsWith('error:'));
      assert.equal(errors.length, 1, `${who}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /\u001b/);
      const out = args[0].startsWith('--') ? null : args[0];
      if (out && !out.endsWith('.safetensors')) {
        assert.ok(!fs.existsSync(out), `${who} left ${out}`);
      }
      results.push(errors[0]);
    }
    assert.equal(results[1], results[0], 'the two CLIs say different things');
  });
}

test('the shard the output would have replaced is intact, the link target untouched', () => {
  assert.ok(fs.statSync(path.join(llama, 'model.safetensors')).size > 1000);
  assert.equal(fs.readFileSync(path.join(work, 'victim'), 'utf8'), 'keep');
});

// Signals: the WebAssembly CLI removes its temporary file and dies of the signal, as native does.
test('wasm CLI removes <out>.partial on SIGINT, SIGTERM, SIGHUP, SIGQUIT', async () => {
  const big = generate(path.join(work, 'big'), ['--dim', '512', '--hidden', '1536', '--layers', '6', '--vocab', '4000']);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) {
    const out = path.join(work, `sig-${sig}.gguf`);
    let caught = false;
    for (let attempt = 0; attempt < 4 && !caught; ++attempt) {
      const child = spawn(process.execPath, [wasmCli, out, '--model', big, '--type', 'Q4_K_M', '--no-vocab', '--threads', '1', '--quiet'],
        { stdio: 'ignore' });
      const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
      let done = null;
      exited.then((r) => { done = r; });
      while (!fs.existsSync(out + '.partial') && !done) await new Promise((r) => setTimeout(r, 2));
      if (done) { fs.rmSync(out, { force: true }); continue; }  // finished before we looked
      child.kill(sig);
      const r = await exited;
      if (r.code === 0) { fs.rmSync(out, { force: true }); continue; }
      caught = true;
      assert.equal(r.signal, sig, `${sig}: exit ${r.code}`);
      assert.ok(!fs.existsSync(out + '.partial'), `${sig} left ${out}.partial`);
      assert.ok(!fs.existsSync(out));
    }
    assert.ok(caught, `the conversion always finished before ${sig}`);
  }
});

// The WebAssembly CLI cannot flock: <out>.partial.lock names its writer (pid, start time).
// A writer killed with SIGKILL leaves both behind; the next run sees the writer is gone, removes
// them and writes the right bytes. A run while another writes the same output is refused with
// the native CLI's message.
test('wasm CLI: a run killed with SIGKILL does not block the next; a concurrent one is refused', async () => {
  const big = path.join(work, 'big');
  if (!fs.existsSync(big)) generate(big, ['--dim', '512', '--hidden', '1536', '--layers', '6', '--vocab', '4000']);
  const out = path.join(work, 'killed.gguf');
  const args = [out, '--model', big, '--type', 'Q4_K_M', '--no-vocab', '--threads', '1', '--quiet'];
  const expected = path.join(work, 'killed-native.gguf');
  assert.equal(runNative([expected, ...args.slice(1)]).code, 0);
  let killed = false, refused = false;
  for (let attempt = 0; attempt < 4 && !(killed && refused); ++attempt) {
    fs.rmSync(out, { force: true });
    const child = spawn(process.execPath, [wasmCli, ...args], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    let done = null;
    exited.then((r) => { done = r; });
    while (!fs.existsSync(out + '.partial') && !done) await new Promise((r) => setTimeout(r, 2));
    if (done) continue;  // finished before we looked
    // While it writes: a second conversion to the same output is refused, as natively.
    const second = runWasm(args);
    if (second.code === 0) { await exited; continue; }  // the first had finished meanwhile
    {
      assert.equal(second.code, 1, second.stderr);
      const line = second.stderr.split('\n').filter((l) => l.startsWith('error:'));
      assert.deepEqual(line, [`error: ${out}: another conversion is writing this output (${out}.partial is locked): ` +
        'wait for it to finish, or choose another output path']);
      refused = true;
    }
    child.kill('SIGKILL');
    const r = await exited;
    if (r.signal !== 'SIGKILL') continue;
    // (no .partial: it had finished, its output renamed and its lock removed, as the signal landed)
    if (!fs.existsSync(out + '.partial')) continue;
    assert.ok(fs.existsSync(out + '.partial.lock'), 'SIGKILL left the .partial file but no lock');
    killed = true;
    // The writer is gone: the rerun removes what it left and writes the right bytes.
    const rerun = runWasm(args);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.ok(fs.readFileSync(out).equals(fs.readFileSync(expected)), 'the rerun wrote other bytes than native');
    assert.ok(!fs.existsSync(out + '.partial') && !fs.existsSync(out + '.partial.lock'));
  }
  assert.ok(killed && refused, `the conversion always finished first (killed ${killed}, refused ${refused})`);
});

// A lock naming a live process (this test's) refuses the run; one naming a process that is gone
// (or a pid now used by another process: a different start time) is stale. Links are never followed.
test('wasm CLI: the output lock tells a live writer from a dead one and never follows a link', () => {
  const out = path.join(work, 'locked.gguf-lite');
  const lock = out + '.partial.lock';
  const args = [out, '--model', llama, '--quiet'];
  const start = (pid) => { const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8'); return s.slice(s.lastIndexOf(')') + 2).split(' ')[19]; };
  const host = os.hostname();
  const write = (o) => { fs.rmSync(lock, { force: true }); fs.writeFileSync(lock, JSON.stringify(o) + '\n'); };
  fs.writeFileSync(out + '.partial', 'stale bytes');
  write({ pid: process.pid, start: start(process.pid), host });  // alive: refused, nothing touched
  let r = runWasm(args);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /another conversion is writing this output \(.*\.partial is locked\)/);
  assert.equal(fs.readFileSync(out + '.partial', 'utf8'), 'stale bytes');
  write({ pid: process.pid, start: String(Number(start(process.pid)) + 1), host });  // the pid reused: stale
  r = runWasm(args);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.existsSync(out) && !fs.existsSync(out + '.partial') && !fs.existsSync(lock));
  // A symlinked lock, and a symlinked .partial under a stale lock: refused, their targets untouched.
  fs.rmSync(out);
  fs.writeFileSync(path.join(work, 'lock-victim'), 'keep');
  fs.symlinkSync(path.join(work, 'lock-victim'), lock);
  r = runWasm(args);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /\.partial\.lock exists and is not a file this converter left/);
  fs.rmSync(lock);
  const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  write({ pid: Number(dead.stdout), start: null, host });
  fs.symlinkSync(path.join(work, 'lock-victim'), out + '.partial');
  const native = runNative(args);
  r = runWasm(args);
  assert.equal(r.code, 1, r.stderr);
  assert.deepEqual(r.stderr.split('\n').filter((l) => l.startsWith('error:')),
    native.stderr.split('\n').filter((l) => l.startsWith('error:')));
  assert.equal(fs.readFileSync(path.join(work, 'lock-victim'), 'utf8'), 'keep');
  assert.ok(fs.lstatSync(out + '.partial').isSymbolicLink() && !fs.existsSync(out));
  assert.ok(!fs.existsSync(lock), 'the refused run left its lock');
});
