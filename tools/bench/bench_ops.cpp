// hipq_bench_ops: times the hip backend's ops on the SDXL 1024 px shapes.
//
// For each case: inputs filled with random values, warm-up launches, then
// `repeats` timed launches, each between two device events; the median is
// reported with achieved TFLOP/s (matmul, conv2d, attention) or GB/s
// (memory-bound ops) and the percentage of the device's peak from
// BackendInfo. Output: one JSON object per line (tools/bench/compare.py joins
// it with tools/bench/torch_ops.py's output). Not a test.
//
// Usage: hipq_bench_ops [--dtype f16|bf16|f32]... [--repeats N] [--warmup N] [--filter SUBSTR]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/fp8_conv_weight.h"

namespace hipq::kernels {
namespace {

struct BenchCase {
  std::string op, name;
  std::vector<std::vector<int64_t>> inputs;  // shapes, all of the case dtype
  std::vector<int64_t> out;
  double flops = 0;  // 0: memory-bound, report GB/s
  double bytes_elems = 0;  // elements moved (read + written), for GB/s
  std::function<Status(Backend&, std::vector<Tensor>&, Tensor&)> run;
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::vector<BenchCase> sdxl_cases() {
  std::vector<BenchCase> v;
  // geglu: the UNet's FF-in form, GEGLU over (value, gate) column pairs in the
  // epilogue (out is N / 2 wide); torch_ops.py times linear + chunk + gelu * mul.
  auto gemm = [&](std::string name, int64_t M, int64_t N, int64_t K, bool bias, bool geglu = false) {
    BenchCase c;
    c.op = "matmul";
    c.name = name;
    c.inputs = {{M, K}, {N, K}};
    if (bias) c.inputs.push_back({N});
    c.out = {M, geglu ? N / 2 : N};
    c.flops = 2.0 * M * N * K;
    c.run = [bias, geglu](Backend& be, std::vector<Tensor>& in, Tensor& out) {
      MatmulOptions o;
      o.trans_b = true;
      o.bias = bias ? &in[2] : nullptr;
      o.geglu_pairs = geglu;
      return be.matmul(in[0], in[1], out, o);
    };
    v.push_back(c);
  };
  gemm("sdxl_l1_qkv_8192x640x640", 8192, 640, 640, false);
  gemm("sdxl_l1_ff_in_8192x5120x640", 8192, 5120, 640, true);
  gemm("sdxl_l2_ff_in_2048x10240x1280", 2048, 10240, 1280, true);
  gemm("sdxl_l2_qkv_2048x1280x1280", 2048, 1280, 1280, false);
  gemm("sdxl_l2_ff_out_2048x1280x5120", 2048, 1280, 5120, true);
  gemm("sdxl_l1_ff_in_nobias_8192x5120x640", 8192, 5120, 640, false);
  gemm("sdxl_l2_ff_in_nobias_2048x10240x1280", 2048, 10240, 1280, false);
  gemm("sdxl_l1_ff_in_geglu_8192x5120x640", 8192, 5120, 640, true, true);
  gemm("sdxl_l2_ff_in_geglu_2048x10240x1280", 2048, 10240, 1280, true, true);
  gemm("sdxl_l1_ff_out_8192x640x2560", 8192, 640, 2560, true);
  gemm("sdxl_l1_proj_8192x640x640", 8192, 640, 640, true);
  gemm("sdxl_l2_proj_2048x1280x1280", 2048, 1280, 1280, true);
  gemm("sdxl_l2_cross_kv_154x2560x2048", 154, 2560, 2048, false);

  // matmul_fp8 (the precision fp8's linear layers): x and the weight quantized
  // per row on the first (warm-up) call and kept, so the timed calls are the
  // product alone, as torch_ops.py times torch._scaled_mm on fp8 operands
  // with row-wise scales; quantize_fp8_rows of the activations is its own row.
  auto gemm_fp8 = [&](std::string name, int64_t M, int64_t N, int64_t K, bool bias, bool geglu = false) {
    BenchCase c;
    c.op = "matmul_fp8";
    c.name = name;
    c.inputs = {{M, K}, {N, K}};
    if (bias) c.inputs.push_back({N});
    c.out = {M, geglu ? N / 2 : N};
    c.flops = 2.0 * M * N * K;
    struct Quantized {
      std::vector<Buffer> bufs;
      Fp8Rows a, b;
    };
    auto q = std::make_shared<Quantized>();
    c.run = [bias, geglu, q](Backend& be, std::vector<Tensor>& in, Tensor& out) -> Status {
      if (q->bufs.empty()) {
        for (int i = 0; i < 2; ++i) {
          const Tensor& x = in[static_cast<size_t>(i)];
          HIPQ_ASSIGN_OR_RETURN(Buffer codes, be.allocate(static_cast<size_t>(x.numel())));
          HIPQ_ASSIGN_OR_RETURN(Buffer scales, be.allocate(static_cast<size_t>(x.shape[0]) * 4));
          Fp8Rows r{codes.tensor(DType::kU8, x.shape_vec()), scales.tensor(DType::kF32, {x.shape[0]})};
          HIPQ_RETURN_IF_ERROR(be.quantize_fp8_rows(x, r.codes, r.scales));
          (i == 0 ? q->a : q->b) = r;
          q->bufs.push_back(std::move(codes));
          q->bufs.push_back(std::move(scales));
        }
      }
      MatmulOptions o;
      o.trans_b = true;
      o.bias = bias ? &in[2] : nullptr;
      o.geglu_pairs = geglu;
      return be.matmul_fp8(q->a, q->b, out, o);
    };
    v.push_back(c);
  };
  gemm_fp8("sdxl_l1_qkv_8192x1920x640", 8192, 1920, 640, false);
  gemm_fp8("sdxl_l1_ff_in_geglu_8192x5120x640", 8192, 5120, 640, true, true);
  gemm_fp8("sdxl_l1_ff_out_8192x640x2560", 8192, 640, 2560, true);
  gemm_fp8("sdxl_l2_qkv_2048x3840x1280", 2048, 3840, 1280, false);
  gemm_fp8("sdxl_l2_ff_in_nobias_2048x10240x1280", 2048, 10240, 1280, false);
  gemm_fp8("sdxl_l2_ff_in_geglu_2048x10240x1280", 2048, 10240, 1280, true, true);
  gemm_fp8("sdxl_l2_ff_out_2048x1280x5120", 2048, 1280, 5120, true);
  // Attention output and proj_in / proj_out, one shape a level. (The
  // cross-attention keys + values, 154 rows, have no torch row: _scaled_mm
  // takes only multiples of 16.)
  gemm_fp8("sdxl_l1_proj_8192x640x640", 8192, 640, 640, true);
  gemm_fp8("sdxl_l2_proj_2048x1280x1280", 2048, 1280, 1280, true);
  {
    BenchCase c;
    c.op = "quantize_fp8_rows";
    c.name = "sdxl_8192x640";
    c.inputs = {{8192, 640}};
    c.out = {8192, 640};  // the codes; the bench's out buffer is large enough for them
    c.bytes_elems = 1.5 * numel(c.out);  // 16-bit in, 8-bit out (bf16 / f16 runs)
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) -> Status {
      Tensor codes = Tensor::contiguous(out.data, DType::kU8, {8192, 640}, out.location);
      HIPQ_ASSIGN_OR_RETURN(Buffer scales, be.allocate(8192 * 4));
      Tensor st = scales.tensor(DType::kF32, {8192});
      return be.quantize_fp8_rows(in[0], codes, st);
    };
    v.push_back(c);
  }
  // A transformer block's norm feeding an fp8 layer: the fused op, and the
  // two ops it replaces (layer_norm, then quantize_fp8_rows of its output).
  for (const auto& [rows, d] : {std::pair<int64_t, int64_t>{8192, 640}, {2048, 1280}}) {
    const std::string shape = std::to_string(rows) + "x" + std::to_string(d);
    BenchCase fused;
    fused.op = "layer_norm_fp8";
    fused.name = "sdxl_" + shape;
    fused.inputs = {{rows, d}, {d}, {d}};
    fused.out = {rows, d};
    fused.bytes_elems = 1.5 * numel(fused.out);  // 16-bit in, 8-bit out
    fused.run = [rows, d](Backend& be, std::vector<Tensor>& in, Tensor& out) -> Status {
      Tensor codes = Tensor::contiguous(out.data, DType::kU8, {rows, d}, out.location);
      HIPQ_ASSIGN_OR_RETURN(Buffer scales, be.allocate(static_cast<size_t>(rows) * 4));
      Tensor st = scales.tensor(DType::kF32, {rows});
      return be.layer_norm_fp8(in[0], &in[1], &in[2], 1e-5f, codes, st);
    };
    v.push_back(fused);
    BenchCase apart = fused;
    apart.op = "layer_norm_fp8";
    apart.name = "sdxl_" + shape + "_unfused";
    apart.bytes_elems = 3.5 * numel(apart.out);  // 16-bit in and out, then 16-bit in, 8-bit out
    apart.run = [rows, d](Backend& be, std::vector<Tensor>& in, Tensor& out) -> Status {
      HIPQ_ASSIGN_OR_RETURN(Buffer y, be.allocate(static_cast<size_t>(rows * d) * dtype_size(in[0].dtype)));
      Tensor yt = y.tensor(in[0].dtype, {rows, d});
      HIPQ_RETURN_IF_ERROR(be.layer_norm(in[0], &in[1], &in[2], yt, 1e-5f));
      Tensor codes = Tensor::contiguous(out.data, DType::kU8, {rows, d}, out.location);
      HIPQ_ASSIGN_OR_RETURN(Buffer scales, be.allocate(static_cast<size_t>(rows) * 4));
      Tensor st = scales.tensor(DType::kF32, {rows});
      return be.quantize_fp8_rows(yt, codes, st);
    };
    v.push_back(apart);
  }

  auto conv = [&](std::string name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int s, int p) {
    BenchCase c;
    c.op = "conv2d";
    c.name = name;
    const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
    c.inputs = {{N, C, H, W}, {O, C, k, k}, {O}};
    c.out = {N, O, Ho, Wo};
    c.flops = 2.0 * N * O * Ho * Wo * C * k * k;
    c.run = [s, p](Backend& be, std::vector<Tensor>& in, Tensor& out) {
      Conv2dOptions o;
      o.stride = s;
      o.padding = p;
      o.bias = &in[2];
      return be.conv2d(in[0], in[1], out, o);
    };
    v.push_back(c);
  };
  conv("sdxl_2x320x128x128_o320_k3", 2, 320, 128, 128, 320, 3, 1, 1);
  conv("sdxl_2x640x64x64_o640_k3", 2, 640, 64, 64, 640, 3, 1, 1);
  conv("sdxl_2x1280x32x32_o1280_k3", 2, 1280, 32, 32, 1280, 3, 1, 1);
  conv("sdxl_2x640x32x32_o1280_k1", 2, 640, 32, 32, 1280, 1, 1, 0);

  // conv2d_fp8 (the precision fp8's resnet and upsampler convs): the weight's
  // fp8 form made on the first (warm-up) call and kept; the timed calls
  // include the per-image quantization of x, as a forward runs it.
  auto conv_fp8 = [&](std::string name, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k,
                      int p, bool up = false) {
    BenchCase c;
    c.op = "conv2d_fp8";
    c.name = name;
    const int64_t Hs = up ? 2 * H : H, Ws = up ? 2 * W : W;
    const int64_t Ho = Hs + 2 * p - k + 1, Wo = Ws + 2 * p - k + 1;
    c.inputs = {{N, C, H, W}, {O, C, k, k}, {O}};
    c.out = {N, O, Ho, Wo};
    c.flops = 2.0 * N * O * Ho * Wo * C * k * k;
    struct Form {
      std::vector<Buffer> bufs;
      Fp8ConvWeight w;
    };
    auto f = std::make_shared<Form>();
    c.run = [f, p, up, O, C, k](Backend& be, std::vector<Tensor>& in, Tensor& out) -> Status {
      if (f->bufs.empty()) {
        const int64_t Cp = fp8_conv_channels(C);
        HIPQ_ASSIGN_OR_RETURN(Buffer codes, be.allocate(static_cast<size_t>(O * k * k * Cp)));
        HIPQ_ASSIGN_OR_RETURN(Buffer scales, be.allocate(static_cast<size_t>(O) * 4));
        f->w = Fp8ConvWeight{codes.tensor(DType::kU8, {O, k, k, Cp}), scales.tensor(DType::kF32, {O})};
        HIPQ_RETURN_IF_ERROR(make_fp8_conv_weight(be, in[1], f->w));
        f->bufs.push_back(std::move(codes));
        f->bufs.push_back(std::move(scales));
      }
      Conv2dOptions o;
      o.padding = p;
      o.bias = &in[2];
      o.upsample_x2 = up;
      return be.conv2d_fp8(in[0], f->w, out, o);
    };
    v.push_back(c);
  };
  conv_fp8("sdxl_2x320x128x128_o320_k3", 2, 320, 128, 128, 320, 3, 1);
  conv_fp8("sdxl_2x640x64x64_o640_k3", 2, 640, 64, 64, 640, 3, 1);
  conv_fp8("sdxl_2x1280x32x32_o1280_k3", 2, 1280, 32, 32, 1280, 3, 1);
  conv_fp8("sdxl_2x640x32x32_o1280_k1", 2, 640, 32, 32, 1280, 1, 0);
  conv_fp8("sdxl_2x1280x32x32_o1280_k3_up2", 2, 1280, 32, 32, 1280, 3, 1, true);
  conv("sdxl_2x1280x64x64_o1280_k3", 2, 1280, 64, 64, 1280, 3, 1, 1);

  auto attn = [&](std::string name, int64_t B, int64_t Sq, int64_t Sk, int H, int64_t D) {
    BenchCase c;
    c.op = "attention";
    c.name = name;
    c.inputs = {{B, Sq, H * D}, {B, Sk, H * D}, {B, Sk, H * D}};
    c.out = {B, Sq, H * D};
    c.flops = 4.0 * B * H * Sq * Sk * D;
    c.run = [H](Backend& be, std::vector<Tensor>& in, Tensor& out) {
      AttentionOptions o;
      o.heads = H;
      return be.attention(in[0], in[1], in[2], out, o);
    };
    v.push_back(c);
  };
  attn("sdxl_self_b2_q4096_h10_d64", 2, 4096, 4096, 10, 64);
  attn("sdxl_cross_b2_q4096_k77_h10_d64", 2, 4096, 77, 10, 64);
  attn("sdxl_l2_self_b2_q1024_h20_d64", 2, 1024, 1024, 20, 64);

  auto gn = [&](std::string name, std::vector<int64_t> shape, bool silu) {
    BenchCase c;
    c.op = "group_norm";
    c.name = name;
    c.inputs = {shape, {shape[1]}, {shape[1]}};
    c.out = shape;
    c.bytes_elems = 2.0 * numel(shape);
    c.run = [silu](Backend& be, std::vector<Tensor>& in, Tensor& out) {
      GroupNormOptions o;
      o.groups = 32;
      o.fuse_silu = silu;
      return be.group_norm(in[0], in[1], in[2], out, o);
    };
    v.push_back(c);
  };
  gn("sdxl_2x320x128x128_silu", {2, 320, 128, 128}, true);
  gn("sdxl_2x1280x32x32", {2, 1280, 32, 32}, false);

  {
    BenchCase c;
    c.op = "layer_norm";
    c.name = "sdxl_2x4096x640";
    c.inputs = {{2, 4096, 640}, {640}, {640}};
    c.out = {2, 4096, 640};
    c.bytes_elems = 2.0 * numel(c.out);
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) { return be.layer_norm(in[0], &in[1], &in[2], out, 1e-5f); };
    v.push_back(c);
  }
  {
    BenchCase c;
    c.op = "geglu";
    c.name = "sdxl_2x4096x10240";
    c.inputs = {{2, 4096, 10240}};
    c.out = {2, 4096, 5120};
    c.bytes_elems = 1.5 * numel(c.inputs[0]);
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) { return be.geglu(in[0], out); };
    v.push_back(c);
  }
  {
    BenchCase c;
    c.op = "binary_add";
    c.name = "sdxl_2x320x128x128";
    c.inputs = {{2, 320, 128, 128}, {2, 320, 128, 128}};
    c.out = {2, 320, 128, 128};
    c.bytes_elems = 3.0 * numel(c.out);
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) { return be.binary(BinaryOp::kAdd, in[0], in[1], out); };
    v.push_back(c);
  }
  {
    BenchCase c;
    c.op = "softmax";
    c.name = "sdxl_20x4096x77";
    c.inputs = {{20, 4096, 77}};
    c.out = {20, 4096, 77};
    c.bytes_elems = 2.0 * numel(c.out);
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) { return be.softmax(in[0], out, 0.125f, false); };
    v.push_back(c);
  }
  {
    BenchCase c;
    c.op = "upsample_nearest2x";
    c.name = "sdxl_2x1280x32x32";
    c.inputs = {{2, 1280, 32, 32}};
    c.out = {2, 1280, 64, 64};
    c.bytes_elems = 1.25 * numel(c.out);
    c.run = [](Backend& be, std::vector<Tensor>& in, Tensor& out) { return be.upsample_nearest2x(in[0], out); };
    v.push_back(c);
  }
  return v;
}

int run(int argc, char** argv) {
  std::vector<DType> dtypes;
  int repeats = 20, warmup = 3;
  std::string filter;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "hipq_bench_ops: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dtype") {
      const std::string d = next();
      auto t = parse_dtype(d);
      if (!t || !is_float(*t) || *t == DType::kF64) {
        std::fprintf(stderr, "hipq_bench_ops: --dtype must be f32, f16 or bf16 (got '%s')\n", d.c_str());
        return 2;
      }
      dtypes.push_back(*t);
    } else if (a == "--repeats") {
      repeats = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--warmup") {
      warmup = std::max(0, std::atoi(next().c_str()));
    } else if (a == "--filter") {
      filter = next();
    } else {
      std::fprintf(stderr, "usage: hipq_bench_ops [--dtype f16|bf16|f32]... [--repeats N] [--warmup N] [--filter SUBSTR]\n");
      return 2;
    }
  }
  if (dtypes.empty()) dtypes = {DType::kF16};
  auto be_r = make_backend("hip", 0);
  if (!be_r.ok()) {
    std::fprintf(stderr, "hipq_bench_ops: %s\n", be_r.status().ToString().c_str());
    return 1;
  }
  Backend& be = **be_r;
  const BackendInfo& info = be.info();
  std::printf("{\"device\": \"%s\", \"arch\": \"%s\", \"runtime\": \"%s\", \"driver\": \"%s\", \"sms\": %d, "
              "\"peak_fp32_tflops\": %.1f, \"peak_fp16_tflops\": %.1f, \"peak_bandwidth_gbs\": %.0f, "
              "\"fp32_products\": \"%s\", \"f16_products\": \"%s\", \"fp8_products\": \"%s\"}\n",
              info.device_name.c_str(), info.arch.c_str(), info.runtime_version.c_str(), info.driver_version.c_str(),
              info.multiprocessors, info.peak_fp32_tflops, info.peak_fp16_tflops, info.peak_bandwidth_gbs,
              info.fp32_products.c_str(), info.f16_products.c_str(), info.fp8_products.c_str());
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (DType dt : dtypes) {
    for (BenchCase& c : sdxl_cases()) {
      if (!filter.empty() && (c.op + "_" + c.name).find(filter) == std::string::npos) continue;
      const bool fp8 = c.op == "matmul_fp8" || c.op == "quantize_fp8_rows" || c.op == "conv2d_fp8" ||
                       c.op == "layer_norm_fp8";
      if (fp8 && info.fp8_products.empty()) continue;  // no fp8 products here (BackendInfo::fp8_refusal)
      if (c.op == "conv2d_fp8" && dt == DType::kF32) continue;  // its input is 16-bit
      std::vector<Buffer> bufs;
      std::vector<Tensor> in;
      bool ok = true;
      for (auto& shape : c.inputs) {
        const int64_t n = numel(shape);
        std::vector<uint8_t> host(static_cast<size_t>(n) * dtype_size(dt));
        const float sc = c.op == "conv2d" || c.op == "conv2d_fp8" || c.op == "matmul" ? 0.05f : 1.0f;
        for (int64_t i = 0; i < n; ++i) store_from_f32(host.data(), dt, i, sc * dist(rng));
        auto b = be.allocate(host.size());
        if (!b.ok() || !be.copy_to_device(host.data(), b->data(), host.size()).ok()) {
          ok = false;
          break;
        }
        in.push_back(b->tensor(dt, shape));
        bufs.push_back(std::move(*b));
      }
      auto ob = be.allocate(static_cast<size_t>(numel(c.out)) * dtype_size(dt));
      if (!ok || !ob.ok()) {
        std::fprintf(stderr, "hipq_bench_ops: allocation failed for %s\n", c.name.c_str());
        return 1;
      }
      Tensor out = ob->tensor(dt, c.out);
      for (int w = 0; w < warmup; ++w) {
        Status s = c.run(be, in, out);
        if (!s.ok()) {
          std::fprintf(stderr, "hipq_bench_ops: %s: %s\n", c.name.c_str(), s.ToString().c_str());
          return 1;
        }
      }
      std::vector<double> times;
      for (int r = 0; r < repeats; ++r) {
        auto e0 = be.record_event();
        Status s = c.run(be, in, out);
        auto e1 = be.record_event();
        if (!s.ok() || !e0.ok() || !e1.ok()) return 1;
        auto ms = be.elapsed_ms(*e0, *e1);
        if (!ms.ok()) return 1;
        times.push_back(*ms);
      }
      std::sort(times.begin(), times.end());
      const double med = times[times.size() / 2];
      double rate = 0, pct = 0;
      const char* unit;
      if (c.flops > 0) {
        rate = c.flops / (med * 1e-3) / 1e12;
        unit = "TFLOP/s";
        // fp8 products run at twice the 16-bit rate on the matrix units.
        const double peak = c.op == "matmul_fp8" || c.op == "conv2d_fp8" ? 2 * info.peak_fp16_tflops
                            : dt == DType::kF32                          ? info.peak_fp32_tflops
                                                                         : info.peak_fp16_tflops;
        pct = peak > 0 ? 100.0 * rate / peak : 0;
      } else {
        rate = c.bytes_elems * dtype_size(dt) / (med * 1e-3) / 1e9;
        unit = "GB/s";
        pct = info.peak_bandwidth_gbs > 0 ? 100.0 * rate / info.peak_bandwidth_gbs : 0;
      }
      std::printf("{\"impl\": \"hipq\", \"op\": \"%s\", \"case\": \"%s\", \"dtype\": \"%s\", \"ms\": %.4f, "
                  "\"min_ms\": %.4f, \"rate\": %.3f, \"unit\": \"%s\", \"pct_peak\": %.2f}\n",
                  c.op.c_str(), c.name.c_str(), std::string(dtype_name(dt)).c_str(), med, times.front(), rate, unit,
                  pct);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace hipq::kernels

int main(int argc, char** argv) { return hipq::kernels::run(argc, argv); }
