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
  EXPECT_GE(kProtocolVersion, 7u);
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
  EXPECT_NE(back.error_reply().message().find("protocol version 6, the coordinator speaks version " +
                                                 std::to_string(kProtocolVersion)),
            std::string::npos)
      << back.error_reply().message();
  // Its reports and asks get no answer: dropped, as before.
  Envelope report;
  report.set_version(6);
  report.mutable_ready()->set_credit(1);
  EXPECT_FALSE(version_refusal(report.SerializeAsString()).has_value());
}

// Protocol 7: the jobs a hello or heartbeat names are bounded (at most
// kMaxBatch, checked before any entry is read), unique, positive, and the
// single running_job_id names the first; max_batch is 0..kMaxBatch.
TEST(Codec, ARunningListIsBoundedUniqueAndPositive) {
  Envelope hb;
  std::vector<RunningJob> jobs;
  for (int i = 1; i <= kMaxBatch; ++i) {
    RunningJob r;
    r.set_job_id(i);
    r.set_attempt(1);
    jobs.push_back(r);
  }
  set_running_jobs(*hb.mutable_heartbeat(), jobs);
  EXPECT_TRUE(validate(hb).ok()) << validate(hb).message();
  EXPECT_EQ(hb.heartbeat().running_job_id(), 1);
  EXPECT_EQ(running_jobs(hb.heartbeat()).size(), static_cast<size_t>(kMaxBatch));
  Envelope too_many = hb;
  auto* extra = too_many.mutable_heartbeat()->add_running();
  extra->set_job_id(99);
  extra->set_attempt(1);
  EXPECT_NE(validate(too_many).message().find("heartbeat.running"), std::string::npos) << validate(too_many).message();
  Envelope twice = hb;
  twice.mutable_heartbeat()->mutable_running(3)->set_job_id(2);
  EXPECT_NE(validate(twice).message().find("twice"), std::string::npos) << validate(twice).message();
  Envelope zero = hb;
  zero.mutable_heartbeat()->mutable_running(2)->set_job_id(0);
  EXPECT_NE(validate(zero).message().find("running.job_id"), std::string::npos);
  Envelope no_attempt = hb;
  no_attempt.mutable_heartbeat()->mutable_running(2)->set_attempt(0);
  EXPECT_NE(validate(no_attempt).message().find("running.attempt"), std::string::npos);
  Envelope other_first = hb;
  other_first.mutable_heartbeat()->set_running_job_id(5);
  EXPECT_NE(validate(other_first).message().find("running_job_id"), std::string::npos);

  Envelope hello;
  hello.mutable_hello()->set_worker_id("w");
  hello.mutable_hello()->set_backend("cpu");
  hello.mutable_hello()->set_running_job_id(7);
  hello.mutable_hello()->set_running_attempt(2);
  ASSERT_TRUE(validate(hello).ok());
  // The single fields alone (no list) still name one job.
  ASSERT_EQ(running_jobs(hello.hello()).size(), 1u);
  EXPECT_EQ(running_jobs(hello.hello())[0].attempt(), 2);
  hello.mutable_hello()->set_max_batch(kMaxBatch);
  EXPECT_TRUE(validate(hello).ok());
  hello.mutable_hello()->set_max_batch(kMaxBatch + 1);
  EXPECT_NE(validate(hello).message().find("hello.max_batch"), std::string::npos);
  hello.mutable_hello()->set_max_batch(-1);
  EXPECT_FALSE(validate(hello).ok());

  Envelope result;
  result.mutable_result()->set_job_id(1);
  result.mutable_result()->set_attempt(1);
  result.mutable_result()->mutable_parity()->set_verdict("PASS");
  result.mutable_result()->set_batch_size(kMaxBatch);
  EXPECT_TRUE(validate(result).ok());
  result.mutable_result()->set_batch_size(kMaxBatch + 1);
  EXPECT_NE(validate(result).message().find("result.batch_size"), std::string::npos);
}

}  // namespace
}  // namespace hipq::proto
