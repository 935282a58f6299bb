// The output formats, one row each: id, name, magic, extensions, how to plan a conversion into
// it and how to read a file of it back. `convert`, `--inspect`, `--verify`, the CLI's extension
// rule and the browser bindings ask this table instead of branching on names and magics.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch/arch_table.h"
#include "container/gguf_file.h"
#include "formats/gguf/gguf_metadata.h"
#include "formats/gguf/gguf_presets.h"
#include "formats/gguf_lite.h"
#include "plan/breakdown.h"
#include "source/checkpoint.h"
#include "source/imatrix.h"
#include "tokenizer/gguf_vocab.h"

namespace leapconv {

// What the user asked for, shared by the CLI and the browser (parse_convert_options).
struct ConvertOptions {
  std::string format = "gguf";  // an OutputFormat id: GGUF, the format table's first
  int version = 1;              // LEAP: 1 fp32, 2 int8
  int64_t seq_len = 0;          // LEAP: 0 = from the config
  int group_size = 0;           // LEAP v2: 0 = default
  GgufPlanOptions gguf;         // GGUF and GGUF-lite: default type and per-tensor rules
  VocabOptions vocab;           // GGUF: tokenizer.ggml.pre override, a file without a vocabulary
  int gguf_file_type = -1;      // GGUF: the LLAMA_FTYPE asked for (--type Q4_K_M); -1: gguf.default_scheme's
  // GGUF: write parts as llama-gguf-split --split does (0: one file): at most this many bytes of
  // tensors a part, or this many tensors a part.
  int64_t split_max_bytes = 0, split_max_tensors = 0;
  // GGUF: weights decoded from FP8 written as Q8_0 whatever the float type (the converter's
  // --fp8-as-q8: its _fp8_dequantized tensors of 2 or more dims).
  bool fp8_as_q8 = false;
  // GGUF: the converter's --metadata FILE (general.* keys replacing what the folder gave) and
  // --model-name NAME.
  MetadataOverride metadata;
  // GGUF: the file llama-quantize makes of the converter's BF16/F16 one (--type: every file type
  // is its preset) rather than the converter's own (--outtype, and the default Q8_0).
  bool llama_quantize = false;
  QuantizeOptions quantize;          // llama-quantize's per-tensor options (--pure, --tensor-type, ...)
  std::vector<GgufKV> override_kv;   // llama-quantize's --override-kv, set last
  // GGUF, llama-quantize's types: its --imatrix (importance weights, by tensor name); null: none.
  std::shared_ptr<const Imatrix> imatrix;
};

struct PlannedConversion {
  std::string format;  // "leap-v1", "leap-v2", "gguf", "gguf-lite"
  ConversionPlan plan;
  nlohmann::json header;              // header fields, for summaries
  std::vector<std::string> warnings;  // RoPE assumptions, scheme fallbacks, ...
  std::vector<std::string> notes;     // what the file holds that the user should know (no problem)
  ByteBreakdown predicted;            // exact: every size is known before writing
  nlohmann::json engine;              // LEAP: what its engine will make of the file (KV cache size)
};

// A tensor whose type the file names but this project cannot decode (a GGUF IQ type): listed
// and counted, never read.
struct OpaqueTensor {
  std::string name, type;      // type: as llama.cpp names it ("IQ4_NL")
  std::vector<int64_t> shape;  // PyTorch order
  int64_t offset = 0, bytes = 0;
  int file = 0;                // its part (a split file)
};

struct OutputFormat;

// A written file, recognised by its magic and fully validated.
struct InspectedFile {
  const OutputFormat* of = nullptr;  // the format row that read it
  std::string format;
  std::vector<PlanItem> items;  // layouts with absolute offsets in their part (item.file)
  std::vector<OpaqueTensor> undecodable;  // GGUF: tensors of types the project cannot decode
  ByteBreakdown breakdown;
  nlohmann::json header;        // format-specific header fields
  std::string metadata;         // GGUF-lite only
  std::string architecture;     // GGUF: general.architecture
  // GGUF: a part of a split file (split.no of split.count, split.tensors.count of them all);
  // no = -1 for a file that is not split. Read together, the parts are one file (inspect_files).
  struct Split {
    int no = -1, count = 0;
    int64_t tensors = 0;
  } split;
  std::vector<std::string> parts;  // the files read, in part order
  // GGUF: every key in file order, {key, type, value} or, for arrays, {key, type, count, first}
  // (the first few elements only: a 128k vocabulary is summarized, not listed).
  nlohmann::json keys = nlohmann::json::array();
};

// A tensor a file holds, as the checkpoint makes it: its recipe, and (for the forward pass) the
// model weight it is.
struct FileTensor {
  std::string name;            // in the file
  std::vector<int64_t> shape;
  Recipe recipe;
  const TensorRole* role = nullptr;  // null: not a weight of the architecture table (a computed tensor, GGUF-lite)
  int64_t layer = 0;
};

// What a file of this checkpoint holds and how its model computes: verify holds every tensor of
// the file to its recipe, and runs the forward check the way `compute` says. Built by the same
// mapper that plans the conversion (the format row's file_model), so there is one mapping.
struct FileModel {
  std::vector<FileTensor> tensors;  // every tensor the file must hold
  // The forward check: Llama: the LEAP weights (llama_forward); Decoder: the family's model as
  // llama.cpp runs its GGUF (decoder_forward, the spec from `kv`); None: `why_not` says why.
  enum class Compute { None, Llama, Decoder } compute = Compute::None;
  std::string why_not;
  // The weights the forward pass reads, by their names in it. Empty: `tensors`. weights_over_file:
  // their recipes' sources are the file's own tensors of the same names (a file that holds the
  // checkpoint's tensors as they are: GGUF-lite), and a failure is a note, not an error.
  std::vector<FileTensor> weights;
  bool weights_over_file = false;
  GgufMetadata kv;                  // Decoder: the keys llama.cpp reads
  int64_t vocab_rows = 0;
  struct LlamaDims {                // Llama
    int64_t dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0;
    bool shared_classifier = true;
    double eps = 1e-5, rope_theta = 10000.0;
  } llama;
  // LEAP's engine's W8A8 arithmetic on the file's int8 groups (an informative extra pass): the
  // group size, 0 when it does not apply; the note said either way.
  int w8a8_group_size = 0;
  std::string w8a8_note;
};

// An entry of the page's format menu: `options` is what it sends as ConvertOptions.
struct FormatChoice {
  std::string value, label, file_suffix;
  nlohmann::json options;
  std::string summary;  // what the choice costs, in a line
  bool needs_imatrix = false;  // llama-quantize writes it only with an importance matrix
  std::string type = "";       // a preset's type of most 2-D weights, as rules name it ("q4_k" for Q4_K_M); "": its own
};

struct OutputFormat {
  const char* id;    // as --format and the bindings name it
  const char* name;  // for people
  const char* runs_in;      // what reads its files, in a line
  const char* run_command;  // how to run a file ({file} for its name), or ""
  uint32_t magic;    // the first four bytes of its files
  std::vector<const char*> extensions;  // the CLI picks the format from these (first: default)
  bool scheme_rules;    // takes a default scheme and per-tensor rules (ConvertOptions::gguf)
  QType default_scheme; // the CLI's default scheme when it does
  std::vector<FormatChoice> choices;  // fixed menu entries
  std::vector<FormatChoice> (*type_choices)(const OutputFormat& f);  // and one per type it takes, or null
  // Sets the file type `name` stands for (--type, --scheme, the page's scheme) in the options;
  // false if the format has none of that name (null: the format takes no type).
  bool (*set_file_type)(const std::string& name, ConvertOptions& opt);
  bool (*rule_type_ok)(const QuantType& t);  // the types its per-tensor rules may name
  PlannedConversion (*plan)(const Checkpoint& ck, const ConvertOptions& opt);
  InspectedFile (*inspect)(ByteSource& src);
  // What a file of this format written from `ck` must hold (its tensors' recipes) and how its
  // model computes; throws ConvertError when the file cannot be of this checkpoint.
  FileModel (*file_model)(const Checkpoint& ck, const InspectedFile& f, const std::string& file);
};

const std::vector<OutputFormat>& output_formats();
const OutputFormat* find_format(const std::string& id);
// The format whose extension `path` ends with; null if none does.
const OutputFormat* format_for_path(const std::string& path);
// "leap, gguf-lite": the ids, for messages.
std::string format_ids();
// Sets the file type `name` stands for in the options (case-insensitive; GGUF takes llama.cpp's
// names, Q8_0 or Q4_K_M; GGUF-lite f32/f16/q8/q4); throws ConvertError naming `what` and the
// names it takes.
void set_format_file_type(const OutputFormat& f, const std::string& name, const std::string& what, ConvertOptions& opt);
std::vector<SchemeRule> format_rules(const OutputFormat& f, const std::string& file, const std::string& text);

// The options of a conversion from their one spelling, a JSON object, as the page sends them and
// the CLI's flags become: {format, version, seq_len, group_size (LEAP), type (GGUF: llama.cpp's
// names; GGUF-lite: f32 f16 q8 q4), rules (per-tensor types: a --schemes file's text, or its JSON),
// tokenizer_pre, allow_no_vocab, split_max_size ("512M", "2G": gguf-split's decimal megabytes and
// gigabytes) or split_max_tensors (GGUF)}. `type_flag` and `rules_source` name where the type and
// the rules came from in messages ("--type", "rules.json"). The format defaults to the format
// table's first (GGUF). Throws ConvertError.
ConvertOptions parse_convert_options(const nlohmann::json& j);

// The tables the page draws from: every quant type (names, block geometry, layout, family and
// colour) and every output format (id, name, extensions, which types its schemes take).
nlohmann::json catalog_json();
// The GGUF per-tensor rules of `opt` (the page's scheme editor, a --schemes file: globs, first
// match wins) in llama-quantize's language: {type, lines ("PATTERN=TYPE", in the rules' order),
// text (a --tensor-type-file: a word a line)} when `--type <type> --tensor-type-file` gives every
// tensor the type the rules give (both are planned and compared here), else {why}: the
// converter's own file types (F32, F16, BF16, Q8_0), which llama-quantize does not write, or the
// tensors it would type otherwise; {} for another format.
nlohmann::json tensor_type_file_json(const Checkpoint& ck, const ConvertOptions& opt);
// What a checkpoint holds, for people (the page's model facts, --inspect of a checkpoint): label,
// parameters, every stored dtype (values and bytes, scales and packed codes included), shards,
// the model's tensors, side files, its quantization (method, blocks, how many weights) and its
// config, architecture and family.
nlohmann::json checkpoint_json(const Checkpoint& ck);
// An importance matrix as the page and the notes show it: its format, entries, chunk count and
// datasets; with a checkpoint, how many of the GGUF weights llama-imatrix would see (2+ dims, not
// token_embd) it has weights for ("covered"), and the first few it has none for.
nlohmann::json imatrix_json(const Imatrix& im, const Checkpoint* ck);
// The same as lines of text.
std::string checkpoint_text(const nlohmann::json& j);

// Validates the checkpoint for the chosen format and fixes every byte offset.
PlannedConversion plan_conversion(const Checkpoint& ck, const ConvertOptions& opt);
// The format whose files start with these bytes (its magic), or null.
const OutputFormat* format_by_magic(const uint8_t* head, size_t n);
// Recognises a written file by its magic and reads its header and layout (never its tensors'
// bytes: a 40 GB file costs what its header costs).
InspectedFile inspect_file(ByteSource& src);
// The same for the parts of a split GGUF, read together (any order; each is validated and they
// must be every part of one split, once), or for one file; ConvertError naming a missing part or
// one that disagrees. Items' `file` is the index of their part in `parts` sorted by split.no.
InspectedFile inspect_files(const std::vector<ByteSource*>& parts);
// The file names of every part of a split GGUF, from one of their names
// (<base>-00002-of-00003.gguf); empty when the name is not a part's.
std::vector<std::string> split_part_names(const std::string& name);
// What --inspect --json and the page show of a file: format, header, keys (GGUF), metadata
// (GGUF-lite), every tensor in file order (name, dtype, shape, offset, bytes, decodable) and the
// byte breakdown.
nlohmann::json inspected_file_json(const InspectedFile& f);

}  // namespace leapconv
