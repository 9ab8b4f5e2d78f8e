#include "engine/parity.h"

#include <cmath>
#include <cstdio>

#include "engine/golden.h"
#include "engine/pipeline.h"

namespace hipq::engine {
namespace {

std::string fmt(double v, int digits = 6) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

nlohmann::json number_or_text(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// fp64 sums over two host fp32 arrays; elements where either side is not
// finite are counted and left out (as kernels' parity_sums did on the device).
struct Sums {
  double dot = 0, norm_a2 = 0, norm_b2 = 0, sum_sq_diff = 0, max_abs_diff = 0;
  int64_t nonfinite_a = 0, nonfinite_b = 0, count = 0;
};

Sums host_sums(const float* a, const float* b, int64_t n) {
  Sums s;
  s.count = n;
  for (int64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const bool fx = std::isfinite(x), fy = std::isfinite(y);
    if (!fx) ++s.nonfinite_a;
    if (!fy) ++s.nonfinite_b;
    if (!fx || !fy) continue;
    const double d = x - y;
    s.dot += x * y;
    s.norm_a2 += x * x;
    s.norm_b2 += y * y;
    s.sum_sq_diff += d * d;
    if (std::fabs(d) > s.max_abs_diff) s.max_abs_diff = std::fabs(d);
  }
  return s;
}

ParityMetrics metrics_from_sums(const Sums& s) {
  ParityMetrics m;
  m.count = s.count;
  m.finite = s.nonfinite_a == 0 && s.nonfinite_b == 0;
  m.nonfinite_output = s.nonfinite_a;
  m.nonfinite_golden = s.nonfinite_b;
  const double denom = std::sqrt(s.norm_a2) * std::sqrt(s.norm_b2);
  if (denom > 0) {
    m.cosine = s.dot / denom;
  } else {
    // Two all-zero tensors agree; one zero and one not share no direction.
    m.cosine = (s.norm_a2 == 0 && s.norm_b2 == 0) ? 1.0 : 0.0;
  }
  m.max_abs = s.max_abs_diff;
  m.rel_l2 = s.norm_b2 > 0 ? std::sqrt(s.sum_sq_diff) / std::sqrt(s.norm_b2)
                           : (s.sum_sq_diff == 0 ? 0.0 : std::numeric_limits<double>::infinity());
  return m;
}

}  // namespace

nlohmann::json ParityMetrics::to_json() const {
  nlohmann::json j;
  j["cosine"] = number_or_text(cosine);
  j["max_abs"] = number_or_text(max_abs);
  j["rel_l2"] = number_or_text(rel_l2);
  j["psnr"] = has_psnr ? number_or_text(psnr) : nlohmann::json(nullptr);
  j["finite"] = finite;
  j["count"] = count;
  if (!finite) {
    j["nonfinite_output"] = nonfinite_output;
    j["nonfinite_golden"] = nonfinite_golden;
  }
  return j;
}

Result<ParityMetrics> compare_latents(const float* a, const float* b, int64_t n) {
  if (n <= 0) return Status::InvalidArgument("compare_latents: nothing to compare (n = " + std::to_string(n) + ")");
  return metrics_from_sums(host_sums(a, b, n));
}

double image_psnr(const uint8_t* a, const uint8_t* b, size_t n) {
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    sum += d * d;
  }
  if (sum == 0) return std::numeric_limits<double>::infinity();
  double mse = sum / static_cast<double>(n);
  return 10.0 * std::log10(255.0 * 255.0 / mse);
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kNoGolden: return "NO_GOLDEN";
    case Verdict::kNonFinite: return "NON_FINITE";
  }
  return "?";
}

Result<Verdict> parse_verdict(std::string_view name) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kNoGolden, Verdict::kNonFinite})
    if (verdict_name(v) == name) return v;
  return Status::InvalidArgument("unknown verdict \"" + std::string(name) + "\"; known: PASS, FAIL, NO_GOLDEN, NON_FINITE");
}

nlohmann::json ParityResult::to_json() const {
  nlohmann::json j;
  j["verdict"] = std::string(verdict_name(verdict));
  j["metrics"] = metrics ? metrics->to_json() : nlohmann::json(nullptr);
  j["reason"] = reason;
  return j;
}

ParityResult judge(const ParityMetrics& m, const spec::ParityGate& gate, std::string_view precision) {
  ParityResult r;
  r.metrics = m;
  if (!m.finite) {
    r.verdict = Verdict::kNonFinite;
    if (m.nonfinite_output > 0) r.reason = std::to_string(m.nonfinite_output) + " NaN/Inf values in the output";
    if (m.nonfinite_golden > 0)
      r.reason += (r.reason.empty() ? "" : "; ") + std::to_string(m.nonfinite_golden) + " NaN/Inf values in the golden";
    return r;
  }
  std::string reasons;
  auto fail = [&](const std::string& why) { reasons += (reasons.empty() ? "" : "; ") + why; };
  // Written as !(ok) so a NaN metric fails.
  if (const auto cosine_min = gate.cosine_bound(precision); cosine_min && !(m.cosine >= *cosine_min))
    fail("cosine " + fmt(m.cosine, 8) + " < " + fmt(*cosine_min, 8) +
         (gate.cosine_min_set ? "" : " (default for " + std::string(precision) + ")"));
  if (gate.max_abs_max && !(m.max_abs <= *gate.max_abs_max))
    fail("max_abs " + fmt(m.max_abs) + " > " + fmt(*gate.max_abs_max));
  if (gate.rel_l2_max && !(m.rel_l2 <= *gate.rel_l2_max))
    fail("rel_l2 " + fmt(m.rel_l2) + " > " + fmt(*gate.rel_l2_max));
  if (const auto psnr_min = gate.psnr_bound(precision); psnr_min && m.has_psnr && !(m.psnr >= *psnr_min))
    fail("psnr " + fmt(m.psnr, 4) + " dB < " + fmt(*psnr_min, 4) + " dB" +
         (gate.psnr_min_set ? "" : " (default for " + std::string(precision) + ")"));
  r.verdict = reasons.empty() ? Verdict::kPass : Verdict::kFail;
  r.reason = reasons;
  return r;
}

Result<ParityResult> check_parity(const GenerationOutput& output, const Golden* golden,
                                  const spec::ParityGate& gate) {
  if (golden == nullptr) {
    ParityResult r;
    r.verdict = Verdict::kNoGolden;
    r.reason = "no golden for this job";
    return r;
  }
  auto shape_text = [](const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  };
  if (output.latent_shape != golden->latent_shape || output.latent.size() != golden->latent.size())
    return Status::InvalidArgument("parity: output latent " + shape_text(output.latent_shape) + " and golden " +
                                   golden->key + " latent " + shape_text(golden->latent_shape) + " differ in shape");
  HIPQ_ASSIGN_OR_RETURN(ParityMetrics m, compare_latents(output.latent.data(), golden->latent.data(),
                                                         static_cast<int64_t>(output.latent.size())));
  if (golden->has_image() && !output.rgb.empty() && golden->image.size() == output.rgb.size() &&
      golden->image_width == output.width && golden->image_height == output.height) {
    m.psnr = image_psnr(output.rgb.data(), golden->image.data(), output.rgb.size());
    m.has_psnr = true;
  }
  return judge(m, gate, golden->settings.precision);
}

}  // namespace hipq::engine
