// WeightBinder: how a model's module tree meets its parameters.
//
// Every block (Linear, ResnetBlock2D, the UNet, ...) declares its parameters
// by calling bind(name, shape, init) with the diffusers/transformers state-dict
// key. The same declaration code then serves three purposes:
//  - WeightLoader binds each name to a tensor of a WeightSource, checks the
//    shape, converts to the model's precision and uploads it to a Backend;
//  - SpecRecorder only records (name, shape, init): the parameter list of a
//    config, used to generate synthetic weights and to export them;
//  - a test can compare the two (every tensor of a source is used).
// So the module tree, the key names and the synthetic layout cannot drift
// apart.
//
// Ownership: WeightLoader owns the device Buffers it allocates until
// take_buffers() moves them into the model. Thread safety: none (one loader,
// one thread).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine {

// How synthetic weights initialise a parameter, as PyTorch's default init
// does for the module that owns it.
struct ParamInit {
  enum class Kind : uint8_t {
    kUniformFanIn = 0,  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)): Linear/Conv weight and bias
    kOnes = 1,          // norm weight
    kZeros = 2,         // norm bias
    kNormal = 3,        // N(0, std^2): embeddings
  };
  Kind kind = Kind::kZeros;
  int64_t fan_in = 1;
  float std = 0.02f;

  static ParamInit uniform_fan_in(int64_t fan_in) { return {Kind::kUniformFanIn, fan_in, 0.0f}; }
  static ParamInit ones() { return {Kind::kOnes, 1, 0.0f}; }
  static ParamInit zeros() { return {Kind::kZeros, 1, 0.0f}; }
  static ParamInit normal(float std) { return {Kind::kNormal, 1, std}; }
};

// How a parameter sits on the device when not as stored. SpecRecorder (and so
// synthetic weights and exports) always sees the stored layout.
enum class ParamLayout : uint8_t {
  kAsStored = 0,
  // The two halves of dim 0 of an [R, ...] tensor interleaved: device row 2j is
  // stored row j, device row 2j + 1 stored row R/2 + j. GEGLU's projection
  // (value rows, then gate rows) so, the (value, gate) pair of each output
  // lands side by side in one GEMM tile (MatmulOptions::geglu_pairs).
  kInterleavedHalves = 1,
};

// Which fp8 form a loader with its fp8 weights on may give a parameter
// (WeightBinder::bind_fp8 / bind_fp8_conv asked for it before binding it):
// kRows a Linear / GEGLU weight (e4m3 codes and a scale a row), kConv a
// stride-1 convolution's (kernels::Fp8ConvWeight, where the loader's Fp8Convs
// takes it: takes_fp8_conv). What memory plans count it at.
enum class Fp8Form : uint8_t { kNone = 0, kRows = 1, kConv = 2 };

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  ParamInit init;
  Fp8Form fp8 = Fp8Form::kNone;
  // Parts bound as one device tensor (bind_stacked; bind_fp8 of several
  // names), stacked on dim 0: their count on the first part, 0 on the others;
  // 1 for a parameter bound alone.
  int32_t stack = 1;
};

// Where the source's tensors of one bound parameter live on the device: what
// WeightLoader::rewrite writes again in place (a LoRA switch,
// engine/lora/lora_rebind.h). `names` (prefix applied), each of `part_shape`,
// stacked on dim 0 in this order; `tensor` the device tensor in the model's
// dtype, or, when the binder made the fp8 form, `fp8` (codes and row scales;
// `fp8_conv` for a convolution's weight) and `tensor` its codes.
struct BoundParam {
  std::vector<std::string> names;
  std::vector<int64_t> part_shape;
  ParamLayout layout = ParamLayout::kAsStored;
  kernels::Tensor tensor;
  std::optional<kernels::Fp8Rows> fp8;
  std::optional<kernels::Fp8ConvWeight> fp8_conv;
};

class WeightBinder {
 public:
  virtual ~WeightBinder() = default;
  // The parameter `name` as a tensor of `shape` in the model's precision.
  // NotFound naming the source when the source lacks it; InvalidArgument
  // naming both shapes when it has another shape.
  virtual Result<kernels::Tensor> bind(const std::string& name, const std::vector<int64_t>& shape,
                                       const ParamInit& init, ParamLayout layout) = 0;
  Result<kernels::Tensor> bind(const std::string& name, const std::vector<int64_t>& shape,
                               const ParamInit& init) {
    return bind(name, shape, init, ParamLayout::kAsStored);
  }
  // Parameters stored apart that the device holds as one tensor: the named
  // tensors, each of `part_shape`, stacked along dim 0 in the order given, so
  // [names.size() * part_shape[0], part_shape[1], ...]. The q, k and v
  // projections of a self-attention so become one GEMM. Errors as bind's,
  // naming the part. SpecRecorder records each part under its own name.
  virtual Result<kernels::Tensor> bind_stacked(const std::vector<std::string>& names,
                                               const std::vector<int64_t>& part_shape,
                                               const ParamInit& init) = 0;
  // Whether an optional parameter exists (e.g. a bias some checkpoints drop).
  virtual bool has(const std::string& name) const = 0;
  // A Linear layer's weight [rows, in] (one name, or several stacked as
  // bind_stacked stacks them; `layout` as bind's) in its fp8 form when this
  // binder makes one (a WeightLoader with fp8 linear layers: e4m3 codes and
  // one scale a row, kernels::Backend::quantize_fp8_rows of the 16-bit
  // weight, the 16-bit weight not kept); nullopt otherwise, and the caller
  // binds the 16-bit weight. Errors as bind's.
  virtual Result<std::optional<kernels::Fp8Rows>> bind_fp8(const std::vector<std::string>& /*names*/,
                                                           const std::vector<int64_t>& /*part_shape*/,
                                                           const ParamInit& /*init*/, ParamLayout /*layout*/) {
    return std::optional<kernels::Fp8Rows>();
  }
  // A stride-1 convolution's weight [O, C, kh, kw] in its fp8 form when this
  // binder makes one (the same binders as bind_fp8: kernels::Fp8ConvWeight,
  // made by kernels::make_fp8_conv_weight from the 16-bit weight, which is
  // not kept); nullopt otherwise, and the caller binds the 16-bit weight.
  virtual Result<std::optional<kernels::Fp8ConvWeight>> bind_fp8_conv(const std::string& /*name*/,
                                                                      const std::vector<int64_t>& /*shape*/,
                                                                      const ParamInit& /*init*/) {
    return std::optional<kernels::Fp8ConvWeight>();
  }
};

// Records the parameters a config declares; bind() returns an empty tensor.
// bind_fp8 / bind_fp8_conv make no fp8 form (the caller then binds the
// 16-bit weight) but mark the names asked: their specs' `fp8`.
class SpecRecorder : public WeightBinder {
 public:
  using WeightBinder::bind;
  Result<kernels::Tensor> bind(const std::string& name, const std::vector<int64_t>& shape,
                               const ParamInit& init, ParamLayout layout) override;
  Result<kernels::Tensor> bind_stacked(const std::vector<std::string>& names,
                                       const std::vector<int64_t>& part_shape,
                                       const ParamInit& init) override;
  bool has(const std::string&) const override { return true; }
  Result<std::optional<kernels::Fp8Rows>> bind_fp8(const std::vector<std::string>& names,
                                                   const std::vector<int64_t>& part_shape, const ParamInit& init,
                                                   ParamLayout layout) override;
  Result<std::optional<kernels::Fp8ConvWeight>> bind_fp8_conv(const std::string& name,
                                                              const std::vector<int64_t>& shape,
                                                              const ParamInit& init) override;
  const std::vector<ParamSpec>& specs() const { return specs_; }
  std::vector<ParamSpec> take_specs() { return std::move(specs_); }

 private:
  Fp8Form asked_form(const std::string& name) const;
  std::vector<ParamSpec> specs_;
  std::set<std::string> fp8_rows_, fp8_convs_;
};

// Which convolutions an fp8 UNet takes in e4m3: kAligned (the default)
// those whose e4m3 k-tiles need no padding and whose product pays for
// quantizing the input: 3x3 kernels over a multiple of 128 channels
// (docs/kernels.md "fp8"); kAll every one asked; kOff none.
enum class Fp8Convs { kOff, kAligned, kAll };
// Whether `which` takes the conv weight of `shape` [O, C, kh, kw] in fp8.
bool takes_fp8_conv(Fp8Convs which, const std::vector<int64_t>& shape);
// The setting of HIPQ_FP8_CONVS (all | aligned | off; unset: kAligned), for
// measurements and parity runs; InvalidArgument for another value. Read by
// the pipeline once, when it loads a model in fp8 (ModelShapes::fp8_convs).
Result<Fp8Convs> fp8_convs_from_env();

// The weights a loader makes e4m3 forms of (the precision fp8; the backend
// must have fp8 products, BackendInfo): with `on`, every Linear / GEGLU
// weight bind_fp8 is asked for and the convolutions `convs` takes of those
// bind_fp8_conv is asked for. Off: every weight in the model's dtype.
struct Fp8Weights {
  bool on = false;
  Fp8Convs convs = Fp8Convs::kOff;
};

// Binds names to a WeightSource's tensors, uploaded to `backend` in `dtype`.
class WeightLoader : public WeightBinder {
 public:
  // `prefix` is prepended to every name (e.g. "" for diffusers folders).
  // `fp8`: which weights bind_fp8 and bind_fp8_conv make e4m3 forms of.
  WeightLoader(const WeightSource& source, kernels::Backend& backend, kernels::DType dtype,
               std::string prefix = {}, Fp8Weights fp8 = {});
  using WeightBinder::bind;
  Result<kernels::Tensor> bind(const std::string& name, const std::vector<int64_t>& shape,
                               const ParamInit& init, ParamLayout layout) override;
  Result<kernels::Tensor> bind_stacked(const std::vector<std::string>& names,
                                       const std::vector<int64_t>& part_shape,
                                       const ParamInit& init) override;
  bool has(const std::string& name) const override;
  Result<std::optional<kernels::Fp8Rows>> bind_fp8(const std::vector<std::string>& names,
                                                   const std::vector<int64_t>& part_shape, const ParamInit& init,
                                                   ParamLayout layout) override;
  Result<std::optional<kernels::Fp8ConvWeight>> bind_fp8_conv(const std::string& name,
                                                              const std::vector<int64_t>& shape,
                                                              const ParamInit& init) override;

  // Names of the source never bound (ignoring known non-parameters such as
  // position_ids buffers): a sign of a wrong config.
  std::vector<std::string> unused_names() const;
  int64_t bytes_loaded() const { return bytes_; }
  std::vector<kernels::Buffer> take_buffers() { return std::move(buffers_); }
  // Every parameter bound so far, in binding order.
  std::vector<BoundParam> take_bound() { return std::move(bound_); }

  // Writes part `part` of `param` (bound by a loader of the same dtype and
  // fp8 setting, its memory still alive) again from this loader's source, by
  // the path bind() took: the same cast on the backend, the same layout, the
  // fp8 codes and scales of that part's rows made again (row-wise, so the
  // other parts' rows are untouched). Then tells the backend the block
  // changed (Backend::constant_changed). Device scratch: that part's staging
  // (its stored bytes; a 16-bit copy for fp8), one at a time (handed back to
  // the pool in the stream's order). Does not wait for the device: the
  // caller synchronizes once after its rewrites (lora::rebind_weights).
  // Errors as bind's; InvalidArgument for a part past the names.
  Status rewrite(const BoundParam& param, size_t part);
  // Host-clock milliseconds this loader has spent fetching tensors from its
  // source (reads, device hand-overs and merges: WeightSource::get_on_device).
  double fetch_ms() const { return fetch_ms_; }

 private:
  // A stored tensor as the source hands it over: on the device when the
  // source makes it there (WeightSource::get_on_device), else on the host.
  struct Staged {
    HostTensor host;
    std::optional<DeviceWeight> device;
    kernels::DType dtype() const { return device ? device->tensor.dtype : host.dtype; }
    int64_t numel() const { return device ? device->tensor.numel() : host.numel(); }
  };
  // The tensor `name` (prefix applied), checked against `shape`.
  Result<Staged> fetch(const std::string& name, const std::vector<int64_t>& shape) const;
  // Writes `w` into `dst` (same shape) in dst's dtype, casting on the backend.
  Status upload(const Staged& w, kernels::Tensor dst);
  // Takes `buf` as a parameter block: counted, promised constant, kept.
  void keep(kernels::Buffer buf, int64_t bytes);
  // Keeps an fp8 form's codes and scales (their bytes as allocated).
  void keep_fp8(kernels::Buffer codes, kernels::Buffer scales);
  // `w` (the stored tensor `name`, fetched) in a new block of `shape` in the
  // model's dtype, laid out as `layout` says, not kept: what load() hands
  // over, and the 16-bit weight a rewrite makes an fp8 form's codes from again.
  Result<kernels::Buffer> sixteen_bit(const Staged& w, const std::string& name, ParamLayout layout,
                                      const std::vector<int64_t>& shape);
  // The parameter `name` (`names` stacked) on the device in the model's
  // dtype, in a buffer not yet kept: what bind / bind_stacked keep.
  Result<kernels::Buffer> load(const std::string& local, const std::vector<int64_t>& shape, ParamLayout layout);
  // `host` (the stored tensor `name`, fetched) into `dst` (its shape, the
  // model's dtype), laid out as `layout` says.
  Status write(const Staged& w, const std::string& name, ParamLayout layout, kernels::Tensor dst);
  Result<kernels::Buffer> load_stacked(const std::vector<std::string>& locals, const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& part_shape);

  const WeightSource& source_;
  kernels::Backend& backend_;
  kernels::DType dtype_;
  std::string prefix_;
  Fp8Weights fp8_;
  std::set<std::string> used_;
  std::vector<kernels::Buffer> buffers_;
  std::vector<BoundParam> bound_;
  int64_t bytes_ = 0;
  mutable double fetch_ms_ = 0;
};

// The parameters of a model are bound under "prefix." + local name.
inline std::string join_key(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

}  // namespace hipq::engine
