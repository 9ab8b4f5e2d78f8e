// Test helper: a blocking HTTP/1.1 client over a raw TCP socket (the monitor
// answers one request per connection and closes it), plus raw sends for the
// hostile-input tests, and a parser of Prometheus text exposition.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace hipq::testing {

struct HttpAddr {
  std::string host = "127.0.0.1";
  int port = 0;
};

// "127.0.0.1:9464" → host, port.
inline HttpAddr parse_addr(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  HttpAddr a;
  const size_t colon = s.rfind(':');
  a.host = s.substr(0, colon);
  if (!a.host.empty() && a.host.front() == '[') a.host = a.host.substr(1, a.host.size() - 2);
  a.port = std::atoi(s.substr(colon + 1).c_str());
  return a;
}

// A connected socket, or -1.
inline int connect_to(const HttpAddr& a) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  ::inet_pton(AF_INET, a.host.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Everything the server sends until it closes (or `timeout` passes).
inline std::string read_all(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[65536];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

struct HttpReply {
  int status = 0;  // 0: no (parseable) answer
  std::string head;
  std::string body;
};

inline HttpReply parse_reply(const std::string& raw) {
  HttpReply r;
  const size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return r;
  r.status = std::atoi(raw.substr(9, 3).c_str());
  r.head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  return r;
}

// Sends `raw` as is and returns the parsed answer.
inline HttpReply raw_request(const HttpAddr& a, const std::string& raw) {
  int fd = connect_to(a);
  if (fd < 0) return {};
  send_all(fd, raw);
  HttpReply r = parse_reply(read_all(fd));
  ::close(fd);
  return r;
}

inline HttpReply http_get(const HttpAddr& a, const std::string& path, const std::string& extra_headers = "") {
  return raw_request(a, "GET " + path + " HTTP/1.1\r\nHost: " + a.host + "\r\nConnection: close\r\n" + extra_headers + "\r\n");
}

// Prometheus text: "name{labels} value" lines → value by "name{labels}"
// exactly as written (labels in the order the server writes them, sorted).
inline std::map<std::string, double> parse_exposition(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    out[line.substr(0, sp)] = std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return out;
}

// Sum of every series of `name` whose label text contains `label_part`.
inline double sum_of(const std::map<std::string, double>& m, const std::string& name,
                     const std::string& label_part = "") {
  double s = 0;
  for (const auto& [k, v] : m) {
    const bool same = k == name || k.rfind(name + "{", 0) == 0;
    if (same && k.find(label_part) != std::string::npos) s += v;
  }
  return s;
}

}  // namespace hipq::testing
