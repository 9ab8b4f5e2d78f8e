// ConstantForms (kernels/constant_forms.h) over the cpu backend's pool: which
// blocks count as constant, forms told apart by shape, and what releasing a
// block does to its forms. The hip backend's use of it (a conv served from a
// kept form, a released block not served a stale one) is gpu_smoke_test's.
#include "kernels/constant_forms.h"

#include <gtest/gtest.h>

#include "kernels/backend.h"

namespace hipq::kernels {
namespace {

class ConstantFormsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto b = make_backend("cpu", 0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    be_ = std::move(b).value();
  }
  Buffer block(size_t bytes) {
    auto b = be_->allocate(bytes);
    EXPECT_TRUE(b.ok());
    return std::move(b).value();
  }
  std::unique_ptr<Backend> be_;
};

TEST_F(ConstantFormsTest, OnlyTheStartOfAHeldBlockWithinItsBytesIsConstant) {
  ConstantForms f;
  Buffer w = block(256), other = block(256);
  f.hold(w.data(), 256);
  EXPECT_TRUE(f.is_constant(w.data(), 256));
  EXPECT_TRUE(f.is_constant(w.data(), 100));
  EXPECT_FALSE(f.is_constant(w.data(), 257));
  EXPECT_FALSE(f.is_constant(static_cast<char*>(w.data()) + 16, 16));  // a view into the block
  EXPECT_FALSE(f.is_constant(other.data(), 16));
}

TEST_F(ConstantFormsTest, AFormIsFoundOnlyForTheShapeItWasMadeFrom) {
  ConstantForms f;
  Buffer w = block(1024);
  f.hold(w.data(), 1024);
  Buffer d = block(1024);
  const void* at = d.data();
  const ConstantForms::Shape shape{8, 8, 2, 2}, other{8, 4, 2, 4};
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, shape), nullptr);
  f.put(w.data(), ConstantForms::kTapsLast16, shape, std::move(d));
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, shape), at);
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, other), nullptr);
}

TEST_F(ConstantFormsTest, DroppingABlockHandsBackItsFormsAndForgetsIt) {
  ConstantForms f;
  Buffer w = block(512), kept = block(512);
  f.hold(w.data(), 512);
  f.hold(kept.data(), 512);
  const ConstantForms::Shape shape{4, 4, 4, 2};
  f.put(w.data(), ConstantForms::kTapsLast16, shape, block(512));
  f.put(kept.data(), ConstantForms::kTapsLast16, shape, block(512));
  const int64_t in_use = be_->bytes_in_use();
  {
    std::vector<Buffer> forms = f.drop(w.data());
    ASSERT_EQ(forms.size(), 1u);
  }
  EXPECT_LT(be_->bytes_in_use(), in_use);  // the form went back to the pool
  EXPECT_FALSE(f.is_constant(w.data(), 512));
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, shape), nullptr);
  EXPECT_TRUE(f.drop(w.data()).empty());  // a second release of the address: nothing held
  EXPECT_NE(f.find(kept.data(), ConstantForms::kTapsLast16, shape), nullptr);  // other blocks keep theirs
  EXPECT_EQ(f.drop_all().size(), 1u);
  EXPECT_FALSE(f.is_constant(kept.data(), 512));
}

TEST_F(ConstantFormsTest, ARewrittenBlockLosesItsFormsAndStaysConstant) {
  ConstantForms f;
  Buffer w = block(512), other = block(512);
  f.hold(w.data(), 512);
  f.hold(other.data(), 512);
  const ConstantForms::Shape shape{4, 4, 4, 2};
  f.put(w.data(), ConstantForms::kTapsLast16, shape, block(512));
  f.put(other.data(), ConstantForms::kTapsLast16, shape, block(512));
  const int64_t in_use = be_->bytes_in_use();
  EXPECT_EQ(f.forget(w.data()).size(), 1u);  // handed back, destroyed here
  EXPECT_LT(be_->bytes_in_use(), in_use);
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, shape), nullptr);  // no stale form
  EXPECT_TRUE(f.is_constant(w.data(), 512));
  EXPECT_NE(f.find(other.data(), ConstantForms::kTapsLast16, shape), nullptr);
  // A form made again from the new bytes is kept.
  f.put(w.data(), ConstantForms::kTapsLast16, shape, block(512));
  EXPECT_NE(f.find(w.data(), ConstantForms::kTapsLast16, shape), nullptr);
  // Between jobs every form goes, the blocks stay held (their forms are kept again).
  EXPECT_EQ(f.drop_forms().size(), 2u);
  EXPECT_EQ(f.find(other.data(), ConstantForms::kTapsLast16, shape), nullptr);
  EXPECT_TRUE(f.is_constant(w.data(), 512));
  EXPECT_TRUE(f.is_constant(other.data(), 512));
}

TEST_F(ConstantFormsTest, AFormOfABlockNotHeldIsNotKept) {
  ConstantForms f;
  Buffer w = block(128);
  const int64_t in_use = be_->bytes_in_use();
  f.put(w.data(), ConstantForms::kTapsLast16, {1, 1, 1, 1}, block(128));
  EXPECT_EQ(be_->bytes_in_use(), in_use);
  EXPECT_EQ(f.find(w.data(), ConstantForms::kTapsLast16, {1, 1, 1, 1}), nullptr);
}

}  // namespace
}  // namespace hipq::kernels
