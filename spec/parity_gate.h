// ParityGate: the bounds an output must meet against its golden, as one value
// that travels from manifest to database to wire to worker to engine.
//
// A gate combines optional bounds; every present bound must hold (the engine
// judges them: engine/parity.h). The default gate is cosine >= the
// precision's default (default_cosine_min: 0.999, fp8 lower) and, when the
// golden has an image, PSNR >= the precision's default (default_psnr_min:
// fp32 40 dB, fp16, bf16 and fp8 lower); docs/golden-format.md gives the
// measured floors. The key names below are the one list of them: the
// manifest's "parity.gate", the JSON form, `hipq generate --gate`.
//
// JSON form (to_json/from_json; stored in batches.parity_gate):
//   {"cosine_min": 0.999, "max_abs_max": 0.05, "rel_l2_max": 0.01, "psnr_min": 30}
// A key set to null switches that bound off; cosine_min and psnr_min absent
// = the precision's default bounds (not frozen into stored gates: a batch is
// judged with the defaults of the hipq that grades it), null = no such
// bound. The wire carries the gate as the ParityGate protobuf message
// (proto/parity_gate_codec.h).
// Thread safety: a plain value and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "base/status.h"

namespace hipq::spec {

// The latent bound a gate applies when it names none: 0.999, fp8 lower
// (measured floors: docs/golden-format.md, "Default gate").
inline constexpr double kDefaultCosineMin = 0.999;
inline constexpr double kDefaultCosineMinFp8 = 0.995;
double default_cosine_min(std::string_view precision);
// The image bound a gate applies when it names none: fp32 40 dB, fp16, bf16
// and fp8 lower.
inline constexpr double kDefaultPsnrMinFp32 = 40.0;
inline constexpr double kDefaultPsnrMinFp16 = 35.0;
inline constexpr double kDefaultPsnrMinBf16 = 35.0;
inline constexpr double kDefaultPsnrMinFp8 = 35.0;
double default_psnr_min(std::string_view precision);

// The gate's keys, in this order: cosine_min, max_abs_max, rel_l2_max, psnr_min.
const std::vector<std::string>& parity_gate_keys();

// The values a manifest accepts for a key: cosine_min in [-1, 1], the others
// in [0, 1e9]. InvalidArgument for an unknown key.
struct ParityGateRange {
  double min = 0;
  double max = 0;
};
Result<ParityGateRange> parity_gate_range(std::string_view key);

struct ParityGate {
  // Meaningful only when cosine_min_set; otherwise default_cosine_min(precision)
  // (cosine_min then holds the general default, 0.999, for display).
  std::optional<double> cosine_min = kDefaultCosineMin;
  bool cosine_min_set = false;
  std::optional<double> max_abs_max;
  std::optional<double> rel_l2_max;
  // Meaningful only when psnr_min_set; otherwise default_psnr_min(precision).
  std::optional<double> psnr_min;
  bool psnr_min_set = false;

  // The latent bound for a job at `precision` (nullopt: none).
  std::optional<double> cosine_bound(std::string_view precision) const;
  // The image bound for a job at `precision` (nullopt: none).
  std::optional<double> psnr_bound(std::string_view precision) const;

  // Sets the bound `key` (nullopt switches it off; for cosine_min and
  // psnr_min it also stops the precision's default). InvalidArgument naming an unknown key
  // ("parity gate: unknown key \"cosine\"; known: ...") or a value that is not
  // finite.
  Status set(std::string_view key, std::optional<double> value);
  // InvalidArgument naming the first bound that is not finite.
  Status validate() const;

  // cosine_min and psnr_min only when set (null when off).
  nlohmann::json to_json() const;
  // Absent gate ({} or null) = the default. InvalidArgument naming an unknown
  // key or a non-number.
  static Result<ParityGate> from_json(const nlohmann::json& j);

  bool operator==(const ParityGate&) const = default;
};

}  // namespace hipq::spec
