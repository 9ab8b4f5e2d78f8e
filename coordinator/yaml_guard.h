// A guard in front of yaml-cpp 0.7 (Debian 12): a flow-entry ',' that starts
// a token outside any [...] / {...} collection in block context (a document
// that is just ",", or "- a\n,") makes its parser loop forever. The text is
// scanned for such a comma before it is parsed, with the YAML rules that
// matter for finding tokens: quoted scalars (also over several lines),
// comments, block scalars (| and >, whose indented lines are content) and
// flow depth. Linear in the text, no allocation.
#pragma once

#include <cstddef>
#include <string_view>

namespace hipq::coordinator {

// Offset of the first comma that starts a token at flow depth 0, or npos.
size_t find_block_flow_entry(std::string_view yaml);

}  // namespace hipq::coordinator
