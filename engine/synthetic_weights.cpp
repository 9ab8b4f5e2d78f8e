#include "engine/synthetic_weights.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "spec/synthetic_models.h"

namespace hipq::engine {

namespace {

uint64_t mix64(uint64_t x) {
  // splitmix64's finaliser: a bijection with full avalanche.
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t fnv1a(std::string_view a, std::string_view b) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : a) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  h = (h ^ '/') * 0x100000001b3ULL;
  for (char c : b) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

// A uniform in (0, 1) from 24 random bits, exact in float.
inline float unit(uint64_t bits) { return (static_cast<float>(bits >> 40) + 0.5f) * (1.0f / 16777216.0f); }

ClipTextConfig tiny_clip(bool projection, const char* act) {
  ClipTextConfig c;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.hidden_act = act;
  c.projection_dim = 32;
  c.with_projection = projection;
  return c;
}

VaeConfig tiny_vae(double scaling) {
  VaeConfig v;
  v.block_out_channels = {32, 32, 64, 64};
  v.layers_per_block = 1;
  v.sample_size = 64;
  v.scaling_factor = scaling;
  return v;
}

}  // namespace

void fill_synthetic(const ParamSpec& spec, std::string_view component, uint64_t seed, float* out, int64_t n) {
  const ParamInit& init = spec.init;
  if (init.kind == ParamInit::Kind::kOnes || init.kind == ParamInit::Kind::kZeros) {
    std::fill(out, out + n, init.kind == ParamInit::Kind::kOnes ? 1.0f : 0.0f);
    return;
  }
  const uint64_t key = mix64(fnv1a(component, spec.name) ^ mix64(seed + 0x9e3779b97f4a7c15ULL));
  auto work = [&](int64_t begin, int64_t end) {
    if (init.kind == ParamInit::Kind::kUniformFanIn) {
      const float bound = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(1, init.fan_in)));
      for (int64_t i = begin; i < end; ++i)
        out[i] = (2.0f * unit(mix64(key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL)) - 1.0f) * bound;
    } else {
      // Box-Muller on two independent uniforms per element.
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t base = key + static_cast<uint64_t>(i) * 0xd1b54a32d192ed03ULL;
        const float u1 = unit(mix64(base));
        const float u2 = unit(mix64(base ^ 0x5851f42d4c957f2dULL));
        out[i] = init.std * std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
      }
    }
  };
  const int64_t kChunk = 1 << 18;
  const int threads = static_cast<int>(std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()),
                                                         (n + kChunk - 1) / kChunk));
  if (threads <= 1) {
    work(0, n);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t per = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    const int64_t b = t * per, e = std::min(n, b + per);
    if (b < e) pool.emplace_back(work, b, e);
  }
  for (auto& th : pool) th.join();
}

SyntheticWeightSource::SyntheticWeightSource(std::string label, std::string component, uint64_t seed,
                                             std::vector<ParamSpec> specs)
    : label_(std::move(label)), component_(std::move(component)), seed_(seed), specs_(std::move(specs)) {
  for (size_t i = 0; i < specs_.size(); ++i) index_.emplace(specs_[i].name, i);
}

std::vector<std::string> SyntheticWeightSource::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, i] : index_) out.push_back(name);
  return out;  // std::map order: sorted
}

const ParamSpec* SyntheticWeightSource::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &specs_[it->second];
}

bool SyntheticWeightSource::contains(std::string_view name) const { return find(name) != nullptr; }

Result<TensorMeta> SyntheticWeightSource::meta(std::string_view name) const {
  const ParamSpec* s = find(name);
  if (!s) return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "'");
  return TensorMeta{kernels::DType::kF32, s->shape};
}

Result<HostTensor> SyntheticWeightSource::get(std::string_view name) const {
  const ParamSpec* s = find(name);
  if (!s) return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "'");
  int64_t n = 1;
  for (int64_t d : s->shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  fill_synthetic(*s, component_, seed_, values.data(), n);
  return HostTensor::from_f32(std::move(values), s->shape);
}

int64_t SyntheticWeightSource::parameter_count() const {
  int64_t total = 0;
  for (const ParamSpec& s : specs_) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    total += n;
  }
  return total;
}

// SD 1.x / 2.x UNet shapes shrunk to the tiny test size (two levels, 32/64 wide).
static UNetConfig tiny_sd_unet(UNetConfig u) {
  u.block_out_channels = {32, 64};
  u.down_block_types = {"CrossAttnDownBlock2D", "DownBlock2D"};
  u.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D"};
  u.transformer_layers_per_block = {1, 1};
  u.num_attention_heads = {2, 2};
  u.cross_attention_dim = 32;
  u.sample_size = 8;
  return u;
}

Result<SyntheticArchitecture> synthetic_architecture(std::string_view name) {
  SyntheticArchitecture a;
  if (name == "sdxl") {
    a.family = "sdxl";
    a.text_encoder = ClipTextConfig::clip_vit_l14();
    a.has_text_encoder_2 = true;
    a.text_encoder_2 = ClipTextConfig::open_clip_bigg14();
    a.unet = UNetConfig::sdxl();
    a.vae = VaeConfig::sdxl();
  } else if (name == "sd15") {
    a.family = "sd1";
    a.text_encoder = ClipTextConfig::clip_vit_l14();
    a.unet = UNetConfig::sd15();
    a.vae = VaeConfig::sd15();
  } else if (name == "sd21") {
    a.family = "sd2";
    a.text_encoder = ClipTextConfig::open_clip_h14_sd2();
    a.unet = UNetConfig::sd21();
    a.vae = VaeConfig::sd15();
    a.vae.sample_size = 768;
  } else if (name == "tiny-sdxl") {
    a.family = "sdxl";
    a.text_encoder = tiny_clip(false, "quick_gelu");
    a.has_text_encoder_2 = true;
    a.text_encoder_2 = tiny_clip(true, "gelu");
    UNetConfig& u = a.unet;
    u = UNetConfig::sdxl();
    u.block_out_channels = {32, 64};
    u.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D"};
    u.up_block_types = {"CrossAttnUpBlock2D", "UpBlock2D"};
    u.transformer_layers_per_block = {1, 2};
    u.num_attention_heads = {2, 2};
    u.cross_attention_dim = 64;  // 32 + 32: both encoders concatenated
    u.addition_time_embed_dim = 8;
    u.projection_class_embeddings_input_dim = 6 * 8 + 32;
    u.sample_size = 8;
    a.vae = tiny_vae(0.13025);
  } else if (name == "sdxl-refiner") {
    a.family = "sdxl";
    a.has_text_encoder_1 = false;
    a.has_text_encoder_2 = true;
    a.text_encoder_2 = ClipTextConfig::open_clip_bigg14();
    a.unet = UNetConfig::sdxl_refiner();
    a.vae = VaeConfig::sdxl();
  } else if (name == "tiny-sdxl-refiner") {
    // tiny-sdxl's text encoder 2 and VAE (the same values for the same seed:
    // each tensor is a function of seed, component and name), so a
    // tiny-sdxl + tiny-sdxl-refiner job shares one latent space; a UNet of
    // the refiner's layout at toy width: no attention in the outer levels,
    // cross attention on text encoder 2 alone, five time ids.
    a.family = "sdxl";
    a.has_text_encoder_1 = false;
    a.has_text_encoder_2 = true;
    a.text_encoder_2 = tiny_clip(true, "gelu");
    UNetConfig& u = a.unet;
    u = UNetConfig::sdxl_refiner();
    u.block_out_channels = {32, 64, 64};
    u.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"};
    u.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
    u.transformer_layers_per_block = {2, 2, 2};
    u.num_attention_heads = {2, 2, 2};
    u.cross_attention_dim = 32;  // text encoder 2 alone
    u.addition_time_embed_dim = 8;
    u.projection_class_embeddings_input_dim = 5 * 8 + 32;
    u.sample_size = 8;
    a.vae = tiny_vae(0.13025);
  } else if (name == "tiny-sd15") {
    a.family = "sd1";
    a.text_encoder = tiny_clip(false, "quick_gelu");
    a.unet = tiny_sd_unet(UNetConfig::sd15());
    a.vae = tiny_vae(0.18215);
  } else if (name == "tiny-sd2") {
    a.family = "sd2";
    a.text_encoder = tiny_clip(false, "gelu");  // OpenCLIP-H's activation
    a.unet = tiny_sd_unet(UNetConfig::sd21());
    a.vae = tiny_vae(0.18215);
  } else {
    std::string known;
    for (const auto& n : spec::synthetic_model_names()) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("unknown synthetic model '" + std::string(name) + "' (known: " + known +
                                   "; optionally NAME@SEED)");
  }
  return a;
}

}  // namespace hipq::engine
