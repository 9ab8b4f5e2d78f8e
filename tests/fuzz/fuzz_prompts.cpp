#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/utf8.h"
#include "coordinator/prompt_sources.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void prompts(std::string_view bytes) {
  if (bytes.empty()) return;
  coordinator::PromptFileOptions o;
  static constexpr coordinator::PromptFormat kFormats[] = {coordinator::PromptFormat::kTsv,
                                                           coordinator::PromptFormat::kJsonl,
                                                           coordinator::PromptFormat::kText};
  o.format = kFormats[static_cast<unsigned char>(bytes[0]) % 3];
  if (static_cast<unsigned char>(bytes[0]) & 0x80) o.limit = 3;
  coordinator::PromptFile f = coordinator::parse_prompt_text(bytes.substr(1), o);
  for (const auto& p : f.prompts) {
    // What the coordinator does next with an accepted prompt: JSON settings.
    HIPQ_CHECK(find_invalid_utf8(p.text) == std::string_view::npos);
    nlohmann::json j = {{"prompt", p.text}, {"negative", p.negative.value_or("")}, {"tags", p.tags}};
    (void)j.dump();
  }
  for (const auto& problem : f.problems) HIPQ_CHECK(!problem.message.empty());
}

}  // namespace hipq::fuzz
