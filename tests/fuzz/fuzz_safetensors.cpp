#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "base/check.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void safetensors(std::string_view bytes) {
  // The reader maps a path: an anonymous in-memory file stands in for one.
  int fd = ::memfd_create("hipq-fuzz.safetensors", MFD_CLOEXEC);
  HIPQ_CHECK(fd >= 0);
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    HIPQ_CHECK(n > 0);
    off += static_cast<size_t>(n);
  }
  auto file = engine::SafetensorsFile::open("/proc/self/fd/" + std::to_string(fd));
  if (file.ok()) {
    for (const auto& name : (*file)->names()) {
      auto t = (*file)->get(name);
      if (!t.ok()) continue;
      // Every byte a tensor claims lies inside the file: read them all.
      HIPQ_CHECK(t->nbytes <= (*file)->file_size());
      unsigned sum = 0;
      const auto* p = static_cast<const unsigned char*>(t->data);
      for (size_t i = 0; i < t->nbytes; ++i) sum += p[i];
      (void)sum;
      if (t->numel() <= 4096) (void)t->to_f32();
    }
  }
  ::close(fd);
}

}  // namespace hipq::fuzz
