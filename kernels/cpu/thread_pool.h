// ThreadPool: the cpu backend's workers for parallel loops over rows/tiles.
//
// One process-wide pool (global()), sized by env HIPQ_CPU_THREADS (default:
// std::thread::hardware_concurrency()). parallel_for splits [0, n) into
// contiguous chunks that the calling thread and the workers take in turn; it
// returns when every chunk is done.
// Thread safety: parallel_for may be called from any thread. One call uses
// the workers at a time; a concurrent call (another backend on another
// thread) or a nested call from inside a chunk runs inline on its caller, so
// nothing ever waits on itself.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hipq::kernels::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The shared pool, created on first use.
  static ThreadPool& global();
  // Threads that take part in a parallel_for (workers + the caller).
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n). Chunks hold at
  // least `grain` indices, so tiny loops stay on the calling thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  void worker_loop();
  static void run_chunks(Job& job);

  std::vector<std::thread> workers_;
  std::mutex submit_mu_;  // held by the one parallel_for using the workers
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  int busy_workers_ = 0;
  bool stop_ = false;
};

// Threads to use by default: HIPQ_CPU_THREADS when set to a positive number,
// else hardware_concurrency (at least 1).
int default_cpu_threads();

}  // namespace hipq::kernels::cpu
