#include "coordinator/monitor/monitor.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "coordinator/monitor/db_figures.h"
#include "coordinator/monitor/exposition.h"
#include "coordinator/monitor/status_page.h"
#include "db/database.h"

namespace hipq::coordinator::monitor {

Result<HostPort> parse_host_port(const std::string& bind) {
  HostPort hp;
  std::string port;
  if (!bind.empty() && bind[0] == '[') {
    const size_t close = bind.find(']');
    if (close == std::string::npos || close + 1 >= bind.size() || bind[close + 1] != ':') {
      return Status::InvalidArgument("\"" + bind + "\" is not [IPv6]:PORT");
    }
    hp.host = bind.substr(1, close - 1);
    port = bind.substr(close + 2);
  } else {
    const size_t colon = bind.rfind(':');
    if (colon == std::string::npos || colon == 0 || bind.find(':') != colon) {
      return Status::InvalidArgument("\"" + bind + "\" is not HOST:PORT (e.g. 127.0.0.1:9464; IPv6 as [::1]:9464)");
    }
    hp.host = bind.substr(0, colon);
    port = bind.substr(colon + 1);
  }
  if (hp.host.empty()) return Status::InvalidArgument("\"" + bind + "\" names no host");
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
      std::stoi(port) > 65535) {
    return Status::InvalidArgument("\"" + bind + "\": the port must be a number from 0 to 65535 (0 = any free port)");
  }
  hp.port = std::stoi(port);
  return hp;
}

Result<std::string> read_token_file(const std::filesystem::path& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound(path.string() + ": no such token file (write one with e.g. `openssl rand -hex 32 > " +
                            path.string() + "; chmod 600 " + path.string() + "`)");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::PermissionDenied(path.string() + ": token file is readable by others; chmod 600 it");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(path.string() + ": cannot read the token file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  if (t.size() > 4096) return Status::InvalidArgument(path.string() + ": token longer than 4096 bytes");
  size_t b = 0, e = t.size();
  while (b < e && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(t[e - 1]))) --e;
  t = t.substr(b, e - b);
  if (t.size() < 16) {
    return Status::InvalidArgument(path.string() + ": the token must be at least 16 characters (`openssl rand -hex 32`)");
  }
  for (char c : t) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Status::InvalidArgument(path.string() + ": the token holds whitespace or a control character");
    }
  }
  return t;
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  // Walk the longer length whatever the content; a length mismatch still
  // costs the same walk.
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Monitor::Monitor(MonitorOptions options, Metrics& metrics, std::unique_ptr<DbReader> reader)
    : options_(std::move(options)), metrics_(metrics), reader_(std::move(reader)) {}

Monitor::~Monitor() {
  if (server_) server_->stop();
}

Result<std::unique_ptr<Monitor>> Monitor::start(MonitorOptions options, Metrics& metrics) {
  HIPQ_ASSIGN_OR_RETURN(HostPort hp, parse_host_port(options.bind));
  if (!options.allow_public && !is_loopback_address(hp.host)) {
    return Status::FailedPrecondition(
        "refusing to serve metrics and the status page on " + options.bind +
        ": anyone who can reach it reads every prompt and worker name. Bind 127.0.0.1 (the default, " +
        kDefaultMetricsBind + "), or pass --metrics-public on a trusted network (with --metrics-token-file)");
  }
  HIPQ_ASSIGN_OR_RETURN(auto reader, DbReader::open(options.db_path, options.db_min_interval));
  std::unique_ptr<Monitor> m(new Monitor(std::move(options), metrics, std::move(reader)));
  HttpServerOptions ho;
  ho.host = hp.host;
  ho.port = hp.port;
  ho.allow_remote_peers = m->options_.allow_public;
  ho.request_timeout = m->options_.request_timeout;
  ho.max_connections = m->options_.max_connections;
  auto server = HttpServer::start(ho, [p = m.get()](const HttpRequest& r) { return p->handle(r); });
  if (!server.ok()) {
    return Status(server.status().code(), "--metrics-bind " + m->options_.bind + ": " + server.status().message());
  }
  m->server_ = std::move(*server);
  spdlog::info("metrics and status page on http://{}/ (metrics at /metrics{})", m->server_->address(),
               m->options_.token.empty() ? "" : "; bearer token required");
  return m;
}

HttpResponse Monitor::handle(const HttpRequest& r) {
  HttpResponse out;
  if (!options_.token.empty()) {
    auto it = r.headers.find("authorization");
    const std::string expected = "Bearer " + options_.token;
    if (it == r.headers.end() || !equal_constant_time(it->second, expected)) {
      out.status = 401;
      out.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"hipq\"");
      out.body = "Unauthorized: send the monitor's token as 'Authorization: Bearer <token>'\n";
      return out;
    }
  }
  if (r.path == "/healthz") {
    out.body = "ok\n";
    return out;
  }
  const bool is_metrics = r.path == "/metrics";
  const bool is_page = r.path == "/" || r.path == "/status";
  const bool is_api = r.path == "/api/status";
  if (!is_metrics && !is_page && !is_api) {
    out.status = 404;
    out.body = "Not Found: " + r.path + " (this address serves /metrics, / or /status, /api/status, /healthz)\n";
    return out;
  }
  // The database is read at most every db_min_interval (cached in between).
  std::shared_ptr<const DbFigures> figures;
  if (auto f = reader_->read(); f.ok()) {
    figures = *f;
    last_db_error_.clear();
  } else {
    ++db_read_errors_;
    last_db_error_ = f.status().ToString();
    if (db_read_errors_ <= 10 || db_read_errors_ % 1000 == 0) {
      spdlog::warn("monitor: cannot read the database (#{}): {}", db_read_errors_, last_db_error_);
    }
  }
  const LoopSnapshot snap = metrics_.snapshot().latest();
  if (is_metrics) {
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    out.body = render_metrics_text(metrics_, snap, figures.get(), db_read_errors_);
    return out;
  }
  nlohmann::json status =
      status_json(snap, figures.get(), metrics_.step_distribution(), last_db_error_, db::wall_clock_seconds());
  if (is_api) {
    out.content_type = "application/json";
    out.body = status.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    out.content_type = "text/html; charset=utf-8";
    out.body = render_status_page(status, options_.refresh_seconds);
  }
  return out;
}

}  // namespace hipq::coordinator::monitor
