#include "base/did_you_mean.h"

#include <algorithm>
#include <cctype>
#include <limits>

namespace hipq {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1])) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// "; did you mean 'seeds'?" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& k : known) {
    size_t d = edit_distance(word, k);
    if (d < best_d) best_d = d, best = k;
  }
  size_t limit = std::max<size_t>(2, word.size() / 3);
  if (best_d <= limit) return "; did you mean '" + best + "'?";
  // "cosine" for "cosine_min": a known key that starts with the word.
  if (word.size() >= 3) {
    for (const auto& k : known) {
      if (k.rfind(std::string(word), 0) == 0) return "; did you mean '" + k + "'?";
    }
  }
  return "";
}

}  // namespace hipq
