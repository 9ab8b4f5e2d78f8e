// Batch invariance (docs/batching.md): what a batch of jobs runs through, a
// sample's rows give the same bytes whatever else shares the batch and
// wherever in the batch the sample sits. For each op a UNet step runs
// (matmul with bias, the fp8 product and its row quantizer, the fp8 conv,
// conv2d, group norm on its vector path and its mixed-dtype path, layer norm,
// attention, cross attention), one sample alone (batch 1) against the same
// sample as the first and the last of a batch of 3, byte for byte, on every
// backend at hand: cpu always, at small shapes; hip when a device is visible,
// at the SDXL 1024 px shapes too (where the routes choose tiles by size).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/fp8_conv_weight.h"

namespace hipq::kernels {
namespace {

// A failed op stops the test with its Status.
void ok(const Status& s) {
  HIPQ_CHECK(s.ok() || (std::fprintf(stderr, "%s\n", s.ToString().c_str()), false));
}

// Values in [-1, 1) from a seed, the same on every run.
std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) / static_cast<float>(1 << 23);
  }
  return v;
}

int64_t count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Device tensors of one test, freed with it.
class Arena {
 public:
  explicit Arena(Backend& be) : be_(be) {}
  Tensor make(DType dtype, const std::vector<int64_t>& shape) {
    auto b = be_.allocate(static_cast<size_t>(count(shape)) * dtype_size(dtype));
    HIPQ_CHECK(b.ok());
    Tensor t = Tensor::contiguous(b->data(), dtype, shape, b->location());
    keep_.push_back(std::move(*b));
    return t;
  }
  Tensor from(const std::vector<float>& host, DType dtype, const std::vector<int64_t>& shape) {
    Tensor f = make(DType::kF32, shape);
    HIPQ_CHECK(be_.copy_to_device(host.data(), f.data, host.size() * sizeof(float)).ok());
    if (dtype == DType::kF32) return f;
    Tensor t = make(dtype, shape);
    HIPQ_CHECK(be_.copy(f, t).ok());
    return t;
  }
  std::vector<uint8_t> bytes(const Tensor& t) {
    std::vector<uint8_t> out(t.nbytes());
    HIPQ_CHECK(be_.copy_to_host(t.data, out.data(), out.size()).ok());
    return out;
  }

 private:
  Backend& be_;
  std::vector<Buffer> keep_;
};

// One op over a batch: `run(batch, samples)` returns the output's bytes for
// a batch made of those samples (ids), sample-major, `per_sample` bytes each.
using BatchRun =
    std::function<std::vector<uint8_t>(const std::vector<uint64_t>& samples, size_t& per_sample)>;

void expect_invariant(const std::string& what, const BatchRun& run) {
  SCOPED_TRACE(what);
  size_t one = 0, each = 0;
  const std::vector<uint8_t> first = run({7}, one);
  const std::vector<uint8_t> last = run({9}, one);
  const std::vector<uint8_t> batch = run({7, 8, 9}, each);
  ASSERT_EQ(one, each);
  ASSERT_EQ(batch.size(), 3 * each);
  EXPECT_EQ(std::memcmp(batch.data(), first.data(), each), 0)
      << "the first sample of a batch of 3 differs from it alone";
  EXPECT_EQ(std::memcmp(batch.data() + 2 * each, last.data(), each), 0)
      << "the last sample of a batch of 3 differs from it alone";
}

struct Shapes {
  int64_t tokens, k, n;     // a linear layer over a sample's tokens
  int64_t c, hw, o;         // conv and group norm: channels, side, out channels
  int64_t heads, head_dim;  // attention over `tokens` queries
  int64_t context;          // cross attention keys
};

void check_backend(Backend& be, DType dt, const Shapes& s, bool fp8) {
  auto sample_values = [](const std::vector<uint64_t>& ids, int64_t per, uint64_t salt) {
    std::vector<float> all;
    for (uint64_t id : ids) {
      const std::vector<float> v = values(per, id * 1000 + salt);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::string tag = std::string(be.info().name) + " " + std::string(dtype_name(dt));

  expect_invariant(tag + " matmul + bias", [&](const std::vector<uint64_t>& ids, size_t& per) {
    Arena a(be);
    const int64_t B = static_cast<int64_t>(ids.size());
    Tensor x = a.from(sample_values(ids, s.tokens * s.k, 1), dt, {B * s.tokens, s.k});
    Tensor w = a.from(values(s.n * s.k, 2), dt, {s.n, s.k});
    Tensor bias = a.from(values(s.n, 3), dt, {s.n});
    Tensor y = a.make(dt, {B * s.tokens, s.n});
    MatmulOptions o;
    o.trans_b = true;
    o.bias = &bias;
    ok(be.matmul(x, w, y, o));
    per = static_cast<size_t>(s.tokens * s.n) * dtype_size(dt);
    return a.bytes(y);
  });
  // The time embedding's linear layers: one row a sample.
  expect_invariant(tag + " matmul, one row a sample", [&](const std::vector<uint64_t>& ids, size_t& per) {
    Arena a(be);
    const int64_t B = static_cast<int64_t>(ids.size());
    Tensor x = a.from(sample_values(ids, s.k, 4), dt, {B, s.k});
    Tensor w = a.from(values(s.n * s.k, 5), dt, {s.n, s.k});
    Tensor y = a.make(dt, {B, s.n});
    MatmulOptions o;
    o.trans_b = true;
    o.activation = Activation::kSilu;
    ok(be.matmul(x, w, y, o));
    per = static_cast<size_t>(s.n) * dtype_size(dt);
    return a.bytes(y);
  });
  if (fp8) {
    expect_invariant(tag + " quantize_fp8_rows + matmul_fp8",
                     [&](const std::vector<uint64_t>& ids, size_t& per) {
                       Arena a(be);
                       const int64_t B = static_cast<int64_t>(ids.size()), M = B * s.tokens;
                       Tensor x = a.from(sample_values(ids, s.tokens * s.k, 6), dt, {M, s.k});
                       Tensor w = a.from(values(s.n * s.k, 7), dt, {s.n, s.k});
                       Fp8Rows xa{a.make(DType::kU8, {M, s.k}), a.make(DType::kF32, {M})};
                       Fp8Rows wb{a.make(DType::kU8, {s.n, s.k}), a.make(DType::kF32, {s.n})};
                       ok(be.quantize_fp8_rows(x, xa.codes, xa.scales));
                       ok(be.quantize_fp8_rows(w, wb.codes, wb.scales));
                       Tensor y = a.make(dt, {M, s.n});
                       MatmulOptions o;
                       o.trans_b = true;
                       ok(be.matmul_fp8(xa, wb, y, o));
                       per = static_cast<size_t>(s.tokens * s.n) * dtype_size(dt);
                       return a.bytes(y);
                     });
    // x is quantized per image: the middle sample of the batch 50x larger
    // than the others, so a scale shared by the batch would change theirs.
    // x must be 16-bit: at f32 the conv runs in bf16, the fp8 precision's type.
    const DType cdt = dt == DType::kF32 ? DType::kBF16 : dt;
    expect_invariant(tag + " conv2d_fp8 3x3 + bias", [&](const std::vector<uint64_t>& ids, size_t& per) {
      Arena a(be);
      const int64_t B = static_cast<int64_t>(ids.size()), image = s.c * s.hw * s.hw;
      std::vector<float> xv = sample_values(ids, image, 20);
      for (size_t b = 0; b < ids.size(); ++b)
        if (ids[b] == 8)
          for (int64_t i = 0; i < image; ++i)
            xv[b * static_cast<size_t>(image) + static_cast<size_t>(i)] *= 50.0f;
      Tensor x = a.from(xv, cdt, {B, s.c, s.hw, s.hw});
      Tensor w = a.from(values(s.o * s.c * 9, 21), cdt, {s.o, s.c, 3, 3});
      Tensor bias = a.from(values(s.o, 22), cdt, {s.o});
      Fp8ConvWeight fw{a.make(DType::kU8, {s.o, 3, 3, fp8_conv_channels(s.c)}), a.make(DType::kF32, {s.o})};
      ok(make_fp8_conv_weight(be, w, fw));
      Tensor y = a.make(cdt, {B, s.o, s.hw, s.hw});
      Conv2dOptions o;
      o.padding = 1;
      o.bias = &bias;
      ok(be.conv2d_fp8(x, fw, y, o));
      per = static_cast<size_t>(s.o * s.hw * s.hw) * dtype_size(cdt);
      return a.bytes(y);
    });
  }
  expect_invariant(tag + " conv2d 3x3 + bias", [&](const std::vector<uint64_t>& ids, size_t& per) {
    Arena a(be);
    const int64_t B = static_cast<int64_t>(ids.size());
    Tensor x = a.from(sample_values(ids, s.c * s.hw * s.hw, 8), dt, {B, s.c, s.hw, s.hw});
    Tensor w = a.from(values(s.o * s.c * 9, 9), dt, {s.o, s.c, 3, 3});
    Tensor bias = a.from(values(s.o, 10), dt, {s.o});
    Tensor y = a.make(dt, {B, s.o, s.hw, s.hw});
    Conv2dOptions o;
    o.padding = 1;
    o.bias = &bias;
    ok(be.conv2d(x, w, y, o));
    per = static_cast<size_t>(s.o * s.hw * s.hw) * dtype_size(dt);
    return a.bytes(y);
  });
  // The vector path; an odd side (hip: HW not a whole number of vectors) and,
  // on hip, f32 in and the dtype out take the backend's other reduction path.
  struct NormCase {
    const char* name;
    int64_t side;
    bool mixed;
  };
  std::vector<NormCase> norms = {{" group norm + silu", s.hw, false},
                                 {" group norm, odd side", s.hw + 1, false}};
  if (be.info().name == "hip") norms.push_back({" group norm f32 -> dtype", s.hw, true});
  for (const NormCase& nc : norms) {
    expect_invariant(tag + nc.name, [&](const std::vector<uint64_t>& ids, size_t& per) {
      Arena a(be);
      const int64_t B = static_cast<int64_t>(ids.size()), hw = nc.side;
      const DType in = nc.mixed ? DType::kF32 : dt;
      Tensor x = a.from(sample_values(ids, s.c * hw * hw, 11), in, {B, s.c, hw, hw});
      Tensor g = a.from(values(s.c, 12), in, {s.c});
      Tensor b = a.from(values(s.c, 13), in, {s.c});
      Tensor y = a.make(dt, {B, s.c, hw, hw});
      GroupNormOptions o;
      o.fuse_silu = !nc.mixed;
      ok(be.group_norm(x, g, b, y, o));
      per = static_cast<size_t>(s.c * hw * hw) * dtype_size(dt);
      return a.bytes(y);
    });
  }
  expect_invariant(tag + " layer norm", [&](const std::vector<uint64_t>& ids, size_t& per) {
    Arena a(be);
    const int64_t B = static_cast<int64_t>(ids.size());
    Tensor x = a.from(sample_values(ids, s.tokens * s.k, 14), dt, {B * s.tokens, s.k});
    Tensor g = a.from(values(s.k, 15), dt, {s.k});
    Tensor b = a.from(values(s.k, 16), dt, {s.k});
    Tensor y = a.make(dt, {B * s.tokens, s.k});
    ok(be.layer_norm(x, &g, &b, y, 1e-5f));
    per = static_cast<size_t>(s.tokens * s.k) * dtype_size(dt);
    return a.bytes(y);
  });
  for (const int64_t keys : {s.tokens, s.context}) {
    expect_invariant(tag + (keys == s.tokens ? " self attention" : " cross attention"),
                     [&](const std::vector<uint64_t>& ids, size_t& per) {
                       Arena a(be);
                       const int64_t B = static_cast<int64_t>(ids.size()), D = s.heads * s.head_dim;
                       Tensor q = a.from(sample_values(ids, s.tokens * D, 17), dt, {B, s.tokens, D});
                       Tensor k = a.from(sample_values(ids, keys * D, 18), dt, {B, keys, D});
                       Tensor v = a.from(sample_values(ids, keys * D, 19), dt, {B, keys, D});
                       Tensor y = a.make(dt, {B, s.tokens, D});
                       AttentionOptions o;
                       o.heads = static_cast<int>(s.heads);
                       ok(be.attention(q, k, v, y, o));
                       per = static_cast<size_t>(s.tokens * D) * dtype_size(dt);
                       return a.bytes(y);
                     });
  }
}

TEST(BatchInvarianceTest, CpuSmallShapes) {
  auto be = make_backend("cpu");
  ASSERT_TRUE(be.ok()) << be.status().ToString();
  const Shapes s{64, 96, 80, 64, 12, 24, 2, 32, 77};
  check_backend(**be, DType::kF32, s, /*fp8=*/true);
  check_backend(**be, DType::kF16, s, /*fp8=*/false);
}

TEST(BatchInvarianceTest, HipSdxlShapes) {
  if (gpu_device_count() == 0) GTEST_SKIP() << "no device";
  auto be = make_backend("hip");
  ASSERT_TRUE(be.ok()) << be.status().ToString();
  const bool fp8 = !(*be)->info().fp8_products.empty();
  // Level 1 of SDXL at 1024 px (64 x 64 tokens, 640 channels, 10 heads of 64) and
  // level 0's convs (320 channels at 128 x 128).
  const Shapes level1{4096, 640, 1920, 320, 128, 320, 10, 64, 77};
  // Level 2 (32 x 32 tokens, 1280 channels, 20 heads).
  const Shapes level2{1024, 1280, 5120, 1280, 32, 1280, 20, 64, 77};
  for (DType dt : {DType::kF16, DType::kBF16}) {
    check_backend(**be, dt, level1, fp8 && dt == DType::kBF16);
    check_backend(**be, dt, level2, fp8 && dt == DType::kBF16);
  }
  check_backend(**be, DType::kF32, Shapes{1024, 320, 640, 64, 32, 64, 5, 64, 77}, false);
}

}  // namespace
}  // namespace hipq::kernels
