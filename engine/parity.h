// Parity: how close an output is to its golden, and the verdict of a gate.
//
// Metrics (fp64 accumulation through Backend::parity_sums):
//   cosine = <a,b> / (|a| |b|), max_abs = max |a - b|,
//   rel_l2 = |a - b| / |b| (b = golden), psnr of the decoded RGB8 image vs the
//   golden image (dB, peak 255; +inf when identical), only when both exist.
// NaN/Inf anywhere in the output makes the verdict NON_FINITE whatever the gate.
// A gate combines optional bounds; every present bound must hold. The default
// gate is cosine >= 0.999. JSON form (manifest "parity.gate", batches.parity_gate):
//   {"cosine_min": 0.999, "max_abs_max": 0.05, "rel_l2_max": 0.01, "psnr_min": 30}
// (psnr_min is skipped when no image is compared).
// Verdicts: "PASS" | "FAIL" | "NO_GOLDEN" | "NON_FINITE".
// Thread safety: pure functions; compare_latents uses the backend (its thread).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct Golden;
struct GenerationOutput;

struct ParityMetrics {
  double cosine = 0;
  double max_abs = 0;
  double rel_l2 = 0;
  double psnr = std::numeric_limits<double>::quiet_NaN();  // NaN: no image compared
  bool has_psnr = false;
  bool finite = true;         // no NaN/Inf in the output nor the golden
  int64_t nonfinite_output = 0;
  int64_t nonfinite_golden = 0;
  int64_t count = 0;          // elements compared

  // NaN written as null, +/-inf as "inf" / "-inf"; psnr null when not compared.
  nlohmann::json to_json() const;
};

// Latents given as host fp32 arrays of n elements (a = output, b = golden);
// they are copied to the backend when it is not the cpu one.
Result<ParityMetrics> compare_latents(kernels::Backend& backend, const float* a, const float* b, int64_t n);
// PSNR (dB, peak 255) of two RGB8 buffers of n bytes; +inf when equal.
double image_psnr(const uint8_t* a, const uint8_t* b, size_t n);

struct ParityGate {
  std::optional<double> cosine_min = 0.999;
  std::optional<double> max_abs_max;
  std::optional<double> rel_l2_max;
  std::optional<double> psnr_min;

  nlohmann::json to_json() const;
  // Absent gate ({} or null) = the default. InvalidArgument naming an unknown
  // key or a non-number ("parity gate: unknown key \"cosine\"; known: ...").
  static Result<ParityGate> from_json(const nlohmann::json& j);
};

enum class Verdict { kPass, kFail, kNoGolden, kNonFinite };
std::string_view verdict_name(Verdict v);   // "PASS", "FAIL", "NO_GOLDEN", "NON_FINITE"
Result<Verdict> parse_verdict(std::string_view name);

struct ParityResult {
  Verdict verdict = Verdict::kNoGolden;
  std::optional<ParityMetrics> metrics;  // absent for NO_GOLDEN
  std::string reason;                    // "cosine 0.9871 < 0.999", "" for PASS
  nlohmann::json to_json() const;
};

ParityResult judge(const ParityMetrics& metrics, const ParityGate& gate);

// Output vs golden (null golden -> NO_GOLDEN). InvalidArgument when the latent
// shapes differ (naming both). Compares the images too when both have one of
// the same size.
Result<ParityResult> check_parity(kernels::Backend& backend, const GenerationOutput& output,
                                  const Golden* golden, const ParityGate& gate);

}  // namespace hipq::engine
