#include "coordinator/wire_records.h"

#include <gtest/gtest.h>

namespace hipq::coordinator {
namespace {

TEST(WireRecords, AssignmentCarriesTheJobAndResolvesTheGoldenStore) {
  db::LeasedJob l;
  l.job.id = 7;
  l.job.model = "synthetic:tiny-sdxl";
  l.job.seed = 3;
  l.job.prompt = "a cat";
  l.job.width = 64;
  l.job.height = 48;
  l.job.steps = 2;
  l.job.guidance = 7.5;
  l.job.sampler = "ddim";
  l.job.precision = "bf16";
  l.job.rng = "torch-cuda";
  l.job.output_dir = "b/00-s3";
  l.batch.id = 2;
  l.batch.output_root = "/out";
  l.batch.save = {"latent", "png"};
  l.batch.golden_source = "store";
  l.batch.parity_gate.cosine_min = 0.99;
  l.batch.parity_gate.psnr_min_set = true;  // no image bound
  l.attempt = 2;
  DispatchSettings s{"/db/goldens", 3.0};
  proto::JobAssignment a = make_assignment(l, s);
  EXPECT_EQ(a.job_id(), 7);
  EXPECT_EQ(a.attempt(), 2);
  EXPECT_EQ(a.batch_id(), 2);
  EXPECT_EQ(a.output_root(), "/out");
  EXPECT_EQ(a.output_dir(), "b/00-s3");
  EXPECT_EQ(a.golden_dir(), "/db/goldens");
  EXPECT_EQ(a.save_size(), 2);
  // The settings travel typed, field for field.
  EXPECT_EQ(a.settings().seed(), 3u);
  EXPECT_EQ(a.settings().prompt(), "a cat");
  EXPECT_EQ(a.settings().height(), 48);
  EXPECT_FLOAT_EQ(a.settings().guidance(), 7.5f);
  EXPECT_EQ(a.settings().sampler(), "ddim");
  EXPECT_EQ(a.settings().precision(), "bf16");
  EXPECT_EQ(a.settings().rng(), "torch-cuda");
  // So does the gate.
  ASSERT_TRUE(a.has_parity_gate());
  EXPECT_EQ(a.parity_gate().cosine_min(), 0.99);
  EXPECT_FALSE(a.parity_gate().has_max_abs_max());
  EXPECT_TRUE(a.parity_gate().psnr_min_set());
  EXPECT_FALSE(a.parity_gate().has_psnr_min());
  l.batch.golden_source = "/elsewhere";
  EXPECT_EQ(make_assignment(l, s).golden_dir(), "/elsewhere");
  l.batch.golden_source = "";
  EXPECT_EQ(make_assignment(l, s).golden_dir(), "");
}

TEST(WireRecords, ResultKeepsMetricsOnlyWhenMeasured) {
  proto::JobResult r;
  r.set_job_id(1);
  r.set_attempt(1);
  r.mutable_parity()->set_verdict("NO_GOLDEN");
  auto* t = r.add_steps();
  t->set_phase("step");
  t->set_step(3);
  t->set_host_ms(2.5);
  db::NewResult d = to_db_result(r, "w");
  EXPECT_EQ(d.worker_id, "w");
  EXPECT_FALSE(d.cosine.has_value());
  ASSERT_EQ(d.steps.size(), 1u);
  EXPECT_EQ(d.steps[0].step, 3);
  EXPECT_FALSE(d.steps[0].gpu_ms.has_value());
  r.mutable_parity()->set_verdict("PASS");
  r.mutable_parity()->set_has_metrics(true);
  r.mutable_parity()->set_cosine(0.9995);
  d = to_db_result(r, "w");
  ASSERT_TRUE(d.cosine.has_value());
  EXPECT_DOUBLE_EQ(*d.cosine, 0.9995);
  EXPECT_FALSE(d.psnr.has_value());
}

}  // namespace
}  // namespace hipq::coordinator
