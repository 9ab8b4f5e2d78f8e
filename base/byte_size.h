// Sizes of memory as people write them: "8GiB", "6 GiB", "512MiB", "7.5G",
// "8GB", "1073741824". Binary units (KiB, MiB, GiB, TiB; K, M, G, T and KB,
// MB, GB, TB mean the same, as device memory is sold: an "8 GB" card holds
// 8 GiB) and plain bytes (B or no unit); case-insensitive. Used for --device-memory-limit and
// HIPQ_DEVICE_MEMORY_LIMIT.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace hipq {

// InvalidArgument naming the text and the accepted forms when it is not a
// size, is negative, or is past 2^60 bytes.
Result<int64_t> parse_byte_size(std::string_view text);

// 8589934592 -> "8 GiB", 1610612736 -> "1.5 GiB", 1000 -> "1000 B": the
// largest binary unit that leaves a value >= 1, three significant digits.
std::string format_byte_size(int64_t bytes);

}  // namespace hipq
