#include "spec/parity_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace hipq::spec {
namespace {

TEST(ParityGateTest, TheDefaultGateIsCosineAndThePrecisionsImageBound) {
  ParityGate g;
  EXPECT_EQ(g.cosine_min, kDefaultCosineMin);
  EXPECT_FALSE(g.max_abs_max.has_value());
  EXPECT_FALSE(g.rel_l2_max.has_value());
  EXPECT_FALSE(g.psnr_min_set);
  EXPECT_EQ(g.psnr_bound("fp32"), kDefaultPsnrMinFp32);
  EXPECT_EQ(g.psnr_bound("fp16"), kDefaultPsnrMinFp16);
  EXPECT_EQ(g.psnr_bound("bf16"), kDefaultPsnrMinBf16);
  EXPECT_EQ(g.psnr_bound("fp8"), kDefaultPsnrMinFp8);
  EXPECT_FALSE(g.cosine_min_set);
  EXPECT_EQ(g.cosine_bound("fp32"), kDefaultCosineMin);
  EXPECT_EQ(g.cosine_bound("bf16"), kDefaultCosineMin);
  EXPECT_EQ(g.cosine_bound("fp8"), kDefaultCosineMinFp8);
  EXPECT_LT(default_cosine_min("fp8"), default_cosine_min("fp16"));
  EXPECT_DOUBLE_EQ(default_psnr_min("fp32"), 40.0);
  EXPECT_LT(default_psnr_min("fp16"), default_psnr_min("fp32"));
  EXPECT_TRUE(g.validate().ok());
}

TEST(ParityGateTest, EveryKeyHasARangeAndABoundOfItsOwn) {
  EXPECT_EQ(parity_gate_keys().size(), 4u);
  EXPECT_EQ(parity_gate_keys().front(), "cosine_min");
  ParityGate all;
  for (const std::string& key : parity_gate_keys()) {
    auto range = parity_gate_range(key);
    ASSERT_TRUE(range.ok()) << key;
    EXPECT_LT(range->min, range->max) << key;
    ASSERT_TRUE(all.set(key, 0.5).ok()) << key;
  }
  EXPECT_EQ(all.to_json().size(), parity_gate_keys().size()) << all.to_json().dump();
  for (const std::string& key : parity_gate_keys()) EXPECT_EQ(all.to_json()[key], 0.5) << key;
  EXPECT_EQ(parity_gate_range("cosine_min")->min, -1.0);
  EXPECT_EQ(parity_gate_range("cosine_min")->max, 1.0);
  EXPECT_EQ(parity_gate_range("psnr_min")->min, 0.0);
  auto bad = parity_gate_range("cosine");
  ASSERT_FALSE(bad.ok());
  for (const std::string& key : parity_gate_keys()) {
    EXPECT_NE(bad.status().message().find(key), std::string::npos) << bad.status().message();
  }
}

TEST(ParityGateTest, JsonAbsentKeysKeepDefaultsAndNullSwitchesABoundOff) {
  auto d = ParityGate::from_json(nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, ParityGate{});
  auto empty = ParityGate::from_json(nlohmann::json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, ParityGate{});
  auto only_abs = ParityGate::from_json({{"max_abs_max", 0.5}});
  ASSERT_TRUE(only_abs.ok());
  EXPECT_EQ(*only_abs->cosine_min, 0.999) << "the default cosine bound stays unless set to null";
  auto off = ParityGate::from_json({{"cosine_min", nullptr}, {"rel_l2_max", 0.1}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->cosine_min.has_value());
  auto back = ParityGate::from_json(off->to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->cosine_min.has_value());
  EXPECT_EQ(*back->rel_l2_max, 0.1);
  EXPECT_EQ(*back, *off);
}

TEST(ParityGateTest, CosineMinAbsentIsThePrecisionsDefaultASetBoundHoldsForEveryPrecision) {
  EXPECT_FALSE(ParityGate{}.to_json().contains("cosine_min"))
      << "the default is not frozen into stored gates";
  auto set = ParityGate::from_json({{"cosine_min", 0.999}});
  ASSERT_TRUE(set.ok());
  EXPECT_TRUE(set->cosine_min_set);
  EXPECT_EQ(set->cosine_bound("fp8"), 0.999) << "a gate that names a bound keeps it";
  EXPECT_EQ(set->to_json()["cosine_min"], 0.999);
  auto defaults = ParityGate::from_json(ParityGate{}.to_json());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->cosine_bound("fp8"), kDefaultCosineMinFp8);
}

TEST(ParityGateTest, PsnrMinAbsentIsThePrecisionsDefaultNullIsNoImageBound) {
  EXPECT_FALSE(ParityGate{}.to_json().contains("psnr_min")) << "the default is not frozen into stored gates";
  auto off = ParityGate::from_json({{"psnr_min", nullptr}});
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->psnr_min_set);
  EXPECT_FALSE(off->psnr_bound("fp32").has_value());
  auto back = ParityGate::from_json(off->to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->psnr_min_set);
  EXPECT_FALSE(back->psnr_bound("fp32").has_value());
  auto low = ParityGate::from_json({{"psnr_min", 30}});
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(low->psnr_bound("fp32"), 30.0);
  EXPECT_EQ(low->psnr_bound("fp16"), 30.0);
}

TEST(ParityGateTest, UnknownKeysWrongTypesAndNonFiniteValuesAreRefused) {
  auto bad = ParityGate::from_json({{"cosine", 0.9}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown key \"cosine\""), std::string::npos);
  auto unknown_text = ParityGate::from_json({{"cosine", "x"}});
  ASSERT_FALSE(unknown_text.ok());
  EXPECT_NE(unknown_text.status().message().find("unknown key"), std::string::npos);
  auto text = ParityGate::from_json({{"psnr_min", "high"}});
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("psnr_min must be a number or null"), std::string::npos);
  EXPECT_FALSE(ParityGate::from_json(nlohmann::json::array()).ok());

  ParityGate g;
  EXPECT_FALSE(g.set("max_abs_max", std::numeric_limits<double>::infinity()).ok());
  EXPECT_FALSE(g.set("nope", 1.0).ok());
  EXPECT_EQ(g, ParityGate{}) << "a refused set changes nothing";
  g.rel_l2_max = std::nan("");
  auto v = g.validate();
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("rel_l2_max must be finite"), std::string::npos) << v.message();
}

TEST(ParityGateTest, SetNamesEachBoundByItsKey) {
  ParityGate g;
  ASSERT_TRUE(g.set("cosine_min", 0.99).ok());
  ASSERT_TRUE(g.set("max_abs_max", 0.5).ok());
  ASSERT_TRUE(g.set("rel_l2_max", 0.01).ok());
  ASSERT_TRUE(g.set("psnr_min", 30).ok());
  EXPECT_EQ(
      g.to_json(),
      nlohmann::json({{"cosine_min", 0.99}, {"max_abs_max", 0.5}, {"rel_l2_max", 0.01}, {"psnr_min", 30}}));
  ASSERT_TRUE(g.set("cosine_min", std::nullopt).ok());
  EXPECT_TRUE(g.to_json()["cosine_min"].is_null());
}

}  // namespace
}  // namespace hipq::spec
