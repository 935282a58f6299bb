// safetensors reader: validate the whole header first, then hand out exact byte ranges.
// Layout: u64 header length N, N bytes of JSON, then the data (offsets relative to its start).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "source/dtype.h"

namespace leapconv {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t begin = 0;  // absolute offsets in the file (header included)
  int64_t end = 0;
  int64_t numel() const;
  int64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::string file;
  int64_t file_size = 0;
  int64_t data_start = 0;
  std::vector<TensorInfo> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
};

constexpr int64_t kMaxSafetensorsHeader = 100 * 1000 * 1000;

// Reads and validates the header of one shard; throws ConvertError naming file and tensor.
SafetensorsHeader read_safetensors_header(ByteSource& src);

std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace leapconv
