// Parity: how close an output is to its golden, and the verdict of a gate.
//
// Grading is independent of the device under test: every metric is computed
// on the host in fp64 from the copied-out latent (host fp32) and RGB8 image,
// never by a backend kernel.
// Metrics:
//   cosine = <a,b> / (|a| |b|), max_abs = max |a - b|,
//   rel_l2 = |a - b| / |b| (b = golden), psnr of the decoded RGB8 image vs the
//   golden image (dB, peak 255; +inf when identical), only when both exist.
// Elements where either side is NaN/Inf are counted and left out of the sums;
// NaN/Inf anywhere makes the verdict NON_FINITE whatever the gate.
// The gate (its bounds, defaults, keys and JSON form) is spec::ParityGate
// (spec/parity_gate.h); every present bound must hold. Goldens without an
// image are judged on the latent alone.
// Verdicts: "PASS" | "FAIL" | "NO_GOLDEN" | "NON_FINITE".
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"
#include "spec/parity_gate.h"

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

// Latents given as host fp32 arrays of n elements (a = output, b = golden),
// compared on the host in fp64. InvalidArgument when n <= 0.
Result<ParityMetrics> compare_latents(const float* a, const float* b, int64_t n);
// PSNR (dB, peak 255) of two RGB8 buffers of n bytes; +inf when equal.
double image_psnr(const uint8_t* a, const uint8_t* b, size_t n);

enum class Verdict { kPass, kFail, kNoGolden, kNonFinite };
std::string_view verdict_name(Verdict v);   // "PASS", "FAIL", "NO_GOLDEN", "NON_FINITE"
Result<Verdict> parse_verdict(std::string_view name);

struct ParityResult {
  Verdict verdict = Verdict::kNoGolden;
  std::optional<ParityMetrics> metrics;  // absent for NO_GOLDEN
  std::string reason;                    // "cosine 0.9871 < 0.999", "" for PASS
  nlohmann::json to_json() const;
};

// `precision` picks the default image bound when the gate sets none.
ParityResult judge(const ParityMetrics& metrics, const spec::ParityGate& gate,
                   std::string_view precision = "fp32");

// Output vs golden (null golden -> NO_GOLDEN), graded on the host. The
// precision is the golden's (its key holds it). InvalidArgument when the
// latent shapes differ (naming both). Compares the images too when both have
// one of the same size.
Result<ParityResult> check_parity(const GenerationOutput& output, const Golden* golden,
                                  const spec::ParityGate& gate);

}  // namespace hipq::engine
