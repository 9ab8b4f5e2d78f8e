// The harness must catch what it claims to catch: a test double backend
// (FaultyBackend, wrapping the real cpu backend) breaks one op in one way and
// run_case has to report it.
#include "parity/parity_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "parity/parity_case.h"
#include "tests/kernels/forwarding_backend.h"

namespace hipq::kernels::parity {
namespace {

enum class Fault { kNone, kWritePastEnd, kWriteBeforeStart, kWrongValue, kSkipLastElement, kModifyInput, kFail };

// Forwards everything to a cpu backend and injects `fault` into unary ops.
class FaultyBackend final : public doubles::ForwardingBackend {
 public:
  explicit FaultyBackend(Fault f) : fault_(f) {}
  Result<Buffer> allocate(size_t bytes) override {
    HIPQ_ASSIGN_OR_RETURN(Buffer b, inner_->allocate(bytes));
    // Re-own the block so ~Buffer calls our release.
    void* p = b.data();
    held_.push_back(std::move(b));
    return Buffer(this, p, bytes);
  }
  void release(void*, size_t) override {}

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
  // The run's own filter is put back after: the parity cases that run after
  // this test in the same binary still honour it.
  const char* given = std::getenv("HIPQ_PARITY_FILTER");
  const std::optional<std::string> saved = given ? std::optional<std::string>(given) : std::nullopt;
  setenv("HIPQ_PARITY_FILTER", "conv2d_f16,softmax", 1);
  EXPECT_TRUE(case_selected("conv2d_f16_2x3"));
  EXPECT_TRUE(case_selected("softmax_bf16_3x5"));
  EXPECT_FALSE(case_selected("conv2d_f32_2x3"));
  unsetenv("HIPQ_PARITY_FILTER");
  EXPECT_TRUE(case_selected("anything"));
  if (saved) setenv("HIPQ_PARITY_FILTER", saved->c_str(), 1);
}

}  // namespace
}  // namespace hipq::kernels::parity
