// safetensors: the weight file format (https://github.com/huggingface/safetensors),
// read through mmap and written atomically. Layout: docs/safetensors.md.
//
// SafetensorsFile::open maps the file read-only and validates the whole header
// before anything is returned: the 8-byte header length is checked against the
// file size before the JSON is parsed, every tensor's dtype must be known, its
// byte range must lie inside the data section, match numel * dtype size and
// not overlap another tensor. Every error names the file and, where there is
// one, the tensor (Corruption for a malformed file, IOError when the OS refuses,
// Unimplemented for a dtype hipq does not load, NotFound for a missing name).
//
// Ownership: HostTensors returned by get() point into the mapping and hold it
// alive through `keepalive`, so they stay valid after the SafetensorsFile is
// gone. Thread safety: a SafetensorsFile is immutable after open(); all const
// methods may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace hipq::engine {

// A read-only tensor in host memory: a view plus whatever keeps it alive
// (a file mapping, a std::vector). Copying a HostTensor shares the memory.
struct HostTensor {
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<const void> keepalive;

  int64_t numel() const;
  // A contiguous Location::kHost view (the cpu backend can read it; never write
  // through it when it comes from a file: the mapping is read-only).
  kernels::Tensor view() const;
  // "[320, 4, 3, 3] f16" for messages.
  std::string describe() const;
  // Element values converted to fp32 (f32/f16/bf16/i32/i64/u8/f64).
  std::vector<float> to_f32() const;

  // A zero-filled tensor that owns its memory (held in a std::vector); its
  // bytes may be written through mutable_data() until it is shared.
  static HostTensor owned(kernels::DType dtype, std::vector<int64_t> shape);
  // Takes `values` (numel must equal the product of `shape`; HIPQ_CHECKed).
  static HostTensor from_f32(std::vector<float> values, std::vector<int64_t> shape);
  // Writable pointer for tensors made by owned(); nullptr otherwise.
  void* mutable_data() const { return mutable_ ? const_cast<void*>(data) : nullptr; }

 private:
  bool mutable_ = false;
};

// Where a tensor lives in a safetensors file (offsets from the file start).
struct TensorInfo {
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

// "F32" -> kF32 etc. (F32, F16, BF16, F64, I64, I32, U8). nullopt for others.
std::optional<kernels::DType> safetensors_dtype_from_string(std::string_view s);
std::string_view safetensors_dtype_string(kernels::DType t);

class SafetensorsFile {
 public:
  static Result<std::shared_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  uint64_t file_size() const { return size_; }
  // Tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(std::string_view name) const;
  Result<TensorInfo> info(std::string_view name) const;
  // A zero-copy view into the mapping.
  Result<HostTensor> get(std::string_view name) const;
  // The header's "__metadata__" (string to string), empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  uint64_t size_ = 0;
  std::shared_ptr<const void> mapping_;  // base of the mmap, unmapped when the last user goes
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (in the given order, names unique) with `metadata` as
// "__metadata__", atomically (write_file_atomic). InvalidArgument for a
// duplicate/empty name or a tensor whose nbytes disagree with its shape.
Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, HostTensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
// The bytes write_safetensors writes (for tests and hashing).
Result<std::string> serialize_safetensors(const std::vector<std::pair<std::string, HostTensor>>& tensors,
                                          const std::map<std::string, std::string>& metadata = {});

}  // namespace hipq::engine
