#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "quant/codec.h"

#include <cstdio>

namespace leapconv {

ConvertError unencodable(const PlanItem& it, const float* w, int64_t row0, int64_t rows);

// floor(a * b / c) for a, b, c >= 0, c > 0, without overflow.
static int64_t muldiv_floor(int64_t a, int64_t b, int64_t c) { return int64_t(static_cast<__int128>(a) * b / c); }

Pipeline::Pipeline(const ConversionPlan& plan, std::vector<ByteSource*> shards,
                   PipelineOptions opt)
    : plan_(plan), shards_(std::move(shards)) {
  // Workers do their own I/O when every source and sink take concurrent positioned calls
  // (pread/pwrite): reads and writes then run on all cores instead of one.
  read_in_workers_ = opt.threads > 0;
  for (ByteSource* s : shards_) read_in_workers_ = read_in_workers_ && s->concurrent_reads();
  bool direct = opt.threads > 0 && !opt.sinks.empty();
  for (ByteSink* s : opt.sinks) direct = direct && s && s->concurrent_writes();
  if (direct) direct_sinks_ = opt.sinks;
  const int64_t target_elems = std::max<int64_t>(1, opt.chunk_bytes / 4);
  bool cheap_short_reads = true;
  for (ByteSource* s : shards_) cheap_short_reads = cheap_short_reads && s->cheap_short_reads();
  int64_t max_elems = 0, max_raw = 0, max_out = 0, max_stage = 0;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const PlanItem& it = plan.items[i];
    if (it.rows * it.cols == 0) continue;
    const int64_t q = it.row_quantum;
    int64_t rows = std::max<int64_t>(q, target_elems / std::max<int64_t>(1, it.cols) / q * q);
    // A GPTQ weight read in strips costs a read per row of its codes a chunk: from a file that is
    // cheap, over the network or from a browser's File it is not. One long range instead, into
    // the stage (its packed bytes in memory), which the caller reads and copies each chunk's
    // strips from (also where the workers read the rest for themselves: load_raw).
    const bool staged = it.recipe.reads_strips() && !cheap_short_reads;
    if (staged) {
      int64_t n = 0;
      for (const StagedSource& x : stage_sources(int(i))) n += x.range.size;
      max_stage = std::max(max_stage, n);
    }
    // Progress counts each source byte once: the item's bytes shared by rows (a chunk may read
    // some twice: a block scale's row, a LoRA's A, a GPTQ weight's group index).
    const int64_t item_bytes = it.recipe.source_bytes();
    for (int64_t r = 0; r < it.rows; r += rows) {
      Chunk ch{int(i), r, std::min(it.rows, r + rows), it.recipe.reads(r, std::min(it.rows, r + rows))};
      ch.staged = staged;
      int64_t raw = 0;
      for (const RowSpan& sp : ch.reads) raw += it.recipe.byte_range(sp).size;
      ch.source_bytes = muldiv_floor(item_bytes, ch.row1, it.rows) - muldiv_floor(item_bytes, ch.row0, it.rows);
      const int64_t n = (ch.row1 - ch.row0) * it.cols;
      max_elems = std::max(max_elems, n);
      max_raw = std::max(max_raw, raw);
      max_out = std::max(max_out, it.qt().bytes_of(ch.row1 - ch.row0, it.cols, it.group_size).total());
      chunks_.push_back(std::move(ch));
    }
  }
  // Chunks run in the order their bytes sit in the shards, not in output order: every shard is
  // then read front to back (one long range instead of one per tensor: disks read ahead, and
  // the browser streams a few long ranges instead of hundreds of short ones, each with its own
  // start-up cost). Output order does not matter: every piece has its offset in the plan
  // (but to a sink that takes the file front to back: opt.file_order keeps the plan's order).
  // Chunks that read nothing (tensors computed from the config) come first.
  auto first = [this](const Chunk& c) {
    if (c.reads.empty()) return SourceRange{-1, 0, 0};
    return plan_.items[size_t(c.item)].recipe.byte_range(c.reads.front());
  };
  if (!opt.file_order)
    std::stable_sort(chunks_.begin(), chunks_.end(), [&](const Chunk& a, const Chunk& b) {
      const SourceRange x = first(a), y = first(b);
      return x.shard != y.shard ? x.shard < y.shard : x.offset < y.offset;
    });
  const int threads = std::max(0, opt.threads);
  slots_.resize(chunks_.empty() ? 0 : std::min<size_t>(chunks_.size(), size_t(threads) + 2));
  for (Slot& s : slots_) {
    s.raw.resize(size_t(max_raw));
    s.f32.resize(size_t(max_elems));
    s.out.resize(size_t(max_out));
  }
  buffer_bytes_ = int64_t(slots_.size()) * (max_raw + max_elems * 4 + max_out) + max_stage;
  for (int t = 0; t < threads && !chunks_.empty(); ++t) workers_.emplace_back([this] { worker_loop(); });
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void Pipeline::worker_loop() {
  bool counted = false;
  for (;;) {
    Slot* s;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      s = queue_.front();
      queue_.pop_front();
    }
    if (!counted) {
      counted = true;
      ++workers_used_;
    }
    try {
      if (read_in_workers_ && !chunks_[s->chunk].staged) load_raw(*s);
      encode_chunk(*s);
      if (!direct_sinks_.empty()) write_pieces(*s);
    } catch (...) {
      s->error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      s->done = true;
    }
    done_cv_.notify_all();
  }
}

std::vector<SourceRange> Pipeline::caller_read_order() const {
  std::vector<SourceRange> order;
  if (read_in_workers_) return order;
  auto add = [&](const SourceRange& r) {
    if (r.size == 0) return;
    SourceRange* last = order.empty() ? nullptr : &order.back();
    if (last && last->shard == r.shard && last->offset + last->size == r.offset) last->size += r.size;
    else order.push_back(r);
  };
  int staged = -1;  // as load_raw: an item's stage is read at its first chunk
  for (const Chunk& ch : chunks_) {
    if (ch.staged) {
      if (ch.item != staged)
        for (const StagedSource& x : stage_sources(ch.item)) add(x.range);
      staged = ch.item;
      continue;
    }
    for (const RowSpan& sp : ch.reads) add(plan_.items[size_t(ch.item)].recipe.byte_range(sp));
  }
  return order;
}

// Every source of the item, whole, in the order their bytes sit in the shards.
std::vector<Pipeline::StagedSource> Pipeline::stage_sources(int item) const {
  const Recipe& recipe = plan_.items[size_t(item)].recipe;
  std::vector<StagedSource> v;
  for (size_t i = 0; i < recipe.sources.size(); ++i)
    v.push_back({int(i), recipe.byte_range(RowSpan{int(i), 0, recipe.source_view(int(i)).rows})});
  std::stable_sort(v.begin(), v.end(), [](const StagedSource& a, const StagedSource& b) {
    return a.range.shard != b.range.shard ? a.range.shard < b.range.shard : a.range.offset < b.range.offset;
  });
  return v;
}

// The chunk's source bytes, span after span, into the slot's buffer: read, or copied from the
// stage (read first when this is its item's first chunk).
void Pipeline::load_raw(Slot& s) {
  const Chunk& ch = chunks_[s.chunk];
  const Recipe& recipe = plan_.items[size_t(ch.item)].recipe;
  auto read = [&](const SourceRange& r, uint8_t* dst, int source) {
    try {
      shards_[size_t(r.shard)]->read_at(r.offset, dst, size_t(r.size));
    } catch (const ConvertError& e) {
      if (!e.tensor().empty()) throw;
      throw e.in_tensor(recipe.sources[size_t(source)].name);
    }
  };
  if (ch.staged && stage_.item != ch.item) {
    stage_.item = -1;
    const std::vector<StagedSource> staged = stage_sources(ch.item);
    int64_t n = 0;
    for (const StagedSource& x : staged) n += x.range.size;
    stage_.bytes.resize(size_t(n));  // (within the largest, counted in peak_buffer_bytes)
    stage_.at.assign(recipe.sources.size(), 0);
    stage_.start.assign(recipe.sources.size(), 0);
    int64_t at = 0;
    for (const StagedSource& x : staged) {
      read(x.range, stage_.bytes.data() + at, x.source);
      stage_.at[size_t(x.source)] = at;
      stage_.start[size_t(x.source)] = x.range.offset;
      at += x.range.size;
    }
    stage_.item = ch.item;
  }
  uint8_t* at = s.raw.data();
  for (const RowSpan& sp : ch.reads) {
    const SourceRange r = recipe.byte_range(sp);
    if (!r.size) continue;
    if (ch.staged) std::memcpy(at, stage_.bytes.data() + stage_.at[size_t(sp.source)] + (r.offset - stage_.start[size_t(sp.source)]), size_t(r.size));
    else read(r, at, sp.source);
    at += r.size;
  }
}

void Pipeline::write_pieces(Slot& s) {
  ChunkResult& r = s.result;
  for (int i = 0; i < r.n_pieces; ++i)
    direct_sinks_[size_t(r.pieces[i].file)]->write_at(r.pieces[i].offset, r.pieces[i].data, r.pieces[i].size);
  r.n_pieces = 0;  // written: nothing left for the caller
}

void Pipeline::prepare_slot(size_t c, Slot& s) {
  const Chunk& ch = chunks_[c];
  s.chunk = c;
  s.done = false;
  s.error = nullptr;
  s.result = ChunkResult{};
  s.result.item = ch.item;
  s.result.row0 = ch.row0;
  s.result.row1 = ch.row1;
  s.result.source_bytes = ch.source_bytes;
}

// Rows converted and encoded together when the encoding quantizes: ~64 KiB of f32 stays in
// the core's cache from conversion to quantization, instead of a whole chunk of f32 being
// written out to memory and read back twice (absmax, then quantize).
constexpr int64_t kEncodeBlockElems = 16 << 10;

// raw source rows -> f32 (the item's recipe) -> the item's encoding, a block of rows at a time.
void Pipeline::encode_chunk(Slot& s) {
  const Chunk& ch = chunks_[s.chunk];
  const PlanItem& it = plan_.items[size_t(ch.item)];
  const int64_t rows = ch.row1 - ch.row0, cols = it.cols;
  const QuantType& qt = it.qt();
  // The chunk's encoded bytes sit in one buffer, region after region as in the file.
  const RowRegions rr = row_regions(it, ch.row0, ch.row1);
  ChunkResult& r = s.result;
  uint8_t* region[kMaxRegions] = {};
  size_t filled = 0;
  for (int i = 0; i < rr.n; ++i) {
    region[i] = s.out.data() + filled;
    filled += size_t(rr.region[i].bytes);
  }
  BufferedRows source(it.recipe, ch.reads, s.raw.data());
  float* w = s.f32.data();
  int64_t bad_row0 = 0, bad_rows = 0;  // the rows of w encoded last, for an error message
  if (it.recipe.passes_through()) {  // the source's blocks are the output's: copied as they are
    pass_through_rows(it.recipe, ch.row0, ch.row1, source, region[0]);
  } else if (qt.id == QType::F32) {  // f32 is the output: realize the chunk and write it as is
    realize_rows(it.recipe, ch.row0, ch.row1, source, w);
    region[0] = reinterpret_cast<uint8_t*>(w);
  } else {
    const int64_t q = it.row_quantum;  // blocks start where a chunk could: on group boundaries
    const int64_t block = std::max<int64_t>(q, kEncodeBlockElems / std::max<int64_t>(1, cols) / q * q);
    for (int64_t b = 0; b < rows && !std::isinf(r.max_err); b += block) {
      const int64_t b1 = std::min(rows, b + block);
      realize_rows(it.recipe, ch.row0 + b, ch.row0 + b1, source, w);
      const RowRegions at = row_regions(it, ch.row0, ch.row0 + b);  // bytes before row b
      uint8_t* dst[kMaxRegions] = {};
      for (int i = 0; i < rr.n; ++i) dst[i] = region[i] + at.region[i].bytes;
      r.max_err = std::max(r.max_err, encode_rows(it, w, ch.row0 + b, b1 - b, dst));
      bad_row0 = ch.row0 + b;
      bad_rows = b1 - b;
    }
  }
  for (int i = 0; i < rr.n; ++i)
    if (rr.region[i].bytes || i == 0)
      r.pieces[r.n_pieces++] = OutputPiece{it.file, rr.region[i].offset, region[i], size_t(rr.region[i].bytes)};
  if (std::isinf(r.max_err)) throw unencodable(it, w, bad_row0, bad_rows);
}

// Why rows [row0, row0 + rows) of a tensor (their f32 values at w) could not be encoded: a NaN
// or an Inf, or a finite value too large for the type (F16 past 65504, a block scale that would
// overflow its f16 and decode as Inf or NaN, or past where ggml's scale search overflows).
ConvertError unencodable(const PlanItem& it, const float* w, int64_t row0, int64_t rows) {
  const std::string type = it.qt().name;
  const std::string file = it.recipe.sources.empty() ? "" : it.recipe.sources[0].file;
  float big = 0.0f;
  int64_t at = -1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < it.cols; ++c) {
      const float a = std::fabs(w[r * it.cols + c]);
      if (!std::isfinite(a))
        return ConvertError(file, it.source_name(), "holds NaN or Inf values (row " + std::to_string(row0 + r) +
                                                      "); cannot quantize it to " + type);
      if (a > big) big = a, at = row0 + r;
    }
  char v[32];
  std::snprintf(v, sizeof v, "%g", double(big));
  const bool plain = it.qt().span == BlockSpan::Fixed && it.qt().block_values == 1;  // F16, BF16
  return ConvertError(file, it.source_name(),
                      std::string("holds ") + v + " (row " + std::to_string(at) + "), too large for " + type +
                          (plain ? " (it would become Inf)" : ": its 16-bit scales cannot hold it and the row would not read back (Inf, NaN or a meaningless block)") +
                          "; store this tensor as F32 (a --schemes rule)");
}

bool Pipeline::next(ChunkResult& out) {
  if (next_deliver_ >= chunks_.size()) return false;
  // The slot delivered last time is free again once the caller comes back: refill the ring.
  while (next_read_ < chunks_.size() && next_read_ < next_deliver_ + slots_.size()) {
    Slot& s = slots_[next_read_ % slots_.size()];
    prepare_slot(next_read_++, s);
    if (!read_in_workers_ || chunks_[s.chunk].staged) {  // sequential reads on the caller's thread (and the stage)
      const auto t0 = std::chrono::steady_clock::now();
      load_raw(s);
      read_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (workers_.empty()) {
      encode_chunk(s);  // single-threaded: no queue
      s.done = true;
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(&s);
    }
    work_cv_.notify_one();
  }
  Slot& s = slots_[next_deliver_ % slots_.size()];
  {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return s.done; });
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (s.error) std::rethrow_exception(s.error);
  ++next_deliver_;
  out = s.result;
  return true;
}

}  // namespace leapconv
