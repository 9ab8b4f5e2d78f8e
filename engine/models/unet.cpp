#include "engine/models/unet.h"

#include <algorithm>

#include "engine/models/config_json.h"
#include "engine/models/weight_binder.h"

namespace hipq::engine {

using kernels::Tensor;

UNetConfig UNetConfig::sd15() { return UNetConfig{}; }

UNetConfig UNetConfig::sd21() {
  UNetConfig c;
  c.num_attention_heads = {5, 10, 20, 20};
  c.cross_attention_dim = 1024;
  c.use_linear_projection = true;
  c.upcast_attention = true;
  c.sample_size = 96;
  return c;
}

UNetConfig UNetConfig::sdxl() {
  UNetConfig c;
  c.block_out_channels = {320, 640, 1280};
  c.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"};
  c.up_block_types = {"CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
  c.transformer_layers_per_block = {1, 2, 10};
  c.num_attention_heads = {5, 10, 20};
  c.cross_attention_dim = 2048;
  c.use_linear_projection = true;
  c.addition_embed_type = "text_time";
  c.addition_time_embed_dim = 256;
  c.projection_class_embeddings_input_dim = 2816;
  c.sample_size = 128;
  return c;
}

UNetConfig UNetConfig::sdxl_refiner() {
  UNetConfig c;
  c.block_out_channels = {384, 768, 1536, 1536};
  c.down_block_types = {"DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"};
  c.up_block_types = {"UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"};
  c.transformer_layers_per_block = {4, 4, 4, 4};
  c.num_attention_heads = {6, 12, 24, 24};
  c.cross_attention_dim = 1280;
  c.use_linear_projection = true;
  c.addition_embed_type = "text_time";
  c.addition_time_embed_dim = 256;
  c.projection_class_embeddings_input_dim = 2560;
  c.sample_size = 128;
  return c;
}

Status UNetConfig::validate(const std::string& where) const {
  const size_t n = block_out_channels.size();
  auto bad = [&](const std::string& m) { return Status::InvalidArgument(where + ": " + m); };
  if (n == 0) return bad("block_out_channels is empty");
  if (down_block_types.size() != n || up_block_types.size() != n)
    return bad("down_block_types / up_block_types need one entry per block_out_channels entry (" +
               std::to_string(n) + ")");
  if (transformer_layers_per_block.size() != n || num_attention_heads.size() != n)
    return bad("transformer_layers_per_block / attention heads need " + std::to_string(n) + " entries");
  for (const auto& t : down_block_types)
    if (t != "CrossAttnDownBlock2D" && t != "DownBlock2D")
      return Status::Unimplemented(where + ": down block type '" + t + "' is not supported");
  for (const auto& t : up_block_types)
    if (t != "CrossAttnUpBlock2D" && t != "UpBlock2D")
      return Status::Unimplemented(where + ": up block type '" + t + "' is not supported");
  for (size_t i = 0; i < n; ++i) {
    if (block_out_channels[i] % norm_num_groups != 0)
      return bad("block_out_channels[" + std::to_string(i) + "] is not divisible by norm_num_groups");
    if (num_attention_heads[i] <= 0 || block_out_channels[i] % num_attention_heads[i] != 0)
      return bad("block " + std::to_string(i) + ": " + std::to_string(block_out_channels[i]) +
                 " channels do not split into " + std::to_string(num_attention_heads[i]) + " heads");
  }
  if (layers_per_block < 1) return bad("layers_per_block must be at least 1");
  if (!addition_embed_type.empty() && addition_embed_type != "text_time")
    return Status::Unimplemented(where + ": addition_embed_type '" + addition_embed_type + "' is not supported");
  return Status::Ok();
}

Result<UNetConfig> UNetConfig::from_json(const nlohmann::json& j, const std::string& where) {
  ConfigReader r(j, where);
  UNetConfig c;
  HIPQ_ASSIGN_OR_RETURN(c.in_channels, r.integer("in_channels", c.in_channels));
  HIPQ_ASSIGN_OR_RETURN(c.out_channels, r.integer("out_channels", c.out_channels));
  HIPQ_ASSIGN_OR_RETURN(c.block_out_channels, r.int_list("block_out_channels", c.block_out_channels, 0));
  const size_t n = c.block_out_channels.size();
  HIPQ_ASSIGN_OR_RETURN(c.down_block_types, r.string_list("down_block_types", c.down_block_types));
  HIPQ_ASSIGN_OR_RETURN(c.up_block_types, r.string_list("up_block_types", c.up_block_types));
  if (j.contains("mid_block_type")) {
    if (j.at("mid_block_type").is_null()) {
      c.mid_block = false;
    } else {
      HIPQ_ASSIGN_OR_RETURN(std::string mid, r.string("mid_block_type", ""));
      if (mid != "UNetMidBlock2DCrossAttn")
        return Status::Unimplemented(where + ": mid_block_type '" + mid + "' is not supported");
    }
  }
  HIPQ_ASSIGN_OR_RETURN(int64_t lpb, r.integer("layers_per_block", c.layers_per_block));
  c.layers_per_block = static_cast<int>(lpb);
  HIPQ_ASSIGN_OR_RETURN(c.transformer_layers_per_block, r.int_list("transformer_layers_per_block", {1}, n));
  if (r.has("num_attention_heads")) {
    HIPQ_ASSIGN_OR_RETURN(c.num_attention_heads, r.int_list("num_attention_heads", {8}, n));
  } else {
    HIPQ_ASSIGN_OR_RETURN(c.num_attention_heads, r.int_list("attention_head_dim", {8}, n));
  }
  HIPQ_ASSIGN_OR_RETURN(std::vector<int64_t> cross, r.int_list("cross_attention_dim", {c.cross_attention_dim}, 0));
  if (cross.size() != 1 && !std::all_of(cross.begin(), cross.end(), [&](int64_t v) { return v == cross[0]; }))
    return Status::Unimplemented(where + ": per-block cross_attention_dim is not supported");
  c.cross_attention_dim = cross.at(0);
  HIPQ_ASSIGN_OR_RETURN(c.use_linear_projection, r.boolean("use_linear_projection", false));
  HIPQ_ASSIGN_OR_RETURN(c.upcast_attention, r.boolean("upcast_attention", false));
  HIPQ_ASSIGN_OR_RETURN(c.addition_embed_type, r.string("addition_embed_type", ""));
  HIPQ_ASSIGN_OR_RETURN(c.addition_time_embed_dim, r.integer("addition_time_embed_dim", c.addition_time_embed_dim));
  HIPQ_ASSIGN_OR_RETURN(c.projection_class_embeddings_input_dim,
                        r.integer("projection_class_embeddings_input_dim", c.projection_class_embeddings_input_dim));
  HIPQ_ASSIGN_OR_RETURN(int64_t groups, r.integer("norm_num_groups", c.norm_num_groups));
  c.norm_num_groups = static_cast<int>(groups);
  HIPQ_ASSIGN_OR_RETURN(double eps, r.number("norm_eps", c.norm_eps));
  c.norm_eps = static_cast<float>(eps);
  HIPQ_ASSIGN_OR_RETURN(c.flip_sin_to_cos, r.boolean("flip_sin_to_cos", true));
  HIPQ_ASSIGN_OR_RETURN(double shift, r.number("freq_shift", 0.0));
  c.freq_shift = static_cast<float>(shift);
  HIPQ_ASSIGN_OR_RETURN(c.sample_size, r.integer("sample_size", c.sample_size));
  // Variants this implementation does not compute: refuse rather than guess.
  for (const char* key : {"class_embed_type", "encoder_hid_dim_type", "time_cond_proj_dim",
                          "reverse_transformer_layers_per_block", "num_class_embeds"}) {
    if (r.has(key)) return Status::Unimplemented(where + ": field '" + std::string(key) + "' is not supported");
  }
  HIPQ_ASSIGN_OR_RETURN(std::string shift_kind, r.string("resnet_time_scale_shift", "default"));
  if (shift_kind != "default")
    return Status::Unimplemented(where + ": resnet_time_scale_shift '" + shift_kind + "' is not supported");
  HIPQ_ASSIGN_OR_RETURN(bool only_cross, r.boolean("only_cross_attention", false));
  HIPQ_ASSIGN_OR_RETURN(bool dual_cross, r.boolean("dual_cross_attention", false));
  if (only_cross || dual_cross) return Status::Unimplemented(where + ": only/dual cross attention is not supported");
  HIPQ_RETURN_IF_ERROR(c.validate(where));
  return c;
}

Result<UNetConfig> UNetConfig::from_weights(const WeightSource& w) {
  UNetConfig c;
  const std::string where = w.describe();
  HIPQ_ASSIGN_OR_RETURN(TensorMeta conv_in, w.meta("conv_in.weight"));
  HIPQ_ASSIGN_OR_RETURN(TensorMeta conv_out, w.meta("conv_out.weight"));
  c.in_channels = conv_in.shape.at(1);
  c.out_channels = conv_out.shape.at(0);
  c.block_out_channels.clear();
  c.down_block_types.clear();
  c.transformer_layers_per_block.clear();
  c.num_attention_heads.clear();
  for (int i = 0;; ++i) {
    const std::string p = "down_blocks." + std::to_string(i);
    if (!w.contains(p + ".resnets.0.conv1.weight")) break;
    HIPQ_ASSIGN_OR_RETURN(TensorMeta conv1, w.meta(p + ".resnets.0.conv1.weight"));
    c.block_out_channels.push_back(conv1.shape.at(0));
    const bool attn = w.contains(p + ".attentions.0.norm.weight");
    c.down_block_types.push_back(attn ? "CrossAttnDownBlock2D" : "DownBlock2D");
    int depth = 0;
    while (w.contains(p + ".attentions.0.transformer_blocks." + std::to_string(depth) + ".norm1.weight")) ++depth;
    c.transformer_layers_per_block.push_back(std::max(depth, 1));
    if (attn) {
      HIPQ_ASSIGN_OR_RETURN(TensorMeta k, w.meta(p + ".attentions.0.transformer_blocks.0.attn2.to_k.weight"));
      c.cross_attention_dim = k.shape.at(1);
      HIPQ_ASSIGN_OR_RETURN(TensorMeta proj, w.meta(p + ".attentions.0.proj_in.weight"));
      c.use_linear_projection = proj.shape.size() == 2;
    }
  }
  const size_t n = c.block_out_channels.size();
  if (n == 0) return Status::InvalidArgument(where + ": no down_blocks.0.resnets.0.conv1.weight; not a diffusers UNet");
  int lpb = 0;
  while (w.contains("down_blocks.0.resnets." + std::to_string(lpb) + ".conv1.weight")) ++lpb;
  c.layers_per_block = lpb;
  // SD 1.x used 8 heads everywhere; SD 2.x and SDXL use 64-wide heads.
  for (size_t i = 0; i < n; ++i)
    c.num_attention_heads.push_back(c.cross_attention_dim == 768 ? 8 : std::max<int64_t>(1, c.block_out_channels[i] / 64));
  c.up_block_types.clear();
  for (size_t i = 0; i < n; ++i)
    c.up_block_types.push_back(c.down_block_types[n - 1 - i] == "CrossAttnDownBlock2D" ? "CrossAttnUpBlock2D"
                                                                                       : "UpBlock2D");
  c.mid_block = w.contains("mid_block.resnets.0.conv1.weight");
  if (c.mid_block) {
    int depth = 0;
    while (w.contains("mid_block.attentions.0.transformer_blocks." + std::to_string(depth) + ".norm1.weight")) ++depth;
    c.transformer_layers_per_block.back() = std::max(depth, 1);
  }
  if (w.contains("add_embedding.linear_1.weight")) {
    HIPQ_ASSIGN_OR_RETURN(TensorMeta add, w.meta("add_embedding.linear_1.weight"));
    c.addition_embed_type = "text_time";
    c.projection_class_embeddings_input_dim = add.shape.at(1);
  } else {
    c.addition_embed_type.clear();
  }
  c.sample_size = c.is_sdxl() ? 128 : (c.cross_attention_dim == 1024 ? 96 : 64);
  HIPQ_RETURN_IF_ERROR(c.validate(where));
  return c;
}

nlohmann::json UNetConfig::to_json() const {
  nlohmann::json j;
  j["_class_name"] = "UNet2DConditionModel";
  j["_diffusers_version"] = "0.30.0";
  j["act_fn"] = "silu";
  j["addition_embed_type"] = addition_embed_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(addition_embed_type);
  j["addition_embed_type_num_heads"] = 64;
  j["addition_time_embed_dim"] = is_sdxl() ? nlohmann::json(addition_time_embed_dim) : nlohmann::json(nullptr);
  j["attention_head_dim"] = num_attention_heads;
  j["block_out_channels"] = block_out_channels;
  j["center_input_sample"] = false;
  j["class_embed_type"] = nullptr;
  j["class_embeddings_concat"] = false;
  j["conv_in_kernel"] = 3;
  j["conv_out_kernel"] = 3;
  j["cross_attention_dim"] = cross_attention_dim;
  j["cross_attention_norm"] = nullptr;
  j["down_block_types"] = down_block_types;
  j["downsample_padding"] = 1;
  j["dual_cross_attention"] = false;
  j["encoder_hid_dim"] = nullptr;
  j["encoder_hid_dim_type"] = nullptr;
  j["flip_sin_to_cos"] = flip_sin_to_cos;
  j["freq_shift"] = freq_shift;
  j["in_channels"] = in_channels;
  j["layers_per_block"] = layers_per_block;
  j["mid_block_only_cross_attention"] = nullptr;
  j["mid_block_scale_factor"] = 1;
  j["mid_block_type"] = mid_block ? nlohmann::json("UNetMidBlock2DCrossAttn") : nlohmann::json(nullptr);
  j["norm_eps"] = norm_eps;
  j["norm_num_groups"] = norm_num_groups;
  j["num_attention_heads"] = nullptr;
  j["num_class_embeds"] = nullptr;
  j["only_cross_attention"] = false;
  j["out_channels"] = out_channels;
  j["projection_class_embeddings_input_dim"] =
      is_sdxl() ? nlohmann::json(projection_class_embeddings_input_dim) : nlohmann::json(nullptr);
  j["resnet_out_scale_factor"] = 1.0;
  j["resnet_skip_time_act"] = false;
  j["resnet_time_scale_shift"] = "default";
  j["sample_size"] = sample_size;
  j["time_cond_proj_dim"] = nullptr;
  j["time_embedding_act_fn"] = nullptr;
  j["time_embedding_dim"] = nullptr;
  j["time_embedding_type"] = "positional";
  j["timestep_post_act"] = nullptr;
  j["transformer_layers_per_block"] = transformer_layers_per_block;
  j["up_block_types"] = up_block_types;
  j["upcast_attention"] = upcast_attention;
  j["use_linear_projection"] = use_linear_projection;
  return j;
}

Status UNet::bind_all(UNet& m, WeightBinder& b) {
  const UNetConfig& c = m.cfg_;
  HIPQ_RETURN_IF_ERROR(c.validate("unet config"));
  const size_t n = c.block_out_channels.size();
  const int64_t c0 = c.block_out_channels[0];
  const int64_t temb = c.time_embed_dim();
  const int groups = c.norm_num_groups;
  const float eps = c.norm_eps;
  HIPQ_ASSIGN_OR_RETURN(m.conv_in_, Conv2d::bind(b, "conv_in", c.in_channels, c0, 3, 1, 1));
  HIPQ_ASSIGN_OR_RETURN(m.time_linear_1_, Linear::bind(b, "time_embedding.linear_1", c0, temb));
  HIPQ_ASSIGN_OR_RETURN(m.time_linear_2_, Linear::bind(b, "time_embedding.linear_2", temb, temb));
  if (c.is_sdxl()) {
    HIPQ_ASSIGN_OR_RETURN(m.add_linear_1_,
                          Linear::bind(b, "add_embedding.linear_1", c.projection_class_embeddings_input_dim, temb));
    HIPQ_ASSIGN_OR_RETURN(m.add_linear_2_, Linear::bind(b, "add_embedding.linear_2", temb, temb));
  }
  int64_t out_ch = c0;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "down_blocks." + std::to_string(i);
    const int64_t in_ch = out_ch;
    out_ch = c.block_out_channels[i];
    const bool attn = c.down_block_types[i] == "CrossAttnDownBlock2D";
    DownBlock blk;
    for (int j = 0; j < c.layers_per_block; ++j) {
      HIPQ_ASSIGN_OR_RETURN(ResnetBlock2D r, ResnetBlock2D::bind(b, p + ".resnets." + std::to_string(j),
                                                                j == 0 ? in_ch : out_ch, out_ch, temb, groups, eps));
      blk.resnets.push_back(std::move(r));
      if (attn) {
        HIPQ_ASSIGN_OR_RETURN(Transformer2DModel t,
                              Transformer2DModel::bind(b, p + ".attentions." + std::to_string(j), out_ch,
                                                       static_cast<int>(c.num_attention_heads[i]),
                                                       static_cast<int>(c.transformer_layers_per_block[i]),
                                                       c.cross_attention_dim, c.use_linear_projection, groups));
        blk.attentions.push_back(std::move(t));
      }
    }
    if (i + 1 < n) {
      HIPQ_ASSIGN_OR_RETURN(Downsample2D d, Downsample2D::bind(b, p + ".downsamplers.0", out_ch));
      blk.downsamplers.push_back(std::move(d));
    }
    m.down_.push_back(std::move(blk));
  }
  const int64_t top = c.block_out_channels.back();
  if (c.mid_block) {
    HIPQ_ASSIGN_OR_RETURN(m.mid_res0_, ResnetBlock2D::bind(b, "mid_block.resnets.0", top, top, temb, groups, eps));
    HIPQ_ASSIGN_OR_RETURN(m.mid_attn_,
                          Transformer2DModel::bind(b, "mid_block.attentions.0", top,
                                                   static_cast<int>(c.num_attention_heads.back()),
                                                   static_cast<int>(c.transformer_layers_per_block.back()),
                                                   c.cross_attention_dim, c.use_linear_projection, groups));
    HIPQ_ASSIGN_OR_RETURN(m.mid_res1_, ResnetBlock2D::bind(b, "mid_block.resnets.1", top, top, temb, groups, eps));
  }
  out_ch = top;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "up_blocks." + std::to_string(i);
    const size_t rev = n - 1 - i;
    const int64_t prev_out = out_ch;
    out_ch = c.block_out_channels[rev];
    const int64_t in_ch = c.block_out_channels[rev == 0 ? 0 : rev - 1];
    const bool attn = c.up_block_types[i] == "CrossAttnUpBlock2D";
    UpBlock blk;
    const int layers = c.layers_per_block + 1;
    for (int j = 0; j < layers; ++j) {
      const int64_t skip = (j == layers - 1) ? in_ch : out_ch;
      const int64_t res_in = (j == 0) ? prev_out : out_ch;
      HIPQ_ASSIGN_OR_RETURN(ResnetBlock2D r, ResnetBlock2D::bind(b, p + ".resnets." + std::to_string(j),
                                                                res_in + skip, out_ch, temb, groups, eps));
      blk.resnets.push_back(std::move(r));
      if (attn) {
        HIPQ_ASSIGN_OR_RETURN(Transformer2DModel t,
                              Transformer2DModel::bind(b, p + ".attentions." + std::to_string(j), out_ch,
                                                       static_cast<int>(c.num_attention_heads[rev]),
                                                       static_cast<int>(c.transformer_layers_per_block[rev]),
                                                       c.cross_attention_dim, c.use_linear_projection, groups));
        blk.attentions.push_back(std::move(t));
      }
    }
    if (i + 1 < n) {
      HIPQ_ASSIGN_OR_RETURN(Upsample2D u, Upsample2D::bind(b, p + ".upsamplers.0", out_ch));
      blk.upsamplers.push_back(std::move(u));
    }
    m.up_.push_back(std::move(blk));
  }
  HIPQ_ASSIGN_OR_RETURN(m.norm_out_, GroupNorm::bind(b, "conv_norm_out", c0, groups, eps));
  HIPQ_ASSIGN_OR_RETURN(m.conv_out_, Conv2d::bind(b, "conv_out", c0, c.out_channels, 3, 1, 1));
  return Status::Ok();
}

Result<UNet> UNet::load(const UNetConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                        kernels::DType precision, Fp8Weights fp8) {
  if (fp8.on && backend.info().fp8_products.empty())
    return Status::FailedPrecondition("precision fp8 cannot run on " + backend.info().device_name + " (" +
                                      backend.info().arch + "): " + backend.info().fp8_refusal);
  UNet m;
  m.cfg_ = cfg;
  m.dtype_ = precision;
  m.fp8_ = fp8;
  WeightLoader loader(weights, backend, precision, {}, fp8);
  HIPQ_RETURN_IF_ERROR(bind_all(m, loader));
  m.weights_ = loader.take_buffers();
  m.bound_ = loader.take_bound();
  return m;
}

Result<std::vector<ParamSpec>> UNet::parameters(const UNetConfig& cfg) {
  UNet m;
  m.cfg_ = cfg;
  SpecRecorder rec;
  HIPQ_RETURN_IF_ERROR(bind_all(m, rec));
  return rec.take_specs();
}

namespace {
// Sinusoidal embedding of values (f32 on the device, or host values copied
// there first), computed in fp32 like the reference and cast to the model
// precision afterwards.
Result<DeviceTensor> sinusoidal(kernels::Backend& be, const kernels::Tensor* device_t, const std::vector<float>& t,
                                int64_t dim, bool flip, float shift, kernels::DType dtype) {
  DeviceTensor uploaded;
  if (device_t == nullptr) {
    HIPQ_ASSIGN_OR_RETURN(uploaded, DeviceTensor::from_host(be, t.data(), {static_cast<int64_t>(t.size())},
                                                            kernels::DType::kF32));
  }
  const kernels::Tensor tt = device_t ? device_t->reshape({device_t->numel()}) : uploaded.t;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor e, DeviceTensor::make(be, kernels::DType::kF32, {tt.numel(), dim}));
  kernels::TimestepEmbeddingOptions o;
  o.dim = static_cast<int>(dim);
  o.flip_sin_to_cos = flip;
  o.downscale_freq_shift = shift;
  HIPQ_RETURN_IF_ERROR(be.timestep_embedding(tt, e.t, o));
  if (dtype == kernels::DType::kF32) return e;
  return contiguous_copy(be, e.t, dtype);
}
}  // namespace

Result<DeviceTensor> UNet::time_embedding(kernels::Backend& be, const UNetInputs& in, int64_t n) const {
  const int64_t c0 = cfg_.block_out_channels[0];
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor t, sinusoidal(be, in.timesteps_device, in.timesteps, c0, cfg_.flip_sin_to_cos, cfg_.freq_shift, dtype_));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, time_linear_1_(be, t.t, kernels::Activation::kSilu));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor emb, time_linear_2_(be, h.t));
  if (!cfg_.is_sdxl()) return emb;
  const int64_t p = in.text_embeds->dim(1);
  const int64_t tdim = cfg_.addition_time_embed_dim;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor te, sinusoidal(be, in.time_ids_device, in.time_ids, tdim, cfg_.flip_sin_to_cos, cfg_.freq_shift, dtype_));
  const int64_t k = time_id_count(in, n);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor add_in, DeviceTensor::make(be, dtype_, {n, p + k * tdim}));
  const Tensor parts[2] = {*in.text_embeds, te.t.reshape({n, k * tdim})};
  HIPQ_RETURN_IF_ERROR(be.concat(parts, 1, add_in.t));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor a1, add_linear_1_(be, add_in.t, kernels::Activation::kSilu));
  // emb + add_embedding(...): the residual epilogue does the sum.
  return add_linear_2_(be, a1.t, kernels::Activation::kNone, &emb.t);
}

int64_t UNet::time_id_count(const UNetInputs& in, int64_t n) {
  const int64_t total = in.time_ids_device ? in.time_ids_device->numel() : static_cast<int64_t>(in.time_ids.size());
  return n > 0 ? total / n : 0;
}

Status UNet::check_context(const Tensor& ctx, int64_t n) const {
  if (ctx.ndim != 3 || (n >= 0 && ctx.dim(0) != n) || ctx.dim(2) != cfg_.cross_attention_dim || ctx.dtype != dtype_)
    return Status::InvalidArgument("UNet: encoder_hidden_states " + ctx.describe() + " is not [" +
                                   (n >= 0 ? std::to_string(n) : std::string("N")) + ", S, " +
                                   std::to_string(cfg_.cross_attention_dim) + "] in the model precision");
  return Status::Ok();
}

Result<ContextKV> UNet::project_context(kernels::Backend& be, const Tensor& encoder_hidden_states) const {
  const Tensor& ctx = encoder_hidden_states;
  HIPQ_RETURN_IF_ERROR(check_context(ctx, -1));
  ContextKV kv(ctx);
  for (const DownBlock& blk : down_)
    for (const Transformer2DModel& t : blk.attentions) HIPQ_RETURN_IF_ERROR(t.project_context(be, kv));
  if (cfg_.mid_block) HIPQ_RETURN_IF_ERROR(mid_attn_.project_context(be, kv));
  for (const UpBlock& blk : up_)
    for (const Transformer2DModel& t : blk.attentions) HIPQ_RETURN_IF_ERROR(t.project_context(be, kv));
  return kv;
}

Result<DeviceTensor> UNet::forward(kernels::Backend& be, const UNetInputs& in) const {
  if (!in.sample || !in.encoder_hidden_states)
    return Status::InvalidArgument("UNet: sample and encoder_hidden_states are required");
  const Tensor& x = *in.sample;
  const int64_t n = x.dim(0);
  if (x.ndim != 4 || x.dim(1) != cfg_.in_channels || x.dtype != dtype_)
    return Status::InvalidArgument("UNet: sample " + x.describe() + " is not [N, " + std::to_string(cfg_.in_channels) +
                                   ", h, w] in " + std::string(kernels::dtype_name(dtype_)));
  const Tensor& ctx = *in.encoder_hidden_states;
  HIPQ_RETURN_IF_ERROR(check_context(ctx, n));
  auto device_f32 = [&x](const Tensor* t, int64_t count) {
    return t->dtype == kernels::DType::kF32 && t->location == x.location && t->is_contiguous() && t->numel() == count;
  };
  const int64_t n_timesteps =
      in.timesteps_device ? in.timesteps_device->numel() : static_cast<int64_t>(in.timesteps.size());
  if (n_timesteps != n || (in.timesteps_device && !device_f32(in.timesteps_device, n)))
    return Status::InvalidArgument("UNet: " + std::to_string(n_timesteps) + " timesteps for a batch of " +
                                   std::to_string(n) + " (device timesteps: contiguous f32 on the device)");
  if (cfg_.is_sdxl()) {
    // K time ids per row: add_embedding's input is the pooled text and K
    // embeddings (base 6, refiner 5).
    const int64_t k = time_id_count(in, n);
    const int64_t want = cfg_.projection_class_embeddings_input_dim - k * cfg_.addition_time_embed_dim;
    const int64_t total = in.time_ids_device ? in.time_ids_device->numel() : static_cast<int64_t>(in.time_ids.size());
    if (k < 1 || total != k * n || (in.time_ids_device && !device_f32(in.time_ids_device, k * n)))
      return Status::InvalidArgument("UNet (SDXL): " + std::to_string(total) + " time_ids for a batch of " +
                                     std::to_string(n) + ": the same number per row, at least one (device: contiguous f32)");
    if (!in.text_embeds || in.text_embeds->ndim != 2 || in.text_embeds->dim(0) != n ||
        in.text_embeds->dim(1) != want || in.text_embeds->dtype != dtype_)
      return Status::InvalidArgument("UNet (SDXL): with " + std::to_string(k) + " time ids per row, text_embeds must be [" +
                                     std::to_string(n) + ", " + std::to_string(want) + "] in the model precision (" +
                                     std::to_string(cfg_.projection_class_embeddings_input_dim) +
                                     " = pooled + time ids x " + std::to_string(cfg_.addition_time_embed_dim) + ")");
  }

  HIPQ_ASSIGN_OR_RETURN(DeviceTensor emb, time_embedding(be, in, n));
  // Every resnet applies SiLU to the embedding first; do it once.
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor temb, DeviceTensor::make(be, dtype_, emb.t.shape_vec()));
  HIPQ_RETURN_IF_ERROR(be.unary(kernels::UnaryOp::kSilu, emb.t, temb.t));

  // Skip activations are kept as they are produced (moving a DeviceTensor
  // keeps its memory, so `cur` stays valid while the vector grows).
  std::vector<DeviceTensor> skips;
  {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h0, conv_in_(be, x));
    skips.push_back(std::move(h0));
  }
  Tensor cur = skips.back().t;
  for (const DownBlock& blk : down_) {
    for (size_t j = 0; j < blk.resnets.size(); ++j) {
      HIPQ_ASSIGN_OR_RETURN(DeviceTensor r, blk.resnets[j].forward(be, cur, &temb.t));
      if (!blk.attentions.empty()) {
        HIPQ_ASSIGN_OR_RETURN(r, blk.attentions[j].forward(be, r.t, ctx, in.context_kv));
      }
      skips.push_back(std::move(r));
      cur = skips.back().t;
    }
    for (const Downsample2D& d : blk.downsamplers) {
      HIPQ_ASSIGN_OR_RETURN(DeviceTensor r, d.forward(be, cur));
      skips.push_back(std::move(r));
      cur = skips.back().t;
    }
  }
  DeviceTensor h;
  if (cfg_.mid_block) {
    HIPQ_ASSIGN_OR_RETURN(h, mid_res0_.forward(be, cur, &temb.t));
    HIPQ_ASSIGN_OR_RETURN(h, mid_attn_.forward(be, h.t, ctx, in.context_kv));
    HIPQ_ASSIGN_OR_RETURN(h, mid_res1_.forward(be, h.t, &temb.t));
  } else {
    HIPQ_ASSIGN_OR_RETURN(h, contiguous_copy(be, cur, dtype_));
  }
  for (const UpBlock& blk : up_) {
    for (size_t j = 0; j < blk.resnets.size(); ++j) {
      DeviceTensor skip = std::move(skips.back());
      skips.pop_back();
      HIPQ_ASSIGN_OR_RETURN(DeviceTensor cat, DeviceTensor::make(be, dtype_, {n, h.t.dim(1) + skip.t.dim(1),
                                                                             h.t.dim(2), h.t.dim(3)}));
      const Tensor parts[2] = {h.t, skip.t};
      HIPQ_RETURN_IF_ERROR(be.concat(parts, 1, cat.t));
      HIPQ_ASSIGN_OR_RETURN(h, blk.resnets[j].forward(be, cat.t, &temb.t));
      if (!blk.attentions.empty()) {
        HIPQ_ASSIGN_OR_RETURN(h, blk.attentions[j].forward(be, h.t, ctx, in.context_kv));
      }
    }
    for (const Upsample2D& u : blk.upsamplers) {
      // The next skip tensor fixes the size (odd sizes upsample to it, not 2x).
      const Tensor& next = skips.back().t;
      HIPQ_ASSIGN_OR_RETURN(h, u.forward(be, h.t, next.dim(2), next.dim(3)));
    }
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor o, norm_out_(be, h.t, /*silu=*/true));
  return conv_out_(be, o.t);
}

}  // namespace hipq::engine
