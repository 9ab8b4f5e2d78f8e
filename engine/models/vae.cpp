#include "engine/models/vae.h"

#include <algorithm>
#include <cmath>

#include "engine/models/config_json.h"
#include "engine/models/vae_encoder.h"
#include "engine/models/weight_binder.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::engine {

using kernels::Tensor;

Result<VaeMidAttention> VaeMidAttention::bind(WeightBinder& b, const std::string& prefix, int64_t channels,
                                              int groups) {
  VaeMidAttention m;
  HIPQ_ASSIGN_OR_RETURN(m.norm, GroupNorm::bind(b, prefix + ".group_norm", channels, groups, kVaeEps));
  HIPQ_ASSIGN_OR_RETURN(m.attn, Attention::bind(b, prefix, AttentionKind::kSelf, channels, channels, 1, channels,
                                                /*qkv_bias=*/true));
  return m;
}

Result<DeviceTensor> VaeMidAttention::forward(kernels::Backend& be, const Tensor& x) const {
  const int64_t n = x.dim(0), c = x.dim(1), s = x.dim(2) * x.dim(3);
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor normed, norm(be, x, false));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor seq, contiguous_copy(be, normed.t.reshape({n, c, s}).permute({0, 2, 1}), x.dtype));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor a, attn.forward(be, seq.t, nullptr, nullptr));  // [N, HW, C]
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, DeviceTensor::make(be, x.dtype, x.shape_vec()));
  Tensor dst = out.t.reshape({n, c, s});
  HIPQ_RETURN_IF_ERROR(be.copy(a.t.permute({0, 2, 1}), dst));
  HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, out.t, x, out.t));
  return out;
}

VaeConfig VaeConfig::sd15() { return VaeConfig{}; }

VaeConfig VaeConfig::sdxl() {
  VaeConfig c;
  c.scaling_factor = 0.13025;
  c.sample_size = 1024;
  return c;
}

Result<VaeConfig> VaeConfig::from_json(const nlohmann::json& j, const std::string& where) {
  ConfigReader r(j, where);
  VaeConfig c;
  HIPQ_ASSIGN_OR_RETURN(c.in_channels, r.integer("in_channels", c.in_channels));
  HIPQ_ASSIGN_OR_RETURN(c.out_channels, r.integer("out_channels", c.out_channels));
  HIPQ_ASSIGN_OR_RETURN(c.latent_channels, r.integer("latent_channels", c.latent_channels));
  HIPQ_ASSIGN_OR_RETURN(c.block_out_channels, r.int_list("block_out_channels", c.block_out_channels, 0));
  HIPQ_ASSIGN_OR_RETURN(int64_t lpb, r.integer("layers_per_block", c.layers_per_block));
  c.layers_per_block = static_cast<int>(lpb);
  HIPQ_ASSIGN_OR_RETURN(int64_t groups, r.integer("norm_num_groups", c.norm_num_groups));
  c.norm_num_groups = static_cast<int>(groups);
  HIPQ_ASSIGN_OR_RETURN(c.scaling_factor, r.number("scaling_factor", c.scaling_factor));
  HIPQ_ASSIGN_OR_RETURN(c.sample_size, r.integer("sample_size", c.sample_size));
  HIPQ_ASSIGN_OR_RETURN(c.force_upcast, r.boolean("force_upcast", c.force_upcast));
  HIPQ_ASSIGN_OR_RETURN(c.mid_block_add_attention, r.boolean("mid_block_add_attention", true));
  HIPQ_ASSIGN_OR_RETURN(std::vector<std::string> up, r.string_list("up_block_types", {}));
  for (const auto& t : up)
    if (t != "UpDecoderBlock2D") return Status::Unimplemented(where + ": up block type '" + t + "' is not supported");
  if (!up.empty() && up.size() != c.block_out_channels.size())
    return r.error("up_block_types", "needs one entry per block_out_channels entry");
  if (c.block_out_channels.empty()) return r.error("block_out_channels", "is empty");
  for (int64_t ch : c.block_out_channels)
    if (ch % c.norm_num_groups != 0) return r.error("block_out_channels", "entries must divide into norm_num_groups");
  if (r.has("latents_mean") || r.has("shift_factor"))
    return Status::Unimplemented(where + ": latents_mean / shift_factor VAEs are not supported");
  return c;
}

Result<VaeConfig> VaeConfig::from_weights(const WeightSource& w, std::string_view family) {
  VaeConfig c;
  if (family == "sdxl") {
    c = VaeConfig::sdxl();
  } else if (family == "sd2") {
    c.sample_size = 768;
  } else if (family != "sd1") {
    return Status::InvalidArgument(w.describe() + ": the VAE's scaling factor depends on the model family; '" +
                                   std::string(family) + "' is none of sd1, sd2, sdxl");
  }
  HIPQ_ASSIGN_OR_RETURN(TensorMeta pq, w.meta("post_quant_conv.weight"));
  HIPQ_ASSIGN_OR_RETURN(TensorMeta out, w.meta("decoder.conv_out.weight"));
  c.latent_channels = pq.shape.at(0);
  c.out_channels = out.shape.at(0);
  c.block_out_channels.clear();
  int n = 0;
  while (w.contains("decoder.up_blocks." + std::to_string(n) + ".resnets.0.conv1.weight")) ++n;
  if (n == 0) return Status::InvalidArgument(w.describe() + ": no decoder.up_blocks; not a diffusers AutoencoderKL");
  for (int i = n - 1; i >= 0; --i) {
    HIPQ_ASSIGN_OR_RETURN(TensorMeta m, w.meta("decoder.up_blocks." + std::to_string(i) + ".resnets.0.conv1.weight"));
    c.block_out_channels.push_back(m.shape.at(0));
  }
  int lpb = 0;
  while (w.contains("decoder.up_blocks.0.resnets." + std::to_string(lpb) + ".conv1.weight")) ++lpb;
  c.layers_per_block = lpb - 1;
  c.mid_block_add_attention = w.contains("decoder.mid_block.attentions.0.to_q.weight");
  return c;
}

nlohmann::json VaeConfig::to_json() const {
  nlohmann::json j;
  j["_class_name"] = "AutoencoderKL";
  j["_diffusers_version"] = "0.30.0";
  j["act_fn"] = "silu";
  j["block_out_channels"] = block_out_channels;
  j["down_block_types"] = std::vector<std::string>(block_out_channels.size(), "DownEncoderBlock2D");
  j["force_upcast"] = force_upcast;
  j["in_channels"] = in_channels;
  j["latent_channels"] = latent_channels;
  j["latents_mean"] = nullptr;
  j["latents_std"] = nullptr;
  j["layers_per_block"] = layers_per_block;
  j["mid_block_add_attention"] = mid_block_add_attention;
  j["norm_num_groups"] = norm_num_groups;
  j["out_channels"] = out_channels;
  j["sample_size"] = sample_size;
  j["scaling_factor"] = scaling_factor;
  j["shift_factor"] = nullptr;
  j["up_block_types"] = std::vector<std::string>(block_out_channels.size(), "UpDecoderBlock2D");
  j["use_post_quant_conv"] = true;
  j["use_quant_conv"] = true;
  return j;
}

Status VaeDecoder::bind_decoder(VaeDecoder& m, WeightBinder& b) {
  const VaeConfig& c = m.cfg_;
  const int g = c.norm_num_groups;
  const int64_t top = c.block_out_channels.back();
  HIPQ_ASSIGN_OR_RETURN(m.post_quant_conv_,
                        Conv2d::bind(b, "post_quant_conv", c.latent_channels, c.latent_channels, 1, 1, 0));
  HIPQ_ASSIGN_OR_RETURN(m.conv_in_, Conv2d::bind(b, "decoder.conv_in", c.latent_channels, top, 3, 1, 1));
  HIPQ_ASSIGN_OR_RETURN(m.mid_res0_, ResnetBlock2D::bind(b, "decoder.mid_block.resnets.0", top, top, 0, g, kVaeEps));
  if (c.mid_block_add_attention) {
    HIPQ_ASSIGN_OR_RETURN(m.mid_attn_, VaeMidAttention::bind(b, "decoder.mid_block.attentions.0", top, g));
  }
  HIPQ_ASSIGN_OR_RETURN(m.mid_res1_, ResnetBlock2D::bind(b, "decoder.mid_block.resnets.1", top, top, 0, g, kVaeEps));
  const size_t n = c.block_out_channels.size();
  int64_t out = top;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "decoder.up_blocks." + std::to_string(i);
    const int64_t prev = out;
    out = c.block_out_channels[n - 1 - i];
    UpBlock blk;
    for (int j = 0; j < c.layers_per_block + 1; ++j) {
      HIPQ_ASSIGN_OR_RETURN(ResnetBlock2D r, ResnetBlock2D::bind(b, p + ".resnets." + std::to_string(j),
                                                                j == 0 ? prev : out, out, 0, g, kVaeEps));
      blk.resnets.push_back(std::move(r));
    }
    if (i + 1 < n) {
      HIPQ_ASSIGN_OR_RETURN(Upsample2D u, Upsample2D::bind(b, p + ".upsamplers.0", out));
      blk.upsamplers.push_back(std::move(u));
    }
    m.up_.push_back(std::move(blk));
  }
  const int64_t c0 = c.block_out_channels[0];
  HIPQ_ASSIGN_OR_RETURN(m.norm_out_, GroupNorm::bind(b, "decoder.conv_norm_out", c0, g, kVaeEps));
  HIPQ_ASSIGN_OR_RETURN(m.conv_out_, Conv2d::bind(b, "decoder.conv_out", c0, c.out_channels, 3, 1, 1));
  return Status::Ok();
}

Result<VaeDecoder> VaeDecoder::load(const VaeConfig& cfg, const WeightSource& weights, kernels::Backend& backend,
                                    kernels::DType precision) {
  VaeDecoder m;
  m.cfg_ = cfg;
  m.dtype_ = precision;
  WeightLoader loader(weights, backend, precision);
  HIPQ_RETURN_IF_ERROR(bind_decoder(m, loader));
  m.weights_ = loader.take_buffers();
  return m;
}

Result<std::vector<ParamSpec>> VaeDecoder::parameters(const VaeConfig& cfg) {
  VaeDecoder m;
  m.cfg_ = cfg;
  SpecRecorder rec;
  HIPQ_RETURN_IF_ERROR(VaeEncoder::bind_encoder(rec, cfg, nullptr));
  HIPQ_RETURN_IF_ERROR(bind_decoder(m, rec));
  return rec.take_specs();
}

Result<DeviceTensor> VaeDecoder::decode_tile(kernels::Backend& be, const Tensor& z) const {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor zc, contiguous_copy(be, z, dtype_));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor pq, post_quant_conv_(be, zc.t));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, conv_in_(be, pq.t));
  pq = DeviceTensor{};
  zc = DeviceTensor{};
  // Each activation goes to the next layer and is released (or overwritten
  // in place) as soon as it is read: at 1024 px one fp32 activation of 256
  // channels is 1 GiB (docs/memory.md).
  HIPQ_ASSIGN_OR_RETURN(h, mid_res0_.forward_consuming(be, std::move(h), nullptr));
  if (cfg_.mid_block_add_attention) {
    HIPQ_ASSIGN_OR_RETURN(h, mid_attn_.forward(be, h.t));
  }
  HIPQ_ASSIGN_OR_RETURN(h, mid_res1_.forward_consuming(be, std::move(h), nullptr));
  for (const UpBlock& blk : up_) {
    for (const ResnetBlock2D& r : blk.resnets) {
      HIPQ_ASSIGN_OR_RETURN(h, r.forward_consuming(be, std::move(h), nullptr));
    }
    for (const Upsample2D& u : blk.upsamplers) {
      HIPQ_ASSIGN_OR_RETURN(h, u.forward(be, h.t));
    }
  }
  HIPQ_RETURN_IF_ERROR(norm_out_.in_place(be, h.t, /*silu=*/true));
  return conv_out_(be, h.t);
}

// The tiles of a tiled decode, in latent pixels: origins every `step`, each
// tile_lat wide (clipped at the edge); tile (a, b) owns the latent rows
// [a * step, min((a + 1) * step, lh)) and columns alike, so the owned regions
// partition the latent.
struct VaeDecoder::TileGrid {
  int64_t lh = 0, lw = 0, tile_lat = 0, step = 0;
  std::vector<int64_t> rows, cols;  // origins
  int64_t extent(int64_t origin, int64_t size) const { return std::min(tile_lat, size - origin); }
  int64_t owned_end(int64_t origin, int64_t size) const { return std::min(origin + step, size); }
};

namespace {

// Per (image, group) count, mean and M2 of the whole image, merged from
// tile partials in a fixed order (Chan et al., fp64).
struct GroupMoments {
  std::vector<double> n, mean, m2;
  explicit GroupMoments(size_t groups) : n(groups, 0.0), mean(groups, 0.0), m2(groups, 0.0) {}
  void merge(size_t g, double nb, double mb, double m2b) {
    if (nb == 0) return;
    const double na = n[g], nn = na + nb, d = mb - mean[g];
    mean[g] += d * nb / nn;
    m2[g] += m2b + d * d * na * nb / nn;
    n[g] = nn;
  }
};

// Adds the moments of x's region [y0, y1) x [x0, x1) (x: [N, C, H, W] fp32
// on the host) to m, two passes per (image, group). The (image, group) pairs
// run on the host's cores side by side: each pair's arithmetic and its merge
// are the same as one after the other, so the result does not depend on the
// thread count. (A 1024 px SDXL decode in tiles computes about 30 of these
// over the whole image: 10 s on one core.)
void add_region_moments(const std::vector<float>& x, const std::vector<int64_t>& shape, int groups, int64_t y0,
                        int64_t y1, int64_t x0, int64_t x1, GroupMoments& m) {
  const int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3], cpg = C / groups;
  auto one = [&](int64_t bg) {
    const int64_t b = bg / groups, g = bg % groups;
    double sum = 0;
    int64_t cnt = 0;
    for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
      for (int64_t y = y0; y < y1; ++y) {
        const float* row = x.data() + ((b * C + c) * H + y) * W;
        for (int64_t i = x0; i < x1; ++i) sum += row[i];
        cnt += x1 - x0;
      }
    if (cnt == 0) return;
    const double mean = sum / static_cast<double>(cnt);
    double m2 = 0;
    for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
      for (int64_t y = y0; y < y1; ++y) {
        const float* row = x.data() + ((b * C + c) * H + y) * W;
        for (int64_t i = x0; i < x1; ++i) {
          const double d = row[i] - mean;
          m2 += d * d;
        }
      }
    m.merge(static_cast<size_t>(bg), static_cast<double>(cnt), mean, m2);  // each bg: its own slot
  };
  // The cpu backend's pool (a small region stays on the calling thread).
  const int64_t pairs = N * groups;
  const int64_t work = pairs * cpg * (y1 - y0) * (x1 - x0);
  kernels::cpu::ThreadPool::global().parallel_for(pairs, work < (int64_t{1} << 20) ? pairs : 1,
                                                  [&](int64_t begin, int64_t end) {
                                                    for (int64_t bg = begin; bg < end; ++bg) one(bg);
                                                  });
}

// x (on the device) normalised in place with the moments m, as GroupNorm
// does with its own: x * a[c] + b[c] (a = gamma / std, b = beta - mean * a),
// then SiLU.
Status apply_group_norm(kernels::Backend& be, const GroupNorm& gn, const GroupMoments& m, Tensor& x, bool silu) {
  const int64_t N = x.dim(0), C = x.dim(1), cpg = C / gn.groups;
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> gamma, to_host_f32(be, gn.weight));
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> beta, to_host_f32(be, gn.bias));
  std::vector<float> a(static_cast<size_t>(N * C)), b(a.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const size_t g = static_cast<size_t>(n * gn.groups + c / cpg);
      const double rstd = 1.0 / std::sqrt(m.m2[g] / m.n[g] + static_cast<double>(gn.eps));
      a[static_cast<size_t>(n * C + c)] = static_cast<float>(rstd * gamma[static_cast<size_t>(c)]);
      b[static_cast<size_t>(n * C + c)] =
          static_cast<float>(beta[static_cast<size_t>(c)] - m.mean[g] * rstd * gamma[static_cast<size_t>(c)]);
    }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor ad, DeviceTensor::from_host(be, a.data(), {N, C, 1, 1}, x.dtype));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor bd, DeviceTensor::from_host(be, b.data(), {N, C, 1, 1}, x.dtype));
  HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kMul, x, ad.t, x));
  HIPQ_RETURN_IF_ERROR(be.binary(kernels::BinaryOp::kAdd, x, bd.t, x));
  if (silu) HIPQ_RETURN_IF_ERROR(be.unary(kernels::UnaryOp::kSilu, x, x));
  return Status::Ok();
}

// A host activation and its shape: where a tile waits between group norms.
struct Parked {
  std::vector<float> v;
  std::vector<int64_t> shape;
};

Result<Parked> park(kernels::Backend& be, const Tensor& t) {
  Parked p;
  HIPQ_ASSIGN_OR_RETURN(p.v, to_host_f32(be, t));
  p.shape = t.shape_vec();
  return p;
}

}  // namespace

Result<std::vector<float>> VaeDecoder::decode_mid(kernels::Backend& be, const Tensor& z) const {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor zc, contiguous_copy(be, z, dtype_));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor pq, post_quant_conv_(be, zc.t));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, conv_in_(be, pq.t));
  pq = DeviceTensor{};
  HIPQ_ASSIGN_OR_RETURN(h, mid_res0_.forward_consuming(be, std::move(h), nullptr));
  if (cfg_.mid_block_add_attention) {
    HIPQ_ASSIGN_OR_RETURN(h, mid_attn_.forward(be, h.t));
  }
  HIPQ_ASSIGN_OR_RETURN(h, mid_res1_.forward_consuming(be, std::move(h), nullptr));
  return to_host_f32(be, h.t);
}

Result<std::vector<std::vector<float>>> VaeDecoder::decode_tiles_whole_norms(kernels::Backend& be, const Tensor& z,
                                                                             const TileGrid& grid) const {
  const int64_t n = z.dim(0), top = cfg_.block_out_channels.back();
  const int groups = cfg_.norm_num_groups;
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> mid, decode_mid(be, z));
  struct TileState {
    int64_t i, j, th, tw;            // latent origin and size
    int64_t oh, ow;                  // owned latent rows / columns from the origin
    Parked cur, res;
  };
  std::vector<TileState> tiles;
  for (int64_t i : grid.rows)
    for (int64_t j : grid.cols) {
      TileState t{i, j, grid.extent(i, grid.lh), grid.extent(j, grid.lw), grid.owned_end(i, grid.lh) - i,
                  grid.owned_end(j, grid.lw) - j, {}, {}};
      t.cur.shape = {n, top, t.th, t.tw};
      t.cur.v.resize(static_cast<size_t>(n * top * t.th * t.tw));
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < top; ++c)
          for (int64_t y = 0; y < t.th; ++y)
            std::copy_n(mid.data() + ((b * top + c) * grid.lh + i + y) * grid.lw + j, t.tw,
                        t.cur.v.data() + ((b * top + c) * t.th + y) * t.tw);
      tiles.push_back(std::move(t));
    }
  mid = {};
  int64_t scale = 1;  // pixels of the current level per latent pixel
  // The whole image's moments of every tile's `cur`, each over its own region.
  auto moments = [&]() {
    GroupMoments m(static_cast<size_t>(n * groups));
    for (const TileState& t : tiles)
      add_region_moments(t.cur.v, t.cur.shape, groups, 0, t.oh * scale, 0, t.ow * scale, m);
    return m;
  };
  auto upload = [&](const Parked& p) { return DeviceTensor::from_host(be, p.v.data(), p.shape, dtype_); };
  for (const UpBlock& blk : up_) {
    for (size_t r = 0; r < blk.resnets.size(); ++r) {
      const ResnetBlock2D& res = blk.resnets[r];
      // norm1 -> conv1 (the residual, or the shortcut's output, parked).
      const GroupMoments m1 = moments();
      for (TileState& t : tiles) {
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor x, upload(t.cur));
        if (res.conv_shortcut) {
          HIPQ_ASSIGN_OR_RETURN(DeviceTensor s, (*res.conv_shortcut)(be, x.t));
          HIPQ_ASSIGN_OR_RETURN(t.res, park(be, s.t));
        } else {
          t.res = std::move(t.cur);
        }
        HIPQ_RETURN_IF_ERROR(apply_group_norm(be, res.norm1, m1, x.t, /*silu=*/true));
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor h1, res.conv1(be, x.t));
        x = DeviceTensor{};
        HIPQ_ASSIGN_OR_RETURN(t.cur, park(be, h1.t));
      }
      // norm2 -> conv2 + residual (-> the upsampler after the block's last resnet).
      const GroupMoments m2 = moments();
      const bool last = r + 1 == blk.resnets.size();
      for (TileState& t : tiles) {
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, upload(t.cur));
        HIPQ_RETURN_IF_ERROR(apply_group_norm(be, res.norm2, m2, h.t, /*silu=*/true));
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor rd, upload(t.res));
        t.res = Parked{};
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor out, res.conv2(be, h.t, &rd.t));
        h = DeviceTensor{};
        rd = DeviceTensor{};
        if (last)
          for (const Upsample2D& u : blk.upsamplers) {
            HIPQ_ASSIGN_OR_RETURN(out, u.forward(be, out.t));
          }
        HIPQ_ASSIGN_OR_RETURN(t.cur, park(be, out.t));
      }
    }
    if (!blk.upsamplers.empty()) scale *= 2;
  }
  const GroupMoments mo = moments();
  std::vector<std::vector<float>> images;
  for (TileState& t : tiles) {
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, upload(t.cur));
    t.cur = Parked{};
    HIPQ_RETURN_IF_ERROR(apply_group_norm(be, norm_out_, mo, h.t, /*silu=*/true));
    HIPQ_ASSIGN_OR_RETURN(DeviceTensor o, conv_out_(be, h.t));
    HIPQ_ASSIGN_OR_RETURN(std::vector<float> px, to_host_f32(be, o.t));
    images.push_back(std::move(px));
  }
  return images;
}

Result<DeviceTensor> VaeDecoder::decode(kernels::Backend& be, const Tensor& z, const VaeTiling& tiling) const {
  if (z.ndim != 4 || z.dim(1) != cfg_.latent_channels || !kernels::is_float(z.dtype))
    return Status::InvalidArgument("VaeDecoder: latent " + z.describe() + " is not [N, " +
                                   std::to_string(cfg_.latent_channels) + ", h, w] floats");
  const int64_t f = cfg_.upscale();
  const int64_t tile_px = tiling.tile_sample_size > 0 ? tiling.tile_sample_size : cfg_.sample_size;
  const int64_t tile_lat = tile_px / f;
  const int64_t lh = z.dim(2), lw = z.dim(3);
  if (!tiling.enabled || (lh <= tile_lat && lw <= tile_lat)) return decode_tile(be, z);
  if (tile_lat < 2 || tiling.overlap < 0.0f || tiling.overlap >= 1.0f)
    return Status::InvalidArgument("VaeDecoder: tile of " + std::to_string(tile_px) + " px / overlap " +
                                   std::to_string(tiling.overlap) + " cannot tile");

  // diffusers AutoencoderKL.tiled_decode, step for step.
  const int64_t step = static_cast<int64_t>(static_cast<double>(tile_lat) * (1.0 - tiling.overlap));
  const int64_t blend = static_cast<int64_t>(static_cast<double>(tile_px) * tiling.overlap);
  const int64_t limit = tile_px - blend;
  const int64_t n = z.dim(0), ch = cfg_.out_channels;
  struct Tile {
    std::vector<float> px;  // [n, ch, h, w]
    int64_t h = 0, w = 0;
    float& at(int64_t b, int64_t c, int64_t y, int64_t x, int64_t chs) { return px[((b * chs + c) * h + y) * w + x]; }
  };
  TileGrid grid;
  grid.lh = lh;
  grid.lw = lw;
  grid.tile_lat = tile_lat;
  grid.step = step;
  for (int64_t i = 0; i < lh; i += step) grid.rows.push_back(i);
  for (int64_t j = 0; j < lw; j += step) grid.cols.push_back(j);
  std::vector<std::vector<float>> lockstep;
  if (tiling.whole_image_norms) {
    HIPQ_ASSIGN_OR_RETURN(lockstep, decode_tiles_whole_norms(be, z, grid));
  }
  std::vector<std::vector<Tile>> rows;
  size_t k = 0;
  for (int64_t i : grid.rows) {
    std::vector<Tile> row;
    for (int64_t j : grid.cols) {
      Tile t;
      if (tiling.whole_image_norms) {
        t.h = grid.extent(i, lh) * f;
        t.w = grid.extent(j, lw) * f;
        t.px = std::move(lockstep[k++]);
      } else {
        Tensor zt = z.slice(2, i, grid.extent(i, lh)).slice(3, j, grid.extent(j, lw));
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor d, decode_tile(be, zt));
        t.h = d.t.dim(2);
        t.w = d.t.dim(3);
        HIPQ_ASSIGN_OR_RETURN(t.px, to_host_f32(be, d.t));
      }
      row.push_back(std::move(t));
    }
    rows.push_back(std::move(row));
  }
  const int64_t out_h = lh * f, out_w = lw * f;
  std::vector<float> out(static_cast<size_t>(n * ch * out_h * out_w));
  int64_t y0 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    int64_t x0 = 0, row_h = 0;
    for (size_t j = 0; j < rows[i].size(); ++j) {
      Tile& t = rows[i][j];
      if (i > 0) {
        Tile& a = rows[i - 1][j];
        const int64_t e = std::min({a.h, t.h, blend});
        for (int64_t b = 0; b < n; ++b)
          for (int64_t c = 0; c < ch; ++c)
            for (int64_t y = 0; y < e; ++y) {
              const float wgt = static_cast<float>(y) / static_cast<float>(e);
              for (int64_t x = 0; x < std::min(a.w, t.w); ++x)
                t.at(b, c, y, x, ch) = a.at(b, c, a.h - e + y, x, ch) * (1 - wgt) + t.at(b, c, y, x, ch) * wgt;
            }
      }
      if (j > 0) {
        Tile& a = rows[i][j - 1];
        const int64_t e = std::min({a.w, t.w, blend});
        for (int64_t b = 0; b < n; ++b)
          for (int64_t c = 0; c < ch; ++c)
            for (int64_t y = 0; y < std::min(a.h, t.h); ++y)
              for (int64_t x = 0; x < e; ++x) {
                const float wgt = static_cast<float>(x) / static_cast<float>(e);
                t.at(b, c, y, x, ch) = a.at(b, c, y, a.w - e + x, ch) * (1 - wgt) + t.at(b, c, y, x, ch) * wgt;
              }
      }
      const int64_t ch_h = std::min(limit, t.h), ch_w = std::min(limit, t.w);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < ch; ++c)
          for (int64_t y = 0; y < ch_h && y0 + y < out_h; ++y)
            for (int64_t x = 0; x < ch_w && x0 + x < out_w; ++x)
              out[static_cast<size_t>(((b * ch + c) * out_h + y0 + y) * out_w + x0 + x)] = t.at(b, c, y, x, ch);
      x0 += ch_w;
      row_h = ch_h;
    }
    y0 += row_h;
  }
  if (y0 != out_h)
    return Status::Internal("VaeDecoder: tiles covered " + std::to_string(y0) + " of " + std::to_string(out_h) + " rows");
  return DeviceTensor::from_host(be, out.data(), {n, ch, out_h, out_w}, dtype_);
}

}  // namespace hipq::engine
