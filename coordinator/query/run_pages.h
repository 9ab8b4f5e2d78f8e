// Run pages: reads the runs a filter selects a page at a time (keyset paging
// on the job id, db::RunFilter::after_job), so a query over a million runs
// holds one page of rows, never the whole batch.
//
// `visit` gets each page in job id order (runs within a page too); a non-OK
// status from it stops the walk and is returned. The filter's own limit, when
// set, still bounds the total number of runs visited.
//
// Errors: database errors as db/run_queries.h maps them; InvalidArgument for
// a page size below 1.
// Thread safety: as the Database.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "db/run_queries.h"

namespace hipq::coordinator::query {

inline constexpr int64_t kRunPageSize = 5000;

Status for_each_run_page(db::Database& db, const db::RunFilter& filter,
                         const std::function<Status(std::vector<db::RunRow>& page)>& visit,
                         int64_t page_size = kRunPageSize);

}  // namespace hipq::coordinator::query
