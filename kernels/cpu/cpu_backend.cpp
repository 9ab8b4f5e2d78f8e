#include "kernels/cpu/cpu_backend.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/host_pool.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    info_.name = "cpu";
    info_.device_name = "host CPU";
    struct utsname u {};
    info_.arch = uname(&u) == 0 ? u.machine : "unknown";
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info_.memory_bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
    info_.multiprocessors = cpu::ThreadPool::global().threads();
    info_.runtime_version = "cpu reference, " + std::to_string(info_.multiprocessors) + " threads";
    info_.warp_size = 1;
    info_.fp32_products = "fp32";
    info_.f16_products = "fp32";
    info_.fp8_products = "e4m3 emulated exactly, fp32 accumulate";
    info_.fp32_conv_reads_upsampled = true;  // conv2d.cpp reads x at (iy / 2, ix / 2)
    info_.f16_conv_reads_upsampled = true;
  }

  const BackendInfo& info() const override { return info_; }

  Result<Buffer> allocate(size_t bytes) override {
    HIPQ_ASSIGN_OR_RETURN(void* p, pool_.allocate(bytes));
    return Buffer(this, p, bytes);
  }
  void release(void* data, size_t bytes) override { pool_.release(data, bytes); }

  Status copy_to_device(const void* host, void* device, size_t bytes) override {
    return copy_bytes("copy_to_device", host, device, bytes);
  }
  Status copy_to_host(const void* device, void* host, size_t bytes) override {
    return copy_bytes("copy_to_host", device, host, bytes);
  }
  Status copy_device(const void* src, void* dst, size_t bytes) override {
    return copy_bytes("copy_device", src, dst, bytes);
  }
  Status memset_zero(void* device, size_t bytes) override {
    if (bytes == 0) return Status::Ok();
    if (device == nullptr) return Status::InvalidArgument("memset_zero: null pointer for " + std::to_string(bytes) + " bytes");
    std::memset(device, 0, bytes);
    return Status::Ok();
  }
  // Every op has finished when it returns.
  Status synchronize() override { return Status::Ok(); }

  Result<int> record_event() override {
    events_.push_back(std::chrono::steady_clock::now());
    return static_cast<int>(events_.size() - 1);
  }
  Result<double> elapsed_ms(int start_event, int end_event) override {
    const int n = static_cast<int>(events_.size());
    if (start_event < 0 || start_event >= n || end_event < 0 || end_event >= n)
      return Status::InvalidArgument("elapsed_ms: event ids " + std::to_string(start_event) + ", " +
                                     std::to_string(end_event) + " were not recorded (" + std::to_string(n) +
                                     " events so far)");
    return std::chrono::duration<double, std::milli>(events_[static_cast<size_t>(end_event)] -
                                                     events_[static_cast<size_t>(start_event)])
        .count();
  }
  int64_t bytes_in_use() const override { return pool_.bytes_in_use(); }
  int64_t peak_bytes() const override { return pool_.peak_bytes(); }
  void reset_peak() override { pool_.reset_peak(); }
  MemoryStats memory_stats() const override {
    MemoryStats m;
    m.in_use = pool_.bytes_in_use();
    m.cached = pool_.bytes_cached();
    m.peak = pool_.peak_bytes();
    m.limit = pool_.limit();
    return m;
  }
  size_t block_bytes(size_t bytes) const override { return cpu::HostPool::size_class(bytes); }
  Status set_memory_limit(int64_t bytes) override {
    if (bytes < 0) return Status::InvalidArgument("memory limit must be >= 0 bytes (got " + std::to_string(bytes) + ")");
    pool_.set_limit(bytes);
    return Status::Ok();
  }
  Status trim_cache() override {
    pool_.trim();
    return Status::Ok();
  }

  Status matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o) override {
    return cpu::matmul(a, b, out, o);
  }
  Status lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out) override {
    return cpu::lora_merge(base, deltas, out);
  }
  Status quantize_fp8_rows(const Tensor& x, Tensor& codes, Tensor& scales) override {
    return cpu::quantize_fp8_rows(x, codes, scales);
  }
  Status layer_norm_fp8(const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps, Tensor& codes,
                        Tensor& scales) override {
    return cpu::layer_norm_fp8(x, gamma, beta, eps, codes, scales);
  }
  Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o) override {
    return cpu::matmul_fp8(a, b, out, o);
  }
  Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o) override {
    return cpu::conv2d_fp8(x, w, y, o);
  }
  Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) override {
    return cpu::conv2d(x, w, y, o);
  }
  Status group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                    const GroupNormOptions& o) override {
    return cpu::group_norm(x, gamma, beta, y, o);
  }
  Status layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y, float eps) override {
    return cpu::layer_norm(x, gamma, beta, y, eps);
  }
  Status softmax(const Tensor& x, Tensor& y, float scale, bool causal) override {
    return cpu::softmax(x, y, scale, causal);
  }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                   const AttentionOptions& o) override {
    return cpu::attention(q, k, v, out, o);
  }
  Status unary(UnaryOp op, const Tensor& x, Tensor& y) override { return cpu::unary(op, x, y); }
  Status geglu(const Tensor& x, Tensor& y) override { return cpu::geglu(x, y); }
  Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override {
    return cpu::binary(op, a, b, y);
  }
  Status scale(const Tensor& x, Tensor& y, float alpha, float beta) override {
    return cpu::scale(x, y, alpha, beta);
  }
  Status concat(std::span<const Tensor> xs, int dim, Tensor& y) override { return cpu::concat(xs, dim, y); }
  Status upsample_nearest2x(const Tensor& x, Tensor& y) override { return cpu::upsample_nearest2x(x, y); }
  Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) override {
    return cpu::timestep_embedding(t, y, o);
  }
  Status embedding(const Tensor& ids, const Tensor& table, Tensor& y) override {
    return cpu::embedding(ids, table, y);
  }
  Status copy(const Tensor& src, Tensor& dst) override { return cpu::copy(src, dst); }
  Status fill(Tensor& y, float value) override { return cpu::fill(y, value); }
  Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) override { return cpu::parity_sums(a, b); }

 private:
  static Status copy_bytes(const char* what, const void* src, void* dst, size_t bytes) {
    if (bytes == 0) return Status::Ok();
    if (src == nullptr || dst == nullptr)
      return Status::InvalidArgument(std::string(what) + ": null pointer for " + std::to_string(bytes) + " bytes");
    std::memmove(dst, src, bytes);
    return Status::Ok();
  }

  BackendInfo info_;
  cpu::HostPool pool_;
  std::vector<std::chrono::steady_clock::time_point> events_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cpu_backend() {
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>());
}

}  // namespace hipq::kernels
