// BitNet's weight_quant needs the f32 bits torch gives for a whole tensor's mean of |w|: the sum in
// torch's order (core/torch_sum.h) and the ternarized values (plan/recipe.h's ternarize), against
// what torch itself gave for the same inputs (tests/data/torch/torch_sum.json, written by
// tests/data/torch/make_fixture.py with Debian's torch 1.13: the converter's own torch here).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/f16.h"
#include "core/error.h"
#include "core/torch_sum.h"
#include "plan/recipe.h"
#include "quant/ggml_quants.h"
#include "test_support.h"

using namespace leapconv;
using nlohmann::json;

namespace {

// make_fixture.py's inputs: ((splitmix64(seed * 2^32 + i) >> 40) / 2^24 - 0.5) * scale, in f32,
// then rounded to the case's dtype.
std::vector<float> fixture_values(uint64_t seed, int64_t n, double scale, const std::string& dtype) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed * (uint64_t(1) << 32) + uint64_t(i) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float f = float((double(z >> 40) / double(1 << 24) - 0.5) * scale);
    v[size_t(i)] = dtype == "F16" ? f16_to_f32(f32_to_f16(f)) : dtype == "BF16" ? bf16_to_f32(ggml::fp32_to_bf16(f)) : f;
  }
  return v;
}

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint32_t bits(float f) { return f32_bits(f); }

}  // namespace

TEST(TorchOrder, SumMeanAndTernarizedValuesAreTorchsBits) {
  const json fx = json::parse(tsup::slurp_text(std::string(VOCAB_TEST_DATA) + "/torch/torch_sum.json"));
  int checked = 0, hashed = 0;
  for (const json& c : fx.at("cases")) {
    const int64_t n = c.at("n");
    if (n > (int64_t(1) << 22) && n < (int64_t(1) << 24)) continue;  // (the long cascade is 3M's; past 2^24 the count rounds as a float)
    const std::string dtype = c.at("dtype");
    SCOPED_TRACE("n " + std::to_string(n) + " " + dtype);
    std::vector<float> w = fixture_values(c.at("seed").get<uint64_t>(), n, c.at("scale").get<double>(), dtype);
    const float sum = torch_float_sum([&](int64_t i) { return std::fabs(w[size_t(i)]); }, n);
    EXPECT_EQ(bits(sum), c.at("sum_bits").get<uint32_t>());
    EXPECT_EQ(bits(sum / float(n)), c.at("mean_bits").get<uint32_t>());
    ++checked;
    if (c.at("quant_fnv").is_null()) continue;
    const DType dt = dtype == "F16" ? DType::F16 : dtype == "BF16" ? DType::BF16 : DType::F32;
    ternarize(w.data(), n, dt, "fixture", "w");
    uint64_t h = 0xcbf29ce484222325ull;
    for (float x : w) {
      if (dt == DType::F32) {
        h = fnv1a(reinterpret_cast<const uint8_t*>(&x), 4, h);
      } else {
        const uint16_t b = dt == DType::F16 ? f32_to_f16(x) : ggml::fp32_to_bf16(x);
        const uint8_t le[2] = {uint8_t(b & 0xFF), uint8_t(b >> 8)};
        h = fnv1a(le, 2, h);
      }
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    EXPECT_EQ(std::string(hex), c.at("quant_fnv").get<std::string>());
    ++hashed;
  }
  EXPECT_EQ(checked, 64);
  EXPECT_EQ(hashed, 57);
}

// The order matters: a plain left-to-right f32 sum of the same values gives other bits (so the
// fixture can tell the orders apart), and a non-finite value is one error naming the tensor.
TEST(TorchOrder, ThePlainOrderDiffersAndNonFiniteValuesAreRefused) {
  std::vector<float> w = fixture_values(19, (1 << 20) + 77, 0.05, "F32");
  float plain = 0.0f;
  for (float x : w) plain += std::fabs(x);
  EXPECT_NE(bits(plain), bits(torch_float_sum([&](int64_t i) { return std::fabs(w[size_t(i)]); }, int64_t(w.size()))));
  w[12345] = std::nanf("");
  try {
    ternarize(w.data(), int64_t(w.size()), DType::F32, "model.safetensors", "model.layers.0.mlp.up_proj.weight");
    FAIL() << "a NaN weight was ternarized";
  } catch (const ConvertError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
  }
}
