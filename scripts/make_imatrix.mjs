// node scripts/make_imatrix.mjs OUT.dat MODEL.gguf: a generated importance matrix (legacy .dat)
// for the weights of a GGUF file, for benchmarks without llama-imatrix (tests/node/llama_ref.mjs).
import { writeImatrixDat } from '../tests/node/llama_ref.mjs';

const [out, like] = process.argv.slice(2);
if (!out || !like) {
  console.error('usage: node scripts/make_imatrix.mjs OUT.dat MODEL.gguf');
  process.exit(2);
}
writeImatrixDat(out, like);
