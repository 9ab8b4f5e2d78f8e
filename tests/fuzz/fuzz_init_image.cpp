#include <string>

#include "base/check.h"
#include "spec/init_image.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void init_image(std::string_view bytes) {
  if (bytes.empty()) return;
  // The first byte picks the job's size (8, 16, 32 or 64 a side, each axis),
  // as a job bounds what the decoders may allocate; the rest is the file.
  static constexpr int kSides[4] = {8, 16, 32, 64};
  const auto pick = static_cast<unsigned char>(bytes[0]);
  const spec::ExpectedSize expected{kSides[pick & 3], kSides[(pick >> 2) & 3]};
  const std::string_view file = bytes.substr(1);
  auto image = spec::decode_init_image(file, "fuzz input", expected);
  if (image.ok()) {
    // What is accepted is exactly the job's size, every byte written.
    HIPQ_CHECK(image->width == expected.width && image->height == expected.height);
    HIPQ_CHECK(image->rgb.size() == static_cast<size_t>(expected.width) * static_cast<size_t>(expected.height) * 3);
    unsigned sum = 0;
    for (uint8_t v : image->rgb) sum += v;
    (void)sum;
  } else {
    // Every refusal names the file.
    HIPQ_CHECK(image.status().message().find("fuzz input") != std::string::npos);
  }
}

}  // namespace hipq::fuzz
