// The real GGUF output format (llama.cpp's): planning a conversion (a type per tensor, the
// tokenizer, every offset) and reading a GGUF file back for --inspect, --verify and the page.
// The container is gguf_file.h, the model mapping gguf_model.h, the vocabulary
// tokenizer/gguf_vocab.h; this module puts them together.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/formats.h"
#include "container/gguf_file.h"

namespace leapconv {

// A file type llama.cpp names (convert_hf_to_gguf.py's --outtype, llama-quantize's types): the
// quant type 2-D weights get and the general.file_type (LLAMA_FTYPE_*) written.
struct GgufFileType {
  const char* name;     // as llama.cpp spells it: "Q8_0", "Q4_K_M"
  QType type;           // the type most 2-D weights get (llama_ftype_get_default_type)
  uint32_t ftype;       // general.file_type
  const char* summary;  // what it costs, for people
  // true: convert_hf_to_gguf.py writes it (--outtype f32, f16, bf16, q8_0: every 2-D weight gets
  // `type`, in the checkpoint's order); false: only llama-quantize does. Asked with --type, every
  // file type is llama-quantize's (its mixture rules, gguf_presets.h, its tensor order) of the
  // converter's BF16/F16 file.
  bool converter;
  // The converter writes it too (--outtype tq1_0 / tq2_0: every 2-D weight the type but the
  // embeddings and classifier, F16), though without a flag (the page) it is llama-quantize's.
  bool converter_outtype = false;
};
const std::vector<GgufFileType>& gguf_file_types();
// By name, case-insensitive ("q8_0", "F16", "bf16"); null if llama.cpp has no such file type here.
const GgufFileType* find_gguf_file_type(const std::string& name);
const GgufFileType* gguf_file_type_of(QType t);  // the converter's row of t, else its first preset (Q4_0: Q4_0)
const GgufFileType* gguf_file_type_by_ftype(uint32_t ftype);

// The keys gguf-split writes into every part of a split file (llama.cpp's LLM_KV_SPLIT_*).
constexpr const char* kSplitNo = "split.no";                       // u16, from 0
constexpr const char* kSplitCount = "split.count";                 // u16
constexpr const char* kSplitTensorsCount = "split.tensors.count";  // i32, of every part
// A part's name: <base>-00002-of-00003.gguf (llama_split_path); this is the "-00002-of-00003".
std::string split_suffix(int part, int count);

PlannedConversion plan_gguf(const Checkpoint& ck, const ConvertOptions& opt);
InspectedFile inspect_gguf(ByteSource& src);
// The tensors a GGUF file of this checkpoint holds (the GGUF mapper's recipes) and its model as
// llama.cpp runs it.
FileModel gguf_file_model(const Checkpoint& ck, const InspectedFile& f, const std::string& file);

// The format's summary of a GGUF file's header (version, counts, architecture, file type,
// tokenizer, every key with a short rendering of its value).
nlohmann::json gguf_header_json(const GgufFile& f);

}  // namespace leapconv
