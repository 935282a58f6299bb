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

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `leapconv-${prefix}-`));
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
