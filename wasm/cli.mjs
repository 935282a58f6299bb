#!/usr/bin/env node
// The WebAssembly build of the `export` CLI under Node: same arguments, same output bytes,
// same exit codes as build/native/export. Files are reached through Emscripten's NODERAWFS.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'build', 'wasm', 'leapconv-cli.js');
if (!existsSync(cli)) {
  console.error(`error: ${cli} is missing; run \`npm run build\` first`);
  process.exit(2);
}
// The Emscripten module reads process.argv.slice(2) and calls process.exit with main's code.
createRequire(import.meta.url)(cli);
