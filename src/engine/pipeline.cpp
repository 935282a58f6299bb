#include "engine/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "quant/codec.h"

#include <cstdio>

namespace leapconv {

ConvertError unencodable(const std::string& file, const PlanItem& it, const float* w, int64_t row0, int64_t rows);

Pipeline::Pipeline(const ConversionPlan& plan, std::vector<ByteSource*> shards,
                   PipelineOptions opt)
    : plan_(plan), shards_(std::move(shards)) {
  // Workers do their own I/O when every source and the sink take concurrent positioned calls
  // (pread/pwrite): reads and writes then run on all cores instead of one.
  read_in_workers_ = opt.threads > 0;
  for (ByteSource* s : shards_) read_in_workers_ = read_in_workers_ && s->concurrent_reads();
  if (opt.threads > 0 && opt.sink && opt.sink->concurrent_writes()) direct_sink_ = opt.sink;
  const int64_t target_elems = std::max<int64_t>(1, opt.chunk_bytes / 4);
  int64_t max_elems = 0, max_raw = 0, max_out = 0;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const PlanItem& it = plan.items[i];
    if (it.rows * it.cols == 0) continue;
    const int64_t q = it.row_quantum;
    const int64_t rows = std::max<int64_t>(q, target_elems / std::max<int64_t>(1, it.cols) / q * q);
    for (int64_t r = 0; r < it.rows; r += rows) {
      const int64_t r1 = std::min(it.rows, r + rows);
      chunks_.push_back({int(i), r, r1});
      const int64_t n = (r1 - r) * it.cols;
      max_elems = std::max(max_elems, n);
      max_raw = std::max(max_raw, n * dtype_size(it.src_dtype));
      max_out = std::max(max_out, it.qt().bytes_of(r1 - r, it.cols, it.group_size).total());
    }
  }
  // Chunks run in the order their bytes sit in the shards, not in output order: every shard is
  // then read front to back (one long range instead of one per tensor: disks read ahead, and
  // the browser streams a few long ranges instead of hundreds of short ones, each with its own
  // start-up cost). Output order does not matter: every piece has its offset in the plan.
  std::stable_sort(chunks_.begin(), chunks_.end(), [this](const Chunk& a, const Chunk& b) {
    const SourceRange x = source_of(a), y = source_of(b);
    return x.shard != y.shard ? x.shard < y.shard : x.offset < y.offset;
  });
  const int threads = std::max(0, opt.threads);
  slots_.resize(chunks_.empty() ? 0 : std::min<size_t>(chunks_.size(), size_t(threads) + 2));
  for (Slot& s : slots_) {
    s.raw.resize(size_t(max_raw));
    s.f32.resize(size_t(max_elems));
    s.out.resize(size_t(max_out));
  }
  buffer_bytes_ = int64_t(slots_.size()) * (max_raw + max_elems * 4 + max_out);
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
      if (read_in_workers_) load_raw(*s);
      encode_chunk(*s);
      if (direct_sink_) write_pieces(*s);
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

SourceRange Pipeline::source_of(const Chunk& ch) const {
  const PlanItem& it = plan_.items[size_t(ch.item)];
  const int64_t row_bytes = it.cols * dtype_size(it.src_dtype);
  return {it.shard, it.src_offset + ch.row0 * row_bytes, (ch.row1 - ch.row0) * row_bytes};
}

std::vector<SourceRange> Pipeline::caller_read_order() const {
  std::vector<SourceRange> order;
  if (read_in_workers_) return order;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const SourceRange r = source_of(chunks_[c]);
    if (r.size == 0) continue;
    SourceRange* last = order.empty() ? nullptr : &order.back();
    if (last && last->shard == r.shard && last->offset + last->size == r.offset) last->size += r.size;
    else order.push_back(r);
  }
  return order;
}

void Pipeline::load_raw(Slot& s) {
  const SourceRange r = source_of(chunks_[s.chunk]);
  if (!r.size) return;
  try {
    shards_[size_t(r.shard)]->read_at(r.offset, s.raw.data(), size_t(r.size));
  } catch (const ConvertError& e) {
    if (!e.tensor().empty()) throw;
    throw ConvertError(e.file(), plan_.items[size_t(chunks_[s.chunk].item)].source_name, e.detail());
  }
}

void Pipeline::write_pieces(Slot& s) {
  ChunkResult& r = s.result;
  for (int i = 0; i < r.n_pieces; ++i) direct_sink_->write_at(r.pieces[i].offset, r.pieces[i].data, r.pieces[i].size);
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
  s.result.source_bytes = source_of(chunks_[c]).size;
}

// Rows [r0, r1) of the chunk's raw source rows -> f32 at w (RoPE-permuted, transposed, offset
// where asked).
static void rows_to_f32(const PlanItem& it, const uint8_t* raw, int64_t r0, int64_t r1, float* w) {
  const int64_t cols = it.cols, dsize = dtype_size(it.src_dtype);
  if (it.transpose) {  // the chunk is the whole source [cols, rows]: output row r is its column r
    std::vector<float> seg(size_t(r1 - r0));
    for (int64_t c = 0; c < cols; ++c) {
      convert_to_f32(it.src_dtype, raw + (c * it.rows + r0) * dsize, seg.size(), seg.data());
      for (int64_t r = r0; r < r1; ++r) w[(r - r0) * cols + c] = seg[size_t(r - r0)];
    }
  } else if (it.permute_heads > 0) {
    const int64_t hd = it.rows / it.permute_heads;
    for (int64_t r = r0; r < r1; ++r)  // chunks start on a head boundary
      convert_to_f32(it.src_dtype, raw + rope_source_row(r, hd) * cols * dsize, size_t(cols), w + (r - r0) * cols);
  } else {
    convert_to_f32(it.src_dtype, raw + r0 * cols * dsize, size_t((r1 - r0) * cols), w);
  }
  if (it.add != 0.0f)
    for (int64_t i = 0; i < (r1 - r0) * cols; ++i) w[i] += it.add;
}

// Rows converted and encoded together when the encoding quantizes: ~64 KiB of f32 stays in
// the core's cache from conversion to quantization, instead of a whole chunk of f32 being
// written out to memory and read back twice (absmax, then quantize).
constexpr int64_t kEncodeBlockElems = 16 << 10;

// raw source rows -> f32 -> the item's encoding, a block of rows at a time.
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
  float* w = s.f32.data();
  int64_t bad_row0 = 0, bad_rows = 0;  // the rows of w encoded last, for an error message
  if (qt.id == QType::F32) {  // f32 is the output: convert the chunk and write it as is
    rows_to_f32(it, s.raw.data(), 0, rows, w);
    region[0] = reinterpret_cast<uint8_t*>(w);
  } else {
    const int64_t q = it.row_quantum;  // blocks start where a chunk could: on group boundaries
    const int64_t block = std::max<int64_t>(q, kEncodeBlockElems / std::max<int64_t>(1, cols) / q * q);
    for (int64_t b = 0; b < rows && !std::isinf(r.max_err); b += block) {
      const int64_t b1 = std::min(rows, b + block);
      rows_to_f32(it, s.raw.data(), b, b1, w);
      const RowRegions at = row_regions(it, ch.row0, ch.row0 + b);  // bytes before row b
      uint8_t* dst[kMaxRegions] = {};
      for (int i = 0; i < rr.n; ++i) dst[i] = region[i] + at.region[i].bytes;
      r.max_err = std::max(r.max_err, encode_rows(it, w, b1 - b, dst));
      bad_row0 = ch.row0 + b;
      bad_rows = b1 - b;
    }
  }
  for (int i = 0; i < rr.n; ++i)
    if (rr.region[i].bytes || i == 0)
      r.pieces[r.n_pieces++] = OutputPiece{rr.region[i].offset, region[i], size_t(rr.region[i].bytes)};
  if (std::isinf(r.max_err)) throw unencodable(shards_[size_t(it.shard)]->name(), it, w, bad_row0, bad_rows);
}

// Why rows [row0, row0 + rows) of a tensor (their f32 values at w) could not be encoded: a NaN
// or an Inf, or a finite value too large for the type (F16 past 65504, a block scale that would
// overflow its f16 and decode as Inf or NaN, or past where ggml's scale search overflows).
ConvertError unencodable(const std::string& file, const PlanItem& it, const float* w, int64_t row0, int64_t rows) {
  const std::string type = it.qt().name;
  float big = 0.0f;
  int64_t at = -1;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < it.cols; ++c) {
      const float a = std::fabs(w[r * it.cols + c]);
      if (!std::isfinite(a))
        return ConvertError(file, it.source_name, "holds NaN or Inf values (row " + std::to_string(row0 + r) +
                                                      "); cannot quantize it to " + type);
      if (a > big) big = a, at = row0 + r;
    }
  char v[32];
  std::snprintf(v, sizeof v, "%g", double(big));
  const bool plain = it.qt().span == BlockSpan::Fixed && it.qt().block_values == 1;  // F16, BF16
  return ConvertError(file, it.source_name,
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
    if (!read_in_workers_) {  // sequential reads on the caller's thread
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
