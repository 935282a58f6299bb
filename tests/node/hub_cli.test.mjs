// The CLI's input from the Hugging Face Hub (`--model hf://owner/name[@revision]`, the Node build:
// wasm/cli.mjs), against the stand-in Hub the page's tests use (tests/browser/mock_hub.mjs): the
// same bytes as the native CLI on the same folder, the shards read by range and never whole, verify
// reading them again; a connection cut mid-shard and a 429 retried; a shard changed between
// requests, and each refusal a user meets, one line with nothing written.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { generate, nativeCli, runNative, tempDir, wasmCli } from './helpers.mjs';
import { startTestHub, REPO, TOKEN, NO_ACCESS_TOKEN } from '../browser/mock_hub.mjs';

const work = tempDir('hubcli');
let hub, dir;

before(async () => {
  // two shards, a real SentencePiece tokenizer
  dir = generate(path.join(work, 'tiny-llama'), ['--dim', '256', '--hidden', '768', '--layers', '2', '--heads', '4', '--kv-heads', '2',
    '--vocab', '400', '--seq-len', '128', '--dtype', 'bf16', '--shards', '2', '--seed', '5']);
  hub = await startTestHub(dir);
});
after(async () => {
  await hub?.close();
  fs.rmSync(work, { recursive: true, force: true });
});

// The Node CLI (or the native one, which runs the same reader in a Node process), with this
// process's event loop free: the stand-in Hub answers from it.
function cli(args, env = {}, which = 'wasm') {
  return new Promise((resolve) => {
    const [program, first] = which === 'wasm' ? [process.execPath, [wasmCli]] : [nativeCli, []];
    const p = spawn(program, [...first, ...args], {
      env: { ...process.env, HF_ENDPOINT: hub.url, LEAPCONV_HUB_ORIGINS: hub.cdnUrl, HF_TOKEN: '', ...env } });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
const native = (out, type) => {
  const r = runNative([out, '--model', dir, type === 'Q8_0' ? '--outtype' : '--type', type, '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  return fs.readFileSync(out);
};
const shardNames = () => fs.readdirSync(dir).filter((n) => n.endsWith('.safetensors')).sort();
// What the CDN was asked for: one entry per GET, its range.
const cdnGets = () => hub.log.filter((e) => e.origin === 'cdn' && e.method === 'GET')
  .map((e) => ({ file: decodeURIComponent(e.url.split('/').pop()), range: e.range, cut: !!e.cut, status: e.status }));
const nothingLeft = (d) => fs.readdirSync(d);

test('both CLIs convert hf://owner/name to the native CLI\'s bytes of the same folder, shards by range, never whole; verify reads it again', async () => {
  const out = tempDir('hubcli-out');
  for (const [which, type, flag, spec] of [['wasm', 'Q8_0', '--outtype', `hf://${REPO}`], ['wasm', 'Q4_K_M', '--type', `hf://${REPO}@v1`],
    ['native', 'Q4_K_M', '--type', `hf://${REPO}`]]) {
    hub.resetCounts();
    const file = path.join(out, `hub-${which}-${type}.gguf`);
    const r = await cli([file, '--model', spec, flag, type, '--quiet'], {}, which);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(fs.readFileSync(file).equals(native(path.join(out, `native-${type}.gguf`), type)), `${type}: the native CLI's bytes`);
    const gets = cdnGets();
    for (const name of shardNames()) {
      const mine = gets.filter((g) => g.file === name);
      assert.ok(mine.length >= 2, `${name} read in several ranges (${mine.length})`);
      assert.ok(mine.every((g) => /^bytes=\d+-\d+$/.test(g.range)), `${name} never asked for whole`);
    }
    const v = await cli(['--verify', file, '--model', spec, '--json'], {}, which);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(JSON.parse(v.stdout).ok, true);
  }
  fs.rmSync(out, { recursive: true, force: true });
});

// A GPTQ weight's codes are read in strips where reads are cheap; from the Hub each is one range
// into a stage the blocks of rows copy from (src/engine/pipeline.cpp): the same bytes as the folder's.
test('the native CLI converts a GPTQ checkpoint from the Hub to the bytes of the same folder', async () => {
  const gptq = generate(path.join(work, 'gptq', 'tiny-llama'), ['--dim', '256', '--hidden', '768', '--layers', '2', '--heads', '4',
    '--kv-heads', '2', '--vocab', '400', '--dtype', 'bf16', '--quant', 'gptq4', '--hf-init']);
  fs.copyFileSync(path.join(dir, 'tokenizer.model'), path.join(gptq, 'tokenizer.model'));
  const other = await startTestHub(gptq);
  try {
    const file = path.join(work, 'gptq', 'hub-Q4_K_M.gguf'), want = path.join(work, 'gptq', 'folder-Q4_K_M.gguf');
    const r = await new Promise((resolve) => {
      const p = spawn(nativeCli, [file, '--model', `hf://${REPO}`, '--type', 'Q4_K_M', '--quiet'],
        { env: { ...process.env, HF_ENDPOINT: other.url, LEAPCONV_HUB_ORIGINS: other.cdnUrl, HF_TOKEN: '' } });
      let stderr = '';
      p.stderr.on('data', (d) => { stderr += d; });
      p.on('close', (code) => resolve({ code, stderr }));
    });
    assert.equal(r.code, 0, r.stderr);
    const l = runNative([want, '--model', gptq, '--type', 'Q4_K_M', '--quiet']);
    assert.equal(l.code, 0, l.stderr);
    assert.ok(fs.readFileSync(file).equals(fs.readFileSync(want)), 'the Hub\'s GPTQ checkpoint gives the folder\'s bytes');
  } finally {
    await other.close();
  }
});

test('the CLI from the Hub: a cut mid-shard and a 429 are retried (same bytes); a shard changed between requests, or since it was listed, is one line naming it, nothing written', async () => {
  const out = tempDir('hubcli-faults');
  const [, second] = shardNames();
  const size = fs.statSync(path.join(dir, second)).size;
  hub.resetCounts();
  hub.faults.cut = { file: second, at: Math.floor(size / 2) };
  hub.faults.status = { on: 'cdn', code: 429, times: 1, retryAfter: 1, after: 4 };  // (a read's: the model is open)
  const file = path.join(out, 'faults.gguf');
  const r = await cli([file, '--model', `hf://${REPO}`, '--outtype', 'Q8_0', '--quiet']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(fs.readFileSync(file).equals(native(path.join(out, 'native.gguf'), 'Q8_0')), 'the same bytes after a cut and a 429');
  assert.ok(cdnGets().some((g) => g.cut), 'the cut happened');
  assert.ok(cdnGets().some((g) => g.status === 429), 'the 429 happened');
  fs.rmSync(file);
  fs.rmSync(path.join(out, 'native.gguf'));
  const changed = Buffer.from(fs.readFileSync(path.join(dir, second)));
  changed[size - 10] ^= 0x55;
  hub.resetCounts();
  hub.faults.change = { file: second, after: 2, bytes: changed };  // (after the model is opened: resolved, its ETag taken)
  try {
    const c = await cli([file, '--model', `hf://${REPO}`, '--outtype', 'Q8_0', '--quiet']);
    assert.notEqual(c.code, 0);
    const lines = c.stderr.trim().split('\n');
    assert.match(lines[0], new RegExp(`${second.replace(/\./g, '\\.')}.*changed on the Hub while it was read`), c.stderr);
    assert.deepEqual(nothingLeft(out), [], 'nothing written');
  } finally {
    hub.faults.change = null;
    hub.addRepo(REPO, dir, { revisions: ['main', 'v1'] });
  }
  // a shard replaced between the listing (which gives its sha256) and its first range
  hub.resetCounts();
  hub.faults.change = { file: second, after: 0, bytes: changed };
  try {
    const c = await cli([file, '--model', `hf://${REPO}`, '--outtype', 'Q8_0', '--quiet']);
    assert.notEqual(c.code, 0);
    assert.match(c.stderr.trim().split('\n')[0], new RegExp(`${second.replace(/\./g, '\\.')} changed on the Hub since it was listed \\(its sha256 was`), c.stderr);
    assert.deepEqual(nothingLeft(out), [], 'nothing written');
  } finally {
    hub.faults.change = null;
    hub.addRepo(REPO, dir, { revisions: ['main', 'v1'] });
  }
  fs.rmSync(out, { recursive: true, force: true });
});

test('the CLIs from the Hub: each refusal is one line saying what to do (the page\'s sentence), nothing written', async () => {
  const out = tempDir('hubcli-errors');
  const file = path.join(out, 'x.gguf');
  const [first] = shardNames();
  const cases = [
    ['not found', 'hf://test-org/nothing-here', {}, /No model test-org\/nothing-here on the Hub/],
    ['gated, no token', 'hf://test-org/gated', {}, /test-org\/gated is gated: open .*accept its conditions/],
    ['gated, token not granted', 'hf://test-org/gated', { HF_TOKEN: NO_ACCESS_TOKEN }, /this token's account has not been granted access/],
    ['token rejected', `hf://${REPO}`, { HF_TOKEN: 'hf_wrong' }, /rejected the access token/],
    ['private, no token', 'hf://test-org/private', {}, /No model test-org\/private on the Hub \(or it is private\)/],
    ['only pickles', 'hf://test-org/pickles', {}, /only PyTorch pickle weights \(pytorch_model\.bin\)/],
    ['an LFS pointer', 'hf://test-org/pointer', {}, /model\.safetensors in test-org\/pointer is a Git LFS pointer/],
    ['a bad name in the listing', 'hf://test-org/escape', {}, /not a plain file name: refused/],
    ['no such revision', `hf://${REPO}@v9`, {}, /has no branch, tag or commit "v9"/],
    ['not an id', 'hf://not an id', {}, /is not a model id/],
    ['the Hub unreachable', `hf://${REPO}`, { HF_ENDPOINT: 'http://127.0.0.1:9' }, /Could not reach the Hub/],
    ['a redirect elsewhere', `hf://${REPO}`, { redirect: true }, new RegExp(`redirected ${first.replace(/\./g, '\\.')} to http://localhost:9, an address outside its own: refused`)],
  ];
  for (const [what, spec, env, expected] of cases) {
    if (env.redirect) hub.faults.redirect = { file: first, to: 'http://localhost:9/elsewhere' };
    const r = await cli([file, '--model', spec, '--outtype', 'Q8_0'], env.redirect ? {} : env);
    hub.faults.redirect = null;
    assert.notEqual(r.code, 0, what);
    const lines = r.stderr.trim().split('\n').filter((l) => !/^(note|warning):/.test(l));
    assert.match(lines[0], expected, `${what}: ${r.stderr}`);
    assert.ok(lines[0].startsWith('error: ') && lines[0].length < 400, `${what}: one line: ${r.stderr}`);
    assert.deepEqual(nothingLeft(out), [], `${what}: nothing written`);
  }
  // the token is accepted from HF_TOKEN (a gated model with a granted token converts)
  const ok = await cli([file, '--model', 'hf://test-org/gated', '--outtype', 'Q8_0', '--quiet'], { HF_TOKEN: TOKEN });
  assert.equal(ok.code, 0, ok.stderr);
  assert.ok(hub.log.some((e) => e.origin === 'hub' && e.auth), 'the token went to the Hub');
  fs.rmSync(file);
  // the native CLI: the same sentences (the same reader), and one of its own when there is no Node
  for (const [what, spec, env, expected] of [cases[0], cases[2], cases[cases.length - 1],
    ['no node', `hf://${REPO}`, { LEAPCONV_NODE: '/nonexistent/node' }, /runs Node\.js \(the `node` command\), which is not on the PATH/]]) {
    if (env.redirect) hub.faults.redirect = { file: first, to: 'http://localhost:9/elsewhere' };
    const r = await cli([file, '--model', spec, '--outtype', 'Q8_0'], env.redirect ? {} : env, 'native');
    hub.faults.redirect = null;
    assert.notEqual(r.code, 0, what);
    assert.match(r.stderr.trim().split('\n')[0], expected, `native, ${what}: ${r.stderr}`);
    assert.deepEqual(nothingLeft(out), [], `native, ${what}: nothing written`);
  }
  fs.rmSync(out, { recursive: true, force: true });
});
