#!/usr/bin/python3
"""What torch itself gives for the two whole-tensor steps of BitNet's weight_quant, on inputs both
sides can make: torch_sum.json, read by tests/torch_order_test.cpp. Run by hand with Debian's
python3-torch (1.13, one thread, AVX2: the converter's torch here), not in the suite:
    /usr/bin/python3 tests/data/torch/make_fixture.py > tests/data/torch/torch_sum.json
Inputs: value i of a case is ((h(seed, i) >> 40) / 2^24 - 0.5) * scale in f32 (exact), with
h = splitmix64(seed * 2^32 + i); dtype: the tensor's before weight_quant (F16 / BF16 values are
the f32 ones rounded to it). Each case: torch's |x|.sum() and |x|.mean() bits, and the FNV-1a 64
of the bytes BitnetModel.weight_quant returns (in the case's dtype)."""
import json, sys
import numpy as np
import torch

M = (1 << 64) - 1
def values(seed, n, scale):
    i = np.arange(n, dtype=np.uint64)
    z = np.uint64(seed) * np.uint64(1 << 32) + i + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24) - 0.5
    return torch.from_numpy((u * scale).astype(np.float32))

def weight_quant(weight):  # conversion/bitnet.py BitnetModel.weight_quant, as it is
    dtype = weight.dtype
    weight = weight.float()
    scale = weight.abs().mean().clamp(min=1e-5)
    iscale = 1 / scale
    result = (weight * iscale).round().clamp(-1, 1) / iscale
    return result.type(dtype)

def fnv(b):
    h = 0xcbf29ce484222325
    for c in b: h = ((h ^ c) * 0x100000001b3) & M
    return h

def bits(t):
    return int(np.frombuffer(np.float32(t.item()).tobytes(), dtype=np.uint32)[0])

assert torch.get_num_threads() == 1, "the converter's torch here runs one thread"
cases = []
sizes = [1, 3, 7, 8, 9, 31, 32, 33, 127, 128, 129, 513, 4096, 4097, 32767, 32768, 32769, 65536 + 13,
         1 << 20, (1 << 20) + 77, 3 * 1024 * 1024 + 5, 2048 * 5632, (1 << 24) + 3]
for k, n in enumerate(sizes):
    for dtype in ("F32", "F16", "BF16"):
        if n > (1 << 22) and dtype != "F32": continue
        scale = [2.0, 0.05, 1e-4, 3e-6][(k + len(dtype)) % 4]
        x = values(k, n, scale)
        t = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}[dtype]
        w = x.to(t)
        a = w.float().abs()
        q = weight_quant(w)
        raw = q.view(torch.int16).numpy().tobytes() if t != torch.float32 else q.numpy().tobytes()
        cases.append({"seed": k, "n": n, "scale": scale, "dtype": dtype, "sum_bits": bits(a.sum()),
                      "mean_bits": bits(a.mean()), "quant_fnv": "%016x" % fnv(raw) if n <= (1 << 20) else None})
        print(k, n, dtype, file=sys.stderr)
json.dump({"torch": torch.__version__, "cases": cases}, sys.stdout, indent=1)
print()
