// RouteSwitches (kernels/hip/route_switches.h) from given environments.
#include "kernels/hip/route_switches.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hipq::kernels {
namespace {

RouteSwitches switches_of(const std::map<std::string, std::string>& env) {
  return route_switches([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(RouteSwitchesTest, DefaultsWhenNothingIsSet) {
  const RouteSwitches s = switches_of({});
  EXPECT_TRUE(s.wgmma);
  EXPECT_EQ(s.gemm_tma, -1);
  EXPECT_EQ(s.gemm_tma_fp8_n, 160);
  EXPECT_TRUE(s.fp32_wgmma);
  EXPECT_TRUE(s.conv_nhwc);
  EXPECT_TRUE(s.attention_wgmma);
  EXPECT_EQ(s.attention_wgmma_consumers, 2);
  EXPECT_FALSE(s.attention_wgmma_key_tails);
}

TEST(RouteSwitchesTest, EachSwitch) {
  EXPECT_FALSE(switches_of({{"HIPQ_NO_WGMMA", ""}}).wgmma);  // set at all
  EXPECT_FALSE(switches_of({{"HIPQ_NO_WGMMA", "1"}}).wgmma);
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA", "0"}}).gemm_tma, 0);
  for (const int w : {128, 160, 192, 256})
    EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA", std::to_string(w)}}).gemm_tma, w);
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA", "64"}}).gemm_tma, -1);  // no such width
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA", "1"}}).gemm_tma, -1);
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA_FP8", "128"}}).gemm_tma_fp8_n, 128);
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA_FP8", "256"}}).gemm_tma_fp8_n, 160);  // no such fp8 tile
  EXPECT_EQ(switches_of({{"HIPQ_GEMM_TMA", "128"}}).gemm_tma_fp8_n, 160);      // the 16-bit switch alone
  EXPECT_FALSE(switches_of({{"HIPQ_FP32_WGMMA", "0"}}).fp32_wgmma);
  EXPECT_TRUE(switches_of({{"HIPQ_FP32_WGMMA", "1"}}).fp32_wgmma);
  EXPECT_FALSE(switches_of({{"HIPQ_CONV_NHWC", "0"}}).conv_nhwc);
  EXPECT_TRUE(switches_of({{"HIPQ_CONV_NHWC", "1"}}).conv_nhwc);
  EXPECT_FALSE(switches_of({{"HIPQ_ATTN_WGMMA", "0"}}).attention_wgmma);
  EXPECT_EQ(switches_of({{"HIPQ_ATTN_WGMMA", "3"}}).attention_wgmma_consumers, 3);
  EXPECT_EQ(switches_of({{"HIPQ_ATTN_WGMMA", "auto"}}).attention_wgmma_consumers, 0);
  EXPECT_TRUE(switches_of({{"HIPQ_ATTN_WGMMA", "auto"}}).attention_wgmma);
  EXPECT_EQ(switches_of({{"HIPQ_ATTN_WGMMA", "1"}}).attention_wgmma_consumers, 2);
  EXPECT_TRUE(switches_of({{"HIPQ_ATTN_WGMMA_KEYS", "any"}}).attention_wgmma_key_tails);
  EXPECT_FALSE(switches_of({{"HIPQ_ATTN_WGMMA_KEYS", "1"}}).attention_wgmma_key_tails);
}

// The switches measured and not kept are gone: setting them changes nothing.
TEST(RouteSwitchesTest, RetiredSwitchesAreIgnored) {
  const RouteSwitches s = switches_of({{"HIPQ_GEMM_GEGLU", "unfused"}, {"HIPQ_GEMM_TMA_GRID", "tiles"}});
  const RouteSwitches d = switches_of({});
  EXPECT_EQ(s.gemm_tma, d.gemm_tma);
  EXPECT_EQ(s.wgmma, d.wgmma);
}

}  // namespace
}  // namespace hipq::kernels
