// HostPool: the cpu backend's memory, 64-byte aligned blocks from size-class
// free lists. Freed blocks are kept and reused for the next request of the
// same class, so steady-state model steps make no OS allocation.
//
// Size classes: multiples of 64 bytes up to 1 KiB, then four classes per
// power of two (2^k, 1.25*2^k, 1.5*2^k, 1.75*2^k), so rounding wastes < 25%.
// bytes_in_use and peak count class bytes handed out (not cached blocks).
// A limit (set_limit) caps in use + cached as a device's memory would be: a
// request past it trims the cache, then fails with ResourceExhausted, so the
// engine's memory plans and low-memory routes are tested on the host.
// Thread safety: all members are safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "base/result.h"

namespace hipq::kernels::cpu {

class HostPool {
 public:
  HostPool() = default;
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // The class a request of `bytes` is served from (>= bytes, >= 64).
  static size_t size_class(size_t bytes);

  // ResourceExhausted when the system has no memory for a new block.
  Result<void*> allocate(size_t bytes);
  // `bytes` is the size passed to allocate for this block.
  void release(void* p, size_t bytes);
  // Returns cached free blocks to the system.
  void trim();
  // 0 = no limit.
  void set_limit(int64_t bytes);
  int64_t limit() const;

  int64_t bytes_in_use() const;
  int64_t peak_bytes() const;
  int64_t bytes_cached() const;
  void reset_peak();

 private:
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // class bytes -> free blocks
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
  int64_t cached_ = 0;
  int64_t limit_ = 0;
};

}  // namespace hipq::kernels::cpu
