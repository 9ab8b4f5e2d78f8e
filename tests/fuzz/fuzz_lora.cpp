#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <string>

#include "base/check.h"
#include "engine/lora/lora_file.h"
#include "engine/lora/lora_merge.h"
#include "engine/lora/lora_set.h"
#include "engine/synthetic.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void lora(std::string_view bytes) {
  // The reader maps a path: an anonymous in-memory file stands in for one.
  int fd = ::memfd_create("hipq-fuzz-lora.safetensors", MFD_CLOEXEC);
  HIPQ_CHECK(fd >= 0);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    HIPQ_CHECK(n > 0);
    off += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto file = engine::lora::read_lora_file(path);
  if (file.ok()) {
    // What an accepted file promises: both halves of every pair, equal ranks
    // within bounds, a finite alpha.
    for (const auto& p : file->pairs) {
      HIPQ_CHECK(p.rank > 0 && p.rank <= engine::lora::kMaxLoraRank);
      HIPQ_CHECK(p.down.shape[0] == p.rank && p.up.shape[1] == p.rank);
      HIPQ_CHECK(std::isfinite(p.alpha));
    }
    // Against a tiny model: the merge of every accepted delta runs, bounded
    // by the model's own weight sizes.
    static const auto model = engine::make_synthetic_model("synthetic:tiny-sdxl");
    HIPQ_CHECK(model.ok());
    auto set = engine::lora::open_lora_set(*model, "sdxl", {{path, 0.5f}});
    if (set.ok()) {
      for (const auto& [component, source] : set->components.weights) {
        const auto* merged = dynamic_cast<const engine::lora::LoraMergedSource*>(source.get());
        if (merged == nullptr) continue;
        for (const std::string& name : merged->merged_names()) {
          auto t = merged->get(name);
          HIPQ_CHECK(t.ok());
        }
      }
    }
  }
  ::close(fd);
}

}  // namespace hipq::fuzz
