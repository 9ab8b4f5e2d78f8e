// JobHandoff between two real threads: a job given is the job run, posts come
// back in order and wake the poll through the eventfd, quit ends the wait.
#include "worker/job_handoff.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <thread>

namespace hipq::worker {
namespace {

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

proto::Envelope progress(int step) {
  proto::Envelope e;
  e.mutable_progress()->set_step(step);
  return e;
}

TEST(JobHandoff, AGivenJobReachesTheJobThreadAndItsPostsComeBackInOrderWithAWakeUp) {
  auto h = JobHandoff::create();
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  JobHandoff& handoff = **h;
  EXPECT_FALSE(readable(handoff.wake_fd(), 0)) << "nothing posted yet";
  std::thread job_thread([&] {
    while (auto job = handoff.wait_for_job()) {
      for (int step = 1; step <= 3; ++step) handoff.post(progress(static_cast<int>(job->jobs.at(0).job_id()) * 10 + step));
    }
  });
  proto::JobAssignment a;
  a.set_job_id(7);
  handoff.give(a);
  std::vector<int> steps;
  while (steps.size() < 3) {
    ASSERT_TRUE(readable(handoff.wake_fd(), 5000)) << "posts without a wake-up";
    for (const auto& e : handoff.take()) steps.push_back(e.progress().step());
  }
  EXPECT_EQ(steps, (std::vector<int>{71, 72, 73}));
  EXPECT_FALSE(readable(handoff.wake_fd(), 50)) << "taken, yet still readable";
  EXPECT_TRUE(handoff.take().empty());
  handoff.quit();
  job_thread.join();  // hangs here if quit did not end the wait
}

TEST(JobHandoff, APostAfterATakeWakesThePollAgain) {
  auto h = JobHandoff::create();
  ASSERT_TRUE(h.ok());
  JobHandoff& handoff = **h;
  handoff.post(progress(1));
  ASSERT_TRUE(readable(handoff.wake_fd(), 0));
  ASSERT_EQ(handoff.take().size(), 1u);
  EXPECT_FALSE(readable(handoff.wake_fd(), 0));
  handoff.post(progress(2));
  handoff.post(progress(3));
  ASSERT_TRUE(readable(handoff.wake_fd(), 0));
  EXPECT_EQ(handoff.take().size(), 2u);
}

}  // namespace
}  // namespace hipq::worker
