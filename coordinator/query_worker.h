// QueryWorker: answers QueryRequests (runs, stats, compare, parity,
// report-data) on a thread of its own, from a read-only connection of its
// own, so that a long query — a million bootstrap resamples, a report
// reading thumbnails — never runs inside the coordinator's write
// transaction or delays its heartbeats and dispatch.
//
// The poll thread hands a request over with submit() and polls socket() for
// answers; next_reply() returns one [routing id, encoded envelope] ready to
// send. Reads see what is committed (WAL snapshot), which is everything any
// earlier reply spoke of: replies leave only after their commit.
// At most kMaxPending requests wait; submit() answers false beyond that and
// the caller replies "busy" at once.
//
// Ownership: owns its thread, its connection and one end of an inproc PAIR;
// borrows the context. Thread safety: submit/next_reply/socket on the poll
// thread only; the destructor stops and joins the thread.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <zmq.hpp>

#include "base/result.h"
#include "proto/hipq.pb.h"

namespace hipq::coordinator {

class QueryWorker {
 public:
  static constexpr int kMaxPending = 16;

  // Opens the database read-only (it must exist) and starts the thread.
  static Result<std::unique_ptr<QueryWorker>> start(zmq::context_t& context, const std::filesystem::path& db_path);
  ~QueryWorker();
  QueryWorker(const QueryWorker&) = delete;
  QueryWorker& operator=(const QueryWorker&) = delete;

  zmq::socket_t& socket() { return pipe_; }
  bool submit(const std::string& routing_id, const proto::Envelope& request);
  std::optional<std::pair<std::string, std::string>> next_reply();
  int pending() const { return pending_; }

 private:
  QueryWorker(zmq::context_t& context, std::filesystem::path db_path);
  void thread_main(std::string endpoint);

  zmq::context_t& context_;
  std::filesystem::path db_path_;
  zmq::socket_t pipe_;
  std::unique_ptr<std::thread> thread_;
  int pending_ = 0;
};

}  // namespace hipq::coordinator
