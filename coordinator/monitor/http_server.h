// HttpServer: a small, strict HTTP/1.1 server for the monitor (GET and HEAD
// only, no request bodies, one request per connection, `Connection: close`).
//
// It runs one thread of its own, polling non-blocking sockets, so nothing a
// client does reaches the coordinator's loop. Every resource is bounded:
// the request line and headers at most `max_head_bytes` (8 KiB; 431 past
// it), at most `max_connections` open at once (the next gets 503 and is
// closed), and every connection ends `request_timeout` after it was
// accepted, whether it is still sending its request or still reading the
// response (slow clients cost a slot for that long, never the thread). A
// request that does not parse gets 400 and the connection closes. A peer
// whose address is not loopback gets 403 unless `allow_remote_peers`.
//
// Ownership: owns its sockets and thread; stop() (or the destructor) joins
// it. Thread safety: the handler runs on the server's thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace hipq::coordinator::monitor {

struct HttpRequest {
  std::string method;                          // "GET" | "HEAD"
  std::string target;                          // as sent: "/metrics?x=1"
  std::string path;                            // "/metrics"
  std::string query;                           // "x=1"
  std::map<std::string, std::string> headers;  // names lower-cased; values trimmed
  std::string peer;                            // "127.0.0.1:54022"
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

// The outcome of parsing what a client sent so far.
struct HeadParse {
  enum class State { kIncomplete, kComplete, kError } state = State::kIncomplete;
  int status = 0;          // for kError: the status to answer (400, 405, 413, 431, 505)
  std::string error;       // for kError: why, in words
};

// Parses a request head (request line + headers up to the blank line) from
// `buffer`. Strict: CRLF line ends (a bare LF is accepted), a method of
// upper-case letters, an origin-form target ("/...", at most 2,048 bytes, no
// control characters or spaces), HTTP/1.0 or 1.1, header names of token
// characters, at most 64 headers, no obsolete line folding, no body
// (Content-Length other than 0 or any Transfer-Encoding is refused with 413),
// methods other than GET and HEAD get 405.
HeadParse parse_request_head(std::string_view buffer, size_t max_head_bytes, HttpRequest* out);

// "HTTP/1.1 200 OK\r\n..." with Content-Length, Connection: close and the
// security headers every response carries; no body for HEAD.
std::string serialize_response(const HttpResponse& response, bool head_only);

// "OK", "Not Found", ...
std::string_view status_reason(int status);

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";              // numeric address or "localhost"
  int port = 0;                                // 0 = any free port
  size_t max_head_bytes = 8192;
  int max_connections = 64;
  std::chrono::milliseconds request_timeout{5000};
  bool allow_remote_peers = false;
};

struct HttpServerCounters {
  std::atomic<int64_t> accepted{0};
  std::atomic<int64_t> answered{0};            // responses written whole
  std::atomic<int64_t> bad_requests{0};        // 4xx/5xx for what the client sent (400, 405, 413, 431, 505)
  std::atomic<int64_t> refused_busy{0};        // 503: too many connections
  std::atomic<int64_t> refused_peer{0};        // 403: not a loopback peer
  std::atomic<int64_t> timed_out{0};
};

class HttpServer {
 public:
  // Binds and starts the thread. InvalidArgument for a host that is not an
  // address; Unavailable when the address cannot be bound (in use).
  static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void stop();
  // "127.0.0.1:9464" (the port actually bound).
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  const HttpServerCounters& counters() const { return counters_; }

 private:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  Status bind_and_listen();
  void loop();

  HttpServerOptions options_;
  HttpHandler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the poll
  std::string address_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  HttpServerCounters counters_;
};

// True for 127.0.0.0/8, ::1 and IPv4-mapped 127.x in IPv6.
bool is_loopback_address(const std::string& numeric_host);

}  // namespace hipq::coordinator::monitor
