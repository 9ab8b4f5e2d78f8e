// hipq golden: the golden store — import (validating provenance and hashes),
// list, show, verify, promote (pin a trusted run's outputs), floor (measure
// the reference's own noise floor against a second golden set).
//
// Files live in the store directory (default <db dir>/goldens, where the
// coordinator and workers look them up by key); rows in the goldens table.
// The row's provenance column holds {"provenance", "model", "weights_sha256",
// "settings", "latent_shape", "has_image"[, "floor"]} (docs/golden-format.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "base/build_info.h"
#include "base/fs.h"
#include "cli/commands.h"
#include "db/database.h"
#include "db/golden_store.h"
#include "engine/golden.h"
#include "engine/parity.h"
#include "engine/safetensors.h"
#include "spec/parity_gate.h"
#include "spec/png.h"

namespace hipq::cli {
namespace {

namespace fs = std::filesystem;

struct GoldenArgs {
  std::string db;
  std::string store;
  std::vector<std::string> paths;
  std::string key;
  std::string spec;
  std::string against;
  bool allow_unpinned = false;
  bool replace = false;
};

std::string default_db() {
  const char* env = std::getenv("HIPQ_DB");
  return env != nullptr && *env ? env : "hipq.db";
}

fs::path store_dir(const GoldenArgs& a) {
  if (!a.store.empty()) return fs::absolute(a.store);
  return fs::absolute(fs::path(a.db)).parent_path() / "goldens";
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string iso_utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<std::unique_ptr<db::Database>> open_db(const GoldenArgs& a) {
  auto d = db::Database::open_and_migrate(a.db);
  if (!d.ok()) return d.status().WithContext("--db " + a.db);
  return d;
}

db::GoldenFileFacts facts_of(const engine::Golden& g) {
  return {static_cast<const spec::GoldenHeader&>(g), g.latent_shape, g.has_image(), g.pinned};
}

nlohmann::json row_json(const engine::Golden& g) { return db::golden_row_json(facts_of(g)); }

// Files named, directories expanded to their *.safetensors (sorted).
std::vector<fs::path> expand(const std::vector<std::string>& paths) {
  std::vector<fs::path> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> in_dir;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.path().extension() == ".safetensors") in_dir.push_back(e.path());
      std::sort(in_dir.begin(), in_dir.end());
      out.insert(out.end(), in_dir.begin(), in_dir.end());
    } else {
      out.emplace_back(p);
    }
  }
  return out;
}

std::string describe_settings(const nlohmann::json& row) {
  const auto& s = row.value("settings", nlohmann::json::object());
  std::string prompt = s.value("prompt", "");
  if (prompt.size() > 40) prompt = prompt.substr(0, 37) + "...";
  return fmt::format("seed {} {}x{} {} steps {} g{} \"{}\"", s.value("seed", uint64_t{0}), s.value("width", 0),
                     s.value("height", 0), s.value("steps", 0), s.value("sampler", ""),
                     spec::format_guidance(s.value("guidance", 0.0f)), prompt);
}

int run_import(const GoldenArgs& a) {
  auto files = expand(a.paths);
  if (files.empty()) {
    spdlog::error("golden import: no golden files in {}", fmt::join(a.paths, " "));
    return kExitUsage;
  }
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden import: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  const fs::path dir = store_dir(a);
  if (Status st = check_writable_directory(dir); !st.ok())
    return spdlog::error("golden import: store {}: {}", dir.string(), st.message()), kExitFailure;
  int failed = 0, imported = 0, same = 0;
  for (const auto& f : files) {
    engine::GoldenReadOptions ro;
    ro.allow_unpinned = a.allow_unpinned;
    auto g = engine::read_golden(f, ro);
    if (!g.ok()) {
      fmt::print(stderr, "refused {}: {}\n", f.string(), g.status().message());
      ++failed;
      continue;
    }
    auto kept = store.import_file(dir, f, facts_of(*g), a.replace, now_seconds());
    if (!kept.ok()) {
      fmt::print(stderr, "refused {}: {}\n", f.string(), kept.status().message());
      ++failed;
      continue;
    }
    const bool unchanged = *kept;
    unchanged ? ++same : ++imported;
    fmt::print("{} {}  {} {}  {}{}\n", unchanged ? "unchanged" : "imported ", g->key.substr(0, 16),
               g->provenance.reference, g->provenance.reference_version,
               describe_settings(row_json(*g)), g->pinned ? "" : "  [UNPINNED]");
  }
  fmt::print("{} imported, {} already present, {} refused (store {})\n", imported, same, failed, dir.string());
  return failed ? kExitFailure : kExitOk;
}

int run_list(const GoldenArgs& a) {
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden list: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  auto rows = store.list();
  if (!rows.ok()) return spdlog::error("golden list: {}", rows.status().message()), kExitFailure;
  fmt::print("{:<16}  {:<8}  {:<22}  {:<20}  {:<5}  {}\n", "KEY", "PINNED", "REFERENCE", "DEVICE", "PREC",
             "SETTINGS");
  for (const auto& r : *rows) {
    const auto& p = r.provenance.value("provenance", nlohmann::json::object());
    fmt::print("{:<16}  {:<8}  {:<22}  {:<20}  {:<5}  {}\n", r.key.substr(0, 16), r.pinned ? "pinned" : "UNPINNED",
               r.reference + " " + p.value("reference_version", ""), p.value("device", "").substr(0, 20),
               p.value("precision", ""), describe_settings(r.provenance));
  }
  fmt::print("{} golden(s)\n", rows->size());
  return kExitOk;
}

int run_show(const GoldenArgs& a) {
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden show: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  auto r = store.find_by_prefix(a.key);
  if (!r.ok()) return spdlog::error("golden show: {}", r.status().message()), kExitFailure;
  nlohmann::json j = r->provenance;
  j["key"] = r->key;
  j["path"] = r->path;
  j["sha256"] = r->sha256;
  j["pinned"] = r->pinned;
  j["reference"] = r->reference;
  j["imported_at"] = r->imported_at;
  if (!r->pinned) j["warning"] = "UNPINNED: imported with --allow-unpinned, provenance incomplete";
  fmt::print("{}\n", j.dump(2));
  return kExitOk;
}

// What a job judged against this golden is graded on: the latent always, the
// image when the golden has one (with the default gate's bound at its
// precision), and the floor measured against another reference, if any.
std::string golden_judgement(const engine::Golden& g, const nlohmann::json& provenance) {
  std::string shape;
  for (int64_t d : g.latent_shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::string out = "latent [" + shape + "]";
  if (g.has_image()) {
    out += fmt::format("  image {}x{} (default gate: cosine >= {:g}, psnr >= {:g} dB at {})", g.image_width,
                       g.image_height, spec::default_cosine_min(g.settings.precision),
                       spec::default_psnr_min(g.settings.precision), g.settings.precision);
  } else {
    out += fmt::format("  no image (latent-only gate: cosine >= {:g} at {})",
                       spec::default_cosine_min(g.settings.precision), g.settings.precision);
  }
  if (provenance.is_object() && provenance.contains("floor") && provenance["floor"].is_object()) {
    const auto& f = provenance["floor"];
    auto num = [&](const char* k, const char* fmt_spec) -> std::string {
      if (!f.contains(k) || f[k].is_null()) return "-";
      if (f[k].is_string()) return f[k].get<std::string>();
      return fmt::format(fmt::runtime(fmt_spec), f[k].get<double>());
    };
    out += "  floor: cosine " + num("cosine", "{:.8f}") + " max_abs " + num("max_abs", "{:.3g}") + " psnr " +
           num("psnr", "{:.2f}") + " dB";
  }
  return out;
}

int run_verify(const GoldenArgs& a) {
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden verify: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  auto rows = store.list();
  if (!rows.ok()) return spdlog::error("golden verify: {}", rows.status().message()), kExitFailure;
  int bad = 0, latent_only = 0;
  for (const auto& r : *rows) {
    std::string state = "OK";
    std::string detail;
    std::error_code ec;
    if (!fs::exists(r.path, ec)) {
      state = "MISSING";
      detail = r.path;
    } else if (auto sha = sha256_file(r.path); !sha.ok()) {
      state = "UNREADABLE";
      detail = sha.status().message();
    } else if (*sha != r.sha256) {
      state = "MODIFIED";
      detail = fmt::format("{} hashes to {}, recorded {}", r.path, *sha, r.sha256);
    } else {
      engine::GoldenReadOptions ro;
      ro.allow_unpinned = !r.pinned;
      if (auto g = engine::read_golden(r.path, ro); !g.ok()) {
        state = "CORRUPT";
        detail = g.status().message();
      } else if (g->key != r.key) {
        state = "WRONG_KEY";
        detail = "file holds key " + g->key;
      } else {
        detail = golden_judgement(*g, r.provenance);
        if (!g->has_image()) ++latent_only;
      }
    }
    if (state != "OK") ++bad;
    fmt::print("{:<10} {}{}{}\n", state, r.key.substr(0, 16), r.pinned ? "" : " [UNPINNED]",
               detail.empty() ? "" : "  " + detail);
  }
  fmt::print("{} golden(s), {} bad, {} latent-only\n", rows->size(), bad, latent_only);
  return bad ? kExitFailure : kExitOk;
}

// "batch:N", "job:N", or a plain number (a batch).
Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> parse_spec(const std::string& spec) {
  std::string kind = "batch", num = spec;
  if (auto c = spec.find(':'); c != std::string::npos) {
    kind = spec.substr(0, c);
    num = spec.substr(c + 1);
  }
  char* end = nullptr;
  long long v = std::strtoll(num.c_str(), &end, 10);
  if (num.empty() || *end != '\0' || v <= 0 || (kind != "batch" && kind != "job" && kind != "run"))
    return Status::InvalidArgument("\"" + spec + "\" is not a run or batch; use batch:N, job:N (or run:N) or N");
  if (kind == "batch") return std::make_pair(std::optional<int64_t>(), std::optional<int64_t>(v));
  return std::make_pair(std::optional<int64_t>(v), std::optional<int64_t>());
}

Result<engine::Golden> golden_from_job(const db::PromotableJob& job) {
  nlohmann::json outputs;
  try {
    outputs = nlohmann::json::parse(job.outputs);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(fmt::format("job {}: results.outputs is not JSON: {}", job.job_id, e.what()));
  }
  fs::path latent_path, png_path;
  for (const auto& o : outputs) {
    fs::path p = fs::path(job.output_root) / o.value("path", "");
    if (o.value("kind", "") == "latent") latent_path = p;
    if (o.value("kind", "") == "png") png_path = p;
  }
  if (latent_path.empty())
    return Status::NotFound(fmt::format("job {} saved no latent (outputs: {}); only runs that save the latent "
                                        "can be promoted",
                                        job.job_id, job.outputs));
  HIPQ_ASSIGN_OR_RETURN(auto st, engine::SafetensorsFile::open(latent_path));
  HIPQ_ASSIGN_OR_RETURN(auto latent, st->get("latent"));
  const auto& meta = st->metadata();
  auto get = [&](const char* k) {
    auto it = meta.find(k);
    return it == meta.end() ? std::string() : it->second;
  };
  engine::Golden g;
  try {
    auto s = spec::GenerationSettings::from_json(nlohmann::json::parse(get("settings")));
    if (!s.ok()) return s.status().WithContext(latent_path.string());
    g.settings = *s;
    std::string sched = get("scheduler_config");
    if (!sched.empty()) g.scheduler_config = nlohmann::json::parse(sched);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(latent_path.string() + ": metadata is not JSON: " + e.what());
  }
  g.model = get("model");
  g.weights_sha256 = get("weights_sha256");
  if (g.weights_sha256.empty()) return Status::Corruption(latent_path.string() + ": no weights_sha256 in metadata");
  g.latent = latent.to_f32();
  g.latent_shape = latent.shape;
  std::error_code ec;
  if (!png_path.empty() && fs::exists(png_path, ec)) {
    HIPQ_ASSIGN_OR_RETURN(spec::RgbImage img, spec::read_png(png_path));
    g.image = std::move(img.rgb);
    g.image_width = img.width;
    g.image_height = img.height;
  }
  g.provenance.reference = "hipq";
  g.provenance.reference_version = get("hipq_version").empty() ? build_info::kVersion : get("hipq_version");
  g.provenance.reference_commit = get("build_sha");
  g.provenance.device = get("device");
  g.provenance.precision = g.settings.precision;
  g.provenance.pipeline_class = "hipq::engine::Pipeline (" + get("backend") + ")";
  g.provenance.created_at = iso_utc_now();
  g.provenance.source = fmt::format("promoted from job {} of batch {} (worker {}, verdict {})", job.job_id,
                                    job.batch_id, job.worker_id, job.verdict);
  return g;
}

int run_promote(const GoldenArgs& a) {
  auto spec = parse_spec(a.spec);
  if (!spec.ok()) return spdlog::error("golden promote: {}", spec.status().message()), kExitUsage;
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden promote: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  auto jobs = store.promotable_jobs(spec->first, spec->second);
  if (!jobs.ok()) return spdlog::error("golden promote: {}", jobs.status().message()), kExitFailure;
  if (jobs->empty()) return spdlog::error("golden promote: {} has no finished jobs", a.spec), kExitFailure;
  const fs::path dir = store_dir(a);
  int failed = 0, promoted = 0;
  for (const auto& job : *jobs) {
    auto g = golden_from_job(job);
    Status st = g.status();
    if (st.ok()) {
      // The files by the digests submitted with the job (the run checked them).
      if (g->inputs.empty()) g->inputs = job.inputs;
      g->key = spec::golden_key(g->weights_sha256, g->settings, g->inputs);
      const fs::path dest = dir / spec::golden_file_name(g->key);
      auto existing = store.find(g->key);
      if (existing.ok() && existing->has_value() && !a.replace) {
        st = Status::AlreadyExists("golden " + g->key + " exists (" + (*existing)->path + "); --replace to overwrite");
      } else {
        st = engine::write_golden(dest, *g);
        if (st.ok()) {
          auto back = engine::read_golden(dest);
          st = back.ok() ? store.import_file(dir, dest, facts_of(*back), true, now_seconds()).status()
                         : back.status();
        }
      }
    }
    if (!st.ok()) {
      fmt::print(stderr, "job {}: not promoted: {}\n", job.job_id, st.message());
      ++failed;
      continue;
    }
    ++promoted;
    fmt::print("job {} -> golden {}  {}{}\n", job.job_id, g->key.substr(0, 16), describe_settings(row_json(*g)),
               g->has_image() ? fmt::format("  latent + image {}x{}", g->image_width, g->image_height)
                              : std::string("  latent only: the job saved no png, jobs judged on the latent alone"));
  }
  fmt::print("{} promoted, {} not (store {})\n", promoted, failed, dir.string());
  return failed ? kExitFailure : kExitOk;
}

int run_floor(const GoldenArgs& a) {
  auto dbr = open_db(a);
  if (!dbr.ok()) return spdlog::error("golden floor: {}", dbr.status().message()), kExitFailure;
  db::GoldenStore store(**dbr);
  // The second set, by key (same inputs at another precision or device share the key).
  std::map<std::string, std::pair<fs::path, engine::Golden>> others;
  for (const auto& f : expand({a.against})) {
    engine::GoldenReadOptions ro;
    ro.allow_unpinned = true;
    auto g = engine::read_golden(f, ro);
    if (!g.ok()) {
      fmt::print(stderr, "skipped {}: {}\n", f.string(), g.status().message());
      continue;
    }
    std::string key = g->key;
    others.emplace(key, std::make_pair(f, std::move(g).value()));
  }
  auto rows = store.list();
  if (!rows.ok()) return spdlog::error("golden floor: {}", rows.status().message()), kExitFailure;
  int measured = 0;
  double min_cos = 1.0;
  for (const auto& r : *rows) {
    auto it = others.find(r.key);
    if (it == others.end()) continue;
    engine::GoldenReadOptions ro;
    ro.allow_unpinned = !r.pinned;
    auto g = engine::read_golden(r.path, ro);
    if (!g.ok()) {
      fmt::print(stderr, "{}: {}\n", r.key.substr(0, 16), g.status().message());
      continue;
    }
    const engine::Golden& o = it->second.second;
    if (o.latent.size() != g->latent.size()) continue;
    auto m = engine::compare_latents(o.latent.data(), g->latent.data(),
                                     static_cast<int64_t>(g->latent.size()));
    if (!m.ok()) return spdlog::error("golden floor: {}", m.status().message()), kExitFailure;
    if (g->has_image() && o.has_image() && g->image.size() == o.image.size()) {
      m->psnr = engine::image_psnr(o.image.data(), g->image.data(), g->image.size());
      m->has_psnr = true;
    }
    nlohmann::json floor = m->to_json();
    floor["against"] = {{"path", fs::absolute(it->second.first).string()},
                        {"device", o.provenance.device},
                        {"precision", o.provenance.precision},
                        {"reference", o.provenance.reference + " " + o.provenance.reference_version}};
    floor["measured_at"] = iso_utc_now();
    nlohmann::json prov = r.provenance;
    prov["floor"] = floor;
    if (Status st = store.update_provenance(r.key, prov); !st.ok())
      return spdlog::error("golden floor: {}", st.message()), kExitFailure;
    ++measured;
    min_cos = std::min(min_cos, m->cosine);
    fmt::print("{}  vs {} {}: cosine {:.8f}  max_abs {:.3g}  rel_l2 {:.3g}{}\n", r.key.substr(0, 16),
               o.provenance.device, o.provenance.precision, m->cosine, m->max_abs, m->rel_l2,
               m->has_psnr ? fmt::format("  psnr {:.2f} dB", m->psnr) : "");
  }
  if (measured == 0) {
    spdlog::error("golden floor: no golden in {} shares a key with the store", a.against);
    return kExitFailure;
  }
  fmt::print("floor measured for {} golden(s); lowest cosine {:.8f}\n", measured, min_cos);
  return kExitOk;
}

}  // namespace

void add_golden_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GoldenArgs>();
  a->db = default_db();
  auto* cmd = app.add_subcommand("golden", "Golden store: import, list, show, verify, promote, floor");
  cmd->require_subcommand(1);
  cmd->fallthrough();  // --db / --store may also come after the sub-subcommand
  cmd->add_option("--db", a->db, "Database file (env HIPQ_DB)")->capture_default_str();
  cmd->add_option("--store", a->store, "Golden directory (default: <db dir>/goldens)");

  auto* imp = cmd->add_subcommand("import", "Validate golden files and add them to the store");
  imp->add_option("paths", a->paths, "Golden files or directories")->required();
  imp->add_flag("--allow-unpinned", a->allow_unpinned, "Accept incomplete provenance (marked UNPINNED)");
  imp->add_flag("--replace", a->replace, "Overwrite a stored golden of the same key");
  imp->fallthrough();
  imp->callback([a, &exit_code] { exit_code = run_import(*a); });

  auto* list = cmd->add_subcommand("list", "List stored goldens");
  list->fallthrough();
  list->callback([a, &exit_code] { exit_code = run_list(*a); });

  auto* show = cmd->add_subcommand("show", "Show one golden's provenance and settings");
  show->add_option("key", a->key, "Golden key (a unique prefix is enough)")->required();
  show->fallthrough();
  show->callback([a, &exit_code] { exit_code = run_show(*a); });

  auto* verify = cmd->add_subcommand("verify", "Check every stored golden (file present, hashes intact) and say what "
                                               "it grades: latent, image and their floors");
  verify->fallthrough();
  verify->callback([a, &exit_code] { exit_code = run_verify(*a); });

  auto* promote = cmd->add_subcommand("promote", "Pin a trusted run's outputs as goldens (reference: hipq)");
  promote->add_option("run", a->spec, "batch:N, job:N or N (a batch)")->required();
  promote->add_flag("--replace", a->replace, "Overwrite stored goldens of the same key");
  promote->fallthrough();
  promote->callback([a, &exit_code] { exit_code = run_promote(*a); });

  auto* floor = cmd->add_subcommand("floor", "Measure the reference's noise floor against a second golden set");
  floor->add_option("--against", a->against, "Goldens of the same keys made on another device")
      ->required();
  floor->fallthrough();
  floor->callback([a, &exit_code] { exit_code = run_floor(*a); });
}

}  // namespace hipq::cli
