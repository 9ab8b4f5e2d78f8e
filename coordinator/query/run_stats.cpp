#include "coordinator/query/run_stats.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <limits>
#include <set>

#include "base/did_you_mean.h"
#include "coordinator/query/parity_accumulator.h"
#include "coordinator/query/stats_accumulator.h"
#include "coordinator/statistics/descriptive.h"
#include "coordinator/statistics/outliers.h"
#include "db/database.h"
#include "spec/generation_settings.h"
#include "spec/phases.h"

namespace hipq::coordinator::query {

using nlohmann::json;
using namespace statistics;  // descriptive statistics, outliers, bootstrap

const std::vector<std::string>& known_phases() { return spec::statistics_phases(); }

const std::vector<std::string>& known_dimensions() {
  static const std::vector<std::string> k{
      "model", "resolution", "steps",  "precision", "sampler", "spacing", "guidance", "lora",
      "mode",  "vae",        "shared", "gpu",       "host",    "build",   "batch",    "day"};
  return k;
}

namespace {

// "name:scale" per LoRA in order (the file's stem, as <lora:NAME:SCALE>),
// joined by "+"; "none" without LoRA; "?" for a column that does not parse.
std::string lora_label(const db::RunRow& r) {
  const json list = json::parse(r.loras_json.empty() ? std::string("[]") : r.loras_json, nullptr, false);
  if (!list.is_array()) return "?";
  std::string out;
  for (const auto& l : list) {
    if (!l.is_object() || !l.contains("path") || !l.at("path").is_string() || !l.contains("scale") ||
        !l.at("scale").is_number())
      return "?";
    if (!out.empty()) out += '+';
    out += std::filesystem::path(l.at("path").get<std::string>()).stem().string();
    out += ':';
    out += spec::format_guidance(l.at("scale").get<float>());
  }
  return out.empty() ? std::string("none") : out;
}

// txt2img | img2img | refiner (base + refiner, with or without an init image).
std::string run_mode(const db::RunRow& r) {
  if (!r.refiner.empty()) return "refiner";
  return r.init_image.empty() ? "txt2img" : "img2img";
}

}  // namespace

Status check_phase_name(const std::string& phase) {
  const auto& k = known_phases();
  if (std::find(k.begin(), k.end(), phase) != k.end()) return Status::Ok();
  return Status::InvalidArgument("unknown phase \"" + phase + "\"; known: " + spec::join_names(k));
}

namespace {

std::optional<std::string> opt_string(const json& args, const char* key) {
  if (!args.contains(key) || args[key].is_null()) return std::nullopt;
  if (args[key].is_string()) return args[key].get<std::string>();
  return args[key].dump();  // numbers given for text filters (e.g. build=1234)
}

double utc_from_fields(int y, int mo, int d, int h, int mi, int s) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return static_cast<double>(timegm(&tm));
}

}  // namespace

Result<double> parse_time(const json& value, const char* what, double now) {
  if (value.is_number()) return value.get<double>();
  if (!value.is_string()) {
    return Status::InvalidArgument(std::string(what) + ": expected epoch seconds or a date string, got " +
                                   value.dump());
  }
  const std::string s = value.get<std::string>();
  if (!s.empty() && (s.back() == 'h' || s.back() == 'd' || s.back() == 'm')) {
    char* end = nullptr;
    const double n = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size() - 1 && n >= 0) {
      const double unit = s.back() == 'd' ? 86400.0 : s.back() == 'h' ? 3600.0 : 60.0;
      return now - n * unit;
    }
  }
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  char tail[8] = {0};
  const int got = std::sscanf(s.c_str(), "%4d-%2d-%2d%*[T ]%2d:%2d:%2d%7s", &y, &mo, &d, &h, &mi, &sec, tail);
  const bool date_only = got == 3 && s.size() == 10;
  const bool with_time = got >= 5 && (tail[0] == 0 || std::string(tail) == "Z");
  if ((date_only || with_time) && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h < 24 && mi < 60 && sec < 61) {
    return utc_from_fields(y, mo, d, h, mi, sec);
  }
  return Status::InvalidArgument(
      std::string(what) + ": \"" + s +
      "\" is not a time; use epoch seconds, YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC), "
      "or an age like 24h / 7d");
}

Result<db::RunFilter> parse_run_filter(const json& args) {
  db::RunFilter f;
  const double now = db::wall_clock_seconds();
  try {
    if (args.contains("batch") && !args["batch"].is_null()) {
      const auto& b = args["batch"];
      f.batch = b.is_string() ? std::stoll(b.get<std::string>()) : b.get<int64_t>();
    }
    f.manifest = opt_string(args, "manifest");
    f.model = opt_string(args, "model");
    f.prompt = opt_string(args, "prompt");
    if (!f.prompt) f.prompt = opt_string(args, "tag");
    if (args.contains("seed") && !args["seed"].is_null()) {
      const auto& s = args["seed"];
      f.seed = s.is_string() ? std::stoull(s.get<std::string>()) : s.get<uint64_t>();
    }
    f.gpu = opt_string(args, "gpu");
    f.host = opt_string(args, "host");
    f.build = opt_string(args, "build");
    f.verdict = opt_string(args, "verdict");
    f.state = opt_string(args, "state");
    if (args.contains("warm") && !args["warm"].is_null()) {
      const auto& w = args["warm"];
      if (w.is_boolean()) {
        f.warm = w.get<bool>();
      } else {
        const std::string t = w.is_string() ? w.get<std::string>() : w.dump();
        if (t == "warm" || t == "true" || t == "1")
          f.warm = true;
        else if (t == "cold" || t == "false" || t == "0")
          f.warm = false;
        else
          return Status::InvalidArgument("warm: \"" + t + "\" is not warm/cold/true/false");
      }
    }
    if (args.contains("limit") && !args["limit"].is_null()) f.limit = args["limit"].get<int64_t>();
    if (args.contains("after") && !args["after"].is_null()) f.after_job = args["after"].get<int64_t>();
  } catch (const std::exception& e) {
    return Status::InvalidArgument(
        std::string("run filter: batch, seed, limit and after must be integers: ") + e.what());
  }
  if (args.contains("since") && !args["since"].is_null()) {
    HIPQ_ASSIGN_OR_RETURN(double t, parse_time(args["since"], "since", now));
    f.since = t;
  }
  if (args.contains("until") && !args["until"].is_null()) {
    HIPQ_ASSIGN_OR_RETURN(double t, parse_time(args["until"], "until", now));
    f.until = t;
  }
  if (f.state) {
    static const std::set<std::string> states{"queued", "leased", "done", "failed", "dead", "cancelled"};
    if (!states.count(*f.state)) {
      return Status::InvalidArgument("state \"" + *f.state +
                                     "\" is not one of queued, leased, done, failed, dead, cancelled");
    }
  }
  return f;
}

Result<StatsOptions> parse_stats_options(const json& args) {
  StatsOptions o;
  try {
    if (args.contains("group_by") && !args["group_by"].is_null()) {
      const auto& g = args["group_by"];
      if (g.is_string()) {
        std::string s = g.get<std::string>(), cur;
        for (char c : s + ",") {
          if (c == ',') {
            if (!cur.empty()) o.group_by.push_back(cur);
            cur.clear();
          } else if (c != ' ') {
            cur += c;
          }
        }
      } else {
        o.group_by = g.get<std::vector<std::string>>();
      }
    }
    if (args.contains("clock")) o.clock = args["clock"].get<std::string>();
    if (args.contains("resamples")) o.resamples = args["resamples"].get<int>();
    if (args.contains("seed_bootstrap")) o.seed = args["seed_bootstrap"].get<uint64_t>();
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("stats options: group_by is a list of names, clock a string, "
                                               "resamples an integer: ") +
                                   e.what());
  }
  const auto& dims = known_dimensions();
  for (const auto& d : o.group_by) {
    if (d.rfind(kTagDimension, 0) == 0) {
      if (d.size() == kTagDimension.size())
        return Status::InvalidArgument(
            "group_by: \"tag:\" names no tag; write tag:NAME for tags NAME:VALUE "
            "(e.g. tag:Category)");
      continue;
    }
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
      return Status::InvalidArgument("group_by: unknown dimension \"" + d + "\"" + did_you_mean(d, dims) +
                                     "; known: " + spec::join_names(dims) + ", tag:NAME");
    }
  }
  if (o.clock != "host" && o.clock != "gpu") {
    return Status::InvalidArgument("clock \"" + o.clock + "\" is not host or gpu");
  }
  if (o.resamples < 1 || o.resamples > 1000000) {
    return Status::InvalidArgument("resamples " + std::to_string(o.resamples) + " is outside 1..1000000");
  }
  return o;
}

namespace {
json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json opt(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }
json opt(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }
}  // namespace

json run_to_json(const db::RunRow& r) {
  json phases = json::object();
  double total = 0;
  for (const auto& p : r.phases) {
    phases[p.phase] = {{"host_ms", p.host_ms}, {"gpu_ms", opt(p.gpu_ms)}};
    total += p.host_ms;
  }
  json outputs = json::array();
  try {
    outputs = json::parse(r.outputs_json);
  } catch (const json::exception&) {
    outputs = json::array();
  }
  return json{{"job", r.job_id},
              {"batch", r.batch_id},
              {"batch_name", r.batch_name},
              {"manifest", r.manifest_sha256},
              {"manifest_path", r.manifest_path},
              {"ordinal", r.ordinal},
              {"model", r.model},
              {"prompt", r.prompt},
              {"tags", r.tags},
              {"seed", r.seed},
              {"repeat", r.repeat_index},
              {"width", r.width},
              {"height", r.height},
              {"steps", r.steps},
              {"guidance", r.guidance},
              {"sampler", r.sampler},
              {"timestep_spacing", r.timestep_spacing},
              {"guidance_rescale", r.guidance_rescale},
              {"mode", run_mode(r)},
              {"loras", json::parse(r.loras_json.empty() ? std::string("[]") : r.loras_json, nullptr, false)},
              {"init_image", r.init_image},
              {"strength", r.strength},
              {"refiner", r.refiner},
              {"precision", r.precision},
              {"vae_precision", r.vae_precision},
              {"state", r.state},
              {"verdict", opt(r.verdict)},
              {"attempts", r.attempts},
              {"attempt", r.attempt ? json(*r.attempt) : json(nullptr)},
              {"worker", opt(r.worker_id)},
              {"host", r.host},
              {"gpu", r.gpu},
              {"arch", r.arch},
              {"build", r.build_sha},
              {"backend", r.backend},
              {"runtime_version", r.runtime_version},
              {"driver_version", r.driver_version},
              {"warm", r.has_result ? json(r.warm) : json(nullptr)},
              {"cosine", opt(r.cosine)},
              {"max_abs", opt(r.max_abs)},
              {"rel_l2", opt(r.rel_l2)},
              {"psnr", opt(r.psnr)},
              {"peak_memory_bytes", opt(r.peak_memory_bytes)},
              {"batch_size", opt(r.batch_size)},
              {"started_at", opt(r.started_at)},
              {"finished_at", opt(r.finished_at)},
              {"time", r.time},
              {"error", opt(r.error)},
              {"output_root", r.output_root},
              {"output_dir", r.output_dir},
              {"outputs", outputs},
              {"phases", phases},
              {"total_ms", r.phases.empty() ? json(nullptr) : json(total)}};
}

Result<std::vector<RunSample>> load_samples(db::Database& db, const std::vector<db::RunRow>& rows,
                                            const std::string& clock) {
  const bool gpu = clock == "gpu";
  std::vector<RunSample> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    RunSample s;
    s.row = &r;
    double total = 0;
    for (const auto& p : r.phases) {
      if (gpu) {
        if (p.gpu_ms) s.phases[p.phase] = *p.gpu_ms;
      } else {
        s.phases[p.phase] = p.host_ms;
        total += p.host_ms;
      }
    }
    // GPU events do not cover every phase (load, write), so a GPU-clock
    // total would silently mean something else: it is host-only.
    if (!gpu && !r.phases.empty()) s.phases["total"] = total;
    if (r.attempt_id) {
      HIPQ_ASSIGN_OR_RETURN(auto steps, db::query_step_timings(db, *r.attempt_id));
      for (const auto& st : steps) {
        if (gpu) {
          if (st.gpu_ms) s.steps.push_back(*st.gpu_ms);
        } else {
          s.steps.push_back(st.host_ms);
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<double> phase_values(std::span<const RunSample> samples, const std::string& phase) {
  std::vector<double> v;
  for (const auto& s : samples) {
    if (phase == "step") {
      v.insert(v.end(), s.steps.begin(), s.steps.end());
    } else if (auto it = s.phases.find(phase); it != s.phases.end()) {
      v.push_back(it->second);
    }
  }
  return v;
}

Result<json> summary_json(std::span<const double> values, const StatsOptions& options) {
  HIPQ_ASSIGN_OR_RETURN(Summary s, summarize(values));
  BootstrapOptions bo;
  bo.resamples = options.resamples;
  bo.seed = options.seed;
  const char* ci_method = "bootstrap";
  HIPQ_ASSIGN_OR_RETURN(Interval ci, median_ci(values, bo, &ci_method));
  HIPQ_ASSIGN_OR_RETURN(OutlierReport out, classify_outliers(values));
  return json{{"n", s.n},
              {"mean", s.mean},
              {"sd", finite_or_null(s.sd)},
              {"min", s.min},
              {"p50", s.p50},
              {"p90", s.p90},
              {"p95", s.p95},
              {"p99", s.p99},
              {"max", s.max},
              {"median_ci", json::array({ci.low, ci.high})},
              {"median_ci_method", ci_method},
              {"outliers",
               {{"low_severe", out.low_severe},
                {"low_mild", out.low_mild},
                {"high_mild", out.high_mild},
                {"high_severe", out.high_severe}}}};
}

Result<json> summary_json(const ValueReservoir& values, const StatsOptions& options) {
  if (values.exact()) return summary_json(std::span<const double>(values.values()), options);
  // Quantiles, interval and outliers from the sample; the rest exact.
  HIPQ_ASSIGN_OR_RETURN(json sj, summary_json(std::span<const double>(values.values()), options));
  const double n = static_cast<double>(values.count());
  const double kept = static_cast<double>(values.values().size());
  sj["n"] = values.count();
  sj["mean"] = values.mean();
  sj["sd"] = finite_or_null(values.sd());
  sj["min"] = values.min();
  sj["max"] = values.max();
  for (const char* k : {"low_severe", "low_mild", "high_mild", "high_severe"}) {
    sj["outliers"][k] = static_cast<int64_t>(std::llround(sj["outliers"][k].get<double>() * n / kept));
  }
  sj["sample"] = {{"values", values.values().size()}, {"of", values.count()}};
  return sj;
}

std::string dimension_value(const db::RunRow& r, const std::string& d) {
  if (d.rfind(kTagDimension, 0) == 0) {
    // Tags NAME:VALUE (from a TSV column or a manifest mapping); the name
    // compares case-insensitively, as the TSV header does.
    const std::string name = d.substr(kTagDimension.size());
    auto lower = [](std::string x) {
      for (char& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return x;
    };
    const std::string want = lower(name) + ":";
    std::vector<std::string> values;
    for (const auto& t : r.tags)
      if (t.size() >= want.size() && lower(t.substr(0, want.size())) == want)
        values.push_back(t.substr(want.size()));
    if (values.empty()) return kNoTag;
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    std::string out;
    for (const auto& v : values) out += (out.empty() ? "" : "+") + v;
    return out;
  }
  if (d == "model") return r.model;
  if (d == "resolution") return std::to_string(r.width) + "x" + std::to_string(r.height);
  if (d == "steps") return std::to_string(r.steps);
  if (d == "precision") return r.precision;
  if (d == "sampler") return r.sampler;
  if (d == "lora") return lora_label(r);
  if (d == "mode") return run_mode(r);
  // The decode's dtype as the job asked: "auto" when it left it to the precision.
  if (d == "vae") return r.vae_precision.empty() ? std::string("auto") : r.vae_precision;
  // Jobs that shared the run's UNet batch (docs/batching.md); "?" without a result.
  if (d == "shared") return r.batch_size ? std::to_string(*r.batch_size) : std::string("?");
  // "model" when the job kept the model's own spacing.
  if (d == "spacing") return r.timestep_spacing.empty() ? std::string("model") : r.timestep_spacing;
  // "off" for guidance <= 1 (one UNet pass a step), else the scale.
  if (d == "guidance")
    return r.guidance <= 1.0 ? std::string("off") : spec::format_guidance(static_cast<float>(r.guidance));
  if (d == "gpu") return r.gpu.empty() ? "?" : r.gpu;
  if (d == "host") return r.host.empty() ? "?" : r.host;
  if (d == "build") return r.build_sha.empty() ? "?" : r.build_sha;
  if (d == "batch") return std::to_string(r.batch_id);
  if (d == "day") {
    const auto t = static_cast<std::time_t>(r.time);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[16];
    std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
    return buf;
  }
  return "?";
}

json parity_summary(const std::vector<const db::RunRow*>& rows) {
  ParityAccumulator acc;
  for (const auto* r : rows) acc.add(*r);
  return acc.to_json();
}

Result<json> compute_stats(const std::vector<RunSample>& samples, const StatsOptions& options) {
  StatsAccumulator acc(options);
  for (const auto& s : samples) acc.add(s);
  return acc.to_json();
}

ParityKey parity_key(const db::RunRow& r) {
  return {r.model,     r.prompt,      r.width,        r.height,           r.steps,
          r.sampler,   r.precision,   r.guidance,     r.timestep_spacing, r.guidance_rescale,
          run_mode(r), lora_label(r), r.vae_precision};
}

json parity_table(const std::vector<db::RunRow>& rows) {
  std::map<ParityKey, ParityAccumulator> groups;
  for (const auto& r : rows) groups[parity_key(r)].add(r);
  return parity_rows(groups);
}

json parity_rows(const std::map<ParityKey, ParityAccumulator>& groups) {
  json out = json::array();
  for (const auto& [k, acc] : groups) {
    json p = acc.to_json();
    p["model"] = std::get<0>(k);
    p["prompt"] = std::get<1>(k);
    p["width"] = std::get<2>(k);
    p["height"] = std::get<3>(k);
    p["steps"] = std::get<4>(k);
    p["sampler"] = std::get<5>(k);
    p["precision"] = std::get<6>(k);
    p["guidance"] = std::get<7>(k);
    if (!std::get<8>(k).empty()) p["timestep_spacing"] = std::get<8>(k);
    if (std::get<9>(k) != 0) p["guidance_rescale"] = std::get<9>(k);
    if (std::get<10>(k) != "txt2img") p["mode"] = std::get<10>(k);
    if (std::get<11>(k) != "none") p["lora"] = std::get<11>(k);
    if (!std::get<12>(k).empty()) p["vae_precision"] = std::get<12>(k);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace hipq::coordinator::query
