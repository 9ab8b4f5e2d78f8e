#include "engine/models/weight_binder.h"

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "kernels/fp8_conv_weight.h"

namespace hipq::engine {

using kernels::DType;
using kernels::Tensor;

namespace {
std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// Buffers the model never reads as parameters.
bool is_ignorable(const std::string& name) {
  return name.ends_with("position_ids");
}
// A tensor of `shape` with no memory: what SpecRecorder binds.
Tensor shape_only(const std::vector<int64_t>& shape) {
  Tensor t;
  t.ndim = static_cast<int>(shape.size());
  for (int d = 0; d < t.ndim; ++d) t.shape[d] = shape[d];
  return t;
}

// The shape of `parts` tensors of `part_shape` stacked on dim 0.
Result<std::vector<int64_t>> stacked_shape(size_t parts, const std::vector<int64_t>& part_shape) {
  if (parts == 0 || part_shape.empty())
    return Status::InvalidArgument("bind_stacked: no parts, or parts without a first dim");
  std::vector<int64_t> shape = part_shape;
  shape[0] *= static_cast<int64_t>(parts);
  return shape;
}
}  // namespace

Result<Tensor> SpecRecorder::bind(const std::string& name, const std::vector<int64_t>& shape,
                                  const ParamInit& init, ParamLayout) {
  specs_.push_back({name, shape, init, asked_form(name)});
  return shape_only(shape);
}

Fp8Form SpecRecorder::asked_form(const std::string& name) const {
  if (fp8_rows_.count(name) != 0) return Fp8Form::kRows;
  if (fp8_convs_.count(name) != 0) return Fp8Form::kConv;
  return Fp8Form::kNone;
}

Result<std::optional<kernels::Fp8Rows>> SpecRecorder::bind_fp8(const std::vector<std::string>& names,
                                                               const std::vector<int64_t>&, const ParamInit&,
                                                               ParamLayout) {
  fp8_rows_.insert(names.begin(), names.end());
  return std::optional<kernels::Fp8Rows>();
}

Result<std::optional<kernels::Fp8ConvWeight>> SpecRecorder::bind_fp8_conv(const std::string& name,
                                                                          const std::vector<int64_t>&,
                                                                          const ParamInit&) {
  fp8_convs_.insert(name);
  return std::optional<kernels::Fp8ConvWeight>();
}

WeightLoader::WeightLoader(const WeightSource& source, kernels::Backend& backend, DType dtype,
                           std::string prefix, Fp8Weights fp8)
    : source_(source), backend_(backend), dtype_(dtype), prefix_(std::move(prefix)), fp8_(fp8) {}

bool WeightLoader::has(const std::string& name) const { return source_.contains(prefix_ + name); }

Result<Tensor> SpecRecorder::bind_stacked(const std::vector<std::string>& names,
                                          const std::vector<int64_t>& part_shape, const ParamInit& init) {
  HIPQ_ASSIGN_OR_RETURN(std::vector<int64_t> shape, stacked_shape(names.size(), part_shape));
  for (const std::string& n : names)
    specs_.push_back({n, part_shape, init, asked_form(n), n == names.front() ? static_cast<int32_t>(names.size()) : 0});
  return shape_only(shape);
}

Result<WeightLoader::Staged> WeightLoader::fetch(const std::string& name, const std::vector<int64_t>& shape) const {
  Staged w;
  const auto start = std::chrono::steady_clock::now();
  HIPQ_ASSIGN_OR_RETURN(w.device, source_.get_on_device(name, backend_));
  const std::vector<int64_t> got = w.device ? w.device->tensor.shape_vec() : std::vector<int64_t>();
  if (!w.device) {
    HIPQ_ASSIGN_OR_RETURN(w.host, source_.get(name));
  }
  fetch_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::vector<int64_t>& have = w.device ? got : w.host.shape;
  if (have != shape) {
    return Status::InvalidArgument(source_.describe() + ": tensor '" + name + "' has shape " +
                                   shape_str(have) + " but the model config expects " +
                                   shape_str(shape) + " (does config.json match these weights?)");
  }
  if (!kernels::is_float(w.dtype()) || w.dtype() == DType::kF64) {
    return Status::InvalidArgument(source_.describe() + ": tensor '" + name + "' has dtype " +
                                   std::string(kernels::dtype_name(w.dtype())) +
                                   "; weights must be f32, f16 or bf16");
  }
  if (w.device && !w.device->tensor.is_contiguous())
    return Status::Internal(source_.describe() + ": tensor '" + name + "' came on the device as a strided view");
  return w;
}

Status WeightLoader::upload(const Staged& w, Tensor dst) {
  if (w.device) {
    // Made on the device (engine/lora/): the cast (or a copy) from there.
    const Tensor& src = w.device->tensor;
    // No wait: no host memory is read, and the source block goes back to the
    // pool, which orders its next use after this copy on the single stream.
    if (src.dtype == dst.dtype && dst.is_contiguous()) return backend_.copy_device(src.data, dst.data, src.nbytes());
    return backend_.copy(src, dst);
  }
  const HostTensor& host = w.host;
  if (host.dtype == dtype_) return backend_.copy_to_device(host.data, dst.data, host.nbytes);
  // Cast on the backend: one upload of the stored bytes, no host pass.
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer staging, backend_.allocate(host.nbytes));
  Tensor src = staging.tensor(host.dtype, dst.shape_vec());
  HIPQ_RETURN_IF_ERROR(backend_.copy_to_device(host.data, src.data, host.nbytes));
  HIPQ_RETURN_IF_ERROR(backend_.copy(src, dst));
  // The staging buffer goes back to the pool at scope end; the copy above
  // is ordered before any later use of that memory on the single stream.
  return backend_.synchronize();
}

void WeightLoader::keep(kernels::Buffer buf, int64_t bytes) {
  bytes_ += bytes;
  backend_.hold_constant(buf.data(), buf.bytes());  // parameters never change once bound
  buffers_.push_back(std::move(buf));
}

void WeightLoader::keep_fp8(kernels::Buffer codes, kernels::Buffer scales) {
  const auto code_bytes = static_cast<int64_t>(codes.bytes()), scale_bytes = static_cast<int64_t>(scales.bytes());
  keep(std::move(codes), code_bytes);
  keep(std::move(scales), scale_bytes);
}

Result<kernels::Buffer> WeightLoader::sixteen_bit(const Staged& w, const std::string& name, ParamLayout layout,
                                                  const std::vector<int64_t>& shape) {
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer weight, backend_.allocate(w.numel() * kernels::dtype_size(dtype_)));
  HIPQ_RETURN_IF_ERROR(write(w, name, layout, weight.tensor(dtype_, shape)));
  return weight;
}

Status WeightLoader::write(const Staged& w, const std::string& name, ParamLayout layout, Tensor dst) {
  const std::vector<int64_t> shape = dst.shape_vec();
  if (layout != ParamLayout::kInterleavedHalves) return upload(w, dst);
  if (shape.empty() || shape[0] % 2 != 0) {
    return Status::InvalidArgument(source_.describe() + ": tensor '" + name + "' of shape " + shape_str(shape) +
                                   " cannot have its halves interleaved: dim 0 must be even");
  }
  // As stored on the device (uploaded, or made there), then one strided copy
  // (with the cast): [2, R/2, rest] read as [R/2, 2, rest].
  kernels::Buffer staging;
  Tensor src;
  if (w.device) {
    src = w.device->tensor;
  } else {
    HIPQ_ASSIGN_OR_RETURN(staging, backend_.allocate(w.host.nbytes));
    src = staging.tensor(w.host.dtype, shape);
    HIPQ_RETURN_IF_ERROR(backend_.copy_to_device(w.host.data, src.data, w.host.nbytes));
  }
  const int64_t half = shape[0] / 2;
  const int64_t rest = w.numel() / shape[0];
  Tensor halves = src.reshape({2, half, rest}).permute({1, 0, 2});
  Tensor pairs = dst.reshape({half, 2, rest});
  HIPQ_RETURN_IF_ERROR(backend_.copy(halves, pairs));
  return w.device ? Status::Ok() : backend_.synchronize();
}

Result<kernels::Buffer> WeightLoader::load(const std::string& local, const std::vector<int64_t>& shape,
                                           ParamLayout layout) {
  const std::string name = prefix_ + local;
  HIPQ_ASSIGN_OR_RETURN(Staged host, fetch(name, shape));
  if (layout == ParamLayout::kInterleavedHalves && (shape.empty() || shape[0] % 2 != 0)) {
    return Status::InvalidArgument(source_.describe() + ": tensor '" + name + "' of shape " + shape_str(shape) +
                                   " cannot have its halves interleaved: dim 0 must be even");
  }
  used_.insert(name);
  return sixteen_bit(host, name, layout, shape);
}

Result<Tensor> WeightLoader::bind(const std::string& local, const std::vector<int64_t>& shape,
                                  const ParamInit&, ParamLayout layout) {
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer buf, load(local, shape, layout));
  Tensor dst = buf.tensor(dtype_, shape);
  keep(std::move(buf), static_cast<int64_t>(dst.nbytes()));
  bound_.push_back({{prefix_ + local}, shape, layout, dst, std::nullopt, std::nullopt});
  return dst;
}

Result<kernels::Buffer> WeightLoader::load_stacked(const std::vector<std::string>& locals,
                                                   const std::vector<int64_t>& shape,
                                                   const std::vector<int64_t>& part_shape) {
  // Every part is checked before anything is allocated or uploaded.
  std::vector<Staged> parts;
  parts.reserve(locals.size());
  for (const std::string& local : locals) {
    HIPQ_ASSIGN_OR_RETURN(Staged host, fetch(prefix_ + local, part_shape));
    parts.push_back(std::move(host));
  }
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer buf, backend_.allocate(static_cast<size_t>(parts[0].numel()) *
                                                               parts.size() * kernels::dtype_size(dtype_)));
  Tensor dst = buf.tensor(dtype_, shape);
  for (size_t i = 0; i < parts.size(); ++i) {
    HIPQ_RETURN_IF_ERROR(
        upload(parts[i], dst.slice(0, static_cast<int64_t>(i) * part_shape[0], part_shape[0])));
    used_.insert(prefix_ + locals[i]);
  }
  return buf;
}

Result<Tensor> WeightLoader::bind_stacked(const std::vector<std::string>& locals,
                                          const std::vector<int64_t>& part_shape, const ParamInit&) {
  HIPQ_ASSIGN_OR_RETURN(std::vector<int64_t> shape, stacked_shape(locals.size(), part_shape));
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer buf, load_stacked(locals, shape, part_shape));
  Tensor dst = buf.tensor(dtype_, shape);
  keep(std::move(buf), static_cast<int64_t>(dst.nbytes()));
  BoundParam bound{{}, part_shape, ParamLayout::kAsStored, dst, std::nullopt, std::nullopt};
  for (const std::string& local : locals) bound.names.push_back(prefix_ + local);
  bound_.push_back(std::move(bound));
  return dst;
}

Result<std::optional<kernels::Fp8Rows>> WeightLoader::bind_fp8(const std::vector<std::string>& locals,
                                                               const std::vector<int64_t>& part_shape,
                                                               const ParamInit&, ParamLayout layout) {
  if (!fp8_.on) return std::optional<kernels::Fp8Rows>();
  HIPQ_ASSIGN_OR_RETURN(std::vector<int64_t> shape, stacked_shape(locals.size(), part_shape));
  if (shape.size() != 2)
    return Status::InvalidArgument("bind_fp8: '" + prefix_ + locals[0] + "' is no [rows, in] Linear weight: " +
                                   shape_str(shape));
  kernels::Buffer weight;
  if (locals.size() == 1) {
    HIPQ_ASSIGN_OR_RETURN(weight, load(locals[0], shape, layout));
  } else {
    HIPQ_ASSIGN_OR_RETURN(weight, load_stacked(locals, shape, part_shape));
  }
  const int64_t rows = shape[0], in = shape[1];
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer codes, backend_.allocate(static_cast<size_t>(rows * in)));
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer scales, backend_.allocate(static_cast<size_t>(rows) * sizeof(float)));
  kernels::Fp8Rows q{codes.tensor(DType::kU8, {rows, in}), scales.tensor(DType::kF32, {rows})};
  HIPQ_RETURN_IF_ERROR(backend_.quantize_fp8_rows(weight.tensor(dtype_, shape), q.codes, q.scales));
  // The 16-bit weight goes back to the pool once the codes are made.
  HIPQ_RETURN_IF_ERROR(backend_.synchronize());
  keep_fp8(std::move(codes), std::move(scales));
  BoundParam bound{{}, part_shape, layout, q.codes, q, std::nullopt};
  for (const std::string& local : locals) bound.names.push_back(prefix_ + local);
  bound_.push_back(std::move(bound));
  return std::optional<kernels::Fp8Rows>(q);
}

bool takes_fp8_conv(Fp8Convs which, const std::vector<int64_t>& shape) {
  switch (which) {
    case Fp8Convs::kOff: return false;
    case Fp8Convs::kAll: return true;
    case Fp8Convs::kAligned:
      return shape.size() == 4 && shape[1] % kernels::kFp8ConvChannelBlock == 0 && shape[2] == 3 && shape[3] == 3;
  }
  return false;
}

Result<Fp8Convs> fp8_convs_from_env() {
  const char* env = std::getenv("HIPQ_FP8_CONVS");
  if (env == nullptr) return Fp8Convs::kAligned;
  const std::string which = env;
  if (which == "all") return Fp8Convs::kAll;
  if (which == "off") return Fp8Convs::kOff;
  if (which == "aligned") return Fp8Convs::kAligned;
  return Status::InvalidArgument("HIPQ_FP8_CONVS=" + which + ": expected all, aligned or off");
}

Result<std::optional<kernels::Fp8ConvWeight>> WeightLoader::bind_fp8_conv(const std::string& local,
                                                                          const std::vector<int64_t>& shape,
                                                                          const ParamInit&) {
  if (!fp8_.on) return std::optional<kernels::Fp8ConvWeight>();
  if (shape.size() != 4)
    return Status::InvalidArgument("bind_fp8_conv: '" + prefix_ + local +
                                   "' is no [O, C, kh, kw] conv weight: " + shape_str(shape));
  if (!takes_fp8_conv(fp8_.convs, shape)) return std::optional<kernels::Fp8ConvWeight>();
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer weight, load(local, shape, ParamLayout::kAsStored));
  const std::vector<int64_t> codes_shape = kernels::fp8_conv_codes_shape(shape);
  const int64_t O = shape[0], code_bytes = codes_shape[0] * codes_shape[1] * codes_shape[2] * codes_shape[3];
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer codes, backend_.allocate(static_cast<size_t>(code_bytes)));
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer scales, backend_.allocate(static_cast<size_t>(O) * sizeof(float)));
  kernels::Fp8ConvWeight q{codes.tensor(DType::kU8, codes_shape), scales.tensor(DType::kF32, {O})};
  HIPQ_RETURN_IF_ERROR(kernels::make_fp8_conv_weight(backend_, weight.tensor(dtype_, shape), q));
  // The 16-bit weight goes back to the pool once the codes are made.
  HIPQ_RETURN_IF_ERROR(backend_.synchronize());
  keep_fp8(std::move(codes), std::move(scales));
  BoundParam bound{{prefix_ + local}, shape, ParamLayout::kAsStored, q.codes, std::nullopt, q};
  bound_.push_back(std::move(bound));
  return std::optional<kernels::Fp8ConvWeight>(q);
}

Status WeightLoader::rewrite(const BoundParam& param, size_t part) {
  if (part >= param.names.size() || param.part_shape.empty())
    return Status::InvalidArgument("rewrite: part " + std::to_string(part) + " of a parameter of " +
                              std::to_string(param.names.size()) + " parts");
  const std::string& name = param.names[part];
  HIPQ_ASSIGN_OR_RETURN(Staged host, fetch(name, param.part_shape));
  const int64_t rows = param.part_shape[0];
  const int64_t first = static_cast<int64_t>(part) * rows;
  // A single name is the whole tensor, with its layout; a stacked part is its rows.
  const bool whole = param.names.size() == 1;
  if (param.fp8_conv) {
    // A convolution's fp8 form is one name: its 16-bit weight as bind_fp8_conv
    // made it, then its codes and scales again.
    HIPQ_ASSIGN_OR_RETURN(kernels::Buffer weight, sixteen_bit(host, name, param.layout, param.part_shape));
    HIPQ_RETURN_IF_ERROR(
        kernels::make_fp8_conv_weight(backend_, weight.tensor(dtype_, param.part_shape), *param.fp8_conv));
    backend_.constant_changed(param.fp8_conv->codes.data);
    backend_.constant_changed(param.fp8_conv->scales.data);
    return Status::Ok();
  }
  if (!param.fp8) {
    Tensor dst = whole ? param.tensor : param.tensor.slice(0, first, rows);
    HIPQ_RETURN_IF_ERROR(write(host, name, param.layout, dst));
    backend_.constant_changed(param.tensor.data);
    return Status::Ok();
  }
  // fp8: the part's 16-bit rows as bind_fp8 made them, then their codes and scales.
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer weight, sixteen_bit(host, name, param.layout, param.part_shape));
  Tensor codes = whole ? param.fp8->codes : param.fp8->codes.slice(0, first, rows);
  Tensor scales = whole ? param.fp8->scales : param.fp8->scales.slice(0, first, rows);
  HIPQ_RETURN_IF_ERROR(backend_.quantize_fp8_rows(weight.tensor(dtype_, param.part_shape), codes, scales));
  backend_.constant_changed(param.fp8->codes.data);
  backend_.constant_changed(param.fp8->scales.data);
  return Status::Ok();
}

std::vector<std::string> WeightLoader::unused_names() const {
  std::vector<std::string> out;
  for (const std::string& n : source_.names()) {
    if (!prefix_.empty() && !n.starts_with(prefix_)) continue;
    if (!used_.contains(n) && !is_ignorable(n)) out.push_back(n);
  }
  return out;
}

}  // namespace hipq::engine
