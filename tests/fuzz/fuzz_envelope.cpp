#include "base/check.h"
#include "proto/codec.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void envelope(std::string_view bytes) {
  auto e = proto::decode(bytes);
  if (!e.ok()) return;
  std::string again = proto::encode(*e);
  auto back = proto::decode(again);
  HIPQ_CHECK(back.ok());
  HIPQ_CHECK(back->body_case() == e->body_case());
}

}  // namespace hipq::fuzz
