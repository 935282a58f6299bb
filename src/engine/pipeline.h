// The streaming engine. Chunks (row ranges of one tensor) flow through a fixed ring of W slots
// (threads + 2), so memory is chunk size x W, never the model. Chunks are taken in source
// order (shard by shard, front to back), so the shards are read sequentially; each chunk's
// output pieces carry their file offsets, so the sink takes positioned writes. Worker threads
// convert and quantize; results come back to the caller in that same source order. Where the
// sources and the sink allow concurrent positioned I/O (native pread/pwrite) the workers read
// and write their own chunks; otherwise (browser, Node) the caller reads ahead sequentially.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/byte_io.h"
#include "plan/plan.h"

#pragma once

namespace leapconv {

struct PipelineOptions {
  int threads = 2;                   // worker threads; 0 = do everything on the caller
  int64_t chunk_bytes = 4 << 20;     // target f32 working set of one chunk
  // Optional: sinks (one per file of the plan) that take concurrent writes let workers write
  // their own chunks; next() then returns chunks with no pieces left to write.
  std::vector<ByteSink*> sinks;
  // Chunks in file order (tensor after tensor) instead of source order: for a sink that takes
  // the file front to back (engine/in_order.h); the shards are then read where the tensors are.
  bool file_order = false;
};

struct OutputPiece {
  int file = 0;  // which of the plan's files
  int64_t offset = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

struct ChunkResult {
  int item = 0;
  int64_t row0 = 0, row1 = 0;
  int64_t source_bytes = 0;  // input bytes this chunk consumed
  float max_err = 0.0f;      // max |w - dequant| over the chunk
  OutputPiece pieces[kMaxRegions];  // one per region of the tensor (quant-type table)
  int n_pieces = 0;
};

class Pipeline {
 public:
  Pipeline(const ConversionPlan& plan, std::vector<ByteSource*> shards, PipelineOptions opt);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Produces the next chunk in source order; false when all are done. The pieces stay valid
  // until the next call. Rethrows (as ConvertError naming file and tensor) any worker error.
  bool next(ChunkResult& out);

  size_t chunk_count() const { return chunks_.size(); }
  // Where reads happen on the caller (sources without concurrent reads), the exact sequence of
  // read_at calls it will make, merged where one ends where the next begins: a platform layer
  // can stream these ranges ahead of the pipeline (the browser's reader worker). Empty when
  // the workers read for themselves.
  std::vector<SourceRange> caller_read_order() const;
  int64_t peak_buffer_bytes() const { return buffer_bytes_; }
  // Time the caller spent reading sources and waiting for workers (where a slow run goes).
  double caller_read_seconds() const { return read_s_; }
  double caller_wait_seconds() const { return wait_s_; }
  // How many worker threads encoded at least one chunk (0 when single-threaded).
  int workers_used() const { return workers_used_.load(); }

 private:
  struct Chunk {
    int item;
    int64_t row0, row1;
    std::vector<RowSpan> reads;  // the source rows its recipe reads, in order
    int64_t source_bytes = 0;
    bool staged = false;  // its spans are copied from stage_ (its item's sources, read whole once)
  };
  // A GPTQ weight's sources where short reads are costly (the browser's File, a range request):
  // each read whole, in one range, by the caller when the item's first chunk is read (workers
  // that read for themselves leave those chunks to it), and every chunk's strips copied from
  // here; memory: the packed codes, not the f32 weight.
  struct Stage {
    int item = -1;
    std::vector<uint8_t> bytes;  // its sources' bytes, in shard order, one after another
    std::vector<int64_t> at, start;  // by source: where its bytes are in `bytes`, and in its shard
  };
  struct StagedSource {
    int source;
    SourceRange range;  // all of it
  };
  struct Slot {
    std::vector<uint8_t> raw;
    std::vector<float> f32;
    std::vector<uint8_t> out;
    size_t chunk = 0;
    bool done = false;
    std::exception_ptr error;
    ChunkResult result;
  };

  void prepare_slot(size_t c, Slot& s);
  std::vector<StagedSource> stage_sources(int item) const;
  void load_raw(Slot& s);
  void write_pieces(Slot& s);
  void encode_chunk(Slot& s);
  void worker_loop();

  const ConversionPlan& plan_;
  std::vector<ByteSource*> shards_;
  std::vector<Chunk> chunks_;
  std::vector<Slot> slots_;
  Stage stage_;
  int64_t buffer_bytes_ = 0;
  size_t next_read_ = 0, next_deliver_ = 0;
  bool read_in_workers_ = false;
  double read_s_ = 0, wait_s_ = 0;
  std::vector<ByteSink*> direct_sinks_;

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::deque<Slot*> queue_;
  bool stop_ = false;
  std::atomic<int> workers_used_{0};
};

}  // namespace leapconv
