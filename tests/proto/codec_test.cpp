#include "proto/codec.h"

#include <gtest/gtest.h>

namespace hipq::proto {
namespace {

TEST(Codec, RoundTripKeepsTheBodyAndStampsTheVersion) {
  Envelope e;
  e.set_request_id(42);
  e.mutable_result()->set_job_id(5);
  e.mutable_result()->set_attempt(2);
  e.mutable_result()->mutable_parity()->set_verdict("PASS");
  auto* o = e.mutable_result()->add_outputs();
  o->set_path("b/latent.safetensors");
  o->set_bytes(123);
  auto d = decode(encode(e));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->version(), kProtocolVersion);
  EXPECT_EQ(d->request_id(), 42u);
  EXPECT_EQ(d->result().outputs(0).bytes(), 123);
  EXPECT_EQ(body_name(*d), "result");
}

TEST(Codec, BytesThatAreNotAnEnvelopeAreCorruption) {
  auto d = decode("\xff\xff\xff garbage");
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
}

TEST(Codec, AnotherProtocolVersionIsRefused) {
  Envelope e;
  e.mutable_heartbeat();
  e.set_version(kProtocolVersion + 1);
  auto d = decode(e.SerializeAsString());
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption);
  EXPECT_NE(d.status().message().find("protocol version"), std::string::npos);
}

TEST(Codec, AnEnvelopeWithoutABodyIsRefused) {
  Envelope e;
  EXPECT_FALSE(decode(encode(e)).ok());
}

TEST(Validate, NamesTheMessageAndFieldThatIsWrong) {
  Envelope e;
  e.mutable_result()->set_job_id(0);
  e.mutable_result()->set_attempt(1);
  Status s = validate(e);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("result.job_id"), std::string::npos) << s.message();

  e.mutable_result()->set_job_id(1);
  e.mutable_result()->mutable_parity()->set_verdict("MAYBE");
  EXPECT_NE(validate(e).message().find("parity.verdict"), std::string::npos);

  Envelope h;
  h.mutable_hello()->set_backend("cpu");
  EXPECT_NE(validate(h).message().find("hello.worker_id"), std::string::npos);

  Envelope p;
  p.mutable_progress()->set_job_id(1);
  p.mutable_progress()->set_attempt(1);
  p.mutable_progress()->set_step(5);
  p.mutable_progress()->set_steps(4);
  EXPECT_FALSE(validate(p).ok());

  Envelope c;
  c.mutable_cancel_request()->set_batch_id(1);
  c.mutable_cancel_request()->set_job_id(1);
  EXPECT_FALSE(validate(c).ok());
  c.mutable_cancel_request()->set_job_id(0);
  EXPECT_TRUE(validate(c).ok());
}

}  // namespace
}  // namespace hipq::proto
