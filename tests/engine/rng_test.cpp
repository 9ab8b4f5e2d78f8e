#include "engine/rng.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  return fs::path(src ? src : ".") / "tests" / "data" / "rng";
}

std::string bits(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", std::bit_cast<uint32_t>(f));
  return buf;
}

std::string sha_of(const std::vector<float>& v) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

TEST(TorchRandnCpu, BitExactWithCommittedTorchVectors) {
  auto text = read_file(data_dir() / "torch_randn_cpu.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  int checked = 0;
  for (const auto& c : j["cases"]) {
    const uint64_t seed = std::stoull(c["seed"].get<std::string>());
    const int64_t numel = c["numel"].get<int64_t>();
    const auto v = torch_randn_cpu(seed, numel);
    ASSERT_EQ(static_cast<int64_t>(v.size()), numel);
    const auto& head = c["head"];
    for (size_t i = 0; i < head.size(); ++i)
      ASSERT_EQ(bits(v[i]), head[i].get<std::string>()) << "seed " << seed << " numel " << numel << " index " << i;
    const auto& tail = c["tail"];
    for (size_t i = 0; i < tail.size(); ++i) {
      const size_t k = v.size() - tail.size() + i;
      ASSERT_EQ(bits(v[k]), tail[i].get<std::string>()) << "seed " << seed << " numel " << numel << " index " << k;
    }
    EXPECT_EQ(sha_of(v), c["sha256"].get<std::string>()) << "seed " << seed << " numel " << numel;
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// torch.randn(n, generator=cpu.manual_seed(seed), dtype=float16 | bfloat16), as
// torch 2.11 drew them (tests/data/rng/README.md): what diffusers uses as the
// initial noise of a half-precision pipeline.
TEST(TorchRandnCpu, HalfAndBfloat16BitExactWithTorch) {
  auto file = SafetensorsFile::open(data_dir() / "torch_randn_cpu_reduced.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  int checked = 0;
  for (const std::string& name : (*file)->names()) {
    // "<f16|bf16>_<seed>_<numel>"
    const size_t a = name.find('_'), b = name.rfind('_');
    const auto dtype = kernels::parse_dtype(name.substr(0, a));
    ASSERT_TRUE(dtype.has_value()) << name;
    const uint64_t seed = std::stoull(name.substr(a + 1, b - a - 1));
    const int64_t numel = std::stoll(name.substr(b + 1));
    auto want = (*file)->get(name);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    const std::vector<float> expected = want->to_f32();
    const std::vector<float> got = torch_randn_cpu(seed, numel, *dtype);
    ASSERT_EQ(got.size(), expected.size()) << name;
    int64_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(expected[i]);
    EXPECT_EQ(differ, 0) << name << ": " << differ << " of " << numel << " values differ";
    // And it is a different draw from float32's for the same seed.
    if (numel >= 16) {
      EXPECT_NE(got, torch_randn_cpu(seed, numel)) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

TEST(TorchRandnCpu, StatisticsLookNormal) {
  const auto v = torch_randn_cpu(2024, 1 << 16);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
  }
  const double mean = sum / v.size();
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sq / v.size() - mean * mean, 1.0, 0.03);
}

// Runs the reference itself when a Python with torch is on PATH.
TEST(TorchRandnCpu, MatchesLiveTorchWhenAvailable) {
  // HIPQ_TORCH_PYTHON names an interpreter with torch when the one on PATH lacks it.
  const char* env = std::getenv("HIPQ_TORCH_PYTHON");
  const std::string py = env && *env ? env : "python3";
  if (std::system((py + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "no " << py << " with torch";
  FILE* p = ::popen(
      (py + " -c 'import torch,hashlib;g=torch.Generator(\"cpu\").manual_seed(777);"
      "print(hashlib.sha256(torch.randn(3,5,67,generator=g).numpy().tobytes()).hexdigest())' 2>/dev/null")
          .c_str(),
      "r");
  ASSERT_NE(p, nullptr);
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  ::pclose(p);
  if (!got) GTEST_SKIP() << "python3 with torch printed nothing";
  std::string want(buf);
  while (!want.empty() && (want.back() == '\n' || want.back() == '\r')) want.pop_back();
  EXPECT_EQ(sha_of(torch_randn_cpu(777, 3 * 5 * 67)), want);
}

TEST(TorchRandnCuda, MatchesTorchOnTheGpuToFloatRounding) {
  auto text = read_file(data_dir() / "torch_randn_cuda.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  double worst = 0;
  int checked = 0;
  for (const auto& c : j["cases"]) {
    const uint64_t seed = std::stoull(c["seed"].get<std::string>());
    const int64_t numel = c["numel"];
    const auto v = torch_randn_cuda(seed, numel, j["multiprocessors"], j["max_threads_per_sm"]);
    const auto& idx = c["index"];
    const auto& val = c["value"];
    for (size_t i = 0; i < idx.size(); ++i) {
      const double want = val[i].get<double>();
      const double err = std::abs(v[idx[i].get<size_t>()] - want);
      worst = std::max(worst, err);
      // The GPU uses logf and the __sincosf intrinsic (abs. error ~1e-6 on the angle).
      ASSERT_LE(err, 2e-5 * (1 + std::abs(want))) << "seed " << seed << " numel " << numel << " index " << idx[i];
      ++checked;
    }
  }
  EXPECT_GE(checked, 1000);
  std::printf("torch cuda randn: %d values, max abs error %.3g\n", checked, worst);
}

TEST(TorchRandnCuda, PhiloxLayoutIsDeterministicAndNormal) {
  const auto a = torch_randn_cuda(5, 1 << 16);
  const auto b = torch_randn_cuda(5, 1 << 16);
  EXPECT_EQ(a, b);
  double sum = 0, sq = 0;
  for (float x : a) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sq += double(x) * x;
  }
  EXPECT_NEAR(sum / a.size(), 0.0, 0.02);
  EXPECT_NEAR(sq / a.size(), 1.0, 0.03);
  // A prefix of a larger request is not a prefix in general (the layout depends
  // on n), but the first element is thread 0's first sample either way.
  EXPECT_EQ(torch_randn_cuda(5, 7)[0], a[0]);
}

// Successive draws from one CPU generator (tools/reference/make_rng_stream_vectors.py,
// torch 1.13): what a stochastic sampler draws after the initial latent.
TEST(TorchGenerator, CpuStreamBitExactWithTorch) {
  auto text = read_file(data_dir() / "torch_randn_cpu_stream.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  // torch 1.x drew float16 / bfloat16 through another path (hipq follows torch
  // 2.x, TorchRandnCpu.HalfAndBfloat16BitExactWithTorch): from a torch 1.x file
  // those draws only advance the stream, and the f32 draws after them check
  // that they consumed what torch's did (one 32-bit random per value).
  const bool reduced_checked = j["generator"].get<std::string>().rfind("torch 1.", 0) != 0;
  int checked = 0;
  for (const auto& c : j["cases"]) {
    const uint64_t seed = std::stoull(c["seed"].get<std::string>());
    TorchGenerator gen(RngKind::kTorchCpu, seed);
    int k = 0;
    for (const auto& d : c["draws"]) {
      const std::string dt = d["dtype"];
      const kernels::DType dtype = dt == "f16" ? kernels::DType::kF16 : dt == "bf16" ? kernels::DType::kBF16
                                                                                        : kernels::DType::kF32;
      const auto v = gen.randn(d["numel"].get<int64_t>(), dtype);
      if (dtype != kernels::DType::kF32 && !reduced_checked) {
        ++k;
        continue;
      }
      const auto& head = d["head"];
      for (size_t i = 0; i < head.size() && i < v.size(); ++i)
        ASSERT_EQ(bits(v[i]), head[i].get<std::string>()) << "seed " << seed << " draw " << k << " index " << i;
      EXPECT_EQ(sha_of(v), d["sha256"].get<std::string>()) << "seed " << seed << " draw " << k;
      ++k;
      ++checked;
    }
  }
  EXPECT_GE(checked, 17);
}

TEST(TorchGenerator, FirstDrawIsTheFunctionsDraw) {
  TorchGenerator cpu(RngKind::kTorchCpu, 42);
  EXPECT_EQ(cpu.randn(300), torch_randn_cpu(42, 300));
  TorchGenerator half(RngKind::kTorchCpu, 42);
  EXPECT_EQ(half.randn(300, kernels::DType::kF16), torch_randn_cpu(42, 300, kernels::DType::kF16));
  TorchGenerator cuda(RngKind::kTorchCuda, 42);
  EXPECT_EQ(cuda.randn(300), torch_randn_cuda(42, 300));
}

// torch's CUDA generator moves its Philox offset by 4 per round of the
// grid-stride loop; curand_init starts the counter at offset / 4, so a draw at
// offset 4 begins where a longer draw's second round does.
TEST(TorchGenerator, CudaOffsetContinuesTheCounter) {
  // One 256-thread block (1 SM, 256 threads): 1024 values a round.
  EXPECT_EQ(torch_cuda_offset_increment(7, 1, 256), 4u);
  EXPECT_EQ(torch_cuda_offset_increment(1024, 1, 256), 4u);
  EXPECT_EQ(torch_cuda_offset_increment(1025, 1, 256), 8u);
  EXPECT_EQ(torch_cuda_offset_increment(0, 1, 256), 0u);
  const auto two_rounds = torch_randn_cuda(9, 2048, 1, 256, 0);
  const auto second = torch_randn_cuda(9, 1024, 1, 256, 4);
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(second[i], two_rounds[1024 + i]) << i;
  // SDXL's 1024 px latent on an H100/H200 grid: one round.
  EXPECT_EQ(torch_cuda_offset_increment(4 * 128 * 128), 4u);
  TorchGenerator gen(RngKind::kTorchCuda, 9);
  (void)gen.randn(4 * 128 * 128);
  EXPECT_EQ(gen.randn(4 * 128 * 128), torch_randn_cuda(9, 4 * 128 * 128, 132, 2048, 4));
}

TEST(RngKind, Parse) {
  EXPECT_EQ(*parse_rng_kind("torch-cpu"), RngKind::kTorchCpu);
  EXPECT_EQ(*parse_rng_kind("torch-cuda"), RngKind::kTorchCuda);
  EXPECT_EQ(parse_rng_kind("numpy").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rng_kind_name(RngKind::kTorchCuda), "torch-cuda");
}

}  // namespace
}  // namespace hipq::engine
