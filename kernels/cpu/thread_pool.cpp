#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace hipq::kernels::cpu {

namespace {
// Set on pool workers so a parallel_for issued from inside a chunk runs inline.
thread_local bool t_in_pool = false;
}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
};

int default_cpu_threads() {
  if (const char* env = std::getenv("HIPQ_CPU_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int>(std::min<long>(v, 1024));
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  // Leaked on purpose: workers must not be joined during static destruction
  // while another static still runs ops.
  static ThreadPool* pool = new ThreadPool(default_cpu_threads());
  return *pool;
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.chunks) return;
    int64_t b = c * job.chunk;
    int64_t e = std::min(job.n, b + job.chunk);
    (*job.fn)(b, e);
    job.finished.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::worker_loop() {
  t_in_pool = true;
  uint64_t seen = 0;
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      if (!job) continue;  // woke after that job was already finished
      ++busy_workers_;
    }
    run_chunks(*job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_workers_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = static_cast<int64_t>(threads()) * 4;
  int64_t chunks = std::min<int64_t>(max_chunks, (n + grain - 1) / grain);
  if (chunks <= 1 || workers_.empty() || t_in_pool) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> submit(submit_mu_, std::try_to_lock);
  if (!submit.owns_lock()) {
    fn(0, n);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = (n + chunks - 1) / chunks;
  job.chunks = (n + job.chunk - 1) / job.chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  // The caller works too; marking it keeps nested loops inline.
  t_in_pool = true;
  run_chunks(job);
  t_in_pool = false;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] {
    return job.finished.load(std::memory_order_acquire) == job.chunks && busy_workers_ == 0;
  });
  job_ = nullptr;
}

}  // namespace hipq::kernels::cpu
