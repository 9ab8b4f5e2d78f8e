#include "worker/job_runner_factory.h"

#include <spdlog/spdlog.h>

#include "worker/engine_job_runner.h"
#include "worker/sleep_engine.h"

namespace hipq::worker {

Result<std::unique_ptr<JobRunner>> make_job_runner(const std::string& engine, const std::string& backend,
                                                   int device, engine::Placement placement) {
  if (engine.rfind("sleep", 0) == 0) {
    HIPQ_ASSIGN_OR_RETURN(auto duration, SleepEngine::parse_spec(engine));
    spdlog::warn("worker uses the SleepEngine TEST DOUBLE ({}): no images are generated", engine);
    return std::unique_ptr<JobRunner>(new SleepEngine(duration, device));
  }
  if (engine != "engine") {
    return Status::InvalidArgument("--engine \"" + engine + "\": want engine (the real pipeline) or sleep:DURATION");
  }
  HIPQ_ASSIGN_OR_RETURN(auto runner, EngineJobRunner::create(backend, device, placement));
  return std::unique_ptr<JobRunner>(std::move(runner));
}

}  // namespace hipq::worker
