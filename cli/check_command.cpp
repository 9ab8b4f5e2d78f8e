// hipq check MANIFEST: validate a manifest (and its prompt files) without a
// coordinator, run the preflight (coordinator/preflight.h), print every
// problem or a summary of the jobs it would queue.
#include <fmt/format.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "coordinator/manifest.h"
#include "coordinator/preflight.h"
#include "spec/parity_gate.h"

namespace hipq::cli {
namespace {

struct CheckFlags {
  std::string manifest;
  std::string format = "text";
  bool list_jobs = false;
};

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size();
    if (nl > start) out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

int run_check(const CheckFlags& f) {
  auto m = coordinator::parse_manifest(f.manifest);
  if (!m.ok()) {
    bool invalid = m.status().code() == StatusCode::kInvalidArgument;
    std::vector<std::string> problems = invalid ? split_lines(m.status().message())
                                                : std::vector<std::string>{m.status().ToString()};
    if (f.format == "json") {
      fmt::print("{}\n", nlohmann::json({{"ok", false}, {"manifest", f.manifest}, {"problems", problems}}).dump(2));
    } else {
      for (const auto& p : problems) fmt::print(stderr, "{}\n", p);
      fmt::print(stderr, "{}: {} problem{}; nothing would be queued\n", f.manifest, problems.size(),
                 problems.size() == 1 ? "" : "s");
    }
    return kExitUsage;
  }
  if (Status pre = coordinator::preflight(*m); !pre.ok()) {
    if (f.format == "json") {
      fmt::print("{}\n", nlohmann::json({{"ok", false}, {"manifest", f.manifest}, {"problems", {pre.message()}}}).dump(2));
    } else {
      fmt::print(stderr, "{}: {}\n{}: 1 problem; nothing would be queued\n", f.manifest, pre.message(), f.manifest);
    }
    return kExitUsage;
  }
  std::vector<coordinator::ManifestJob> jobs = m->expand_jobs();
  if (f.format == "json") {
    nlohmann::json j = {{"ok", true},
                        {"manifest", m->path.string()},
                        {"sha256", m->sha256},
                        {"batch", m->batch_name},
                        {"model", m->model},
                        {"priority", m->priority},
                        {"max_attempts", m->max_attempts},
                        {"prompts", m->prompts.size()},
                        {"jobs", jobs.size()},
                        {"output_root", m->outputs.root.string()}};
    if (f.list_jobs) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& job : jobs) {
        list.push_back({{"ordinal", job.ordinal}, {"output_dir", job.output_dir}, {"settings", job.settings.to_json()},
                        {"tags", job.tags}});
      }
      j["job_list"] = list;
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }
  fmt::print("{}: OK\n", m->path.string());
  fmt::print("  batch        {} (priority {}, max attempts {})\n", m->batch_name, m->priority, m->max_attempts);
  fmt::print("  model        {}\n", m->model);
  fmt::print("  settings     {}x{}, {} steps, guidance {}, {}, {}\n", m->defaults.width, m->defaults.height,
             m->defaults.steps, m->defaults.guidance, m->defaults.sampler, m->defaults.precision);
  for (size_t i = 0; i < m->defaults.loras.size(); ++i) {
    fmt::print("  lora         {} at scale {} (sha256 {})\n", m->defaults.loras[i].path,
               spec::format_guidance(m->defaults.loras[i].scale), m->defaults.inputs.loras[i].substr(0, 12));
  }
  if (!m->defaults.init_image.empty()) {
    fmt::print("  init image   {} (sha256 {}), strength {}: the last {} of the {} steps\n", m->defaults.init_image,
               m->defaults.inputs.init_image.substr(0, 12), spec::format_guidance(static_cast<float>(m->defaults.strength)),
               spec::denoising_steps(m->defaults.steps, static_cast<float>(m->defaults.strength)), m->defaults.steps);
  }
  if (!m->defaults.refiner.empty()) {
    fmt::print("  refiner      {} from {} of the schedule (aesthetic scores {} / {})\n", m->defaults.refiner,
               spec::format_guidance(static_cast<float>(m->defaults.refiner_switch_at)),
               spec::format_guidance(static_cast<float>(m->defaults.aesthetic_score)),
               spec::format_guidance(static_cast<float>(m->defaults.negative_aesthetic_score)));
  }
  fmt::print("  jobs         {} ({} prompt{} x seeds x {} repeat{})\n", jobs.size(), m->prompts.size(),
             m->prompts.size() == 1 ? "" : "s", m->defaults.repeats, m->defaults.repeats == 1 ? "" : "s");
  fmt::print("  parity       golden {}, gate {}\n", m->parity.golden.empty() ? "none" : m->parity.golden,
             m->parity.gate == spec::ParityGate{}
                 ? fmt::format("default (cosine >= {:g}; fp8 {:g})", spec::kDefaultCosineMin,
                               spec::kDefaultCosineMinFp8)
                 : m->parity.gate.to_json().dump());
  fmt::print("  outputs      {} ({})\n", m->outputs.root.string(), fmt::join(m->outputs.save, ", "));
  if (f.list_jobs) {
    for (const auto& job : jobs) {
      fmt::print("  {:>6}  {}  seed {}  {}\n", job.ordinal, job.output_dir, job.seed, job.prompt);
    }
  }
  return kExitOk;
}

}  // namespace

void add_check_command(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<CheckFlags>();
  auto* cmd = app.add_subcommand(
      "check", "Validate a manifest and its prompt files; print every problem, or the jobs it would queue");
  cmd->add_option("manifest", flags->manifest, "manifest file (YAML, see docs/manifest.md)")->required();
  cmd->add_option("--format", flags->format, "text | json")->check(CLI::IsMember({"text", "json"}));
  cmd->add_flag("--list-jobs", flags->list_jobs, "also list every job: ordinal, output folder, seed, prompt");
  cmd->callback([flags, &exit_code] { exit_code = run_check(*flags); });
}

}  // namespace hipq::cli
