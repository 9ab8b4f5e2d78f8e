// Pipeline::generate_batch: each job of a batch gives the latent and pixels
// it gives alone, byte for byte, on every backend at hand (cpu always; hip
// when a device is visible), over deterministic and noise-drawing samplers,
// with and without guidance; a cancelled job ends alone; what may not share
// a batch is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "engine/job.h"
#include "engine/memory_plan.h"
#include "engine/pipeline.h"
#include "kernels/backend.h"
#include "spec/generation_settings.h"
#include "spec/phases.h"
#include "spec/png.h"

namespace hipq::engine {
namespace {

using spec::GenerationSettings;

std::vector<std::string> backends_at_hand() {
  std::vector<std::string> out = {"cpu"};
  if (kernels::gpu_device_count() > 0 && kernels::make_backend("hip").ok()) out.push_back("hip");
  return out;
}

GenerationSettings job(const std::string& prompt, const std::string& negative, uint64_t seed) {
  GenerationSettings s;
  s.prompt = prompt;
  s.negative_prompt = negative;
  s.seed = seed;
  s.width = 64;
  s.height = 64;
  s.steps = 4;
  s.guidance = 5.0f;
  return s;
}

std::vector<GenerationSettings> three_jobs(const std::string& sampler, float guidance) {
  std::vector<GenerationSettings> jobs = {job("a red fox sleeping in the snow", "", 11),
                                          job("a lighthouse on a cliff at dusk", "blurry, low quality", 12),
                                          job("a bowl of ramen, studio light", "", 11)};
  for (auto& s : jobs) {
    s.sampler = sampler;
    s.guidance = guidance;
  }
  return jobs;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  std::string backend;
  std::string sampler;
  float guidance;
  std::string precision;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.backend << " " << c.sampler << " guidance " << c.guidance << " " << c.precision;
}

class PipelineBatchTest : public ::testing::TestWithParam<Case> {
 public:
  static Pipeline& pipeline(const std::string& backend) {
    auto it = pipelines_.find(backend);
    if (it == pipelines_.end()) {
      auto b = kernels::make_backend(backend);
      HIPQ_CHECK(b.ok());
      backends_[backend] = std::move(*b);
      auto p = Pipeline::load("synthetic:tiny-sdxl", *backends_[backend]);
      HIPQ_CHECK(p.ok() || (std::fprintf(stderr, "%s\n", p.status().ToString().c_str()), false));
      it = pipelines_.emplace(backend, std::move(p).value()).first;
    }
    return *it->second;
  }
  static void TearDownTestSuite() {
    pipelines_.clear();
    backends_.clear();
  }
  static std::map<std::string, std::unique_ptr<kernels::Backend>> backends_;
  static std::map<std::string, std::unique_ptr<Pipeline>> pipelines_;
};
std::map<std::string, std::unique_ptr<kernels::Backend>> PipelineBatchTest::backends_;
std::map<std::string, std::unique_ptr<Pipeline>> PipelineBatchTest::pipelines_;

TEST_P(PipelineBatchTest, EachJobOfABatchEqualsItsRunAlone) {
  const Case& c = GetParam();
  Pipeline& p = pipeline(c.backend);
  std::vector<GenerationSettings> jobs = three_jobs(c.sampler, c.guidance);
  for (auto& s : jobs) s.precision = c.precision;
  std::vector<GenerationOutput> alone;
  for (const auto& s : jobs) {
    auto out = p.generate(s);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    alone.push_back(std::move(*out));
  }
  std::vector<int> steps_seen(jobs.size(), 0);
  std::vector<ProgressFn> progress;
  for (size_t i = 0; i < jobs.size(); ++i)
    progress.push_back([&steps_seen, i](int step, int) { steps_seen[i] = step; });
  auto batch = p.generate_batch(jobs, progress);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->size(), jobs.size());
  const int rows = c.guidance > 1.0f ? 2 : 1;
  for (size_t i = 0; i < jobs.size(); ++i) {
    SCOPED_TRACE("job " + std::to_string(i + 1));
    const Result<GenerationOutput>& b = (*batch)[i];
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_TRUE(same_bytes(b->latent, alone[i].latent))
        << "the batched latent differs from the job's run alone";
    EXPECT_EQ(b->rgb, alone[i].rgb);
    EXPECT_EQ(b->batch_jobs, 3);
    EXPECT_EQ(b->unet_batch, 3 * rows);
    EXPECT_EQ(alone[i].batch_jobs, 1);
    EXPECT_EQ(b->steps.size(), alone[i].steps.size());
    EXPECT_EQ(b->memory_plan.jobs, 3);
    EXPECT_EQ(steps_seen[i], alone[i].model_calls);
  }
  // Jobs 1 and 3 share a seed but not a prompt: a batch must not mix rows.
  EXPECT_FALSE(same_bytes((*batch)[0]->latent, (*batch)[2]->latent));
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& b : backends_at_hand()) {
    out.push_back({b, "euler", 5.0f, "fp32"});
    out.push_back({b, "euler_ancestral", 5.0f, "fp32"});
    out.push_back({b, "dpmpp_2m_sde", 5.0f, "fp32"});
    out.push_back({b, "heun", 5.0f, "fp32"});
    out.push_back({b, "euler", 1.0f, "fp32"});
    if (b != "cpu") {
      out.push_back({b, "euler_ancestral", 5.0f, "fp16"});
      out.push_back({b, "euler", 5.0f, "bf16"});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, PipelineBatchTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           std::string g = i.param.guidance > 1.0f ? "cfg" : "nocfg";
                           return i.param.backend + "_" + i.param.sampler + "_" + g + "_" + i.param.precision;
                         });

class PipelineBatchCpuTest : public PipelineBatchTest {};

TEST_F(PipelineBatchCpuTest, ACancelledJobEndsAloneAndTheOthersEqualTheirRunsAlone) {
  Pipeline& p = pipeline("cpu");
  std::vector<GenerationSettings> jobs = three_jobs("euler_ancestral", 5.0f);
  std::atomic<bool> c0{false}, c1{false}, c2{false};
  std::vector<ProgressFn> progress = {{},
                                      [&c1](int step, int) {
                                        if (step == 2) c1.store(true);
                                      },
                                      {}};
  auto batch = p.generate_batch(jobs, progress, {&c0, &c1, &c2});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_FALSE((*batch)[1].ok());
  EXPECT_EQ((*batch)[1].status().code(), StatusCode::kCancelled) << (*batch)[1].status().ToString();
  for (size_t i : {size_t{0}, size_t{2}}) {
    auto out = p.generate(jobs[i]);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE((*batch)[i].ok()) << (*batch)[i].status().ToString();
    EXPECT_TRUE(same_bytes((*batch)[i]->latent, out->latent)) << "job " << i + 1;
  }
  // Every job cancelled: the batch stops.
  c0.store(true);
  c1.store(true);
  c2.store(true);
  auto stopped = p.generate_batch(jobs, {}, {&c0, &c1, &c2});
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
}

TEST_F(PipelineBatchCpuTest, RefusesJobsThatMayNotShareABatch) {
  Pipeline& p = pipeline("cpu");
  std::vector<GenerationSettings> jobs = three_jobs("euler", 5.0f);
  jobs[2].steps = 5;
  auto differ = p.generate_batch(jobs);
  ASSERT_FALSE(differ.ok());
  EXPECT_EQ(differ.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(differ.status().message().find("job 3"), std::string::npos) << differ.status().message();

  jobs = three_jobs("euler", 5.0f);
  jobs[0].width = 60;  // invalid: not a multiple of 8
  auto invalid = p.generate_batch(jobs);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("job 1"), std::string::npos) << invalid.status().message();

  jobs = three_jobs("euler", 5.0f);
  auto short_cancel = p.generate_batch(jobs, {}, {nullptr});
  EXPECT_EQ(short_cancel.status().code(), StatusCode::kInvalidArgument);
}

TEST(BatchKeyTest, PromptsAndSeedAreFreeEverythingElseMatches) {
  GenerationSettings a = job("one", "", 1), b = job("two", "neg", 2);
  EXPECT_FALSE(batch_key(a).empty());
  EXPECT_EQ(batch_key(a), batch_key(b));
  for (auto change : std::vector<void (*)(GenerationSettings&)>{
           [](GenerationSettings& s) { s.steps = 5; }, [](GenerationSettings& s) { s.guidance = 6.0f; },
           [](GenerationSettings& s) { s.sampler = "ddim"; },
           [](GenerationSettings& s) { s.precision = "fp16"; }, [](GenerationSettings& s) { s.width = 72; },
           [](GenerationSettings& s) { s.guidance_rescale = 0.5f; },
           [](GenerationSettings& s) {
             s.loras.push_back({"style.safetensors", 0.8f});
           }}) {
    GenerationSettings c = a;
    change(c);
    EXPECT_NE(batch_key(c), batch_key(a));
  }
  GenerationSettings i2i = a;
  i2i.init_image = "in.png";
  EXPECT_EQ(batch_key(i2i), "");
  GenerationSettings refined = a;
  refined.refiner = "synthetic:tiny-sdxl-refiner";
  EXPECT_EQ(batch_key(refined), "");
}

TEST_F(PipelineBatchCpuTest, CapacityFollowsTheMemoryPlan) {
  Pipeline& p = pipeline("cpu");
  GenerationSettings s = job("x", "", 1);
  // A cpu backend without a cap knows no memory size: every plan fits.
  auto n = p.batch_capacity(s, 8);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 8);
  s.init_image = "in.png";
  auto alone = p.batch_capacity(s, 8);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(*alone, 1);
}


// A batch whose plan does not fit the device runs its jobs alone: batching
// never fails a job that would run alone. The cap lies between one job's
// plan and three jobs' (a cpu backend with a cap plans against it).
TEST(PipelineBatchMemoryTest, ABatchThatDoesNotFitRunsItsJobsAlone) {
  std::vector<GenerationSettings> jobs = three_jobs("euler", 5.0f);
  int64_t one = 0, three = 0;
  {
    auto be = kernels::make_backend("cpu");
    ASSERT_TRUE(be.ok());
    auto p = Pipeline::load("synthetic:tiny-sdxl", **be);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto p1 = plan_memory((*p)->model_shapes(), jobs[0], Placement::kStandard, **be);
    auto p3 = plan_memory((*p)->model_shapes(), jobs[0], Placement::kStandard, **be, 0, nullptr, std::nullopt, 3);
    ASSERT_TRUE(p1.ok() && p3.ok());
    one = p1->peak();
    three = p3->peak();
  }
  ASSERT_LT(one, three);
  ASSERT_EQ(::setenv(kernels::kDeviceMemoryLimitEnv, std::to_string((one + three) / 2).c_str(), 1), 0);
  auto be = kernels::make_backend("cpu");
  ::unsetenv(kernels::kDeviceMemoryLimitEnv);
  ASSERT_TRUE(be.ok()) << be.status().ToString();
  LoadOptions options;
  options.placement = Placement::kStandard;
  auto p = Pipeline::load("synthetic:tiny-sdxl", **be, options);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto capacity = (*p)->batch_capacity(jobs[0], 3);
  ASSERT_TRUE(capacity.ok()) << capacity.status().ToString();
  EXPECT_LT(*capacity, 3);
  auto refused = (*p)->generate_batch(jobs);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();

  const auto root = std::filesystem::temp_directory_path() / ("hipq-batch-alone-" + std::to_string(::getpid()));
  std::vector<GenerationJob> specs(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    specs[i].settings = jobs[i];
    specs[i].output_dir = root / std::to_string(i);
    specs[i].check_parity = false;
  }
  auto runs = run_job_batch(specs, [&](bool* loaded_now) -> Result<Pipeline*> {
    *loaded_now = false;
    return p->get();
  });
  ASSERT_EQ(runs.size(), jobs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    ASSERT_TRUE(runs[i].status.ok()) << runs[i].status.ToString();
    EXPECT_EQ(runs[i].output.batch_jobs, 1);
    auto alone = (*p)->generate(jobs[i]);
    ASSERT_TRUE(alone.ok());
    EXPECT_TRUE(same_bytes(runs[i].output.latent, alone->latent));
  }
  std::filesystem::remove_all(root);
}

// A batch is never img2img: a VAE encoder an earlier img2img job loaded goes
// back before the batch, as generate() lets it go for a text-to-image job
// (a plan counts it for img2img jobs only). Held, it would sit on the device
// beside a batch that batch_capacity sized without it.
TEST(PipelineBatchMemoryTest, ABatchAfterAnImg2ImgJobDoesNotHoldItsEncoder) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("hipq_batch_encoder_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<GenerationSettings> jobs = three_jobs("euler", 5.0f);
  jobs.resize(2);
  auto be = kernels::make_backend("cpu");
  ASSERT_TRUE(be.ok()) << be.status().ToString();
  auto p = Pipeline::load("synthetic:tiny-sdxl", **be);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE((*p)->generate_batch(jobs).ok());  // every model the batch needs loaded
  auto before = (*p)->generate_batch(jobs);
  ASSERT_TRUE(before.ok() && (*before)[0].ok()) << before.status().ToString();

  const GenerationOutput& first = *(*before)[0];
  ASSERT_TRUE(spec::write_png(dir / "init.png", spec::RgbImage{first.width, first.height, first.rgb}).ok());
  GenerationSettings i2i = jobs[0];
  i2i.init_image = (dir / "init.png").string();
  i2i.strength = 0.5f;
  auto refined = (*p)->generate(i2i);
  ASSERT_TRUE(refined.ok()) << refined.status().ToString();

  auto after = (*p)->generate_batch(jobs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE((*after)[i].ok()) << (*after)[i].status().ToString();
    EXPECT_EQ((*after)[i]->peak_memory_bytes, (*(*before)[i]).peak_memory_bytes) << "job " << i + 1;
    EXPECT_TRUE(same_bytes((*after)[i]->latent, (*(*before)[i]).latent)) << "job " << i + 1;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// A cold batch whose plan wants the VAE in another dtype than the load left
// it in: every job's load row holds the model load and the VAE's switch, as
// a job alone reports them (the switch's time added to the row, not put in
// its place). Held to the pipeline's own load time (Pipeline::load_ms, the
// same interval as the row's load), not to another load's: the first load in
// a process runs twice as long as a later one, and a busy machine stretches
// either.
TEST(PipelineBatchMemoryTest, AColdBatchKeepsTheModelLoadInItsLoadRow) {
  std::vector<GenerationSettings> jobs = three_jobs("euler", 5.0f);
  jobs.resize(2);
  for (auto& s : jobs) s.vae_precision = "bf16";
  auto load_ms = [](const GenerationOutput& out) {
    for (const PhaseTiming& t : out.phases)
      if (t.phase == spec::kPhaseLoad) return t.host_ms;
    return -1.0;
  };
  auto be = kernels::make_backend("cpu");
  ASSERT_TRUE(be.ok());
  auto p = Pipeline::load("synthetic:tiny-sdxl", **be);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const double model_load = (*p)->load_ms();
  auto batch = (*p)->generate_batch(jobs);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_GT(model_load, 0.0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE((*batch)[i].ok()) << (*batch)[i].status().ToString();
    EXPECT_FALSE((*batch)[i]->warm);
    // The row is the model load (timed inside the interval load_ms() spans)
    // plus the VAE's cast; a row of the cast alone is a few percent of it.
    EXPECT_GE(load_ms(*(*batch)[i]), model_load / 2)
        << "job " << i + 1 << ": load row " << load_ms(*(*batch)[i]) << " ms, the model load " << model_load << " ms";
  }
}

}  // namespace
}  // namespace hipq::engine
