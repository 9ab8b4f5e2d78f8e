// did_you_mean: the suggestion that follows "unknown X 'word'" in an error
// message: the known name closest to `word` (case-insensitive edit distance
// at most max(2, |word| / 3)), or one that starts with it.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace hipq {

// "; did you mean 'seeds'?" or "" when nothing is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& known);

// Levenshtein distance, ASCII case folded.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace hipq
