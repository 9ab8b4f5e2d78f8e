// Shared by the monitor's process tests: a coordinator started with
// --metrics-bind 127.0.0.1:0, the address it bound, and reads of the
// database those processes write.
#pragma once

#include <string>
#include <vector>

#include "db/database.h"
#include "db/statement.h"
#include "tests/coordinator/monitor/http_client.h"
#include "tests/coordinator/process_harness.h"

namespace hipq::testing {

inline int64_t db_int(const fs::path& db_path, const std::string& sql) {
  auto db = db::Database::open(db_path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return -1;
  db::Statement s = (*db)->prepare(sql);
  auto row = s.step();
  EXPECT_TRUE(row.ok()) << row.status().ToString() << " in " << sql;
  if (!row.ok() || !*row) return -1;
  return s.column_int64(0);
}

// A coordinator with its monitor on a free loopback port; `addr` gets it.
inline std::unique_ptr<Process> start_monitored_coordinator(const fs::path& dir, std::string* endpoint, HttpAddr* addr,
                                                            std::vector<std::string> extra = {}) {
  const fs::path addr_file = dir / "metrics.addr";
  std::vector<std::string> args = {"--metrics-bind", "127.0.0.1:0", "--metrics-address-file", addr_file.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = start_coordinator(dir, "coord", endpoint, "tcp://127.0.0.1:*", args);
  EXPECT_TRUE(wait_until([&] { return fs::exists(addr_file); }, std::chrono::seconds(10))) << p->err();
  *addr = parse_addr(slurp(addr_file));
  return p;
}

}  // namespace hipq::testing
