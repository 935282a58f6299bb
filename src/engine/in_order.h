// One output file as a stream of bytes, front to back: for a sink that cannot seek back (the
// page's streamed download, where the browser keeps no files). The chunks come in file order
// (PipelineOptions::file_order); this puts the header and the fixed pieces in their places and
// the gaps between pieces (alignment padding) as zeros, so the pieces it gives follow each other.
#pragma once
#include <string>
#include <vector>

#include "engine/pipeline.h"

namespace leapconv {

// Why the plan's output cannot be written front to back, or "": it must be one file, and every
// tensor one region of it, the tensors in file order (so file-order chunks write it in order).
std::string in_order_refusal(const ConversionPlan& plan);

class InOrderOutput {
 public:
  explicit InOrderOutput(const PlanFile& file);  // the plan's one file (in_order_refusal: "")
  // The stream's next pieces: what lies before p (the header, fixed pieces, zeros), then p.
  // Throws when p starts before the stream's end (chunks not in file order).
  void put(const OutputPiece& p, std::vector<OutputPiece>& out);
  void finish(std::vector<OutputPiece>& out);  // the rest of the file: zeros and fixed pieces

 private:
  void fill_to(int64_t offset, std::vector<OutputPiece>& out);

  const PlanFile& file_;
  std::vector<const FixedPiece*> fixed_;  // by offset
  size_t next_fixed_ = 0;
  int64_t at_ = 0;  // bytes given so far
};

}  // namespace leapconv
