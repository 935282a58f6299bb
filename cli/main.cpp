// `export`: the command-line converter. Same core as the browser; this file only parses
// arguments, opens files and prints. Built natively and, with NODERAWFS, for Node.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "arch/arch_table.h"
#include "formats/convert.h"
#include "check/verify.h"
#include "posix/posix_io.h"

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#endif

using namespace leapconv;

namespace {

const char* kUsage = R"(usage:
  export <out.gguf> --model <dir|file.safetensors> [--type Q8_0|Q4_0|...]  GGUF for llama.cpp, Ollama, LM Studio
  export <out.bin> --meta-llama <model_dir> [--version 1|2]             LEAP .bin (1 = fp32, 2 = int8)
  export <out.gguf-lite> --model <dir|file.safetensors> [--scheme f32|f16|q8|q4]
                       [--schemes rules.json]                             GGUF-lite (the lab's format)
  export --inspect <file> [--model <dir>]                                 what a GGUF/LEAP/GGUF-lite file holds
  export --inspect <dir|file.safetensors>                                 what a checkpoint holds (dtypes, quantization)
  export <adapter.gguf> --lora <adapter_dir> [--model <base_dir>] [--type F32|F16|BF16|Q8_0]
                                                                          a PEFT LoRA adapter as a GGUF LoRA adapter
  export <out> --model <dir> --merge-lora <adapter_dir> [...]             the model with the adapter folded into its weights
  export --verify <file> --model <dir> [--lora D | --merge-lora D] [--imatrix F]  round-trip check against the source
  export --families                                                       the model families taken (a table)

options:
  --format F           gguf | leap | gguf-lite (default: from the extension: .gguf, .bin, .gguf-lite)
  --type T             GGUF: the file llama-quantize writes for type T from the converter's BF16/F16
                       file (each tensor's type as it chooses: output.weight Q6_K for Q4_0, attn_v and
                       ffn_down more bits in Q4_K_M, ...): Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q4_K_M, Q4_K_S,
                       Q3_K_L, Q3_K_M, Q3_K_S, Q2_K, MXFP4_MOE, Q5_1, Q5_0, Q4_1, Q4_0, F16, BF16, F32;
                       norms and other 1-D tensors stay F32; rows a type's blocks do not divide fall
                       back as llama-quantize does (said on stderr); --pure: T for every tensor it quantizes
  --outtype T          convert_hf_to_gguf.py's file instead (f32, f16, bf16, q8_0, tq1_0, tq2_0): every 2-D weight in
                       that type, in the checkpoint's order; no --type: --outtype q8_0
  --pure, --leave-output-tensor, --output-tensor-type T, --token-embedding-type T,
  --tensor-type PATTERN=T (repeatable; PATTERN a regular expression searched in GGUF names,
  first match wins), --tensor-type-file F, --override-kv KEY=int|float|bool|str:VALUE,
  --prune-layers L0,L1,... (those blocks left out, the rest renumbered)
                       llama-quantize's options, with its meaning (with --type)
  --tokenizer-pre NAME GGUF: tokenizer.ggml.pre for a byte-level BPE tokenizer whose pre-tokenizer is
                       not one the converter recognises (llama.cpp's names: llama-bpe, qwen2, ...)
  --no-vocab           GGUF: write the file even when the folder has no tokenizer (llama.cpp can then
                       not tokenize text with it)
  --imatrix FILE       GGUF, llama-quantize's types: its importance matrix (llama-imatrix's GGUF or legacy
                       .dat file), applied as llama-quantize applies it (the same bytes); --verify takes
                       it too
  --include-weights S, --exclude-weights S  (repeatable, not together) use the matrix only for the
                       tensors whose names contain S, or for all but those (llama-quantize's)
  --dry-run            print each tensor's type and bytes and the file's size; write nothing
  --fp8-as-q8          GGUF F32/F16/BF16/Q8_0: weights decoded from FP8 written as Q8_0 (the converter's
                       option; quantized checkpoints are read as its dequant_model reads them)
  --metadata FILE      GGUF: a JSON object of general.* keys (general.name, general.author, general.tags,
                       general.sampling.temp, ...) replacing what the folder gives (the converter's option)
  --model-name NAME    GGUF: general.name (the converter's option; over --metadata's)
  --split-max-size N[M|G]  GGUF: write parts of at most N megabytes (M) or gigabytes (G) of tensors,
                       as llama-gguf-split --split writes them (<out>-00001-of-0000N.gguf, ...);
                       llama.cpp loads them from the first part
  --split-max-tensors N  GGUF: the same, N tensors a part
  --version 1|2        LEAP version (default 1)
  --seq-len N          LEAP: the sequence length LEAP's engine sizes its KV caches for (default 2048,
                       or the model's maximum when smaller); refused when n_layers x N x kv_dim >= 2^31
  --group-size N       LEAP v2: int8 group size, at least 16 and dividing dim and hidden_dim
                       (default: the largest of 64, 32, 16 that divides both)
  --scheme S           GGUF-lite: encoding of tensors with 2+ dims (default q8); 1-D tensors stay F32
                       (GGUF: the same as --type)
  --schemes FILE       GGUF and GGUF-lite: JSON list of {"pattern": glob, "scheme": S}, first match
                       wins (GGUF: GGUF tensor names and any GGUF type, e.g. "blk.*.ffn_down.weight": "Q8_0")
  --verify-params N    --verify: run the forward check on as many layers as fit in N parameters
                       (default 268435456); fewer layers than the model has means no logits
  --threads N          worker threads (default: all cores)
  --chunk-mb N         working set of one chunk in MiB (default 4)
  --json               print a machine-readable summary on stdout
  --quiet              no progress on stderr
  --help               this text

example: export TinyLlama-Q8_0.gguf --model TinyLlama-1.1B --type Q8_0
         llama-cli -m TinyLlama-Q8_0.gguf -p "Once upon a time"
)";

struct Args {
  std::string output, model, inspect, verify, schemes_file, format, metadata_file;
  std::string lora;  // a PEFT LoRA adapter's folder (then --model is its base)
  std::string merge_lora;  // a PEFT LoRA adapter folded into --model's weights
  std::string imatrix;     // llama-quantize's --imatrix (legacy .dat or GGUF)
  std::vector<std::string> include_weights, exclude_weights;  // its --include-weights / --exclude-weights
  std::vector<std::string> tensor_type_files;  // llama-quantize's --tensor-type-file: PATTERN=TYPE words
  // The conversion's options, in the spelling the page sends them (parse_convert_options): the
  // flags are gathered here and read, with the format known, in one place.
  nlohmann::json conv = nlohmann::json::object();
  int threads = 0;
  int64_t chunk_mb = 4;
  VerifyOptions verify_opt;
  bool json = false, quiet = false, help = false, families = false;
  bool dry_run = false;  // llama-quantize's --dry-run: the plan printed, nothing written
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

int64_t parse_int(const std::string& flag, const char* v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno || !*v || *end || x < lo || x > hi)
    usage_error(flag + " needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return x;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(s + " needs a value");
      return argv[++i];
    };
    if (s == "--help" || s == "-h") a.help = true;
    else if (s == "--families") a.families = true;
    else if (s == "--meta-llama" || s == "--model") a.model = value();
    else if (s == "--version") a.conv["version"] = parse_int(s, value(), 1, 2);
    else if (s == "--seq-len") a.conv["seq_len"] = parse_int(s, value(), 1, 1 << 30);
    else if (s == "--group-size") a.conv["group_size"] = parse_int(s, value(), 1, 1 << 20);
    else if (s == "--format") a.format = value();
    else if (s == "--scheme" || s == "--type" || s == "--outtype") {
      if (a.conv.contains("type"))
        usage_error(s + ": the type is already given (" + a.conv["type_flag"].get<std::string>() + " " +
                    a.conv["type"].get<std::string>() + ")");
      a.conv["type"] = value();
      a.conv["type_flag"] = s;
    } else if (s == "--schemes") a.schemes_file = value();
    else if (s == "--tokenizer-pre") a.conv["tokenizer_pre"] = value();
    else if (s == "--no-vocab") a.conv["allow_no_vocab"] = true;
    else if (s == "--fp8-as-q8") a.conv["fp8_as_q8"] = true;
    else if (s == "--metadata") a.metadata_file = value();
    else if (s == "--model-name") a.conv["model_name"] = value();
    else if (s == "--lora") a.lora = value();
    else if (s == "--merge-lora") a.merge_lora = value();
    else if (s == "--imatrix") a.imatrix = value();
    else if (s == "--include-weights") a.include_weights.push_back(value());
    else if (s == "--exclude-weights") a.exclude_weights.push_back(value());
    else if (s == "--pure") a.conv["pure"] = true;
    else if (s == "--leave-output-tensor") a.conv["leave_output_tensor"] = true;
    else if (s == "--output-tensor-type") a.conv["output_tensor_type"] = value();
    else if (s == "--token-embedding-type") a.conv["token_embedding_type"] = value();
    else if (s == "--tensor-type") a.conv["tensor_types"].push_back(value());
    else if (s == "--tensor-type-file") a.tensor_type_files.push_back(value());
    else if (s == "--override-kv") a.conv["override_kv"].push_back(value());
    else if (s == "--prune-layers") a.conv["prune_layers"] = value();
    else if (s == "--split-max-size") a.conv["split_max_size"] = value();
    else if (s == "--split-max-tensors") a.conv["split_max_tensors"] = parse_int(s, value(), 1, 1 << 30);
    else if (s == "--threads") a.threads = int(parse_int(s, value(), 1, 256));
    else if (s == "--chunk-mb") a.chunk_mb = parse_int(s, value(), 1, 1024);
    else if (s == "--verify-params") a.verify_opt.param_budget = parse_int(s, value(), 1, int64_t(1) << 50);
    else if (s == "--inspect") a.inspect = value();
    else if (s == "--verify") a.verify = value();
    else if (s == "--json") a.json = true;
    else if (s == "--dry-run") a.dry_run = true;
    else if (s == "--quiet" || s == "-q") a.quiet = true;
    else if (!s.empty() && s[0] == '-') usage_error("unknown option " + s);
    else if (a.output.empty()) a.output = s;
    else usage_error("unexpected argument " + s);
  }
  if (a.threads == 0) a.threads = int(std::max(1u, std::thread::hardware_concurrency()));
#ifdef LEAPCONV_MAX_THREADS
  // WebAssembly: threads come from a fixed pthread pool; asking for more would deadlock.
  a.threads = std::min(a.threads, LEAPCONV_MAX_THREADS);
#endif
  return a;
}

// JSON on stdout: text from the files (names, metadata) that is not valid UTF-8 is written
// with U+FFFD in its place rather than failing the whole dump.
std::string dump_json(const nlohmann::json& j, int indent = 2) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Whether stderr is a terminal. Under Node, Emscripten's isatty(2) says yes for any stderr (a
// pipe included), so the WebAssembly CLI asks Node (on its main thread: main() runs in a pthread).
bool stderr_is_terminal() {
#ifdef __EMSCRIPTEN__
  return MAIN_THREAD_EM_ASM_INT({ return process.stderr.isTTY ? 1 : 0; }) != 0;
#else
  return ::isatty(2) != 0;
#endif
}

// A progress line rewritten in place is open on stderr (no newline yet): an error ends it first.
bool g_progress_line_open = false;

// Progress on stderr: rewritten in place on a terminal, a line every few seconds otherwise.
// A progress line on stderr: rewritten in place on a terminal (at most 5 a second), else a line
// every 2 s; the last one always, once any was shown. hold_first: off a terminal, nothing for the
// first 2 s (a short run says nothing).
class ProgressLine {
 public:
  ProgressLine(bool quiet, bool hold_first)
      : quiet_(quiet), tty_(stderr_is_terminal()), t0_(std::chrono::steady_clock::now()), last_(tty_ || !hold_first ? -1e9 : 0.0) {}
  double seconds() const { return seconds_since(t0_); }
  bool due(bool end) const { return !quiet_ && (seconds() - last_ >= (tty_ ? 0.2 : 2.0) || (end && shown_)); }
  void show(const char* text, bool end) {
    last_ = seconds();
    shown_ = true;
    std::fprintf(stderr, "%s%s%s", tty_ ? "\r" : "", text, tty_ && !end ? "" : "\n");
    g_progress_line_open = tty_ && !end;
  }

 private:
  bool quiet_, tty_;
  std::chrono::steady_clock::time_point t0_;
  double last_;
  bool shown_ = false;
};

class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : line_(quiet, false) {}
  bool operator()(const Progress& p) {
    const bool done = p.source_done == p.source_total;
    if (!line_.due(done)) return true;
    const double t = line_.seconds();
    const double mbs = t > 0 ? double(p.source_done) / 1e6 / t : 0.0;
    const double eta = p.source_done > 0 ? t * double(p.source_total - p.source_done) / double(p.source_done) : 0.0;
    char text[256];
    std::snprintf(text, sizeof text, "[%zu/%zu] %-32.32s %5.1f%%  %7.1f MB/s  ETA %5.1fs", p.items_done, p.n_items,
                  p.name ? p.name->c_str() : "", p.source_total ? 100.0 * double(p.source_done) / double(p.source_total) : 100.0,
                  mbs, eta);
    line_.show(text, done);
    return true;
  }

 private:
  ProgressLine line_;
};

Checkpoint load_checkpoint(const std::string& path) { return open_checkpoint(find_checkpoint_files(path)); }

// The file at `path`, or, when it is a part of a split GGUF (<base>-00002-of-00003.gguf), every
// part of it, as llama.cpp finds them from one name; a missing part is named.
std::vector<std::unique_ptr<FileSource>> open_parts(const std::string& path) {
  std::vector<std::unique_ptr<FileSource>> parts;
  std::vector<std::string> names = split_part_names(path);
  if (names.empty()) names = {path};
  for (const std::string& n : names) {
    if (!file_exists(n) && n != path)
      throw ConvertError(n, "", "is missing: " + path + " is a part of a split model, whose parts are read together");
    parts.push_back(std::make_unique<FileSource>(n));
  }
  return parts;
}
std::vector<ByteSource*> sources_of(const std::vector<std::unique_ptr<FileSource>>& parts) {
  std::vector<ByteSource*> v;
  for (const auto& p : parts) v.push_back(p.get());
  return v;
}

// llama-quantize's --imatrix file, read and validated whole (the weights are small: one float a
// column of each weight, a slice of them per expert), then filtered by --include-weights or
// --exclude-weights; null (none used, as llama-quantize does) when that leaves no entry.
std::shared_ptr<const Imatrix> load_imatrix(const Args& a) {
  if (!a.include_weights.empty() && !a.exclude_weights.empty())
    usage_error("--include-weights and --exclude-weights cannot be used together (as in llama-quantize)");
  if (a.imatrix.empty()) {
    if (!a.include_weights.empty() || !a.exclude_weights.empty())
      usage_error(std::string(a.include_weights.empty() ? "--exclude-weights" : "--include-weights") + " needs --imatrix");
    return nullptr;
  }
  FileSource src(a.imatrix);
  Imatrix im = read_imatrix(src, a.imatrix);
  filter_imatrix(im, a.include_weights, a.exclude_weights);
  if (im.entries.empty()) {
    std::fprintf(stderr, "note: %s: no entry left after %s: quantizing without an importance matrix, as llama-quantize does\n",
                 a.imatrix.c_str(), a.include_weights.empty() ? "--exclude-weights" : "--include-weights");
    return nullptr;
  }
  return std::make_shared<const Imatrix>(std::move(im));
}

int run_inspect(const Args& a) {
  // a checkpoint (its folder or a .safetensors file): what it holds, as stored
  const bool is_checkpoint = std::filesystem::is_directory(a.inspect) ||
                             (a.inspect.size() > 12 && a.inspect.compare(a.inspect.size() - 12, 12, ".safetensors") == 0);
  if (is_checkpoint) {
    nlohmann::json j = checkpoint_json(load_checkpoint(a.inspect));
    if (a.json) std::cout << dump_json(j) << "\n";
    else std::cout << checkpoint_text(j);
    return 0;
  }
  const auto parts = open_parts(a.inspect);
  InspectedFile info = inspect_files(sources_of(parts));
  if (!a.model.empty()) info.breakdown.source_bytes = load_checkpoint(a.model).source_bytes;
  if (a.json) {
    nlohmann::json j = {{"file", a.inspect}};
    j.update(inspected_file_json(info));
    std::cout << dump_json(j) << "\n";
  } else {
    std::cout << a.inspect << ": " << info.format << ", " << info.items.size() + info.undecodable.size() << " tensors\n"
              << dump_json(info.header, -1) << "\n" << breakdown_text(info.breakdown);
  }
  return 0;
}

// A PEFT LoRA adapter's folder with its base model's config.json: from --model, else from the
// adapter's base_model_name_or_path when that is a folder here (convert_lora_to_gguf.py's --base).
Checkpoint load_adapter(const std::string& dir, const std::string& base) {
  CheckpointFiles f = find_checkpoint_files(dir);
  if (!f.adapter_config_json) throw ConvertError(dir, "", "has no adapter_config.json: not a PEFT LoRA adapter");
  std::string from = base;
  if (from.empty()) {
    const auto j = nlohmann::json::parse(*f.adapter_config_json, nullptr, false);
    if (j.is_object() && j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string())
      from = j["base_model_name_or_path"].get<std::string>();
    if (!from.empty() && !std::filesystem::is_directory(from) && std::filesystem::is_directory(dir + "/" + from)) from = dir + "/" + from;
    if (from.empty() || !std::filesystem::is_directory(from))
      throw ConvertError(dir + "/adapter_config.json", "base_model_name_or_path",
                         "is " + (from.empty() ? std::string("not given") : "'" + from + "', not a folder here") +
                             ": give the base model's folder (its config.json) with --model");
  }
  const std::string cfg = from + "/config.json";
  if (!std::filesystem::is_regular_file(cfg)) throw ConvertError(cfg, "", "missing: the base model's config.json is needed");
  use_base_config(f, read_text_file(cfg));
  return open_checkpoint(std::move(f));
}

int run_verify(const Args& a) {
  if (a.model.empty() && a.lora.empty()) usage_error("--verify needs --model <dir> (the source checkpoint)");
  const auto parts = open_parts(a.verify);
  // the source as the file was made: a LoRA adapter (--lora), or a model with one merged (--merge-lora)
  Checkpoint ck = a.lora.empty() ? load_checkpoint(a.model) : load_adapter(a.lora, a.model);
  if (!a.merge_lora.empty()) merge_lora(ck, load_adapter(a.merge_lora, a.model));
  VerifyOptions vo = a.verify_opt;
  vo.imatrix = load_imatrix(a);
  VerifyRun run(sources_of(parts), ck, vo);
  {
    // Progress on stderr (a short verify off a terminal prints none); stdout keeps the report only.
    ProgressLine line(a.quiet, true);
    while (run.step()) {
      const VerifyProgress& p = run.progress();
      const bool end = p.step == p.n_steps;
      if (!line.due(end)) continue;
      char text[512];
      std::snprintf(text, sizeof text, "verify [%lld/%lld] %-60.60s %6.1fs", (long long)p.step, (long long)p.n_steps,
                    one_line_text(p.what, 256).c_str(), line.seconds());
      line.show(text, end);
    }
    if (g_progress_line_open) std::fputc('\n', stderr);
    g_progress_line_open = false;
  }
  const VerifyReport rep = run.finish();
  const ForwardCheck& fc = rep.forward;
  bool tensors_ok = true;
  for (const TensorCheck& c : rep.tensors) tensors_ok = tensors_ok && c.max_vs_fake_quant == 0.0f;
  if (a.json) {
    nlohmann::json j = verify_report_json(rep);
    j["file"] = a.verify;
    std::cout << dump_json(j) << "\n";
  } else {
    std::printf("%-48s %-16s %22s %18s\n", "tensor", "dtype", "max|file-fakequant|", "max|file-source|");
    for (const TensorCheck& c : rep.tensors)
      std::printf("%-48s %-16s %22.3g %18.6g\n", one_line_text(c.name, 256).c_str(), c.encoding.c_str(), c.max_vs_fake_quant,
                  c.max_vs_source);
    for (const TensorCheck& c : rep.tensors)
      if (c.nonfinite)
        std::printf("%s: %lld values read back as Inf or NaN where the source is finite\n", one_line_text(c.name, 256).c_str(),
                    (long long)c.nonfinite);
      else if (c.unencodable)
        std::printf("%s: the source holds values %s cannot store (the converter refuses this tensor)\n",
                    one_line_text(c.name, 256).c_str(), c.encoding.c_str());
    std::printf("round trip of %zu tensors: %s\n", rep.tensors.size(), tensors_ok ? "exact" : "NOT exact");
    if (fc.ran) {
      std::printf("\nforward pass (%s, %zu tokens): %s\n", fc.architecture.c_str(), fc.tokens.size(), fc.note.c_str());
      std::printf("%-10s %26s %28s\n", "", "max|file - as written|", "max|as written - source|");
      for (const LayerCheck& l : fc.layers)
        std::printf("%-10s %26.3g %28.6g%s\n", l.name.c_str(), l.file_vs_reference, l.quantized_vs_source,
                    l.file_vs_reference > kForwardTolerance ? "  > 1e-3" : "");
    } else {
      std::printf("forward pass: %s\n", fc.note.c_str());
    }
    const W8A8Check& w = rep.w8a8;
    if (w.ran) {
      std::printf("\nwhat LEAP's engine computes (W8A8): %s\n", w.note.c_str());
      std::printf("%-10s %30s %32s\n", "", "max|W8A8 - fp32 as written|", "max|W8A8 - unquantized source|");
      for (const W8A8Layer& l : w.layers)
        std::printf("%-10s %30.6g %32.6g\n", l.name.c_str(), l.vs_as_written, l.vs_source);
      if (w.positions > 0)
        std::printf("most likely next token: the same as the fp32 model as written at %lld of %lld positions, as the "
                    "unquantized source at %lld (largest |logit| %.3g)\n",
                    (long long)w.top1_same_as_written, (long long)w.positions, (long long)w.top1_same_as_source,
                    double(w.max_abs_logit));
    } else if (rep.format.rfind("leap", 0) == 0) {
      std::printf("LEAP's engine: %s\n", w.note.c_str());
    }
    std::printf("%s: %s\n", a.verify.c_str(), rep.ok ? "PASS" : "FAIL");
  }
  return rep.ok ? 0 : 1;
}

// llama-quantize's --dry-run: every tensor's shape, type and bytes as the plan has them (the
// sizes the file would have, exactly), then the total; no file opened.
int print_dry_run(const PlannedConversion& pc) {
  const size_t n = pc.plan.items.size();
  for (size_t i = 0; i < n; ++i) {
    const PlanItem& it = pc.plan.items[i];
    std::string shape;
    for (int64_t d : it.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::printf("[%4zu/%4zu] %-40s [%s], type = %s, %lld bytes\n", i + 1, n, it.name.c_str(), shape.c_str(),
                it.qt().name, (long long)it.size.total());
  }
  std::printf("%s: %lld bytes in %zu file%s (%.2f MiB), nothing written (--dry-run)\n", pc.format.c_str(),
              (long long)pc.plan.total_bytes(), pc.plan.files.size(), pc.plan.files.size() == 1 ? "" : "s",
              double(pc.plan.total_bytes()) / (1 << 20));
  return 0;
}

int run_convert(Args& a) {
  if (a.model.empty() && a.lora.empty()) usage_error("name the source with --meta-llama <dir> or --model <dir|file>");
  if (a.output.empty()) usage_error("name the output file");
  // The format: --format, else the output's extension, else the format table's first (GGUF).
  const OutputFormat* by_ext = format_for_path(a.output);
  const std::string format = !a.format.empty() ? a.format : by_ext ? by_ext->id : output_formats().front().id;
  const OutputFormat* fmt = find_format(format);
  if (!fmt) usage_error("--format takes " + format_ids());
  if (a.conv.contains("type") && !fmt->scheme_rules)
    usage_error(a.conv["type_flag"].get<std::string>() + " is for GGUF and GGUF-lite; " + fmt->name + " takes --version");
  a.conv["format"] = format;
  if (!a.schemes_file.empty()) {
    a.conv["rules"] = read_text_file(a.schemes_file);  // the text: its order and its errors as the file has them
    a.conv["rules_source"] = a.schemes_file;
  }
  if (!a.metadata_file.empty()) {  // the converter's --metadata: a JSON object of general.* keys
    const nlohmann::json m = nlohmann::json::parse(read_text_file(a.metadata_file), nullptr, false);
    if (m.is_discarded()) throw ConvertError(a.metadata_file, "", "is not valid JSON (--metadata)");
    a.conv["metadata"] = m;
    a.conv["metadata_file"] = a.metadata_file;
  }
  for (const std::string& f : a.tensor_type_files) {  // whitespace-separated words, as quantize.cpp reads them (file >> arg)
    std::istringstream words(read_text_file(f));
    for (std::string w; words >> w;) a.conv["tensor_types"].push_back(w);
  }
  ConvertOptions conv = parse_convert_options(a.conv);
  conv.imatrix = load_imatrix(a);

  const auto t0 = std::chrono::steady_clock::now();
  const bool split = conv.split_max_bytes > 0 || conv.split_max_tensors > 0;
  // The output's temporary file first: a second conversion to the same output stops here, and
  // a stale one left by a killed run is cleared even when this run then fails on its input.
  // (A split output's parts are named once the plan knows how many there are.)
  std::vector<std::unique_ptr<AtomicFileSink>> sinks;
  std::vector<std::string> outputs;
  auto open_output = [&](const std::string& path) {
    sinks.push_back(std::make_unique<AtomicFileSink>(path));
    outputs.push_back(path);
    for (const std::string& n : sinks.back()->notes()) std::fprintf(stderr, "warning: %s\n", one_line_text(n, 4096).c_str());
  };
  if (!split && !a.dry_run) open_output(a.output);
  Checkpoint ck = a.lora.empty() ? load_checkpoint(a.model) : load_adapter(a.lora, a.model);
  if (!a.merge_lora.empty()) {
    if (!a.lora.empty()) usage_error("--lora writes an adapter; --merge-lora folds one into --model's weights: one or the other");
    merge_lora(ck, load_adapter(a.merge_lora, a.model));
  }
  refuse_input_as_output(a.output);  // every input is open now
  const PlannedConversion pc = plan_conversion(ck, conv);
  if (a.dry_run) return print_dry_run(pc);
  if (split) {  // <base>-00001-of-00003.gguf, ... as llama-gguf-split names them
    const std::string ext = ".gguf";
    const bool has_ext = a.output.size() > ext.size() && a.output.compare(a.output.size() - ext.size(), ext.size(), ext) == 0;
    const std::string base = has_ext ? a.output.substr(0, a.output.size() - ext.size()) : a.output;
    for (const PlanFile& f : pc.plan.files) open_output(base + f.suffix + ext);
  }
  for (const std::string& w : pc.warnings) std::fprintf(stderr, "warning: %s\n", one_line_text(w, 4096).c_str());
  for (const std::string& n : pc.notes) std::fprintf(stderr, "note: %s\n", one_line_text(n, 4096).c_str());
  if (!a.quiet && pc.engine.contains("summary"))
    std::fprintf(stderr, "note: %s%s\n", pc.engine["summary"].get<std::string>().c_str(),
                 conv.seq_len > 0 ? "" : "; --seq-len N to change it");

  ProgressPrinter progress(a.quiet);
  PipelineOptions po;
  po.threads = a.threads;
  po.chunk_bytes = a.chunk_mb << 20;
  std::vector<ByteSink*> sink_list;
  for (auto& sk : sinks) sink_list.push_back(sk.get());
  const ConversionReport rep = run_plan(pc.plan, ck.sources(), sink_list, po, std::ref(progress));
  for (size_t i = 0; i < sinks.size(); ++i) {
    try {
      sinks[i]->commit();
    } catch (...) {  // all parts or none: the ones already in place go again
      for (size_t k = 0; k < i; ++k) ::unlink(outputs[k].c_str());
      throw;
    }
  }
  const double secs = seconds_since(t0);

  if (a.json) {
    nlohmann::json j = conversion_summary(pc, rep);
    j["output"] = split ? outputs.front() : a.output;
    if (split) j["outputs"] = outputs;
    j["source"] = ck.label;
    nlohmann::json side = nlohmann::json::array();  // tokenizer and generation files read with it
    for (const SideFile& f : ck.side_files) side.push_back({{"name", f.name}, {"bytes", f.bytes.size()}});
    j["side_files"] = side;
    j["seconds"] = secs;
    j["source_mb_per_s"] = secs > 0 ? double(rep.source_bytes) / 1e6 / secs : 0.0;
    std::cout << dump_json(j) << "\n";
  }
  if (!a.quiet)
    std::fprintf(stderr, "wrote %s%s: %s, %zu tensors, %lld bytes in %.2fs (%.1f MB/s of source), max quant error %g\n",
                 outputs.front().c_str(), split ? (" and " + std::to_string(outputs.size() - 1) + " more parts").c_str() : "",
                 pc.format.c_str(), pc.plan.items.size(), (long long)pc.plan.total_bytes(), secs,
                 secs > 0 ? double(rep.source_bytes) / 1e6 / secs : 0.0, double(rep.max_err));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  if (a.families) {  // the README's table (tests/tables_test.cpp holds the README to it)
    std::fputs(families_markdown().c_str(), stdout);
    return 0;
  }
  if (a.help || argc == 1) {
    std::fputs(kUsage, a.help ? stdout : stderr);
    return a.help ? 0 : 2;
  }
  // An error line starts on a line of its own, after any progress line left open.
  const auto error_line = [](const std::string& text) {
    std::fprintf(stderr, "%serror: %s\n", g_progress_line_open ? "\n" : "", text.c_str());
  };
  try {
    if (!a.inspect.empty()) return run_inspect(a);
    if (!a.verify.empty()) return run_verify(a);
    return run_convert(a);
  } catch (const ConvertError& e) {
    error_line(e.what());  // printable already
    return 1;
  } catch (const std::bad_alloc&) {
    error_line("out of memory");
    return 1;
  } catch (const std::exception& e) {
    error_line(one_line_text(e.what(), 4096));
    return 1;
  }
}
