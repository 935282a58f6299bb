// Node 20 has a global fetch, and Emscripten 3.1.6's loader then tries fetch("/abs/x.wasm"),
// which fails for a file path. Under Node, hand it the binary from disk instead.
if (typeof process === 'object' && process.versions && process.versions.node &&
    !Module['wasmBinary'] && !Module['ENVIRONMENT_IS_PTHREAD']) {
  Module['wasmBinary'] = require('fs').readFileSync(__filename.replace(/\.c?js$/, '.wasm'));
}
