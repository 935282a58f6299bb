#include "formats/gguf/gguf_presets.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "core/error.h"
#include "core/text.h"

namespace leapconv {

namespace {

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// tensor_get_category, for the names this project writes.
enum class Category { Output, TokenEmbd, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };
Category category_of(const std::string& n) {
  if (n == "output.weight") return Category::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Category::TokenEmbd;  // (Gemma 4's too)
  // attn_v-like (category_is_attn_v): fused qkv (Phi-3) and MLA's kv_b take attn_v's rules
  if (has(n, "attn_qkv.weight") || has(n, "attn_kv_b.weight") || has(n, "attn_v.weight")) return Category::AttnV;
  if (has(n, "attn_k.weight")) return Category::AttnK;
  if (has(n, "attn_q.weight")) return Category::AttnQ;
  if (has(n, "attn_output.weight")) return Category::AttnOutput;
  if (has(n, "ffn_up")) return Category::FfnUp;
  if (has(n, "ffn_gate")) return Category::FfnGate;
  if (has(n, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// tensor_allows_quantization, for the names this project writes.
bool allows_quantization(const QuantizeTensor& t) {
  return t.n_dims >= 2 && ends_with(t.name, "weight") && !has(t.name, "_norm.weight") &&
         !has(t.name, "ffn_gate_inp.weight") &&  // a mixture's router
         t.name != "position_embd.weight" && t.name != "token_types.weight" &&
         !has(t.name, "per_layer_model_proj");  // Gemma 4's: "not too big so keep them as it is"
}

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

const char* name_of(QType t) { return quant_type(t).name; }

// llama_tensor_get_type_impl (not Falcon), in its order.
QType mixture(uint32_t ftype, QType t, const QuantizeModel& m, const QuantizeTensor& x, Category c, const QuantizeOptions& o,
              QuantizeCounters& k) {
  const int64_t n = m.n_layers, nv = m.n_attention_wv > 0 ? m.n_attention_wv : n;
  const int64_t gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  auto is = [&](std::initializer_list<uint32_t> fs) { return std::find(fs.begin(), fs.end(), ftype) != fs.end(); };
  // a mixture's layer from the name ("experts ... are not consecutive"), a dense model's by count
  auto layer = [&](int64_t& count) { const int64_t i = count++; return m.n_expert > 1 ? x.layer : i; };
  // output, and token_embd when tied to it
  if (c == Category::Output || (!m.has_output && c == Category::TokenEmbd)) {
    if (o.output_type) return *o.output_type;
    if (ftype == kFtypeMxfp4Moe || x.ncols % quant_type(t).block_values != 0) return QType::Q8_0;
    if (is({kFtypeIQ2_XXS, kFtypeIQ2_XS, kFtypeIQ3_XXS, kFtypeIQ1_S, kFtypeIQ2_S, kFtypeIQ2_M, kFtypeIQ1_M})) return QType::Q5_K;
    return t != QType::Q8_0 ? QType::Q6_K : t;
  }
  if (ftype == kFtypeMxfp4Moe) return x.ne2 > 1 ? QType::MXFP4 : QType::Q8_0;  // the stacked experts MXFP4, the rest Q8_0
  if (c == Category::TokenEmbd) {
    if (is({kFtypeIQ2_XXS, kFtypeIQ2_XS, kFtypeIQ1_S, kFtypeIQ1_M})) return QType::Q2_K;
    if (is({kFtypeIQ2_S, kFtypeIQ2_M, kFtypeIQ3_XXS})) return QType::IQ3_S;
    if (is({kFtypeTQ1_0, kFtypeTQ2_0, kFtypeQ2_0})) return QType::Q4_K;
    return t;
  }
  if (is({kFtypeIQ2_XXS, kFtypeIQ2_XS, kFtypeIQ1_S, kFtypeIQ2_S, kFtypeIQ2_M, kFtypeIQ1_M})) {  // the 1- and 2-bit i-quants
    const bool s_or_m = is({kFtypeIQ2_S, kFtypeIQ2_M});
    if (c == Category::AttnV) {
      ++k.attention_wv;
      if (gqa >= 4 || m.n_expert >= 4) return QType::Q4_K;
      return s_or_m ? QType::IQ3_S : QType::Q2_K;
    }
    if (m.n_expert == 8 && c == Category::AttnK) return QType::Q4_K;
    if (c == Category::FfnDown) {  // (by count, experts too)
      const bool first = k.ffn_down++ < n / 8;
      return first ? (s_or_m ? QType::IQ3_S : QType::Q2_K) : t;
    }
    if (c == Category::AttnOutput) {
      if (m.n_expert == 8) return QType::Q5_K;
      if (is({kFtypeIQ1_S, kFtypeIQ1_M})) return QType::IQ2_XXS;
      if (s_or_m) return QType::IQ3_S;
    }
    return t;
  }
  if (c == Category::AttnV) {
    const int64_t iv = k.attention_wv++;
    if (ftype == kFtypeQ2_K) t = gqa >= 4 ? QType::Q4_K : QType::Q3_K;
    else if (ftype == kFtypeQ2_K_S && gqa >= 4) t = QType::Q4_K;
    else if (ftype == kFtypeIQ3_XXS) t = gqa >= 4 ? QType::Q4_K : !m.has_imatrix ? QType::IQ3_S : QType::IQ3_XXS;
    else if (is({kFtypeIQ3_XS, kFtypeIQ3_S}) && gqa >= 4) t = QType::Q4_K;
    else if (ftype == kFtypeIQ3_M) t = QType::Q4_K;
    else if (ftype == kFtypeQ3_K_M) t = iv < 2 ? QType::Q5_K : QType::Q4_K;
    else if (ftype == kFtypeQ3_K_L) t = QType::Q5_K;
    else if (is({kFtypeIQ4_NL, kFtypeIQ4_XS}) && gqa >= 4) t = QType::Q5_K;
    else if (is({kFtypeQ4_K_M, kFtypeQ5_K_M}) && use_more_bits(iv, nv)) t = QType::Q6_K;
    else if (ftype == kFtypeQ4_K_S && iv < 4) t = QType::Q5_K;
    if (m.is_70b && (t == QType::Q3_K || t == QType::Q4_K)) t = QType::Q5_K;
    if (m.n_expert == 8) t = QType::Q8_0;  // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
    return t;
  }
  if (c == Category::AttnK) {
    if (m.n_expert == 8) return QType::Q8_0;
    if (ftype == kFtypeIQ3_XS) return QType::IQ3_XXS;
    if (ftype == kFtypeIQ3_XXS) return QType::IQ2_S;
    return t;
  }
  if (c == Category::AttnQ) {
    if (ftype == kFtypeIQ3_XS) return QType::IQ3_XXS;
    if (ftype == kFtypeIQ3_XXS) return QType::IQ2_S;
    return t;
  }
  if (c == Category::FfnDown) {
    const int64_t i = layer(k.ffn_down);
    if (ftype == kFtypeQ2_K) return QType::Q3_K;
    if (ftype == kFtypeQ2_K_S) return i < n / 8 ? QType::Q4_K : t;
    if (ftype == kFtypeIQ3_XXS && !m.has_imatrix) return i < n / 8 ? QType::Q4_K : QType::Q3_K;
    if (ftype == kFtypeQ3_K_M) return i < n / 16 ? QType::Q5_K : QType::Q4_K;  // (not Falcon)
    if (ftype == kFtypeIQ3_M && (i < n / 8 || (m.n_expert == 8 && use_more_bits(i, n)))) return QType::Q4_K;
    if (ftype == kFtypeQ3_K_L) return QType::Q5_K;
    if (ftype == kFtypeQ4_K_M) return use_more_bits(i, n) ? QType::Q6_K : t;
    if (is({kFtypeIQ4_NL, kFtypeIQ4_XS}) && !m.has_imatrix && i < n / 8) return QType::Q5_K;
    if (ftype == kFtypeQ5_K_M && use_more_bits(i, n)) return QType::Q6_K;
    if (ftype == kFtypeQ4_K_S && i < n / 8) return QType::Q5_K;
    // "guard against craziness in the first few ffn_down layers ... even with imatrix for Q4_0/Q5_0"
    if (is({kFtypeQ4_0, kFtypeQ5_0}) && m.has_imatrix && i < n / 8) return ftype == kFtypeQ4_0 ? QType::Q4_1 : QType::Q5_1;
    return t;
  }
  if (c == Category::AttnOutput) {
    if (m.n_expert == 8)
      return is({kFtypeQ2_K, kFtypeIQ3_XS, kFtypeIQ3_XXS, kFtypeQ3_K_S, kFtypeQ3_K_M, kFtypeIQ4_NL, kFtypeQ4_K_S, kFtypeQ4_K_M,
                 kFtypeIQ3_S, kFtypeIQ3_M, kFtypeIQ4_XS}) ? QType::Q5_K : t;
    if (ftype == kFtypeQ2_K) return QType::Q3_K;
    if (ftype == kFtypeIQ3_XXS) return QType::IQ3_S;
    if (ftype == kFtypeQ3_K_M || ftype == kFtypeIQ3_M) return QType::Q4_K;
    if (ftype == kFtypeQ3_K_L) return QType::Q5_K;
    return t;
  }
  if (c == Category::FfnGate || c == Category::FfnUp) {
    const int64_t i = layer(c == Category::FfnGate ? k.ffn_gate : k.ffn_up);
    if (ftype == kFtypeIQ3_XS && i >= n / 8 && i < 7 * n / 8) return QType::IQ3_XXS;
  }
  return t;
}

}  // namespace

QType llama_quantize_fallback(QType t, int64_t ncols, const std::string& name) {
  if (ncols % quant_type(t).block_values == 0) return t;
  QType r = t;
  switch (t) {
    case QType::IQ1_S:
    case QType::IQ1_M:
    case QType::IQ2_XXS:
    case QType::IQ2_XS:
    case QType::IQ2_S:
    case QType::IQ3_XXS:
    case QType::IQ3_S:
    case QType::IQ4_XS: r = QType::IQ4_NL; break;
    case QType::Q2_0:
    case QType::Q2_K:
    case QType::Q3_K:
    case QType::TQ1_0:
    case QType::TQ2_0: r = QType::Q4_0; break;
    case QType::Q4_K: r = QType::Q5_0; break;
    case QType::Q5_K: r = QType::Q5_1; break;
    case QType::Q6_K: r = QType::Q8_0; break;
    default:
      if (quant_type(t).block_values > 32)  // (Q1_0)
        throw ConvertError("", name, std::string("rows of ") + std::to_string(ncols) + " are not a multiple of " +
                                         std::to_string(quant_type(t).block_values) + " and llama-quantize has no type to fall back to from " +
                                         name_of(t) + " (\"no tensor type fallback is defined\")");
      break;  // already a 32-value block type: F16 below
  }
  return ncols % quant_type(r).block_values == 0 ? r : QType::F16;
}

bool llama_quantize_counts_as_attn_v(const std::string& name) { return category_of(name) == Category::AttnV; }

bool llama_quantize_requires_imatrix(const std::string& name, QType type, uint32_t ftype) {
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight" || name == "output.weight") return false;
  switch (type) {
    case QType::IQ3_XXS:
    case QType::IQ2_XXS:
    case QType::IQ2_XS:
    case QType::IQ2_S:
    case QType::IQ1_M:
    case QType::IQ1_S: return true;
    case QType::Q2_K: return ftype == kFtypeQ2_K_S;  // "the only exception is Q2_K tensors that are part of a Q2_K_S file"
    default: return false;
  }
}

bool llama_quantize_ftype_needs_imatrix(uint32_t ftype, QType base) {
  QuantizeModel m;
  m.n_layers = 32;
  m.n_head = 32;
  m.n_head_kv = 8;
  QuantizeCounters counters;
  QuantizeNotes notes;
  auto needs = [&](const std::string& name, int64_t layer) {
    const QuantizeTensor t{name, layer, 2, 4096, 1};
    return llama_quantize_requires_imatrix(name, llama_quantize_type(ftype, base, QType::BF16, m, t, counters, &notes), ftype);
  };
  if (needs("token_embd.weight", -1) || needs("output.weight", -1)) return true;
  for (int64_t l = 0; l < m.n_layers; ++l)  // (llama-quantize's order: by name within a block)
    for (const char* w : {"attn_k", "attn_output", "attn_q", "attn_v", "ffn_down", "ffn_gate", "ffn_up"})
      if (needs("blk." + std::to_string(l) + "." + w + ".weight", l)) return true;
  return false;
}

std::string tensor_type_pattern(const std::string& glob) {
  std::string re = "^";
  for (const char c : glob) {
    if (c == '*') re += ".*";
    else if (c == '?') re += '.';
    else if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') re += char(std::tolower(static_cast<unsigned char>(c)));
    else (re += '\\') += c;
  }
  return re + "$";
}

QType llama_quantize_type(uint32_t ftype, QType base, QType keep, const QuantizeModel& m, const QuantizeTensor& t,
                          QuantizeCounters& counters, QuantizeNotes* notes, const QuantizeOptions& o) {
  *notes = {};
  if (!allows_quantization(t) || (o.leave_output && t.name == "output.weight")) return keep;
  const Category c = category_of(t.name);
  if (o.token_embd_type && c == Category::TokenEmbd) {
    // per_layer_token_embd follows it too, unless a --tensor-type pattern names it
    const bool named = t.name == "per_layer_token_embd.weight" &&
                       std::any_of(o.tensor_types.begin(), o.tensor_types.end(),
                                   [&](const QuantizeOptions::TensorType& p) { return std::regex_search(t.name, p.re); });
    if (!named) {
      notes->mixture = std::string("--token-embedding-type ") + name_of(*o.token_embd_type);
      return *o.token_embd_type;
    }
  }
  if (o.output_type && c == Category::Output) {
    notes->mixture = std::string("--output-tensor-type ") + name_of(*o.output_type);
    return *o.output_type;
  }
  if (!quant_type(base).quantizes) return base;  // F16, BF16, F32 files: every tensor it quantizes, in that type
  QType mixed = base;
  const auto manual = std::find_if(o.tensor_types.begin(), o.tensor_types.end(),
                                   [&](const QuantizeOptions::TensorType& p) { return std::regex_search(t.name, p.re); });
  if (manual != o.tensor_types.end()) {
    mixed = manual->type;
    if (mixed != base) notes->mixture = "--tensor-type " + manual->pattern + "=" + name_of(mixed);
  } else if (!o.pure) {
    mixed = mixture(ftype, base, m, t, c, o, counters);
    if (mixed != base) notes->mixture = std::string(name_of(base)) + " -> " + name_of(mixed) + " (llama-quantize's mixture)";
  }
  const QType out = llama_quantize_fallback(mixed, t.ncols, t.name);
  if (out != mixed)
    notes->fallback = std::string(name_of(mixed)) + " -> " + name_of(out) + " (rows of " + std::to_string(t.ncols) +
                      " are not a multiple of " + std::to_string(quant_type(mixed).block_values) + ")";
  return out;
}

}  // namespace leapconv
