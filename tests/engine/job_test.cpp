// The job sequence of engine/job.h on the cpu backend and a tiny synthetic
// model: outputs on disk with their hashes, the phases in order, parity with
// and without a golden, and the failures that must come before any device
// work (an unwritable output directory) or leave no half-written file.
#include "engine/job.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/fs.h"
#include "engine/golden.h"
#include "engine/pipeline.h"
#include "spec/golden_format.h"
#include "spec/png.h"
#include "kernels/backend.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModel = "synthetic:tiny-sd15";

fs::path temp_dir(const std::string& name) {
  auto d = fs::path(::testing::TempDir()) / ("hipq_job_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<std::string> phase_names(const std::vector<PhaseTiming>& phases) {
  std::vector<std::string> out;
  for (const auto& p : phases) out.push_back(p.phase);
  return out;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

class JobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto b = kernels::make_backend("cpu");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value().release();
  }
  static void TearDownTestSuite() {
    pipeline_.reset();
    delete backend_;
    backend_ = nullptr;
  }

  // Loads the model on the first call (loaded_now), hands the same pipeline
  // over after; counts the calls.
  PipelineLoader loader() {
    return [this](bool* loaded_now) -> Result<Pipeline*> {
      ++loads_;
      if (!pipeline_) {
        HIPQ_ASSIGN_OR_RETURN(pipeline_, Pipeline::load(kModel, *backend_));
        *loaded_now = true;
      }
      return pipeline_.get();
    };
  }

  static GenerationJob job_spec(const fs::path& out) {
    GenerationJob s;
    s.settings.prompt = "a small red boat";
    s.settings.seed = 7;
    s.settings.width = 64;
    s.settings.height = 64;
    s.settings.steps = 2;
    s.output_dir = out;
    return s;
  }

  int loads_ = 0;
  static kernels::Backend* backend_;
  static std::unique_ptr<Pipeline> pipeline_;
};
kernels::Backend* JobTest::backend_ = nullptr;
std::unique_ptr<Pipeline> JobTest::pipeline_;

TEST_F(JobTest, WithoutAGoldenWritesEveryOutputAndJudgesNoGolden) {
  const fs::path out = temp_dir("no_golden") / "created";
  GenerationJob s = job_spec(out);
  int progress_calls = 0;
  s.progress = [&](int, int steps) {
    ++progress_calls;
    EXPECT_EQ(steps, 2);
  };
  GenerationRun r = run_job(s, loader());
  ASSERT_TRUE(r.status.ok()) << job_step_name(r.failed_step) << ": " << r.status.ToString();
  EXPECT_EQ(progress_calls, 2);
  EXPECT_EQ(loads_, 1);
  ASSERT_NE(r.pipeline, nullptr);

  // Files: in the order written, each hashed as it lies on disk.
  ASSERT_EQ(r.files.size(), 3u);
  EXPECT_EQ(r.files[0].kind, "latent");
  EXPECT_EQ(r.files[0].path, out / "latent.safetensors");
  EXPECT_EQ(r.files[1].kind, "png");
  EXPECT_EQ(r.files[1].path, out / "image.png");
  EXPECT_EQ(r.files[2].kind, "timings");
  EXPECT_EQ(r.files[2].path, out / "timings.json");
  for (const JobFile& f : r.files) {
    auto sha = sha256_file(f.path);
    ASSERT_TRUE(sha.ok()) << f.path;
    EXPECT_EQ(f.sha256, *sha) << f.path;
    EXPECT_EQ(f.bytes, static_cast<int64_t>(fs::file_size(f.path))) << f.path;
  }

  // Phases: the pipeline's, then write and parity.
  std::vector<std::string> names = phase_names(r.phases);
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(names[names.size() - 2], "write");
  EXPECT_EQ(names.back(), "parity");
  for (const char* want : {"load", "text_encode", "denoise", "decode"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), want), 1) << want;
  }
  EXPECT_EQ(r.output.steps.size(), 2u);

  // Parity: no golden asked for, so NO_GOLDEN with the run's key.
  ASSERT_TRUE(r.parity.has_value());
  EXPECT_EQ(r.parity->verdict, Verdict::kNoGolden);
  EXPECT_EQ(r.golden.key, spec::golden_key(r.pipeline->weights_sha256(), s.settings));
  EXPECT_FALSE(r.golden.golden.has_value());
  EXPECT_FALSE(r.golden.missing_in_dir);

  // timings.json holds the same phases and the parity block.
  auto text = read_file(out / "timings.json");
  ASSERT_TRUE(text.ok());
  auto t = nlohmann::json::parse(*text);
  std::vector<std::string> written;
  for (const auto& p : t["phases"]) written.push_back(p["phase"].get<std::string>());
  EXPECT_EQ(written, names);
  EXPECT_EQ(t["parity"]["verdict"], "NO_GOLDEN");
  EXPECT_TRUE(t["parity"]["golden"].is_null());
  EXPECT_EQ(t["steps"].size(), 2u);
  // And the placement it ran in, with its plan (engine/memory_plan.h).
  EXPECT_EQ(t["memory_plan"]["placement"], "standard");
  EXPECT_GT(t["memory_plan"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_GE(t["memory_plan"]["peak_bytes"].get<int64_t>(), t["peak_memory_bytes"].get<int64_t>());
  // Each phase's measured peak, beside the plan's moment of that phase.
  for (const char* phase : {"text_encode", "denoise", "decode"}) {
    SCOPED_TRACE(phase);
    ASSERT_TRUE(t["phase_peak_bytes"].contains(phase)) << t["phase_peak_bytes"].dump();
    EXPECT_GT(t["phase_peak_bytes"][phase].get<int64_t>(), 0);
    EXPECT_LE(t["phase_peak_bytes"][phase].get<int64_t>(), t["peak_memory_bytes"].get<int64_t>());
    EXPECT_LE(t["phase_peak_bytes"][phase].get<int64_t>(),
              t["memory_plan"][std::string(phase) + "_bytes"].get<int64_t>());
  }
}

TEST_F(JobTest, AGoldenOfTheSameRunIsFoundByKeyAndPasses) {
  const fs::path root = temp_dir("golden");
  // The first run makes the reference output; its latent becomes the golden.
  GenerationJob first = job_spec(root / "first");
  first.check_parity = false;
  first.save_png = false;
  first.save_timings = false;
  GenerationRun made = run_job(first, loader());
  ASSERT_TRUE(made.status.ok()) << made.status.ToString();
  EXPECT_FALSE(made.parity.has_value());
  EXPECT_EQ(phase_names(made.phases).back(), "write") << "no parity phase when parity is off";
  ASSERT_EQ(made.files.size(), 1u);

  Golden g;
  g.model = kModel;
  g.weights_sha256 = made.pipeline->weights_sha256();
  g.settings = first.settings;
  g.latent = made.output.latent;
  g.latent_shape = made.output.latent_shape;
  g.provenance.reference = "hipq";
  g.provenance.reference_version = "test";
  g.provenance.reference_commit = "0123456789abcdef";
  g.provenance.device = "cpu";
  g.provenance.precision = "fp32";
  g.provenance.pipeline_class = "hipq::engine::Pipeline";
  g.provenance.scheduler_class = "EulerDiscreteScheduler";
  g.provenance.created_at = "2026-01-01T00:00:00Z";
  const fs::path goldens = root / "goldens";
  fs::create_directories(goldens);
  ASSERT_EQ(made.golden.key, spec::golden_key(g.weights_sha256, g.settings));
  ASSERT_TRUE(write_golden(goldens / spec::golden_file_name(made.golden.key), g).ok());

  GenerationJob second = job_spec(root / "second");
  second.golden.dir = goldens;
  GenerationRun r = run_job(second, loader());
  ASSERT_TRUE(r.status.ok()) << job_step_name(r.failed_step) << ": " << r.status.ToString();
  EXPECT_FALSE(r.loaded_now) << "the pipeline was handed over from the cache";
  EXPECT_EQ(std::count_if(r.phases.begin(), r.phases.end(), [](const PhaseTiming& p) { return p.phase == "load"; }),
            0)
      << "a cached pipeline reports no load";
  EXPECT_TRUE(r.output.warm);
  ASSERT_TRUE(r.golden.golden.has_value());
  EXPECT_EQ(r.golden.path, goldens / spec::golden_file_name(r.golden.key));
  ASSERT_TRUE(r.parity.has_value());
  EXPECT_EQ(r.parity->verdict, Verdict::kPass) << r.parity->reason;
  ASSERT_TRUE(r.parity->metrics.has_value());
  EXPECT_GT(r.parity->metrics->cosine, 0.999999);

  auto t = nlohmann::json::parse(*read_file(root / "second" / "timings.json"));
  EXPECT_EQ(t["parity"]["verdict"], "PASS");
  EXPECT_EQ(t["parity"]["golden"], r.golden.key);
  EXPECT_TRUE(t["parity"].contains("gate"));

  // Another seed has another key: the directory holds none for it.
  GenerationJob other = job_spec(root / "other");
  other.settings.seed = 8;
  other.golden.dir = goldens;
  GenerationRun none = run_job(other, loader());
  ASSERT_TRUE(none.status.ok()) << none.status.ToString();
  EXPECT_TRUE(none.golden.missing_in_dir);
  EXPECT_NE(none.golden.key, r.golden.key);
  EXPECT_EQ(none.parity->verdict, Verdict::kNoGolden);
}

TEST_F(JobTest, AnUnwritableOutputDirectoryFailsBeforeLoadingAndWritesNothing) {
  const fs::path root = temp_dir("unwritable");
  ASSERT_TRUE(write_file_atomic(root / "plain-file", "not a directory\n").ok());
  GenerationJob s = job_spec(root / "plain-file" / "out");
  GenerationRun r = run_job(s, loader());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, JobStep::kOutputDir);
  EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status.message().find("output directory"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find((root / "plain-file").string()), std::string::npos) << r.status.message();
  EXPECT_EQ(loads_, 0) << "nothing was loaded for a job that cannot write its outputs";
  EXPECT_EQ(r.pipeline, nullptr);
  EXPECT_TRUE(r.files.empty());
  EXPECT_EQ(entries(root), std::set<std::string>{"plain-file"});
}

TEST_F(JobTest, AnOutputThatCannotBeWrittenLeavesNoHalfWrittenFile) {
  const fs::path out = temp_dir("blocked");
  // A directory where the image should go: the latent is written, the image fails.
  fs::create_directories(out / "image.png");
  GenerationRun r = run_job(job_spec(out), loader());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, JobStep::kWrite);
  EXPECT_NE(r.status.message().find("image.png"), std::string::npos) << r.status.message();
  EXPECT_EQ(entries(out), (std::set<std::string>{"image.png", "latent.safetensors"}))
      << "no temporary file and no timings.json after the failed write";
  EXPECT_TRUE(fs::is_empty(out / "image.png"));
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].kind, "latent");
  EXPECT_FALSE(r.parity.has_value());
}

TEST_F(JobTest, ALoaderErrorComesBackUnchangedWithItsStep) {
  const fs::path out = temp_dir("load_error");
  GenerationRun r = run_job(job_spec(out), [](bool*) -> Result<Pipeline*> {
    return Status::NotFound("model folder /nowhere: no such directory");
  });
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, JobStep::kLoad);
  EXPECT_EQ(r.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status.message(), "model folder /nowhere: no such directory");
  EXPECT_TRUE(fs::is_empty(out));
}

// A file the job names that changed since it was submitted fails the job
// naming the file and both digests, before the model is loaded; the digest
// it was submitted with runs and keys the golden by content.
TEST_F(JobTest, AnInitImageThatChangedSinceSubmissionFailsBeforeLoadingAndTheSubmittedOneRuns) {
  const fs::path out = temp_dir("changed_init");
  const fs::path init = out.parent_path() / "hipq_job_init.png";
  ASSERT_TRUE(spec::write_png(init, spec::RgbImage{64, 64, std::vector<uint8_t>(64 * 64 * 3, 200)}).ok());
  GenerationJob s = job_spec(out);
  s.settings.init_image = init.string();
  s.settings.strength = 0.5f;
  s.check_parity = false;
  s.inputs.init_image = std::string(64, '0');
  GenerationRun r = run_job(s, loader());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status.message().find("init image " + init.string() + " changed since the job was submitted"),
            std::string::npos)
      << r.status.message();
  EXPECT_NE(r.status.message().find(*sha256_file(init)), std::string::npos) << r.status.message();
  EXPECT_EQ(loads_, 0);
  EXPECT_TRUE(fs::is_empty(out));

  s.inputs.init_image = *sha256_file(init);
  GenerationRun ok = run_job(s, loader());
  ASSERT_TRUE(ok.status.ok()) << ok.status.ToString();
  EXPECT_EQ(ok.inputs.init_image, s.inputs.init_image);
  EXPECT_EQ(ok.golden.key, spec::golden_key(ok.pipeline->weights_sha256(), s.settings, s.inputs));
  EXPECT_NE(ok.golden.key, spec::golden_key(ok.pipeline->weights_sha256(), s.settings));
}

TEST_F(JobTest, ACorruptGoldenIsAnErrorOfTheGoldenStepBeforeAnyGeneration) {
  const fs::path root = temp_dir("corrupt");
  ASSERT_TRUE(write_file_atomic(root / "g.safetensors", "not a safetensors file").ok());
  GenerationJob s = job_spec(root / "out");
  s.golden.file = root / "g.safetensors";
  int progress_calls = 0;
  s.progress = [&](int, int) { ++progress_calls; };
  GenerationRun r = run_job(s, loader());
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.failed_step, JobStep::kGolden);
  EXPECT_NE(r.status.message().find("g.safetensors"), std::string::npos) << r.status.message();
  EXPECT_EQ(progress_calls, 0);
  EXPECT_TRUE(fs::is_empty(root / "out"));
}

}  // namespace
}  // namespace hipq::engine
