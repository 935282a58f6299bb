// Embind surface for the browser worker: the C++ core decides, the worker only moves bytes.
// Files arrive mounted (WORKERFS) under a folder; output chunks leave as (offset, bytes) pieces
// that the worker writes to a FileSystemWritableFileStream or OPFS. Errors come back as
// {error: "..."} objects, since C++ exceptions reach JS only as opaque numbers.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <algorithm>
#include <memory>
#include <new>
#include <thread>

#include "posix/posix_io.h"
#include "streamed_source.h"
#include "arch/arch_table.h"
#include "formats/convert.h"
#include "formats/gguf/gguf_format.h"
#include "check/group_view.h"
#include "check/verify.h"
#include "engine/in_order.h"
#include "tokenizer/gguf_tokenizer.h"

using namespace leapconv;
using emscripten::val;

namespace {

// Invalid UTF-8 from the files (a tensor name) becomes U+FFFD instead of failing the dump.
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }
// What the CLI says for std::bad_alloc, and where the page's memory goes.
const char* const kOutOfMemory =
    "out of memory (the tab's WebAssembly memory is full: fewer threads or a smaller chunk need less)";
// The page's first line for an error, in the user's terms (the technical line goes under it):
// what the thrower advised, else a sentence for the error's kind, else nothing (the line itself
// is for the user: an option out of range, a file the browser could not read).
std::string advice_of(const std::exception& e) {
  const auto* c = dynamic_cast<const ConvertError*>(&e);
  if (!c) return "";
  if (!c->advice().empty()) return one_line_text(c->advice(), 4096);
  if (dynamic_cast<const UnsupportedError*>(&e))
    return "The converter does not take this (yet), for the reason below; another output format may.";
  if (!c->file().empty())
    return one_line_text(c->file(), 1024) + " is not as the converter expects, for the reason below. If it came from "
           "the Hub, download it again; if you made it, the line below says what to mend.";
  return "";
}
std::string error_json(const std::string& msg, const std::string& advice = "") {
  nlohmann::json j = {{"error", one_line_text(msg, 4096)}};
  if (!advice.empty()) j["advice"] = advice;
  return dump(j);
}

template <typename F>
std::string guarded(F&& f) {
  try {
    return dump(f());
  } catch (const std::bad_alloc&) {
    return error_json(kOutOfMemory);
  } catch (const std::exception& e) {
    return error_json(e.what(), advice_of(e));
  }
}

// A file the page opened, read only by the byte ranges the core asks for: each read_at calls
// reader.read(offset, length), which returns a Uint8Array of exactly those bytes (the worker
// reads File.slice(offset, offset + length)). Never the whole file.
class JsSliceSource : public ByteSource {
 public:
  explicit JsSliceSource(val reader)
      : reader_(std::move(reader)), name_(reader_["name"].as<std::string>()), size_(int64_t(reader_["size"].as<double>())) {}
  const std::string& name() const override { return name_; }
  int64_t size() const override { return size_; }
  void read_at(int64_t offset, void* dst, size_t n) override {
    if (offset < 0 || offset > size_ || int64_t(n) > size_ - offset)
      throw ConvertError(name_, "", "read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                                        " runs past the end of the file");
    if (n == 0) return;
    const val bytes = reader_.call<val>("read", double(offset), double(n));
    if (bytes.isNull() || bytes.isUndefined() || bytes["length"].as<double>() != double(n))
      throw ConvertError(name_, "", "could not read " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                                        " (changed or moved since it was opened?)")
          .advise(unreadable_advice(name_));
    val(emscripten::typed_memory_view(n, static_cast<uint8_t*>(dst))).call<void>("set", bytes);
  }

 private:
  val reader_;
  std::string name_;
  int64_t size_;
};

}  // namespace

class Converter {
 public:
  // Opens the checkpoint mounted at `folder` (shards, config.json/params.json, index json); a LoRA
  // adapter's base model's config.json is at `base_config` where the page found it in another
  // folder ("" otherwise: the CLI's --model).
  std::string open(std::string folder, std::string label, std::string base_config) {
    return guarded([&] {
      job_.reset();
      verify_.reset();  // it reads the checkpoint
      CheckpointFiles files = find_checkpoint_files(folder);
      files.label = label;
      if (!base_config.empty()) use_base_config(files, read_text_file(base_config));
      ck_ = std::make_unique<Checkpoint>(open_checkpoint(std::move(files)));
      return describe();
    });
  }

  // Everything known before converting: sizes, encodings, warnings and the byte breakdown.
  std::string plan(std::string options) {
    return guarded([&] {
      need_checkpoint();
      const ConvertOptions opt = convert_options(nlohmann::json::parse(options));
      const PlannedConversion pc = plan_conversion(*ck_, opt);
      nlohmann::json j = conversion_summary(pc, ConversionReport{});
      const OutputFormat* fmt = find_format(opt.format);
      if (fmt && fmt->scheme_rules)
        // which scheme rule chose each tensor's type (-1: the default), for the scheme editor
        for (nlohmann::json& t : j["tensors"]) t["rule"] = matching_rule(opt.gguf.rules, t["name"].get<std::string>());
      // whether start({in_order: true}) can give the file front to back (a streamed download)
      const std::string why = in_order_refusal(pc.plan);
      j["in_order"] = why.empty();
      if (!why.empty()) j["in_order_refusal"] = why;
      return j;
    });
  }

  // The GGUF rules of these options as llama-quantize's --tensor-type-file, or why they are not
  // (tensor_type_file_json).
  std::string tensor_type_file(std::string options) {
    return guarded([&] {
      need_checkpoint();
      return tensor_type_file_json(*ck_, convert_options(nlohmann::json::parse(options)));
    });
  }

  // One Q4 group of 64 laid open (source values, f16 scale, 4-bit integers, packed bytes,
  // dequantized values, errors) with the row's Q8 per-channel view. Request:
  // {source: "checkpoint"|"file"|"example", tensor, row, group, path (file: the mounted output)}.
  std::string group_view(std::string request) {
    return guarded([&] {
      const nlohmann::json r = nlohmann::json::parse(request);
      const std::string source = r.value("source", "checkpoint");
      const int64_t row = r.value("row", int64_t(0)), group = r.value("group", int64_t(0));
      if (r.value("view", "") == "block") return block_view(r, source, row, r.value("block", int64_t(0)));
      if (source == "example") return group_view_example(row, group);
      const std::string tensor = r.value("tensor", "");
      if (source == "file") {
        FileSource f(r.value("path", ""));
        return group_view_file(f, ck_.get(), tensor, row, group);
      }
      if (source != "checkpoint") throw ConvertError("unknown group view source " + nlohmann::json(source).dump());
      need_checkpoint();
      return group_view_checkpoint(*ck_, tensor, row, group);
    });
  }

  // The block view (view: "block"): op "types" lists the types it lays open; op "pieces" says
  // where a block of {tensor: {dtype, shape, offset}} sits, so that the page reads those bytes
  // itself (an opened file) and sends them back as source "bytes"; sources "example" and
  // "checkpoint" quantize with the type's own encoder; "file" reads the written file at `path`
  // (tensor: its conversion summary entry).
  nlohmann::json block_view(const nlohmann::json& r, const std::string& source, int64_t row, int64_t block) {
    const std::string op = r.value("op", "");
    if (op == "types") return block_view_types();
    if (op == "pieces") return nlohmann::json{{"pieces", block_pieces(block_tensor(r.at("tensor")), row, block)}};
    if (source == "example") {
      const BlockTensor t = block_tensor({{"dtype", r.value("type", "")}, {"shape", {1}}});
      return block_view_example(*t.type, row, block);
    }
    if (source == "bytes") {
      const BlockTensor t = block_tensor(r.at("tensor"));
      const std::vector<uint8_t> bytes = r.at("bytes").get<std::vector<uint8_t>>();
      const nlohmann::json pieces = block_pieces(t, row, block);  // (a codebook type has no anatomy: its pieces say the size)
      int64_t size = 0;
      for (const nlohmann::json& p : pieces) size += p["size"].get<int64_t>();
      if (int64_t(bytes.size()) != size)
        throw ConvertError("", t.name, "a block of " + std::string(t.type->name) + " is " + std::to_string(size) +
                                           " bytes, not " + std::to_string(bytes.size()));
      nlohmann::json j = block_view_bytes(t, row, block, bytes.data(), nullptr);
      j["source"] = "bytes";
      j["pieces"] = pieces;
      return j;
    }
    if (source == "file") {
      FileSource f(r.value("path", ""));
      return block_view_file(f, ck_.get(), r.at("tensor"), row, block);
    }
    if (source != "checkpoint") throw ConvertError("unknown block view source " + nlohmann::json(source).dump());
    need_checkpoint();
    const BlockTensor t = block_tensor({{"dtype", r.value("type", "")}, {"shape", {1}}});
    return block_view_checkpoint(*ck_, r.value("tensor", ""), *t.type, row, block);
  }

  // Starts a conversion; then call next() until it returns done.
  std::string start(std::string options, int threads) {
    return guarded([&] {
      need_checkpoint();
      const nlohmann::json opt = nlohmann::json::parse(options);
      job_ = std::make_unique<Job>();
      job_->pc = plan_conversion(*ck_, convert_options(opt));
      PipelineOptions po;
      po.threads = std::max(0, std::min(threads, kMaxThreads));
      // in_order: the pieces come front to back, padding included (a sink that cannot seek)
      if (opt.value("in_order", false)) {
        const std::string why = in_order_refusal(job_->pc.plan);
        if (!why.empty()) throw ConvertError("this file cannot be written front to back: " + why);
        po.file_order = true;
        job_->in_order = std::make_unique<InOrderOutput>(job_->pc.plan.files[0]);
        job_->header_sent = true;  // (InOrderOutput gives the header first)
      }
      po.chunk_bytes = int64_t(std::clamp(opt.value("chunk_mb", 4), 1, 64)) << 20;
      // streamed_reads: the shards' bytes come from the page's reader worker, in the order
      // returned as read_order, instead of being read here on demand (WORKERFS).
      std::vector<ByteSource*> sources = ck_->sources();
      if (opt.value("streamed_reads", false)) {
        for (size_t k = 0; k < ck_->shards.size(); ++k) {
          job_->streamed.push_back(std::make_unique<StreamedSource>(int(k), ck_->shards[k]->name(), ck_->shards[k]->size()));
          sources[k] = job_->streamed.back().get();
        }
      }
      job_->run = std::make_unique<ConversionRun>(job_->pc.plan, sources, po);
      const Progress& p = job_->run->progress();
      nlohmann::json files = nlohmann::json::array();  // the files to write: one, or a split file's parts
      for (const PlanFile& f : job_->pc.plan.files) files.push_back({{"suffix", f.suffix}, {"bytes", f.total_bytes}});
      nlohmann::json j = {{"total_bytes", job_->pc.plan.total_bytes()}, {"source_bytes", p.source_total},
                          {"threads", po.threads}, {"buffer_bytes", job_->run->buffer_bytes()},
                          {"warnings", job_->pc.warnings}, {"notes", job_->pc.notes}, {"files", files}};
      if (!job_->streamed.empty()) {
        nlohmann::json order = nlohmann::json::array();
        for (const SourceRange& r : job_->run->caller_read_order()) order.push_back({r.shard, r.offset, r.size});
        j["read_order"] = order;
        nlohmann::json shards = nlohmann::json::array();
        for (const auto& sh : ck_->shards) shards.push_back(sh->name());
        j["read_files"] = shards;
      }
      return j;
    });
  }

  // The next output pieces: {pieces: [{offset, data}], done, item, n_items, items_done, source_done,
  // source_total} or {error}. `data` views wasm memory: copy it before calling again.
  val next() {
    val out = val::object();
    try {
      if (!job_) throw ConvertError("no conversion in progress");
      val pieces = val::array();
      if (!job_->header_sent) {
        for (size_t i = 0; i < job_->pc.plan.files.size(); ++i) {
          const PlanFile& pf = job_->pc.plan.files[i];
          pieces.call<void>("push", piece(int(i), 0, pf.header.data(), pf.header.size()));
          for (const FixedPiece& f : pf.fixed) pieces.call<void>("push", piece(int(i), f.offset, f.bytes.data(), f.bytes.size()));
        }
        job_->header_sent = true;
      } else {
        ChunkResult c;
        job_->done = !job_->run->next(c);
        std::vector<OutputPiece> out(c.pieces, c.pieces + (job_->done ? 0 : c.n_pieces));
        if (job_->in_order) {  // the chunk's pieces after what lies before them (header, padding)
          std::vector<OutputPiece> chunk = std::move(out);
          out.clear();
          for (const OutputPiece& p : chunk) job_->in_order->put(p, out);
          if (job_->done) job_->in_order->finish(out);
        }
        for (const OutputPiece& p : out) pieces.call<void>("push", piece(p.file, p.offset, p.data, p.size));
      }
      const Progress& p = job_->run->progress();
      out.set("pieces", pieces);
      out.set("done", job_->done);
      out.set("item", int(p.item));
      out.set("n_items", int(p.n_items));
      out.set("items_done", int(p.items_done));
      out.set("item_name", p.name ? *p.name : std::string());
      out.set("source_done", double(p.source_done));
      out.set("source_total", double(p.source_total));
    } catch (const std::bad_alloc&) {
      job_.reset();
      out.set("error", std::string(kOutOfMemory));
    } catch (const std::exception& e) {
      job_.reset();
      out.set("error", std::string(e.what()));
      out.set("advice", advice_of(e));
    }
    return out;
  }

  // The summary of the finished conversion (per-tensor max error, breakdown); frees the job.
  std::string finish() {
    return guarded([&] {
      if (!job_ || !job_->done) throw ConvertError("conversion not finished");
      nlohmann::json j = conversion_summary(job_->pc, job_->run->report());
      job_.reset();
      return j;
    });
  }

  void cancel() { job_.reset(); }

  // Inspects a written file mounted at `path` (LEAP or GGUF-lite).
  std::string inspect(std::string path) {
    return guarded([&] {
      FileSource f(path);
      InspectedFile info = inspect_file(f);
      if (ck_) info.breakdown.source_bytes = ck_->source_bytes;
      return nlohmann::json{{"format", info.format}, {"header", info.header}, {"breakdown", breakdown_json(info.breakdown)}};
    });
  }

  // The format id whose magic the first bytes (a Uint8Array) carry, or "": which dropped file is
  // one the core reads, before it is opened.
  std::string recognize(val head) const {
    const std::vector<uint8_t> b = emscripten::convertJSArrayToNumberVector<uint8_t>(head);
    const OutputFormat* f = format_by_magic(b.data(), b.size());
    return f ? f->id : "";
  }

  // Opens a GGUF / GGUF-lite / LEAP file through `readers` (an array of {name, size,
  // read(offset, length)}: one file, or every part of a split GGUF, in any order): its header
  // only. What it holds, as --inspect --json says it.
  std::string open_file(val readers) {
    return guarded([&] {
      verify_.reset();
      opened_.clear();
      std::vector<std::unique_ptr<JsSliceSource>> parts;
      std::vector<ByteSource*> sources;
      for (size_t i = 0, n = readers["length"].as<size_t>(); i < n; ++i) {
        parts.push_back(std::make_unique<JsSliceSource>(readers[i]));
        sources.push_back(parts.back().get());
      }
      InspectedFile info = inspect_files(sources);
      if (ck_) info.breakdown.source_bytes = ck_->source_bytes;
      opened_ = std::move(parts);
      return inspected_file_json(info);
    });
  }

  // An importance matrix (llama-imatrix's GGUF or legacy .dat) read whole through `reader`
  // ({name, size, read(offset, length)}), kept for the conversions and verifies that ask for it
  // ({imatrix: true} in their options): what it holds and how much of the open checkpoint it covers.
  std::string open_imatrix(val reader) {
    return guarded([&] {
      imatrix_.reset();
      JsSliceSource src(reader);
      imatrix_ = std::make_shared<const Imatrix>(read_imatrix(src, src.name()));
      return imatrix_json(*imatrix_, ck_.get());
    });
  }
  void close_imatrix() { imatrix_.reset(); }

  void close_file() {
    verify_.reset();
    opened_.clear();
  }

  // Round-trip and forward-pass check of a written file against the open checkpoint; the
  // forward pass covers as many layers as fit in param_budget parameters. One call.
  std::string verify(std::string path, double param_budget) {
    return guarded([&] {
      need_checkpoint();
      FileSource f(path);
      return verify_report_json(verify_file(f, *ck_, verify_options(param_budget)));
    });
  }

  // The same in steps, on the opened file: verifyStart, then verifyStep until done, then
  // verifyFinish. {n_steps} / {step, n_steps, what, done} / the report; {error} on failure.
  std::string verify_start(double param_budget) {
    return guarded([&] {
      verify_.reset();
      need_checkpoint();
      if (opened_.empty()) throw ConvertError("no file is open");
      std::vector<ByteSource*> parts;
      for (auto& p : opened_) parts.push_back(p.get());
      verify_ = std::make_unique<VerifyRun>(parts, *ck_, verify_options(param_budget));
      return nlohmann::json{{"n_steps", verify_->progress().n_steps}};
    });
  }
  val verify_step() {
    val out = val::object();
    try {
      if (!verify_) throw ConvertError("no verify in progress");
      const bool more = verify_->step();
      const VerifyProgress& p = verify_->progress();
      out.set("done", !more);
      out.set("step", double(p.step));
      out.set("n_steps", double(p.n_steps));
      out.set("what", p.what);
    } catch (const std::exception& e) {
      verify_.reset();
      out.set("error", one_line_text(e.what(), 4096));
      out.set("advice", advice_of(e));
    }
    return out;
  }
  std::string verify_finish() {
    return guarded([&] {
      if (!verify_) throw ConvertError("no verify in progress");
      std::unique_ptr<VerifyRun> run = std::move(verify_);
      return verify_report_json(run->finish());
    });
  }

  // llama.cpp's tokenizer from a GGUF's vocabulary (read through `reader` as openFile does; the
  // header only): what it is, and the pre-tokenizer patterns tokenize's split is called with.
  std::string open_tokenizer(val reader) {
    return guarded([&] {
      tokenizer_.reset();
      JsSliceSource src(std::move(reader));
      GgufReadOptions opt;
      opt.require_trailing_padding = false;  // llama.cpp's loader does not ask for it either
      const GgufFile f = read_gguf_file(src, opt);
      tokenizer_ = std::make_unique<GgufTokenizer>(GgufTokenizer::from_metadata(f.kv, src.name()));
      return nlohmann::json{{"model", tokenizer_->model()}, {"pre", tokenizer_->pre()},
                            {"n_tokens", tokenizer_->n_tokens()}, {"add_bos", tokenizer_->add_bos()},
                            {"patterns", tokenizer_->split_patterns()}};
    });
  }

  // The tokens llama.cpp makes of `text` (add_special, parse_special as llama-server's prompt):
  // {tokens: [[id, begin, end], ...]} with byte offsets into the UTF-8 text. split(bytes, pattern)
  // is the page's RegExp split (the core's patterns, JavaScript's Unicode classes) of the UTF-8
  // bytes it is handed: bytes, not a string, because Embind makes strings with a TextDecoder that
  // drops a leading U+FEFF.
  std::string tokenize(std::string text, bool add_special, bool parse_special, val split) {
    return guarded([&] {
      if (!tokenizer_) throw ConvertError("no tokenizer is open");
      const PatternSplit run = [&](const std::string& t, const std::string& pattern) {
        const val bytes(emscripten::typed_memory_view(t.size(), reinterpret_cast<const uint8_t*>(t.data())));
        return emscripten::vecFromJSArray<std::string>(split(bytes, pattern));
      };
      nlohmann::json tokens = nlohmann::json::array();
      for (const TokenSpan& s : tokenizer_->tokenize(text, add_special, parse_special, run))
        tokens.push_back({s.id, s.begin, s.end});
      return nlohmann::json{{"tokens", tokens}};
    });
  }

  int max_threads() const { return kMaxThreads; }

  // The core's tables (quant types, output formats) for the page to draw from.
  std::string catalog() const {
    return guarded([&] { return catalog_json(); });
  }

 private:
  static constexpr int kMaxThreads = LEAPCONV_MAX_THREADS;  // = the pthread pool size

  struct Job {
    PlannedConversion pc;
    std::vector<std::unique_ptr<StreamedSource>> streamed;  // the run's shards when streamed
    std::unique_ptr<ConversionRun> run;  // reads pc.plan and streamed: declared after them
    std::unique_ptr<InOrderOutput> in_order;  // start({in_order}): the file front to back
    bool header_sent = false, done = false;
  };

  VerifyOptions verify_options(double param_budget) const {
    VerifyOptions opt;
    if (param_budget > 0) opt.param_budget = int64_t(param_budget);
    opt.imatrix = imatrix_;  // (used only for a file that says it was made with one)
    return opt;
  }

  // The page's options; {imatrix: true}: with the importance matrix it opened.
  ConvertOptions convert_options(const nlohmann::json& j) const {
    ConvertOptions opt = parse_convert_options(j);
    if (j.value("imatrix", false) && opt.format == "gguf") {
      if (!imatrix_) throw ConvertError("no importance matrix is open");
      // llama-quantize's types take it; the converter's (the page's F32, F16, BF16, Q8_0) do not
      const GgufFileType* ft = opt.gguf_file_type >= 0 ? gguf_file_type_by_ftype(uint32_t(opt.gguf_file_type)) : nullptr;
      if (opt.llama_quantize || (ft && !ft->converter)) opt.imatrix = imatrix_;
    }
    return opt;
  }

  void need_checkpoint() const {
    if (!ck_) throw ConvertError("no checkpoint is open");
  }

  nlohmann::json describe() const {
    const Checkpoint& ck = *ck_;
    nlohmann::json j = checkpoint_json(ck);
    // What each format can do with this checkpoint: its default plan, or the core's reason.
    nlohmann::json can = nlohmann::json::array();
    for (const OutputFormat& f : output_formats()) {
      const ConvertOptions o = parse_convert_options({{"format", f.id}});
      nlohmann::json e = {{"format", f.id}, {"name", f.name}, {"ok", true}};
      try {
        plan_conversion(ck, o);
      } catch (const ConvertError& err) {
        e["ok"] = false;
        e["reason"] = err.what();
      }
      can.push_back(e);
    }
    j["formats"] = can;
    return j;
  }

  static val piece(int file, int64_t offset, const uint8_t* data, size_t n) {
    val p = val::object();
    p.set("file", file);
    p.set("offset", double(offset));
    p.set("data", val(emscripten::typed_memory_view(n, data)));
    return p;
  }

  std::unique_ptr<Checkpoint> ck_;
  std::shared_ptr<const Imatrix> imatrix_;
  std::unique_ptr<Job> job_;
  std::vector<std::unique_ptr<JsSliceSource>> opened_;  // the file the page opened (its parts, split)
  std::unique_ptr<VerifyRun> verify_;      // reads opened_ and ck_: reset before either
  std::unique_ptr<GgufTokenizer> tokenizer_;
};

EMSCRIPTEN_BINDINGS(leapconv) {
  emscripten::class_<Converter>("Converter")
      .constructor<>()
      .function("open", &Converter::open)
      .function("plan", &Converter::plan)
      .function("start", &Converter::start)
      .function("next", &Converter::next)
      .function("finish", &Converter::finish)
      .function("cancel", &Converter::cancel)
      .function("inspect", &Converter::inspect)
      .function("verify", &Converter::verify)
      .function("recognize", &Converter::recognize)
      .function("openFile", &Converter::open_file)
      .function("closeFile", &Converter::close_file)
      .function("openImatrix", &Converter::open_imatrix)
      .function("closeImatrix", &Converter::close_imatrix)
      .function("verifyStart", &Converter::verify_start)
      .function("verifyStep", &Converter::verify_step)
      .function("verifyFinish", &Converter::verify_finish)
      .function("groupView", &Converter::group_view)
      .function("openTokenizer", &Converter::open_tokenizer)
      .function("tokenize", &Converter::tokenize)
      .function("maxThreads", &Converter::max_threads)
      .function("catalog", &Converter::catalog)
      .function("tensorTypeFile", &Converter::tensor_type_file);
}
