// ForwardingBackend: the base of the tests' backend doubles. Every Backend
// call goes to a real backend (`inner_`, the cpu backend by default); a
// double derives from it and overrides only what it changes (an injected
// fault, a device as a driver would report it). A block allocated here is the
// inner backend's own Buffer: it goes back to the inner backend directly, so a
// double that must see releases re-owns its blocks (allocate + release).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>

#include "kernels/backend.h"

namespace hipq::kernels::doubles {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  ForwardingBackend() : ForwardingBackend(std::move(*make_backend("cpu"))) {}

  const BackendInfo& info() const override { return inner_->info(); }
  Result<Buffer> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* data, size_t bytes) override { inner_->release(data, bytes); }
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
  void drop_constant_forms() override { inner_->drop_constant_forms(); }
  void hold_constant(const void* data, size_t bytes) override { inner_->hold_constant(data, bytes); }
  void constant_changed(const void* data) override { inner_->constant_changed(data); }
  Status begin_capture() override { return inner_->begin_capture(); }
  Result<int> end_capture() override { return inner_->end_capture(); }
  Status replay_graph(int id) override { return inner_->replay_graph(id); }
  void destroy_graph(int id) override { inner_->destroy_graph(id); }
  Status matmul(const Tensor& a, const Tensor& b, Tensor& o, const MatmulOptions& m) override {
    return inner_->matmul(a, b, o, m);
  }
  Status quantize_fp8_rows(const Tensor& x, Tensor& c, Tensor& s) override { return inner_->quantize_fp8_rows(x, c, s); }
  Status layer_norm_fp8(const Tensor& x, const Tensor* g, const Tensor* b, float e, Tensor& c, Tensor& s) override {
    return inner_->layer_norm_fp8(x, g, b, e, c, s);
  }
  Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& o, const MatmulOptions& m) override {
    return inner_->matmul_fp8(a, b, o, m);
  }
  Status lora_merge(const Tensor& base, std::span<const LoraFactors> d, Tensor& out) override {
    return inner_->lora_merge(base, d, out);
  }
  Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) override {
    return inner_->conv2d(x, w, y, o);
  }
  Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o) override {
    return inner_->conv2d_fp8(x, w, y, o);
  }
  Status group_norm(const Tensor& x, const Tensor& g, const Tensor& b, Tensor& y, const GroupNormOptions& o) override {
    return inner_->group_norm(x, g, b, y, o);
  }
  Status layer_norm(const Tensor& x, const Tensor* g, const Tensor* b, Tensor& y, float e) override {
    return inner_->layer_norm(x, g, b, y, e);
  }
  Status softmax(const Tensor& x, Tensor& y, float s, bool c) override { return inner_->softmax(x, y, s, c); }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o, const AttentionOptions& a) override {
    return inner_->attention(q, k, v, o, a);
  }
  Status unary(UnaryOp op, const Tensor& x, Tensor& y) override { return inner_->unary(op, x, y); }
  Status geglu(const Tensor& x, Tensor& y) override { return inner_->geglu(x, y); }
  Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override {
    return inner_->binary(op, a, b, y);
  }
  Status scale(const Tensor& x, Tensor& y, float a, float b) override { return inner_->scale(x, y, a, b); }
  Status concat(std::span<const Tensor> xs, int d, Tensor& y) override { return inner_->concat(xs, d, y); }
  Status upsample_nearest2x(const Tensor& x, Tensor& y) override { return inner_->upsample_nearest2x(x, y); }
  Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) override {
    return inner_->timestep_embedding(t, y, o);
  }
  Status embedding(const Tensor& i, const Tensor& t, Tensor& y) override { return inner_->embedding(i, t, y); }
  Status copy(const Tensor& s, Tensor& d) override { return inner_->copy(s, d); }
  Status fill(Tensor& y, float v) override { return inner_->fill(y, v); }
  Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) override { return inner_->parity_sums(a, b); }

 protected:
  std::unique_ptr<Backend> inner_;
};

}  // namespace hipq::kernels::doubles
