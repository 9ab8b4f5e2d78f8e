#include "proto/settings_codec.h"

#include <gtest/gtest.h>

#include "proto/codec.h"
#include "tests/spec/sample_settings.h"

namespace hipq::proto {
namespace {

using spec::testing::every_field_set;

// An assignment valid but for what a test leaves out.
JobAssignment* assignment_in(Envelope& e) {
  JobAssignment* a = e.mutable_assignment();
  a->set_job_id(7);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  return a;
}

TEST(SettingsCodec, EveryFieldRoundTripsThroughAnEncodedAssignment) {
  Envelope e;
  *assignment_in(e)->mutable_settings() = to_proto(every_field_set());
  auto d = decode(encode(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(from_proto(d->assignment().settings()), every_field_set());
  EXPECT_EQ(from_proto(GenerationSettings{}).seed, 0u);
}

// vae_precision travels as written: "" (the precision's rule) stays "", so a
// default job is the same job on both sides.
TEST(SettingsCodec, VaePrecisionRoundTripsAndItsDefaultStaysEmpty) {
  spec::GenerationSettings s;
  EXPECT_EQ(to_proto(s).vae_precision(), "");
  EXPECT_EQ(from_proto(to_proto(s)).vae_precision, "");
  s.vae_precision = "bf16";
  EXPECT_EQ(to_proto(s).vae_precision(), "bf16");
  EXPECT_EQ(from_proto(to_proto(s)), s);
}

// A version-7 worker would ignore vae_precision and decode in the precision's
// dtype, another image than the job's: its hello is refused in its version.
TEST(SettingsCodec, AVersionSevenHelloIsRefusedSinceItWouldIgnoreVaePrecision) {
  EXPECT_EQ(kProtocolVersion, 9u);
  Envelope old;
  old.set_version(7);
  old.mutable_hello()->set_worker_id("w");
  old.mutable_hello()->set_backend("cpu");
  EXPECT_EQ(decode(old.SerializeAsString()).status().code(), StatusCode::kCorruption);
  auto refusal = version_refusal(old.SerializeAsString());
  ASSERT_TRUE(refusal.has_value());
  Envelope back;
  ASSERT_TRUE(back.ParseFromString(*refusal));
  EXPECT_EQ(back.version(), 7u);
  ASSERT_TRUE(back.has_error_reply());
  EXPECT_NE(back.error_reply().message().find("protocol version 7, the coordinator speaks version 9"),
            std::string::npos)
      << back.error_reply().message();
}

TEST(SettingsCodec, AnAssignmentWithoutSettingsIsRefused) {
  Envelope e;
  assignment_in(e);
  auto d = decode(encode(e));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("assignment.settings: must be present"), std::string::npos)
      << d.status().message();
}

// A peer of protocol version 1 (settings as a JSON string) is answered in its
// own version, so it can read why it is refused.
TEST(SettingsCodec, AnOlderPeerGetsARefusalItCanRead) {
  Envelope old;
  old.set_version(1);
  old.set_request_id(9);
  old.mutable_status();
  auto refusal = version_refusal(old.SerializeAsString());
  ASSERT_TRUE(refusal.has_value());
  Envelope back;
  ASSERT_TRUE(back.ParseFromString(*refusal));
  EXPECT_EQ(back.version(), 1u);
  EXPECT_EQ(back.request_id(), 9u);
  ASSERT_TRUE(back.has_error_reply());
  EXPECT_EQ(back.error_reply().code(), "FailedPrecondition");
  EXPECT_NE(back.error_reply().message().find("protocol version 1"), std::string::npos);
  EXPECT_NE(back.error_reply().message().find("version " + std::to_string(kProtocolVersion)), std::string::npos);

  Envelope hello;
  hello.set_version(1);
  hello.mutable_hello()->set_worker_id("w");
  EXPECT_TRUE(version_refusal(hello.SerializeAsString()).has_value());
  Envelope heartbeat;
  heartbeat.set_version(1);
  heartbeat.mutable_heartbeat();
  EXPECT_FALSE(version_refusal(heartbeat.SerializeAsString()).has_value()) << "only conversation openers";
  Envelope current;
  current.mutable_status();
  EXPECT_FALSE(version_refusal(encode(current)).has_value());
  EXPECT_FALSE(version_refusal("\xff\xff garbage").has_value());
}

}  // namespace
}  // namespace hipq::proto
