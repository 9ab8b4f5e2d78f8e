// The live status page: what the monitor serves at / (HTML) and /api/status
// (JSON) — batches with progress and ETA, workers with their device, running
// job, step and memory, recent failures with their reasons, and the
// step-time distribution so far. status_json() gathers it from the loop's
// snapshot, the database's figures and the step histogram;
// render_status_page() turns that JSON into one self-contained HTML page in
// the report's look (coordinator/report/), every value HTML-escaped (prompts
// and worker names are user data), no script and no external load, reloaded
// by the browser every `refresh_seconds`. The JSON's fields are in
// docs/metrics.md ("Status page"). Pure: no I/O.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "coordinator/monitor/db_figures.h"
#include "coordinator/monitor/loop_snapshot.h"
#include "coordinator/monitor/metrics.h"

namespace hipq::coordinator::monitor {

// `figures` null: the database could not be read (`db_error` says why).
nlohmann::json status_json(const LoopSnapshot& snapshot, const DbFigures* figures,
                           const Metrics::Distribution& steps, const std::string& db_error, double now_unix);

std::string render_status_page(const nlohmann::json& status, int refresh_seconds);

}  // namespace hipq::coordinator::monitor
