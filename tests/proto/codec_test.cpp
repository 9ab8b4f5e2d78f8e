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

// Protocol 6: the ask for the next job rides in a report and the acks on an
// assignment; both get the checks a Ready and a ReportAck alone would.
TEST(Validate, AnAskInAReportAndAcksOnAnAssignmentAreCheckedAsAlone) {
  Envelope r;
  r.mutable_result()->set_job_id(1);
  r.mutable_result()->set_attempt(1);
  r.mutable_result()->mutable_parity()->set_verdict("NO_GOLDEN");
  r.mutable_result()->mutable_next()->set_credit(2);
  EXPECT_TRUE(validate(r).ok());
  r.mutable_result()->mutable_next()->set_credit(1025);
  Status s = validate(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("result.next.credit"), std::string::npos) << s.message();
  r.mutable_result()->mutable_next()->set_credit(-1);
  EXPECT_FALSE(validate(r).ok());

  Envelope e;
  e.mutable_error()->set_job_id(1);
  e.mutable_error()->set_attempt(1);
  e.mutable_error()->mutable_next()->set_credit(1);
  EXPECT_TRUE(validate(e).ok());
  e.mutable_error()->mutable_next()->set_credit(5000);
  EXPECT_NE(validate(e).message().find("error.next.credit"), std::string::npos);

  Envelope a;
  a.mutable_assignment()->set_job_id(2);
  a.mutable_assignment()->set_attempt(1);
  a.mutable_assignment()->set_model("synthetic:tiny-sdxl");
  a.mutable_assignment()->mutable_settings();
  auto* ack = a.mutable_assignment()->add_acks();
  ack->set_job_id(1);
  ack->set_attempt(1);
  EXPECT_TRUE(validate(a).ok());
  ack->set_attempt(0);
  EXPECT_NE(validate(a).message().find("assignment.acks.attempt"), std::string::npos) << validate(a).message();
  ack->set_attempt(1);
  ack->set_job_id(-3);
  EXPECT_NE(validate(a).message().find("assignment.acks.job_id"), std::string::npos);
}

// A version-6 worker would name one running job of a batch and a version-6
// coordinator would expire the others: its hello is refused, in its own
// version, as any other's.
TEST(Codec, AVersionSixHelloIsAnsweredWithARefusalItCanRead) {
  EXPECT_EQ(kProtocolVersion, 7u);
  Envelope old;
  old.set_version(6);
  old.mutable_hello()->set_worker_id("w");
  old.mutable_hello()->set_backend("cpu");
  EXPECT_EQ(decode(old.SerializeAsString()).status().code(), StatusCode::kCorruption);
  auto refusal = version_refusal(old.SerializeAsString());
  ASSERT_TRUE(refusal.has_value());
  Envelope back;
  ASSERT_TRUE(back.ParseFromString(*refusal));
  EXPECT_EQ(back.version(), 6u);
  ASSERT_TRUE(back.has_error_reply());
  EXPECT_EQ(back.error_reply().code(), "FailedPrecondition");
  EXPECT_NE(back.error_reply().message().find("protocol version 6, the coordinator speaks version 7"), std::string::npos)
      << back.error_reply().message();
  // Its reports and asks get no answer: dropped, as before.
  Envelope report;
  report.set_version(6);
  report.mutable_ready()->set_credit(1);
  EXPECT_FALSE(version_refusal(report.SerializeAsString()).has_value());
}

}  // namespace
}  // namespace hipq::proto
