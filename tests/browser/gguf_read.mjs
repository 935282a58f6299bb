// The browser tests' own GGUF reading (version 3, as ggml's gguf.cpp reads it), independent of
// the core: the metadata keys with their values and the bytes each takes in the file, the tensor
// infos, and where the data starts. Enough to check what the page wrote and what it says about it.
import assert from 'node:assert/strict';

const GGML_TYPES = { 0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 6: 'Q5_0', 7: 'Q5_1', 8: 'Q8_0', 10: 'Q2_K', 11: 'Q3_K',
  12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 30: 'BF16', 39: 'MXFP4' };

export function readGguf(buf) {
  let p = 0;
  const need = (n) => assert.ok(p + n <= buf.length, `GGUF: read past the end at ${p}`);
  const u32 = () => { need(4); const v = buf.readUInt32LE(p); p += 4; return v; };
  const u64 = () => { need(8); const v = Number(buf.readBigUInt64LE(p)); p += 8; return v; };
  const str = () => { const n = u64(); need(n); const s = buf.toString('utf8', p, p + n); p += n; return s; };
  const scalar = {
    0: () => { need(1); return buf.readUInt8(p++); }, 1: () => { need(1); return buf.readInt8(p++); },
    2: () => { need(2); const v = buf.readUInt16LE(p); p += 2; return v; }, 3: () => { need(2); const v = buf.readInt16LE(p); p += 2; return v; },
    4: u32, 5: () => { need(4); const v = buf.readInt32LE(p); p += 4; return v; },
    6: () => { need(4); const v = buf.readFloatLE(p); p += 4; return v; }, 7: () => { need(1); return buf.readUInt8(p++) !== 0; },
    8: str, 10: u64, 11: () => { need(8); const v = Number(buf.readBigInt64LE(p)); p += 8; return v; },
    12: () => { need(8); const v = buf.readDoubleLE(p); p += 8; return v; },
  };
  const value = (type) => {
    if (type === 9) {
      const t = u32(), n = u64();
      const out = [];
      for (let i = 0; i < n; i++) out.push(value(t));
      return out;
    }
    assert.ok(scalar[type], `GGUF: unknown value type ${type}`);
    return scalar[type]();
  };
  assert.equal(buf.toString('latin1', 0, 4), 'GGUF', 'magic');
  p = 4;
  const version = u32(), nTensors = u64(), nKv = u64();
  const headerBytes = p;
  const kv = new Map();
  for (let i = 0; i < nKv; i++) {
    const start = p;
    const key = str();
    const v = value(u32());
    kv.set(key, { value: v, bytes: p - start });
  }
  const tensors = new Map();
  const infoStart = p;
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const nd = u32();
    const dims = [];
    for (let d = 0; d < nd; d++) dims.push(u64());
    const type = u32();
    tensors.set(name, { dims, type: GGML_TYPES[type] ?? `type ${type}`, offset: u64() });
  }
  const infoBytes = p - infoStart;
  const alignment = kv.has('general.alignment') ? kv.get('general.alignment').value : 32;
  const dataStart = Math.ceil(p / alignment) * alignment;
  return { version, headerBytes, kv, tensors, infoBytes, alignment, dataStart };
}
