// The harness must catch what it claims to catch: a test double backend
// (FaultyBackend, wrapping the real cpu backend) breaks one op in one way and
// run_case has to report it.
#include "parity/parity_runner.h"

#include <gtest/gtest.h>

#include <cstring>

#include "parity/parity_case.h"

namespace hipq::kernels::parity {
namespace {

enum class Fault { kNone, kWritePastEnd, kWriteBeforeStart, kWrongValue, kSkipLastElement, kModifyInput, kFail };

// Forwards everything to a cpu backend and injects `fault` into unary ops.
class FaultyBackend final : public Backend {
 public:
  explicit FaultyBackend(Fault f) : inner_(std::move(*make_backend("cpu"))), fault_(f) {}
  const BackendInfo& info() const override { return inner_->info(); }
  Result<Buffer> allocate(size_t bytes) override {
    HIPQ_ASSIGN_OR_RETURN(Buffer b, inner_->allocate(bytes));
    // Re-own the block so ~Buffer calls our release.
    void* p = b.data();
    held_.push_back(std::move(b));
    return Buffer(this, p, bytes);
  }
  void release(void*, size_t) override {}
  Status copy_to_device(const void* h, void* d, size_t n) override { return inner_->copy_to_device(h, d, n); }
  Status copy_to_host(const void* d, void* h, size_t n) override { return inner_->copy_to_host(d, h, n); }
  Status copy_device(const void* s, void* d, size_t n) override { return inner_->copy_device(s, d, n); }
  Status memset_zero(void* d, size_t n) override { return inner_->memset_zero(d, n); }
  Status synchronize() override { return inner_->synchronize(); }
  Result<int> record_event() override { return inner_->record_event(); }
  Result<double> elapsed_ms(int a, int b) override { return inner_->elapsed_ms(a, b); }
  int64_t bytes_in_use() const override { return inner_->bytes_in_use(); }
  int64_t peak_bytes() const override { return inner_->peak_bytes(); }
  void reset_peak() override { inner_->reset_peak(); }
  MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  size_t block_bytes(size_t bytes) const override { return inner_->block_bytes(bytes); }
  Status set_memory_limit(int64_t bytes) override { return inner_->set_memory_limit(bytes); }
  Status trim_cache() override { return inner_->trim_cache(); }
  Status matmul(const Tensor& a, const Tensor& b, Tensor& o, const MatmulOptions& m) override { return inner_->matmul(a, b, o, m); }
  Status quantize_fp8_rows(const Tensor& x, Tensor& c, Tensor& s) override { return inner_->quantize_fp8_rows(x, c, s); }
  Status lora_merge(const Tensor& base, std::span<const LoraFactors> d, Tensor& out) override {
    return inner_->lora_merge(base, d, out);
  }
  Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& o, const MatmulOptions& m) override {
    return inner_->matmul_fp8(a, b, o, m);
  }
  Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) override { return inner_->conv2d(x, w, y, o); }
  Status group_norm(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& y, const GroupNormOptions& o) override { return inner_->group_norm(x, g, b, y, o); }
  Status layer_norm(const Tensor& x, const Tensor* g, const Tensor* b, Tensor& y, float e) override { return inner_->layer_norm(x, g, b, y, e); }
  Status softmax(const Tensor& x, Tensor& y, float s, bool c) override { return inner_->softmax(x, y, s, c); }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, const AttentionOptions& a) override { return inner_->attention(q, k, v, o, a); }
  Status geglu(const Tensor& x, Tensor& y) override { return inner_->geglu(x, y); }
  Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override { return inner_->binary(op, a, b, y); }
  Status scale(const Tensor& x, Tensor& y, float a, float b) override { return inner_->scale(x, y, a, b); }
  Status concat(std::span<const Tensor> xs, int d, Tensor& y) override { return inner_->concat(xs, d, y); }
  Status upsample_nearest2x(const Tensor& x, Tensor& y) override { return inner_->upsample_nearest2x(x, y); }
  Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) override { return inner_->timestep_embedding(t, y, o); }
  Status embedding(const Tensor& i, const Tensor& t, Tensor& y) override { return inner_->embedding(i, t, y); }
  Status copy(const Tensor& s, Tensor& d) override { return inner_->copy(s, d); }
  Status fill(Tensor& y, float v) override { return inner_->fill(y, v); }
  Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) override { return inner_->parity_sums(a, b); }

  Status unary(UnaryOp op, const Tensor& x, Tensor& y) override {
    if (fault_ == Fault::kFail) return Status::Internal("injected failure");
    HIPQ_RETURN_IF_ERROR(inner_->unary(op, x, y));
    auto* bytes = static_cast<uint8_t*>(y.data);
    const size_t es = dtype_size(y.dtype);
    switch (fault_) {
      case Fault::kWritePastEnd: std::memset(bytes + y.nbytes(), 0, es); break;
      case Fault::kWriteBeforeStart: std::memset(bytes - es, 0, es); break;
      case Fault::kWrongValue: store_from_f32(y.data, y.dtype, 3, load_as_f32(y.data, y.dtype, 3) * 1.5f + 0.5f); break;
      case Fault::kSkipLastElement: std::memset(bytes + y.nbytes() - es, 0xFF, es); break;
      case Fault::kModifyInput: std::memset(x.data, 0x11, es); break;
      default: break;
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Backend> inner_;
  Fault fault_;
  std::vector<Buffer> held_;
};

const ParityCase& unary_case(DType dt) {
  static const std::vector<ParityCase> cases = parity_cases(false);
  const std::string want = std::string("unary_") + std::string(dtype_name(dt)) + "_gelu_37x29";
  for (const ParityCase& c : cases)
    if (c.name == want) return c;
  ADD_FAILURE() << "case " << want << " not in the table";
  return cases.front();
}

struct FaultCase {
  Fault fault;
  const char* expect;  // substring of the failure
};

class ParityRunnerFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(ParityRunnerFaultTest, InjectedFaultIsReported) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    FaultyBackend be(GetParam().fault);
    ParityReport r = run_case(be, unary_case(dt));
    EXPECT_FALSE(r.ok) << dtype_name(dt);
    EXPECT_NE(r.failure.find(GetParam().expect), std::string::npos) << r.failure;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Faults, ParityRunnerFaultTest,
    ::testing::Values(FaultCase{Fault::kWritePastEnd, "guard region after"},
                      FaultCase{Fault::kWriteBeforeStart, "guard region before"},
                      FaultCase{Fault::kWrongValue, "outside abs+rel bound"},
                      FaultCase{Fault::kSkipLastElement, "NaN/Inf outputs"},
                      FaultCase{Fault::kModifyInput, "was modified"},
                      FaultCase{Fault::kFail, "injected failure"}));

TEST(ParityRunner, HonestWrapperPasses) {
  FaultyBackend be(Fault::kNone);
  ParityReport r = run_case(be, unary_case(DType::kF16));
  EXPECT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.checked, 37 * 29);
}

TEST(ParityRunner, InputsAreDeterministicAndRoundedToTheDtype) {
  const ParityCase& c = unary_case(DType::kBF16);
  auto a = make_input_values(c, 0), b = make_input_values(c, 0);
  ASSERT_EQ(a, b);
  for (float v : a) EXPECT_EQ(v, bf16_to_f32(f32_to_bf16(v)));
}

TEST(ParityRunner, FilterSelectsBySubstring) {
  setenv("HIPQ_PARITY_FILTER", "conv2d_f16,softmax", 1);
  EXPECT_TRUE(case_selected("conv2d_f16_2x3"));
  EXPECT_TRUE(case_selected("softmax_bf16_3x5"));
  EXPECT_FALSE(case_selected("conv2d_f32_2x3"));
  unsetenv("HIPQ_PARITY_FILTER");
  EXPECT_TRUE(case_selected("anything"));
}

}  // namespace
}  // namespace hipq::kernels::parity
