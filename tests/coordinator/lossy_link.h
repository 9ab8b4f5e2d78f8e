// LossyLink: a user-space TCP relay that does to a stream what a lossy,
// delaying network link (`tc netem delay/loss`) does to it as the
// application above TCP sees it. It listens on 127.0.0.1:<any>, opens one
// connection to the upstream endpoint for each connection it accepts, and
// relays bytes both ways on a thread of its own (plain POSIX sockets and
// poll), injecting:
//   * delay with jitter: each chunk read waits a random delay before it is
//     written on; order within a direction is kept, as TCP keeps it;
//   * loss as stalls: now and then a chunk is "lost" and that direction
//     holds it and everything after it for a while, as a lost segment holds
//     the stream until it is retransmitted; some stalls are longer than the
//     peers' liveness window;
//   * resets: now and then a connection is cut inside a chunk (part of it
//     written) and both ends get a RST (SO_LINGER 0).
// Packet duplication and reordering are not injected: TCP drops duplicate
// segments and reorders segments before the application reads them, so
// above the kernel they are invisible.
//
// All randomness comes from one generator seeded with Options::seed. The
// timing of the peers is not under the link's control, so a seed repeats the
// link's choices, not a run. Not thread safe except figures(), which may be
// called from any thread while the relay runs. Setup failures are reported
// as test failures (the endpoint is then empty).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace hipq::testing {

class LossyLink {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    uint32_t seed = 1;
    // Delay of each chunk, uniform in [min, max] milliseconds.
    double delay_min_ms = 0, delay_max_ms = 80;
    // Per direction of a connection: mean seconds (exponential) from the end
    // of one stall to the chunk lost next.
    double stall_gap_mean_s = 6;
    // A stall lasts uniform [stall_min_s, stall_max_s]; every
    // long_stall_every-th stall of the link (the 2nd, then every
    // long_stall_every more) lasts uniform [long_stall_min_s, long_stall_max_s].
    double stall_min_s = 0.3, stall_max_s = 2.5;
    int long_stall_every = 4;
    double long_stall_min_s = 3.2, long_stall_max_s = 5.0;
    // Stalls longer than this are counted apart (the peers' liveness window).
    double liveness_s = 3.0;
    // Per connection: mean seconds (exponential) until it is reset.
    double reset_gap_mean_s = 15;
  };

  struct Figures {
    int64_t connections = 0, chunks = 0, chunks_delayed = 0, stalls = 0, stalls_over_liveness = 0, resets = 0;
    double longest_stall_s = 0;
  };

  LossyLink(const std::string& upstream_endpoint, Options options) : options_(options), rng_(options.seed) {
    upstream_port_ = parse_loopback_port(upstream_endpoint);
    if (upstream_port_ == 0) {
      ADD_FAILURE() << "LossyLink: upstream \"" << upstream_endpoint << "\" is not tcp://127.0.0.1:PORT";
      return;
    }
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "LossyLink: cannot listen on 127.0.0.1: " << std::strerror(errno);
      return;
    }
    endpoint_ = "tcp://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    thread_ = std::thread([this] { relay(); });
  }

  ~LossyLink() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    for (auto& c : connections_) close_both(c, /*reset=*/false);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  LossyLink(const LossyLink&) = delete;
  LossyLink& operator=(const LossyLink&) = delete;

  // Where peers connect instead of the upstream endpoint.
  const std::string& endpoint() const { return endpoint_; }

  Figures figures() const {
    std::lock_guard<std::mutex> lock(figures_mutex_);
    return figures_;
  }

 private:
  struct Chunk {
    Clock::time_point due;
    std::string bytes;
    size_t sent = 0;
  };
  // Bytes read from fd[from] and written to fd[1 - from].
  struct Direction {
    std::deque<Chunk> queue;
    size_t queued_bytes = 0;
    Clock::time_point last_due{}, stall_until{}, next_loss{};
    bool eof = false;       // the reading end said FIN
    bool shut = false;      // FIN passed on to the writing end
    bool blocked = false;   // the writing end's buffer was full
  };
  struct Connection {
    int fd[2] = {-1, -1};  // 0: the peer that connected to us, 1: upstream
    Direction dir[2];
    Clock::time_point next_reset{};
    bool done = false;
  };

  static constexpr size_t kReadBytes = 64 * 1024;
  static constexpr size_t kMaxQueuedBytes = 4 * 1024 * 1024;  // then stop reading (TCP's window)

  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }

  static uint16_t parse_loopback_port(const std::string& endpoint) {
    const std::string prefix = "tcp://127.0.0.1:";
    if (endpoint.rfind(prefix, 0) != 0) return 0;
    const std::string digits = endpoint.substr(prefix.size());
    if (digits.empty() || digits.size() > 5 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return 0;
    int port = std::stoi(digits);
    return port > 0 && port < 65536 ? static_cast<uint16_t>(port) : 0;
  }

  Clock::duration seconds(double s) const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  double exponential(double mean) { return std::exponential_distribution<double>(1.0 / mean)(rng_); }

  template <typename F>
  void count(F&& f) {
    std::lock_guard<std::mutex> lock(figures_mutex_);
    f(figures_);
  }

  static void close_both(Connection& c, bool reset) {
    for (int& fd : c.fd) {
      if (fd < 0) continue;
      if (reset) {
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      ::close(fd);
      fd = -1;
    }
    c.done = true;
  }

  void reset(Connection& c) {
    close_both(c, /*reset=*/true);
    count([](Figures& f) { ++f.resets; });
  }

  void accept_all(Clock::time_point now) {
    for (;;) {
      int down = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (down < 0) return;
      int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in a = loopback(upstream_port_);
      if (up < 0 || ::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        // Upstream is down: the peer sees a refused connection, as it would.
        Connection refused;
        refused.fd[0] = down;
        refused.fd[1] = up;
        close_both(refused, /*reset=*/true);
        continue;
      }
      ::fcntl(up, F_SETFL, ::fcntl(up, F_GETFL) | O_NONBLOCK);
      int one = 1;
      ::setsockopt(down, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Connection& c = connections_.emplace_back();
      c.fd[0] = down;
      c.fd[1] = up;
      c.next_reset = now + seconds(exponential(options_.reset_gap_mean_s));
      for (Direction& d : c.dir) d.next_loss = now + seconds(exponential(options_.stall_gap_mean_s));
      count([](Figures& f) { ++f.connections; });
    }
  }

  void read_from(Connection& c, int from, Clock::time_point now) {
    Direction& d = c.dir[from];
    char buf[kReadBytes];
    ssize_t n = ::recv(c.fd[from], buf, sizeof buf, 0);
    if (n == 0) {
      d.eof = true;
      return;
    }
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) close_both(c, /*reset=*/true);
      return;
    }
    const double delay_ms = uniform(options_.delay_min_ms, options_.delay_max_ms);
    Chunk chunk{std::max(d.last_due, now + seconds(delay_ms / 1000.0)), std::string(buf, static_cast<size_t>(n))};
    d.last_due = chunk.due;
    d.queued_bytes += chunk.bytes.size();
    d.queue.push_back(std::move(chunk));
    if (now >= d.stall_until && now >= d.next_loss) {
      // This chunk is lost: it and everything behind it wait for the resend.
      const bool longer = options_.long_stall_every > 0 && stalls_ % options_.long_stall_every == 1;
      ++stalls_;
      const double s = longer ? uniform(options_.long_stall_min_s, options_.long_stall_max_s)
                              : uniform(options_.stall_min_s, options_.stall_max_s);
      d.stall_until = now + seconds(s);
      d.next_loss = d.stall_until + seconds(exponential(options_.stall_gap_mean_s));
      count([&](Figures& f) {
        ++f.stalls;
        if (s > options_.liveness_s) ++f.stalls_over_liveness;
        f.longest_stall_s = std::max(f.longest_stall_s, s);
      });
    }
    count([&](Figures& f) {
      ++f.chunks;
      if (delay_ms >= 1.0) ++f.chunks_delayed;
    });
  }

  // Writes what is due in direction `from`; may reset the connection.
  void pump(Connection& c, int from, Clock::time_point now) {
    Direction& d = c.dir[from];
    const int to = c.fd[1 - from];
    d.blocked = false;
    while (!c.done && !d.queue.empty() && d.queue.front().due <= now && now >= d.stall_until) {
      Chunk& head = d.queue.front();
      size_t want = head.bytes.size() - head.sent;
      const bool cut = now >= c.next_reset && want >= 2;
      if (cut) want = static_cast<size_t>(uniform(1, static_cast<double>(want)));
      ssize_t n = ::send(to, head.bytes.data() + head.sent, want, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
          d.blocked = true;
          return;
        }
        if (errno == EINTR) continue;
        close_both(c, /*reset=*/true);
        return;
      }
      head.sent += static_cast<size_t>(n);
      if (cut) {
        reset(c);
        return;
      }
      if (head.sent == head.bytes.size()) {
        d.queued_bytes -= head.bytes.size();
        d.queue.pop_front();
      }
    }
    if (!c.done && d.eof && d.queue.empty() && !d.shut) {
      ::shutdown(to, SHUT_WR);
      d.shut = true;
    }
    if (c.dir[0].shut && c.dir[1].shut) close_both(c, /*reset=*/false);
  }

  void relay() {
    std::vector<pollfd> fds;
    std::vector<Connection*> owners;
    while (!stop_.load()) {
      auto now = Clock::now();
      auto wake = now + std::chrono::milliseconds(20);
      for (auto& c : connections_) {
        for (int from = 0; from < 2; ++from) pump(c, from, now);
        for (const Direction& d : c.dir) {
          if (d.queue.empty() || d.blocked) continue;  // a blocked one waits for POLLOUT
          wake = std::min(wake, std::max(d.queue.front().due, d.stall_until));
        }
      }
      connections_.remove_if([](const Connection& c) { return c.done; });

      fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
      owners.assign(1, nullptr);
      for (auto& c : connections_) {
        for (int i = 0; i < 2; ++i) {
          short events = 0;
          if (!c.dir[i].eof && c.dir[i].queued_bytes < kMaxQueuedBytes) events |= POLLIN;
          if (c.dir[1 - i].blocked) events |= POLLOUT;
          fds.push_back(pollfd{c.fd[i], events, 0});
          owners.push_back(&c);
        }
      }
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - Clock::now()).count();
      if (::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait, 0, 20))) < 0) continue;
      now = Clock::now();
      if (fds[0].revents & POLLIN) accept_all(now);
      for (size_t k = 1; k < fds.size(); ++k) {
        Connection& c = *owners[k];
        const int i = static_cast<int>((k - 1) % 2);
        const short got = fds[k].revents;
        if (c.done || got == 0) continue;
        if (got & POLLERR) {
          close_both(c, /*reset=*/true);  // the peer reset it
        } else if (fds[k].events & POLLIN) {
          if (got & (POLLIN | POLLHUP)) read_from(c, i, now);
        } else if (got & POLLHUP) {
          close_both(c, /*reset=*/false);  // closed both ways while we held nothing to read
        }
      }
    }
  }

  Options options_;
  std::mt19937 rng_;
  int64_t stalls_ = 0;  // relay thread only
  uint16_t upstream_port_ = 0;
  int listen_fd_ = -1;
  std::string endpoint_;
  std::list<Connection> connections_;  // stable addresses while poll runs
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex figures_mutex_;
  Figures figures_;
};

}  // namespace hipq::testing
