#include "coordinator/yaml_guard.h"

namespace hipq::coordinator {

size_t find_block_flow_entry(std::string_view t) {
  int depth = 0;              // [ / { nesting
  bool sq = false, dq = false;  // inside a quoted scalar (may span lines)
  int block_parent = -1;      // indentation of the line that opened a block scalar, or -1
  size_t pos = 0;
  while (pos < t.size()) {
    size_t end = t.find('\n', pos);
    if (end == std::string_view::npos) end = t.size();
    const std::string_view line = t.substr(pos, end - pos);
    int indent = 0;
    while (static_cast<size_t>(indent) < line.size() && line[indent] == ' ') ++indent;
    const bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
    if (block_parent >= 0 && !sq && !dq) {
      if (blank || indent > block_parent) {
        pos = end + 1;
        continue;
      }
      block_parent = -1;
    }
    bool token_start = true;
    for (size_t j = 0; j < line.size(); ++j) {
      const char c = line[j];
      // A closed quoted scalar ends a token: what follows it directly (`'a',b`)
      // starts the next one.
      if (sq) {
        if (c == '\'') {
          if (j + 1 < line.size() && line[j + 1] == '\'') {
            ++j;  // '' is a quote inside
          } else {
            sq = false;
            token_start = true;
          }
        }
        continue;
      }
      if (dq) {
        if (c == '\\') {
          ++j;
        } else if (c == '"') {
          dq = false;
          token_start = true;
        }
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        token_start = true;
        continue;
      }
      if (c == '#' && (j == 0 || line[j - 1] == ' ' || line[j - 1] == '\t')) break;  // comment
      if (token_start) {
        if (c == '\'') {
          sq = true;
          token_start = false;
          continue;
        }
        if (c == '"') {
          dq = true;
          token_start = false;
          continue;
        }
        if (c == ',' && depth == 0) return pos + j;
        if ((c == '|' || c == '>') && depth == 0) {
          // A block scalar header when only indicators (+ - digits) and a comment follow.
          size_t k = j + 1;
          while (k < line.size() && (line[k] == '+' || line[k] == '-' || (line[k] >= '0' && line[k] <= '9'))) ++k;
          while (k < line.size() && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) ++k;
          if (k == line.size() || line[k] == '#') {
            block_parent = indent;
            break;
          }
        }
      }
      if (c == '[' || c == '{') {
        if (depth > 0 || token_start) {
          ++depth;
          token_start = true;
          continue;
        }
      } else if ((c == ']' || c == '}') && depth > 0) {
        --depth;
      } else if (c == ',' && depth > 0) {
        token_start = true;
        continue;
      }
      token_start = false;
    }
    pos = end + 1;
  }
  return std::string_view::npos;
}

}  // namespace hipq::coordinator
