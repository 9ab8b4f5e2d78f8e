#include "engine/models/clip_text.h"

#include <gtest/gtest.h>

#include "reference_data.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

// Stated bound: fp32 CPU vs transformers fp32 on identical weights.
constexpr double kClipReferenceMaxAbs = 1e-5;

void check_reference(const std::string& model_name, const std::string& key) {
  Reference ref = Reference::open(model_name);
  ASSERT_TRUE(ref.file && ref.model.weights.count(key));
  auto cfg = ClipTextConfig::from_json(ref.model.configs.at(key), key + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto be = cpu_backend();
  auto model = ClipTextModel::load(*cfg, *ref.model.weights.at(key), *be, kernels::DType::kF32);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Vec ids_f = ref.values(key + ".input_ids");
  std::vector<int32_t> ids(ids_f.begin(), ids_f.end());
  ClipTextRequest req;
  req.penultimate = true;
  req.pooled = true;
  auto out = model->forward(*be, ids, 2, req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double pen = max_abs_diff(download(*be, out->penultimate.t), ref.values(key + ".penultimate"));
  const double last = max_abs_diff(download(*be, out->last_hidden_state.t), ref.values(key + ".last_hidden_state"));
  const double pooled = max_abs_diff(download(*be, out->pooled.t), ref.values(key + ".pooled"));
  EXPECT_LT(pen, kClipReferenceMaxAbs);
  EXPECT_LT(last, kClipReferenceMaxAbs);
  EXPECT_LT(pooled, kClipReferenceMaxAbs);
  std::printf("%s %s vs transformers: max abs penultimate %.3g, last %.3g, pooled %.3g\n", model_name.c_str(),
              key.c_str(), pen, last, pooled);
}

TEST(ClipTextReferenceTest, TinySdxlTextEncoderMatchesTransformers) { check_reference("tiny-sdxl", "text_encoder"); }
TEST(ClipTextReferenceTest, TinySdxlTextEncoder2MatchesTransformers) {
  check_reference("tiny-sdxl", "text_encoder_2");
}
TEST(ClipTextReferenceTest, TinySd15TextEncoderMatchesTransformers) { check_reference("tiny-sd15", "text_encoder"); }

}  // namespace
}  // namespace hipq::engine
