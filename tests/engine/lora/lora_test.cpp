// LoRA adapters (engine/lora/): files of each format written here for the tiny
// synthetic models, merged weights checked against an independent double
// precision reference W + s * (alpha / r) * U @ D, the two kohya name styles
// and the diffusers/PEFT format giving the same bits, several LoRAs at once,
// every refusal with its message, and the pipeline: scale 0 is the base image
// bit for bit, switching sets equals fresh loads, the step is unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

#include "base/fs.h"
#include "engine/image_parameters.h"
#include "engine/lora/lora_file.h"
#include "engine/lora/lora_keys.h"
#include "engine/lora/lora_merge.h"
#include "engine/lora/lora_rebind.h"
#include "engine/lora/lora_set.h"
#include "engine/model_components.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/pipeline.h"
#include "engine/synthetic.h"
#include "spec/lora_spec.h"

namespace hipq::engine::lora {
namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, HostTensor>>;

fs::path temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("hipq_lora_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// The files written here go with the process.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(temp_dir(), ec);
  }
};
const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

HostTensor random_tensor(std::vector<int64_t> shape, uint32_t seed, float range = 0.5f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return HostTensor::from_f32(std::move(v), std::move(shape));
}

HostTensor scalar(float v) { return HostTensor::from_f32({v}, {}); }

const ModelComponents& model(const std::string& name) {
  static std::map<std::string, ModelComponents> models;
  auto it = models.find(name);
  if (it == models.end()) {
    auto m = make_synthetic_model("synthetic:" + name);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    it = models.emplace(name, *m).first;
  }
  return it->second;
}

std::vector<int64_t> base_shape(const std::string& model_name, const std::string& component, const std::string& w) {
  auto m = model(model_name).weights.at(component)->meta(w);
  EXPECT_TRUE(m.ok()) << component << " " << w << ": " << m.status().ToString();
  return m.ok() ? m->shape : std::vector<int64_t>{};
}

// One layer of a tiny model named three ways.
struct Layer {
  std::string component;   // unet | text_encoder | text_encoder_2
  std::string weight;      // diffusers weight name
  std::string kohya_sgm;   // kohya module, SGM/LDM block names ("" = same as diffusers-style)
  std::string kind;        // for messages
};

std::string underscored(std::string s) {
  std::replace(s.begin(), s.end(), '.', '_');
  return s;
}
std::string module_of(const std::string& weight) { return weight.substr(0, weight.size() - 7); }

// tiny-sdxl: down_blocks.0 DownBlock2D (32), down_blocks.1 cross-attention (64,
// 2 transformer layers), up_blocks.0 cross-attention, up_blocks.1 plain.
const std::vector<Layer>& sdxl_layers() {
  static const std::vector<Layer> layers = {
      {"unet", "down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight",
       "input_blocks_4_1_transformer_blocks_0_attn1_to_q", "self-attention"},
      {"unet", "up_blocks.0.attentions.0.transformer_blocks.1.attn2.to_k.weight",
       "output_blocks_0_1_transformer_blocks_1_attn2_to_k", "cross-attention"},
      {"unet", "down_blocks.1.attentions.1.transformer_blocks.0.attn1.to_out.0.weight",
       "input_blocks_5_1_transformer_blocks_0_attn1_to_out_0", "attention out"},
      {"unet", "mid_block.attentions.0.proj_in.weight", "middle_block_1_proj_in", "linear proj_in"},
      {"unet", "down_blocks.1.attentions.1.transformer_blocks.0.ff.net.0.proj.weight",
       "input_blocks_5_1_transformer_blocks_0_ff_net_0_proj", "GEGLU linear"},
      {"unet", "down_blocks.0.resnets.0.conv1.weight", "input_blocks_1_0_in_layers_2", "conv 3x3 (LoCon)"},
      {"unet", "down_blocks.1.resnets.0.conv_shortcut.weight", "input_blocks_4_0_skip_connection", "conv 1x1"},
      {"unet", "down_blocks.0.downsamplers.0.conv.weight", "input_blocks_3_0_op", "downsampler conv 3x3"},
      {"unet", "mid_block.resnets.1.conv2.weight", "middle_block_2_out_layers_3", "mid resnet conv 3x3"},
      {"unet", "up_blocks.0.upsamplers.0.conv.weight", "output_blocks_2_2_conv", "upsampler conv 3x3"},
      {"unet", "up_blocks.1.resnets.2.time_emb_proj.weight", "output_blocks_5_0_emb_layers_1", "time embedding linear"},
      {"unet", "time_embedding.linear_1.weight", "time_embed_0", "linear"},
      {"text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", "", "text encoder 1 attention"},
      {"text_encoder_2", "text_model.encoder.layers.1.mlp.fc1.weight", "", "text encoder 2 mlp"},
  };
  return layers;
}

constexpr int64_t kRank = 4;

struct Pair {
  HostTensor down, up;
};

// A pair of rank kRank for a weight of `shape` (conv: 3x3 or 1x1 down, 1x1 up).
Pair make_lora_pair(const std::vector<int64_t>& shape, uint32_t seed) {
  if (shape.size() == 4) {
    return {random_tensor({kRank, shape[1], shape[2], shape[3]}, seed),
            random_tensor({shape[0], kRank, 1, 1}, seed + 1)};
  }
  return {random_tensor({kRank, shape[1]}, seed), random_tensor({shape[0], kRank}, seed + 1)};
}

enum class Style { kKohyaSgm, kKohyaDiffusers, kPeft, kDiffusersOld };

std::string kohya_prefix(const std::string& component, bool sdxl) {
  if (component == "unet") return "lora_unet_";
  if (!sdxl) return "lora_te_";
  return component == "text_encoder" ? "lora_te1_" : "lora_te2_";
}

// Writes `layers` with the pairs made from `seed` in one style; alpha per layer.
fs::path write_lora(const std::string& file, const std::string& model_name, const std::vector<Layer>& layers,
                    uint32_t seed, float alpha, Style style) {
  Tensors t;
  std::map<std::string, std::string> metadata;
  const bool sdxl = model_name == "tiny-sdxl";
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    Pair p = make_lora_pair(base_shape(model_name, l.component, l.weight), seed + 10 * static_cast<uint32_t>(i));
    if (style == Style::kKohyaSgm || style == Style::kKohyaDiffusers) {
      const std::string module = style == Style::kKohyaSgm && !l.kohya_sgm.empty() ? l.kohya_sgm
                                                                                    : underscored(module_of(l.weight));
      const std::string key = kohya_prefix(l.component, sdxl) + module;
      t.emplace_back(key + ".alpha", scalar(alpha));
      t.emplace_back(key + ".lora_down.weight", p.down);
      t.emplace_back(key + ".lora_up.weight", p.up);
    } else {
      const std::string key = l.component + "." + module_of(l.weight);
      t.emplace_back(key + (style == Style::kPeft ? ".lora_A.weight" : ".lora.down.weight"), p.down);
      t.emplace_back(key + (style == Style::kPeft ? ".lora_B.weight" : ".lora.up.weight"), p.up);
      if (style == Style::kDiffusersOld) t.emplace_back(key + ".alpha", scalar(alpha));
    }
  }
  if (style == Style::kPeft) {
    nlohmann::json j = {{"unet.r", kRank}, {"unet.lora_alpha", alpha}, {"text_encoder.lora_alpha", alpha},
                        {"text_encoder_2.lora_alpha", alpha}};
    metadata["lora_adapter_metadata"] = j.dump();
  }
  const fs::path path = temp_dir() / file;
  EXPECT_TRUE(write_safetensors(path, t, metadata).ok());
  return path;
}

// W + sum_l s_l * (alpha_l / r) * U_l @ D_l in double.
std::vector<double> reference(const HostTensor& w, const std::vector<std::tuple<Pair, float, float>>& deltas) {
  std::vector<float> wf = w.to_f32();
  std::vector<double> out(wf.begin(), wf.end());
  const int64_t rows = w.shape[0];
  const int64_t cols = w.numel() / rows;
  for (const auto& [p, scale, alpha] : deltas) {
    const std::vector<float> u = p.up.to_f32(), d = p.down.to_f32();
    const double c = static_cast<double>(scale) * alpha / kRank;
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < kRank; ++k) s += static_cast<double>(u[o * kRank + k]) * d[k * cols + j];
        out[o * cols + j] += c * s;
      }
  }
  return out;
}

HostTensor merged(const LoraSet& set, const std::string& component, const std::string& weight) {
  auto t = set.components.weights.at(component)->get(weight);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

std::vector<float> values(const HostTensor& t) { return t.to_f32(); }

void expect_near_reference(const HostTensor& got, const std::vector<double>& ref, const std::string& what) {
  const std::vector<float> g = got.to_f32();
  ASSERT_EQ(g.size(), ref.size()) << what;
  double max_err = 0;
  for (size_t i = 0; i < g.size(); ++i)
    max_err = std::max(max_err, std::fabs(g[i] - ref[i]) / (1.0 + std::fabs(ref[i])));
  EXPECT_LT(max_err, 2e-6) << what;
}

Result<LoraSet> open(const std::string& model_name, const std::vector<spec::LoraSpec>& specs) {
  const ModelComponents& m = model(model_name);
  return open_lora_set(m, m.family, specs);
}

// ---- merge: each layer kind, each format, each name style -------------------

TEST(LoraMerge, EveryLayerKindMatchesTheFp32ReferenceInEveryFormatAndNameStyle) {
  const float scale = 0.7f, alpha = 2.0f;
  const Style styles[] = {Style::kKohyaSgm, Style::kKohyaDiffusers, Style::kPeft, Style::kDiffusersOld};
  std::vector<LoraSet> sets;
  for (Style st : styles) {
    const fs::path f = write_lora("style" + std::to_string(static_cast<int>(st)) + ".safetensors", "tiny-sdxl",
                                  sdxl_layers(), 100, alpha, st);
    auto set = open("tiny-sdxl", {{f.string(), scale}});
    ASSERT_TRUE(set.ok()) << set.status().ToString();
    EXPECT_EQ(set->merged_weights, static_cast<int>(sdxl_layers().size()));
    ASSERT_EQ(set->loras.size(), 1u);
    EXPECT_EQ(set->loras[0].pairs, static_cast<int>(sdxl_layers().size()));
    EXPECT_EQ(set->loras[0].format, st == Style::kKohyaSgm || st == Style::kKohyaDiffusers ? LoraFormat::kKohya
                                                                                           : LoraFormat::kDiffusers);
    sets.push_back(std::move(set).value());
  }
  const ModelComponents& base = model("tiny-sdxl");
  for (size_t i = 0; i < sdxl_layers().size(); ++i) {
    const Layer& l = sdxl_layers()[i];
    auto w = base.weights.at(l.component)->get(l.weight);
    ASSERT_TRUE(w.ok());
    const Pair p = make_lora_pair(w->shape, 100 + 10 * static_cast<uint32_t>(i));
    const std::vector<double> ref = reference(*w, {{p, scale, alpha}});
    const std::vector<float> first = values(merged(sets[0], l.component, l.weight));
    for (size_t s = 0; s < sets.size(); ++s) {
      const HostTensor got = merged(sets[s], l.component, l.weight);
      EXPECT_EQ(got.dtype, kernels::DType::kF32);
      EXPECT_EQ(got.shape, w->shape);
      expect_near_reference(got, ref, l.kind + " (" + l.weight + ") style " + std::to_string(s));
      // Every format and name style lands on the same bits.
      EXPECT_EQ(values(got), first) << l.kind << " style " << s;
    }
    // The delta is there: not the base.
    EXPECT_NE(first, w->to_f32()) << l.kind;
  }
  // An untouched weight is the base's own tensor.
  const std::string other = "down_blocks.0.resnets.1.conv2.weight";
  EXPECT_EQ(values(merged(sets[0], "unet", other)), base.weights.at("unet")->get(other)->to_f32());
}

TEST(LoraMerge, Sd15KohyaNamesLinearPairOnAConv1x1ProjInAndTextEncoder) {
  // SD 1.x's proj_in is a 1x1 conv: a linear pair [r, C] fits it.
  const std::vector<Layer> layers = {
      {"unet", "down_blocks.0.attentions.0.proj_in.weight", "input_blocks_1_1_proj_in", "conv 1x1 proj_in"},
      {"unet", "up_blocks.1.attentions.2.transformer_blocks.0.attn2.to_v.weight",
       "output_blocks_5_1_transformer_blocks_0_attn2_to_v", "cross-attention"},
      {"text_encoder", "text_model.encoder.layers.1.self_attn.out_proj.weight", "", "text encoder"},
  };
  Tensors t;
  const auto shape = base_shape("tiny-sd15", "unet", layers[0].weight);
  ASSERT_EQ(shape.size(), 4u);
  std::vector<std::tuple<std::string, std::string, Pair>> expect;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto s = base_shape("tiny-sd15", layers[i].component, layers[i].weight);
    Pair p = i == 0 ? Pair{random_tensor({kRank, s[1]}, 7), random_tensor({s[0], kRank}, 8)}
                    : make_lora_pair(s, 20 + static_cast<uint32_t>(i));
    const std::string key = kohya_prefix(layers[i].component, false) +
                            (layers[i].kohya_sgm.empty() ? underscored(module_of(layers[i].weight)) : layers[i].kohya_sgm);
    t.emplace_back(key + ".lora_down.weight", p.down);
    t.emplace_back(key + ".lora_up.weight", p.up);
    expect.emplace_back(layers[i].component, layers[i].weight, p);
  }
  const fs::path f = temp_dir() / "sd15.safetensors";
  ASSERT_TRUE(write_safetensors(f, t).ok());
  auto set = open("tiny-sd15", {{f.string(), 1.25f}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  for (const auto& [component, weight, p] : expect) {
    auto w = model("tiny-sd15").weights.at(component)->get(weight);
    // No alpha in the file: alpha = rank.
    expect_near_reference(merged(*set, component, weight), reference(*w, {{p, 1.25f, float(kRank)}}), weight);
  }
}

TEST(LoraMerge, TwoLorasAtOnceSumInFp32) {
  std::vector<Layer> a_layers(sdxl_layers().begin(), sdxl_layers().begin() + 6);
  std::vector<Layer> b_layers(sdxl_layers().begin() + 3, sdxl_layers().end());
  const fs::path a = write_lora("two_a.safetensors", "tiny-sdxl", a_layers, 300, 4.0f, Style::kKohyaSgm);
  const fs::path b = write_lora("two_b.safetensors", "tiny-sdxl", b_layers, 500, 1.0f, Style::kPeft);
  auto set = open("tiny-sdxl", {{a.string(), 0.5f}, {b.string(), -0.8f}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->loras.size(), 2u);
  EXPECT_EQ(set->merged_weights, static_cast<int>(sdxl_layers().size()));
  const ModelComponents& base = model("tiny-sdxl");
  for (size_t i = 0; i < sdxl_layers().size(); ++i) {
    const Layer& l = sdxl_layers()[i];
    auto w = base.weights.at(l.component)->get(l.weight);
    std::vector<std::tuple<Pair, float, float>> deltas;
    if (i < 6) deltas.emplace_back(make_lora_pair(w->shape, 300 + 10 * static_cast<uint32_t>(i)), 0.5f, 4.0f);
    if (i >= 3) deltas.emplace_back(make_lora_pair(w->shape, 500 + 10 * static_cast<uint32_t>(i - 3)), -0.8f, 1.0f);
    expect_near_reference(merged(*set, l.component, l.weight), reference(*w, deltas), l.kind);
  }
}

TEST(LoraMerge, ScaleZeroIsTheBaseBitForBit) {
  const fs::path f = write_lora("zero.safetensors", "tiny-sdxl", sdxl_layers(), 100, 2.0f, Style::kKohyaSgm);
  auto set = open("tiny-sdxl", {{f.string(), 0.0f}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->merged_weights, 0);
  for (const Layer& l : sdxl_layers()) {
    EXPECT_EQ(values(merged(*set, l.component, l.weight)),
              model("tiny-sdxl").weights.at(l.component)->get(l.weight)->to_f32());
  }
}

// ---- refusals ------------------------------------------------------------------

std::string error_of(const std::string& model_name, const fs::path& f, float scale = 1.0f) {
  auto set = open(model_name, {{f.string(), scale}});
  EXPECT_FALSE(set.ok()) << f;
  return set.ok() ? std::string() : set.status().message();
}

fs::path write_tensors(const std::string& name, const Tensors& t) {
  const fs::path p = temp_dir() / name;
  EXPECT_TRUE(write_safetensors(p, t).ok());
  return p;
}

TEST(LoraErrors, NotASafetensorsFile) {
  const fs::path p = temp_dir() / "pickle.safetensors";
  ASSERT_TRUE(write_file_atomic(p, std::string("PK\x03\x04 this is a zip archive of a pickle", 40)).ok());
  const std::string e = error_of("tiny-sdxl", p);
  EXPECT_NE(e.find(p.string()), std::string::npos) << e;
  EXPECT_NE(e.find("is not a LoRA .safetensors file"), std::string::npos) << e;
}

TEST(LoraErrors, Sd15LoraOnSdxlAndSdxlLoraOnSd15) {
  const std::vector<Layer> te = {{"text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", "", ""}};
  const fs::path sd15 = write_lora("for_sd15.safetensors", "tiny-sd15", te, 1, 1.0f, Style::kKohyaDiffusers);
  std::string e = error_of("tiny-sdxl", sd15);
  EXPECT_NE(e.find(sd15.string()), std::string::npos) << e;
  EXPECT_NE(e.find("is a LoRA for SD 1.x/2.x"), std::string::npos) << e;
  EXPECT_NE(e.find("the model is SDXL"), std::string::npos) << e;
  const fs::path sdxl = write_lora("for_sdxl.safetensors", "tiny-sdxl", te, 1, 1.0f, Style::kKohyaDiffusers);
  e = error_of("tiny-sd15", sdxl);
  EXPECT_NE(e.find("is a LoRA for SDXL (key 'lora_te1_"), std::string::npos) << e;
  EXPECT_NE(e.find("the model is SD 1.x"), std::string::npos) << e;
}

TEST(LoraErrors, KeysThatMatchNoLayerAreCountedAndNamed) {
  Tensors t;
  for (int i = 0; i < 7; ++i) {
    const std::string key = "lora_unet_down_blocks_" + std::to_string(i + 5) + "_attentions_0_proj_in";
    t.emplace_back(key + ".lora_down.weight", random_tensor({2, 8}, i));
    t.emplace_back(key + ".lora_up.weight", random_tensor({8, 2}, i));
  }
  const fs::path p = write_tensors("unmatched.safetensors", t);
  const std::string e = error_of("tiny-sdxl", p);
  EXPECT_NE(e.find("7 of 7 LoRA layers match no layer of synthetic:tiny-sdxl"), std::string::npos) << e;
  EXPECT_NE(e.find("'lora_unet_down_blocks_5_attentions_0_proj_in'"), std::string::npos) << e;
  EXPECT_NE(e.find(", ..."), std::string::npos) << e;
  // Tensors of no LoRA form at all.
  const fs::path q = write_tensors("not_lora.safetensors", {{"model.diffusion_model.out.2.weight", scalar(1)}});
  const std::string e2 = error_of("tiny-sdxl", q);
  EXPECT_NE(e2.find("1 of 1 tensors are not LoRA pairs hipq knows ('model.diffusion_model.out.2.weight')"),
            std::string::npos) << e2;
}

TEST(LoraErrors, ShapeMismatchNamesTheLayerAndBothShapes) {
  const std::string key = "lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q";
  const fs::path p = write_tensors("shape.safetensors", {{key + ".lora_down.weight", random_tensor({4, 48}, 1)},
                                                         {key + ".lora_up.weight", random_tensor({64, 4}, 2)}});
  const std::string e = error_of("tiny-sdxl", p);
  EXPECT_NE(e.find("LoRA layer '" + key + "' makes a delta of shape [64, 48] (rank 4) but unet "
                   "'down_blocks.1.attentions.0.transformer_blocks.0.attn1.to_q.weight' is [64, 64]"),
            std::string::npos) << e;
  // A 3x3 LoCon pair on a linear layer.
  const fs::path q = write_tensors("shape3.safetensors", {{key + ".lora_down.weight", random_tensor({4, 64, 3, 3}, 1)},
                                                          {key + ".lora_up.weight", random_tensor({64, 4, 1, 1}, 2)}});
  EXPECT_NE(error_of("tiny-sdxl", q).find("[64, 64, 3, 3]"), std::string::npos);
  // Ranks that disagree.
  const fs::path r = write_tensors("rank.safetensors", {{key + ".lora_down.weight", random_tensor({4, 64}, 1)},
                                                        {key + ".lora_up.weight", random_tensor({64, 3}, 2)}});
  EXPECT_NE(error_of("tiny-sdxl", r).find("up's dim 1 must equal down's dim 0 (the rank)"), std::string::npos);
}

TEST(LoraErrors, LycorisKindsAreNamed) {
  const std::string key = "lora_unet_down_blocks_1_attentions_0_proj_in";
  const fs::path loha = write_tensors("loha.safetensors", {{key + ".hada_w1_a", random_tensor({64, 4}, 1)},
                                                           {key + ".hada_w1_b", random_tensor({4, 64}, 1)},
                                                           {key + ".alpha", scalar(4)}});
  std::string e = error_of("tiny-sdxl", loha);
  EXPECT_NE(e.find("LoHa"), std::string::npos) << e;
  EXPECT_NE(e.find(loha.string()), std::string::npos) << e;
  const fs::path lokr = write_tensors("lokr.safetensors", {{key + ".lokr_w1", random_tensor({8, 8}, 1)},
                                                           {key + ".lokr_w2", random_tensor({8, 8}, 1)}});
  e = error_of("tiny-sdxl", lokr);
  EXPECT_NE(e.find("LoKr"), std::string::npos) << e;
  const fs::path dora = write_tensors("dora.safetensors", {{key + ".lora_down.weight", random_tensor({4, 64}, 1)},
                                                           {key + ".lora_up.weight", random_tensor({64, 4}, 1)},
                                                           {key + ".dora_scale", random_tensor({1, 64}, 1)}});
  EXPECT_NE(error_of("tiny-sdxl", dora).find("DoRA"), std::string::npos);
}

TEST(LoraErrors, RankZeroNonFiniteAlphaAndHalfPairs) {
  const std::string key = "lora_unet_down_blocks_1_attentions_0_proj_in";
  const fs::path zero = write_tensors("rank0.safetensors", {{key + ".lora_down.weight", HostTensor::owned(kernels::DType::kF32, {0, 64})},
                                                            {key + ".lora_up.weight", HostTensor::owned(kernels::DType::kF32, {64, 0})}});
  EXPECT_NE(error_of("tiny-sdxl", zero).find("a dimension is 0"), std::string::npos);
  const fs::path nan = write_tensors("nan.safetensors", {{key + ".lora_down.weight", random_tensor({4, 64}, 1)},
                                                         {key + ".lora_up.weight", random_tensor({64, 4}, 1)},
                                                         {key + ".alpha", scalar(std::nanf(""))}});
  std::string e = error_of("tiny-sdxl", nan);
  EXPECT_NE(e.find("'" + key + "' has alpha nan, not a finite number"), std::string::npos) << e;
  const fs::path half = write_tensors("half.safetensors", {{key + ".lora_down.weight", random_tensor({4, 64}, 1)}});
  e = error_of("tiny-sdxl", half);
  EXPECT_NE(e.find("'" + key + "' has a down tensor but no up tensor"), std::string::npos) << e;
  // Scales are checked first.
  auto set = open("tiny-sdxl", {{half.string(), std::nanf("")}});
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().message().find("must be a finite number"), std::string::npos);
}

TEST(LoraSpec, ParsesPathAndScaleAndRoundTripsJson) {
  auto a = spec::LoraSpec::parse("/x/y.safetensors:0.8");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->path, "/x/y.safetensors");
  EXPECT_FLOAT_EQ(a->scale, 0.8f);
  auto b = spec::LoraSpec::parse("C:/x/y.safetensors");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path, "C:/x/y.safetensors");
  EXPECT_FLOAT_EQ(b->scale, 1.0f);
  EXPECT_FALSE(spec::LoraSpec::parse(":0.5").ok());
  EXPECT_FALSE(spec::LoraSpec::parse("a.safetensors:1e9").ok());
  auto j = spec::LoraSpec::from_json(a->to_json());
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(*j, *a);
  EXPECT_FALSE(spec::LoraSpec::from_json({{"path", "a"}, {"weight", 1}}).ok());
}

TEST(LoraHashes, ARewrittenFileIsHashedAgain) {
  const fs::path f = write_lora("rehash.safetensors", "tiny-sdxl", sdxl_layers(), 5, 1.0f, Style::kKohyaSgm);
  auto first = hash_lora_file(f);
  auto again = hash_lora_file(f);  // remembered
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(again->sha256, first->sha256);
  // The same path, other bytes of the same size (the pairs' values differ).
  write_lora("rehash.safetensors", "tiny-sdxl", sdxl_layers(), 6, 1.0f, Style::kKohyaSgm);
  auto changed = hash_lora_file(f);
  ASSERT_TRUE(changed.ok());
  auto bytes = read_file(f);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(changed->sha256, sha256_hex(*bytes));
  EXPECT_NE(changed->sha256, first->sha256);
}

TEST(LoraHashes, A1111HashIsTheDataSectionsSha256) {
  const fs::path f = write_lora("hash.safetensors", "tiny-sdxl", sdxl_layers(), 1, 1.0f, Style::kKohyaSgm);
  auto h = hash_lora_file(f);
  ASSERT_TRUE(h.ok());
  auto bytes = read_file(f);
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(h->sha256, sha256_hex(*bytes));
  EXPECT_EQ(h->a1111_hash, sha256_hex(bytes->substr(8 + n)).substr(0, 12));
  ImageProvenance p;
  p.loras.push_back({"hash", h->a1111_hash, h->sha256, 0.8f});
  spec::GenerationSettings s;
  s.prompt = "a red fox";
  const std::string text = a1111_parameters(s, p);
  EXPECT_EQ(text.rfind("a red fox <lora:hash:0.8>\n", 0), 0u) << text;
  EXPECT_NE(text.find("Lora hashes: \"hash: " + h->a1111_hash + "\""), std::string::npos) << text;
}

// ---- switching in place (lora_rebind.h) -------------------------------------------

// The device bytes of every parameter of a loaded model (cpu backend).
std::vector<std::vector<uint8_t>> device_bytes(kernels::Backend& be, const std::vector<BoundParam>& params) {
  std::vector<std::vector<uint8_t>> out;
  for (const BoundParam& p : params) {
    const kernels::Tensor* scales = p.fp8 ? &p.fp8->scales : p.fp8_conv ? &p.fp8_conv->scales : nullptr;
    for (const kernels::Tensor* t : {&p.tensor, scales}) {
      if (t == nullptr) continue;
      std::vector<uint8_t> b(t->nbytes());
      EXPECT_TRUE(be.copy_to_host(t->data, b.data(), b.size()).ok());
      out.push_back(std::move(b));
    }
  }
  return out;
}

std::vector<std::string> union_of(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

// A UNet loaded with set A and switched to set B in place holds the bytes of
// a UNet loaded fresh with B — at fp32, fp16 (GEGLU's interleaved rows,
// stacked q|k|v and k|v) and fp8 (each rewritten part's rows quantized again,
// a conv's taps-last codes made again)
// — every weight neither set touches keeps its bytes, and the parameters stay
// at their addresses. Then back to the base: the base's bytes.
TEST(LoraRebind, ASwitchedUNetHoldsTheBytesOfAFreshLoadAndTouchesNothingElse) {
  auto b = kernels::make_backend("cpu");
  ASSERT_TRUE(b.ok());
  kernels::Backend& be = **b;
  const fs::path a = write_lora("rb_a.safetensors", "tiny-sdxl", sdxl_layers(), 1500, 4.0f, Style::kKohyaSgm);
  std::vector<Layer> some(sdxl_layers().begin() + 2, sdxl_layers().begin() + 8);
  const fs::path c = write_lora("rb_c.safetensors", "tiny-sdxl", some, 1700, 8.0f, Style::kPeft);
  auto set_a = open("tiny-sdxl", {{a.string(), 0.9f}});
  auto set_b = open("tiny-sdxl", {{c.string(), 0.7f}});
  ASSERT_TRUE(set_a.ok() && set_b.ok());
  auto base_set = open("tiny-sdxl", {});
  ASSERT_TRUE(base_set.ok());
  const ModelComponents& m = model("tiny-sdxl");
  auto cfg = UNetConfig::from_weights(*m.weights.at("unet"));
  ASSERT_TRUE(cfg.ok());
  const std::vector<std::string> touched = union_of(set_a->targets.at("unet"), set_b->targets.at("unet"));
  ASSERT_LT(touched.size(), set_a->targets.at("unet").size() + set_b->targets.at("unet").size());  // they overlap
  for (const std::string precision : {"fp32", "fp16", "fp8"}) {
    SCOPED_TRACE(precision);
    const kernels::DType dtype = precision == "fp32" ? kernels::DType::kF32
                                 : precision == "fp16" ? kernels::DType::kF16
                                                       : kernels::DType::kBF16;
    // fp8 with every conv the UNet asks for in e4m3 (its padded taps-last
    // codes made again by a switch), whatever the default rule.
    const Fp8Weights fp8{precision == "fp8", Fp8Convs::kAll};
    auto load = [&](const LoraSet& set) {
      auto u = UNet::load(*cfg, *set.components.weights.at("unet"), be, dtype, fp8);
      EXPECT_TRUE(u.ok()) << u.status().ToString();
      return std::move(u).value();
    };
    UNet u = load(*set_a);
    const std::vector<BoundParam>& params = u.bound_params();
    std::vector<const void*> where;
    for (const BoundParam& p : params) where.push_back(p.tensor.data);
    const auto before = device_bytes(be, params);
    auto st = rebind_weights(params, touched, *set_b->components.weights.at("unet"), be, dtype, fp8);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    EXPECT_EQ(st->weights, static_cast<int>(touched.size()));
    const auto after = device_bytes(be, params);
    {
      UNet fresh = load(*set_b);
      EXPECT_TRUE(after == device_bytes(be, fresh.bound_params()));
    }
    // Only the parameters holding a touched weight changed, each in place.
    size_t changed = 0, i = 0;
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_EQ(params[k].tensor.data, where[k]);
      bool holds_touched = false;
      for (const std::string& n : params[k].names)
        holds_touched |= std::binary_search(touched.begin(), touched.end(), n);
      for (int part = 0; part < (params[k].fp8 || params[k].fp8_conv ? 2 : 1); ++part, ++i) {
        if (!holds_touched) {
          EXPECT_EQ(after[i], before[i]) << params[k].names[0];
        }
        changed += after[i] != before[i] ? 1 : 0;
      }
    }
    EXPECT_GE(changed, touched.size() - 2);  // stacked parts share a parameter
    if (fp8.on) {
      int convs = 0;
      for (const BoundParam& p : params) convs += p.fp8_conv ? 1 : 0;
      EXPECT_GT(convs, 0) << "the fp8 UNet holds fp8 convolutions";
    }
    // All LoRAs removed: the base's bytes.
    ASSERT_TRUE(rebind_weights(params, set_b->targets.at("unet"), *base_set->components.weights.at("unet"), be,
                               dtype, fp8)
                    .ok());
    UNet base = load(*base_set);
    EXPECT_TRUE(device_bytes(be, params) == device_bytes(be, base.bound_params()));
  }
}

// A weight both sets give the same pairs (same files, keys, coefficients, in
// order) keeps its bytes: only what differs is rewritten, and the result is
// still a fresh load's.
TEST(LoraRebind, WeightsBothSetsMergeAlikeAreNotRewritten) {
  const fs::path a = write_lora("same_a.safetensors", "tiny-sdxl", sdxl_layers(), 1900, 4.0f, Style::kKohyaSgm);
  std::vector<Layer> some(sdxl_layers().begin() + 2, sdxl_layers().begin() + 8);
  const fs::path c = write_lora("same_c.safetensors", "tiny-sdxl", some, 2100, 8.0f, Style::kPeft);
  auto set_a = open("tiny-sdxl", {{a.string(), 0.9f}});
  auto set_ac = open("tiny-sdxl", {{a.string(), 0.9f}, {c.string(), 0.7f}});
  auto set_ca = open("tiny-sdxl", {{c.string(), 0.7f}, {a.string(), 0.9f}});
  auto set_a2 = open("tiny-sdxl", {{a.string(), 0.5f}});
  auto set_c = open("tiny-sdxl", {{c.string(), 0.7f}});
  ASSERT_TRUE(set_a.ok() && set_ac.ok() && set_ca.ok() && set_a2.ok() && set_c.ok());
  using Names = std::map<std::string, std::vector<std::string>>;
  EXPECT_EQ(weights_to_rewrite(set_a->signatures, set_ac->signatures), set_c->targets);  // only c's weights
  EXPECT_EQ(weights_to_rewrite(set_ac->signatures, set_ca->signatures), set_c->targets);  // summed in another order
  EXPECT_EQ(weights_to_rewrite(set_a->signatures, set_a2->signatures), set_a->targets);  // another scale
  EXPECT_EQ(weights_to_rewrite(set_a->signatures, set_a->signatures), Names{});
  EXPECT_EQ(weights_to_rewrite(set_a->signatures, {}), set_a->targets);
  EXPECT_EQ(weights_to_rewrite({}, set_c->signatures), set_c->targets);
  // In a model: A then only c's weights rewritten from A + C gives A + C's bytes.
  auto b = kernels::make_backend("cpu");
  ASSERT_TRUE(b.ok());
  auto cfg = UNetConfig::from_weights(*model("tiny-sdxl").weights.at("unet"));
  ASSERT_TRUE(cfg.ok());
  auto u = UNet::load(*cfg, *set_a->components.weights.at("unet"), **b, kernels::DType::kF16);
  ASSERT_TRUE(u.ok());
  const Names names = weights_to_rewrite(set_a->signatures, set_ac->signatures);
  ASSERT_TRUE(rebind_weights(u->bound_params(), names.at("unet"), *set_ac->components.weights.at("unet"), **b,
                             kernels::DType::kF16, Fp8Weights{})
                  .ok());
  auto fresh = UNet::load(*cfg, *set_ac->components.weights.at("unet"), **b, kernels::DType::kF16);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(device_bytes(**b, u->bound_params()) == device_bytes(**b, fresh->bound_params()));
}

TEST(LoraRebind, AWeightTheModelDoesNotHoldIsRefusedBeforeAnyWrite) {
  auto b = kernels::make_backend("cpu");
  ASSERT_TRUE(b.ok());
  const ModelComponents& m = model("tiny-sdxl");
  auto cfg = ClipTextConfig::from_weights(*m.weights.at("text_encoder"));
  ASSERT_TRUE(cfg.ok());
  auto te = ClipTextModel::load(*cfg, *m.weights.at("text_encoder"), **b, kernels::DType::kF32);
  ASSERT_TRUE(te.ok());
  const auto before = device_bytes(**b, te->bound_params());
  auto st = rebind_weights(te->bound_params(),
                           {"text_model.encoder.layers.0.self_attn.q_proj.weight", "text_model.no_such.weight"},
                           *m.weights.at("text_encoder"), **b, kernels::DType::kF32, Fp8Weights{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kNotFound);
  EXPECT_NE(st.status().message().find("'text_model.no_such.weight'"), std::string::npos) << st.status().ToString();
  EXPECT_TRUE(device_bytes(**b, te->bound_params()) == before);
}

// ---- the pipeline ----------------------------------------------------------------

class LoraPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto b = kernels::make_backend("cpu");
    ASSERT_TRUE(b.ok());
    backend_ = std::move(b).value().release();
  }
  static void TearDownTestSuite() { delete backend_; }
  static spec::GenerationSettings settings() {
    spec::GenerationSettings s;
    s.prompt = "a red fox sleeping in the snow";
    s.seed = 3;
    s.width = 64;
    s.height = 64;
    s.steps = 3;
    s.guidance = 5.0f;
    return s;
  }
  static GenerationOutput run(const std::vector<spec::LoraSpec>& loras) {
    LoadOptions o;
    o.loras = loras;
    auto p = Pipeline::load(model("tiny-sdxl"), *backend_, o);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    auto out = (*p)->generate(settings());
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return *out;
  }
  static kernels::Backend* backend_;
};
kernels::Backend* LoraPipelineTest::backend_ = nullptr;

TEST_F(LoraPipelineTest, LoraChangesTheImageScaleZeroDoesNotAndTheStepIsTheSame) {
  const fs::path a = write_lora("pipe_a.safetensors", "tiny-sdxl", sdxl_layers(), 700, 4.0f, Style::kKohyaSgm);
  const GenerationOutput base = run({});
  const GenerationOutput zero = run({{a.string(), 0.0f}});
  const GenerationOutput with = run({{a.string(), 1.0f}});
  EXPECT_EQ(zero.latent, base.latent);
  EXPECT_EQ(zero.rgb, base.rgb);
  EXPECT_NE(with.latent, base.latent);
  EXPECT_NE(with.rgb, base.rgb);
  // The same step: the same UNet calls at the same batch, the same weights' bytes.
  EXPECT_EQ(with.steps.size(), base.steps.size());
  EXPECT_EQ(with.model_calls, base.model_calls);
  EXPECT_EQ(with.unet_batch, base.unet_batch);
  EXPECT_EQ(with.memory_plan.weights(), base.memory_plan.weights());
}

TEST_F(LoraPipelineTest, SwitchingSetsGivesTheBitsOfFreshLoads) {
  const fs::path a = write_lora("sw_a.safetensors", "tiny-sdxl", sdxl_layers(), 900, 4.0f, Style::kKohyaSgm);
  const fs::path b = write_lora("sw_b.safetensors", "tiny-sdxl", sdxl_layers(), 1100, 2.0f, Style::kPeft);
  const std::vector<spec::LoraSpec> set_a = {{a.string(), 0.9f}};
  const std::vector<spec::LoraSpec> set_b = {{b.string(), 0.6f}, {a.string(), -0.3f}};
  auto p = Pipeline::load(model("tiny-sdxl"), *backend_, {});
  ASSERT_TRUE(p.ok());
  Pipeline& pipe = **p;
  ASSERT_TRUE(pipe.generate(settings()).ok());
  ASSERT_TRUE(pipe.set_loras(set_a).ok());
  ASSERT_EQ(pipe.loras().size(), 1u);
  auto out_a = pipe.generate(settings());
  ASSERT_TRUE(out_a.ok());
  EXPECT_FALSE(out_a->warm);  // the re-bind is reported as its load
  for (const auto& ph : out_a->phases) {
    if (ph.phase == "load") std::printf("lora switch ms %.2f (touched weights rewritten in place); cold load ms %.1f\n", ph.host_ms, pipe.load_ms());
  }
  EXPECT_EQ(out_a->latent, run(set_a).latent);
  ASSERT_TRUE(pipe.set_loras(set_b).ok());
  auto out_b = pipe.generate(settings());
  ASSERT_TRUE(out_b.ok());
  EXPECT_EQ(out_b->latent, run(set_b).latent);
  EXPECT_NE(out_b->latent, out_a->latent);
  // The same set again is no re-bind.
  ASSERT_TRUE(pipe.set_loras(set_b).ok());
  auto again = pipe.generate(settings());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->warm);
  EXPECT_EQ(again->latent, out_b->latent);
  // A bad set is refused before any device work and the current one stays.
  const fs::path bad = temp_dir() / "bad.safetensors";
  ASSERT_TRUE(write_file_atomic(bad, "not a safetensors file").ok());
  EXPECT_FALSE(pipe.set_loras({{bad.string(), 1.0f}}).ok());
  ASSERT_EQ(pipe.loras().size(), 2u);
  // A UNet-only set after one on both: the text encoders are re-bound to the base.
  std::vector<Layer> unet_only(sdxl_layers().begin(), sdxl_layers().begin() + 5);
  const fs::path c = write_lora("sw_c.safetensors", "tiny-sdxl", unet_only, 1300, 1.0f, Style::kKohyaDiffusers);
  ASSERT_TRUE(pipe.set_loras({{c.string(), 1.5f}}).ok());
  auto out_c = pipe.generate(settings());
  ASSERT_TRUE(out_c.ok());
  EXPECT_EQ(out_c->latent, run({{c.string(), 1.5f}}).latent);
  ASSERT_TRUE(pipe.set_loras({}).ok());
  EXPECT_TRUE(pipe.loras().empty());
  auto none = pipe.generate(settings());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->latent, run({}).latent);
}

// Counts the reads of each tensor of a component (the checkpoint's reads).
class CountingSource : public WeightSource {
 public:
  explicit CountingSource(std::shared_ptr<WeightSource> base) : base_(std::move(base)) {}
  std::string describe() const override { return base_->describe(); }
  std::vector<std::string> names() const override { return base_->names(); }
  bool contains(std::string_view n) const override { return base_->contains(n); }
  Result<TensorMeta> meta(std::string_view n) const override { return base_->meta(n); }
  Result<HostTensor> get(std::string_view n) const override {
    std::lock_guard<std::mutex> lock(mu_);
    ++reads_[std::string(n)];
    return base_->get(n);
  }
  std::map<std::string, int> reads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reads_;
  }

 private:
  std::shared_ptr<WeightSource> base_;
  mutable std::mutex mu_;
  mutable std::map<std::string, int> reads_;
};

fs::path corpus_file(const std::string& name) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  return fs::path(src != nullptr ? src : ".") / "tests" / "fuzz" / "corpus" / "lora" / name;
}

// The committed kohya (SGM names, diffusers-style names on a cross
// attention's stacked k | v, a 3x3 LoCon) and PEFT files: a switch reads from the checkpoint only the weights no earlier set
// modified, once each, and nothing at all when it comes back to weights
// already modified; the switched pipeline's latents equal a fresh one's.
TEST_F(LoraPipelineTest, ASwitchReadsTheCheckpointOnlyForWeightsNeverModifiedBefore) {
  ModelComponents counted = model("tiny-sdxl");
  std::map<std::string, std::shared_ptr<CountingSource>> sources;
  for (const char* key : {"unet", "text_encoder", "text_encoder_2"}) {
    sources[key] = std::make_shared<CountingSource>(counted.weights.at(key));
    counted.weights[key] = sources[key];
  }
  auto reads = [&] {
    std::map<std::string, int> all;
    for (const auto& [key, src] : sources)
      for (const auto& [name, n] : src->reads()) all[key + "/" + name] = n;
    return all;
  };
  // What each read since `before` was: name -> extra reads.
  auto new_reads = [&](const std::map<std::string, int>& before) {
    std::map<std::string, int> extra;
    for (const auto& [name, n] : reads()) {
      const auto it = before.find(name);
      const int was = it == before.end() ? 0 : it->second;
      if (n != was) extra[name] = n - was;
    }
    return extra;
  };
  auto targets = [&](const std::vector<spec::LoraSpec>& specs) {
    auto set = open("tiny-sdxl", specs);
    EXPECT_TRUE(set.ok()) << set.status().ToString();
    std::map<std::string, int> t;
    for (const auto& [key, names] : set->targets)
      for (const std::string& n : names) t[key + "/" + n] = 1;
    return t;
  };
  const std::vector<spec::LoraSpec> set_a = {{corpus_file("kohya-sgm-linear").string(), 0.8f},
                                             {corpus_file("kohya-diffusers-attn").string(), 1.2f}};
  const std::vector<spec::LoraSpec> set_b = {{corpus_file("peft-metadata-alpha").string(), 0.7f},
                                             {corpus_file("kohya-locon-3x3").string(), 1.0f},
                                             {corpus_file("kohya-sgm-linear").string(), -0.5f}};
  auto p = Pipeline::load(counted, *backend_, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Pipeline& pipe = **p;

  auto before = reads();
  {
    const Status st = pipe.set_loras(set_a);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(new_reads(before), targets(set_a));  // first modified: read once, kept
  before = reads();
  // In place: the switch holds no second copy of any model; what stays is
  // the base bits of the weights set B modifies first, kept on the device
  // (counted: lora_base_bits_on_device); at a time, one weight's f32 merge
  // and its factors (smaller than the weight at these ranks).
  const int64_t in_use = backend_->memory_stats().in_use;
  const int64_t bits_before = pipe.lora_base_bits_on_device();
  EXPECT_GT(bits_before, 0);
  int64_t largest = 0;
  for (const auto& [name, n] : targets(set_b)) {
    const size_t slash = name.find('/');
    auto m = model("tiny-sdxl").weights.at(name.substr(0, slash))->meta(name.substr(slash + 1));
    ASSERT_TRUE(m.ok());
    int64_t numel = 1;
    for (int64_t d : m->shape) numel *= d;
    largest = std::max(largest, numel * 4);
  }
  ASSERT_TRUE(pipe.set_loras(set_b).ok());
  const int64_t kept = pipe.lora_base_bits_on_device() - bits_before;
  EXPECT_GT(kept, 0);
  EXPECT_EQ(backend_->memory_stats().in_use, in_use + kept);
  EXPECT_LE(backend_->memory_stats().peak, in_use + kept + 2 * static_cast<int64_t>(backend_->block_bytes(largest)));
  EXPECT_EQ(pipe.last_lora_switch().device_base_bytes, pipe.lora_base_bits_on_device());
  EXPECT_GT(pipe.last_lora_switch().weights, 0);
  std::map<std::string, int> only_b = targets(set_b);
  for (const auto& [name, n] : targets(set_a)) only_b.erase(name);
  ASSERT_FALSE(only_b.empty());
  EXPECT_EQ(new_reads(before), only_b);
  auto out_b = pipe.generate(settings());
  ASSERT_TRUE(out_b.ok()) << out_b.status().ToString();
  EXPECT_EQ(out_b->latent, run(set_b).latent);
  // Back and forth over weights already modified: no read at all.
  before = reads();
  ASSERT_TRUE(pipe.set_loras({}).ok());
  ASSERT_TRUE(pipe.set_loras(set_a).ok());
  ASSERT_TRUE(pipe.set_loras(set_b).ok());
  EXPECT_TRUE(new_reads(before).empty());
  auto again = pipe.generate(settings());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->latent, out_b->latent);
}

// The base bits kept on the device for switches are in every phase of the
// plan; when a job's plan needs their room they move to the host, and the
// next switch keeps on the device only what its budget (the pool's bytes
// less the job's plan) allows. The latents stay those of fresh loads.
TEST_F(LoraPipelineTest, BaseBitsOnTheDeviceAreInThePlanAndMoveToTheHostWhenAJobNeedsTheRoom) {
  const fs::path a = write_lora("plan_a.safetensors", "tiny-sdxl", sdxl_layers(), 2100, 4.0f, Style::kKohyaSgm);
  std::vector<Layer> some(sdxl_layers().begin(), sdxl_layers().begin() + 4);
  const fs::path b = write_lora("plan_b.safetensors", "tiny-sdxl", some, 2300, 2.0f, Style::kPeft);
  const std::vector<spec::LoraSpec> set_a = {{a.string(), 0.8f}};
  const std::vector<spec::LoraSpec> set_b = {{b.string(), 1.1f}};
  const GenerationOutput fresh_a = run(set_a);
  const GenerationOutput fresh_b = run(set_b);
  auto made = kernels::make_backend("cpu");
  ASSERT_TRUE(made.ok());
  kernels::Backend& be = **made;

  auto plain = Pipeline::load(model("tiny-sdxl"), be, {});
  ASSERT_TRUE(plain.ok());
  auto without = (*plain)->generate(settings());
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->memory_plan.lora_base_bits, 0);
  plain->reset();

  LoadOptions o;
  o.loras = set_a;
  auto p = Pipeline::load(model("tiny-sdxl"), be, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Pipeline& pipe = **p;
  const int64_t bits = pipe.lora_base_bits_on_device();
  ASSERT_GT(bits, 0);  // no memory size known: every modified weight's base bits on the device
  auto with = pipe.generate(settings());
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_EQ(with->latent, fresh_a.latent);
  EXPECT_EQ(with->memory_plan.lora_base_bits, bits);
  EXPECT_EQ(with->memory_plan.text_encode, without->memory_plan.text_encode + bits);
  EXPECT_EQ(with->memory_plan.denoise, without->memory_plan.denoise + bits);
  EXPECT_EQ(with->memory_plan.decode, without->memory_plan.decode + bits);
  EXPECT_EQ(with->memory_plan.weights(), without->memory_plan.weights());
  EXPECT_EQ(timings_json(*with, settings(), OutputInfo{})["memory_plan"]["lora_base_bits_bytes"], bits);
  EXPECT_EQ(timings_json(*without, settings(), OutputInfo{})["memory_plan"]["lora_base_bits_bytes"], 0);

  // A cap one byte short of the plan with them: the job moves them to the host.
  ASSERT_TRUE(be.set_memory_limit(with->memory_plan.peak() - 1).ok());
  auto capped = pipe.generate(settings());
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(pipe.lora_base_bits_on_device(), 0);
  EXPECT_EQ(capped->memory_plan.lora_base_bits, 0);
  EXPECT_EQ(capped->memory_plan.placement, without->memory_plan.placement);
  EXPECT_EQ(capped->latent, fresh_a.latent);
  // The next switch's budget is what that job's plan leaves: under a byte
  // less than all of set A's bits, so not all of them (the rest stays on the host).
  ASSERT_TRUE(pipe.set_loras(set_b).ok());
  EXPECT_LT(pipe.lora_base_bits_on_device(), bits);
  EXPECT_LE(pipe.lora_base_bits_on_device(), with->memory_plan.peak() - 1 - without->memory_plan.peak());
  auto switched = pipe.generate(settings());
  ASSERT_TRUE(switched.ok()) << switched.status().ToString();
  EXPECT_EQ(switched->latent, fresh_b.latent);
  ASSERT_TRUE(pipe.set_loras(set_a).ok());
  auto back = pipe.generate(settings());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->latent, fresh_a.latent);
}

// Base bits kept on the device must not change how the job decodes: under a
// cap where the low placement decodes whole in f32 without them but would
// fall to the bf16 whole decode with them, they go to the host and the image
// is the one a pipeline without them makes.
TEST_F(LoraPipelineTest, BaseBitsOnTheDeviceNeverChangeTheDecodesDtype) {
  const fs::path a = write_lora("dtype_a.safetensors", "tiny-sdxl", sdxl_layers(), 2500, 4.0f, Style::kKohyaSgm);
  auto made = kernels::make_backend("cpu");
  ASSERT_TRUE(made.ok());
  kernels::Backend& be = **made;
  LoadOptions o;
  o.loras = {{a.string(), 0.8f}};
  auto p = Pipeline::load(model("tiny-sdxl"), be, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Pipeline& pipe = **p;
  spec::GenerationSettings s = settings();
  s.precision = "fp16";
  s.width = 192;
  s.height = 128;
  auto free_run = pipe.generate(s);  // no cap: the standard placement, fp32 decode
  ASSERT_TRUE(free_run.ok()) << free_run.status().ToString();
  const int64_t bits = pipe.lora_base_bits_on_device();
  ASSERT_GT(bits, 0);
  ModelShapes without = pipe.model_shapes();
  without.lora_base_bits = 0;
  ModelShapes with = without;
  with.lora_base_bits = bits;
  const MemoryPlan low_alone = plan_memory(without, s, Placement::kLow, be).value();
  const MemoryPlan low_with = plan_memory(with, s, Placement::kLow, be).value();
  ASSERT_EQ(low_alone.vae_dtype, kernels::DType::kF32);
  ASSERT_GT(low_with.peak(), low_alone.peak());
  ASSERT_TRUE(be.set_memory_limit(low_alone.peak()).ok());
  auto capped = pipe.generate(s);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(capped->memory_plan.vae_dtype, kernels::DType::kF32) << capped->memory_plan.describe();
  EXPECT_EQ(capped->memory_plan.lora_base_bits, 0);
  EXPECT_EQ(pipe.lora_base_bits_on_device(), 0);
  EXPECT_EQ(capped->latent, free_run->latent);
  EXPECT_EQ(capped->rgb, free_run->rgb);
  ASSERT_TRUE(be.set_memory_limit(0).ok());
}

TEST_F(LoraPipelineTest, ErrorsComeFromLoadBeforeAnyDeviceWork) {
  const std::vector<Layer> te = {{"text_encoder", "text_model.encoder.layers.0.self_attn.q_proj.weight", "", ""}};
  const fs::path sd15 = write_lora("load_sd15.safetensors", "tiny-sd15", te, 1, 1.0f, Style::kKohyaDiffusers);
  LoadOptions o;
  o.loras = {{sd15.string(), 1.0f}};
  backend_->reset_peak();
  auto p = Pipeline::load(model("tiny-sdxl"), *backend_, o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("is a LoRA for SD 1.x/2.x"), std::string::npos);
  EXPECT_EQ(backend_->memory_stats().peak, 0);
}

}  // namespace
}  // namespace hipq::engine::lora
