// Stands in for @huggingface/xetchunk-wasm in the Hub client (web/vendor/hub.js, made by
// scripts/build.sh): that package chunks and hashes files for Xet *uploads*, which this page never
// makes; the client imports it at the top of its module, so something must answer the import.
const unused = () => { throw new Error('Xet upload hashing is not part of this page'); };
export const MerkleHashSubtree = unused, hashToHex = unused, hexToBytes = unused, hmac = unused,
  createChunker = unused, nextBlock = unused, finalize = unused, xorbHash = unused, fileHash = unused,
  verificationHash = unused;
