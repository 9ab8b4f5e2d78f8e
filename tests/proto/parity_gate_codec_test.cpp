#include "proto/parity_gate_codec.h"

#include <gtest/gtest.h>

#include "proto/codec.h"
#include "proto/settings_codec.h"

namespace hipq::proto {
namespace {

Envelope assignment_with(const spec::ParityGate& gate) {
  Envelope e;
  JobAssignment* a = e.mutable_assignment();
  a->set_job_id(7);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  *a->mutable_settings() = to_proto(spec::GenerationSettings{});
  *a->mutable_parity_gate() = to_proto(gate);
  return e;
}

spec::ParityGate through_the_wire(const spec::ParityGate& gate) {
  auto d = decode(encode(assignment_with(gate)));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->assignment().has_parity_gate());
  return from_proto(d->assignment().parity_gate());
}

TEST(ParityGateCodec, EveryBoundRoundTripsThroughAnEncodedAssignment) {
  spec::ParityGate g;
  ASSERT_TRUE(g.set("cosine_min", 0.99).ok());
  g.max_abs_max = 0.5;
  g.rel_l2_max = 0.01;
  g.psnr_min = 30;
  g.psnr_min_set = true;
  EXPECT_EQ(through_the_wire(g), g);
}

TEST(ParityGateCodec, TheDefaultGateStaysTheDefault) {
  EXPECT_EQ(through_the_wire(spec::ParityGate{}), spec::ParityGate{});
  EXPECT_FALSE(through_the_wire(spec::ParityGate{}).psnr_min_set) << "the precision's default image bound";
  EXPECT_FALSE(through_the_wire(spec::ParityGate{}).cosine_min_set) << "the precision's default latent bound";
  EXPECT_EQ(through_the_wire(spec::ParityGate{}).cosine_bound("fp8"), spec::kDefaultCosineMinFp8);
  EXPECT_EQ(through_the_wire(spec::ParityGate{}).cosine_bound("fp16"), spec::kDefaultCosineMin);
}

// A gate that names the general default (0.999) keeps it for an fp8 job too.
TEST(ParityGateCodec, ACosineBoundSetToTheDefaultStaysSet) {
  spec::ParityGate g;
  ASSERT_TRUE(g.set("cosine_min", spec::kDefaultCosineMin).ok());
  spec::ParityGate back = through_the_wire(g);
  EXPECT_TRUE(back.cosine_min_set);
  EXPECT_EQ(back.cosine_bound("fp8"), spec::kDefaultCosineMin);
}

TEST(ParityGateCodec, BoundsSwitchedOffStayOff) {
  spec::ParityGate g;
  ASSERT_TRUE(g.set("cosine_min", std::nullopt).ok());
  g.psnr_min_set = true;  // psnr_min null: no image bound
  spec::ParityGate back = through_the_wire(g);
  EXPECT_EQ(back, g);
  EXPECT_FALSE(back.cosine_min.has_value());
  EXPECT_FALSE(back.cosine_bound("fp8").has_value());
  EXPECT_FALSE(back.psnr_bound("fp32").has_value());
}

TEST(ParityGateCodec, ZeroIsABoundNotAnAbsence) {
  spec::ParityGate g;
  g.max_abs_max = 0.0;
  ASSERT_TRUE(g.set("cosine_min", 0.0).ok());
  spec::ParityGate back = through_the_wire(g);
  ASSERT_TRUE(back.max_abs_max.has_value());
  EXPECT_EQ(*back.max_abs_max, 0.0);
  ASSERT_TRUE(back.cosine_min.has_value());
  EXPECT_EQ(*back.cosine_min, 0.0);
}

}  // namespace
}  // namespace hipq::proto
