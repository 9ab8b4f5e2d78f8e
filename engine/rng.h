// Initial noise that means what `seed` means in the reference (diffusers with a
// torch.Generator).
//
// torch_randn_cpu(seed, n) is bit-exact with
//   torch.randn(n, generator=torch.Generator("cpu").manual_seed(seed))
// (mt19937, 24-bit uniform floats, Box-Muller in blocks of 16 for n >= 16 with
// the last block recomputed from fresh uniforms, the scalar double path below
// 16). The shape does not matter, only numel: randn fills contiguous memory.
// torch_randn_cpu(seed, n, kF16 | kBF16) is torch.randn(..., dtype=float16 |
// bfloat16) on the CPU generator, which diffusers draws when the pipeline runs
// in half precision: a different sequence (11 / 8 random bits per uniform,
// Box-Muller in c10::Half / c10::BFloat16 arithmetic through libm's
// logf/sinf/cosf), returned widened to float.
// torch_randn_cuda(seed, n) follows torch's CUDA generator (Philox4x32-10,
// curand_normal4, the grid layout torch uses for n on the given SM count);
// it equals torch to float rounding of the GPU's log/sincos, not bit-exactly.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kernels/dtype.h"

namespace hipq::engine {

enum class RngKind { kTorchCpu, kTorchCuda };

// "torch-cpu" | "torch-cuda"; InvalidArgument otherwise.
Result<RngKind> parse_rng_kind(std::string_view name);
std::string_view rng_kind_name(RngKind kind);

std::vector<float> torch_randn_cpu(uint64_t seed, int64_t numel);
std::vector<float> torch_randn_cpu(uint64_t seed, int64_t numel, kernels::DType dtype);
// `multiprocessors` and `max_threads_per_sm` of the GPU torch ran on (they
// decide the grid, hence the order, once n exceeds one wave); the defaults are
// an H100/H200 (132 SMs, 2048 threads).
// `philox_offset` is the generator's offset before the draw (0 for a fresh
// generator; TorchGenerator keeps it across draws).
std::vector<float> torch_randn_cuda(uint64_t seed, int64_t numel, int multiprocessors = 132,
                                    int max_threads_per_sm = 2048, uint64_t philox_offset = 0);
// How far one torch.randn of `numel` values moves the CUDA generator's offset.
uint64_t torch_cuda_offset_increment(int64_t numel, int multiprocessors = 132, int max_threads_per_sm = 2048);

// One torch.Generator, seeded once and drawn from in order: diffusers passes
// the job's generator to prepare_latents (the initial noise) and then to the
// scheduler's step(), whose stochastic samplers (Euler a, DPM++ SDE, ...) draw
// each step's noise from the same stream. randn(n, dtype) is the next
// torch.randn(n, generator=g, dtype=dtype): the CPU generator's mt19937 state
// and cached normal carry over; the CUDA generator's Philox offset advances
// as torch advances it. Thread safety: one thread at a time.
class TorchGenerator {
 public:
  TorchGenerator(RngKind kind, uint64_t seed);
  ~TorchGenerator();
  TorchGenerator(TorchGenerator&&) noexcept;
  TorchGenerator& operator=(TorchGenerator&&) noexcept;

  RngKind kind() const { return kind_; }
  // torch-cpu in `dtype` (f32, f16, bf16); torch-cuda always f32.
  std::vector<float> randn(int64_t numel, kernels::DType dtype = kernels::DType::kF32);

 private:
  struct Cpu;
  RngKind kind_;
  uint64_t seed_;
  std::unique_ptr<Cpu> cpu_;
  uint64_t philox_offset_ = 0;
};

// The initial noise for a pipeline computing in `dtype`, as diffusers draws it
// (the first draw of a fresh TorchGenerator): torch-cpu in that dtype (f32,
// f16, bf16); torch-cuda always in f32.
std::vector<float> randn(RngKind kind, uint64_t seed, int64_t numel, kernels::DType dtype = kernels::DType::kF32);

}  // namespace hipq::engine
