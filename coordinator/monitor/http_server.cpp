#include "coordinator/monitor/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

namespace hipq::coordinator::monitor {

namespace {

using Clock = std::chrono::steady_clock;

bool is_tchar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

HeadParse error(int status, std::string why) {
  HeadParse p;
  p.state = HeadParse::State::kError;
  p.status = status;
  p.error = std::move(why);
  return p;
}

std::string peer_string(const sockaddr_storage& ss, std::string* host_out) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  *host_out = host;
  return ss.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + std::to_string(port)
                                  : std::string(host) + ":" + std::to_string(port);
}

struct Connection {
  int fd = -1;
  std::string peer;
  bool peer_loopback = false;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool writing = false;
};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

}  // namespace

bool is_loopback_address(const std::string& host) {
  if (host.rfind("127.", 0) == 0) return true;
  if (host == "::1" || host == "localhost") return true;
  return host.rfind("::ffff:127.", 0) == 0;
}

std::string_view status_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

HeadParse parse_request_head(std::string_view buf, size_t max_head_bytes, HttpRequest* out) {
  constexpr size_t kMaxTarget = 2048;
  constexpr int kMaxHeaders = 64;
  // Find the end of the head: an empty line.
  size_t end = std::string_view::npos, body = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != '\n') continue;
    if (i + 1 < buf.size() && buf[i + 1] == '\n') {
      end = i + 1;
      body = i + 2;
      break;
    }
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
      end = i + 1;
      body = i + 3;
      break;
    }
  }
  if (end == std::string_view::npos) {
    if (buf.size() > max_head_bytes) {
      return error(431, "request line and headers are longer than " + std::to_string(max_head_bytes) + " bytes");
    }
    // A request line that already broke the rules need not wait for the rest.
    const size_t eol = buf.find('\n');
    const std::string_view first = buf.substr(0, eol);
    for (char c : first) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\r') || c == 0x7f) {
        return error(400, "control character in the request line");
      }
    }
    if (first.size() > kMaxTarget + 64) return error(414, "request target longer than 2048 bytes");
    return {};
  }
  if (body > max_head_bytes) {
    return error(431, "request line and headers are longer than " + std::to_string(max_head_bytes) + " bytes");
  }
  (void)body;
  std::string_view head = buf.substr(0, end);
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < head.size();) {
    size_t nl = head.find('\n', start);
    if (nl == std::string_view::npos) nl = head.size();
    std::string_view line = head.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = nl + 1;
  }
  if (lines.empty()) return error(400, "empty request");
  for (std::string_view line : lines) {
    for (char c : line) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
        return error(400, "control character in the request head");
      }
    }
  }
  // Request line: METHOD SP TARGET SP VERSION, single spaces.
  std::string_view rl = lines[0];
  const size_t sp1 = rl.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != std::string_view::npos) {
    return error(400, "request line is not METHOD TARGET HTTP/1.x");
  }
  std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1),
                   version = rl.substr(sp2 + 1);
  if (method.empty() || method.size() > 16 ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return error(400, "method is not a word of capital letters");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.rfind("HTTP/", 0) == 0) return error(505, "only HTTP/1.0 and HTTP/1.1 are served");
    return error(400, "request line does not end with HTTP/1.x");
  }
  if (target.empty() || target[0] != '/') return error(400, "request target must start with '/'");
  if (target.size() > kMaxTarget) return error(414, "request target longer than 2048 bytes");
  if (!std::all_of(target.begin(), target.end(), [](char c) { return static_cast<unsigned char>(c) > 0x20; })) {
    return error(400, "request target holds a space or a byte that is not printable ASCII");
  }
  HttpRequest r;
  r.method = std::string(method);
  r.target = std::string(target);
  const size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
  if (lines.size() - 1 > static_cast<size_t>(kMaxHeaders)) {
    return error(431, "more than " + std::to_string(kMaxHeaders) + " header fields");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.empty()) return error(400, "empty header line");
    if (line[0] == ' ' || line[0] == '\t') return error(400, "obsolete header line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return error(400, "header line without a name and ':'");
    std::string_view name = line.substr(0, colon);
    if (!std::all_of(name.begin(), name.end(), is_tchar)) return error(400, "header name with a character not allowed");
    std::string key = lower(std::string(name));
    std::string value = trim(line.substr(colon + 1));
    if (r.headers.count(key)) {
      // Repeated fields that decide access or framing are ambiguous: refused.
      if (key == "authorization" || key == "content-length" || key == "host" || key == "transfer-encoding") {
        return error(400, "header '" + key + "' sent twice");
      }
      r.headers[key] += ", " + value;
    } else {
      r.headers[key] = value;
    }
  }
  if (r.headers.count("transfer-encoding")) return error(413, "request bodies are not accepted");
  if (auto it = r.headers.find("content-length"); it != r.headers.end() && it->second != "0") {
    return error(413, "request bodies are not accepted");
  }
  if (version == "HTTP/1.1" && !r.headers.count("host")) return error(400, "HTTP/1.1 request without Host");
  if (r.method != "GET" && r.method != "HEAD") return error(405, "only GET and HEAD are served");
  *out = std::move(r);
  HeadParse done;
  done.state = HeadParse::State::kComplete;
  return done;
}

std::string serialize_response(const HttpResponse& r, bool head_only) {
  std::string s = "HTTP/1.1 " + std::to_string(r.status) + " " + std::string(status_reason(r.status)) + "\r\n";
  s += "Content-Type: " + r.content_type + "\r\n";
  s += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  s += "Connection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n";
  s += "Referrer-Policy: no-referrer\r\nX-Frame-Options: DENY\r\n";
  for (const auto& [k, v] : r.headers) s += k + ": " + v + "\r\n";
  s += "\r\n";
  if (!head_only) s += r.body;
  return s;
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void HttpServer::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options, HttpHandler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options), std::move(handler)));
  HIPQ_RETURN_IF_ERROR(s->bind_and_listen());
  s->thread_ = std::thread([p = s.get()] { p->loop(); });
  return s;
}

Status HttpServer::bind_and_listen() {
  if (options_.port < 0 || options_.port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(options_.port) + " is not in 0-65535");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | (options_.host == "localhost" ? 0 : AI_NUMERICHOST);
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.port);
  if (int rc = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status::InvalidArgument("\"" + options_.host + "\" is not an IP address (" + gai_strerror(rc) +
                                   "); give a numeric address such as 127.0.0.1, [::1] or 0.0.0.0");
  }
  std::string last_error;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      last_error = std::strerror(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) {
    return Status::Unavailable("cannot listen on " + options_.host + ":" + port + ": " + last_error);
  }
  set_nonblocking(listen_fd_);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  std::string host;
  address_ = peer_string(ss, &host);
  port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Status::Internal(std::string("eventfd: ") + std::strerror(errno));
  return Status::Ok();
}

void HttpServer::loop() {
  std::list<Connection> conns;
  auto respond = [&](Connection& c, const HttpResponse& r, bool head_only) {
    c.out = serialize_response(r, head_only);
    c.sent = 0;
    c.writing = true;  // nothing more is read from it
  };
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    auto next_deadline = Clock::now() + std::chrono::seconds(1);
    for (auto& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      next_deadline = std::min(next_deadline, c.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_deadline - Clock::now());
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 1000)));
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("monitor http: poll failed: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (fds[0].revents & POLLIN) break;
    // Connections first (their pollfds follow in list order), then accepts.
    size_t i = 2;
    const auto now = Clock::now();
    for (auto it = conns.begin(); it != conns.end(); ++i) {
      Connection& c = *it;
      const short re = fds[i].revents;
      bool close_it = false;
      if (re & (POLLERR | POLLNVAL)) {
        close_it = true;
      } else if (!c.writing && (re & (POLLIN | POLLHUP))) {
        char buf[4096];
        ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got > 0) {
          c.in.append(buf, static_cast<size_t>(got));
          HttpRequest req;
          HeadParse p = parse_request_head(c.in, options_.max_head_bytes, &req);
          if (p.state == HeadParse::State::kError) {
            ++counters_.bad_requests;
            HttpResponse r;
            r.status = p.status;
            r.body = std::string(status_reason(p.status)) + ": " + p.error + "\n";
            if (p.status == 405) r.headers.emplace_back("Allow", "GET, HEAD");
            respond(c, r, false);
          } else if (p.state == HeadParse::State::kComplete) {
            req.peer = c.peer;
            HttpResponse r;
            try {
              r = handler_(req);
            } catch (const std::exception& e) {
              r.status = 500;
              r.body = "internal error\n";
              spdlog::error("monitor http: handler for {} threw: {}", req.path, e.what());
            }
            respond(c, r, req.method == "HEAD");
          }
        } else if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          close_it = true;  // the client went away before sending a request
        }
      } else if (c.writing && (re & (POLLOUT | POLLHUP))) {
        ssize_t put = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (put > 0) {
          c.sent += static_cast<size_t>(put);
          if (c.sent == c.out.size()) {
            ++counters_.answered;
            close_it = true;
          }
        } else if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          close_it = true;
        }
      }
      if (!close_it && now >= c.deadline) {
        ++counters_.timed_out;
        if (!c.writing) {
          // A best-effort 408 to a client too slow to send its request.
          std::string r = serialize_response({408, "text/plain; charset=utf-8", "Request Timeout\n", {}}, false);
          (void)!::send(c.fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        close_it = true;
      }
      if (close_it) {
        ::close(c.fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents & POLLIN) {
      // Accept everything waiting; past the connection limit each gets a 503.
      for (int k = 0; k < 256; ++k) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        ++counters_.accepted;
        Connection c;
        c.fd = fd;
        std::string host;
        c.peer = peer_string(ss, &host);
        c.peer_loopback = is_loopback_address(host);
        c.deadline = Clock::now() + options_.request_timeout;
        if (static_cast<int>(conns.size()) >= options_.max_connections) {
          ++counters_.refused_busy;
          std::string r = serialize_response(
              {503, "text/plain; charset=utf-8", "Service Unavailable: too many open connections\n", {}}, false);
          (void)!::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          ::close(fd);
          continue;
        }
        if (!c.peer_loopback && !options_.allow_remote_peers) {
          ++counters_.refused_peer;
          conns.push_back(std::move(c));
          HttpResponse r;
          r.status = 403;
          r.body = "Forbidden: this monitor serves loopback peers only (" + conns.back().peer +
                   " is not one); the operator must bind it to a public address on purpose\n";
          respond(conns.back(), r, false);
          continue;
        }
        conns.push_back(std::move(c));
      }
    }
  }
  for (auto& c : conns) ::close(c.fd);
}

}  // namespace hipq::coordinator::monitor
