#include "base/byte_size.h"

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "base/number_format.h"

namespace hipq {
namespace {

struct Unit {
  std::string_view name;
  int shift;
};
// "GB" as cards are sold: a "8 GB" card has 8 GiB.
constexpr std::array<Unit, 14> kUnits{{{"", 0},
                                       {"b", 0},
                                       {"k", 10},
                                       {"kb", 10},
                                       {"kib", 10},
                                       {"m", 20},
                                       {"mb", 20},
                                       {"mib", 20},
                                       {"g", 30},
                                       {"gb", 30},
                                       {"gib", 30},
                                       {"t", 40},
                                       {"tb", 40},
                                       {"tib", 40}}};

Status bad_size(std::string_view text, std::string_view why) {
  std::string m;
  m.append("'").append(text.substr(0, 64)).append("' is not a memory size (").append(why);
  m.append("): write a number of bytes or one with a binary unit, e.g. 8GiB, 6144MiB, 7.5G");
  return Status::InvalidArgument(m);
}

}  // namespace

Result<int64_t> parse_byte_size(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return bad_size(text, "empty");
  if (s.size() > 64) return bad_size(text, "too long");
  size_t i = 0;
  bool dot = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || (s[i] == '.' && !dot))) {
    dot = dot || s[i] == '.';
    ++i;
  }
  const std::string number(s.substr(0, i));
  if (number.empty() || number == ".") return bad_size(text, "no number");
  std::string_view rest = s.substr(i);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  std::string unit;
  for (char c : rest) unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  const Unit* found = nullptr;
  for (const Unit& u : kUnits)
    if (u.name == unit) found = &u;
  if (found == nullptr) return bad_size(text, "unknown unit '" + std::string(rest.substr(0, 16)) + "'");
  const double value = std::strtod(number.c_str(), nullptr);
  const double bytes = std::ldexp(value, found->shift);
  if (!std::isfinite(bytes) || bytes > std::ldexp(1.0, 60)) return bad_size(text, "larger than 2^60 bytes");
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_byte_size(int64_t bytes) {
  static constexpr std::array<std::string_view, 5> kNames{"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (u + 1 < kNames.size() && std::fabs(v) >= 1024.0) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return std::to_string(bytes) + " B";
  return format_significant(v, 3) + " " + std::string(kNames[u]);
}

}  // namespace hipq
