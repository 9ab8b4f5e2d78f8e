// Job runner factory: the JobRunner a worker process runs its jobs with, by
// the name `hipq worker --engine` and `hipq run --engine` take:
//   "engine"          EngineJobRunner (worker/engine_job_runner.h) on
//                     `backend` ("cpu" | "hip") and `device`;
//   "sleep:DURATION"  SleepEngine (worker/sleep_engine.h), the test double
//                     that only waits (logged as a warning: no images).
// `placement` is the engine runner's (engine/memory_plan.h); the test double
// has no memory to place.
// Errors: InvalidArgument for any other name or a bad duration (naming the
// --engine flag); EngineJobRunner::create's for the backend.
// Thread safety: reentrant.
#pragma once

#include "engine/memory_plan.h"

#include <memory>
#include <string>

#include "base/result.h"
#include "worker/job_runner.h"

namespace hipq::worker {

Result<std::unique_ptr<JobRunner>> make_job_runner(const std::string& engine, const std::string& backend,
                                                   int device,
                                                   engine::Placement placement = engine::Placement::kAuto);

}  // namespace hipq::worker
