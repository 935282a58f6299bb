// `export --verify` in steps: on a terminal it shows "verify [k/N] …" on stderr, rewritten in
// place, one-based, up to N of N; stdout keeps the report, the same as without a terminal; a
// short verify off a terminal prints no progress at all.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { generate, nativeCli, runNative, tempDir } from './helpers.mjs';

const haveScript = spawnSync('script', ['--version']).status === 0;

test('--verify prints progress on a terminal and keeps its output', { skip: !haveScript && 'no script(1) for a terminal' }, () => {
  const dir = tempDir('verify-progress');
  try {
    const ck = generate(path.join(dir, 'ck'), ['--dim', '128', '--hidden', '256', '--layers', '2', '--vocab', '128']);
    const file = path.join(dir, 'm.gguf');
    assert.equal(runNative([file, '--model', ck, '--type', 'Q4_K_M', '--no-vocab', '--quiet']).code, 0);
    const plain = runNative(['--verify', file, '--model', ck]);
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(plain.stderr, '', 'a short verify off a terminal prints no progress');
    // stderr a terminal (script's pty), stdout a file
    const out = path.join(dir, 'out.txt');
    const q = (s) => `'${s.replace(/'/g, "'\\''")}'`;
    const tty = spawnSync('script', ['-qec', `${q(nativeCli)} --verify ${q(file)} --model ${q(ck)} > ${q(out)}`, '/dev/null'],
      { encoding: 'utf8' });
    assert.equal(tty.status, 0, tty.stdout);
    assert.equal(fs.readFileSync(out, 'utf8'), plain.stdout, 'stdout is the same report');
    const n = JSON.parse(runNative(['--inspect', file, '--json']).stdout).tensors.length + 3;  // + the forward check's three runs
    const steps = [...tty.stdout.matchAll(/verify \[(\d+)\/(\d+)\]/g)].map((m) => [Number(m[1]), Number(m[2])]);
    assert.ok(steps.length >= 1, tty.stdout);
    let prev = 0;
    for (const [k, total] of steps) {
      assert.equal(total, n);
      assert.ok(k > prev && k >= 1 && k <= n, JSON.stringify(steps));
      prev = k;
    }
    assert.equal(prev, n, 'up to N of N');
    assert.match(tty.stdout, /\rverify \[/, 'rewritten in place');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
