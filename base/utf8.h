// UTF-8 validation for text that crosses a boundary (manifests, prompt
// files, inline prompts): everything stored, serialised as protobuf string
// or JSON must be well-formed UTF-8, so it is checked where it enters, with
// a position a person can find in an editor.
//
// Well-formed means RFC 3629: no overlong forms, no surrogates (U+D800..
// U+DFFF), nothing above U+10FFFF, no truncated sequence.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hipq {

// Byte offset of the first byte that does not start or continue a
// well-formed sequence; std::string_view::npos when `text` is valid UTF-8.
size_t find_invalid_utf8(std::string_view text);

// 1-based line and column (in bytes) of byte `offset` in `text`.
struct TextPosition {
  int line = 1;
  int column = 1;
};
TextPosition position_of(std::string_view text, size_t offset);

// "invalid UTF-8 byte 0xE9" for the byte at `offset`.
std::string describe_invalid_utf8(std::string_view text, size_t offset);

}  // namespace hipq
