#include "kernels/cpu/host_pool.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

namespace hipq::kernels::cpu {

HostPool::~HostPool() { trim(); }

size_t HostPool::size_class(size_t bytes) {
  if (bytes <= 1024) return std::max<size_t>(64, (bytes + 63) / 64 * 64);
  const size_t top = std::bit_floor(bytes);
  const size_t quarter = top / 4;
  return (bytes + quarter - 1) / quarter * quarter;
}

Result<void*> HostPool::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= static_cast<int64_t>(cls);
      in_use_ += static_cast<int64_t>(cls);
      peak_ = std::max(peak_, in_use_);
      return p;
    }
  }
  if (const int64_t limit = this->limit(); limit > 0) {
    auto over = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      return in_use_ + cached_ + static_cast<int64_t>(cls) > limit;
    };
    if (over()) trim();
    if (over()) {
      std::lock_guard<std::mutex> lock(mu_);
      return Status::ResourceExhausted("cpu backend: allocating " + std::to_string(bytes) + " bytes would pass the " +
                                       std::to_string(limit) + "-byte memory limit (" + std::to_string(in_use_) +
                                       " in use)");
    }
  }
  void* p = std::aligned_alloc(64, cls);
  if (p == nullptr) {
    // Cached blocks of other sizes may be what the system is missing.
    trim();
    p = std::aligned_alloc(64, cls);
  }
  if (p == nullptr)
    return Status::ResourceExhausted("cpu backend: cannot allocate " + std::to_string(bytes) +
                                     " bytes of host memory (" + std::to_string(in_use_) + " in use)");
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ += static_cast<int64_t>(cls);
  peak_ = std::max(peak_, in_use_);
  return p;
}

void HostPool::release(void* p, size_t bytes) {
  if (p == nullptr) return;
  const size_t cls = size_class(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  free_[cls].push_back(p);
  in_use_ -= static_cast<int64_t>(cls);
  cached_ += static_cast<int64_t>(cls);
}

void HostPool::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [cls, blocks] : free_)
    for (void* p : blocks) std::free(p);
  free_.clear();
  cached_ = 0;
}

void HostPool::set_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

int64_t HostPool::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

int64_t HostPool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t HostPool::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

int64_t HostPool::bytes_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

void HostPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_use_;
}

}  // namespace hipq::kernels::cpu
