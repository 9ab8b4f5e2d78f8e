// hipq tokenize: CLIP token ids of texts, one JSON array per line.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/tokenizer.h"

namespace hipq::cli {

void add_tokenize_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Print the CLIP token ids of each TEXT as a JSON array (with BOS/EOS, truncated, not padded)");
  struct Opts {
    std::string vocab, merges;
    int max_length = engine::ClipTokenizer::kMaxLength;
    std::vector<std::string> texts;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--vocab", opts->vocab,
                  "vocab.json (with --merges) or bpe_simple_vocab_16e6.txt.gz; default: the bundled CLIP vocabulary");
  cmd->add_option("--merges", opts->merges, "merges.txt beside a vocab.json");
  cmd->add_option("--max-length", opts->max_length, "truncate to this many ids incl. BOS/EOS; 0 = no truncation")
      ->capture_default_str();
  cmd->add_option("text", opts->texts, "texts to tokenize")->required();
  cmd->callback([opts, &exit_code] {
    std::filesystem::path vocab = opts->vocab;
    if (vocab.empty()) {
      auto found = engine::find_default_clip_vocab();
      if (!found.ok()) {
        spdlog::error("{}", found.status().ToString());
        exit_code = kExitUsage;
        return;
      }
      vocab = *found;
    }
    if (!opts->merges.empty() && vocab.extension() == ".gz") {
      spdlog::error("--merges goes with a vocab.json, not with {}", vocab.string());
      exit_code = kExitUsage;
      return;
    }
    auto tok = engine::ClipTokenizer::load(vocab, opts->merges);
    if (!tok.ok()) {
      spdlog::error("{}", tok.status().ToString());
      exit_code = kExitFailure;
      return;
    }
    for (const auto& text : opts->texts) fmt::print("{}\n", nlohmann::json(tok->encode(text, opts->max_length)).dump());
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
