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

Result<ParityMetrics> metrics_from_sums(const kernels::ParitySums& s) {
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

Result<ParityMetrics> compare_latents(kernels::Backend& backend, const float* a, const float* b, int64_t n) {
  if (n <= 0) return Status::InvalidArgument("compare_latents: nothing to compare (n = " + std::to_string(n) + ")");
  if (backend.info().name == "cpu") {
    kernels::Tensor ta = kernels::Tensor::contiguous(const_cast<float*>(a), kernels::DType::kF32, {n});
    kernels::Tensor tb = kernels::Tensor::contiguous(const_cast<float*>(b), kernels::DType::kF32, {n});
    HIPQ_ASSIGN_OR_RETURN(kernels::ParitySums sums, backend.parity_sums(ta, tb));
    return metrics_from_sums(sums);
  }
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer da, backend.allocate(bytes));
  HIPQ_ASSIGN_OR_RETURN(kernels::Buffer db, backend.allocate(bytes));
  HIPQ_RETURN_IF_ERROR(backend.copy_to_device(a, da.data(), bytes));
  HIPQ_RETURN_IF_ERROR(backend.copy_to_device(b, db.data(), bytes));
  kernels::Tensor ta = da.tensor(kernels::DType::kF32, {n});
  kernels::Tensor tb = db.tensor(kernels::DType::kF32, {n});
  HIPQ_ASSIGN_OR_RETURN(kernels::ParitySums sums, backend.parity_sums(ta, tb));
  return metrics_from_sums(sums);
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

nlohmann::json ParityGate::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["cosine_min"] = cosine_min ? nlohmann::json(*cosine_min) : nlohmann::json(nullptr);
  if (max_abs_max) j["max_abs_max"] = *max_abs_max;
  if (rel_l2_max) j["rel_l2_max"] = *rel_l2_max;
  if (psnr_min) j["psnr_min"] = *psnr_min;
  return j;
}

Result<ParityGate> ParityGate::from_json(const nlohmann::json& j) {
  ParityGate g;
  if (j.is_null()) return g;
  if (!j.is_object())
    return Status::InvalidArgument("parity gate: expected an object like {\"cosine_min\": 0.999}, got " + j.dump());
  static const char* kKnown = "cosine_min, max_abs_max, rel_l2_max, psnr_min";
  for (const auto& [key, value] : j.items()) {
    std::optional<double>* slot = nullptr;
    if (key == "cosine_min") slot = &g.cosine_min;
    else if (key == "max_abs_max") slot = &g.max_abs_max;
    else if (key == "rel_l2_max") slot = &g.rel_l2_max;
    else if (key == "psnr_min") slot = &g.psnr_min;
    else return Status::InvalidArgument("parity gate: unknown key \"" + key + "\"; known: " + kKnown);
    if (value.is_null()) {
      slot->reset();  // null switches a bound off (the default cosine one too)
    } else if (value.is_number()) {
      double v = value.get<double>();
      if (!std::isfinite(v)) return Status::InvalidArgument("parity gate: " + key + " must be finite");
      *slot = v;
    } else {
      return Status::InvalidArgument("parity gate: " + key + " must be a number or null, got " + value.dump());
    }
  }
  return g;
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

ParityResult judge(const ParityMetrics& m, const ParityGate& gate) {
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
  if (gate.cosine_min && !(m.cosine >= *gate.cosine_min))
    fail("cosine " + fmt(m.cosine, 8) + " < " + fmt(*gate.cosine_min, 8));
  if (gate.max_abs_max && !(m.max_abs <= *gate.max_abs_max))
    fail("max_abs " + fmt(m.max_abs) + " > " + fmt(*gate.max_abs_max));
  if (gate.rel_l2_max && !(m.rel_l2 <= *gate.rel_l2_max))
    fail("rel_l2 " + fmt(m.rel_l2) + " > " + fmt(*gate.rel_l2_max));
  if (gate.psnr_min && m.has_psnr && !(m.psnr >= *gate.psnr_min))
    fail("psnr " + fmt(m.psnr, 4) + " dB < " + fmt(*gate.psnr_min, 4) + " dB");
  r.verdict = reasons.empty() ? Verdict::kPass : Verdict::kFail;
  r.reason = reasons;
  return r;
}

Result<ParityResult> check_parity(kernels::Backend& backend, const GenerationOutput& output, const Golden* golden,
                                  const ParityGate& gate) {
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
  HIPQ_ASSIGN_OR_RETURN(ParityMetrics m, compare_latents(backend, output.latent.data(), golden->latent.data(),
                                                         static_cast<int64_t>(output.latent.size())));
  if (golden->has_image() && !output.rgb.empty() && golden->image.size() == output.rgb.size() &&
      golden->image_width == output.width && golden->image_height == output.height) {
    m.psnr = image_psnr(output.rgb.data(), golden->image.data(), output.rgb.size());
    m.has_psnr = true;
  }
  return judge(m, gate);
}

}  // namespace hipq::engine
