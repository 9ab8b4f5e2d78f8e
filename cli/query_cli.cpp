#include "cli/query_cli.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>

#include "base/number_format.h"
#include "cli/commands.h"
#include "proto/curve_keys.h"

namespace hipq::cli {

using nlohmann::json;

void add_query_flags(CLI::App* cmd, QueryFlags& f) {
  cmd->add_option("--db", f.db, "database file to read (default $HIPQ_DB, else ./hipq.db)");
  cmd->add_option("--connect", f.connect, "ask a coordinator instead, e.g. tcp://queue.example:5555");
  cmd->add_option("--key", f.key, "CURVE client key pair file for --connect (hipq keygen)");
  cmd->add_option("--server-key", f.server_key, "the coordinator's public key (file or Z85) for --connect");
  cmd->add_option("--timeout", f.timeout_s, "seconds to wait for a coordinator's answer")->check(CLI::PositiveNumber);
}

Result<coordinator::QueryTarget> make_query_target(const QueryFlags& f) {
  coordinator::QueryTarget t;
  t.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  if (!f.connect.empty()) {
    if (!f.db.empty()) return Status::InvalidArgument("give --db or --connect, not both");
    t.endpoint = f.connect;
    if (!f.key.empty() || !f.server_key.empty()) {
      if (f.key.empty() || f.server_key.empty()) {
        return Status::InvalidArgument("CURVE needs both --key (your key pair) and --server-key");
      }
      HIPQ_ASSIGN_OR_RETURN(proto::CurveKeyPair pair, proto::read_curve_key_file(f.key));
      if (pair.secret_key.empty()) {
        return Status::InvalidArgument("--key " + f.key + " holds no secret key; give the key pair file");
      }
      HIPQ_ASSIGN_OR_RETURN(std::string server, proto::read_public_key(f.server_key));
      t.curve = proto::CurveClientKeys{pair.public_key, pair.secret_key, server};
    }
    return t;
  }
  if (!f.db.empty()) {
    t.db_path = f.db;
  } else if (const char* env = std::getenv("HIPQ_DB"); env && *env) {
    t.db_path = env;
  } else {
    t.db_path = "hipq.db";
  }
  return t;
}

void add_filter_flags(CLI::App* cmd, FilterFlags& f) {
  cmd->add_option("--batch", f.batch, "batch id");
  cmd->add_option("--manifest", f.manifest, "manifest sha256 prefix or path as submitted");
  cmd->add_option("--model", f.model, "substring of the model spec");
  cmd->add_option("--prompt,--tag", f.prompt, "prompt substring (case-insensitive) or exact tag");
  cmd->add_option("--seed", f.seed, "seed");
  cmd->add_option("--gpu", f.gpu, "substring of the GPU name, or its arch (gfx1030, sm_90)");
  cmd->add_option("--host", f.host, "worker host");
  cmd->add_option("--build", f.build, "prefix of the worker's build sha");
  cmd->add_option("--verdict", f.verdict, "PASS, FAIL, NO_GOLDEN or NON_FINITE");
  cmd->add_option("--state", f.state, "queued, leased, done, failed, dead or cancelled");
  cmd->add_option("--since", f.since, "from (UTC): YYYY-MM-DD[THH:MM[:SS]], epoch seconds, or an age: 24h, 7d");
  cmd->add_option("--until", f.until, "before (UTC), same forms as --since");
  cmd->add_option("--warmth", f.warmth, "warm (model already loaded) or cold")->check(CLI::IsMember({"warm", "cold"}));
}

json filter_args(const FilterFlags& f) {
  json a = json::object();
  if (f.batch) a["batch"] = *f.batch;
  if (f.seed) a["seed"] = *f.seed;
  auto put = [&](const char* k, const std::string& v) {
    if (!v.empty()) a[k] = v;
  };
  put("manifest", f.manifest);
  put("model", f.model);
  put("prompt", f.prompt);
  put("gpu", f.gpu);
  put("host", f.host);
  put("build", f.build);
  put("verdict", f.verdict);
  put("state", f.state);
  put("since", f.since);
  put("until", f.until);
  if (!f.warmth.empty()) a["warm"] = f.warmth == "warm";
  return a;
}

int report_failure(const Status& status, const char* command) {
  std::cerr << "hipq " << command << ": " << status.ToString() << "\n";
  return status.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

namespace {
// Display width of UTF-8 text: count code points, not bytes.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
}  // namespace

std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                         const std::vector<bool>& right) {
  std::vector<size_t> w(header.size(), 0);
  for (size_t i = 0; i < header.size(); ++i) w[i] = display_width(header[i]);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], display_width(r[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string& c = i < cells.size() ? cells[i] : std::string();
      const std::string pad(w[i] - display_width(c), ' ');
      const bool r = i < right.size() && right[i];
      out += r ? pad + c : c + (i + 1 < w.size() ? pad : "");
      if (i + 1 < w.size()) out += "  ";
    }
    return out + "\n";
  };
  std::string out = line(header);
  std::vector<std::string> rule;
  for (size_t x : w) rule.push_back(std::string(x, '-'));
  out += line(rule);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    if (i) out += ',';
    if (f.find_first_of(",\"\n\r") != std::string::npos) {
      out += '"';
      for (char c : f) {
        if (c == '"') out += '"';
        out += c;
      }
      out += '"';
    } else {
      out += f;
    }
  }
  return out + "\n";
}

std::string fmt_num(const json& v, int precision) {
  if (!v.is_number()) return v.is_null() ? "-" : fmt_text(v);
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return format_significant(v.get<double>(), precision);
}

std::string fmt_fixed(const json& v, int decimals) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v.get<double>());
  return buf;
}

std::string fmt_gib(const json& bytes) {
  if (!bytes.is_number()) return "-";
  return fmt_fixed(bytes.get<double>() / (1024.0 * 1024.0 * 1024.0), 2);
}

std::string fmt_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt_num(v, 10);
  return v.dump();
}

std::string fmt_time(const json& t) {
  if (!t.is_number()) return "-";
  const auto tt = static_cast<std::time_t>(t.get<double>());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace hipq::cli
