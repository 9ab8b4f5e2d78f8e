// SDXL-size text encoders (synthetic weights, CLIP ViT-L/14 + OpenCLIP
// bigG/14) on the hip backend against the cpu backend, at f32/f16/bf16.
// Needs a GPU (skips with "no device" otherwise).
//
// Optional, for the comparison with transformers (tools/reference/
// compare_text_encoders.py):
//   HIPQ_TEXT_ENCODER_DUMP=FILE.safetensors  writes ids and every output;
//   HIPQ_TEXT_ENCODER_EXPORT=DIR             exports both encoders as a
//                                            diffusers folder (needs the CLIP vocab).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine/export.h"
#include "engine/models/clip_text.h"
#include "engine/synthetic_weights.h"
#include "engine/tokenizer.h"
#include "reference_data.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT
using kernels::DType;

struct Outputs {
  Vec penultimate, last, pooled;
  double ms = 0;
};

Outputs run(kernels::Backend& be, const ClipTextConfig& cfg, const WeightSource& w, DType dt,
            const std::vector<int32_t>& ids) {
  Outputs o;
  auto model = ClipTextModel::load(cfg, w, be, dt);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return o;
  ClipTextRequest req;
  req.penultimate = true;
  req.pooled = true;
  if (be.info().name != "cpu") {
    auto first = model->forward(be, ids, 2, req);  // warm-up (pool, kernels)
    EXPECT_TRUE(first.ok()) << first.status().ToString();
  }
  EXPECT_TRUE(be.synchronize().ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto out = model->forward(be, ids, 2, req);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return o;
  EXPECT_TRUE(be.synchronize().ok());
  o.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  o.penultimate = download(be, out->penultimate.t);
  o.last = download(be, out->last_hidden_state.t);
  o.pooled = download(be, out->pooled.t);
  return o;
}

TEST(SdxlTextEncodersGpuTest, HipMatchesCpuAtFullSize) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  // Each measurement reaches the log even if a later step dies.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  auto arch = synthetic_architecture("sdxl");
  ASSERT_TRUE(arch.ok());
  auto ref = SafetensorsFile::open(model_data_dir() / "tiny-sdxl.safetensors");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto cpu = kernels::make_backend("cpu").value();
  auto hip = kernels::make_backend("hip", 0).value();
  std::printf("device: %s (%s)\n", hip->info().device_name.c_str(), hip->info().arch.c_str());

  std::vector<std::pair<std::string, HostTensor>> dump;
  ModelComponents exported;
  exported.spec = "synthetic:sdxl@0 (text encoders)";
  exported.family = "sdxl";
  for (const std::string key : {"text_encoder", "text_encoder_2"}) {
    const ClipTextConfig& cfg = key == "text_encoder" ? arch->text_encoder : arch->text_encoder_2;
    auto weights = std::make_shared<SyntheticWeightSource>(key + " of synthetic:sdxl@0", key, 0,
                                                           ClipTextModel::parameters(cfg).value());
    exported.weights[key] = weights;
    exported.configs[key] = cfg.to_json();
    Vec ids_f = (*ref)->get(key + ".input_ids").value().to_f32();
    std::vector<int32_t> ids(ids_f.begin(), ids_f.end());
    dump.emplace_back(key + ".input_ids", (*ref)->get(key + ".input_ids").value());

    Outputs c = run(*cpu, cfg, *weights, DType::kF32, ids);
    std::printf("%s cpu f32: %.1f ms\n", key.c_str(), c.ms);
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      Outputs h = run(*hip, cfg, *weights, dt, ids);
      const std::string tag = "hip_" + std::string(kernels::dtype_name(dt));
      std::printf("%s %s vs cpu f32 (%.2f ms): penultimate cos %.7f max %.3g | last cos %.7f max %.3g | pooled cos %.7f max %.3g\n",
                  key.c_str(), tag.c_str(), h.ms, cosine(h.penultimate, c.penultimate),
                  max_abs_diff(h.penultimate, c.penultimate), cosine(h.last, c.last), max_abs_diff(h.last, c.last),
                  cosine(h.pooled, c.pooled), max_abs_diff(h.pooled, c.pooled));
      const double min_cos = dt == DType::kF32 ? 0.99999 : (dt == DType::kF16 ? 0.999 : 0.99);
      EXPECT_GT(cosine(h.penultimate, c.penultimate), min_cos) << key << " " << tag;
      EXPECT_GT(cosine(h.last, c.last), min_cos) << key << " " << tag;
      EXPECT_GT(cosine(h.pooled, c.pooled), min_cos) << key << " " << tag;
      dump.emplace_back(key + "." + tag + ".penultimate", HostTensor::from_f32(h.penultimate, {2, 77, cfg.hidden_size}));
      dump.emplace_back(key + "." + tag + ".last_hidden_state", HostTensor::from_f32(h.last, {2, 77, cfg.hidden_size}));
      dump.emplace_back(key + "." + tag + ".pooled", HostTensor::from_f32(h.pooled, {2, static_cast<int64_t>(h.pooled.size() / 2)}));
    }
    dump.emplace_back(key + ".cpu_f32.penultimate", HostTensor::from_f32(c.penultimate, {2, 77, cfg.hidden_size}));
    dump.emplace_back(key + ".cpu_f32.last_hidden_state", HostTensor::from_f32(c.last, {2, 77, cfg.hidden_size}));
    dump.emplace_back(key + ".cpu_f32.pooled", HostTensor::from_f32(c.pooled, {2, static_cast<int64_t>(c.pooled.size() / 2)}));
  }
  if (const char* path = std::getenv("HIPQ_TEXT_ENCODER_DUMP")) {
    ASSERT_TRUE(write_safetensors(path, dump, {{"model", "synthetic:sdxl@0"}}).ok());
  }
  if (const char* dir = std::getenv("HIPQ_TEXT_ENCODER_EXPORT")) {
    auto vocab = find_default_clip_vocab();
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    exported.vocab = *vocab;
    ExportOptions o;
    o.components = {"text_encoder", "text_encoder_2"};
    Status st = export_diffusers_folder(exported, dir, o);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
}

}  // namespace
}  // namespace hipq::engine
