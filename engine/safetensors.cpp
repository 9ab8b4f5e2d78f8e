#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/fs.h"

namespace hipq::engine {
namespace {

using kernels::DType;

// A header this large is not a weight file (the format caps it at 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string where(const std::filesystem::path& p) { return "safetensors file '" + p.string() + "'"; }
std::string where(const std::filesystem::path& p, std::string_view tensor) {
  return where(p) + ", tensor '" + std::string(tensor) + "'";
}

// Product of dims with overflow detection; nullopt when negative or overflowing.
std::optional<uint64_t> checked_numel(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

struct Mapping {
  void* base = nullptr;
  size_t size = 0;
};

}  // namespace

// ---- HostTensor ------------------------------------------------------------

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

kernels::Tensor HostTensor::view() const {
  return kernels::Tensor::contiguous(const_cast<void*>(data), dtype, shape, kernels::Location::kHost);
}

std::string HostTensor::describe() const {
  return shape_string(shape) + " " + std::string(kernels::dtype_name(dtype));
}

std::vector<float> HostTensor::to_f32() const {
  const int64_t n = numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (dtype == DType::kF32) {
    std::memcpy(out.data(), data, static_cast<size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = kernels::load_as_f32(data, dtype, i);
  }
  return out;
}

HostTensor HostTensor::owned(DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const auto n = checked_numel(t.shape);
  HIPQ_CHECK(n.has_value());
  t.nbytes = static_cast<size_t>(*n) * kernels::dtype_size(dtype);
  // 8-byte words keep every dtype aligned.
  auto storage = std::make_shared<std::vector<uint64_t>>((t.nbytes + 7) / 8, 0);
  t.data = storage->data();
  t.keepalive = storage;
  t.mutable_ = true;
  return t;
}

HostTensor HostTensor::from_f32(std::vector<float> values, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  HIPQ_CHECK(static_cast<size_t>(t.numel()) == values.size());
  auto storage = std::make_shared<std::vector<float>>(std::move(values));
  t.data = storage->data();
  t.nbytes = storage->size() * 4;
  t.keepalive = storage;
  t.mutable_ = true;
  return t;
}

// ---- dtypes -----------------------------------------------------------------

std::optional<DType> safetensors_dtype_from_string(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  if (s == "F64") return DType::kF64;
  if (s == "I64") return DType::kI64;
  if (s == "I32") return DType::kI32;
  if (s == "U8") return DType::kU8;
  return std::nullopt;
}

std::string_view safetensors_dtype_string(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kU8: return "U8";
  }
  return "?";
}

// ---- reading ----------------------------------------------------------------

SafetensorsFile::~SafetensorsFile() = default;

Result<std::shared_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string m = "cannot open " + where(path) + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound(m) : Status::IOError(m);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IOError("cannot stat " + where(path) + ": " + std::strerror(err));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::Corruption(where(path) + " is " + std::to_string(size) +
                              " bytes, shorter than the 8-byte header length: truncated or not a safetensors file");
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (base == MAP_FAILED) return Status::IOError("cannot mmap " + where(path) + ": " + std::strerror(map_err));
  std::shared_ptr<const void> mapping(base, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });

  const auto* bytes = static_cast<const unsigned char*>(base);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little-endian u64
  if (header_len > size - 8) {
    return Status::Corruption(where(path) + ": header length " + std::to_string(header_len) +
                              " runs past the end of the file (" + std::to_string(size) +
                              " bytes): truncated file or not a safetensors file");
  }
  if (header_len > kMaxHeaderBytes) {
    return Status::Corruption(where(path) + ": header length " + std::to_string(header_len) +
                              " exceeds the 100 MB limit of the format");
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(bytes + 8),
                                   reinterpret_cast<const char*>(bytes + 8 + header_len));
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(where(path) + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::Corruption(where(path) + ": header is not a JSON object");

  auto file = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  file->path_ = path;
  file->size_ = size;
  file->mapping_ = mapping;

  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Status::Corruption(where(path) + ": \"__metadata__\" is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return Status::Corruption(where(path) + ": \"__metadata__\" value of '" + m.key() + "' is not a string");
        file->metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      return Status::Corruption(where(path, name) + ": entry needs \"dtype\", \"shape\" and \"data_offsets\"");
    const auto& jd = v["dtype"];
    const auto& js = v["shape"];
    const auto& jo = v["data_offsets"];
    if (!jd.is_string()) return Status::Corruption(where(path, name) + ": \"dtype\" is not a string");
    const std::string dtype_str = jd.get<std::string>();
    const auto dtype = safetensors_dtype_from_string(dtype_str);
    if (!dtype)
      return Status::Unimplemented(where(path, name) + ": dtype '" + dtype_str +
                                   "' is not supported (supported: F32, F16, BF16, F64, I64, I32, U8)");
    if (!js.is_array()) return Status::Corruption(where(path, name) + ": \"shape\" is not an array");
    TensorInfo info;
    info.dtype = *dtype;
    for (const auto& d : js) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        return Status::Corruption(where(path, name) + ": \"shape\" must hold non-negative integers");
      info.shape.push_back(d.get<int64_t>());
    }
    if (info.shape.size() > static_cast<size_t>(kernels::kMaxDims))
      return Status::Unimplemented(where(path, name) + ": " + std::to_string(info.shape.size()) +
                                   " dimensions (at most " + std::to_string(kernels::kMaxDims) + ")");
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
      return Status::Corruption(where(path, name) + ": \"data_offsets\" must be [begin, end] (non-negative)");
    const uint64_t b = jo[0].get<uint64_t>();
    const uint64_t e = jo[1].get<uint64_t>();
    if (b > e) return Status::Corruption(where(path, name) + ": data_offsets begin > end");
    if (e > data_size)
      return Status::Corruption(where(path, name) + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                                "] run past the end of the data section (" + std::to_string(data_size) +
                                " bytes): truncated file");
    const auto numel = checked_numel(info.shape);
    if (!numel || *numel > std::numeric_limits<uint64_t>::max() / kernels::dtype_size(info.dtype))
      return Status::Corruption(where(path, name) + ": shape " + shape_string(info.shape) + " overflows");
    const uint64_t expect = *numel * kernels::dtype_size(info.dtype);
    if (e - b != expect)
      return Status::Corruption(where(path, name) + ": " + std::to_string(e - b) + " bytes for shape " +
                                shape_string(info.shape) + " " + dtype_str + " (expected " + std::to_string(expect) +
                                ")");
    info.offset = data_start + b;
    info.nbytes = expect;
    if (expect > 0) ranges.push_back({b, e, name});
    file->tensors_.emplace(name, std::move(info));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end)
      return Status::Corruption(where(path, ranges[i].name) + ": data overlaps tensor '" + ranges[i - 1].name + "'");
  }
  return file;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

bool SafetensorsFile::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Result<TensorInfo> SafetensorsFile::info(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::NotFound(where(path_, name) + ": no such tensor");
  return it->second;
}

Result<HostTensor> SafetensorsFile::get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::NotFound(where(path_, name) + ": no such tensor");
  HostTensor t;
  t.dtype = it->second.dtype;
  t.shape = it->second.shape;
  t.data = static_cast<const unsigned char*>(mapping_.get()) + it->second.offset;
  t.nbytes = it->second.nbytes;
  t.keepalive = mapping_;
  return t;
}

// ---- writing ----------------------------------------------------------------

Result<std::string> serialize_safetensors(const std::vector<std::pair<std::string, HostTensor>>& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__")
      return Status::InvalidArgument("safetensors writer: invalid tensor name '" + name + "'");
    if (!seen.insert(name).second)
      return Status::InvalidArgument("safetensors writer: tensor '" + name + "' given twice");
    const auto numel = checked_numel(t.shape);
    if (!numel || *numel * kernels::dtype_size(t.dtype) != t.nbytes)
      return Status::InvalidArgument("safetensors writer: tensor '" + name + "' has " + std::to_string(t.nbytes) +
                                     " bytes for " + t.describe());
    if (t.nbytes > 0 && t.data == nullptr)
      return Status::InvalidArgument("safetensors writer: tensor '" + name + "' has no data");
    header[name] = {{"dtype", safetensors_dtype_string(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string json = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned (the format allows it).
  while ((json.size() + 8) % 8 != 0) json.push_back(' ');
  std::string out;
  out.reserve(8 + json.size() + offset);
  const uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  out += json;
  for (const auto& [name, t] : tensors) out.append(static_cast<const char*>(t.data), t.nbytes);
  return out;
}

Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<std::string, HostTensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto bytes = serialize_safetensors(tensors, metadata);
  if (!bytes.ok()) return bytes.status().WithContext(path.string());
  return write_file_atomic(path, *bytes);
}

}  // namespace hipq::engine
