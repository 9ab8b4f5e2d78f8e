// The CLI's conventions, in one place for every subcommand:
//   - `hipq --version` (one line: the version and git sha);
//   - `hipq help [SUBCOMMAND...]` prints that command's --help;
//   - every --help ends with examples (help_examples(); a subcommand
//     without an entry there fails HelpExamples.EverySubcommandHasThem);
//   - a misspelt subcommand or flag gets "did you mean ..." (the closest
//     name within edit distance 2, or a unique prefix);
//   - every usage error exits kExitUsage (2), never CLI11's own codes.
// Thread safety: CLI parsing only.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

namespace hipq::cli {

// "hipq SUB [SUBSUB]" → example lines shown under "Examples:".
const std::map<std::string, std::vector<std::string>>& help_examples();
// Sets the examples footer of every (nested) subcommand of `app`.
void add_help_examples(CLI::App& app);
// The closest of `known` to `word`: "" when none is close enough.
std::string closest_name(const std::string& word, const std::vector<std::string>& known);
// Handles `hipq help ...` and an unknown subcommand before parsing; returns
// an exit code when it answered (the caller returns it), else -1.
int answer_before_parse(CLI::App& app, const std::vector<std::string>& args);
// Prints a parse error (with a did-you-mean for an unknown subcommand or flag
// of the command that was being parsed) and returns the exit code: 0 for
// --help / --version, kExitUsage otherwise.
int answer_parse_error(CLI::App& app, const std::vector<std::string>& args, const CLI::ParseError& e);

}  // namespace hipq::cli
