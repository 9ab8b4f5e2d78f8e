// Report data: everything the HTML report (report/html_report.h) draws for one
// batch, gathered from the database as one JSON document — the "report-data"
// query kind (coordinator/query_service.h), so a remote coordinator can hand
// it over the wire and the client renders the page.
//
// Shape (docs/statistics.md, "report-data"):
//   {"batch": {id, name, state, manifest, manifest_path, output_root, created_at,
//              finished_at, total, by_state, by_verdict},
//    "workers": [{worker, host, gpu, arch, build, backend, runtime_version, driver_version}],
//    "stats": <stats JSON grouped by gpu>, "runs": [compact run…],
//    "samples": [{gpu, warmth, phase, values: [ms…], of?}], "runs_table"?,
//    "step_traces": [{gpu, warmth, runs, median: [ms per step], low: [...], high: [...]}],
//    "parity": [<parity rows>], "thumbnails": [{job, prompt, seed, repeat, verdict, cosine, gpu, uri}],
//    "thumbnail_errors": n, "generated_at": epoch seconds,
//    "history": [{batch, name, build, runs, time, phases: {phase: median ms}}]}
// History covers the newest 50 batches of the database (not only this one),
// one point per (batch, build), oldest first; `time` is the median run time.
// Thumbnails are read from <output_root>/<png output path> on the machine
// answering the query; a file it cannot read is counted, not fatal.
//
// args: "batch" (default: the newest batch), "thumbnails" (max count,
// default 24, 0 = none), "thumbnail_px" (default 160), "resamples",
// "runs_table" (default 1000: a batch of more runs lists half that many worst
// by parity and half slowest; query/run_table.h).
//
// Bounded memory: the batch is read a page of runs at a time (run_pages.h) and
// reduced as it is read. "runs" lists every run of a batch up to runs_table,
// else the selection, and then "runs_table": {total, shown, cap,
// worst_by_parity, slowest, not_shown} is present. Statistics, samples and
// step traces keep every value up to kReservoirCap (value_reservoir.h) per GPU,
// warmth and phase (and step index), else a fixed-seed uniform sample: a
// "samples" entry then has "of" (the count the values were drawn from), a
// stats phase "sample". The same database gives the same data (but
// generated_at).
// Errors: NotFound for an unknown batch or an empty database;
// InvalidArgument for args of the wrong type.
// Thread safety: as the Database.
#pragma once

#include <nlohmann/json.hpp>

#include "base/result.h"

namespace hipq::db {
class Database;
}

namespace hipq::coordinator::query {

Result<nlohmann::json> build_report_data(db::Database& db, const nlohmann::json& args);

}  // namespace hipq::coordinator::query
