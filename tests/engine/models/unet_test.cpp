#include "engine/models/unet.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>

#include "reference_data.h"
#include "tests/kernels/forwarding_backend.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

int64_t count(const UNetConfig& c) {
  int64_t n = 0;
  const std::vector<ParamSpec> specs = UNet::parameters(c).value();
  for (const auto& s : specs) {
    int64_t k = 1;
    for (int64_t d : s.shape) k *= d;
    n += k;
  }
  return n;
}

TEST(UNetConfigTest, FullSizeParameterCountsMatchDiffusers) {
  // diffusers' UNet2DConditionModel parameter counts of the released models.
  EXPECT_EQ(count(UNetConfig::sdxl()), 2567463684);
  EXPECT_EQ(count(UNetConfig::sd15()), 859520964);
  EXPECT_EQ(count(UNetConfig::sd21()), 865910724);
}

TEST(UNetConfigTest, JsonRoundTripAndDerivationFromWeights) {
  for (const UNetConfig& c : {UNetConfig::sdxl(), UNetConfig::sd15(), UNetConfig::sd21()}) {
    auto back = UNetConfig::from_json(c.to_json(), "unet/config.json");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->to_json(), c.to_json());
    SyntheticWeightSource w("w", "unet", 0, UNet::parameters(c).value());
    auto derived = UNetConfig::from_weights(w);
    ASSERT_TRUE(derived.ok()) << derived.status().ToString();
    derived->upcast_attention = c.upcast_attention;  // a runtime flag, invisible in the weights
    EXPECT_EQ(derived->to_json(), c.to_json());
  }
}

TEST(UNetConfigTest, ConfigErrorsNameFileAndField) {
  nlohmann::json j = UNetConfig::sdxl().to_json();
  j["transformer_layers_per_block"] = {1, 2};
  auto r = UNetConfig::from_json(j, "x/unet/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x/unet/config.json"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("transformer_layers_per_block"), std::string::npos);
  j = UNetConfig::sd15().to_json();
  j["class_embed_type"] = "timestep";
  r = UNetConfig::from_json(j, "unet/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

// The precision fp8 as a job's load takes it (the default convs).
const Fp8Weights kFp8{true, Fp8Convs::kAligned};

struct UNetRun {
  Vec out;
  Vec ref;
};

// `backend`: the backend to run on (a test double over the cpu one); the cpu
// backend when null.
UNetRun run_reference(const std::string& name, kernels::DType dt, Fp8Weights fp8 = {},
                      std::unique_ptr<kernels::Backend> backend = nullptr) {
  Reference ref = Reference::open(name);
  UNetRun run;
  if (!ref.file) return run;
  auto cfg = UNetConfig::from_json(ref.model.configs.at("unet"), "unet/config.json");
  EXPECT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto be = backend ? std::move(backend) : cpu_backend();
  auto unet = UNet::load(*cfg, *ref.model.weights.at("unet"), *be, dt, fp8);
  EXPECT_TRUE(unet.ok()) << unet.status().ToString();
  if (!unet.ok()) return run;
  DeviceTensor sample = upload(*be, ref.values("unet.sample"), ref.shape("unet.sample"), dt);
  DeviceTensor ctx = upload(*be, ref.values("unet.encoder_hidden_states"), ref.shape("unet.encoder_hidden_states"), dt);
  UNetInputs in;
  in.sample = &sample.t;
  in.encoder_hidden_states = &ctx.t;
  in.timesteps = ref.values("unet.timesteps");
  DeviceTensor text;
  if (cfg->is_sdxl()) {
    text = upload(*be, ref.values("unet.text_embeds"), ref.shape("unet.text_embeds"), dt);
    in.text_embeds = &text.t;
    in.time_ids = ref.values("unet.time_ids");
  }
  auto out = unet->forward(*be, in);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return run;
  EXPECT_EQ(out->t.shape_vec(), ref.shape("unet.out"));
  run.out = download(*be, out->t);
  run.ref = ref.values("unet.out");
  return run;
}

// Stated bounds: fp32 vs diffusers fp32 max abs 2e-5 (outputs span about ±1.5); fp16/bf16 activations
// (fp32 accumulation) by cosine against the fp32 reference.
TEST(UNetReferenceTest, TinySdxlMatchesDiffusers) {
  UNetRun r = run_reference("tiny-sdxl", kernels::DType::kF32);
  const double err = max_abs_diff(r.out, r.ref);
  EXPECT_LT(err, 2e-5);
  std::printf("tiny-sdxl unet fp32 vs diffusers: max abs %.3g, cosine %.8f\n", err, cosine(r.out, r.ref));
}

TEST(UNetReferenceTest, TinySd15MatchesDiffusers) {
  UNetRun r = run_reference("tiny-sd15", kernels::DType::kF32);
  const double err = max_abs_diff(r.out, r.ref);
  EXPECT_LT(err, 2e-5);
  std::printf("tiny-sd15 unet fp32 vs diffusers: max abs %.3g\n", err);
}

TEST(UNetReferenceTest, ReducedPrecisionStaysCloseToFp32Reference) {
  for (auto [dt, min_cos] : {std::pair{kernels::DType::kF16, 0.9999}, std::pair{kernels::DType::kBF16, 0.999}}) {
    UNetRun r = run_reference("tiny-sdxl", dt);
    const double cos = cosine(r.out, r.ref);
    EXPECT_GT(cos, min_cos) << kernels::dtype_name(dt);
    std::printf("tiny-sdxl unet %s vs diffusers fp32: cosine %.6f, max abs %.3g\n",
                std::string(kernels::dtype_name(dt)).c_str(), cos, max_abs_diff(r.out, r.ref));
  }
}

// The precision fp8: bf16 with every Linear / GEGLU in e4m3 (row-wise
// scales), against diffusers' fp32 UNet; bf16 alone for comparison.
TEST(UNetReferenceTest, Fp8LinearLayersStayCloseToFp32Reference) {
  UNetRun bf16 = run_reference("tiny-sdxl", kernels::DType::kBF16);
  UNetRun fp8 = run_reference("tiny-sdxl", kernels::DType::kBF16, kFp8);
  if (fp8.out.empty()) return;  // no reference file here (run_reference said so)
  const double cos = cosine(fp8.out, fp8.ref);
  std::printf("tiny-sdxl unet fp8 vs diffusers fp32: 1 - cos %.3g, max abs %.3g (bf16: 1 - cos %.3g)\n", 1 - cos,
              max_abs_diff(fp8.out, fp8.ref), 1 - cosine(bf16.out, bf16.ref));
  EXPECT_GT(cos, 0.99);
  EXPECT_NE(fp8.out, bf16.out);  // the linear layers did run in e4m3
}

// Counts the fused norms it passes on to the cpu backend (a test double).
class NormCodesCounter final : public kernels::doubles::ForwardingBackend {
 public:
  explicit NormCodesCounter(int* calls) : calls_(calls) {}
  Status layer_norm_fp8(const kernels::Tensor& x, const kernels::Tensor* g, const kernels::Tensor* b, float e,
                        kernels::Tensor& c, kernels::Tensor& s) override {
    ++*calls_;
    return ForwardingBackend::layer_norm_fp8(x, g, b, e, c, s);
  }

 private:
  int* calls_;
};

// HIPQ_FP8_NORM_CODES=1: the transformer blocks' norms hand their fp8 layers
// codes (Backend::layer_norm_fp8) instead of a bf16 output each layer then
// quantizes. By the op's definition the same bytes reach every product: the
// UNet's output is identical, bit for bit; three fused norms a block ran.
TEST(UNetReferenceTest, Fp8NormCodesLeaveTheOutputUnchanged) {
  unsetenv("HIPQ_FP8_NORM_CODES");
  int plain_calls = 0, fused_calls = 0;
  UNetRun plain = run_reference("tiny-sdxl", kernels::DType::kBF16, kFp8,
                                std::make_unique<NormCodesCounter>(&plain_calls));
  if (plain.out.empty()) return;  // no reference file here (run_reference said so)
  setenv("HIPQ_FP8_NORM_CODES", "1", 1);
  UNetRun codes = run_reference("tiny-sdxl", kernels::DType::kBF16, kFp8,
                                std::make_unique<NormCodesCounter>(&fused_calls));
  unsetenv("HIPQ_FP8_NORM_CODES");
  EXPECT_EQ(plain_calls, 0);
  EXPECT_GT(fused_calls, 0);
  EXPECT_EQ(fused_calls % 3, 0);
  ASSERT_EQ(codes.out.size(), plain.out.size());
  EXPECT_EQ(codes.out, plain.out);
  EXPECT_GT(cosine(codes.out, codes.ref), 0.99);
}

TEST(UNetTest, RejectsInputsThatDoNotFitTheConfig) {
  auto m = make_synthetic_model("tiny-sdxl");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto cfg = UNetConfig::from_json(m->configs.at("unet"), "unet/config.json");
  auto be = cpu_backend();
  auto unet = UNet::load(*cfg, *m->weights.at("unet"), *be, kernels::DType::kF32);
  ASSERT_TRUE(unet.ok());
  DeviceTensor sample = upload(*be, Vec(2 * 4 * 8 * 8, 0.1f), {2, 4, 8, 8});
  DeviceTensor ctx = upload(*be, Vec(2 * 77 * 32, 0.1f), {2, 77, 32});  // 32 wide, config wants 64
  UNetInputs in;
  in.sample = &sample.t;
  in.encoder_hidden_states = &ctx.t;
  in.timesteps = {10, 10};
  auto out = unet->forward(*be, in);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("encoder_hidden_states"), std::string::npos);
}

TEST(UNetTest, ContextProjectionsMadeOnceGiveTheSameOutput) {
  // UNetStep projects the text context through every cross attention once per
  // generation; a forward reading those projections equals one projecting its
  // own, and projections made from another context are not served.
  Reference ref = Reference::open("tiny-sdxl");
  if (!ref.file) GTEST_SKIP() << "no tiny-sdxl reference data";
  auto cfg = UNetConfig::from_json(ref.model.configs.at("unet"), "unet/config.json");
  ASSERT_TRUE(cfg.ok());
  auto be = cpu_backend();
  auto unet = UNet::load(*cfg, *ref.model.weights.at("unet"), *be, kernels::DType::kF32);
  ASSERT_TRUE(unet.ok()) << unet.status().ToString();
  DeviceTensor sample = upload(*be, ref.values("unet.sample"), ref.shape("unet.sample"));
  Vec ctx_values = ref.values("unet.encoder_hidden_states");
  DeviceTensor ctx = upload(*be, ctx_values, ref.shape("unet.encoder_hidden_states"));
  for (float& v : ctx_values) v = -v;
  DeviceTensor other = upload(*be, ctx_values, ref.shape("unet.encoder_hidden_states"));
  DeviceTensor text = upload(*be, ref.values("unet.text_embeds"), ref.shape("unet.text_embeds"));
  UNetInputs in;
  in.sample = &sample.t;
  in.encoder_hidden_states = &ctx.t;
  in.timesteps = ref.values("unet.timesteps");
  in.text_embeds = &text.t;
  in.time_ids = ref.values("unet.time_ids");
  auto plain = unet->forward(*be, in);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  auto kv = unet->project_context(*be, ctx.t);
  ASSERT_TRUE(kv.ok()) << kv.status().ToString();
  EXPECT_GT(kv->size(), 0u);
  in.context_kv = &*kv;
  auto made = unet->forward(*be, in);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(download(*be, made->t), download(*be, plain->t));
  auto other_kv = unet->project_context(*be, other.t);
  ASSERT_TRUE(other_kv.ok());
  in.context_kv = &*other_kv;
  auto mismatched = unet->forward(*be, in);
  ASSERT_TRUE(mismatched.ok());
  EXPECT_EQ(download(*be, mismatched->t), download(*be, plain->t));
  DeviceTensor narrow = upload(*be, Vec(2 * 77 * 32, 0.1f), {2, 77, 32});
  EXPECT_EQ(unet->project_context(*be, narrow.t).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::engine
