// The pipeline's read schedule: where the caller reads (sources without concurrent reads, as
// in the browser), Pipeline::caller_read_order() must be exactly the sequence of read_at calls
// the conversion then makes, since the browser's reader worker streams those bytes ahead of it
// and hands them over strictly in that order.
#include <gtest/gtest.h>

#include <mutex>

#include "checkpoint_gen.h"
#include "engine/in_order.h"
#include "formats/convert.h"
#include "test_support.h"

using namespace leapconv;

namespace {

// Forwards to a shard in memory and records every read.
class RecordingSource : public ByteSource {
 public:
  RecordingSource(int shard, const ByteSource& inner, std::vector<SourceRange>* log, std::mutex* mu)
      : shard_(shard), inner_(inner), log_(log), mu_(mu) {}
  const std::string& name() const override { return inner_.name(); }
  int64_t size() const override { return inner_.size(); }
  void read_at(int64_t offset, void* dst, size_t n) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      log_->push_back({shard_, offset, int64_t(n)});
    }
    const_cast<ByteSource&>(inner_).read_at(offset, dst, n);
  }
  bool concurrent_reads() const override { return concurrent; }
  bool cheap_short_reads() const override { return cheap; }
  bool concurrent = false, cheap = false;

 private:
  int shard_;
  const ByteSource& inner_;
  std::vector<SourceRange>* log_;
  std::mutex* mu_;
};

class ReadOrder : public tsup::TempDirTest {
 protected:
  Checkpoint open(const gen::Spec& spec) {
    gen::write_checkpoint(path("m"), spec);
    return load();
  }
  Checkpoint load() {
    names.clear();
    CheckpointFiles f;
    f.label = "m";
    for (const auto& e : tsup::fs::directory_iterator(path("m"))) {
      const std::string p = e.path().string();
      if (e.path().extension() == ".safetensors") names.push_back(p);
      else if (e.path().filename() == "config.json") f.config_json = tsup::slurp_text(p);
      else if (e.path().filename() == "model.safetensors.index.json") f.index_json = tsup::slurp_text(p);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& n : names) f.shards.push_back(std::make_unique<MemorySource>(n, gen::read_file(n)));
    return open_checkpoint(std::move(f));
  }
  std::vector<std::string> names;
};

// A checkpoint's shards, each behind a RecordingSource, logging into one list.
struct Recorded {
  std::mutex mu;
  std::vector<SourceRange> reads;
  std::vector<std::unique_ptr<RecordingSource>> rec;
  std::vector<ByteSource*> srcs;
  explicit Recorded(const Checkpoint& ck, bool cheap = false) {
    for (size_t k = 0; k < ck.shards.size(); ++k) {
      rec.push_back(std::make_unique<RecordingSource>(int(k), *ck.shards[k], &reads, &mu));
      rec.back()->cheap = cheap;
      srcs.push_back(rec.back().get());
    }
  }
};

// Byte by byte: both lists cover the same (shard, offset) bytes in the same order.
void expect_same_bytes_in_order(const std::vector<SourceRange>& planned, const std::vector<SourceRange>& reads) {
  size_t i = 0;
  int64_t within = 0;
  for (const SourceRange& r : reads) {
    ASSERT_LT(i, planned.size()) << "a read beyond the planned ranges at offset " << r.offset;
    EXPECT_EQ(r.shard, planned[i].shard);
    EXPECT_EQ(r.offset, planned[i].offset + within) << "read " << r.offset << " out of order";
    within += r.size;
    ASSERT_LE(within, planned[i].size) << "a read crosses the end of a planned range";
    if (within == planned[i].size) ++i, within = 0;
  }
  EXPECT_EQ(i, planned.size()) << "planned ranges left unread";
}

}  // namespace

TEST_F(ReadOrder, IsExactlyTheCallersReadsForLeapAndGguf) {
  gen::Spec s;
  s.dim = 64; s.hidden = 160; s.layers = 3; s.heads = 4; s.kv_heads = 2; s.vocab = 96;
  s.shards = 2;
  const Checkpoint ck = open(s);
  ConvertOptions leap2;
  leap2.format = "leap";
  leap2.version = 2;
  ConvertOptions q4;
  q4.format = "gguf-lite";
  q4.gguf.default_scheme = QType::Q4Group64;
  for (const ConvertOptions& opt : {leap2, q4}) {
    for (int threads : {0, 2}) {
      const PlannedConversion pc = plan_conversion(ck, opt);
      Recorded r(ck);
      const std::vector<SourceRange>& reads = r.reads;
      PipelineOptions po;
      po.threads = threads;
      po.chunk_bytes = 4096;  // many chunks per tensor
      ConversionRun run(pc.plan, r.srcs, po);
      const std::vector<SourceRange> planned = run.caller_read_order();
      ChunkResult c;
      size_t done_before = run.progress().items_done;
      while (run.next(c)) {
        EXPECT_GE(run.progress().items_done, done_before);  // tensors finished only add up
        done_before = run.progress().items_done;
      }
      SCOPED_TRACE(pc.format + " threads " + std::to_string(threads));
      EXPECT_EQ(run.progress().items_done, pc.plan.items.size());
      // Chunks come in source order: each shard is read front to back, in one range, since
      // every byte of its data region belongs to a tensor the conversion writes.
      ASSERT_EQ(planned.size(), ck.shards.size());
      for (size_t k = 0; k < planned.size(); ++k) EXPECT_EQ(planned[k].shard, int(k));
      EXPECT_GT(reads.size(), planned.size());  // chunks were merged into ranges
      for (size_t i = 1; i < planned.size(); ++i)  // and the merge is complete
        EXPECT_FALSE(planned[i].shard == planned[i - 1].shard &&
                     planned[i].offset == planned[i - 1].offset + planned[i - 1].size);
      int64_t total = 0;
      for (const SourceRange& p : planned) total += p.size;
      EXPECT_EQ(total, run.progress().source_total);
      expect_same_bytes_in_order(planned, reads);
    }
  }
}

// A GPTQ weight's codes (qweight [in / 8, out]: output rows are its columns) are read in strips
// where short reads are cheap (a file, memory), and whole, in one range, where each read costs
// its own start (the browser's streamed File, a range request), whether the caller reads or the
// workers do (the native CLI from the Hub): the same bytes each way, and progress counts each
// source byte once. Read whole, they are held packed (the stage), and the chunks stay small:
// memory is the codes', not the weight's in f32 (as it was once).
TEST_F(ReadOrder, GptqWeightsAreStripsWhereShortReadsAreCheapAndOneRangeWhereNot) {
  gen::Spec s;
  s.hf_init = true;
  s.dim = 512; s.hidden = 1024; s.layers = 1; s.heads = 8; s.kv_heads = 8; s.vocab = 96;
  gen::write_checkpoint(path("m"), s);
  ASSERT_GT(gen::quantize_checkpoint(path("m"), "gptq4", 128, ""), 0);
  const Checkpoint ck = load();
  ConvertOptions opt;
  opt.format = "gguf";
  opt.vocab.allow_no_vocab = true;
  const PlannedConversion pc = plan_conversion(ck, opt);
  enum Way { kCheap, kCostly, kCostlyWorkers };
  std::vector<uint8_t> bytes[3];
  int64_t peak[3] = {};
  for (const Way way : {kCheap, kCostly, kCostlyWorkers}) {
    SCOPED_TRACE(way == kCheap ? "cheap short reads" : way == kCostly ? "costly short reads" : "costly, the workers reading");
    Recorded r(ck, way == kCheap);
    for (auto& src : r.rec) src->concurrent = way == kCostlyWorkers;
    const std::vector<SourceRange>& reads = r.reads;
    PipelineOptions po;
    po.threads = way == kCostlyWorkers ? 2 : 0;
    po.chunk_bytes = 64 << 10;  // 16 rows of 1024 a chunk
    ConversionRun run(pc.plan, r.srcs, po);
    const std::vector<SourceRange> planned = run.caller_read_order();
    MemorySink sink;
    ChunkResult c;
    while (run.next(c))
      for (int i = 0; i < c.n_pieces; ++i) sink.write_at(c.pieces[i].offset, c.pieces[i].data, c.pieces[i].size);
    if (way != kCostlyWorkers) expect_same_bytes_in_order(planned, reads);
    else EXPECT_TRUE(planned.empty());
    EXPECT_EQ(run.progress().source_done, run.progress().source_total);
    // the down projection's qweight [1024 / 8, 512]: a read per row of it a chunk, or one read
    const auto q = std::find_if(pc.plan.items.begin(), pc.plan.items.end(), [](const PlanItem& it) { return it.name == "blk.0.ffn_down.weight"; });
    ASSERT_NE(q, pc.plan.items.end());
    const SourceTensor& codes = q->recipe.sources[0];
    ASSERT_EQ(codes.shape, (std::vector<int64_t>{1024 / 8, 512})) << codes.name;
    size_t n = 0;
    for (const SourceRange& x : reads) n += x.offset >= codes.offset && x.offset < codes.offset + codes.nbytes();
    EXPECT_EQ(n, way == kCheap ? size_t(512 / 16 * 128) : 1u);  // (64 KiB of f32: chunks of 16 rows of 1024)
    peak[way] = run.buffer_bytes();
    bytes[way] = sink.bytes();
  }
  EXPECT_TRUE(bytes[kCostly] == bytes[kCheap]);
  EXPECT_TRUE(bytes[kCostlyWorkers] == bytes[kCheap]);
  // read whole, the chunks' memory and the codes, scales and zero points of the largest weight
  // (1024 x 512 / 2 bytes and a few KiB), not its 2 MiB of f32 (four slots with two workers)
  EXPECT_LE(peak[kCostly] - peak[kCheap], 1024 * 512 / 2 + (32 << 10)) << peak[kCostly] << " " << peak[kCheap];
  EXPECT_LT(peak[kCostly], 1024 * 512 * 4);
  EXPECT_LT(peak[kCostlyWorkers], 1024 * 512 * 4);
}

TEST_F(ReadOrder, IsEmptyWhenWorkersReadForThemselves) {
  gen::Spec s;
  const Checkpoint ck = open(s);
  ConvertOptions leap1;
  leap1.format = "leap";
  const PlannedConversion pc = plan_conversion(ck, leap1);
  std::mutex mu;
  std::vector<SourceRange> reads;
  RecordingSource src(0, *ck.shards[0], &reads, &mu);
  src.concurrent = true;
  PipelineOptions po;
  po.threads = 2;
  ConversionRun run(pc.plan, {&src}, po);
  EXPECT_TRUE(run.caller_read_order().empty());
  po.threads = 0;  // no workers: the caller reads after all
  ConversionRun single(pc.plan, {&src}, po);
  EXPECT_FALSE(single.caller_read_order().empty());
}

// A file streamed front to back (the page's download where the browser keeps no files): chunks
// in file order through InOrderOutput give one piece after another, header, padding and all, and
// together the bytes the positioned writes give; a plan that cannot be written so says why.
TEST_F(ReadOrder, InOrderOutputStreamsTheFileFrontToBack) {
  gen::Spec s;
  s.dim = 64; s.hidden = 160; s.layers = 3; s.heads = 4; s.kv_heads = 2; s.vocab = 96;
  s.shards = 2;
  const Checkpoint ck = open(s);
  ConvertOptions gguf, q4k, lite, leap2, split;
  gguf.format = q4k.format = split.format = "gguf";
  gguf.vocab.allow_no_vocab = q4k.vocab.allow_no_vocab = split.vocab.allow_no_vocab = true;
  q4k.gguf_file_type = 15;  // Q4_K_M, as llama-quantize makes it
  q4k.llama_quantize = true;
  split.split_max_tensors = 5;
  lite.format = "gguf-lite";
  lite.gguf.default_scheme = QType::Q4Group64;
  leap2.format = "leap";
  leap2.version = 2;
  int streamed = 0;
  for (const ConvertOptions* opt : {&gguf, &q4k, &lite, &leap2, &split}) {
    const PlannedConversion pc = plan_conversion(ck, *opt);
    SCOPED_TRACE(pc.format);
    const std::string why = in_order_refusal(pc.plan);
    if (opt == &lite || opt == &leap2 || opt == &split) {  // values and scales apart (GGUF-lite's and LEAP's); several files
      EXPECT_NE(why, "");
      continue;
    }
    ASSERT_EQ(why, "");
    MemorySink want;
    run_plan(pc.plan, ck.sources(), want, PipelineOptions{}, nullptr);
    want.bytes().resize(size_t(pc.plan.total_bytes()));
    for (int threads : {0, 2}) {
      PipelineOptions po;
      po.threads = threads;
      po.chunk_bytes = 4096;  // many chunks per tensor
      po.file_order = true;
      Recorded r(ck);  // (the caller reads: caller_read_order is what it reads, in file order too)
      ConversionRun run(pc.plan, r.srcs, po);
      const std::vector<SourceRange> planned = run.caller_read_order();
      InOrderOutput stream(pc.plan.files[0]);
      std::vector<uint8_t> got;
      std::vector<OutputPiece> out;
      const auto take = [&] {  // (a chunk's pieces are valid until the next chunk)
        for (const OutputPiece& p : out) {
          ASSERT_EQ(p.offset, int64_t(got.size())) << "a piece out of order";
          got.insert(got.end(), p.data, p.data + p.size);
        }
        out.clear();
      };
      ChunkResult c;
      while (run.next(c)) {
        for (int i = 0; i < c.n_pieces; ++i) stream.put(c.pieces[i], out);
        take();
      }
      stream.finish(out);
      take();
      expect_same_bytes_in_order(planned, r.reads);
      EXPECT_TRUE(got == want.bytes()) << got.size() << " bytes streamed, " << want.bytes().size() << " written";
      ++streamed;
    }
  }
  EXPECT_EQ(streamed, 4);
  // chunks in source order (as without file_order) are refused, not written out of place
  const PlannedConversion pc = plan_conversion(ck, gguf);
  PipelineOptions po;
  po.chunk_bytes = 4096;
  ConversionRun run(pc.plan, ck.sources(), po);
  InOrderOutput stream(pc.plan.files[0]);
  std::vector<OutputPiece> out;
  ChunkResult c;
  EXPECT_THROW({ while (run.next(c)) for (int i = 0; i < c.n_pieces; ++i) stream.put(c.pieces[i], out); }, ConvertError);
}
