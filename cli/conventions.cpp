#include "cli/conventions.h"

#include <algorithm>
#include <iostream>

#include "cli/commands.h"

namespace hipq::cli {
namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string path_of(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    path = a->get_parent() ? " " + a->get_name() + path : "hipq" + path;
  }
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}

CLI::App* find_subcommand(CLI::App* app, const std::string& name) {
  for (CLI::App* s : app->get_subcommands([](CLI::App*) { return true; })) {
    if (s->get_name() == name) return s;
  }
  return nullptr;
}

bool is_global_option(const std::string& arg) { return arg == "--log-level" || arg.rfind("--log-level=", 0) == 0; }

// The deepest subcommand named by the leading words of `args`.
CLI::App* command_of(CLI::App& app, const std::vector<std::string>& args) {
  CLI::App* at = &app;
  for (const auto& a : args) {
    if (a.empty() || a[0] == '-') continue;
    if (CLI::App* s = find_subcommand(at, a)) at = s;
  }
  return at;
}

void set_footers(CLI::App* app) {
  for (CLI::App* s : app->get_subcommands([](CLI::App*) { return true; })) {
    auto it = help_examples().find(path_of(s));
    if (it != help_examples().end()) {
      std::string footer = "\nExamples:";
      for (const auto& line : it->second) footer += "\n  " + line;
      s->footer(footer);
    }
    set_footers(s);
  }
}

}  // namespace

const std::map<std::string, std::vector<std::string>>& help_examples() {
  static const std::map<std::string, std::vector<std::string>> examples = {
      {"hipq", {"hipq run examples/quickstart.yaml", "hipq help run"}},
      {"hipq version", {"hipq version", "hipq --version"}},
      {"hipq run", {"hipq run examples/quickstart.yaml",
                    "HIPQ_DB=sweep.db hipq run examples/seed-sweep.yaml --new-batch",
                    "hipq run examples/seed-sweep.yaml --metrics-bind 127.0.0.1:9464"}},
      {"hipq check", {"hipq check examples/quickstart.yaml", "hipq check examples/seed-sweep.yaml --list-jobs"}},
      {"hipq coordinator", {"hipq coordinator --db hipq.db --bind tcp://127.0.0.1:5555",
                            "hipq coordinator --db hipq.db --metrics-bind 127.0.0.1:9464",
                            "hipq coordinator --bind tcp://0.0.0.0:5555 --server-key keys/coordinator.key "
                            "--authorized-keys keys/authorized"}},
      {"hipq worker", {"hipq worker --connect tcp://127.0.0.1:5555", "hipq worker --all-devices --connect tcp://queue:5555"}},
      {"hipq submit", {"hipq submit examples/quickstart.yaml --wait", "hipq submit sweep.yaml --priority 5"}},
      {"hipq status", {"hipq status", "hipq status quickstart --format json"}},
      {"hipq cancel", {"hipq cancel 3", "hipq cancel quickstart"}},
      {"hipq workers", {"hipq workers", "hipq workers --format json"}},
      {"hipq workers forget", {"hipq workers forget gpu-box/hip0 --db /srv/hipq/hipq.db"}},
      {"hipq drain", {"hipq drain --all", "hipq drain gpu-box/hip0/1234"}},
      {"hipq keygen", {"hipq keygen keys/coordinator.key", "hipq keygen keys/worker-1.key --force"}},
      {"hipq weights", {"hipq weights export synthetic:tiny-sdxl --out tiny-sdxl"}},
      {"hipq weights export", {"hipq weights export synthetic:tiny-sdxl --out tiny-sdxl",
                               "hipq weights export model.safetensors --out model --dtype f16"}},
      {"hipq generate", {"hipq generate --model synthetic:tiny-sdxl --prompt 'a red cube' --width 64 --height 64 "
                         "--steps 4 --out out/cube"}},
      {"hipq golden", {"hipq golden list", "hipq golden promote batch:1"}},
      {"hipq golden import", {"hipq golden import goldens/", "hipq golden import g.safetensors --replace"}},
      {"hipq golden list", {"hipq golden list", "hipq golden list --db other.db"}},
      {"hipq golden show", {"hipq golden show 3fa2"}},
      {"hipq golden verify", {"hipq golden verify"}},
      {"hipq golden promote", {"hipq golden promote batch:1", "hipq golden promote job:7 --replace"}},
      {"hipq golden floor", {"hipq golden floor --against goldens-second-gpu/"}},
      {"hipq runs", {"hipq runs --batch 1", "hipq runs --state failed --format json"}},
      {"hipq stats", {"hipq stats", "hipq stats --group-by gpu,precision --format csv"}},
      {"hipq compare", {"hipq compare build=abc123 build=def456", "hipq compare batch=1 batch=2 --phase denoise"}},
      {"hipq report", {"hipq report --html report.html", "hipq report --batch 2 --html batch2.html"}},
      {"hipq tokenize", {"hipq tokenize 'a photo of a cat'"}},
      {"hipq randn", {"hipq randn --seed 0 --shape 1,4,128,128 --out noise.safetensors"}},
  };
  return examples;
}

void add_help_examples(CLI::App& app) {
  auto it = help_examples().find("hipq");
  std::string footer = "\nExamples:";
  for (const auto& line : it->second) footer += "\n  " + line;
  app.footer(footer + "\n\n`hipq help COMMAND` or `hipq COMMAND --help` for a command's flags.");
  set_footers(&app);
}

std::string closest_name(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = 3;
  for (const auto& k : known) {
    if (!word.empty() && k.rfind(word, 0) == 0 && word.size() >= 3) return k;
    size_t d = edit_distance(word, k);
    if (d < best_d && d <= std::max<size_t>(1, k.size() / 3 + 1)) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

int answer_before_parse(CLI::App& app, const std::vector<std::string>& args) {
  size_t i = 0;
  while (i < args.size() && is_global_option(args[i])) i += args[i].find('=') == std::string::npos ? 2 : 1;
  if (i >= args.size()) return -1;
  const std::string& first = args[i];
  if (first == "help") {
    CLI::App* at = &app;
    for (size_t k = i + 1; k < args.size(); ++k) {
      CLI::App* next = find_subcommand(at, args[k]);
      if (!next) {
        std::string near = closest_name(args[k], subcommand_names(at));
        std::cerr << "hipq help: '" << args[k] << "' is not a command of " << path_of(at)
                  << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\n";
        return kExitUsage;
      }
      at = next;
    }
    std::cout << at->help();
    return kExitOk;
  }
  if (first.empty() || first[0] == '-') return -1;
  if (find_subcommand(&app, first)) return -1;
  std::string near = closest_name(first, subcommand_names(&app));
  std::cerr << "hipq: unknown command '" << first << "'" << (near.empty() ? "" : "; did you mean '" + near + "'?")
            << "\nRun 'hipq --help' for the list of commands.\n";
  return kExitUsage;
}

int answer_parse_error(CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e) {
  if (dynamic_cast<const CLI::CallForHelp*>(&e) || dynamic_cast<const CLI::CallForAllHelp*>(&e) ||
      dynamic_cast<const CLI::CallForVersion*>(&e)) {
    return app.exit(e);
  }
  CLI::App* cmd = command_of(app, args);
  std::cerr << path_of(cmd) << ": " << e.what() << "\n";
  for (const auto& a : args) {
    if (a.size() < 2 || a[0] != '-' || a == "--") continue;
    std::string flag = a.substr(0, a.find('='));
    bool known = false;
    std::vector<std::string> names;
    for (const CLI::App* at = cmd; at != nullptr; at = at->get_parent()) {
      if (at->get_option_no_throw(flag) != nullptr) known = true;
      for (const CLI::Option* o : at->get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
      }
    }
    if (known) continue;
    std::string near = closest_name(flag, names);
    if (!near.empty()) std::cerr << "  " << flag << ": did you mean '" << near << "'?\n";
  }
  std::cerr << "Run '" << path_of(cmd) << " --help' for usage.\n";
  return kExitUsage;
}

}  // namespace hipq::cli
