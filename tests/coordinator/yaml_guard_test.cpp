#include "coordinator/yaml_guard.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "coordinator/manifest.h"

namespace hipq::coordinator {
namespace {

constexpr size_t kNone = std::string_view::npos;

TEST(YamlGuardTest, FindsACommaThatStartsATokenOutsideAFlowCollection) {
  // Each of these made yaml-cpp 0.7's parser loop forever.
  EXPECT_EQ(find_block_flow_entry(","), 0u);
  EXPECT_EQ(find_block_flow_entry(",@"), 0u);
  EXPECT_EQ(find_block_flow_entry("- a\n,"), 4u);
  EXPECT_EQ(find_block_flow_entry("#c\n  , x"), 5u);
  EXPECT_EQ(find_block_flow_entry("a: 1\nb: ,"), 8u);
  // Right after a quoted scalar (the manifest fuzzer: each took over 5 s and 3 GiB).
  EXPECT_EQ(find_block_flow_entry("'',a'"), 2u);
  EXPECT_EQ(find_block_flow_entry("\"\"\"\",x"), 4u);
  EXPECT_EQ(find_block_flow_entry("'a',b'"), 3u);
  EXPECT_EQ(find_block_flow_entry("'''''''''',nul'"), 10u);
}

TEST(YamlGuardTest, LeavesCommasThatArePartOfValuesAlone) {
  for (const char* ok : {"a: x,y", "prompts: [a, b]", "p: {a: 1, b: 2}", "a: 'x, y'", "a: \"x, \\\" , y\"",
                         "a: |\n  , starts a block line\n  , and another\nb: 1", "a: >-\n  ,x\n",
                         "a: 'multi\n  , line'", "a: [1,\n  , 2]", "a: b # , in a comment", "- [x, y]\n- 'a, b'",
                         "a: it''s, fine"}) {
    EXPECT_EQ(find_block_flow_entry(ok), kNone) << ok;
  }
}

TEST(YamlGuardTest, AManifestWithAStrayCommaIsRefusedAtOnceWithItsPosition) {
  const auto t0 = std::chrono::steady_clock::now();
  auto m = parse_manifest_text("model: synthetic:tiny-sdxl\nprompts:\n  - a cat\n,@\n", "stray.yaml");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("stray.yaml:4:1"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("outside a [...]"), std::string::npos) << m.status().message();
}

}  // namespace
}  // namespace hipq::coordinator
