#include "parity/parity_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

namespace hipq::kernels::parity {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Bytes of `values` stored as `dtype`.
std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i)
    store_from_f32(bytes.data(), dtype, static_cast<int64_t>(i), values[i]);
  return bytes;
}

double load_f64(const void* p, DType t, int64_t i) {
  if (t == DType::kF64) return static_cast<const double*>(p)[i];
  return load_as_f32(p, t, i);
}

}  // namespace

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF16: return {2e-3, 4e-3, 2e-5};
    case DType::kBF16: return {1.6e-2, 1.6e-2, 2e-4};
    default: return {1e-4, 1e-4, 1e-8};
  }
}

std::vector<float> make_input_values(const ParityCase& c, size_t k) {
  const InputSpec& in = c.inputs[k];
  const int64_t n = numel_of(in.alloc_shape);
  std::vector<float> v(static_cast<size_t>(n));
  if (!in.values.empty()) {
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(in.values[static_cast<size_t>(i) % in.values.size()]);
  } else {
    uint64_t s = fnv1a(c.name + "/" + in.name);
    const bool integer = in.dtype == DType::kI32 || in.dtype == DType::kI64;
    for (int64_t i = 0; i < n; ++i) {
      const double u = static_cast<double>(splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
      double x = in.lo + (in.hi - in.lo) * u;
      if (integer) x = std::floor(x);
      v[static_cast<size_t>(i)] = static_cast<float>(x);
    }
  }
  // The values the backend holds: rounded once to the storage dtype.
  if (in.dtype == DType::kF16)
    for (float& x : v) x = f16_to_f32(f32_to_f16(x));
  if (in.dtype == DType::kBF16)
    for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
  return v;
}

std::string ParityReport::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s: checked=%lld max_abs_err=%.3g worst/bound=%.3g nmse=%.3g",
                ok ? "PASS" : "FAIL", backend.c_str(), static_cast<long long>(checked), max_abs_err,
                max_err_ratio, nmse);
  return ok ? std::string(buf) : std::string(buf) + "\n  " + failure;
}

ParityReport run_case(Backend& backend, const ParityCase& c) {
  ParityReport rep;
  rep.backend = backend.info().name;
  auto fail = [&](std::string why) {
    rep.ok = false;
    rep.failure = std::move(why);
    return rep;
  };
  const Location loc = backend.info().name == "cpu" ? Location::kHost : Location::kDevice;

  // ---- inputs -------------------------------------------------------------
  std::vector<std::vector<float>> host_vals(c.inputs.size());
  std::vector<std::vector<uint8_t>> bytes(c.inputs.size());
  std::vector<Buffer> in_bufs;
  std::vector<Tensor> dev_views, host_views;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& in = c.inputs[k];
    host_vals[k] = make_input_values(c, k);
    bytes[k] = encode(host_vals[k], in.dtype);
    auto buf = backend.allocate(bytes[k].size());
    if (!buf.ok()) return fail("allocate input " + in.name + ": " + buf.status().ToString());
    Status st = backend.copy_to_device(bytes[k].data(), buf->data(), bytes[k].size());
    if (!st.ok()) return fail("upload input " + in.name + ": " + st.ToString());
    Tensor dev = Tensor::contiguous(buf->data(), in.dtype, in.alloc_shape, loc);
    Tensor host = Tensor::contiguous(host_vals[k].data(), DType::kF32, in.alloc_shape);
    if (in.view) {
      dev = in.view(dev);
      host = in.view(host);
      host.dtype = DType::kF32;
    }
    dev_views.push_back(dev);
    host_views.push_back(host);
    in_bufs.push_back(std::move(*buf));
  }

  // ---- output with guards ---------------------------------------------------
  const int64_t n_out = numel_of(c.out_shape);
  const size_t out_bytes = static_cast<size_t>(n_out) * dtype_size(c.out_dtype);
  const size_t total = out_bytes + 2 * kGuardBytes;
  std::vector<uint8_t> pattern(total, 0xFF);  // NaN in every float dtype
  std::fill(pattern.begin(), pattern.begin() + kGuardBytes, kGuardByte);
  std::fill(pattern.end() - kGuardBytes, pattern.end(), kGuardByte);
  auto out_buf = backend.allocate(total);
  if (!out_buf.ok()) return fail("allocate output: " + out_buf.status().ToString());
  Status st = backend.copy_to_device(pattern.data(), out_buf->data(), total);
  if (!st.ok()) return fail("upload output pattern: " + st.ToString());
  Tensor out = Tensor::contiguous(static_cast<uint8_t*>(out_buf->data()) + kGuardBytes, c.out_dtype, c.out_shape, loc);

  st = c.run(backend, dev_views, out);
  if (!st.ok()) return fail("op returned " + st.ToString());
  st = backend.synchronize();
  if (!st.ok()) return fail("synchronize: " + st.ToString());

  std::vector<uint8_t> result(total);
  st = backend.copy_to_host(out_buf->data(), result.data(), total);
  if (!st.ok()) return fail("download output: " + st.ToString());
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (result[i] != kGuardByte)
      return fail("guard region before the output was overwritten at byte -" + std::to_string(kGuardBytes - i));
    if (result[total - kGuardBytes + i] != kGuardByte)
      return fail("guard region after the output was overwritten at byte +" + std::to_string(i));
  }
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    std::vector<uint8_t> back(bytes[k].size());
    st = backend.copy_to_host(in_bufs[k].data(), back.data(), back.size());
    if (!st.ok()) return fail("download input: " + st.ToString());
    if (back != bytes[k]) return fail("input '" + c.inputs[k].name + "' was modified by the op");
  }

  const uint8_t* out_data = result.data() + kGuardBytes;
  int64_t nonfinite = 0, first_nonfinite = -1;
  for (int64_t i = 0; i < n_out; ++i)
    if (!std::isfinite(load_f64(out_data, c.out_dtype, i))) {
      if (first_nonfinite < 0) first_nonfinite = i;
      ++nonfinite;
    }

  // ---- reference ------------------------------------------------------------
  std::vector<int64_t> idx;
  if (c.ref_samples <= 0 || c.ref_samples >= n_out) {
    idx.resize(static_cast<size_t>(n_out));
    for (int64_t i = 0; i < n_out; ++i) idx[static_cast<size_t>(i)] = i;
  } else {
    uint64_t s = fnv1a(c.name + "/samples");
    idx.push_back(0);
    idx.push_back(n_out - 1);
    // Runs of consecutive elements, so row-memoised references stay cheap.
    while (static_cast<int64_t>(idx.size()) < c.ref_samples) {
      const int64_t start = static_cast<int64_t>(splitmix64(s) % static_cast<uint64_t>(n_out));
      for (int64_t j = start; j < std::min(n_out, start + 64); ++j) idx.push_back(j);
    }
  }
  ElementFn ref = c.reference(host_views);
  std::vector<double> refs(idx.size()), outs(idx.size());
  double sum_ref2 = 0;
  for (size_t j = 0; j < idx.size(); ++j) {
    refs[j] = ref(idx[j]);
    outs[j] = load_f64(out_data, c.out_dtype, idx[j]);
    sum_ref2 += refs[j] * refs[j];
  }
  const double rms = std::sqrt(sum_ref2 / std::max<double>(1, static_cast<double>(idx.size())));
  const double abs_bound = c.tol.atol * std::max(1.0, rms);
  double sum_err2 = 0;
  int64_t bad = 0;
  std::ostringstream first_bad;
  for (size_t j = 0; j < idx.size(); ++j) {
    const double r = refs[j], o = outs[j];
    if (!std::isfinite(r)) continue;  // the reference itself overflowed: not comparable
    const double err = std::fabs(o - r);
    const double bound = abs_bound + c.tol.rtol * std::fabs(r);
    if (std::isfinite(o)) sum_err2 += err * err;
    const double ratio = std::isfinite(err) ? err / bound : INFINITY;
    rep.max_err_ratio = std::max(rep.max_err_ratio, ratio);
    if (std::isfinite(err)) rep.max_abs_err = std::max(rep.max_abs_err, err);
    if (!(ratio <= 1.0)) {
      if (bad < 5) first_bad << " [" << idx[j] << "] out=" << o << " ref=" << r << " (bound " << bound << ")";
      ++bad;
    }
  }
  rep.checked = static_cast<int64_t>(idx.size());
  rep.nmse = sum_ref2 > 0 ? sum_err2 / sum_ref2 : sum_err2;
  if (nonfinite > 0)
    return fail(std::to_string(nonfinite) + " NaN/Inf outputs (first at flat index " +
                std::to_string(first_nonfinite) + ")" + (bad ? "; mismatches:" + first_bad.str() : ""));
  if (bad > 0)
    return fail(std::to_string(bad) + " of " + std::to_string(idx.size()) +
                " elements outside abs+rel bound:" + first_bad.str());
  if (rep.nmse > c.tol.nmse)
    return fail("NMSE " + std::to_string(rep.nmse) + " above " + std::to_string(c.tol.nmse));
  rep.ok = true;
  return rep;
}

namespace {
struct Tally {
  int pass = 0, fail = 0;
  double worst_ratio = 0;
  std::string worst_case;
};
std::mutex g_tally_mu;
std::map<std::pair<std::string, std::string>, Tally> g_tally;  // (backend, dtype)
}  // namespace

void record_report(const ParityCase& c, const ParityReport& r) {
  std::lock_guard<std::mutex> lock(g_tally_mu);
  Tally& t = g_tally[{r.backend, std::string(dtype_name(c.dtype))}];
  (r.ok ? t.pass : t.fail)++;
  if (r.max_err_ratio > t.worst_ratio) {
    t.worst_ratio = r.max_err_ratio;
    t.worst_case = c.name;
  }
}

std::string summary_table() {
  std::lock_guard<std::mutex> lock(g_tally_mu);
  std::ostringstream os;
  os << "parity summary\n| backend | dtype | pass | fail | worst err/bound | in case |\n|---|---|---|---|---|---|\n";
  for (const auto& [key, t] : g_tally) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.3g", t.worst_ratio);
    os << "| " << key.first << " | " << key.second << " | " << t.pass << " | " << t.fail << " | " << ratio << " | "
       << t.worst_case << " |\n";
  }
  return os.str();
}

}  // namespace hipq::kernels::parity
