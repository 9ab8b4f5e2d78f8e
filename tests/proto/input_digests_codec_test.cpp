#include "proto/input_digests_codec.h"

#include <gtest/gtest.h>

#include "proto/codec.h"
#include "proto/protocol.h"

namespace hipq::proto {
namespace {

TEST(InputDigestsCodec, EveryFieldRoundTripsThroughAnEncodedAssignment) {
  const spec::InputDigests d{{std::string(64, 'a'), std::string(64, 'b')}, std::string(64, 'c'), std::string(64, 'd')};
  Envelope e;
  JobAssignment* a = e.mutable_assignment();
  a->set_job_id(7);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  a->mutable_settings()->set_prompt("a fox");
  *a->mutable_inputs() = to_proto(d);
  auto back = decode(encode(e));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(from_proto(back->assignment().inputs()), d);
  EXPECT_TRUE(from_proto(InputDigests{}).empty());
}

// Protocol 5 carries LoRA, img2img and refiner settings an older worker would
// ignore: its messages are refused, not read as a base-model job.
TEST(InputDigestsCodec, AProtocolFourPeerIsRefused) {
  EXPECT_GE(kProtocolVersion, 5u);
  Envelope old;
  old.set_version(4);
  old.mutable_hello()->set_worker_id("w");
  auto refusal = version_refusal(old.SerializeAsString());
  ASSERT_TRUE(refusal.has_value());
  Envelope back;
  ASSERT_TRUE(back.ParseFromString(*refusal));
  EXPECT_EQ(back.version(), 4u);
  ASSERT_TRUE(back.has_error_reply());
  EXPECT_NE(back.error_reply().message().find("protocol version 4"), std::string::npos) << back.error_reply().message();
}

}  // namespace
}  // namespace hipq::proto
