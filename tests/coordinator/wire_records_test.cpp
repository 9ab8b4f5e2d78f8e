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
  ASSERT_TRUE(l.batch.parity_gate.set("cosine_min", 0.99).ok());
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

// A job's LoRAs, init image and refiner travel in its settings, the files'
// digests beside them; a plain job sends no digests. What a worker holds
// comes back as (model, LoRA set) pairs for dispatch.
TEST(WireRecords, AssignmentCarriesTheFilesAndTheirDigestsAndHeldModelsComeBack) {
  db::LeasedJob l;
  l.job.id = 9;
  l.job.model = "synthetic:tiny-sdxl";
  l.job.sampler = "euler";
  l.job.precision = "fp32";
  l.job.loras = {{"/l/a.safetensors", 0.8f}};
  l.job.init_image = "/in/fox.png";
  l.job.strength = 0.6;
  l.job.refiner = "synthetic:sdxl-refiner";
  l.job.refiner_switch_at = 0.75;
  l.job.inputs.loras = {std::string(64, 'a')};
  l.job.inputs.init_image = std::string(64, 'c');
  proto::JobAssignment a = make_assignment(l, DispatchSettings{"/g", 3.0});
  ASSERT_EQ(a.settings().loras_size(), 1);
  EXPECT_EQ(a.settings().loras(0).path(), "/l/a.safetensors");
  EXPECT_FLOAT_EQ(a.settings().loras(0).scale(), 0.8f);
  EXPECT_EQ(a.settings().init_image(), "/in/fox.png");
  EXPECT_FLOAT_EQ(a.settings().strength(), 0.6f);
  EXPECT_EQ(a.settings().refiner(), "synthetic:sdxl-refiner");
  EXPECT_FLOAT_EQ(a.settings().refiner_switch_at(), 0.75f);
  ASSERT_TRUE(a.has_inputs());
  EXPECT_EQ(a.inputs().loras(0), std::string(64, 'a'));
  EXPECT_EQ(a.inputs().init_image(), std::string(64, 'c'));

  db::LeasedJob plain;
  plain.job.id = 10;
  EXPECT_FALSE(make_assignment(plain, DispatchSettings{"/g", 3.0}).has_inputs());

  proto::Ready ready;
  proto::HeldModel* h = ready.add_held_models();
  h->set_model("synthetic:tiny-sdxl");
  h->set_lora_key(std::string(64, 'a') + "*0.8");
  ready.add_held_models()->set_model("m2");
  const std::vector<db::ModelHolding> held = to_held_models(ready.held_models());
  EXPECT_EQ(held, (std::vector<db::ModelHolding>{{"synthetic:tiny-sdxl", std::string(64, 'a') + "*0.8"}, {"m2", ""}}));
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
