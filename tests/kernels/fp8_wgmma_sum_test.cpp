// The f32-output bound of the light table's matmul_fp8 cases against a model
// of how Hopper's fp8 wgmma adds. The model (the DeepSeek-V3 report's
// "about 14 bits"; CUTLASS' fast-accumulation fp8 kernels versus its
// promoting ones): one m64n128k32 instruction takes 32 exact products of
// e4m3 values and the accumulator it is handed, aligns them all to the
// largest one's exponent E, truncates each toward zero to a multiple of
// 2^(E - 13) and adds them; the sum goes back to an fp32 register. With 13
// bits the model reproduces the H200's measured error of the one-k-tile
// f32 cases (relative 1e-3 against a bound of 2e-4).
//
// For every f32 case of the table on the wgmma route (K a multiple of 16)
// it checks, with the case's own inputs, codes and tolerance, applied to
// the product before the epilogue:
//  - the kernel as gemm_wgmma_fp8.h runs it (each kFp8PromotionK of K summed
//    by the model from zero, then added in fp32) passes the bound;
//  - where K >= 1280, the kernel without promotion (the running sum handed
//    to every instruction) fails it, so the table tells the two apart.
// (Were the hardware to keep 12 bits, the promoted kernel would still pass;
// with 14, the K = 1280 case would no longer tell, the K = 5120 one would.)
// Cases whose output is not the product itself (GEGLU halves it) are left
// out; the bias, residual, alpha and activation of the others do not add
// to the accumulation error the bound is about.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "kernels/fp8_e4m3.h"
#include "parity/parity_case.h"
#include "parity/parity_runner.h"

namespace hipq::kernels::parity {
namespace {

constexpr int kKeptBits = 13;      // fraction bits kept below the largest term's leading bit
constexpr int kInstructionK = 32;  // products one wgmma k32 instruction adds
constexpr int kPromotionK = 128;   // gemm_wgmma_fp8.h: kFp8PromotionK

// acc + sum p[0..n) as the model of one instruction has it.
float instruction_sum(float acc, const double* p, int n) {
  double big = std::fabs(static_cast<double>(acc));
  for (int i = 0; i < n; ++i) big = std::max(big, std::fabs(p[i]));
  if (big == 0) return 0.0f;
  int e = 0;
  std::frexp(big, &e);  // big = f * 2^e, f in [0.5, 1): leading bit 2^(e - 1)
  const double inv_q = std::ldexp(1.0, kKeptBits - (e - 1)), q = 1.0 / inv_q;
  double s = std::trunc(static_cast<double>(acc) * inv_q);
  for (int i = 0; i < n; ++i) s += std::trunc(p[i] * inv_q);
  return static_cast<float>(s * q);
}

struct Codes {
  std::vector<double> v;      // [rows, K] decoded e4m3 values
  std::vector<float> scale;   // [rows]
};

Codes quantize(const std::vector<float>& x, int64_t rows, int64_t K) {
  Codes c;
  c.v.resize(static_cast<size_t>(rows * K));
  c.scale.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(r * K + k)]));
    const float s = fp8::row_scale(amax);
    for (int64_t k = 0; k < K; ++k)
      c.v[static_cast<size_t>(r * K + k)] = fp8::f32_from_e4m3(fp8::quantize(x[static_cast<size_t>(r * K + k)], s));
    c.scale[static_cast<size_t>(r)] = fp8::dequant_scale(s);
  }
  return c;
}

struct Verdict {
  double worst_ratio = 0;  // max |err| / bound
  double nmse = 0;
  bool pass(const Tolerance& t) const { return worst_ratio <= 1.0 && nmse <= t.nmse; }
};

TEST(Fp8WgmmaSum, F32BoundPassesPromotionAndFailsTheRunningSumAtLongK) {
  int long_k_cases = 0;
  for (const ParityCase& c : parity_cases(false)) {
    if (c.op != "matmul_fp8" || c.out_dtype != DType::kF32) continue;
    const int64_t M = c.inputs[0].alloc_shape[0], K = c.inputs[0].alloc_shape[1], N = c.inputs[1].alloc_shape[0];
    if (K % 16 != 0 || c.out_shape[1] != N) continue;  // the plain kernel's route; GEGLU
    const Codes a = quantize(make_input_values(c, 0), M, K), b = quantize(make_input_values(c, 1), N, K);
    // At most ~8192 outputs, spread over the whole output.
    const int64_t step = std::max<int64_t>(1, M * N / 8192);
    std::vector<double> exact, promoted, running;
    std::vector<double> p(kInstructionK);
    for (int64_t i = 0; i < M * N; i += step) {
      const int64_t m = i / N, n = i % N;
      const double* ar = &a.v[static_cast<size_t>(m * K)];
      const double* br = &b.v[static_cast<size_t>(n * K)];
      double sum = 0;
      float main = 0.0f, run = 0.0f;
      for (int64_t k0 = 0; k0 < K; k0 += kPromotionK) {
        float part = 0.0f;
        for (int64_t k1 = k0; k1 < std::min(K, k0 + kPromotionK); k1 += kInstructionK) {
          for (int j = 0; j < kInstructionK; ++j) {
            const int64_t k = k1 + j;  // codes past K are zero-filled
            p[static_cast<size_t>(j)] = k < K ? ar[k] * br[k] : 0.0;
            sum += p[static_cast<size_t>(j)];
          }
          part = instruction_sum(part, p.data(), kInstructionK);
          run = instruction_sum(run, p.data(), kInstructionK);
        }
        main += part;
      }
      const float sa = a.scale[static_cast<size_t>(m)], sb = b.scale[static_cast<size_t>(n)];
      exact.push_back(sum * sa * sb);
      promoted.push_back(main * sa * sb);
      running.push_back(run * sa * sb);
    }
    double ref2 = 0;
    for (double r : exact) ref2 += r * r;
    const double rms = std::sqrt(ref2 / static_cast<double>(exact.size()));
    auto judge = [&](const std::vector<double>& out) {
      Verdict v;
      double err2 = 0;
      for (size_t j = 0; j < out.size(); ++j) {
        const double err = std::fabs(out[j] - exact[j]);
        const double bound = c.tol.atol * std::max(1.0, rms) + c.tol.rtol * std::fabs(exact[j]);
        v.worst_ratio = std::max(v.worst_ratio, err / bound);
        err2 += err * err;
      }
      v.nmse = ref2 > 0 ? err2 / ref2 : err2;
      return v;
    };
    const Verdict with = judge(promoted), without = judge(running);
    std::printf("[fp8 sum model] %-55s promoted: err/bound %.3g nmse %.3g | running sum: err/bound %.3g nmse %.3g\n",
                c.name.c_str(), with.worst_ratio, with.nmse, without.worst_ratio, without.nmse);
    EXPECT_TRUE(with.pass(c.tol)) << c.name << ": the promoting kernel's modelled error is outside the bound";
    if (K >= 1280) {
      ++long_k_cases;
      EXPECT_FALSE(without.pass(c.tol)) << c.name << ": the bound does not catch a kernel without promotion";
    }
  }
  EXPECT_GE(long_k_cases, 1) << "the table has no f32 matmul_fp8 case with K >= 1280";
}

}  // namespace
}  // namespace hipq::kernels::parity
