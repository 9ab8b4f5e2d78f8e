// img2img through Pipeline::generate on the tiny synthetic SDXL (cpu backend):
// the schedule cut (steps run), the job's generator (same seed, same bits),
// diffusers' strength 1 (the image encoded and fully noised, not text-to-image)
// and the refusals of init images that do not fit, before any device work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/fs.h"
#include "engine/pipeline.h"
#include "spec/png.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;
using spec::GenerationSettings;

class PipelineImg2ImgTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = kernels::make_backend("cpu").value().release();
    pipeline_ = Pipeline::load("synthetic:tiny-sdxl", *backend_).value().release();
    // One folder per process: ctest runs each case as its own process, side by side.
    dir_ = fs::path(::testing::TempDir()) / ("hipq_pipeline_img2img_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // The init image: a text-to-image result of the same model, as a user would take one.
    auto t2i = pipeline_->generate(text_to_image(1));
    HIPQ_CHECK(t2i.ok());
    t2i_latent_ = new std::vector<float>(t2i->latent);
    spec::RgbImage img{t2i->width, t2i->height, t2i->rgb};
    HIPQ_CHECK(spec::write_png(dir_ / "init.png", img).ok());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    delete pipeline_;
    delete backend_;
    delete t2i_latent_;
  }
  static GenerationSettings text_to_image(uint64_t seed) {
    GenerationSettings s;
    s.prompt = "a red fox sleeping in the snow";
    s.seed = seed;
    s.width = 64;
    s.height = 64;
    s.steps = 4;
    s.guidance = 5.0f;
    return s;
  }
  static GenerationSettings img2img(uint64_t seed, float strength) {
    GenerationSettings s = text_to_image(seed);
    s.init_image = (dir_ / "init.png").string();
    s.strength = strength;
    return s;
  }
  static kernels::Backend* backend_;
  static Pipeline* pipeline_;
  static fs::path dir_;
  static std::vector<float>* t2i_latent_;
};
kernels::Backend* PipelineImg2ImgTest::backend_ = nullptr;
Pipeline* PipelineImg2ImgTest::pipeline_ = nullptr;
fs::path PipelineImg2ImgTest::dir_;
std::vector<float>* PipelineImg2ImgTest::t2i_latent_ = nullptr;

TEST_F(PipelineImg2ImgTest, HalfStrengthRunsHalfTheStepsAndTheSeedDecidesTheBits) {
  std::vector<int> seen;
  auto a = pipeline_->generate(img2img(7, 0.5f), [&](int step, int steps) {
    EXPECT_EQ(steps, 2);
    seen.push_back(step);
  });
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  EXPECT_EQ(a->steps.size(), 2u);
  EXPECT_EQ(a->model_calls, 2);
  std::vector<std::string> names;
  for (const auto& ph : a->phases) names.push_back(ph.phase);
  EXPECT_NE(std::find(names.begin(), names.end(), "image_encode"), names.end());
  for (float v : a->latent) ASSERT_TRUE(std::isfinite(v));

  auto again = pipeline_->generate(img2img(7, 0.5f));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->latent, a->latent) << "same seed, same init image: the same bits";
  EXPECT_EQ(again->rgb, a->rgb);
  auto other = pipeline_->generate(img2img(8, 0.5f));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->latent, a->latent) << "another seed draws another sample and noise";
}

TEST_F(PipelineImg2ImgTest, StrengthOneRunsEveryStepFromTheNoisedImageNotFromNoise) {
  // diffusers' strength 1: t_start 0, but the latent is still the encoded
  // image plus noise * sigma_max (not noise * init_noise_sigma), and the
  // generator's first draw is the encoder's sample: not text-to-image.
  std::vector<int> seen;
  auto full = pipeline_->generate(img2img(1, 1.0f), [&](int step, int) { seen.push_back(step); });
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_NE(full->latent, *t2i_latent_);
  // Strength 1 of a noised image still depends on the image a little; a low
  // strength stays close to it: the final latents of strength 0.25 lie nearer
  // the init image's latent than those of strength 1.
  auto low = pipeline_->generate(img2img(1, 0.25f));
  ASSERT_TRUE(low.ok());
  auto distance = [&](const std::vector<float>& v) {
    double d = 0;
    for (size_t i = 0; i < v.size(); ++i) d += (v[i] - (*t2i_latent_)[i]) * (v[i] - (*t2i_latent_)[i]);
    return d;
  };
  EXPECT_LT(distance(low->latent), distance(full->latent));
}

TEST_F(PipelineImg2ImgTest, InitImagesThatDoNotFitAreRefusedWithTheirName) {
  GenerationSettings s = img2img(1, 0.5f);
  s.width = 128;  // the image is 64 x 64
  auto r = pipeline_->generate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("init.png"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("64x64"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("128x64"), std::string::npos) << r.status().message();

  const std::string bytes = read_file(dir_ / "init.png").value();
  ASSERT_TRUE(write_file_atomic(dir_ / "truncated.png", bytes.substr(0, bytes.size() / 2)).ok());
  s = img2img(1, 0.5f);
  s.init_image = (dir_ / "truncated.png").string();
  r = pipeline_->generate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("truncated.png"), std::string::npos) << r.status().message();

  s.init_image = (dir_ / "missing.png").string();
  r = pipeline_->generate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing.png"), std::string::npos) << r.status().message();

  s = img2img(1, 0.1f);  // int(4 * 0.1) = 0 steps
  r = pipeline_->generate(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("runs no step"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hipq::engine
