// Our GGUF v3 writer, read by llama.cpp's side: node-llama-cpp's own GGUF parser must see every
// key, value and tensor info we meant to write, and llama.cpp's gguf.cpp (in node-llama-cpp's
// prebuilt binary) must accept the file. On the hostile files of tests/gguf3_reader.h, gguf.cpp
// and our reader must agree, except where ours is stricter on purpose (listed in the cases).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { getLlama, readGgufFileInfo } from 'node-llama-cpp';
import { root, tempDir } from './helpers.mjs';

const sample = path.join(root, 'build', 'native', 'gguf_sample');
const sampleWasm = path.join(root, 'build', 'wasm', 'gguf_sample.js');  // the same, on wasm32
const work = tempDir('gguf3');

function run(args, wasm = false) {
  const r = wasm
    ? spawnSync(process.execPath, [sampleWasm, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 })
    : spawnSync(sample, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  assert.equal(r.status, 0, `gguf_sample${wasm ? ' (wasm)' : ''} ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function writeSample(alignment) {
  const file = path.join(work, `sample-${alignment}.gguf`), desc = path.join(work, `sample-${alignment}.json`);
  run(['write', file, desc, String(alignment)]);
  return { file, want: JSON.parse(fs.readFileSync(desc, 'utf8')) };
}

// node-llama-cpp nests "a.b.c" keys into objects; flatten them back to the keys on disk.
function flatten(obj, prefix = '', out = {}) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = v;
  }
  return out;
}

// Our JSON writes 64-bit integers as decimal strings; node-llama-cpp reads them as BigInt.
function expected(kv) {
  const conv = (x) => (kv.elem === 'u64' || kv.elem === 'i64' ? BigInt(x) : x);
  return kv.type === 'arr' ? kv.value.map(conv) : conv(kv.value);
}

let llama;
before(async () => {
  llama = await getLlama({ gpu: false, build: 'never', logLevel: 'disabled' });
});
after(async () => {
  await llama?.dispose();
});

// gguf.cpp's verdict: AddonGgufMetadata.init runs gguf_init_from_file (no_alloc, as llama.cpp
// loads a model) and throws when it returns NULL.
async function ggufCppAccepts(file) {
  const meta = new llama._bindings.AddonGgufMetadata();
  try {
    await meta.init([file]);
    return true;
  } catch {
    return false;
  } finally {
    await meta.dispose();
  }
}

for (const alignment of [32, 64]) {
  test(`node-llama-cpp reads every key, value and tensor info we wrote (alignment ${alignment})`, async () => {
    const { file, want } = writeSample(alignment);
    assert.equal(fs.statSync(file).size, want.file_size);
    const info = await readGgufFileInfo(file, { sourceType: 'filesystem', logWarnings: false, spliceSplitFiles: false });
    assert.equal(info.version, 3);
    assert.equal(Number(info.tensorCount), want.tensors.length);
    assert.equal(info.infoEndOffset, want.data_start);

    const got = flatten(info.metadata);
    assert.deepEqual(Object.keys(got).sort(), want.kv.map((e) => e.key).sort());
    for (const kv of want.kv) {
      const g = got[kv.key];
      const w = expected(kv);
      if (kv.elem === 'f32' || kv.elem === 'f64') {
        // floats compare as their exact values (an f32 widened to a double on both sides)
        assert.deepEqual(Array.isArray(g) ? g : [g], Array.isArray(w) ? w : [w], kv.key);
      } else {
        assert.deepEqual(g, w, kv.key);
      }
      assert.equal(Array.isArray(g), kv.type === 'arr', `${kv.key}: array-ness`);
    }
    if (alignment !== 32) assert.equal(got['general.alignment'], alignment);

    assert.equal(info.tensorInfo.length, want.tensors.length);
    for (let i = 0; i < want.tensors.length; ++i) {
      const g = info.tensorInfo[i], w = want.tensors[i];
      assert.equal(g.name, w.name);
      assert.deepEqual(g.dimensions.map(Number), w.dims);
      assert.equal(g.ggmlType, w.type, w.name);
      assert.equal(Number(g.offset), w.offset, w.name);
      assert.equal(Number(g.fileOffset), w.file_offset, w.name);
      assert.equal(w.file_offset % alignment, 0, w.name);
      // The byte size from ggml's own type table (the prebuilt binary's ggml_type_size/blck_size).
      const ts = llama._bindings.getTypeSizeForGgmlType(w.type), bs = llama._bindings.getBlockSizeForGgmlType(w.type);
      const n = w.dims.reduce((a, b) => a * b, 1);
      assert.equal(n / bs * ts, w.nbytes, w.name);
      // Each tensor is followed by padding to the alignment, the last one too.
      const end = i + 1 < want.tensors.length ? want.tensors[i + 1].file_offset : want.file_size;
      assert.equal(end, w.file_offset + Math.ceil(w.nbytes / alignment) * alignment, w.name);
    }

    assert.ok(await ggufCppAccepts(file), 'gguf.cpp rejected the file');
  });
}

test("our ggml type table is the prebuilt ggml's, id for id", () => {
  const ours = JSON.parse(run(['types']));  // {id: [block size, bytes per block]}
  for (let id = 0; id < 64; ++id) {
    const ts = llama._bindings.getTypeSizeForGgmlType(id), bs = llama._bindings.getBlockSizeForGgmlType(id);
    const known = ts != null && bs != null && bs > 0;  // removed types have block size 0
    assert.equal(String(id) in ours, known, `id ${id}: ggml (${bs}, ${ts}), ours ${JSON.stringify(ours[id])}`);
    if (known) assert.deepEqual(ours[id], [bs, ts], `id ${id}`);
  }
});

test('gguf.cpp and our reader agree on hostile files', async () => {
  const dir = tempDir('gguf3-hostile');
  run(['hostile', dir]);
  const cases = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  const verdicts = run(['check', ...cases.map((c) => c.path)]).trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(verdicts.length, cases.length);
  // wasm32 (32-bit size_t) gives the same verdicts, word for word.
  assert.deepEqual(run(['check', ...cases.map((c) => c.path)], true).trim().split('\n').map((l) => JSON.parse(l)), verdicts);
  for (let i = 0; i < cases.length; ++i) {
    const c = cases[i], ours = verdicts[i];
    const theirs = await ggufCppAccepts(c.path);
    assert.equal(theirs, c.gguf_cpp_accepts, `${c.name}: gguf.cpp ${theirs ? 'accepted' : 'rejected'} it`);
    if (c.name === 'base') {
      assert.equal(ours.ok, true, `base: ${ours.error}`);
    } else {
      assert.equal(ours.ok, false, `${c.name}: our reader accepted it`);
      assert.ok(ours.error.includes(c.expect), `${c.name}: ${ours.error}`);
    }
  }
});

test('the wasm32 build writes the same bytes and has the same type table', () => {
  for (const alignment of [32, 64]) {
    const a = path.join(work, `n-${alignment}.gguf`), b = path.join(work, `w-${alignment}.gguf`);
    run(['write', a, a + '.json', String(alignment)]);
    run(['write', b, b + '.json', String(alignment)], true);
    assert.ok(fs.readFileSync(a).equals(fs.readFileSync(b)), `alignment ${alignment}: files differ`);
  }
  assert.deepEqual(JSON.parse(run(['types'], true)), JSON.parse(run(['types'])));
});
