#include "coordinator/query/run_pages.h"

#include <algorithm>
#include <string>

namespace hipq::coordinator::query {

Status for_each_run_page(db::Database& db, const db::RunFilter& filter,
                         const std::function<Status(std::vector<db::RunRow>& page)>& visit, int64_t page_size) {
  if (page_size < 1) return Status::InvalidArgument("run pages: page size " + std::to_string(page_size) + " is below 1");
  db::RunFilter f = filter;
  int64_t left = filter.limit;  // 0 = no limit
  while (true) {
    f.limit = left > 0 ? std::min(left, page_size) : page_size;
    HIPQ_ASSIGN_OR_RETURN(auto page, db::query_runs(db, f));
    if (page.empty()) return Status::Ok();
    const int64_t last = page.back().job_id;
    const auto got = static_cast<int64_t>(page.size());
    HIPQ_RETURN_IF_ERROR(visit(page));
    if (left > 0) {
      left -= got;
      if (left <= 0) return Status::Ok();
    }
    if (got < f.limit) return Status::Ok();
    f.after_job = last;
  }
}

}  // namespace hipq::coordinator::query
