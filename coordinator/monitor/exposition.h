// Exposition: the text the monitor serves at /metrics (Prometheus text
// format 0.0.4): the event metrics of Metrics (metrics.h), the loop's
// counters and workers from its snapshot (loop_snapshot.h), and the
// database's figures (db_figures.h), under the names of docs/metrics.md.
// Pure: no I/O; the caller reads the snapshot and the figures.
#pragma once

#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "coordinator/monitor/db_figures.h"
#include "coordinator/monitor/loop_snapshot.h"
#include "coordinator/monitor/metrics.h"

namespace hipq::coordinator::monitor {

// The families built from the snapshot and the figures (`figures` may be
// null when the database could not be read: then only the loop's families
// and hipq_db_read_errors are there).
std::vector<prometheus::MetricFamily> snapshot_families(const LoopSnapshot& snapshot, const DbFigures* figures,
                                                        int64_t db_read_errors);

// Every family (the registry's and snapshot_families), serialized.
std::string render_metrics_text(const Metrics& metrics, const LoopSnapshot& snapshot, const DbFigures* figures,
                                int64_t db_read_errors);

}  // namespace hipq::coordinator::monitor
