// HipBackend: device, stream, pool allocator, events and BackendInfo for the
// hip backend; ops forward to kernels/hip/<op>.hip.
//
// Memory: a caching pool. Requests are rounded up to a size class (256 B
// granularity below 1 MiB, then 1/8 steps of the power of two) and freed
// blocks wait in a per-class free list for reuse, so steady-state model steps
// make no hipMalloc calls. Reuse is safe without events because every op runs
// on the backend's single stream (stream order). On out-of-memory the cached
// blocks are returned to the device and the allocation is retried once; if
// it still fails, allocate() returns ResourceExhausted.
// Graphs: while a capture is open, every block allocated or released joins
// the capture's reservation; released reserved blocks wait in their graph's
// own free lists (reused by that capture only) until destroy_graph() hands
// them back to the pool, so nothing allocated between replays aliases the
// memory the graph writes.
// Timing: record_event() records a device event on the stream; ids index a
// ring of events, so an id is valid for the next kEventRing recordings.
// Uploads: a copy_to_device of kStagedUploadMin bytes or more outside a
// capture goes through two pinned buffers of kStagedChunk bytes: the host
// threads of cpu::ThreadPool copy chunk i + 1 out of the (pageable, often
// memory-mapped) source while the copy engine moves chunk i, so a weight
// upload runs at the rate of a parallel memcpy rather than the driver's
// single-threaded pageable path. When the pinned buffers cannot be had the
// copy takes the plain path.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/f16_math.h"
#include "kernels/fp32_math.h"
#include "kernels/hip/gemm_route.h"
#include "kernels/hip/hip_backend.h"
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kEventRing = 4096;

// The device this host thread made current through a HipBackend (-1: none yet).
thread_local int t_current_device = -1;

size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + 255) & ~size_t{255};
  size_t p = size_t{1} << 20;
  while (p < bytes) p <<= 1;
  const size_t step = p / 16;  // p/2 .. p in 8 steps of p/16
  return (bytes + step - 1) / step * step;
}

std::string version_string(int v, bool nvidia) {
  if (nvidia) return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  return std::to_string(v / 10000000) + "." + std::to_string((v / 100000) % 100) + "." + std::to_string(v % 100000);
}

class HipBackend final : public Backend {
 public:
  static Result<std::unique_ptr<Backend>> create(int device) {
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count == 0)
      return Status::Unavailable(std::string("hip backend: no device (") +
                                 (e != hipSuccess ? hipGetErrorString(e) : "0 devices visible") + ")");
    if (device < 0 || device >= count)
      return Status::InvalidArgument("hip backend: device index " + std::to_string(device) + " out of range (" +
                                     std::to_string(count) + " visible)");
    auto b = std::unique_ptr<HipBackend>(new HipBackend(device));
    HIPQ_RETURN_IF_ERROR(b->init());
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~HipBackend() override {
    use_device();
    forms_.drop_all();  // their blocks return to free_, freed below
    if (stream_) {
      (void)hipStreamSynchronize(stream_);
      for (auto& [id, exec] : graph_exec_)
        if (exec) (void)hipGraphExecDestroy(exec);
      for (auto& [key, blocks] : reserved_free_)
        for (void* p : blocks) (void)hipFree(p);
      for (auto& [cls, blocks] : free_)
        for (void* p : blocks) (void)hipFree(p);
      for (hipEvent_t ev : events_)
        if (ev) (void)hipEventDestroy(ev);
      for (StagingSlot& slot : staging_) {
        if (slot.done) (void)hipEventDestroy(slot.done);
        if (slot.host) (void)hipHostFree(slot.host);
      }
      (void)hipStreamDestroy(stream_);
    }
  }

  const BackendInfo& info() const override { return info_; }

  Result<Buffer> allocate(size_t bytes) override {
    use_device();
    const size_t cls = size_class(bytes);
    void* p = nullptr;
    auto take = [&](std::vector<void*>& list, int64_t& counted) {
      if (list.empty()) return false;
      p = list.back();
      list.pop_back();
      counted -= static_cast<int64_t>(cls);
      return true;
    };
    if (capturing_ >= 0 && take(reserved_free_[{capturing_, cls}], reserved_cached_)) {
    } else if (take(free_[cls], cached_bytes_)) {
    } else {
      // Big blocks of other classes are not hoarded: the VAE's full-size
      // activations come in several sizes once per job, and keeping each
      // size's freed blocks would hold their sum (3.7 GiB more than in use at
      // SDXL's 1024 px fp32 decode, as the driver saw it).
      if (cls >= kBigBlock && capturing_ < 0) HIPQ_RETURN_IF_ERROR(release_cached_big());
      HIPQ_RETURN_IF_ERROR(make_room(cls, bytes));
      hipError_t e = hipMalloc(&p, cls);
      if (e == hipErrorOutOfMemory && capturing_ < 0) {  // (no synchronising inside a capture)
        (void)hipGetLastError();
        HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
        release_cached();
        e = hipMalloc(&p, cls);
      }
      if (e != hipSuccess) {
        (void)hipGetLastError();
        return hip_error_status(e, "hipMalloc", __func__, __FILE__, __LINE__)
            .WithContext("allocating " + std::to_string(bytes) + " bytes (" + std::to_string(in_use_) +
                         " in use)");
      }
    }
    in_use_ += static_cast<int64_t>(cls);
    peak_ = std::max(peak_, in_use_);
    if (capturing_ >= 0) reserved_by_[p] = capturing_;
    return Buffer(this, p, bytes);
  }

  void release(void* data, size_t bytes) override {
    use_device();
    std::vector<Buffer> forms = forms_.drop(data);  // destroyed on return, after this block is back
    const size_t cls = size_class(bytes);
    if (capturing_ >= 0) reserved_by_[data] = capturing_;
    auto owner = reserved_by_.find(data);
    if (owner != reserved_by_.end()) {
      reserved_free_[{owner->second, cls}].push_back(data);
      reserved_cached_ += static_cast<int64_t>(cls);
    } else {
      free_[cls].push_back(data);
      cached_bytes_ += static_cast<int64_t>(cls);
    }
    in_use_ -= static_cast<int64_t>(cls);
  }

  MemoryStats memory_stats() const override {
    use_device();
    MemoryStats m;
    m.in_use = in_use_;
    m.cached = cached_bytes_ + reserved_cached_;
    m.peak = peak_;
    m.limit = limit_;
    size_t free_b = 0, total_b = 0;
    if (hipMemGetInfo(&free_b, &total_b) == hipSuccess) {
      m.device_free = static_cast<int64_t>(free_b);
      m.device_total = static_cast<int64_t>(total_b);
    } else {
      (void)hipGetLastError();
      m.device_total = info_.memory_bytes;
    }
    return m;
  }
  size_t block_bytes(size_t bytes) const override { return size_class(bytes); }
  Status set_memory_limit(int64_t bytes) override {
    if (bytes < 0) return Status::InvalidArgument("memory limit must be >= 0 bytes (got " + std::to_string(bytes) + ")");
    limit_ = bytes;
    return Status::Ok();
  }
  Status trim_cache() override {
    use_device();
    if (capturing_ >= 0) return Status::FailedPrecondition("hip backend: trim_cache while a graph capture is open");
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
    release_cached();
    return Status::Ok();
  }
  // The forms go; the weights stay held, so the next job's first step keeps
  // the forms it makes again.
  void drop_constant_forms() override { forms_.drop_forms(); }

  void hold_constant(const void* data, size_t bytes) override { forms_.hold(data, bytes); }
  void constant_changed(const void* data) override { forms_.forget(data); }

  Status begin_capture() override {
    use_device();
    if (capturing_ >= 0) return Status::FailedPrecondition("hip backend: a graph capture is already open");
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamBeginCapture(stream_, hipStreamCaptureModeRelaxed));
    capturing_ = next_graph_++;
    graph_exec_[capturing_] = nullptr;
    return Status::Ok();
  }
  Result<int> end_capture() override {
    use_device();
    if (capturing_ < 0) return Status::FailedPrecondition("hip backend: end_capture without begin_capture");
    const int id = capturing_;
    capturing_ = -1;
    hipGraph_t graph = nullptr;
    hipError_t e = hipStreamEndCapture(stream_, &graph);
    if (e == hipSuccess) {
      e = hipGraphInstantiate(&graph_exec_[id], graph, nullptr, nullptr, 0);
      (void)hipGraphDestroy(graph);
    }
    if (e != hipSuccess) {
      (void)hipGetLastError();
      destroy_graph(id);
      return hip_error_status(e, "hipStreamEndCapture/hipGraphInstantiate", __func__, __FILE__, __LINE__);
    }
    return id;
  }
  Status replay_graph(int id) override {
    use_device();
    auto it = graph_exec_.find(id);
    if (it == graph_exec_.end() || !it->second)
      return Status::InvalidArgument("hip backend: no graph " + std::to_string(id));
    HIPQ_HIP_RETURN_IF_ERROR(hipGraphLaunch(it->second, stream_));
    return Status::Ok();
  }
  void destroy_graph(int id) override {
    use_device();
    auto it = graph_exec_.find(id);
    if (it == graph_exec_.end()) return;
    (void)hipStreamSynchronize(stream_);  // a replay may still be running
    if (it->second) (void)hipGraphExecDestroy(it->second);
    graph_exec_.erase(it);
    for (auto r = reserved_free_.begin(); r != reserved_free_.end();) {
      if (r->first.first != id) {
        ++r;
        continue;
      }
      std::vector<void*>& to = free_[r->first.second];
      to.insert(to.end(), r->second.begin(), r->second.end());
      const int64_t moved = static_cast<int64_t>(r->first.second * r->second.size());
      reserved_cached_ -= moved;
      cached_bytes_ += moved;
      r = reserved_free_.erase(r);
    }
    for (auto r = reserved_by_.begin(); r != reserved_by_.end();) r = r->second == id ? reserved_by_.erase(r) : ++r;
  }

  Status copy_to_device(const void* host, void* device, size_t bytes) override {
    use_device();
    if (bytes >= kStagedUploadMin && capturing_ < 0 && staging_ready()) return staged_upload(host, device, bytes);
    HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(device, host, bytes, hipMemcpyHostToDevice, stream_));
    return Status::Ok();
  }
  Status copy_to_host(const void* device, void* host, size_t bytes) override {
    use_device();
    HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(host, device, bytes, hipMemcpyDeviceToHost, stream_));
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
    return Status::Ok();
  }
  Status copy_device(const void* src, void* dst, size_t bytes) override {
    use_device();
    HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream_));
    return Status::Ok();
  }
  Status memset_zero(void* device, size_t bytes) override {
    use_device();
    HIPQ_HIP_RETURN_IF_ERROR(hipMemsetAsync(device, 0, bytes, stream_));
    return Status::Ok();
  }
  Status synchronize() override {
    use_device();
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
    return Status::Ok();
  }

  Result<int> record_event() override {
    use_device();
    const int id = next_event_++;
    hipEvent_t& ev = events_[static_cast<size_t>(id % kEventRing)];
    if (!ev) HIPQ_HIP_RETURN_IF_ERROR(hipEventCreate(&ev));
    HIPQ_HIP_RETURN_IF_ERROR(hipEventRecord(ev, stream_));
    return id;
  }

  Result<double> elapsed_ms(int start_event, int end_event) override {
    use_device();
    for (int id : {start_event, end_event}) {
      if (id < 0 || id >= next_event_ || id < next_event_ - kEventRing)
        return Status::InvalidArgument("elapsed_ms: event id " + std::to_string(id) +
                                       " is not a live event (recorded ids: " +
                                       std::to_string(std::max(0, next_event_ - kEventRing)) + ".." +
                                       std::to_string(next_event_ - 1) + ")");
    }
    hipEvent_t a = events_[static_cast<size_t>(start_event % kEventRing)];
    hipEvent_t b = events_[static_cast<size_t>(end_event % kEventRing)];
    HIPQ_HIP_RETURN_IF_ERROR(hipEventSynchronize(b));
    float ms = 0;
    HIPQ_HIP_RETURN_IF_ERROR(hipEventElapsedTime(&ms, a, b));
    return static_cast<double>(ms);
  }

  int64_t bytes_in_use() const override { return in_use_; }
  int64_t peak_bytes() const override { return peak_; }
  void reset_peak() override { peak_ = in_use_; }

  Status matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o) override {
    use_device();
    return hip_matmul(ctx_, a, b, out, o);
  }
  Status lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out) override {
    use_device();
    return hip_lora_merge(ctx_, base, deltas, out);
  }
  Status quantize_fp8_rows(const Tensor& x, Tensor& codes, Tensor& scales) override {
    use_device();
    return hip_quantize_fp8_rows(ctx_, x, codes, scales);
  }
  Status layer_norm_fp8(const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps, Tensor& codes,
                        Tensor& scales) override {
    use_device();
    return hip_layer_norm_fp8(ctx_, x, gamma, beta, eps, codes, scales);
  }
  Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o) override {
    use_device();
    return hip_matmul_fp8(ctx_, a, b, out, o);
  }
  Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) override {
    use_device();
    return hip_conv2d(ctx_, x, w, y, o);
  }
  Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o) override {
    use_device();
    return hip_conv2d_fp8(ctx_, x, w, y, o);
  }
  Status group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                    const GroupNormOptions& o) override {
    use_device();
    return hip_group_norm(ctx_, x, gamma, beta, y, o);
  }
  Status layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y, float eps) override {
    use_device();
    return hip_layer_norm(ctx_, x, gamma, beta, y, eps);
  }
  Status softmax(const Tensor& x, Tensor& y, float scale, bool causal) override {
    use_device();
    return hip_softmax(ctx_, x, y, scale, causal);
  }
  Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                   const AttentionOptions& o) override {
    use_device();
    return hip_attention(ctx_, q, k, v, out, o);
  }
  Status unary(UnaryOp op, const Tensor& x, Tensor& y) override {
    use_device();
    return hip_unary(ctx_, op, x, y); }
  Status geglu(const Tensor& x, Tensor& y) override {
    use_device();
    return hip_geglu(ctx_, x, y); }
  Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) override {
    use_device();
    return hip_binary(ctx_, op, a, b, y);
  }
  Status scale(const Tensor& x, Tensor& y, float alpha, float beta) override {
    use_device();
    return hip_scale(ctx_, x, y, alpha, beta);
  }
  Status concat(std::span<const Tensor> xs, int dim, Tensor& y) override {
    use_device();
    return hip_concat(ctx_, xs, dim, y); }
  Status upsample_nearest2x(const Tensor& x, Tensor& y) override {
    use_device();
    return hip_upsample_nearest2x(ctx_, x, y); }
  Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) override {
    use_device();
    return hip_timestep_embedding(ctx_, t, y, o);
  }
  Status embedding(const Tensor& ids, const Tensor& table, Tensor& y) override {
    use_device();
    return hip_embedding(ctx_, ids, table, y);
  }
  Status copy(const Tensor& src, Tensor& dst) override {
    use_device();
    return hip_copy(ctx_, src, dst); }
  Status fill(Tensor& y, float value) override {
    use_device();
    return hip_fill(ctx_, y, value); }
  Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) override {
    use_device();
    return hip_parity_sums(ctx_, a, b);
  }

 private:
  static constexpr size_t kBigBlock = size_t{64} << 20;        // see allocate()
  static constexpr size_t kStagedUploadMin = size_t{8} << 20;  // smaller copies: one plain hipMemcpyAsync
  static constexpr size_t kStagedChunk = size_t{32} << 20;     // bytes a pinned buffer holds
  struct StagingSlot {
    void* host = nullptr;       // pinned, kStagedChunk bytes
    hipEvent_t done = nullptr;  // recorded after the copy out of `host`
    bool pending = false;       // `done` recorded and not yet waited for
  };

  // The two pinned buffers, made on the first large upload; false (and the
  // plain path from then on) when the host cannot pin the memory.
  bool staging_ready() {
    if (staging_state_ != 0) return staging_state_ > 0;
    staging_state_ = -1;
    for (StagingSlot& slot : staging_) {
      if (hipHostMalloc(&slot.host, kStagedChunk, hipHostMallocDefault) != hipSuccess ||
          hipEventCreateWithFlags(&slot.done, hipEventDisableTiming) != hipSuccess) {
        (void)hipGetLastError();
        return false;  // the destructor frees what was made
      }
    }
    staging_state_ = 1;
    return true;
  }
  Status staged_upload(const void* host, void* device, size_t bytes) {
    const auto* src = static_cast<const unsigned char*>(host);
    auto* dst = static_cast<unsigned char*>(device);
    cpu::ThreadPool& pool = cpu::ThreadPool::global();
    constexpr int64_t kPiece = int64_t{1} << 20;  // a thread's share of a chunk is whole MiB pieces
    for (size_t off = 0, i = 0; off < bytes; off += kStagedChunk, ++i) {
      StagingSlot& slot = staging_[i % staging_.size()];
      if (slot.pending) {  // the copy engine is done reading this buffer
        HIPQ_HIP_RETURN_IF_ERROR(hipEventSynchronize(slot.done));
        slot.pending = false;
      }
      const size_t n = std::min(kStagedChunk, bytes - off);
      auto* pinned = static_cast<unsigned char*>(slot.host);
      pool.parallel_for((static_cast<int64_t>(n) + kPiece - 1) / kPiece, 1, [&](int64_t b, int64_t e) {
        const size_t from = static_cast<size_t>(b * kPiece);
        const size_t to = std::min(n, static_cast<size_t>(e * kPiece));
        std::memcpy(pinned + from, src + off + from, to - from);
      });
      HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(dst + off, pinned, n, hipMemcpyHostToDevice, stream_));
      HIPQ_HIP_RETURN_IF_ERROR(hipEventRecord(slot.done, stream_));
      slot.pending = true;
    }
    return Status::Ok();
  }

  explicit HipBackend(int device) : device_(device), events_(kEventRing, nullptr) {}

  // The current device is per host thread in HIP (and CUDA). A backend is made
  // on one thread and driven from another (a worker's job thread), so every
  // entry point first makes this backend's device current on the calling
  // thread; a thread-local cache makes that one compare when it already is.
  // (Without it, device 1's stream is used with device 0 current: allocations
  // land on the wrong GPU and launches fail with "invalid resource handle".)
  void use_device() const {
    if (t_current_device != device_) {
      (void)hipSetDevice(device_);
      t_current_device = device_;
    }
  }

  Status init() {
    HIPQ_ASSIGN_OR_RETURN(const Fp32Math fp32_math, fp32_math_from_env());
    HIPQ_HIP_RETURN_IF_ERROR(hipSetDevice(device_));
    t_current_device = device_;
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamCreateWithFlags(&stream_, hipStreamNonBlocking));
    hipDeviceProp_t prop;
    HIPQ_HIP_RETURN_IF_ERROR(hipGetDeviceProperties(&prop, device_));
    int sms = 0, warp = 0, clock_khz = 0, mem_clock_khz = 0, bus_bits = 0, major = 0, minor = 0;
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&clock_khz, hipDeviceAttributeClockRate, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&mem_clock_khz, hipDeviceAttributeMemoryClockRate, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&bus_bits, hipDeviceAttributeMemoryBusWidth, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device_));
    HIPQ_HIP_RETURN_IF_ERROR(hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, device_));
    int runtime = 0, driver = 0;
    HIPQ_HIP_RETURN_IF_ERROR(hipRuntimeGetVersion(&runtime));
    HIPQ_HIP_RETURN_IF_ERROR(hipDriverGetVersion(&driver));

    info_.name = "hip";
    info_.device_name = prop.name;
    info_.device_index = device_;
    info_.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info_.warp_size = warp;
    info_.multiprocessors = sms;
#if HIPQ_VENDOR_NVIDIA
    info_.arch = "sm_" + std::to_string(major * 10 + minor);
    info_.runtime_version = "CUDA runtime " + version_string(runtime, true);
    info_.driver_version = "CUDA driver " + version_string(driver, true);
    const double fp32_lanes_per_sm = major >= 8 && !(major == 8 && minor == 0) ? 128 : 64;
#else
    {
      std::string arch = prop.gcnArchName;
      info_.arch = arch.substr(0, arch.find(':'));
    }
    info_.runtime_version = "HIP " + version_string(runtime, false);
    info_.driver_version = "HIP driver " + std::to_string(driver);
    const double fp32_lanes_per_sm = 128;  // RDNA2 WGP-mode CU pair counts as 2 CUs of 64 lanes x dual issue
#endif
    tuning_ = &find_arch_tuning(info_.arch, info_.device_name);
    info_.peak_fp32_tflops = tuning_->peak_fp32_tflops > 0
                                 ? tuning_->peak_fp32_tflops
                                 : 2.0 * fp32_lanes_per_sm * sms * clock_khz * 1e3 / 1e12;
    info_.peak_fp16_tflops = tuning_->peak_fp16_tflops > 0 ? tuning_->peak_fp16_tflops : 2 * info_.peak_fp32_tflops;
    info_.peak_bandwidth_gbs = tuning_->peak_bandwidth_gbs > 0
                                   ? tuning_->peak_bandwidth_gbs
                                   : 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;

    ctx_.stream = stream_;
    ctx_.backend = this;
    ctx_.forms = &forms_;
    ctx_.warp_size = warp;
    ctx_.multiprocessors = sms;
    ctx_.tuning = tuning_;
    ctx_.matrix_units = HIPQ_VENDOR_NVIDIA && major >= 8;
    ctx_.fp32_3xtf32 = ctx_.matrix_units && fp32_math == Fp32Math::k3xTf32;
    info_.fp32_products = fp32_products(fp32_math, ctx_.matrix_units);
    ctx_.switches = route_switches_from_env();
#if defined(HIPQ_HAVE_SM90A)
    ctx_.wgmma = ctx_.matrix_units && major == 9 && minor == 0 && ctx_.switches.wgmma;
#endif
    ctx_.dot2_f16 = dot2_f16_from_env(/*amd=*/!HIPQ_VENDOR_NVIDIA);
    info_.keeps_conv_weight_forms = ctx_.wgmma || ctx_.dot2_f16;
    // conv2d.hip: the SIMT core and the Hopper fp32 route read the half-size input.
    info_.fp32_conv_reads_upsampled =
        !ctx_.fp32_3xtf32 || (ctx_.wgmma && ctx_.switches.fp32_wgmma && ctx_.switches.conv_nhwc);
    // conv2d.hip: the SIMT core and the Hopper 16-bit route read the half-size input.
    info_.f16_conv_reads_upsampled = ctx_.wgmma || (!ctx_.matrix_units && !ctx_.dot2_f16);
    info_.f16_products = f16_products(ctx_.dot2_f16, ctx_.matrix_units, ctx_.wgmma);
#if defined(HIPQ_HAVE_SM90A)
    constexpr bool sm90a_build = true;
#else
    constexpr bool sm90a_build = false;
#endif
    ctx_.fp8_refusal = fp8_refusal(HIPQ_VENDOR_NVIDIA, sm90a_build, HIPQ_VENDOR_NVIDIA ? major : 0,
                                   HIPQ_VENDOR_NVIDIA ? minor : 0, info_.device_name);
    ctx_.fp8 = ctx_.fp8_refusal.empty();
    info_.fp8_refusal = ctx_.fp8_refusal;
    info_.fp8_products = !ctx_.fp8 ? "" : ctx_.wgmma ? "e4m3 wgmma, fp32 accumulate" : "e4m3 decoded to fp32 FMA (HIPQ_NO_WGMMA)";
    return Status::Ok();
  }

  // Below the cap with `cls` more bytes: else the cached blocks go back to
  // the device (not inside a capture: freeing would synchronise), and if
  // that is not enough, ResourceExhausted.
  // The cap is the device memory of the whole process, as a card of that
  // size would have it: what the pool holds plus what the runtime holds
  // outside it (context, loaded code; other processes too), which the driver
  // tells (hipMemGetInfo, once per new device block: next to the hipMalloc it
  // precedes, negligible).
  Status make_room(size_t cls, size_t bytes) {
    if (limit_ <= 0) return Status::Ok();
    auto held = [&] { return in_use_ + cached_bytes_ + reserved_cached_; };
    int64_t outside = 0;
    size_t free_b = 0, total_b = 0;
    if (hipMemGetInfo(&free_b, &total_b) == hipSuccess) {
      outside = std::max<int64_t>(0, static_cast<int64_t>(total_b) - static_cast<int64_t>(free_b) - held());
    } else {
      (void)hipGetLastError();
    }
    auto fits = [&] { return held() + outside + static_cast<int64_t>(cls) <= limit_; };
    if (!fits() && capturing_ < 0 && cached_bytes_ > 0) {
      HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
      release_cached();
    }
    if (fits()) return Status::Ok();
    return Status::ResourceExhausted("hip backend: allocating " + std::to_string(bytes) + " bytes would pass the " +
                                     std::to_string(limit_) + "-byte device memory limit (" +
                                     std::to_string(in_use_) + " in use, " +
                                     std::to_string(cached_bytes_ + reserved_cached_) + " cached, " +
                                     std::to_string(outside) + " held by the runtime outside the pool)");
  }

  Status release_cached_big() {
    bool any = false;
    for (const auto& [c, blocks] : free_) any = any || (c >= kBigBlock && !blocks.empty());
    if (!any) return Status::Ok();
    HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(stream_));
    for (auto& [c, blocks] : free_) {
      if (c < kBigBlock) continue;
      for (void* q : blocks) (void)hipFree(q);
      cached_bytes_ -= static_cast<int64_t>(c * blocks.size());
      blocks.clear();
    }
    return Status::Ok();
  }

  void release_cached() {
    for (auto& [cls, blocks] : free_) {
      for (void* p : blocks) (void)hipFree(p);
      blocks.clear();
    }
    cached_bytes_ = 0;
  }

  int device_;
  hipStream_t stream_ = nullptr;
  BackendInfo info_;
  const ArchTuning* tuning_ = nullptr;
  HipContext ctx_;
  ConstantForms forms_;
  std::map<size_t, std::vector<void*>> free_;
  std::map<int, hipGraphExec_t> graph_exec_;                          // graph id -> its executable
  std::map<std::pair<int, size_t>, std::vector<void*>> reserved_free_;  // (graph, size class) -> released blocks
  std::unordered_map<void*, int> reserved_by_;  // block -> the graph it is reserved for
  int capturing_ = -1;                          // the graph being captured, or -1
  int next_graph_ = 0;
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
  int64_t cached_bytes_ = 0;    // in free_
  int64_t reserved_cached_ = 0;  // in reserved_free_
  int64_t limit_ = 0;            // set_memory_limit; 0 = none
  std::vector<hipEvent_t> events_;
  int next_event_ = 0;
  std::array<StagingSlot, 2> staging_{};
  int staging_state_ = 0;  // 0: not tried, 1: pinned buffers made, -1: unavailable
};

}  // namespace

int hip_device_count() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n;
}

Result<std::unique_ptr<Backend>> make_hip_backend(int device) { return HipBackend::create(device); }

}  // namespace hipq::kernels
