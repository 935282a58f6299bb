#!/usr/bin/env node
// The WebAssembly build of the `export` CLI under Node: same arguments, same output bytes,
// same exit codes as build/native/export. Files are reached through Emscripten's NODERAWFS.
import { createRequire } from 'node:module';
import { existsSync, unlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'build', 'wasm', 'leapconv-cli.js');
if (!existsSync(cli)) {
  console.error(`error: ${cli} is missing; run \`npm run build\` first`);
  process.exit(2);
}
// Interrupting signals reach Node, not the program (whose main() runs in a pthread, so this
// thread stays free to take them): remove the outputs' temporary files, which the program names
// in globalThis.leapconvTempOutputs while it has them (platform/posix/posix_io.cpp: one per
// output, every part of a split file), and their locks (wasm/node_pre.js), then die of the
// signal as the native CLI does.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) {
  process.on(sig, () => {
    for (const temp of globalThis.leapconvTempOutputs ?? []) {
      try { unlinkSync(temp); } catch { /* already gone */ }
      globalThis.leapconvOutputLock?.release(`${temp}.lock`);
    }
    process.removeAllListeners(sig);
    process.kill(process.pid, sig);
  });
}
// A model on the Hub (--model hf://owner/name): read by this worker, for the converting thread
// (wasm/node_pre.js; the threads inherit this environment).
process.env.LEAPCONV_HUB_FETCHER = path.join(here, 'hub_fetcher.mjs');
// The Emscripten module reads process.argv.slice(2) and calls process.exit with main's code.
createRequire(import.meta.url)(cli);
